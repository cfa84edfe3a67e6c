"""The matrix-chain dynamic program against brute force over every parenthesization."""

from __future__ import annotations

import itertools
import random

import pytest

from lafuse.rewrite.mmchain import chain_order, optimal_tree, render, tree_cost


def all_trees(i: int, j: int):
    if i == j:
        yield i
        return
    for k in range(i, j):
        for left in all_trees(i, k):
            for right in all_trees(k + 1, j):
                yield (left, right)


def brute_force(dims: list[int]) -> int:
    n = len(dims) - 1
    return min(tree_cost(t, dims)[0] for t in all_trees(0, n - 1))


@pytest.mark.parametrize("seed", range(200))
def test_dp_matches_brute_force(seed: int):
    rng = random.Random(seed)
    n = rng.randint(1, 7)
    dims = [rng.choice([1, 2, 3, 5, 10, 17, 100, 1000]) for _ in range(n + 1)]
    best, split = chain_order(dims)
    assert best == brute_force(dims)
    tree = optimal_tree(split, 0, n - 1)
    cost, first, last = tree_cost(tree, dims)
    assert (cost, first, last) == (best, 0, n - 1)


def test_textbook_example():
    # CLRS 15.2: 30x35, 35x15, 15x5, 5x10, 10x20, 20x25 -> 15125 with ((A1 (A2 A3)) ((A4 A5) A6))
    dims = [30, 35, 15, 5, 10, 20, 25]
    best, split = chain_order(dims)
    assert best == 15125
    assert render(optimal_tree(split, 0, 5), ["A1", "A2", "A3", "A4", "A5", "A6"]) == "((A1 (A2 A3)) ((A4 A5) A6))"


def test_vector_at_the_end_goes_first():
    best, split = chain_order([10, 1000, 10, 1])
    assert render(optimal_tree(split, 0, 2), ["A", "B", "v"]) == "(A (B v))"
    assert best == 1000 * 10 + 10 * 1000


def test_leaf_order_is_preserved():
    for dims in itertools.product([1, 7, 40], repeat=5):
        _, split = chain_order(list(dims))
        tree = optimal_tree(split, 0, 3)
        assert render(tree, ["a", "b", "c", "d"]).replace("(", "").replace(")", "").split() == ["a", "b", "c", "d"]


def test_single_matrix_and_errors():
    assert chain_order([3, 4]) == (0, [[0]])
    with pytest.raises(ValueError):
        chain_order([3])
