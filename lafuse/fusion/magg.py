"""Multi-aggregates (paper 000 §3, the MAgg template): full aggregates over one iteration space that
share an input, computed by one operator that reads the shared inputs once (SystemDS's
multiAggPattern*: ``sum(X * Y)`` and ``sum(X * Z)``; ``min(X)``, ``max(X)`` and ``sum(X)``).

A multi-aggregate combines operators after templates and cuts are fixed: its candidates are the Cell
operators of full aggregates (``candidates``) and, where no fused operator covers them, the full
aggregates and dot products of materialized inputs (``bare_aggregates``). Under the heuristic
policies every compatible group merges (``combine`` without ``accept``). Under the cost-based one a
merge is costed like any fused operator (:class:`CostedMerge`): an operator joins a group only if the
combined operator costs less than the group and the operator apart (the combined one is not
sparse-safe unless all are over one main: merging a sparse-safe aggregate of an ultra-sparse main
with a dense one can cost more than both). The selector prices each plan it enumerates with the
merges of its operators that compute a HOP in common (select.plan_cost: fuse-all's redundant
``sum(X * Y)`` and ``sum(X * Y * Z)`` cost one pass, so materializing ``X * Y`` must beat that);
merges of operators that share only an input follow selection, as SystemDS adds its
across-partition multi-aggregates after enumeration (``createAndAddMultiAggPlans``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lafuse.cost.fused import basic_cost, fused_cost
from lafuse.cost.profile import HardwareProfile
from lafuse.fusion.construct import FusedOp
from lafuse.fusion.memo import MemoEntry
from lafuse.fusion.templates import agg_of, is_dot
from lafuse.hops import cplan as C
from lafuse.hops.hop import Hop, walk

Accept = Callable[[list[FusedOp], FusedOp], bool]


def candidates(ops: Iterable[FusedOp]) -> list[FusedOp]:
    """The Cell operators of a full aggregate among ``ops``."""
    return [o for o in ops if o.template == "cell" and o.plan is not None and o.plan.agg == C.FULL_AGG]


def bare_aggregates(order: list[Hop], ops: list[FusedOp]) -> list[FusedOp]:
    """The full ``sum``/``min``/``max`` of a materialized matrix no fused operator covers, each as a
    Cell operator of no cell-wise operation, for ``combine`` to take into a multi-aggregate with
    others over the same input (SystemDS's multiAggPattern6: ``min(X)``, ``max(X)`` and ``sum(X)``
    read X once; paper 000 §3). Alone, each stays its own instruction."""
    covered = {hid for o in ops for hid in o.entries}
    out: list[FusedOp] = []
    for h in order:
        if h.id in covered:
            continue
        dot = _dot_product(h)
        if dot is not None:
            out.append(dot)
            continue
        agg = agg_of(h)
        if agg is None or agg[0] != C.FULL_AGG:
            continue
        x = h.inputs[0]
        if not x.dims_known or x.rows * x.cols == 0:
            continue
        b = C.CPlanBuilder()
        plan = C.CPlan("cell", b.input(0, C.MAIN), C.FULL_AGG, agg[1], sparse_safe=agg[1] == "sum", ninputs=1)
        out.append(FusedOp("cell", h, {h.id: MemoEntry("cell", (-1,))}, plan, [x]))
    return out


def _dot_product(h: Hop) -> FusedOp | None:
    """``t(x) %*% y`` of two column vectors as the Cell operator ``sum(x * y)`` (SystemDS's Cell
    template takes such products: its multiAggPattern7 reads x and y once for ``t(x) %*% x``,
    ``t(x) %*% y`` and ``t(y) %*% y``). The sparser operand (by its estimate) is the main input,
    whose zeros annihilate ``*`` as the unfused sparse product skips them."""
    if not is_dot(h):
        return None
    x, y = h.inputs[0].inputs[0], h.inputs[1]
    b = C.CPlanBuilder()
    if x is y:
        inputs, expr = [x], b.op("*", b.input(0, C.MAIN), b.input(0, C.MAIN))
    else:
        main, side = (y, x) if 0 <= y.nnz < x.nnz or x.nnz < 0 <= y.nnz else (x, y)
        inputs, expr = [main, side], b.op("*", b.input(0, C.MAIN), b.input(1, C.CELL))
        if main is y:  # (the product's operands in the script's order: IEEE * is commutative anyway)
            expr = b.op("*", b.input(1, C.CELL), b.input(0, C.MAIN))
    plan = C.CPlan("cell", expr, C.FULL_AGG, "sum", sparse_safe=C.zero_safe(expr), ninputs=len(inputs))
    return FusedOp("cell", h, {h.id: MemoEntry("cell", (-1, -1)), h.inputs[0].id: MemoEntry("cell", (-1,))},
                   plan, inputs)


class Below:
    """The HOP ids each operator's inputs reach (whether two aggregates depend on each other), kept
    across the merges of one optimization: the walk is the merge test's largest part."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, ...], set[int]] = {}

    def __call__(self, op: FusedOp) -> set[int]:
        key = tuple(i.id for i in op.inputs)
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = {h.id for h in walk(op.inputs)}
        return got


