"""Plan selection: interchangeable strategies that turn a memo table into a plan assignment.

An assignment is a set of cuts (materialized data dependencies, see
:mod:`lafuse.fusion.construct`). Fuse-all cuts nothing (maximal fusion, redundant compute on
shared intermediates); fuse-no-redundancy cuts every reference to an intermediate with several
consumers; the cost-based selector (paper 000 sec. 4, MPSkipEnum) partitions the plans, collects
interesting points per partition (materialization-point consumers and template switches) and
enumerates their assignments, fuse-all first, with cost-based skipping (a lower bound of static
and materialization costs against the best plan so far) and structural skipping (a point whose
materialization splits the remaining points into independent halves is enumerated per half).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lafuse.cost.constants import CODEGEN_WARM_LOAD_TIME
from lafuse.cost.fused import basic_cost, chain_saving, fused_cost, fused_op_rate, fused_weight
from lafuse.cost.operators import mem_times, meta
from lafuse.cost.profile import HardwareProfile
from lafuse.fusion import SelectStats
from lafuse.fusion.construct import Cuts, FusionPlan, build_plan
from lafuse.fusion.memo import MemoTable
from lafuse.hops.hop import Hop

MAX_POINTS_EXHAUSTIVE = 9  # interesting points per partition enumerated (2^9 plans) before a greedy pass
MAX_PLANS_PER_DAG = 1024  # plan evaluations per DAG before the remaining partitions are chosen greedily


@dataclass
class Context:
    memo: MemoTable
    roots: list[Hop]
    order: list[Hop]
    prof: HardwareProfile
    stats: SelectStats = field(default_factory=SelectStats)
    hints: dict[str, float] | None = None  # non-zeros of the variables the DAG reads
    weight: float = 1.0  # expected executions of the DAG (amortizes kernel compilation)
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


class FuseNoRedundancy(Selector):
    name = "fuse-no-redundancy"

    def select(self, ctx: Context) -> Cuts:
        m = ctx.memo
        return frozenset((c, g) for c, g in _refs(m) if len({x.id for x in m.consumers.get(g, [])}) > 1)


# ----------------------------------------------------------------------------- cost-based

def partitions(memo: MemoTable) -> list[set[int]]:
    """Connected components of the fusion references (nodes of separate partitions never fuse)."""
    parent: dict[int, int] = {h: h for h in memo.groups}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for c, g in _refs(memo):
        parent.setdefault(g, g)
        parent[find(c)] = find(g)
    comps: dict[int, set[int]] = {}
    for h in parent:
        comps.setdefault(find(h), set()).add(h)
    return sorted(comps.values(), key=min)


def interesting_points(memo: MemoTable, part: set[int]) -> list[tuple[int, int]]:
    """Materialization-point consumers (a reference to a HOP with several consumers), and template
    switches (a reference into a group with templates its consumer does not have)."""
    pts = []
    for c, g in sorted(_refs(memo)):
        if c not in part:
            continue
        multi = len({x.id for x in memo.consumers.get(g, [])}) > 1
        switch = bool(memo.templates_of(g) - memo.templates_of(c))
        if multi or switch:
            pts.append((c, g))
    return pts


def plan_cost(plan: FusionPlan, part: set[int], prof: HardwareProfile, bound: float = float("inf"),
              hints: dict[str, float] | None = None, memo: dict | None = None) -> float:
    """C(P|q) of Eq. 4 over the operators of partition ``part``; stops early past ``bound``.
    ``memo`` keeps operator costs across the assignments of one enumeration (a basic operator's
    cost never changes; a fused one's depends only on what it covers)."""
    memo = {} if memo is None else memo
    total = 0.0
    for op in plan.fused:
        if op.root.id in part:
            assert op.plan is not None
            key = ("f", op.template, op.root.id, frozenset(op.entries))
            c = memo.get(key)
            if c is None:
                c = memo[key] = fused_cost(op.plan, op.inputs, op.root, prof, hints)
            total += c
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
    """Lower bound of a partition's plan costs: each operator costs write + max(read, compute), so
    a plan costs at least writes + max(reads, computes) summed over its operators."""

    write: float
    read: float
    compute: float
    mp_write: dict[int, float]
    mp_read: dict[int, float]

    def of(self, targets: set[int]) -> float:
        w = self.write + sum(self.mp_write[g] for g in targets)
        r = self.read + sum(self.mp_read[g] for g in targets)
        return w + max(r, self.compute)


class CostBased(Selector):
    name = "cost"

    def select(self, ctx: Context) -> Cuts:
        cuts: set[tuple[int, int]] = set()
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
        return Bound(write, read, compute, {g: mem_times(prof, 0.0, b)[1] for g, b in mp.items()},
                     {g: mem_times(prof, b, 0.0)[0] for g, b in mp.items()})

    def _enumerate(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts,
                   lb: Bound) -> Cuts:
        n = len(pts)
        if n > MAX_POINTS_EXHAUSTIVE or ctx.stats.plans_evaluated > MAX_PLANS_PER_DAG:
            # greedy: fuse-all, then each point alone
            return self._greedy(ctx, part, pts, fixed)
        return self._skip_enum(ctx, part, pts, fixed, lb)

    def _cost(self, ctx: Context, part: set[int], cuts: Cuts, bound: float) -> float:
        ctx.stats.plans_evaluated += 1
        plan = build_plan(ctx.memo, ctx.roots, ctx.order, cuts, cache=ctx.cplans, part=part)
        return plan_cost(plan, part, ctx.prof, bound, ctx.hints, ctx.costs)

    def _skip_enum(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts,
                   lb: Bound) -> Cuts:
        """MPSkipEnum (Alg. 2): the linearized space from all-false (fuse-all) upwards; bit i of the
        assignment is point i, most significant first, so a plan's successors up to the next flip
        of its last true bit only add materializations and can be skipped together."""
        n = len(pts)
        best_cuts: Cuts = fixed
        best = float("inf")
        cut_point = self._cut_point(ctx, pts) if n >= 4 else None
        j = 0
        while j < 2 ** n:
            q = [(j >> (n - 1 - i)) & 1 for i in range(n)]
            chosen = frozenset(pts[i] for i in range(n) if q[i])
            if cut_point is not None and q[cut_point[0]] and not any(q[cut_point[0] + 1:]):
                # structural: with the cut point materialized, the points after it fall apart into
                # independent halves: enumerate each half on its own and skip their product
                sub = self._independent(ctx, part, pts, cut_point, fixed | chosen, lb)
                span = 2 ** (n - 1 - cut_point[0])
                ctx.stats.pruned_structural += max(span - 1, 0)
                c = self._cost(ctx, part, fixed | sub, best)
                if c < best:
                    best, best_cuts = c, fixed | sub
                j += span
                continue
            if lb.of({g for _, g in chosen}) >= best:
                last = max(i for i in range(n) if q[i])
                skip = 2 ** (n - 1 - last)
                ctx.stats.pruned_cost += skip
                j += skip
                continue
            c = self._cost(ctx, part, fixed | chosen, best)
            if c < best:
                best, best_cuts = c, fixed | chosen
            j += 1
        return best_cuts

    def _cut_point(self, ctx: Context, pts: list[tuple[int, int]]) -> tuple[int, list[int], list[int]] | None:
        """A point (index i) whose targets split the later points into two non-empty sets S1, S2 of
        points that do not reach each other through fusion references (paper 000 Eq. 5 picks the
        best-balanced such cut)."""
        memo = ctx.memo
        reach: dict[int, set[int]] = {}

        def below(h: int) -> set[int]:
            if h not in reach:
                out = {h}
                for e in memo.groups.get(h, []):
                    for r in e.refs:
                        if r >= 0:
                            out |= below(r)
                reach[h] = out
            return reach[h]

        best = None
        for i, (_, g) in enumerate(pts):
            rest = [k for k in range(i + 1, len(pts))]
            s1 = [k for k in rest if g in below(pts[k][0])]
            s2 = [k for k in rest if k not in s1 and not (below(pts[k][0]) & below(g))]
            if s1 and s2 and len(s1) + len(s2) == len(rest):
                score = abs(len(s1) - len(s2))
                if best is None or score < best[0]:
                    best = (score, i, s1, s2)
        return None if best is None else (best[1], best[2], best[3])

    def _independent(self, ctx: Context, part: set[int], pts: list[tuple[int, int]],
                     cut: tuple[int, list[int], list[int]], base: Cuts, lb: Bound) -> Cuts:
        out = set(base)
        for sub in (cut[1], cut[2]):
            out |= self._skip_enum(ctx, part, [pts[k] for k in sub], frozenset(out), lb)
        return frozenset(out)

    def _greedy(self, ctx: Context, part: set[int], pts: list[tuple[int, int]], fixed: Cuts) -> Cuts:
        cuts = set(fixed)
        best = self._cost(ctx, part, frozenset(cuts), float("inf"))
        for p in pts:
            c = self._cost(ctx, part, frozenset(cuts | {p}), best)
            if c < best:
                best = c
                cuts.add(p)
        return frozenset(cuts)


SELECTORS: dict[str, type[Selector]] = {"fuse-all": FuseAll, "fuse-no-redundancy": FuseNoRedundancy,
                                        "cost": CostBased}
