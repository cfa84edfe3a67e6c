"""The execution type of each operator: where it runs.

SystemDS's hybrid plans (paper 003 §3) run an operator in the single-process control program when
its memory estimate fits the budget and distributed otherwise. lafuse decides the same here, per
instruction, from the operation's memory need and the budget: ``auto`` sends an operation that does
not fit to Dask when it has a distributed implementation (DISTRIBUTED), ``dask`` sends every such
matrix operation above a tiny size (for testing the distributed runtime on small data), ``local``
none. An operation that does not fit and has no distributed implementation stops with the budget's
clear error when it is reached (runtime.local.backend) instead of running out of memory.
"""

from __future__ import annotations

from lafuse.config import CHOICES
from lafuse.plan.instructions import DASK, LOCAL

MODES = CHOICES["exec_type"]  # Config.exec_type and --exec

# operations the Dask backend implements (runtime.dask.backend checks that it covers them): element-wise
# over matrices of one shape or a matrix and a scalar, transpose, the sum aggregates, matrix products
ELEMENTWISE_BINARY = frozenset({"+", "-", "*", "/", "^", "min", "max", "<", "<=", ">", ">=", "==", "!="})
ELEMENTWISE_UNARY = frozenset({"exp", "log", "sqrt", "abs", "u-", "round", "floor", "ceil", "sign", "sin",
                               "cos", "tanh", "isNaN"})
AGGREGATES = frozenset({"sum", "rowSums", "colSums"})
DISTRIBUTED = ELEMENTWISE_BINARY | ELEMENTWISE_UNARY | AGGREGATES | {"t", "%*%"}
MIN_DASK_CELLS = 4  # --exec dask: smaller matrices (and scalars) stay local


def may_distribute(need: float, budget: float, mode: str) -> bool:
    """Whether ``mode`` may send an operation that holds ``need`` bytes (-1 unknown) anywhere but here:
    the planner asks this first, so the default modes pay nothing per operator for the rest of
    ``choose``."""
    if mode not in MODES:
        raise ValueError(f"unknown execution type mode '{mode}' (one of {', '.join(MODES)})")
    return mode == "dask" or (mode == "auto" and need > budget)


def choose(need: float, budget: float, mode: str, distributed: bool = False, cells: float = -1.0) -> str:
    """The execution type of an operation that holds ``need`` bytes (-1 unknown) under a memory
    budget of ``budget`` bytes; ``distributed``: it has a distributed implementation for its operands;
    ``cells``: its largest matrix's cells (-1 unknown)."""
    if not may_distribute(need, budget, mode) or not distributed:
        return LOCAL
    if mode == "dask":
        return DASK if cells >= MIN_DASK_CELLS else LOCAL
    return DASK
