"""The execution type of each operator: where it runs.

SystemDS's hybrid plans (paper 003 §3) run an operator in the single-process control program when
its memory estimate fits the budget and distributed otherwise. lafuse decides the same here, per
instruction, from the operation's memory need and the budget: ``auto`` sends an operation that does
not fit to Dask when it has a distributed implementation (``distributable``), ``dask`` sends every
such matrix operation above a tiny size (for testing the distributed runtime on small data),
``local`` none. An operation that does not fit and has no distributed implementation stops with the
budget's clear error when it is reached (runtime.local.backend) instead of running out of memory.

What has a distributed implementation is decided per operator family, each with its own check
(``FAMILY_CHECKS``); the Dask backend (runtime.dask) binds every family the checks may pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lafuse import memory
from lafuse.config import CHOICES, Config
from lafuse.hops import cplan
from lafuse.hops.hop import MATRIX, Hop
from lafuse.plan import mmstrategy
from lafuse.plan.instructions import DASK, LOCAL, Instruction

MODES = CHOICES["exec_type"]  # Config.exec_type and --exec

# operations the Dask backend implements (runtime.dask.ops, runtime.dask.matmul; a test checks that it
# binds every one): cell-wise of any arity over matrices of the result's shape, vectors that broadcast
# along it and scalars; full, row and column aggregates; reorganizations; products (plan.mmstrategy)
ELEMENTWISE_BINARY = frozenset({"+", "-", "*", "/", "^", "min", "max", "<", "<=", ">", ">=", "==", "!=", "%%",
                                "%/%", "&", "|", "xor"})
ELEMENTWISE_UNARY = frozenset({"exp", "log", "sqrt", "abs", "u-", "round", "floor", "ceil", "sign", "sin",
                               "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "isNaN", "isInf",
                               "isNA", "!"})
CELLWISE = ELEMENTWISE_BINARY | ELEMENTWISE_UNARY | {"ifelse"}
FULL_AGGREGATES = frozenset({"sum", "mean", "min", "max", "prod", "var", "sd"})
ROWCOL_AGGREGATES = frozenset({"rowSums", "rowMeans", "rowMins", "rowMaxs", "rowIndexMax", "rowIndexMin",
                               "colSums", "colMeans", "colMins", "colMaxs"})
AGGREGATES = FULL_AGGREGATES | ROWCOL_AGGREGATES
REORGS = frozenset({"t", "rix", "lix", "cbind", "rbind"})
DISTRIBUTED = CELLWISE | AGGREGATES | REORGS | {"%*%"}
BROADCAST_FRACTION = 0.7  # of a worker's memory a broadcast operand may take (SystemDS: of storage memory)


@dataclass(frozen=True)
class ClusterShape:
    """What the planner knows of the cluster: the distributed matrices' block size (rows and
    columns), the number of workers (tasks that run at once) and each worker's memory in bytes."""

    block_size: int = 1000
    workers: int = 2
    worker_bytes: float = float(1 << 30)
    min_cells: int = 4  # --exec dask: operators on fewer cells stay here (Config.dask_min_cells)

    @property
    def broadcast_bytes(self) -> float:
        """The largest operand a task may receive whole (SystemDS's broadcast budget)."""
        return BROADCAST_FRACTION * self.worker_bytes

    @classmethod
    def of(cls, cfg: Config) -> ClusterShape:
        workers = max(1, cfg.workers)
        if cfg.worker_memory:
            per = memory.parse_bytes(cfg.worker_memory)
        else:  # LocalCluster's "auto": the machine's memory shared by the workers
            per = memory.physical_memory() / workers
        return cls(cfg.block_size, workers, float(per), cfg.dask_min_cells)


def may_distribute(need: float, budget: float, mode: str) -> bool:
    """Whether ``mode`` may send an operation that holds ``need`` bytes (-1 unknown) anywhere but here:
    the planner asks this first, so the default modes pay nothing per operator for the rest of
    ``choose``."""
    if mode not in MODES:
        raise ValueError(f"unknown execution type mode '{mode}' (one of {', '.join(MODES)})")
    return mode == "dask" or (mode == "auto" and need > budget)


def choose(need: float, budget: float, mode: str, distributed: bool = False, cells: float = -1.0,
           min_cells: int = 4) -> str:
    """The execution type of an operation that holds ``need`` bytes (-1 unknown) under a memory
    budget of ``budget`` bytes; ``distributed``: it has a distributed implementation for its operands;
    ``cells``: its largest matrix's cells (-1 unknown); ``min_cells``: fewer stay here under ``dask``."""
    if not may_distribute(need, budget, mode) or not distributed:
        return LOCAL
    if mode == "dask":
        return DASK if cells >= min_cells else LOCAL
    return DASK


# ---------------------------------------------------------------- what Dask implements, per family


def _known_matrices(ins: Instruction) -> bool:
    """Every operand a matrix of known dims or a scalar, at least one matrix."""
    h = ins.hop
    mats = [i for i in h.inputs if i.dt == MATRIX]
    return bool(mats) and all(i.rows >= 0 and i.cols >= 0 for i in mats) and all(
        i.dt in (MATRIX, "scalar") for i in h.inputs)


def _cellwise(ins: Instruction) -> bool:
    """A matrix result of known dims whose matrix operands each have its shape or broadcast along it
    (a column vector over the columns, a row vector over the rows), at least one of its shape."""
    h = ins.hop
    if h.dt != MATRIX or h.rows < 0 or h.cols < 0 or h.rows * h.cols == 0:
        return False
    full = False
    for i in h.inputs:
        if i.dt != MATRIX:
            continue
        if (i.rows, i.cols) == (h.rows, h.cols):
            full = True
        elif not ((i.cols == 1 and i.rows == h.rows) or (i.rows == 1 and i.cols == h.cols)):
            return False
    return full


