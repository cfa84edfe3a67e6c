"""The fusion optimizer proper (paper 000 §4-5): OFMC exploration into a memo table, plan selection,
the decision whether each fused operator's kernel pays for its compile or load, multi-aggregates,
and the rewrite of the DAG into one with fused operators. Loaded by fusion.optimize only when no
earlier run's decision applies (feedback.decisions): a script whose DAGs stay unfused then never
imports it, nor the cost model of fused operators."""

from __future__ import annotations

import sys
import time
from typing import Any, NamedTuple

import lafuse.fusion as F
from lafuse import cachedir
from lafuse.cost.constants import CODEGEN_WARM_LOAD_TIME
from lafuse.cost.fused import blas_start, calls_blas, compile_penalty, fused_cost, numba_start
from lafuse.cost.operators import meta, nnz_memo
from lafuse.cost.profile import HardwareProfile
from lafuse.feedback import decisions, observed
from lafuse.fusion import magg
from lafuse.fusion.construct import OPCODES, FusedOp, FusionPlan, build_plan, covered_set
from lafuse.fusion.memo import MemoTable, explore
from lafuse.fusion.select import SELECTORS, Context, partitions, unfused_cost
from lafuse.hops import cplan as C
from lafuse.hops.hop import DOUBLE, MATRIX, SCALAR, Hop, walk
from lafuse.hops.patterns import REUSES_OPERAND, foldable_transposes, mmchains
from lafuse.hops.program import Dag, copy_dag

MAX_UNFUSE_ROUNDS = 4


def run(dag: Dag, cfg: Any, st: F.FusionStats, prof: HardwareProfile, weight: float,
        hints: dict[str, float] | None, reuse: str | None, t0: float) -> tuple[Dag, MemoTable | None]:
    """fusion.optimize once no earlier decision applies: explore, select, drop the operators whose
    compile would not pay, rewrite; ``reuse`` is the key to record the decision under (feedback.decisions)."""
    new = copy_dag(dag)
    order = new.hops()
    _mark_read_through(new, order, cfg.mmchain)
    heuristic = cfg.fusion != "cost"
    memo = explore(new.roots, dominance=heuristic, single=heuristic)
    st.dags += 1
    st.memo_entries += sum(len(es) for es in memo.groups.values())
    st.memo_pruned += memo.pruned
    if not memo.groups and len(magg.bare_aggregates(order, [])) < 2:
        if reuse is not None:
            decisions.record(reuse, decisions.Decision((), (), (), 0, 0, profile=prof.source))
        st.time += time.perf_counter() - t0
        return dag, memo
    ctx = Context(memo, new.roots, order, prof, st.select, hints=hints, weight=weight, peak=intermediate_peak)
    selector = SELECTORS.get(cfg.fusion)
    if selector is None:
        raise ValueError(f"unknown fusion strategy {cfg.fusion!r}; known: {', '.join(SELECTORS)}")
    with nnz_memo():  # (the copy stays unchanged until _rewrite below)
        cuts = selector().select(ctx) if memo.groups else frozenset()
    plan = build_plan(memo, new.roots, order, cuts, protect_outer=heuristic, single=heuristic)
    part_of = {h: i for i, p in enumerate(partitions(memo)) for h in p}
    ops, declined = _combined(plan, order, None if heuristic else (prof, hints, ctx.costs, part_of), frozenset())
    keys: set[str] = set()
    unfused0, observed0, shared0 = st.unfused_by_compile_cost, st.observed, st.start_shared
    deferred0, prestart0 = (len(F.DEFERRED), st.deferred), set(F.ON_PRESTART)
    if not heuristic:
        F.DECIDED_ON.add(prof.source)
        apart: frozenset[int] = frozenset()
        for _ in range(MAX_UNFUSE_ROUNDS):
            extra, split = _not_worth_compiling(ops, order, memo.consumers, prof, weight, hints, st,
                                                getattr(cfg, "codegen_defer", False),
                                                keys if getattr(cfg, "fusion_observed", False) else None)
            if not extra and not split:
                break
            st.unfused_by_compile_cost += len({hid for hid, _ in extra})
            cuts, apart = cuts | extra, apart | split
            plan = build_plan(memo, new.roots, order, cuts)
            ops, _ = _combined(plan, order, (prof, hints, ctx.costs, part_of), apart)
    st.maggs += sum(op.template == "magg" for op in ops)
    st.magg_declined += declined  # (those of the selected plan, before compile decisions dissolve any)
    st.fused_ops += len(ops)
    st.cplans += len(ops)
    _rewrite(new, ops)
    new.candidates = tuple(sorted(keys))
    if reuse is not None and (len(F.DEFERRED), st.deferred) == deferred0 \
            and not any(k.split("@")[0] in F.DEFERRED for k in keys):
        at = {h.id: i for i, h in enumerate(order)}
        if all(a in at and b in at for a, b in cuts):
            decisions.record(reuse, decisions.Decision(
                new.candidates, tuple((k, observed.SAVINGS[k]) for k in new.candidates if k in observed.SAVINGS),
                tuple(k for k in new.candidates if k in observed.BLAS), st.unfused_by_compile_cost - unfused0,
                st.observed - observed0, tuple(sorted((at[a], at[b]) for a, b in cuts)) if ops else None,
                tuple(sorted(F.ON_PRESTART - prestart0)), st.start_shared - shared0, prof.source,
                magg.positions(ops, order)))
    st.time += time.perf_counter() - t0
    return new, memo


