"""One thread budget (``Config.threads``) for the whole run: kernel pools, parfor, and BLAS.

Why BLAS too: unfused ``%*%`` calls OpenBLAS, which starts its own threads (one per core by
default) whatever lafuse's ``threads`` says; a user who asks for one thread (a batch job beside
others, or bit-reproducible products) must get one. BLAS splits some products differently by
thread count, so their last bits depend on it: measured here on 20000x300 operands, ``X %*% Y``
(300x200) differed in 26% of the cells (at most 6.1e-16 relative) and ``t(X) %*% w`` in 1.3% (6.1e-15)
between one and two BLAS threads, while ``X %*% v`` and ``t(X) %*% X`` were bit-identical.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

_BUDGET: list[int] = []  # the run's thread budget while blas_limited is active (innermost last)
_BLAS: list[Any] = []  # threadpoolctl's controllers of the loaded BLAS libraries, found once


@contextlib.contextmanager
def blas_limited(threads: int) -> Iterator[None]:
    """Cap BLAS at ``threads`` for the block (threadpoolctl scans the loaded libraries, ~50 ms, so
    only when the budget is below the machine's core count, which BLAS uses by default); operators
    that split work over threads themselves read the budget (``budget``)."""
    _BUDGET.append(threads)
    try:
        if threads >= (os.cpu_count() or 1):
            yield
            return
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        _BUDGET.pop()


def budget() -> int:
    """Threads an operator may split its work over: the run's budget, at most the machine's cores."""
    cores = os.cpu_count() or 1
    return max(1, min(_BUDGET[-1], cores)) if _BUDGET else cores


@contextlib.contextmanager
def blas_single() -> Iterator[None]:
    """Every loaded BLAS at one thread while the block runs, the counts restored after: for operators
    that call BLAS from several threads of their own (OpenBLAS's pthreads build keeps one count per
    library, whichever thread sets it). Finding the libraries takes ~4 ms, once per process."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController().select(user_api="blas").lib_controllers)
    libs = _BLAS[0]
    prev = [lib.num_threads for lib in libs]
    for lib in libs:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, n in zip(libs, prev):
            lib.set_num_threads(n)
