"""Distributed fused operators: the generated kernel of a Cell, MAgg, Row or Outer plan run block
by block on the workers (the SystemDS-on-Spark way, paper 001 §5: side inputs are sliced to the
block's rows or columns where the template reads them so, broadcast whole where it reads them whole).

- Cell and MAgg: one task per block of the main input; a same-shape side input gives its block, a
  column vector its row block, a row vector its column block. No aggregation: the result block;
  full, row or column aggregation: partial results combined by the plan's aggregation (sum and
  sum of squares add, min and max keep the extreme) in a tree.
- Row: one task per row block of the main input with whole rows (a row panel: the column blocks
  pasted, when there are several); a whole-matrix or row-vector side input is assembled once and
  shared by every task. Column aggregates (also ``t(X) %*% w`` forms) add the row blocks' partials.
- Outer: the operator plan.fusedstrategy chose (broadcast, replication or cuboid), run by
  runtime.dask.fused_outer; a plan whose shape was unknown when planned runs the replicating one:
  each block (i, j) of the sparse main input with U's row panel i and V's row panel j.

Each task runs the same kernel the local runtime runs (runtime.local.fused, compiled once per
worker process and plan), so a block's values are the local kernel's on that block.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.hops import cplan as C
from lafuse.plan.fusedstrategy import FusedChoice
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask import fused_mm, fused_outer
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.dask.ops import tree

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend

_COMBINE = {"sum": "+", "sumsq": "+", "min": "min", "max": "max"}


def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    if ins.hop.kind == "cuboid":
        return functools.partial(fused_mm.bound, be, ins.hop.params["mmplan"], ins.dist, ins.block)
    if ins.hop.kind != "spoof":
        return None
    return functools.partial(run, be, ins.cplan, be.cfg.codegen_backend == "reference", ins.hop.cols, ins.dist)


def accesses(plan: C.CPlan) -> dict[int, set[str]]:
    """How the plan reads each input position (plan.exectype asks the same to decide what may run
    here: one access per input)."""
    out: dict[int, set[str]] = {}
    for n in C.postorder(plan):
        if n.op == "input":
            out.setdefault(int(n.arg), set()).add(n.access)  # type: ignore[call-overload]
    return out


def run(be: DaskBackend, plan: C.CPlan, reference: bool, cols: int, dist: Any, *args: Any) -> Any:
    """``cols``: the result's columns (a row plan's unaggregated result); ``dist``: an outer plan's
    operator (plan.fusedstrategy.FusedChoice; None: ``rfo``, each block of X with its panels)."""
    acc = {p: next(iter(a)) for p, a in accesses(plan).items()}
    main = args[0]
    if plan.template in ("cell", "magg"):
        return _cell(be, plan, reference, acc, main, args)
    if plan.template == "row":
        return _row(be, plan, reference, acc, main, args, cols)
    if not isinstance(main, Blocked):  # (exectype keeps such a plan local; a guard, not a path)
        raise NotImplementedError("a distributed outer plan needs a distributed main input")
    # (a shape unknown when planned: the replicating operator, with no estimate for --stats to show)
    choice = dist or FusedChoice("rfo", (main.nrb, main.ncb, 1), 0.0, 0.0, 0.0, 0.0)
    return fused_outer.measured(be, plan.agg, dist, args,
                                lambda: fused_outer.run(be, plan, reference, acc, main, args, choice))


def _slice(x: Any, access: str, i: int, j: int) -> Any:
    """What block (i, j) of a cell-wise iteration reads of an input."""
    if not isinstance(x, Blocked):
        return x
    if access in (C.MAIN, C.CELL):
        return x.blocks[(i, j)]
    if access == C.ROWVEC:
        return x.blocks[(i, 0)]
    if access == C.COLVEC:
        return x.blocks[(0, j)]
    return x.blocks[(0, 0)]  # SCALAR: a 1 x 1 matrix


def _cell(be: DaskBackend, plan: C.CPlan, ref: bool, acc: dict[int, str], main: Any, args: tuple[Any, ...]) -> Any:
    tasks = {(i, j): be.submit(B.run_plan, plan, ref, *[_slice(a, acc.get(p, C.SCALAR), i, j)
                                                        for p, a in enumerate(args)])
             for i, j in main.grid()}
    if plan.template == "magg":
        combine = tuple(_COMBINE[o] for o in plan.agg_ops)
        return tuple(be.result(_tree(be, combine, list(tasks.values()))))
    return _aggregate(be, plan.agg, _COMBINE[plan.agg_op], tasks, main)


def _aggregate(be: DaskBackend, agg: str, combine: str, tasks: dict[tuple[int, int], Any], main: Any) -> Any:
    if agg == C.NO_AGG:
        return be.like(main, tasks)
    if agg == C.FULL_AGG:
        return float(be.result(_tree(be, combine, list(tasks.values()))))
    if agg == C.ROW_AGG:
        out = Blocked(main.rows, 1, main.bs)
        for i in range(main.nrb):
            out.blocks[(i, 0)] = _tree(be, combine, [tasks[(i, j)] for j in range(main.ncb)])
        return out
    out = Blocked(1, main.cols, main.bs)  # COL_AGG
    for j in range(main.ncb):
        out.blocks[(0, j)] = _tree(be, combine, [tasks[(i, j)] for i in range(main.nrb)])
    return out


def _tree(be: DaskBackend, combine: str | tuple[str, ...], parts: list[Any]) -> Any:
    return tree(be, parts, B.fold_each, combine)


def _row(be: DaskBackend, plan: C.CPlan, ref: bool, acc: dict[int, str], main: Any, args: tuple[Any, ...],
         width: int) -> Any:
    sh = fused_outer.Pieces(be)

    def arg(p: int, a: Any, i: int) -> Any:
        access = acc.get(p, C.SCALAR)
        if access in (C.MAIN, C.CELL):
            return sh.rows(a, i, i + 1)
        if access == C.ROWVEC:
            return _slice(a, access, i, 0)
        return sh.whole(a)  # COLVEC (a whole row vector), MATRIX, SCALAR

    parts = [be.submit(B.run_plan, plan, ref, *[arg(p, a, i) for p, a in enumerate(args)]) for i in range(main.nrb)]
    if plan.agg == C.NO_AGG:
        out = Blocked(main.rows, width, main.bs)
        for i, f in enumerate(parts):
            fused_outer.cut_into(be, f, out, i, i + 1, 0, out.ncb)
        return out
    total = _tree(be, "+", parts)
    if plan.agg == C.FULL_AGG:
        return float(be.result(total))
    shape = be.result(be.submit(B.shape_of, total))
    out = Blocked(int(shape[0]), int(shape[1]), main.bs)  # (one future holding a whole, small, result)
    fused_outer.cut_into(be, total, out, 0, out.nrb, 0, out.ncb)
    return out
