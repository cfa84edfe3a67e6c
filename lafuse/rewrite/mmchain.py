"""Matrix-multiplication chain optimization (SystemDS RewriteMatrixMultChainOptimization).

A chain ``A1 %*% A2 %*% ... %*% An`` (n >= 3) whose intermediate products have no other use is
re-parenthesized by the classic O(n^3) dynamic program over the dims p0..pn (Ai is p(i-1) x pi,
cost of a product = p(i-1) * pk * pj multiply-adds). It only fires when every dim is known (at
compile time from literal sizes, at dynamic recompilation from the actual inputs) and the optimal
order is strictly cheaper than the current one. The left-to-right order of the leaves never
changes, so neither does the order in which they are computed.
"""

from __future__ import annotations

from collections.abc import Sequence

from lafuse.hops.hop import MATRIX, Hop, walk
from lafuse.hops.program import Dag
from lafuse.rewrite.core import Ctx, rule

Tree = int | tuple["Tree", "Tree"]  # leaf index, or (left, right) product
# The DP is O(n^3) in the chain's length: 100 leaves cost ~0.1 s here, a 5,000-statement chain
# (X1 = X0 %*% A; X2 = X1 %*% A; ...) would take hours. Longer chains keep their written order.
MAX_DP_LEAVES = 100


def chain_order(dims: Sequence[int]) -> tuple[int, list[list[int]]]:
    """Minimal cost and split table of the chain with dims ``p0..pn`` (n = len(dims) - 1 matrices).

    ``split[i][j]`` is the k where the optimal product of matrices i..j (0-based) splits into
    (i..k)(k+1..j). Ties keep the leftmost split.
    """
    n = len(dims) - 1
    if n < 1:
        raise ValueError("a chain needs at least one matrix")
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            best = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if best < 0 or c < best:
                    best, split[i][j] = c, k
            cost[i][j] = best
    return cost[0][n - 1], split


def optimal_tree(split: list[list[int]], i: int, j: int) -> Tree:
    if i == j:
        return i
    k = split[i][j]
    return (optimal_tree(split, i, k), optimal_tree(split, k + 1, j))


def tree_cost(tree: Tree, dims: Sequence[int]) -> tuple[int, int, int]:
    """(cost, first leaf, last leaf) of a parenthesization."""
    if isinstance(tree, int):
        return 0, tree, tree
    lc, li, lk = tree_cost(tree[0], dims)
    rc, ri, rj = tree_cost(tree[1], dims)
    assert lk + 1 == ri, "leaves must be consecutive"
    return lc + rc + dims[li] * dims[lk + 1] * dims[rj + 1], li, rj


def render(tree: Tree, names: Sequence[str]) -> str:
    """``((A B) C)`` style rendering of a parenthesization."""
    if isinstance(tree, int):
        return names[tree]
    return f"({render(tree[0], names)} {render(tree[1], names)})"


# ------------------------------------------------------------------ the DAG rule

def _is_mm(h: Hop) -> bool:
    return h.kind == "matmult" and h.op == "%*%" and len(h.inputs) == 2


def extract_chain(root: Hop, ctx: Ctx) -> tuple[Tree, list[Hop]]:
    """The chain below ``root``: its current parenthesization over leaf indices, and the leaves.
    Inner products are expanded only when ``root``'s chain is their only use."""
    leaves: list[Hop] = []

    def rec(h: Hop, top: bool) -> Tree:
        if _is_mm(h) and (top or ctx.single_use(h)):
            left = rec(h.inputs[0], False)
            right = rec(h.inputs[1], False)
            return (left, right)
        leaves.append(h)
        return len(leaves) - 1

    return rec(root, True), leaves


def _inner(h: Hop, ctx: Ctx) -> bool:
    """``h`` is an interior product of a larger chain (its only use is another product)."""
    ps = ctx.parents(h)
    return _is_mm(h) and ctx.single_use(h) and _is_mm(ps[0])


@rule("optimize_mmchain", scope="dag", phase="dynamic")
def optimize_mmchain(dag: Dag, ctx: Ctx) -> bool:
    """Re-parenthesize matrix-multiply chains by dynamic programming over known dims.

    A: 10x1000, B: 1000x10, v: 10x1: ``(A %*% B) %*% v`` (200000 flops) -> ``A %*% (B %*% v)`` (20000).
    """
    # deferred: driver -> rules -> this module (a cycle inside rewrite/)
    from lafuse.rewrite.driver import replace

    changed = False
    for h in reversed(walk(dag.roots)):  # users before inputs: outermost chains first
        if not ctx.reachable(h) or not _is_mm(h) or _inner(h, ctx):
            continue
        tree, leaves = extract_chain(h, ctx)
        if not 3 <= len(leaves) <= MAX_DP_LEAVES or not all(x.dt == MATRIX and x.dims_known for x in leaves):
            continue
        if any(leaves[i].cols != leaves[i + 1].rows for i in range(len(leaves) - 1)):
            continue
        dims = [leaves[0].rows] + [x.cols for x in leaves]
        best, split = chain_order(dims)
        cur, _, _ = tree_cost(tree, dims)
        if best >= cur:
            continue
        new = _build(optimal_tree(split, 0, len(leaves) - 1), leaves, ctx, h)
        replace(dag, h, new, ctx)
        changed = True
    return changed


def _build(tree: Tree, leaves: list[Hop], ctx: Ctx, like: Hop) -> Hop:
    if isinstance(tree, int):
        return leaves[tree]
    return ctx.matmult(_build(tree[0], leaves, ctx, like), _build(tree[1], leaves, ctx, like), like)
