"""Alternative plans of a sum-product plan and their translation out to HOPs (paper 001 §3.2).

A term's factors are joined pairwise in the order of a join tree; every enumerated tree is one
plan. Before each join, an index that neither the rest of the plan nor the output needs is summed
out of the operand that alone holds it — the distributive law ``Σ_l w_ij h_jl = w_ij Σ_l h_jl``,
i.e. aggregation push-down; across a join, an index that only the join needs is summed by it (a
matrix multiply). The trees are all the unordered binary trees over the factors (join ordering); a
join whose result would hold three indices has no HOP, so trees needing one are dropped. For
``sum(W %*% H)`` this finds ``sum(t(colSums(W)) * rowSums(H))``; for ``(X %*% Y) %*% v`` it finds
``X %*% (Y %*% v)``.

Values: the rewritten plans form the same products and sums in another order and grouping, as a
reordered matrix-multiply chain does. They equal the original for finite values and propagate NaN
alike; a ±Inf input can make a rewritten plan ±Inf where the original formed ``Inf * 0`` (NaN): the
original multiplied an Inf by every cell of a row that held a 0, the rewritten one multiplies it by
the row's sum.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from lafuse.hops.hop import DOUBLE, MATRIX, SCALAR, Hop
from lafuse.rewrite.core import Ctx
from lafuse.rewrite.sumproduct.ir import Index, Keep, Region, Term

MAX_TREE_FACTORS = 5  # (2n-3)!! trees: 105 at 5; a longer product keeps its written order only


@dataclass(frozen=True)
class T:
    """A relation while a plan is translated out: its HOP and the indices of its (row, col)."""

    hop: Hop
    row: Index
    col: Index

    @property
    def ind(self) -> set[str]:
        return {i for i in (self.row, self.col) if i is not None}


def cells(indices: Iterable[str], extents: dict[str, int]) -> float:
    """The cells of a relation over ``indices``: the product of their extents."""
    out = 1.0
    for i in indices:
        out *= extents.get(i, 1)
    return out


def trees(n: int) -> Iterator[object]:
    """Every unordered binary tree over leaves 0..n-1 (a leaf is its int, a join a pair)."""

    def rec(items: tuple[int, ...]) -> Iterator[object]:
        if len(items) == 1:
            yield items[0]
            return
        first, rest = items[0], items[1:]  # (first stays left: each unordered split once)
        for k in range(1, len(rest) + 1):
            for right in itertools.combinations(rest, k):
                left = (first,) + tuple(x for x in rest if x not in right)
                for a in rec(left):
                    for b in rec(right):
                        yield (a, b)

    yield from rec(tuple(range(n)))


def leaves(tree: object) -> list[int]:
    if isinstance(tree, int):
        return [tree]
    assert isinstance(tree, tuple)
    return [x for t in tree for x in leaves(t)]


def same_tree(a: object, b: object) -> bool:
    """Equal as unordered trees."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    assert isinstance(a, tuple) and isinstance(b, tuple)
    return (same_tree(a[0], b[0]) and same_tree(a[1], b[1])) or (same_tree(a[0], b[1]) and same_tree(a[1], b[0]))