def mergeable(group: list[FusedOp], o: FusedOp, below: Below | None = None) -> bool:
    """Whether ``o`` may join ``group``: the same iteration space, an input shared with one of its
    operators, and no dependence between ``o`` and any of them (one pass computes them all)."""
    below = below or Below()
    main, gm = o.inputs[0], group[0].inputs[0]
    if (main.rows, main.cols) != (gm.rows, gm.cols):
        return False
    ids = {i.id for i in o.inputs}
    if not any(ids & {i.id for i in x.inputs} for x in group):
        return False
    deps = below(o)
    return not any(x.root.id in deps or o.root.id in below(x) for x in group)


def group(cands: list[FusedOp], accept: Accept | None = None, below: Below | None = None,
          overlap: bool = False) -> list[list[FusedOp]]:
    """``cands`` in groups, greedily in their order: each joins the first group it may join
    (``mergeable``; with ``overlap``, only one with an operator that computes a HOP it computes too)
    and ``accept`` agrees to, else starts its own."""
    below = below or Below()
    groups: list[list[FusedOp]] = []
    for o in cands:
        for g in groups:
            if overlap and not any(o.entries.keys() & x.entries.keys() for x in g):
                continue
            if mergeable(g, o, below) and (accept is None or accept(g, o)):
                g.append(o)
                break
        else:
            groups.append([o])
    return groups


def combine(ops: list[FusedOp], bare: Iterable[FusedOp] = (), accept: Accept | None = None,
            parts: Callable[[FusedOp], Any] | None = None, keep_apart: frozenset[int] = frozenset(),
            below: Below | None = None) -> list[FusedOp]:
    """``ops`` with their full-aggregate Cell operators and ``bare`` aggregates grouped into MAgg
    operators (``group``); a bare one that joins no group is dropped (its HOP stays unfused).
    ``parts``: first merge within each operator's partition the operators that compute a HOP in
    common (the merges the selector priced, in the same order), then the rest. ``keep_apart``: root ids that join no group (a
    multi-aggregate whose compile did not pay: its operators are weighed alone)."""
    below = below or Below()
    bare = list(bare)
    cands = [o for o in candidates(ops) if o.root.id not in keep_apart]
    taken = {id(o) for o in cands}
    rest = [o for o in ops if id(o) not in taken]
    groups: list[list[FusedOp]] = []
    if parts is not None:
        by_part: dict[Any, list[FusedOp]] = {}
        for o in cands:
            by_part.setdefault(parts(o), []).append(o)
        singles: list[FusedOp] = []
        for members in by_part.values():
            for g in group(members, accept, below, overlap=True):
                (groups.append(g) if len(g) > 1 else singles.append(g[0]))
        cands = singles
    groups += group(cands + [o for o in bare if o.root.id not in keep_apart], accept, below)
    out = list(rest)
    for g in groups:
        if len(g) > 1:
            out.append(build(g))
        elif not any(g[0] is b for b in bare):
            out.append(g[0])
    return out


def recorded(ops: list[FusedOp], bare: list[FusedOp], groups: Iterable[tuple[int, ...]],
             order: list[Hop]) -> list[FusedOp]:
    """``ops`` with the multi-aggregates an earlier run chose (feedback.decisions: each group's roots
    by position in ``order``) rebuilt, the operators in the order that run grouped them. A group
    whose roots are not all aggregates of this plan is left apart (the decision's key names the DAG,
    so only a stale entry could; unmerged, the operators compute the same values)."""
    at = {h.id: i for i, h in enumerate(order)}
    by_pos = {at[o.root.id]: o for o in [*candidates(ops), *bare] if o.root.id in at}
    taken: set[int] = set()
    out: list[FusedOp] = []
    for g in groups:
        members = [by_pos[p] for p in g if p in by_pos]
        if len(members) != len(g) or any(id(o) in taken for o in members):
            continue
        taken |= {id(o) for o in members}
        out.append(build(members))
    return [o for o in ops if id(o) not in taken] + out


def positions(ops: list[FusedOp], order: list[Hop]) -> tuple[tuple[int, ...], ...]:
    """The MAgg operators of ``ops`` as their roots' positions in ``order`` (what ``recorded`` takes)."""
    at = {h.id: i for i, h in enumerate(order)}
    return tuple(tuple(at[r.id] for r in o.roots) for o in ops if o.template == "magg")


