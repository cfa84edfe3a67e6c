"""Code generation for fused operators (paper 000 §4): CPlan -> Numba kernel source -> compiled kernels.

``numba_gen.py`` generates kernel source per template, ``cache.py`` is the two-level plan cache
(memory, and Numba's disk cache under the source's hash). Calling a kernel on actual values is the
runtime's work (runtime.local.fused: the runners, the fused operator, which mode a call runs);
runtime.local.reference is the pure-NumPy interpreter of CPlans the kernels are diffed against.

Public API: :func:`kernels` (the kernel set of a plan), :func:`is_cached`, :func:`cache_stats`,
:func:`clear_memory_cache`, :func:`invalidate` / :func:`clear_finite_cache` (the memo of "side
input holds no NaN/Inf" checks, for arrays updated in place).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lafuse.codegen import finite, prims
from lafuse.codegen.cache import ByMode, PlanCache, load_without_registries
from lafuse.codegen.numba_gen import MODES, generate, specialize
from lafuse.hops.cplan import CPlan

_CACHE = PlanCache()
for _f in vars(prims).values():  # runners call some primitives from Python (kcombine, all_finite)
    if hasattr(_f, "py_func"):
        load_without_registries(_f)


def kernels(plan: CPlan, warm: Callable[[Any], None]) -> ByMode:
    """The kernel set of ``plan``'s canonical hash (one function per input-format mode, cache.ByMode),
    found in memory or made from its generated source; each mode is compiled or loaded from the disk
    cache on first use, and ``warm(kernel)`` then runs it once on empty inputs (the caller's runner
    knows the kernel's arguments: runtime.local.fused)."""
    key = plan.canonical_key()[0]
    with _BY_MODE_LOCK:
        got = _BY_MODE.get(key)
        if got is not None:
            _CACHE.stats.mem_hits += 1
            return got
        got = ByMode(key, _PROBED.pop(key, "") or generate(plan, key), _CACHE, warm)
        _BY_MODE[key] = got
        while len(_BY_MODE) > _CACHE.maxsize:  # (as many plans as the memory cache keeps)
            _BY_MODE.pop(next(iter(_BY_MODE)))
    return got


# canonical hash -> its kernels by mode, the most recently compiled plans
_BY_MODE: dict[str, ByMode] = {}
_BY_MODE_LOCK = threading.RLock()


def is_cached(plan: CPlan, mode: int | None = None) -> bool:
    """True if running ``plan`` would not run a cold compile (memory or disk cache hit): in ``mode``,
    else in the mode of some input formats, those an earlier run used."""
    key = plan.canonical_key()[0]
    kernels = _BY_MODE.get(key)
    if kernels is not None and (kernels.loaded() if mode is None else mode in kernels.modes()):
        return True
    source = _PROBED.get(key)
    if source is None:  # generating the source costs ~7 ms; the optimizer probes at every recompile
        try:
            source = generate(plan, key)
        except ValueError:
            return False
        if len(_PROBED) >= 1024:
            _PROBED.clear()
        _PROBED[key] = source
    modes = MODES[plan.template] if mode is None else (mode,)
    return _CACHE.on_disk(key, *(specialize(source, m) for m in modes))


_PROBED: dict[str, str] = {}  # canonical hash -> generated source of the plans is_cached probed


def cache_stats() -> dict[str, Any]:
    return _CACHE.stats.as_dict()


def record_import_time(seconds: float) -> None:
    """The first import of this package (Numba, llvmlite, the primitives) by the runtime: the
    part of Numba's start-up that no kernel load measures."""
    _CACHE.stats.import_time += seconds


def clear_memory_cache() -> None:
    with _BY_MODE_LOCK:
        _BY_MODE.clear()
    _CACHE.clear_memory()


def invalidate(arr: Any) -> None:
    finite.invalidate(arr)


def clear_finite_cache() -> None:
    finite.clear()


__all__ = ["kernels", "cache_stats", "clear_memory_cache", "is_cached", "invalidate", "clear_finite_cache",
           "record_import_time"]