def dag_cost(dag: Dag, cfg: Any, prof: HardwareProfile | None = None,
             hints: dict[str, float] | None = None) -> float:
    """What ``dag`` costs as fusion would plan it (Eq. 4 over its fused and basic operators), without
    compiling anything or counting a compile: how the sum-product rewrite weighs its alternatives
    (paper 001 §3.3: "alternative plans are passed to operator fusion for costing without code
    generation"). Without codegen, the operators' unfused costs."""
    from lafuse.cost.profile import load  # deferred: as fusion.optimize
    from lafuse.fusion.select import plan_cost

    prof = prof or load()
    new = copy_dag(dag)
    order = new.hops()
    _mark_read_through(new, order, cfg.mmchain)
    with nnz_memo():
        heuristic = cfg.fusion != "cost"
        memo = explore(new.roots, dominance=heuristic, single=heuristic) if cfg.codegen else None
        if memo is None or not memo.groups:
            return unfused_cost(order, prof, hints)
        ctx = Context(memo, new.roots, order, prof, hints=hints, peak=intermediate_peak)
        cuts = SELECTORS[cfg.fusion]().select(ctx)
        plan = build_plan(memo, new.roots, order, cuts, protect_outer=heuristic, single=heuristic)
        parts = partitions(memo)
        fused = set().union(*parts)
        return (sum(plan_cost(plan, p, prof, hints=hints, memo=ctx.costs) for p in parts)
                + unfused_cost([h for h in order if h.id not in fused], prof, hints))


def _combined(plan: FusionPlan, order: list[Hop], costed: tuple | None,
              apart: frozenset[int]) -> tuple[list[FusedOp], int]:
    """The plan's operators with multi-aggregates (fusion.magg): every compatible group under the
    heuristic policies (``costed`` None); under the cost-based one (``costed``: profile, hints, the
    selector's cost memo, each HOP's partition) the merges that cost less, within each partition as
    the selector priced them, then across; ``apart``: roots whose multi-aggregate did not pay its
    compile. Also how many merges the cost model declined."""
    bare = magg.bare_aggregates(order, plan.fused)
    if costed is None:
        return magg.combine(plan.fused, bare), 0
    prof, hints, memo, part_of = costed
    merge = magg.CostedMerge(prof, hints, memo, bare)
    return magg.combine(plan.fused, bare, merge, lambda o: part_of.get(o.root.id, -1), apart), merge.declined


