"""Operator fusion (paper 000): OFMC exploration into a memo table, plan selection, CPlans, and the
rewrite of a HOP DAG into one with fused operators (``spoofCell``, ``spoofRA``, ``spoofMA``,
``spoofOP`` HOPs whose CPlan the code generator compiles).

Fusion runs on a copy of a block's DAG right before lowering, i.e. after static and dynamic
rewrites and again whenever dynamic recompilation re-lowers a block with actual sizes. This module
is the entry point and the process-wide state; the optimizer proper (``fusion.optimizer``) is
loaded only when no earlier run's decision for the DAG applies (``feedback.decisions``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lafuse.feedback import decisions, observed
from lafuse.hops import cplan as C
from lafuse.hops.hop import MATRIX
from lafuse.hops.program import Dag

if TYPE_CHECKING:
    from lafuse.cost.profile import HardwareProfile
    from lafuse.fusion.memo import MemoTable
    from lafuse.hops import cplan as C


@dataclass
class SelectStats:
    """Plan enumeration counts (paper 000 Figure 12), summed over the DAGs a process optimizes."""

    partitions: int = 0
    points: int = 0
    plans_total: int = 0  # 2^|M'| summed over partitions
    plans_evaluated: int = 0
    pruned_cost: int = 0
    pruned_structural: int = 0
    over_budget: int = 0  # partitions whose enumeration ran out of plans (CostBased._enumerate)


@dataclass
class FusionStats:
    dags: int = 0  # DAGs optimized
    fused_ops: int = 0  # fused operators created
    cplans: int = 0
    time: float = 0.0
    select: SelectStats = field(default_factory=SelectStats)
    memo_entries: int = 0
    memo_pruned: int = 0
    unfused_by_compile_cost: int = 0
    deferred: int = 0  # of those, kernels that would pay from the disk cache: compiled after the run
    observed: int = 0  # decisions weighed by the executions an earlier run observed (feedback.observed)
    start_shared: int = 0  # kernels that pay only with Numba's start shared by others (in the DAG or observed)
    reused: int = 0  # DAGs decided as an earlier run decided them (feedback.decisions)
    maggs: int = 0  # multi-aggregates built (fusion.magg)
    magg_declined: int = 0  # merges into one the cost model declined (fusion.magg.CostedMerge)


# canonical hash -> (CPlan, its inputs' (rows, cols, CSR) by plan position) of kernels left unfused
# because a cold compile would not pay off although a load from the on-disk cache would: ``lafuse run``
# compiles them after the run in a background process (codegen.deferred), in the input-format mode the
# sizes predict, so later runs of the script fuse them (config ``codegen_defer``)
DEFERRED: dict[str, tuple[C.CPlan, tuple[tuple[int, int, bool], ...]]] = {}
# sources of the hardware profiles cost-based decisions used ("default" or "calibrated <date>"):
# ``lafuse run`` calibrates in its background job after a run that decided on the defaults
DECIDED_ON: set[str] = set()
# canonical hashes of kernels kept only because a background start (feedback.prestart) had imported
# Numba already: that import is sunk once begun, but it is not free (it holds the GIL against the
# run's own Python work: MLP 2e5 x 64, whose one kernel saves ~0.3 s, ran 0.2-0.4 s slower with it), so
# such kernels do not count as a reason to begin the import at the script's next launch
ON_PRESTART: set[str] = set()


def _has_candidates(dag: Dag) -> bool:
    """A matrix-valued operator a template may open on, or two full aggregates of one matrix, which a
    multi-aggregate may compute in one pass over it (fusion.magg.bare_aggregates)."""
    aggregated: set[int] = set()
    for h in dag.hops():
        if h.dt == MATRIX and h.kind in ("unary", "binary", "nary", "ternary", "agg_unary", "matmult"):
            return True
        if h.kind == "agg_unary" and h.inputs and h.inputs[0].dt == MATRIX:
            if h.inputs[0].id in aggregated:
                return True
            aggregated.add(h.inputs[0].id)
    return False


def optimize(dag: Dag, cfg: Any, stats: FusionStats | None = None, prof: HardwareProfile | None = None,
             weight: float = 1.0, hints: dict[str, float] | None = None,
             recompile: bool = False) -> tuple[Dag, MemoTable | None]:
    """A copy of ``dag`` with fused operators (the input DAG is not modified); ``weight`` is how
    often the block is expected to run (loop bodies), which amortizes compilation; ``hints`` are
    the non-zeros of the variables the block reads (the runtime knows them when it lowers a block;
    HOPs keep nnz unknown so cached plans stay valid for other values); ``recompile``: a dynamic
    recompilation, not a block's first plan (the literal policy, config codegen_literals)."""
    if not _has_candidates(dag):
        return dag, None
    token = C.CONST_LITS.set(const_literals(getattr(cfg, "codegen_literals", "args"), recompile))
    try:
        return _optimize(dag, cfg, stats, prof, weight, hints)
    finally:
        C.CONST_LITS.reset(token)