class Out:
    """Builds the HOPs of one plan."""

    def __init__(self, ctx: Ctx, like: Hop, extents: dict[str, int], push: bool = True) -> None:
        self.ctx = ctx
        self.like = like
        self.extents = extents
        # sum an index out before a join where it can (aggregation push-down), or after the join
        # where that keeps the join element-wise (one fusible pass: sum(X * v), not sum(rowSums(X) * v))
        self.push = push
        self.pushed = False  # an aggregation ran below a join

    def mk(self, op: str, kind: str, ins: list[Hop], dt: str = MATRIX) -> Hop:
        params = {"slots": ("target",)} if kind in ("agg_unary", "reorg") else None
        return self.ctx.mk(op, kind, ins, dt, DOUBLE, self.like, params)

    def _cells(self, t: T) -> float:
        return cells(t.ind, self.extents)

    def agg(self, t: T, drop: set[str]) -> T:
        drop = drop & t.ind
        if not drop:
            return t
        if drop == t.ind:
            return T(self.mk("sum", "agg_unary", [t.hop], SCALAR), None, None)
        if t.row in drop:
            return T(self.mk("colSums", "agg_unary", [t.hop]), None, t.col)
        return T(self.mk("rowSums", "agg_unary", [t.hop]), t.row, None)

    def orient(self, t: T, row: Index, col: Index) -> T:
        """``t`` as a (row, col) relation, transposed if it is the other way round."""
        if (t.row, t.col) == (row, col):
            return t
        assert (t.row, t.col) == (col, row), (t, row, col)
        return T(self.mk("t", "reorg", [t.hop]), row, col)

    def diag_read(self, t: T) -> T:
        """A factor read on its diagonal (row == col): ``diag(X)`` as a column vector."""
        if t.row is not None and t.row == t.col:
            return T(self.mk("diag", "reorg", [t.hop]), t.row, None)
        return t

    def join(self, a: T, b: T, needed: set[str]) -> T | None:
        """``a * b`` joined on their common indices, the ones ``needed`` does not name summed."""
        if not self.push:
            if len(a.ind | b.ind) > 2:  # sum the smaller operand's own indices only, if that will do
                small, big = sorted((a, b), key=self._cells)
                self.pushed |= bool(small.ind - big.ind - needed)
                small = self.agg(small, small.ind - big.ind - needed)
                a, b = big, small
            if len(a.ind | b.ind) <= 2:
                return self.agg(self.elementwise(a, b), (a.ind | b.ind) - needed)
        if (a.ind ^ b.ind) - needed:
            self.pushed = True
        a = self.agg(a, a.ind - b.ind - needed)
        b = self.agg(b, b.ind - a.ind - needed)
        summed = (a.ind & b.ind) - needed
        union = a.ind | b.ind
        if len(union - summed) > 2:
            return None
        if len(summed) == 1 and len(union) > len(a.ind & b.ind):
            (k,) = summed
            x: Index = next(iter(a.ind - {k}), None)
            y: Index = next(iter(b.ind - {k}), None)
            if x is None or y is None or x != y:
                left, right = self.orient(a, x, k), self.orient(b, k, y)
                return T(self.mk("%*%", "matmult", [left.hop, right.hop]), x, y)
        if len(union) > 2:
            return None
        return self.agg(self.elementwise(a, b), summed)

    def elementwise(self, a: T, b: T) -> T:
        """``a * b`` over the union of their indices (<= 2), a vector broadcast over a matrix."""
        if len(b.ind) > len(a.ind):
            a, b = b, a
        if not b.ind:
            return T(self.mk("*", "binary", [a.hop, b.hop], a.hop.dt), a.row, a.col)
        if len(a.ind) == 1 and b.ind != a.ind:  # outer product of two vectors
            (x,), (y,) = a.ind, b.ind
            return T(self.mk("%*%", "matmult", [self.orient(a, x, None).hop, self.orient(b, None, y).hop]), x, y)
        if a.ind == b.ind:
            b = self.orient(b, a.row, a.col)
        else:
            (i,) = b.ind
            b = self.orient(b, i, None) if i == a.row else self.orient(b, None, i)
        return T(self.mk("*", "binary", [a.hop, b.hop]), a.row, a.col)

    def finish(self, t: T, keep: Keep) -> T | None:
        """``t`` as the plan's output: summed down to ``keep``, oriented, a 1x1 product as a scalar."""
        t = self.agg(t, t.ind - set(keep))
        if keep[0] is not None and keep[0] == keep[1]:  # diag(v): a diagonal matrix out
            if t.ind != {keep[0]}:
                return None
            v = self.orient(t, keep[0], None)
            return T(self.mk("diag", "reorg", [v.hop]), keep[0], keep[0])
        if t.ind != {i for i in keep if i is not None}:
            return None  # an output index no factor holds: a broadcast this plan cannot express
        if keep == (None, None) and t.hop.dt != self.like.dt:
            if t.hop.dt == SCALAR:  # a 1 x 1 matrix out: as written
                return None
            return T(self.mk("sum", "agg_unary", [t.hop], SCALAR), None, None)
        return self.orient(t, *keep)

    def scale(self, t: T, scalars: list[Hop], coef: float) -> T:
        for s in scalars:
            t = T(self.mk("*", "binary", [t.hop, s], t.hop.dt), t.row, t.col)
        if coef != 1.0:
            lit = self.ctx.lit(int(coef) if float(coef).is_integer() and abs(coef) < 2**53 else coef, self.like)
            t = T(self.mk("*", "binary", [t.hop, lit], t.hop.dt), t.row, t.col)
        return t


