"""Distributed operators other than products: element-wise, aggregates, transpose. Each submits
its block tasks at once and returns a distributed matrix of futures; only a scalar result (a full
aggregate) is gathered, because control flow may steer on it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.plan import exectype
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask.matrix import Blocked

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend


def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    op = ins.opcode
    if op in exectype.ELEMENTWISE_BINARY:
        return functools.partial(_ew2, be, op)
    if op in exectype.ELEMENTWISE_UNARY:
        return functools.partial(_ew1, be, op)
    if op == "sum":
        return functools.partial(_sum, be)
    if op in ("rowSums", "colSums"):
        return functools.partial(_rowcol, be, op)
    if op == "t":
        return functools.partial(_t, be)
    return None


def _ew2(be: DaskBackend, op: str, a: Any, b: Any) -> Any:
    m = a if isinstance(a, Blocked) else b
    out = {}
    for k in m.grid():
        out[k] = be.submit(B.apply, op, a.blocks[k] if isinstance(a, Blocked) else a,
                           b.blocks[k] if isinstance(b, Blocked) else b)
    return be.like(m, out)


def _ew1(be: DaskBackend, op: str, a: Any) -> Any:
    return be.like(a, {k: be.submit(B.apply, op, f) for k, f in a.blocks.items()})


def _sum(be: DaskBackend, a: Any) -> float:
    parts = [be.submit(B.apply, "sum", a.blocks[k]) for k in a.grid()]
    return float(be.submit(B.add_all, *parts).result())


def _rowcol(be: DaskBackend, op: str, a: Any) -> Any:
    if op == "rowSums":
        out = {(i, 0): be.submit(B.add_all, *[be.submit(B.apply, op, a.blocks[(i, j)]) for j in range(a.ncb)])
               for i in range(a.nrb)}
        return be.like(a, out, cols=1)
    out = {(0, j): be.submit(B.add_all, *[be.submit(B.apply, op, a.blocks[(i, j)]) for i in range(a.nrb)])
           for j in range(a.ncb)}
    return be.like(a, out, rows=1)


def _t(be: DaskBackend, a: Any) -> Any:
    return be.like(a, {(j, i): be.submit(B.apply, "t", f) for (i, j), f in a.blocks.items()},
                   rows=a.cols, cols=a.rows)
