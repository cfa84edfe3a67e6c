"""Code generation for fused operators (paper 000 §4): CPlan -> Numba kernel.

``reference.py`` is the pure-NumPy interpreter of CPlans, the living spec the generated kernels
are differential-tested against; ``numba_gen.py`` generates kernel source per template,
``runner*.py`` call kernels on actual inputs, ``cache.py`` is the two-level plan cache.

Public API: :func:`compile_plan` (returns a :class:`FusedOperator`), :func:`cache_stats`,
:func:`clear_memory_cache`, :func:`is_cached`, :func:`predict_mode` / :func:`precompile` (a kernel
compiled ahead of its first call, in the input-format mode its inputs' sizes predict),
:func:`invalidate` / :func:`clear_finite_cache` (the memo of "side input holds no NaN/Inf" checks,
for arrays updated in place).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from lafuse.codegen import finite, prims
from lafuse.codegen.cache import ByMode, PlanCache, load_without_registries
from lafuse.codegen.emit import Canon, canon
from lafuse.codegen.runner import set_threads
from lafuse.hops.cplan import COLVEC, MAIN, ROWVEC, SCALAR, CPlan

_CACHE = PlanCache()
for _f in vars(prims).values():  # runners call some primitives from Python (kcombine, all_finite)
    if hasattr(_f, "py_func"):
        load_without_registries(_f)


def _run(c: Canon, kernel: Any, vals: dict[int, Any], lits: np.ndarray) -> Any:
    t = c.plan.template
    if t in ("cell", "magg"):
        from lafuse.codegen.runner import run_cell

        return run_cell(c, kernel, vals, lits)
    if t == "outer":
        from lafuse.codegen.runner_outer import run_outer

        return run_outer(c, kernel, vals, lits)
    from lafuse.codegen.runner_row import run_row

    return run_row(c, kernel, vals, lits)


def _empty_inputs(c: Canon) -> dict[int, Any]:
    """Inputs of a 0 x 0 problem (the warm-up call that makes Numba compile or load the kernel)."""
    shapes = {ROWVEC: (0, 1), COLVEC: (1, 0)}
    vals: dict[int, Any] = {}
    for s, acc in c.access.items():
        vals[s] = 0.0 if acc == SCALAR else np.zeros(shapes.get(acc, (0, 0)))
    if c.mm_slot >= 0:
        vals[c.mm_slot] = np.zeros((0, 0))
    if c.plan.template == "row":
        from lafuse.codegen.runner_row import fit_empty_inputs

        fit_empty_inputs(c, vals)
    return vals


class FusedOperator:
    """A compiled fused operator for one plan: the kernel is shared by all plans of the same
    canonical hash; this object holds the plan's input permutation and literal values."""

    def __init__(self, plan: CPlan, c: Canon, hash: str, source: str, kernel: Any,
                 lits: tuple[float, ...], threads: int | None) -> None:
        self.plan = plan
        self.hash = hash
        self.source = source
        self.threads = threads
        self._canon = c
        self._kernel = kernel
        self._lits = np.array(lits, dtype=np.float64)

    def __call__(self, inputs: list[Any]) -> Any:
        c = self._canon
        need = max(c.perm, default=-1) + 1
        if len(inputs) < need:
            raise ValueError(f"fused operator expects {need} inputs, got {len(inputs)}")
        vals = {s: inputs[c.perm[s]] for s in c.access}
        if c.mm_slot >= 0:
            vals[c.mm_slot] = inputs[c.perm[c.mm_slot]]
        set_threads(self.threads)
        return _run(c, self._kernel, vals, self._lits)

    def __repr__(self) -> str:
        return f"FusedOperator({self.plan.template}, {self.hash})"


def compile_plan(plan: CPlan, threads: int | None = None, eager: bool = True) -> FusedOperator:
    """The fused operator of ``plan``, compiled or found in the in-memory or disk plan cache. Its
    kernel has one function per mode of its inputs' formats (cache.ByMode), each compiled or loaded
    on first use; ``eager`` does the dense one now (the warm-up call on empty inputs runs that mode).
    The runtime passes ``eager=False``: a script whose inputs are CSR then never compiles the dense
    mode, and an operator that never runs compiles nothing."""
    from lafuse.codegen.numba_gen import generate

    key, _, lits = plan.canonical_key()
    c = canon(plan)
    with _BY_MODE_LOCK:
        kernels = _BY_MODE.get(key)
        if kernels is not None:
            _CACHE.stats.mem_hits += 1
        else:
            def warm(kernel: Any) -> None:
                _run(c, kernel, _empty_inputs(c), np.zeros(len(lits)))

            kernels = ByMode(key, _PROBED.pop(key, "") or generate(plan, key), _CACHE, warm)
            _BY_MODE[key] = kernels
            while len(_BY_MODE) > _CACHE.maxsize:  # (as many plans as the memory cache keeps)
                _BY_MODE.pop(next(iter(_BY_MODE)))
    if eager:
        kernels.for_mode(0)
    return FusedOperator(plan, c, key, kernels.source, kernels, lits, threads)


def predict_mode(plan: CPlan, inputs: Sequence[tuple[int, int, bool]]) -> int:
    """The mode (the input-format variant, cache.ByMode) a call of ``plan`` runs whose inputs, by plan
    position, have these (rows, cols, CSR or not): the optimizer's sizes, before any value exists.
    Why: a kernel compiled ahead of its first call (a deferred compile) is compiled in that mode; the
    dense mode compiled instead left KMeans' row kernels (block-product mode) to a cold compile of
    1.2-2.0 s each in the next run, which the optimizer had taken for cache loads."""
    c = canon(plan)
    try:
        if plan.template == "row":
            from lafuse.codegen.runner_row import predict_mode as row

            return row(c, inputs)
        if plan.template == "outer":
            return int(any(inputs[c.perm[s]][2] for s, a in c.access.items() if a == MAIN))
        from lafuse.codegen.runner import predict_cell_mode

        return predict_cell_mode(c, inputs, plan.canonical_key()[2])
    except (ValueError, IndexError, KeyError):  # sizes that do not fit the plan (guessed ones): dense
        return 0


def precompile(plan: CPlan, inputs: Sequence[tuple[int, int, bool]] | None = None) -> bool:
    """Compile (into the disk cache) the kernel function a call with ``inputs`` (``predict_mode``; the
    dense mode without them) would run, unless it is cached; True if it compiled."""
    mode = 0 if inputs is None else predict_mode(plan, inputs)
    if is_cached(plan, mode):
        return False
    compile_plan(plan, eager=False)._kernel.for_mode(mode)
    return True


# canonical hash -> its kernels by mode, the most recently compiled plans
_BY_MODE: dict[str, ByMode] = {}
_BY_MODE_LOCK = threading.RLock()


def is_cached(plan: CPlan, mode: int | None = None) -> bool:
    """True if running ``plan`` would not run a cold compile (memory or disk cache hit): in ``mode``,
    else in the mode of some input formats, those an earlier run used."""
    from lafuse.codegen.numba_gen import MODES, generate, specialize

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


__all__ = ["FusedOperator", "compile_plan", "cache_stats", "clear_memory_cache", "is_cached",
           "invalidate", "clear_finite_cache", "record_import_time"]