def term_hop(out: Out, term: Term, tree: object) -> T | None:
    """The HOPs of ``term`` joined in the order of ``tree`` (over its non-scalar factors)."""
    rel = [out.diag_read(T(f.hop, f.row, f.col)) for f in term.factors if f.indices]
    scalars = [f.hop for f in term.factors if not f.indices]
    if not rel:  # scalars and constants only: left as written (its value, or its allocation's error)
        return None
    # a run-time scalar multiplies a relation before anything is summed, as written: sum(λ * X) and
    # λ * sum(X) differ for λ = Inf and a zero in X; only finite literals (the coefficient) move
    rel[0] = out.scale(rel[0], scalars, 1.0)
    keep = {i for i in term.keep if i is not None}

    def rec(node: object, rest: set[str]) -> T | None:
        if isinstance(node, int):
            return rel[node]
        assert isinstance(node, tuple)
        lhs, rhs = node
        ri = {i for k in leaves(rhs) for i in rel[k].ind}
        li = {i for k in leaves(lhs) for i in rel[k].ind}
        a = rec(lhs, rest | ri)
        b = rec(rhs, rest | li) if a is not None else None
        if a is None or b is None:
            return None
        return out.join(a, b, rest)

    got = rec(tree, keep)
    if got is None:
        return None
    fin = out.finish(got, term.keep)
    return None if fin is None else out.scale(fin, [], term.coef)


@dataclass
class Plan:
    """One alternative: its root HOP, its estimated work, the rewrites it applies, its recipe."""

    hop: Hop
    work: float
    rewrites: tuple[str, ...]
    recipe: tuple = ()


def op_work(h: Hop) -> float:
    """Cells an operator touches (a matrix multiply: its multiply-adds): the plans' first ranking,
    before the cost model (Ctx.cost) weighs the few best with fusion."""
    def hop_cells(x: Hop) -> float:
        return float(max(x.rows, 1) * max(x.cols, 1)) if x.dt == MATRIX else 1.0

    if h.kind == "matmult":
        a, b = h.inputs
        return hop_cells(a) * float(max(b.cols, 1))
    return max([hop_cells(h)] + [hop_cells(x) for x in h.inputs if h.kind != "rix"])


def work(root: Hop, mark: int) -> float:
    """op_work summed over the HOPs under ``root`` created after id ``mark`` (a plan's own): the walk
    stops at older HOPs (a plan's leaves), whose inputs may be a whole program's DAG."""
    total, seen, stack = 0.0, set(), [root]
    while stack:
        h = stack.pop()
        if h.id <= mark or h.id in seen or h.is_literal:
            continue
        seen.add(h.id)
        total += op_work(h)
        stack.extend(h.inputs)
    return total


def structure(h: Hop, mark: int, inside: frozenset[int] = frozenset()) -> object:
    """A plan's HOPs as a nested tuple: equal plans, equal keys. HOPs from before ``mark`` are leaves
    by id, except the ones ``inside`` (a written region's own, to compare it with its plans)."""
    if h.is_literal:
        return ("lit", h.value)
    if h.id <= mark and h.id not in inside:
        return h.id
    keys = [structure(x, mark, inside) for x in h.inputs]
    if h.op in ("*", "+") and h.kind == "binary":  # (commutative: X * v is v * X)
        keys.sort(key=repr)
    return (h.op, tuple(keys))


Recipe = tuple[tuple[object, bool], ...]  # per term: its join tree and whether aggregations push down