def build(members: list[FusedOp]) -> FusedOp:
    """One MAgg operator of ``members`` (each a full aggregate's Cell operator): one CPlan with a root
    per aggregate over their inputs, each input read once (one slot per input and access)."""
    b = C.CPlanBuilder()
    inputs: list[Hop] = [members[0].inputs[0]]
    main = inputs[0]
    slots: dict[tuple[int, str], int] = {(main.id, C.MAIN): 0}  # one access per slot (codegen.emit.canon)
    roots: list[C.CNode] = []
    for o in members:
        assert o.plan is not None
        memo: dict[int, C.CNode] = {}

        def re(n: C.CNode, o: FusedOp = o, memo: dict[int, C.CNode] = memo) -> C.CNode:
            if id(n) in memo:
                return memo[id(n)]
            if n.op == "input":
                h = o.inputs[int(n.arg)]  # type: ignore[call-overload]
                acc = C.MAIN if h is main and n.access in (C.MAIN, C.CELL) else \
                    (C.CELL if n.access == C.MAIN else n.access)
                if (h.id, acc) not in slots:
                    slots[h.id, acc] = len(inputs)
                    inputs.append(h)
                out = b.input(slots[h.id, acc], acc)
            elif n.op == "literal":
                out = b.literal(float(n.arg))  # type: ignore[arg-type]
            else:
                out = b.op(n.op, *[re(c) for c in n.children])
            memo[id(n)] = out
            return out

        roots.append(re(o.plan.root))
    safe = all(o.plan is not None and o.plan.sparse_safe and o.inputs[0] is main for o in members)
    plan = C.CPlan("magg", roots[0], C.FULL_AGG, "sum", sparse_safe=safe, ninputs=len(inputs),
                   roots=tuple(roots), agg_ops=tuple(o.plan.agg_op for o in members if o.plan is not None))
    entries = {k: v for o in members for k, v in o.entries.items()}
    return FusedOp("magg", members[0].root, entries, plan, inputs, roots=[o.root for o in members])


class CostedMerge:
    """The cost-based policy's ``accept``: ``o`` joins ``group`` only if one operator computing both
    costs less per run than the group (one operator, or its only member) and ``o`` apart: a fused
    operator at its fused cost, a bare aggregate (``bare_aggregates``) at its instruction's. Counts the
    merges it declines (``declined``). Costs are memoized in ``memo`` (the selector's operator memo)."""

    def __init__(self, prof: HardwareProfile, hints: dict[str, float] | None, memo: dict | None = None,
                 bare: Iterable[FusedOp] = ()) -> None:
        self.prof, self.hints = prof, hints
        self.memo = {} if memo is None else memo
        self.bare = {id(o) for o in bare}
        self.declined = 0

    def cost(self, members: list[FusedOp]) -> float:
        key = ("magg", tuple(_op_key(o) for o in members))
        c = self.memo.get(key)
        if c is None:
            if len(members) == 1 and id(members[0]) in self.bare:
                c = sum(basic_cost(h, self.prof, self.hints) for h in _covered(members[0]))
            elif len(members) == 1:
                c = op_cost(members[0], self.prof, self.hints, self.memo)
            else:
                op = build(members)
                assert op.plan is not None
                c = fused_cost(op.plan, op.inputs, None, self.prof, self.hints)
            self.memo[key] = c
        return c

    def __call__(self, group: list[FusedOp], o: FusedOp) -> bool:
        if self.cost([*group, o]) < self.cost(group) + self.cost([o]):
            return True
        self.declined += 1
        return False

    def total(self, groups: list[list[FusedOp]]) -> float:
        return sum(self.cost(g) for g in groups)


def _op_key(o: FusedOp) -> tuple:
    # (the covered HOPs with their entries, whose cut references the operator reads materialized, and
    # its inputs: the covered ids alone named two operators that read different inputs, and a
    # memoized plan cost 4.996 where it costs 5.080)
    return (o.template, o.root.id, frozenset(o.entries.items()), tuple(i.id for i in o.inputs))


def op_cost(op: FusedOp, prof: HardwareProfile, hints: dict[str, float] | None, memo: dict) -> float:
    """A fused operator's fused_cost, kept in ``memo`` by what it is (select.plan_cost's operator memo:
    the same operator recurs across the assignments of one enumeration)."""
    key = ("f", *_op_key(op))
    c = memo.get(key)
    if c is None:
        assert op.plan is not None
        c = memo[key] = fused_cost(op.plan, op.inputs, op.root, prof, hints)
    return c


def _covered(o: FusedOp) -> list[Hop]:
    """The HOPs a bare aggregate stands for: the aggregate, and a dot product's transpose."""
    hops = [o.root]
    if is_dot(o.root):
        hops.append(o.root.inputs[0])
    return hops