def replay(dag: Dag, earlier: decisions.Decision, st: F.FusionStats, t0: float) -> tuple[Dag, MemoTable]:
    """An earlier run's decision with fused operators (feedback.decisions): its materialization cuts,
    recorded by position in the DAG's order, applied to a fresh exploration of the same DAG; the
    selection and the compile decision, most of the optimizer's time, are not repeated."""
    assert earlier.cuts is not None
    new = copy_dag(dag)
    order = new.hops()
    _mark_read_through(new, order)
    memo = explore(new.roots, dominance=False)
    cuts = frozenset((order[a].id, order[b].id) for a, b in earlier.cuts)
    ops = build_plan(memo, new.roots, order, cuts).fused
    if earlier.maggs:
        ops = magg.recorded(ops, magg.bare_aggregates(order, ops), earlier.maggs, order)
    _rewrite(new, ops)
    st.fused_ops += len(ops)
    st.cplans += len(ops)
    st.start_shared += earlier.start_shared
    F.ON_PRESTART.update(earlier.prestart)
    return F.replayed(new, earlier, st, t0), memo


def _mark_read_through(dag: Dag, order: list[Hop], chains: bool = True) -> None:
    """Mark the transposes lowering folds into their product (``hops.patterns.foldable_transposes``): they
    cost nothing unfused, so fusing them away saves nothing (basic_cost); and the products lowering
    runs as one mmchain instruction when they stay unfused (``hops.patterns.mmchains``, config ``mmchain``):
    ``chain_parts`` on the outer product, the inner operators it absorbs (cost.fused.chain_saving)."""
    users: dict[int, list[Hop]] = {}
    for h in order:
        for i in h.inputs:
            users.setdefault(i.id, []).append(h)
    for h in order:
        h.params.pop("read_through", None)
        h.params.pop("chain_parts", None)
    folded = foldable_transposes(order, users, dag)
    for h in order:
        if h.id in folded:
            h.params["read_through"] = True
    if chains:  # what lowering runs as one mmchain instruction if left unfused (select.unfused_cost)
        by_id = {h.id: h for h in order}
        for hid, c in mmchains(order, users, dag, folded).items():
            by_id[hid].params["chain_parts"] = tuple(a for a in c.absorbed if a not in folded)


def _kernel_cached(plan: C.CPlan) -> bool:
    """Whether the plan's kernel is in the plan cache. Deciding not to fuse must not cost Numba's
    start-up (~0.5 s), so before the code generator is loaded the on-disk cache is probed by file
    name without importing it: Numba's index of a ``k_<canonical hash>_*`` source (a source without
    one is still being compiled, e.g. by a deferred compile)."""
    cg = sys.modules.get("lafuse.codegen")
    if cg is not None and hasattr(cg, "is_cached"):
        return bool(cg.is_cached(plan))
    return plan.canonical_key()[0] in cachedir.indexed_kernels()


class _Weighed(NamedTuple):
    """A fused operator as _not_worth_compiling weighs it."""

    op: FusedOp
    key: str  # canonical plan hash
    where: str  # its key in the run feedback (observed_key)
    per_run: float  # s saved per execution
    saving: float  # s saved over all expected executions, with the first run's page faults
    cached: bool  # its kernel is in the plan cache
    blas: bool  # its kernel calls BLAS