def _aggregate(ins: Instruction) -> bool:
    """One non-empty matrix operand (min and max of two operands are cell-wise); a full aggregate
    has a scalar result."""
    h = ins.hop
    if len(h.inputs) != 1 or h.inputs[0].dt != MATRIX or h.inputs[0].rows * h.inputs[0].cols == 0:
        return False
    return h.dt != MATRIX if h.op in FULL_AGGREGATES else h.dt == MATRIX


def _reorg(ins: Instruction) -> bool:
    """Transpose and right indexing of one matrix, left indexing of a matrix by a matrix or a
    scalar, binding of matrices; non-empty (bounds are checked at run time, as locally)."""
    h = ins.hop
    if h.dt != MATRIX or h.rows <= 0 or h.cols <= 0:
        return False
    mats = [i for i in h.inputs if i.dt == MATRIX]
    if h.op in ("cbind", "rbind"):
        return len(mats) == len(h.inputs) and all(i.rows > 0 and i.cols > 0 for i in mats)
    if h.op == "lix":
        return bool(mats) and h.inputs[0].dt == MATRIX and all(i.rows > 0 and i.cols > 0 for i in mats)
    return len(mats) == 1 and h.inputs[0].dt == MATRIX


_READ_FORMATS = frozenset({"csv", "text", "mm", "npy", "binary"})


def _datagen(ins: Instruction) -> bool:
    """rand and read producing a distributed matrix directly (runtime.dask.io): of known, non-empty
    dims (a block grid to generate or read into). rand with a literal poisson pdf has no block seeds
    (its values come from one NumPy stream), so it stays here; arguments known only at run time that
    rule the distributed version out (poisson, sizes other than planned) run the local kernel inside it.
    read: a matrix in a format the workers can read (one given as a literal; none given: guessed at
    run time, a file they cannot read is read here and scattered)."""
    h = ins.hop
    if h.dt != MATRIX or h.rows <= 0 or h.cols <= 0:
        return False
    args = dict(zip(h.params.get("slots") or (), h.inputs))
    if h.op in ("rand", "Rand"):
        pdf = args.get("pdf")
        return pdf is None or not pdf.is_literal or str(pdf.value).lower() in ("uniform", "normal")
    if h.op == "pread":
        fmt = args.get("format")
        return fmt is None or not fmt.is_literal or str(fmt.value).lower() in _READ_FORMATS
    return False


def _fused(ins: Instruction) -> bool:
    """A fused operator run block by block (runtime.dask.fused): every input of known dims, read one
    way, and shaped as that way slices along the main input's blocks (input 0)."""
    h, plan = ins.hop, ins.cplan
    if plan is None or len(h.inputs) != plan.ninputs or not h.inputs or not _known_matrices(ins):
        return False
    main = h.inputs[0]
    if main.dt != MATRIX or main.rows * main.cols == 0:
        return False
    if any(n.op == cplan.SEQ for n in cplan.postorder(plan)):  # (it reads the global row index)
        return False
    access: dict[int, set[str]] = {}
    for n in cplan.postorder(plan):
        if n.op == "input":
            access.setdefault(int(n.arg), set()).add(n.access)  # type: ignore[call-overload]
    for p, i in enumerate(h.inputs):
        ways = access.get(p, {cplan.SCALAR})
        if len(ways) != 1:
            return False
        if i.dt != MATRIX:
            continue
        way = next(iter(ways))
        if not _slices(plan, way, p, i, main):
            return False
    return True


def _slices(plan: cplan.CPlan, way: str, p: int, i: Hop, main: Hop) -> bool:
    """Whether input ``i`` (at position ``p``), read ``way``, splits along the main input's blocks."""
    if p == plan.mm:
        return i.rows == (main.rows if plan.agg == cplan.LEFT_MM else main.cols)
    if way in (cplan.MAIN, cplan.CELL):
        return i.rows == main.rows and (plan.template == "row" or i.cols == main.cols)
    if way == cplan.ROWVEC:
        return i.rows == main.rows and i.cols == 1
    if way == cplan.COLVEC:
        return i.rows == 1 and (plan.template == "row" or i.cols == main.cols)
    if way == cplan.OUTER_U:
        return i.rows == main.rows
    if way == cplan.OUTER_V:
        return i.rows == main.cols
    return way == cplan.MATRIX or (i.rows, i.cols) == (1, 1)


FAMILY_CHECKS: dict[str, Callable[[Instruction], bool]] = {
    **{op: _cellwise for op in CELLWISE},
    **{op: _aggregate for op in AGGREGATES},
    **{op: _reorg for op in REORGS},
}


def distributable(ins: Instruction) -> bool:
    """Whether the Dask backend has an operator for ``ins`` as the plan shaped it: a product (also an
    mmchain or one that reads a transpose in place) by plan.mmstrategy, a fused operator, a data
    generator, else its family's check over operands of known dims."""
    h = ins.hop
    if h.kind == "spoof":
        return _fused(ins)
    if h.kind == "cuboid":  # (fusion.fuseme: a partial plan the distributed runtime runs)
        return True
    if h.kind == "matmult" or ins.chain is not None:
        return mmstrategy.distributable(ins)
    if h.kind == "datagen" or h.op == "pread":
        return _datagen(ins)
    check = FAMILY_CHECKS.get(h.op)
    if check is None or ins.reads is not None or ins.opcode != h.op:
        return False
    if h.op in ("min", "max") and len(h.inputs) == 1:
        check = _aggregate  # (the aggregate; of two operands: cell-wise)
    return _known_matrices(ins) and check(ins)
