"""Memoized "holds no NaN/Inf" checks of side inputs.

Why: a sparse-safe kernel may skip the main input's zeros only when f(0, side values) is 0, which
fails exactly when a side input holds NaN or +-Inf (0 * NaN is NaN in the unfused result). The
check is a full pass over the side input's stored values, so it is cached per array object (its
``id``, dropped when the object dies); code that updates an array in place must call
:func:`invalidate`.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

import numpy as np

_cache: dict[int, bool] = {}
_lock = threading.Lock()


def _compute(v: Any) -> bool:
    # deferred: prims compiles with Numba; runtime.reuse forgets arrays without it
    from lafuse.codegen.prims import all_finite

    if hasattr(v, "tocsr"):
        data = np.asarray(v.data, dtype=np.float64)
    else:
        data = np.asarray(v, dtype=np.float64)
    if not data.flags.c_contiguous:
        data = np.ascontiguousarray(data)
    return bool(all_finite(data.reshape(-1)))


def is_finite(v: Any) -> bool:
    if not (isinstance(v, np.ndarray) or hasattr(v, "tocsr")):
        return math.isfinite(float(v))
    key = id(v)
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    r = _compute(v)
    try:
        weakref.finalize(v, _cache.pop, key, None)
    except TypeError:  # not weak-referenceable: no memo
        return r
    with _lock:
        _cache[key] = r
    return r


def invalidate(arr: Any) -> None:
    """Forget the cached check of ``arr`` (call after updating it in place)."""
    with _lock:
        _cache.pop(id(arr), None)


def clear() -> None:
    with _lock:
        _cache.clear()