def join_size(term: Term, tree: object, extents: dict[str, int], reread: bool = True) -> float:
    """Cells of the joins of ``tree`` with every index summed as soon as nothing else needs it (twice
    where an aggregation, not a matrix multiply, sums a join's result, unless not ``reread``): the
    classic join-ordering cost, which ranks a term's trees before any HOP is built."""
    rel = [set(f.indices) for f in term.factors if f.indices]
    keep = {i for i in term.keep if i is not None}

    def rec(node: object, needed: set[str]) -> tuple[set[str], float]:
        if isinstance(node, int):
            return set(rel[node]), 0.0
        assert isinstance(node, tuple)
        lhs, rhs = node
        li = {i for k in leaves(lhs) for i in rel[k]}
        ri = {i for k in leaves(rhs) for i in rel[k]}
        a, ca = rec(lhs, needed | ri)
        b, cb = rec(rhs, needed | li)
        for x, y in ((a, b), (b, a)):  # an index only one side holds and nothing needs: summed first
            lone = x - y - needed
            if lone:
                ca += cells(x, extents)
                x -= lone
        size = cells(a | b, extents)
        summed = (a | b) - needed
        if reread and summed and not (len(a | b) == 3 and len(summed) == 1):
            size *= 2  # (not a matrix multiply: an aggregation reads the join's result again)
        return (a | b) & needed, ca + cb + size

    return rec(tree, keep)[1]


MAX_TREES_BUILT = 4  # per term, the trees of least join size that are built and ranked by work


def least_tree_size(term: Term, extents: dict[str, int]) -> float:
    """The least ``join_size(..., reread=False)`` over all join trees of ``term``'s relations, by dynamic
    programming over subsets of relations (the indices a subtree must keep are the output's and the
    ones outside it, so a subset's best tree does not depend on the rest): 3^n / 2 steps instead of
    (2n-3)!! trees."""
    rel = [f.indices for f in term.factors if f.indices]
    names = sorted({i for r in rel for i in r})
    bit = {i: 1 << k for k, i in enumerate(names)}
    rmask = [sum(bit[i] for i in set(r)) for r in rel]
    keep = sum(bit.get(i, 0) for i in {i for i in term.keep if i is not None})
    n = len(rel)
    full = (1 << n) - 1
    ind = [0] * (full + 1)  # indices the relations of a subset hold
    for s in range(1, full + 1):
        low = s & -s
        ind[s] = ind[s ^ low] | rmask[low.bit_length() - 1]
    sizes: dict[int, float] = {}

    def size(m: int) -> float:
        if m not in sizes:
            sizes[m] = cells([i for i in names if m & bit[i]], extents)
        return sizes[m]

    best = [0.0] * (full + 1)
    res = [0] * (full + 1)  # indices a subset's join result keeps
    for s in range(1, full + 1):
        needed = keep | ind[full ^ s]
        if s & (s - 1) == 0:
            res[s] = ind[s]
            continue
        low = s & -s
        top = float("inf")
        a = (s - 1) & s
        while a:  # (each split once: the lowest relation stays in a)
            if a & low:
                b = s ^ a
                ra, rb = res[a], res[b]
                cost = best[a] + best[b]
                lone = ra & ~rb & ~needed  # (a lone relation's own index: summed before the join)
                if lone:
                    cost, ra = cost + size(ra), ra & ~lone
                lone = rb & ~ra & ~needed
                if lone:
                    cost, rb = cost + size(rb), rb & ~lone
                top = min(top, cost + size(ra | rb))
            a = (a - 1) & s
        best[s] = top
        res[s] = ind[s] & needed
    return best[full]


def least_join_size(region: Region) -> float:
    """A lower bound of any plan's work (op_work summed over the HOPs a plan builds). Each join is an
    operator touching at least the cells of its indices' union (an element-wise product, a matrix
    multiply of any shape, an outer product), every plan joins each term's relations by some tree,
    and an index only one relation holds is summed out of it first, reading it. Around the joins,
    every plan ``term_hop`` builds has the same operators, each counted at the least cells it can
    touch: a lone factor's aggregation reads it, a run-time scalar multiplies the first relation, a
    coefficient multiplies the term's output, each further term is added to the output. What two
    operators of a plan may share (equal HOPs are one: a relation read twice, in one term or two) is
    not counted: equal terms count once, and a term holding a relation another factor also holds
    counts no joins. (The bound decides which regions are planned at all: a region whose written
    form no plan can undercut is not built, the rule's main cost at every recompilation.)"""
    ext = region.extents
    terms: dict[tuple, Term] = {}
    for _, t in region.plan.terms:
        terms.setdefault((tuple(sorted(f.hop.id for f in t.factors)), t.keep), t)
    uses = Counter(f.hop.id for t in terms.values() for f in t.factors)
    total = 0.0
    for term in terms.values():
        rel = [f for f in term.factors if f.indices]
        n = len(rel)
        if not n:
            continue
        keep = {i for i in term.keep if i is not None}
        if all(uses[f.hop.id] == 1 for f in term.factors):
            if 1 < n <= MAX_TREE_FACTORS:
                total += least_tree_size(term, ext)
            elif n > MAX_TREE_FACTORS and isinstance(term.tree, tuple):  # (its written tree only)
                total += join_size(term, term.tree, ext, reread=False)
            elif n == 1 and set(rel[0].indices) - keep:
                total += cells(set(rel[0].indices), ext)
            total += (len(term.factors) - n) * cells(set(rel[0].indices), ext)
        total += cells(keep, ext) if term.coef != 1.0 else 0.0
    if len(region.plan.terms) > 1:
        total += (len(region.plan.terms) - 1) * cells({i for i in region.plan.terms[0][1].keep if i is not None}, ext)
    return total


