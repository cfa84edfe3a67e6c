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
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

_BUDGET: list[int] = []  # the run's thread budget while blas_limited is active (innermost last)
_SETTERS: dict[bool, list[Callable[[int], int]]] = {}  # blas_setters() by SciPy's BLAS loaded
_POOLS: dict[int, ThreadPoolExecutor] = {}  # pool(t)
_LOCK = threading.Lock()
_LOCAL = threading.local()


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
        # deferred: threadpoolctl, only when a thread count is set
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        _BUDGET.pop()


def budget() -> int:
    """Threads an operator may split its work over: the run's budget, at most the machine's cores."""
    cores = os.cpu_count() or 1
    return max(1, min(_BUDGET[-1], cores)) if _BUDGET else cores


def pool(t: int) -> ThreadPoolExecutor:
    """The process's executor of ``t`` worker threads, shared by every operator that splits its work
    itself (fused kernels, the blocked mmchain): started once, not per call."""
    with _LOCK:
        p = _POOLS.get(t)
        if p is None:
            p = _POOLS[t] = ThreadPoolExecutor(max_workers=t, thread_name_prefix="lafuse-pool")
    return p


def run_ranges(fn: Callable[..., Any], cuts: Sequence[int], *args: Any, one_blas: bool = False) -> list[Any]:
    """``fn(lo, hi, *args)`` for each range ``[cuts[k], cuts[k + 1])``, one per thread of the shared
    pool, the results in range order (so how they combine never depends on scheduling). ``one_blas``:
    ``fn`` calls BLAS, from every thread at once, so each BLAS runs at one thread meanwhile: one that
    also spreads each product over all cores oversubscribes them (multiLogReg's 1e6 x 10
    Hessian-vector row kernel on 2 threads: 16-18 ms with BLAS at 2 threads per call, 8.4 ms with 1)."""
    p = pool(len(cuts) - 1)
    run = partial(_on_one_blas_thread, fn) if one_blas else fn
    with blas_single() if one_blas else contextlib.nullcontext():
        futs = [p.submit(run, cuts[k], cuts[k + 1], *args) for k in range(len(cuts) - 1)]
        return [f.result() for f in futs]


def run_taken(fn: Callable[..., Any], cuts: Sequence[int], t: int, *args: Any) -> None:
    """``fn(lo, hi, *args)`` for each range ``[cuts[k], cuts[k + 1])``, on the calling thread and
    ``t - 1`` threads of the shared pool, each taking the next range no thread has taken until none
    is left. Why not a fixed range per thread (run_ranges): a thread whose core another process
    takes for a moment then runs fewer ranges instead of holding up the rest (on 2 cores, an idle
    Dask cluster's monitors and heartbeats beside the run). ``fn`` writes its results by range, so
    which thread ran one never shows in them."""
    taken = itertools.count()  # (its next() is one bytecode-free call: atomic under the GIL)
    n = len(cuts) - 1

    def take() -> None:
        for k in taken:
            if k >= n:
                return
            fn(cuts[k], cuts[k + 1], *args)

    futs = [pool(t - 1).submit(take) for _ in range(t - 1)] if t > 1 else []
    try:
        take()
    finally:  # (a failure here still waits for the pool's ranges: they write into the caller's arrays)
        for f in futs:
            f.result()


def _on_one_blas_thread(fn: Callable[..., Any], *args: Any) -> Any:
    blas_single_thread()
    return fn(*args)


def _blas_setters() -> list[Callable[[int], int]]:
    """For every loaded BLAS, a function that sets its thread count and returns the previous one:
    the library's calling-thread setter where it has one (OpenBLAS >= 0.3.27, MKL), else
    threadpoolctl's."""
    try:
        # deferred: threadpoolctl, only when a thread count is set
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    out: list[Callable[[int], int]] = []
    for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
        dyn = getattr(lib, "dynlib", None)
        local = [getattr(dyn, n, None) for n in ("openblas_set_num_threads_local", "mkl_set_num_threads_local")]
        fn = next((f for f in local if f is not None), None)
        out.append(fn if fn is not None else _via_controller(lib))
    return out


def _via_controller(lib: Any) -> Callable[[int], int]:
    def set_count(n: int) -> int:
        prev = int(lib.num_threads)
        lib.set_num_threads(n)
        return prev

    return set_count


def blas_setters() -> list[Callable[[int], int]]:
    """``_blas_setters()`` of the libraries loaded now, found once per process, and once more after
    SciPy's BLAS (which Numba's ``np.dot`` calls) has been loaded. Not loaded here: SciPy's linear
    algebra takes ~0.16 s to import, which the blocked mmchain (NumPy's BLAS only) need not pay."""
    scipy_blas = "scipy.linalg.cython_blas" in sys.modules
    with _LOCK:
        found = _SETTERS.get(scipy_blas)
        if found is None:
            found = _SETTERS[scipy_blas] = _blas_setters()
    return found


@contextlib.contextmanager
def blas_single() -> Iterator[None]:
    """Every loaded BLAS at one thread while the block runs, the calling thread's counts restored
    after: for operators that call BLAS from several threads of their own. Why restored: OpenBLAS's
    pthreads build (NumPy's and SciPy's wheels) keeps one count per library, whichever thread sets
    it; left at one, NumPy's unfused products ran on one thread for the rest of the process (after
    one fused GNMF row kernel, ``t(W) %*% X`` at 5e4 x 1000 took 47 ms instead of 33). Pool threads
    also call ``blas_single_thread`` (a BLAS whose count is per thread, MKL)."""
    setters = blas_setters()
    prev = [fn(1) for fn in setters]
    try:
        yield
    finally:
        for fn, p in zip(setters, prev, strict=True):
            fn(p)


def blas_single_thread() -> None:
    """One BLAS thread for the calling pool thread, set once per thread and kept (pool threads run
    only such work): where the count is per thread, the caller's ``blas_single`` does not reach them."""
    setters = blas_setters()
    if getattr(_LOCAL, "one_blas", None) is setters:  # (set again once SciPy's BLAS has been found)
        return
    for fn in setters:
        fn(1)
    _LOCAL.one_blas = setters
