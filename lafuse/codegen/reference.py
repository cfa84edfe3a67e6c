"""Pure-NumPy interpreter of CPlans: the specification generated kernels must match.

Every operator is evaluated with lafuse's own unfused kernels (``lafuse.runtime.local.kernels``),
so a fused operator means exactly what the operators it replaces mean (Java division and modulus
semantics, NaN/Inf propagation, min/max with NaN). Inputs are densified: the interpreter is the
spec, not a fast path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lafuse.fusion.cplan import (
    CELL,
    COL_AGG,
    COLVEC,
    FULL_AGG,
    MAIN,
    NO_AGG,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
)
from lafuse.runtime.local.kernels import KERNELS


def _dense(v: Any) -> Any:
    if hasattr(v, "toarray"):
        return np.asarray(v.toarray(), dtype=np.float64)
    if isinstance(v, np.ndarray):
        return v.astype(np.float64, copy=False)
    return float(v)


def _read(v: Any, access: str, shape: tuple[int, int]) -> Any:
    d = _dense(v)
    if access == SCALAR:
        return float(d) if not isinstance(d, np.ndarray) else float(d.reshape(-1)[0])
    if not isinstance(d, np.ndarray):
        raise ValueError(f"a {access} input must be a matrix")
    expect = {MAIN: shape, CELL: shape, ROWVEC: (shape[0], 1), COLVEC: (1, shape[1])}[access]
    if d.shape != expect:
        raise ValueError(f"{access} input has shape {d.shape}, expected {expect}")
    return d


def evaluate(plan: CPlan, inputs: list[Any]) -> Any:
    """The fused operator's result for ``inputs`` (positional, as the CPlan's input nodes number them;
    input 0 is the main input and fixes the iteration space)."""
    main = _dense(inputs[0])
    if not isinstance(main, np.ndarray):
        raise ValueError("the main input of a cell-wise operator must be a matrix")
    shape = main.shape
    memo: dict[int, Any] = {}

    def ev(n: CNode) -> Any:
        if id(n) in memo:
            return memo[id(n)]
        if n.op == "input":
            v = _read(inputs[int(n.arg)], n.access, shape)  # type: ignore[call-overload]
        elif n.op == "literal":
            v = float(n.arg)  # type: ignore[arg-type]
        else:
            v = KERNELS[n.op](*[ev(c) for c in n.children])
            v = _dense(v)
        memo[id(n)] = v
        return v

    cells = ev(plan.root)
    if not isinstance(cells, np.ndarray) or cells.shape != shape:
        cells = np.broadcast_to(np.asarray(cells, dtype=np.float64), shape).copy()
    if plan.agg == NO_AGG:
        return cells
    if plan.agg_op == "sumsq":
        cells, op = cells * cells, "sum"
    else:
        op = plan.agg_op
    if plan.agg == FULL_AGG:
        return float(KERNELS[{"sum": "sum", "min": "min", "max": "max"}[op]](cells))
    fn = {ROW_AGG: {"sum": "rowSums", "min": "rowMins", "max": "rowMaxs"},
          COL_AGG: {"sum": "colSums", "min": "colMins", "max": "colMaxs"}}[plan.agg][op]
    return _dense(KERNELS[fn](cells))