def _not_worth_compiling(ops: list[FusedOp], order: list[Hop], users: dict[int, list[Hop]],
                         prof: HardwareProfile, weight: float, hints: dict[str, float] | None, st: F.FusionStats,
                         defer: bool = False, keys: set[str] | None = None
                         ) -> tuple[frozenset[tuple[int, int]], frozenset[int]]:
    """Cuts that dissolve fused operators whose expected savings over all runs of the block do not pay
    for compiling their kernel (tiny inputs stay unfused), and the roots of multi-aggregates that do
    not pay (their operators are weighed apart in the next round: a Cell operator whose kernel is
    cached may pay where the merged kernel's compile does not). The runs
    of the block are the executions an earlier run observed (feedback.observed), else ``weight``; only
    with ``keys`` (config ``fusion_observed``), which collects the keys of all operators considered.
    With ``defer``, those that would pay for a load from the disk cache are recorded in F.DEFERRED."""
    out: set[tuple[int, int]] = set()
    split: set[int] = set()
    started, imported = F._numba_started(), F._numba_imported()
    weighed: list[_Weighed] = []
    growth = growth_saved(order, ops, users, hints)
    for op, grown in zip(ops, growth):
        assert op.plan is not None
        hops = _covered_hops(op)
        out_hop = None if op.template == "magg" else op.root
        key = op.plan.canonical_key()[0]
        where = observed_key(key, op.root)
        seen = observed.load().get(where) if keys is not None else None
        runs = seen.runs if seen is not None else weight
        st.observed += seen is not None
        if keys is not None:
            keys.add(where)
        per_run = unfused_cost(hops, prof, hints) - fused_cost(op.plan, op.inputs, out_hop, prof, hints)
        once = grown / prof.first_touch_bw
        weighed.append(_Weighed(op, key, where, per_run, per_run * runs + once, _kernel_cached(op.plan),
                                calls_blas(op.plan)))

    def pays(imported: bool) -> list[tuple[bool, bool]]:
        """(start shared, kept) per operator, with Numba imported already or not."""
        in_dag = not started and _start_shared_here(weighed, prof, imported)
        res = []
        for w in weighed:
            shared = in_dag and w.saving >= compile_penalty(w.cached, prof, True)
            if keys is not None:
                shared = shared or w.cached and not started and observed.start_shared(
                    w.where, CODEGEN_WARM_LOAD_TIME, numba_start(True, prof, imported), blas_start(True))
            # (a shared start includes scipy's BLAS import when a kernel sharing it needs that)
            res.append((shared, w.saving >= compile_penalty(w.cached, prof, started or shared, imported,
                                                            w.blas and not shared)))
        return res

    if keys is not None:
        observed.SAVINGS.update((w.where, w.per_run) for w in weighed)
        observed.BLAS.update(w.where for w in weighed if w.blas)
    decided = pays(imported)
    alone = pays(False) if imported and not started else decided
    for w, (shared, kept), (_, kept_alone) in zip(weighed, decided, alone):
        st.start_shared += shared
        if kept and not kept_alone:
            F.ON_PRESTART.add(w.key)
        if not kept:
            if w.op.template == "magg":
                split |= {r.id for r in w.op.roots}
            else:
                out |= {(hid, r) for hid, e in w.op.entries.items() for r in e.refs if r >= 0}
            if defer and not w.cached and w.saving >= compile_penalty(True, prof, started, imported, w.blas):
                st.deferred += w.key not in F.DEFERRED
                if w.key not in F.DEFERRED:
                    assert w.op.plan is not None
                    F.DEFERRED[w.key] = (w.op.plan, tuple(_size_format(h, hints) for h in w.op.inputs))
    return frozenset(out), frozenset(split)


def _size_format(h: Hop, hints: dict[str, float] | None) -> tuple[int, int, bool]:
    m = meta(h, hints)
    return m.rows, m.cols, m.sparse


def observed_key(key: str, root: Hop) -> str:
    """A candidate's key in the run feedback: its canonical plan hash where its root is written. The
    hash alone names every instance of one plan: AutoEncoder's sigmoid(A %*% W + b) runs 79 times a
    run in its mini-batch loop and once over all rows after it, and the final one was weighed by the
    loop's 79 executions (fused, it cost the run Numba's start: 0.92 s against 0.43)."""
    span = root.span
    return key if span is None else f"{key}@{span.file}:{span.line}:{span.col}"


def intermediate_peak(hops: list[Hop], out: Hop | None, hints: dict[str, float] | None = None) -> float:
    """Bytes of intermediates the unfused operators hold at once (an operator's output with those of
    its inputs that are intermediates too), which the fused operator never allocates: the most its
    first run can save in page faults (memory a process touches for the first time: ``first_touch_bw``,
    0.45 GB/s calibrated here in the runs that fault, against 16 GB/s for reading). Measured:
    ``sum(X*Y*Z)`` over 160 MB operands took 0.9 s more in its first unfused run than in the next
    ones, and ``sum((X - W %*% H)^2)`` (400 MB intermediates) 1.1 s for the subtraction alone,
    where the per-run estimate saw 0.07 s. The selector's prune bounds a partition's saving by it;
    the decision to compile weighs the rise of the block's peak (growth_saved), which blocks freed
    earlier in the block keep lower. The root's output is allocated either way; transposes read
    through by their product are never allocated."""
    ids = {h.id for h in hops}

    def held(h: Hop) -> float:
        if h.id not in ids or h is out or h.dt != MATRIX or h.params.get("read_through"):
            return 0.0
        return float(meta(h, hints).bytes)

    return max((held(h) + sum(held(i) for i in h.inputs) for h in hops), default=0.0)


