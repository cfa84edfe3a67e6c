"""Plan selection: interchangeable strategies that turn a memo table into a plan assignment.

An assignment is a set of cuts (materialized data dependencies, see
:mod:`lafuse.fusion.construct`). Fuse-all cuts nothing (maximal fusion, redundant compute on
shared intermediates); fuse-no-redundancy cuts every reference to an intermediate with several
consumers; the cost-based selector (paper 000 §4, MPSkipEnum) partitions the plans, collects
interesting points per partition (materialization-point consumers and template switches) and finds
the cheapest assignment of them exactly: structural pruning decides groups of points that no fused
operator can span on their own (:class:`Interactions`; the points materialized on the way to such a
split are the paper's cut sets, composite ones included), small groups are scanned in MPSkipEnum's
linear order from fuse-all with cost-based skipping (a lower bound of static and materialization
costs against the best plan so far). A partition costs at most the plans its stakes pay for
(PLAN_EVAL_TIME_PER_HOP a HOP of it: a plan of a larger partition takes longer to cost) and a DAG at
most MAX_PLANS_PER_DAG; past that, the best plan seen,
fuse-no-redundancy's or a greedy pass, and ``--stats`` says so. ``tests/fusion/test_select_exact.py``
checks the plans against every assignment on 300 random DAGs (partitions of up to 16 points).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lafuse.cost.constants import CODEGEN_WARM_LOAD_TIME, PLAN_EVAL_TIME_PER_HOP
from lafuse.cost.fused import basic_cost, chain_saving, fused_op_rate, fused_weight
from lafuse.cost.operators import mem_times, meta
from lafuse.cost.profile import HardwareProfile
from lafuse.fusion import SelectStats, magg
from lafuse.fusion.construct import Cuts, FusionPlan, build_plan
from lafuse.fusion.memo import MemoTable
from lafuse.hops.hop import Hop

# plans costed per DAG (each ~0.1 ms: build_plan and plan_cost, memoized) before the enumeration of
# the partition it is in stops and falls back (CostBased._enumerate): 2^16, every assignment of 16
# points even where nothing prunes. Within it a partition costs at most the plans its stakes pay for
# (PLAN_EVAL_TIME_PER_HOP a HOP of it), and at least MIN_PLANS_PER_PARTITION
MAX_PLANS_PER_DAG = 1 << 16
MIN_PLANS_PER_PARTITION = 64


@dataclass
class Context:
    memo: MemoTable
    roots: list[Hop]
    order: list[Hop]
    prof: HardwareProfile
    stats: SelectStats = field(default_factory=SelectStats)
    hints: dict[str, float] | None = None  # non-zeros of the variables the DAG reads
    weight: float = 1.0  # expected executions of the DAG (amortizes kernel compilation)
    budget: int = MAX_PLANS_PER_DAG  # plans the cost-based selector costs for the DAG (CostBased._enumerate)
    cplans: dict = field(default_factory=dict)  # CPlan construction memo across evaluated plans
    costs: dict = field(default_factory=dict)  # operator cost memo across evaluated plans
    # bytes the unfused operators of a set of HOPs hold at once (optimizer.intermediate_peak): what a
    # fused plan need not touch for the first time; 0 unless the optimizer passes it in
    peak: Callable[[list[Hop], Hop | None, dict[str, float] | None], float] = lambda hops, out, hints: 0.0


class Selector:
    name = ""

    def select(self, ctx: Context) -> Cuts:
        raise NotImplementedError


class FuseAll(Selector):
    name = "fuse-all"

    def select(self, ctx: Context) -> Cuts:
        return frozenset()


def _refs(memo: MemoTable) -> set[tuple[int, int]]:
    return {(hid, r) for hid, es in memo.groups.items() for e in es for r in e.refs if r >= 0}


def _shared(memo: MemoTable, g: int) -> bool:
    """Whether HOP ``g`` has several consumers (a reference to it is a materialization point)."""
    return len({x.id for x in memo.consumers.get(g, [])}) > 1


class FuseNoRedundancy(Selector):
    name = "fuse-no-redundancy"

    def select(self, ctx: Context) -> Cuts:
        return frozenset((c, g) for c, g in _refs(ctx.memo) if _shared(ctx.memo, g))


# ----------------------------------------------------------------------------- cost-based

def _components(nodes: Iterable[int], pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Each node's component (a representative node) under the undirected ``pairs`` (union-find; a
    node named only by a pair joins too)."""
    parent: dict[int, int] = {h: h for h in nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        parent[find(a)] = find(b)
    return {h: find(h) for h in parent}


def partitions(memo: MemoTable) -> list[set[int]]:
    """Connected components of the fusion references (nodes of separate partitions never fuse)."""
    comps: dict[int, set[int]] = {}
    for h, root in _components(memo.groups, _refs(memo)).items():
        comps.setdefault(root, set()).add(h)
    return sorted(comps.values(), key=min)


def interesting_points(memo: MemoTable, part: set[int]) -> list[tuple[int, int]]:
    """Materialization-point consumers (a reference to a HOP with several consumers), and template
    switches (a reference into a group with templates its consumer does not have)."""
    pts = []
    for c, g in sorted(_refs(memo)):
        if c not in part:
            continue
        multi = _shared(memo, g)
        switch = bool(memo.templates_of(g) - memo.templates_of(c))
        if multi or switch:
            pts.append((c, g))
    return pts


def plan_cost(plan: FusionPlan, part: set[int], prof: HardwareProfile, bound: float = float("inf"),
              hints: dict[str, float] | None = None, memo: dict | None = None, maggs: bool = True) -> float:
    """C(P|q) of Eq. 4 over the operators of partition ``part``; full aggregates' Cell operators that
    compute a HOP in common merged into multi-aggregates where one costs less (fusion.magg, as the
    optimizer merges them after selection: one pass, the shared part computed once); stops early past
    ``bound``. (Merges of operators that share only an input do not enter: they would tie the costs of
    groups structural pruning solves apart, see :class:`Interactions`.) ``maggs=False``: no merges.
    ``memo`` keeps operator costs across the assignments of one enumeration (a basic operator's
    cost never changes; a fused one's depends only on what it covers)."""
    memo = {} if memo is None else memo
    total = 0.0
    ops = [op for op in plan.fused if op.root.id in part]
    aggs = magg.candidates(ops)
    if maggs and len(aggs) > 1:  # the partition's multi-aggregates, merged where that costs less (fusion.magg)
        merge = magg.CostedMerge(prof, hints, memo)
        below = memo.get(("below",)) or memo.setdefault(("below",), magg.Below())
        groups = [g for g in magg.group(aggs, merge, below, overlap=True) if len(g) > 1]
        total += merge.total(groups)
        merged = {id(o) for g in groups for o in g}
        ops = [op for op in ops if id(op) not in merged]
    for op in ops:
        total += magg.op_cost(op, prof, hints, memo)
        if total >= bound:
            return total
    return total + unfused_cost([h for h in plan.basic if h.id in part], prof, hints, memo)


def unfused_cost(hops: list[Hop], prof: HardwareProfile, hints: dict[str, float] | None = None,
                 memo: dict | None = None) -> float:
    """The operators ``hops`` left unfused: each one's basic_cost, less the saving of each mmchain
    instruction whose outer product and parts are all among them (``chain_parts``, marked by
    fusion.optimizer from hops.patterns.mmchains). ``memo`` as plan_cost's."""
    memo = {} if memo is None else memo
    basic = {h.id: h for h in hops}
    total = 0.0
    for h in basic.values():
        c = memo.get(h.id)
        if c is None:
            c = memo[h.id] = basic_cost(h, prof, hints)
        total += c
        parts = h.params.get("chain_parts")
        if parts and all(p in basic for p in parts):  # the chain stays unfused: one mmchain instruction
            saving = memo.get(("c", h.id))
            if saving is None:
                saving = memo[("c", h.id)] = chain_saving(h, [basic[p] for p in parts], prof, hints)
            total -= saving
    return total


@dataclass
class Bound:
    """Lower bound of a partition's plan costs: each operator costs at least the larger of its memory
    traffic (read + write) and its computation, so a plan costs at least max(reads + writes,
    computes) summed over its operators. (write + max(read, compute) is not a bound: a compute-bound
    basic operator hides its write, and the bound skipped a 2-point partition's cheapest plan.)"""

    write: float
    read: float
    compute: float
    mp_write: dict[int, float]
    mp_read: dict[int, float]

    def targets(self, cuts: Cuts) -> set[int]:
        """The targets of ``cuts`` among the partition's points' (their materialization costs)."""
        return {g for _, g in cuts if g in self.mp_write}

    def of(self, targets: set[int]) -> float:
        w = self.write + sum(self.mp_write[g] for g in targets)
        r = self.read + sum(self.mp_read[g] for g in targets)
        return max(w + r, self.compute)


class CostBased(Selector):
    name = "cost"
    limit = 0  # plans_evaluated at which this DAG's budget is spent (select)
    part_limit = 0  # ... and the partition's (_enumerate)

    def select(self, ctx: Context) -> Cuts:
        cuts: set[tuple[int, int]] = set()
        # (ctx.stats may be shared by the DAGs of a process: the budget is this DAG's)
        self.limit = ctx.stats.plans_evaluated + ctx.budget
        for part in partitions(ctx.memo):
            pts = interesting_points(ctx.memo, part)
            ctx.stats.partitions += 1
            ctx.stats.points += len(pts)
            ctx.stats.plans_total += 2 ** len(pts)
            lb = self._lower_bound(ctx, part, pts)
            if self._cannot_pay(ctx, part, lb):
                # no plan of the partition saves enough to load even one cached kernel: all of it
                # stays unfused, without enumerating anything
                cuts |= {(c, g) for c in part for e in ctx.memo.entries(c) for g in e.refs if g >= 0}
                ctx.stats.pruned_cost += 2 ** len(pts)
                continue
            best = self._enumerate(ctx, part, pts, frozenset(cuts), lb)
            cuts |= best
        return frozenset(cuts)

    @staticmethod
    def _basic(ctx: Context, h: int) -> float:
        """basic_cost of HOP ``h``, kept in ``ctx.costs`` (the memo plan_cost shares)."""
        c = ctx.costs.get(h)
        if c is None:
            c = ctx.costs[h] = basic_cost(ctx.memo.hops[h], ctx.prof, ctx.hints)
        return c

    def _cannot_pay(self, ctx: Context, part: set[int], lb: Bound) -> bool:
        """No plan of the partition saves a kernel's load: per run, nor in the memory its unfused
        intermediates touch for the first time (bounded by all of them, which the later decision,
        optimizer._not_worth_compiling, counts too). Without that bound, KMeans' final sum(X ^ 2) over
        1e5 x 50 (a 40 MB intermediate: 0.17 s measured, 0.007 s estimated per run) was cut here
        before the first-touch saving was weighed."""
        unfused = sum(self._basic(ctx, h) for h in part)
        best_case = lb.of(set()) + ctx.prof.matrix_op_overhead
        per_runs = (unfused - best_case) * ctx.weight
        if per_runs >= CODEGEN_WARM_LOAD_TIME:  # (the peak walks the partition's operands: only if needed)
            return False
        once = ctx.peak([ctx.memo.hops[h] for h in part], None, ctx.hints) / ctx.prof.first_touch_bw
        return per_runs + once < CODEGEN_WARM_LOAD_TIME

    def _lower_bound(self, ctx: Context, part: set[int], pts: list[tuple[int, int]]) -> Bound:
        """Static costs of any plan of the partition: write its roots, read its inputs once, and
        compute every operation once at the best sparsity any of its inputs offers; plus the
        materialization cost (one write, one read) of each interesting point's target."""
        prof, memo, hints = ctx.prof, ctx.memo, ctx.hints
        # a transpose its product reads through (hops.patterns.foldable_transposes) is its input read in place:
        # t(X) %*% (X %*% V) reads X once, not X and t(X)
        inputs = {j.id: j for h in part for i in memo.hops[h].inputs if i.id not in part
                  for j in ([i.inputs[0]] if i.params.get("read_through") else [i])}
        roots = [memo.hops[h] for h in part if any(c.id not in part for c in memo.consumers.get(h, []))
                 or memo.hops[h] in ctx.roots or not memo.consumers.get(h)]
        mins = [meta(i, hints) for i in inputs.values() if i.dt == "matrix"]
        # any operator touching b bytes has a working set of at least b, so the cache holds at most
        # its share of b: reading or writing the b bytes alone (mem_times) is a lower bound
        read = sum(mem_times(prof, m.bytes, 0.0)[0] for m in mins)
        write = sum(mem_times(prof, 0.0, meta(r, hints).bytes)[1] for r in roots if r.dt == "matrix")
        density = min([min(1.0, m.nz / m.cells) for m in mins if m.cells > 0] + [1.0])
        # each operation at least once, at the cheaper of its fused and its basic price
        compute = sum(min(meta(memo.hops[h], hints).cells * density * fused_weight(memo.hops[h].op)
                          / fused_op_rate(prof), self._basic(ctx, h)) for h in part)
        mp = {g: meta(memo.hops[g], hints).bytes for _, g in pts}
        # a target the partition writes anyway (one of its roots) costs a materialization one read more
        written = {r.id for r in roots}
        return Bound(write, read, compute, {g: 0.0 if g in written else mem_times(prof, 0.0, b)[1] for g, b in mp.items()},
                     {g: mem_times(prof, b, 0.0)[0] for g, b in mp.items()})

    def _enumerate(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts,
                   lb: Bound) -> Cuts:
        """The exact best assignment of the partition's points (:meth:`_solve`) within the DAG's plan
        budget. Past it: the best of the plans seen (fuse-all first), fuse-no-redundancy's and a
        greedy pass from fuse-all, so never worse than either heuristic under this cost model
        (``--stats`` counts such partitions)."""
        self.solved: dict[Any, frozenset[tuple[int, int]]] = {}
        # the plans worth costing: what the best plan can save over fuse-all, at the time one takes
        fuse_all = self._cost(ctx, part, fixed, float("inf"))
        stakes = max(fuse_all - lb.of(lb.targets(fixed)), 0.0) * ctx.weight
        per_plan = PLAN_EVAL_TIME_PER_HOP * len(part)
        self.part_limit = min(self.limit, ctx.stats.plans_evaluated + max(MIN_PLANS_PER_PARTITION,
                                                                          int(stakes / per_plan)))
        cuts, cost, done = self._solve(ctx, part, pts, fixed, lb, Interactions(ctx.memo, part), float("inf"))
        if done:
            return cuts
        ctx.stats.over_budget += 1
        shared = frozenset(p for p in pts if _shared(ctx.memo, p[1]))
        for alt in (fixed | shared, self._greedy(ctx, part, pts, fixed)):
            c = self._cost(ctx, part, alt, cost)
            if c < cost:
                cuts, cost = alt, c
        return cuts

    def _cost(self, ctx: Context, part: set[int], cuts: Cuts, bound: float) -> float:
        ctx.stats.plans_evaluated += 1
        plan = build_plan(ctx.memo, ctx.roots, ctx.order, cuts, cache=ctx.cplans, part=part)
        return plan_cost(plan, part, ctx.prof, bound, ctx.hints, ctx.costs)

    def _solve(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts, lb: Bound,
               graph: Interactions, bound: float) -> tuple[Cuts, float, bool]:
        """The best assignment of ``pts`` given ``fixed`` (the other points' decisions), its cost (the
        partition's; inf: none below ``bound``), and whether the search was complete (False: the plan
        budget ran out).

        Structural pruning (paper 000 §4.3): where the points fall apart into groups that no fused
        operator can span given ``fixed`` (:class:`Interactions`), each group is solved on its own
        and the partition's cost is the sum of theirs, so the best assignments combine. Otherwise
        the point whose materialization splits the rest best is decided both ways (a cut set grows
        along the materialized branch: two points where one alone splits nothing is a composite cut
        set), and small groups are enumerated (:meth:`_skip_enum`). Cost-based pruning: a branch whose
        materializations alone bound its plans above ``bound`` is skipped. Once the plan budget is
        spent, every branch left returns at once (unfinished, no plan): the search tree is
        exponential in the points even where its leaves cost nothing."""
        if ctx.stats.plans_evaluated >= self.part_limit:
            return fixed, float("inf"), False
        groups, keys = graph.groups(pts, fixed)
        if len(groups) > 1:
            ctx.stats.pruned_structural += max(2 ** len(pts) - sum(2 ** len(g) for g in groups), 0)
            cuts, ok = fixed, True
            for g, key in zip(groups, keys, strict=True):
                # a group's best assignment depends only on the decisions inside its component
                # (Interactions): met again on another branch, it is taken as it was
                known = self.solved.get(key)
                if known is None:
                    got, _, done = self._solve(ctx, part, g, cuts, lb, graph, float("inf"))
                    known = frozenset(p for p in g if p in got)
                    if done:
                        self.solved[key] = known
                    ok = ok and done
                cuts = cuts | known
            return cuts, self._cost(ctx, part, cuts, float("inf")), ok
        if len(pts) <= SMALL_GROUP:
            return self._skip_enum(ctx, part, pts, fixed, lb, bound)
        p = graph.branch(pts, fixed)
        rest = [q for q in pts if q != p]
        best_cuts, best, ok = self._solve(ctx, part, rest, fixed, lb, graph, bound)  # p fused
        bound = min(bound, best)
        if lb.of(lb.targets(fixed | {p})) >= bound:
            ctx.stats.pruned_cost += 2 ** len(rest)
            return best_cuts, best, ok
        cuts, cost, done = self._solve(ctx, part, rest, fixed | {p}, lb, graph, bound)  # p materialized
        if cost < best:
            best_cuts, best = cuts, cost
        return best_cuts, best, ok and done

    def _skip_enum(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts,
                   lb: Bound, bound: float) -> tuple[Cuts, float, bool]:
        """MPSkipEnum's linear scan (paper 000 Alg. 2) of ``pts`` given ``fixed``, from all-false
        (fuse-all) upwards, bit i of the assignment point i, most significant first: a plan's
        successors up to the next flip of its last true bit only add materializations, so they are
        skipped together when the lower bound of the first reaches the best cost so far (or
        ``bound``). Returns as :meth:`_solve`."""
        n = len(pts)
        best_cuts, best = fixed, bound
        base = lb.targets(fixed)
        j = 0
        while j < 2 ** n:
            if ctx.stats.plans_evaluated >= self.part_limit:
                return best_cuts, best, False
            chosen = frozenset(pts[i] for i in range(n) if (j >> (n - 1 - i)) & 1)
            if lb.of(base | {g for _, g in chosen}) >= best:
                skip = 2 ** (n - 1 - max((i for i in range(n) if (j >> (n - 1 - i)) & 1), default=-1))
                ctx.stats.pruned_cost += min(skip, 2 ** n - j)
                j += skip
                continue
            c = self._cost(ctx, part, fixed | chosen, best)
            if c < best:
                best, best_cuts = c, fixed | chosen
            j += 1
        return best_cuts, best, True

    def _greedy(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts) -> Cuts:
        """From fuse-all, each point materialized in turn where that lowers the cost."""
        cuts = set(fixed)
        best = self._cost(ctx, part, frozenset(cuts), float("inf"))
        for p in pts:
            c = self._cost(ctx, part, frozenset(cuts | {p}), best)
            if c < best:
                best = c
                cuts.add(p)
        return frozenset(cuts)


SMALL_GROUP = 4  # points a group is enumerated over directly rather than branched on (_solve)


class Interactions:
    """Which points of a partition can affect each other's costs, given some decisions (paper 000
    §4.3, structural pruning). A plan's cost is the sum of its fused and basic operators'; a fused
    operator grows from its root along fusion references that are not cut, so it stays inside a
    connected group of the graph whose edges are those references (and an mmchain's outer product
    and its parts, whose saving counts only when all are unfused; a multi-aggregate plan_cost
    prices merges operators that compute a HOP in common, so of one group). Which HOPs of a group are
    computed as operator roots depends on its own consumers' plans and on reads from outside it,
    which are always materialized (a cut reference or a plain input: every HOP is computed, by its
    own instruction or inside an operator, and reads such an input materialized). So the groups'
    costs add up, and points of different groups are decided independently."""

    def __init__(self, memo: MemoTable, part: set[int]) -> None:
        self.memo = memo
        self.edges = sorted({(c, r) for c in part for e in memo.groups.get(c, []) for r in e.refs if r >= 0})
        chains = [(h, q) for h in part for q in memo.hops[h].params.get("chain_parts") or () if q in part]
        self.chains = sorted(chains)
        self.part = part

    def _by_component(self, pts: list[tuple[int, int]], fixed: Cuts
                      ) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]]:
        """Each HOP's component given the references ``fixed`` cuts (each point open otherwise: an
        undecided point may stay fused), and ``pts`` by their consumer's."""
        edges = ((c, r) for c, r in self.edges if (c, r) not in fixed and r in self.part)
        comp = _components(self.part, itertools.chain(edges, self.chains))
        out: dict[int, list[tuple[int, int]]] = {}
        for p in pts:
            out.setdefault(comp[p[0]], []).append(p)
        return comp, out

    def groups(self, pts: list[tuple[int, int]], fixed: Cuts) -> tuple[list[list[tuple[int, int]]], list[Any]]:
        """``pts`` by the group of their consumer (:meth:`_by_component`), and for each group a key of
        what its best assignment depends on: its points, its component's HOPs and the cuts among them."""
        comp, out = self._by_component(pts, fixed)
        keys = []
        for root, g in out.items():
            hops = frozenset(h for h, c in comp.items() if c == root)
            keys.append((frozenset(g), hops, frozenset(e for e in fixed if e[0] in hops)))
        return list(out.values()), keys

    def branch(self, pts: list[tuple[int, int]], fixed: Cuts) -> tuple[int, int]:
        """The point whose materialization leaves the smallest largest group of the others (ties:
        the first in ``pts``)."""
        def split(p: tuple[int, int]) -> int:
            return max(len(g) for g in self._by_component([q for q in pts if q != p], fixed | {p})[1].values())

        return min(pts, key=split)


SELECTORS: dict[str, type[Selector]] = {"fuse-all": FuseAll, "fuse-no-redundancy": FuseNoRedundancy,
                                        "cost": CostBased}