def _term_plans(region: Region, term: Term, ctx: Ctx, mark: int) -> list[tuple[float, object, bool, T]]:
    """The distinct plans of one term: (work, tree, push, relation), the least work first."""
    n = sum(1 for f in term.factors if f.indices)
    candidates = list(trees(n)) if 0 < n <= MAX_TREE_FACTORS else [term.tree if term.tree is not None else 0]
    if len(candidates) > MAX_TREES_BUILT:
        candidates.sort(key=lambda t: join_size(term, t, region.extents))
        candidates = candidates[:MAX_TREES_BUILT]
    ranked = []
    distinct: set[object] = set()
    for tree in candidates:
        for push in (True, False) if n > 1 else (True,):
            got = term_hop(Out(ctx, region.root, region.extents, push), term, tree if n else 0)
            key = None if got is None else structure(got.hop, mark)
            if got is not None and key not in distinct:
                distinct.add(key)
                ranked.append((work(got.hop, mark), tree, push, got))
    ranked.sort(key=lambda r: r[0])  # (stable: equal work keeps the enumeration order)
    return ranked


def build(region: Region, ctx: Ctx, mark: int, recipe: Recipe) -> Plan | None:
    """The plan of ``region`` its ``recipe`` names (a decision made before on the same region)."""
    hops, names = [], set(region.applied)
    for (_, term), (tree, push) in zip(region.plan.terms, recipe):
        n = sum(1 for f in term.factors if f.indices)
        out = Out(ctx, region.root, region.extents, push)
        got = term_hop(out, term, tree if n else 0)
        if got is None:
            return None
        hops.append(got.hop)
        if out.pushed:
            names.add("aggregation push-down")
        if term.tree is not None and not isinstance(term.tree, int) and not same_tree(term.tree, tree):
            names.add("join ordering")
    hop = _combine(ctx, region, hops)
    return Plan(hop, work(hop, mark), tuple(sorted(names)), recipe)


def alternatives(region: Region, ctx: Ctx, mark: int, limit: int = 4) -> list[Plan]:
    """Up to ``limit`` plans of the region, the least work first: per term, its join trees ranked by
    work; plan k takes each term's k-th tree. ``mark``: the largest HOP id before translation."""
    per_term = [_term_plans(region, term, ctx, mark) for _, term in region.plan.terms]
    if not all(per_term):
        return []
    plans: list[Plan] = []
    seen: set[object] = set()
    for k in range(limit):
        if k and all(len(r) <= k for r in per_term):
            break
        recipe = tuple((r[min(k, len(r) - 1)][1], r[min(k, len(r) - 1)][2]) for r in per_term)
        plan = build(region, ctx, mark, recipe)
        if plan is None:
            continue
        key = structure(plan.hop, mark)
        if key not in seen:
            seen.add(key)
            plans.append(plan)
    return plans


def _combine(ctx: Ctx, region: Region, hops: list[Hop]) -> Hop:
    """The terms' HOPs added with their signs (a negative first term is subtracted from a later one)."""
    signed = list(zip((s for s, _ in region.plan.terms), hops))
    signed.sort(key=lambda p: p[0] < 0)
    sign, acc = signed[0]
    like = region.root
    for s, h in signed[1:]:
        acc = ctx.mk("+" if s == sign else "-", "binary", [acc, h], acc.dt if acc.dt == MATRIX else h.dt,
                     DOUBLE, like)
    if sign < 0:
        acc = ctx.mk("u-", "unary", [acc], acc.dt, DOUBLE, like)
    return acc