def growth_saved(order: list[Hop], ops: list[FusedOp], users: dict[int, list[Hop]],
                 hints: dict[str, float] | None = None) -> list[float]:
    """Bytes by which each fused operator of ``ops`` lowers the peak of the memory the block's
    operators hold (the DAG run in ``order`` with the other operators fused): what its first run
    saves in page faults. An operator's intermediates are freed after their last use, and glibc hands
    their blocks to later allocations (memory.tune_malloc), and an element-wise result takes the buffer of
    an operand that dies with it (hops.patterns.REUSES_OPERAND), so only growth of the block's peak
    touches fresh memory: AutoEncoder's final block ran ``sum((A3 %*% W4 + b4 - X) ^ 2)`` unfused with one
    80 MB block faulted in (0.16-0.2 s in the runs that faulted), not the three its intermediates add
    up to (intermediate_peak: 0.53 s, which fused it at a 0.35 s start of Numba). Two such sums in
    one block save their peak only together; each is weighed with the other fused, and a later round
    of _not_worth_compiling weighs the survivor again. Variables the block reads cancel out.
    ``users``: each HOP's consumers in the DAG (the memo table's ``consumers``)."""
    at = {h.id: i for i, h in enumerate(order)}
    end = len(order)
    gone: list[dict[int, int]] = []  # per operator: covered HOPs only it reads -> where its root runs
    written: list[set[int]] = []  # per operator: its roots, which its kernel allocates
    for op in ops:
        covered = _covered_hops(op)
        ids = {h.id for h in covered}
        outs = {h.id for h in op.roots} if op.roots else {op.root.id}
        root_at = max((at.get(i, -1) for i in outs), default=-1)
        # an intermediate still read outside (the operator recomputes a materialized HOP, fuse-all)
        # is computed anyway, and so is what it reads
        out = {i for i in ids - outs if users.get(i)}
        while True:
            kept = {i for i in out if any(u.id not in out and u.id not in outs for u in users[i])}
            if not kept:
                break
            out -= kept
        gone.append({i: root_at for i in out})
        written.append(outs)

    def peak(fused: list[int]) -> float:
        absent = {i: r for j in fused for i, r in gone[j].items()}
        kernels = {i for j in fused for i in written[j]}
        live = top = 0.0
        dying: dict[int, dict[int, float]] = {}  # where it dies -> HOP -> bytes
        for k, h in enumerate(order):
            if h.id not in absent and h.dt == MATRIX and h.op != "tread" and not h.params.get("read_through"):
                m = meta(h, hints)
                b = float(m.bytes)
                # an element-wise result written into an operand that dies here allocates nothing (the
                # unfused r3 = sum((X - W %*% H) ^ 2) of GNMF holds one 400 MB block, not two)
                reuses = h.op in REUSES_OPERAND and h.id not in kernels and not m.sparse
                taken = next((i.id for i in h.inputs if reuses and i.id in dying.get(k, {})
                              and (i.rows, i.cols) == (h.rows, h.cols) and not meta(i, hints).sparse), None)
                if taken is None:
                    live += b
                    top = max(top, live)
                else:
                    live += b - dying[k].pop(taken)
                us = users.get(h.id, [])
                # a block output (a variable, a result) stays; a fused operator reads where its root runs
                last = end if not us or any(u.op in ("twrite", "pwrite") for u in us) else \
                    max(absent.get(u.id, at[u.id]) for u in us)
                dying.setdefault(max(last, k), {})[h.id] = b
            live -= sum(dying.pop(k, {}).values())
        return top

    every = list(range(len(ops)))
    base = peak(every)
    return [max(0.0, peak([k for k in every if k != j]) - base) if g else 0.0 for j, g in enumerate(gone)]


