"""Distributed matrix products, one function per strategy of plan.mmstrategy (SystemDS's Spark
strategies, paper 003)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.plan import mmstrategy
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask import blocks as B

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend


def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    if ins.opcode != "%*%" and ins.chain is None:
        return None
    method = ins.method or mmstrategy.RMM
    return functools.partial(STRATEGIES[method], be)


def rmm(be: DaskBackend, a: Any, b: Any) -> Any:
    """C[i, j] = sum over k of A[i, k] %*% B[k, j], one task per output block (SystemDS's RMM: each
    input block goes to every task of its row or column of C)."""
    if a.bs != b.bs:  # pragma: no cover - one block size per run
        raise ValueError("operands of a distributed product must have one block size")
    out = {}
    for i in range(a.nrb):
        for j in range(b.ncb):
            pairs = [f for k in range(a.ncb) for f in (a.blocks[(i, k)], b.blocks[(k, j)])]
            out[(i, j)] = be.submit(B.mm_sum, *pairs)
    return be.like(a, out, cols=b.cols)


STRATEGIES: dict[str, Callable[..., Any]] = {mmstrategy.RMM: rmm}
