"""The format-choice searches of paper 002 (plan.layout): the tree DP and the frontier DP return the
brute-force optimum on random trees and DAGs with random catalogues, and on the paper's scale-1
benchmark graphs; every annotation they return is type-correct and costs what they say."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse.plan.layout import (
    Catalogue,
    Graph,
    Impl,
    MType,
    Problem,
    Transform,
    brute_force,
    explain,
    frontier_dp,
    optimize,
    render,
    tree_dp,
)
from lafuse.plan.layout.blocked import Cluster, catalogue, chain_graph, formats

M = MType(100, 100)


def _random_problem(seed: int, tree: bool) -> Problem:
    """A random graph of 1-9 operations (arity 1-3; in a DAG a vertex may be read twice by one
    operation) over 1-3 sources, and a random catalogue over 2-4 formats: implementations that take
    some input formats and not others, transformations between some pairs, a format that cannot hold
    the type."""
    rng = np.random.default_rng(seed)
    P = int(rng.integers(2, 5))
    n_ops = int(rng.integers(1, 10 if P < 4 else 7))
    fmts = tuple(f"f{i}" for i in range(P))
    g = Graph()
    pool = [g.source(M, fmts[int(rng.integers(P))], f"s{i}") for i in range(int(rng.integers(1, 4)))]
    arities = {"u": 1, "b": 2, "t": 3}
    for k in range(n_ops):
        if tree:
            op = str(rng.choice([o for o, a in arities.items() if a <= len(pool)]))
            picks = [int(i) for i in rng.choice(len(pool), arities[op], replace=False)]
            args = [pool[i] for i in picks]
            pool = [p for i, p in enumerate(pool) if i not in picks]
        else:
            op = str(rng.choice(list(arities)))
            args = [int(rng.integers(len(g.vertices))) for _ in range(arities[op])]
        pool.append(g.add(op, M, *args, name=f"v{k}"))
    impls = []
    for op, n in arities.items():
        for j in range(int(rng.integers(1, 4))):
            table = {}
            for p_in in np.ndindex(*(P,) * n):
                if rng.random() < 0.6:
                    table[tuple(fmts[p] for p in p_in)] = (fmts[int(rng.integers(P))], float(rng.integers(0, 20)))
            impls.append(Impl(f"{op}{j}", op, n, lambda ms, names, m, t=table: t.get(names, (None, 0.0))[0],
                              lambda ms, names, m, t=table: t[names][1]))
    transforms = []
    for a in range(P):
        for b in range(P):
            if a != b and rng.random() < 0.5:
                c = float(rng.integers(0, 15))
                transforms.append(Transform(f"t{a}{b}", lambda m, f, a=fmts[a], b=fmts[b]: b if f == a else None,
                                            lambda m, f, c=c: c))
    sources = {v.fmt for v in g.vertices if v.op == "source"}
    banned = fmts[int(rng.integers(P))] if rng.random() < 0.3 else None
    holds = (lambda m, f: f != banned or f in sources) if banned else (lambda m, f: True)
    return Problem(g, Catalogue(fmts, tuple(impls), tuple(transforms), holds))


def _same(a: float, b: float) -> bool:
    return (a == b == math.inf) or (a < math.inf and b < math.inf and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9))


def _check(pb: Problem, got, want) -> None:
    assert _same(got.cost, want.cost), (got.cost, want.cost)
    if got.feasible:  # the annotation is type-correct and costs what the search says
        assert math.isclose(pb.evaluate(got), got.cost, rel_tol=1e-9, abs_tol=1e-9)
        assert set(got.impl) == set(pb.graph.operations())


@settings(max_examples=110, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_tree_dp_finds_the_brute_force_optimum_on_random_trees(seed):
    pb = _random_problem(seed, tree=True)
    assert pb.graph.is_tree()
    want = brute_force(pb)
    _check(pb, tree_dp(pb), want)
    _check(pb, frontier_dp(pb), want)  # (a tree is a DAG too)


@settings(max_examples=110, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_frontier_dp_finds_the_brute_force_optimum_on_random_dags(seed):
    pb = _random_problem(seed, tree=False)
    _check(pb, frontier_dp(pb), brute_force(pb))


def test_random_problems_cover_what_the_searches_must_handle():
    """The generator's 220 problems above include shared results, an operation reading one vertex
    twice, infeasible problems and chains of transformations (else the property tests prove less)."""
    seen = {"shared": 0, "twice": 0, "infeasible": 0, "chain": 0}
    for seed in range(220):
        pb = _random_problem(seed, tree=seed % 2 == 0)
        g = pb.graph
        seen["shared"] += not g.is_tree()
        seen["twice"] += any(len(set(v.args)) < len(v.args) for v in g.vertices)
        ann = frontier_dp(pb)
        seen["infeasible"] += not ann.feasible
        seen["chain"] += any(len(c) > 1 for c in ann.transforms.values())
    assert all(n >= 5 for n in seen.values()), seen


@pytest.mark.parametrize("shape", ["tree", "dag1", "dag2"])
def test_the_dps_find_the_brute_force_optimum_on_the_papers_scale_1_graphs(shape):
    pb = Problem(chain_graph(shape, 1), catalogue("block"))
    want = brute_force(pb)
    assert want.feasible
    _check(pb, optimize(pb), want)
    _check(pb, frontier_dp(pb), want)
    if shape == "tree":
        _check(pb, tree_dp(pb), want)


@pytest.mark.parametrize("shape", ["tree", "dag1", "dag2"])
def test_scale_4_graphs_with_all_formats_get_a_type_correct_plan(shape):
    g = chain_graph(shape, 4)
    pb = Problem(g, catalogue("all"))
    ann = optimize(pb)
    assert ann.feasible and math.isclose(pb.evaluate(ann), ann.cost, rel_tol=1e-9)
    assert len(ann.impl) == len(g.operations()) == 20
    # a scale's graph repeats, so its cost is about four times scale 1's (the links change a little)
    one = optimize(Problem(chain_graph(shape, 1), catalogue("all"))).cost
    assert 3.5 * one < ann.cost < 4.5 * one


def test_a_dearer_format_is_avoided_only_when_it_pays():
    """One product of two 20,000 x 20,000 matrices stored in one block each: with a single worker's
    memory too small for the result, the plan must re-block; with room, it stays (or pays to move)."""
    g = Graph()
    m = MType(20000, 20000)
    a, b = g.source(m, "single", "A"), g.source(m, "single", "B")
    g.add("matmul", m, a, b, name="C")
    roomy = optimize(Problem(g, catalogue("block", Cluster(worker_bytes=64e9))))
    tight = optimize(Problem(g, catalogue("block", Cluster(worker_bytes=1e9))))
    assert roomy.feasible and tight.feasible
    assert tight.fmt[2] != "single" and tight.transforms[(2, 0)] and tight.transforms[(2, 1)]
    assert roomy.cost <= tight.cost


def test_catalogue_sizes_follow_the_paper():
    assert (len(formats("block")), len(formats("strip")), len(formats("all"))) == (10, 16, 32)


def test_errors_say_what_is_wrong():
    g = Graph()
    s = g.source(M, "f0")
    g.add("u", M, s)
    g.add("u", M, s)  # s used twice: not a tree
    cat = Catalogue(("f0",), (Impl("u0", "u", 1, lambda ms, n, m: "f0", lambda ms, n, m: 1.0),), ())
    with pytest.raises(ValueError, match="not tree-shaped"):
        tree_dp(Problem(g, cat))
    assert frontier_dp(Problem(g, cat)).cost == 2.0
    bad = Graph()
    bad.source(M, "nope")
    with pytest.raises(ValueError, match="not a format of the catalogue"):
        Problem(bad, cat)
    with pytest.raises(ValueError, match="not yet in the graph"):
        Graph().add("u", M, 3)
    long = Graph()
    v = long.source(M, "f0")
    for _ in range(65):
        v = long.add("u", M, v)
    with pytest.raises(ValueError, match="brute force is for tiny graphs"):
        brute_force(Problem(long, cat))
    assert tree_dp(Problem(long, cat)).cost == 65.0 == frontier_dp(Problem(long, cat)).cost
    # a frontier of many results that share an ancestor, over many formats: a clear refusal, not memory
    fmts16 = tuple(f"f{i}" for i in range(16))
    wide = Catalogue(fmts16, (Impl("u-any", "u", 1, lambda ms, n, m: n[0], lambda ms, n, m: 1.0),
                              Impl("b-any", "b", 2, lambda ms, n, m: n[0], lambda ms, n, m: 1.0)), ())
    star = Graph()
    s0 = star.source(M, "f0")
    leaves = [star.add("u", M, s0) for _ in range(6)]
    star.add("b", M, star.add("b", M, leaves[0], leaves[1]), leaves[2])
    star.add("b", M, star.add("b", M, leaves[3], leaves[4]), leaves[5])
    with pytest.raises(ValueError, match="too entangled for the frontier DP"):
        frontier_dp(Problem(star, wide))


def test_a_chain_of_transformations_beats_a_dear_direct_one():
    fmts = ("a", "b", "c")
    ts = (Transform("ab", lambda m, f: "b" if f == "a" else None, lambda m, f: 1.0),
          Transform("bc", lambda m, f: "c" if f == "b" else None, lambda m, f: 1.0),
          Transform("ac", lambda m, f: "c" if f == "a" else None, lambda m, f: 5.0))
    impl = Impl("u-on-c", "u", 1, lambda ms, n, m: "c" if n == ("c",) else None, lambda ms, n, m: 0.5)
    g = Graph()
    g.add("u", M, g.source(M, "a"))
    pb = Problem(g, Catalogue(fmts, (impl,), ts))
    ann = optimize(pb)
    assert ann.cost == 2.5 and ann.transforms[(1, 0)] == ("ab", "bc")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_explained_rows_add_up_and_runners_up_cost_no_less(seed):
    """Each operation's row: its cost from the catalogue, the rows summing to the plan's cost; the
    runner-up a different implementation whose best plan costs no less (exactly: brute force with the
    chosen implementation banned agrees)."""
    pb = _random_problem(seed, tree=seed % 2 == 0)
    ann = optimize(pb)
    if not ann.feasible:
        return
    rows = explain(pb, ann)
    assert math.isclose(sum(r.cost for r in rows), ann.cost, rel_tol=1e-9, abs_tol=1e-9)
    for r in rows:
        assert r.impl == ann.impl[r.vertex] and r.out == ann.fmt[r.vertex]
        if r.runner_up is not None:
            other, extra = r.runner_up
            assert other != r.impl and extra >= -1e-9
            banned = Problem(pb.graph, pb.cat, {r.vertex: frozenset({r.impl})})
            assert math.isclose(brute_force(banned).cost, ann.cost + extra, rel_tol=1e-9, abs_tol=1e-9)
    assert render(rows).count("\n") == len(rows) - 1


def test_explain_on_the_papers_dag2_names_each_product():
    pb = Problem(chain_graph("dag2", 1), catalogue("block"))
    ann = optimize(pb)
    text = render(explain(pb, ann))
    for name in ("T1_1", "T2_1", "T3_1", "O1_1", "O2_1"):
        assert name + ": mm-" in text
    only = Catalogue(("f0",), (Impl("u0", "u", 1, lambda ms, n, m: "f0", lambda ms, n, m: 1.0),), ())
    g = Graph()
    g.add("u", M, g.source(M, "f0"), name="x")
    (row,) = explain(Problem(g, only), optimize(Problem(g, only)))
    assert row.runner_up is None and "no other implementation" in render([row])