def _start_shared_here(weighed: list[_Weighed], prof: HardwareProfile, imported: bool = False) -> bool:
    """Whether this DAG's operators, each paying its own compile or load, together pay for Numba's
    start: the start is paid once per process, so it is weighed against the sum of their net savings,
    not charged to each operator alone (which left ALS-CG's CG-loop kernels unfused: each saved less
    than the start, all of them more)."""
    net = [(w.saving - compile_penalty(w.cached, prof, True), w.cached, w.blas) for w in weighed]
    paying = [(n, c, b) for n, c, b in net if n > 0.0]
    if not paying:
        return False
    return sum(n for n, _, _ in paying) >= numba_start(all(c for _, c, _ in paying), prof, imported,
                                                       any(b for _, _, b in paying))


def _covered_hops(op: FusedOp) -> list[Hop]:
    """The HOPs an operator replaces: those it covers plus the transposes ``t(P) %*% Q`` absorbs."""
    out = covered_set(op)
    for h in list(out.values()):
        if h.kind == "matmult" and h.inputs[0].kind == "reorg" and h.inputs[0].op == "t":
            out.setdefault(h.inputs[0].id, h.inputs[0])
    return list(out.values())


# ----------------------------------------------------------------------------- DAG rewrite

def _spoof(op: FusedOp) -> Hop:
    root = op.root
    assert op.plan is not None
    multi = op.template == "magg"
    s = Hop(OPCODES[op.template], "spoof", list(op.inputs), dt="list" if multi else root.dt,
            vt="unknown" if multi else root.vt, span=root.span,
            params={"cplan": op.plan, "covers": sorted(op.entries)})
    if not multi:
        s.copy_dims(root)
        s.mem, s.out_mem = root.mem, root.out_mem
    if op.plan.agg == C.FULL_AGG and root.dt == MATRIX and not multi:  # a dot product's 1 x 1 matrix
        s.dt, s.vt, s.rows, s.cols, s.nnz = SCALAR, DOUBLE, 0, 0, -1
        return _one_by_one(s, root)
    if op.transpose_out:  # t(F) %*% W computed as t(t(W) %*% F)
        s.set_dims(root.cols, root.rows, root.nnz)
        t = Hop("t", "reorg", [s], root.dt, root.vt, span=root.span)
        t.copy_dims(root)
        t.mem, t.out_mem = root.mem, root.out_mem
        return t
    return s


def _one_by_one(s: Hop, root: Hop) -> Hop:
    """The scalar ``s`` a fused operator computes for ``root``, a dot product's 1 x 1 matrix, as that
    matrix."""
    m = Hop("as.matrix", "unary", [s], dt=MATRIX, vt=DOUBLE, span=root.span)
    m.copy_dims(root)
    m.mem, m.out_mem = root.mem, root.out_mem
    return m


def _rewrite(dag: Dag, ops: list[FusedOp]) -> None:
    repl: dict[int, Hop] = {}
    for op in ops:
        s = _spoof(op)
        if op.template == "magg":
            for k, r in enumerate(op.roots):
                g = Hop("get", "extract", [s], dt=SCALAR, vt=DOUBLE, span=r.span, params={"index": k})
                g.rows = g.cols = 0
                repl[r.id] = _one_by_one(g, r) if r.dt == MATRIX else g  # (a dot product's: _dot_product)
        else:
            repl[op.root.id] = s
    for h in walk(dag.roots):
        h.inputs = [repl.get(i.id, i) for i in h.inputs]
    for op in ops:  # the spoof operators' own inputs may be other fused operators' roots
        for s in ({repl[r.id] for r in op.roots} if op.template == "magg" else {repl[op.root.id]}):
            tgt = s.inputs[0] if s.op == "as.matrix" else s  # (a dot product's: of a get)
            tgt = tgt.inputs[0] if tgt.op in ("get", "t") else tgt
            tgt.inputs = [repl.get(i.id, i) for i in tgt.inputs]
    dag.roots = [repl.get(r.id, r) for r in dag.roots]