def const_literals(policy: str, recompile: bool) -> str:
    """The CPlan literal mode (CPlan.const_lits) of a config policy: paper 001 §4.4's CSLH makes every
    literal a constant when a block is first planned and, at a dynamic recompilation, only the integer
    ones (a step size changing every iteration must not compile a kernel per value)."""
    if policy == "constants":
        return "all"
    if policy == "cslh":
        return "int" if recompile else "all"
    return "none"


def _optimize(dag: Dag, cfg: Any, stats: FusionStats | None, prof: HardwareProfile | None, weight: float,
              hints: dict[str, float] | None) -> tuple[Dag, MemoTable | None]:
    t0 = time.perf_counter()
    st = stats or FusionStats()
    reuse = None
    if cfg.fusion == "cost" and getattr(cfg, "fusion_reuse", False) and not _numba_started():
        order = dag.hops()
        reuse = decisions.key(order, dag.roots, weight, hints, cfg, prof, C.CONST_LITS.get())
        earlier = decisions.lookup(reuse) if reuse is not None else None
        if earlier is not None and earlier.cuts is None:
            # unfused: the DAG as it is (its HOPs, which lowering reads and does not change, as without
            # codegen; a DAG of its own, which carries the candidates); a copy of the HOPs was ~0.3 ms
            # of every recompilation of a mini-batch loop body
            return replayed(Dag(list(dag.roots)), earlier, st, t0), None
        if earlier is not None and all(max(c) < len(order) for c in (*(earlier.cuts or ()), *earlier.maggs)):
            from lafuse.fusion import optimizer  # deferred: it imports this package (a cycle inside fusion/)

            return optimizer.replay(dag, earlier, st, t0)
    # deferred: the optimizer imports this package (a cycle inside fusion/) and the fused cost model
    from lafuse.cost.profile import load
    from lafuse.fusion import optimizer

    return optimizer.run(dag, cfg, st, prof or load(), weight, hints, reuse, t0)


def replayed(new: Dag, earlier: decisions.Decision, st: FusionStats, t0: float) -> Dag:
    """``new``, the DAG as an earlier run's decision left it (feedback.decisions), with the candidates,
    savings and counts the optimizer reported then."""
    new.candidates = earlier.candidates
    observed.SAVINGS.update(earlier.savings)
    observed.BLAS.update(earlier.blas)
    DECIDED_ON.add(earlier.profile)
    st.dags += 1
    st.reused += 1
    st.unfused_by_compile_cost += earlier.unfused
    st.observed += earlier.observed
    st.time += time.perf_counter() - t0
    return new


def _numba_started() -> bool:
    """Whether this process has paid Numba's start-up already (a kernel compiled or loaded). Numba
    imported is not enough: a background start (feedback.prestart) imports it before any kernel, and
    the first load still pays the rest (HardwareProfile.numba_first_load)."""
    cg = sys.modules.get("lafuse.codegen")
    return cg is not None and hasattr(cg, "cache_stats") and bool(cg.cache_stats()["per_kernel"])


def _numba_imported() -> bool:
    return "numba" in sys.modules
