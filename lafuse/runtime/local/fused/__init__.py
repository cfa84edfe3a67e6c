"""Fused operators in this process: a plan's generated kernels (codegen.kernels) called on actual
values by the runners of its template (``runner.py``: cell and multi-aggregate, ``runner_row.py``,
``runner_outer.py``), which decide per call everything that depends on the values (formats,
shapes, finiteness, which loop nest runs, block sizes), so one compiled kernel serves every input
format.

Public API: :func:`compile_plan` (returns a :class:`FusedOperator`), :func:`predict_mode` /
:func:`precompile` (a kernel compiled ahead of its first call, in the input-format mode its inputs'
sizes predict).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lafuse import codegen
from lafuse.codegen.emit import Canon, canon
from lafuse.hops.cplan import COLVEC, MAIN, ROWVEC, SCALAR, CPlan
from lafuse.runtime.local.fused import runner, runner_outer, runner_row
from lafuse.runtime.local.fused.runner import set_threads


def _run(c: Canon, kernel: Any, vals: dict[int, Any], lits: np.ndarray) -> Any:
    t = c.plan.template
    if t in ("cell", "magg"):
        return runner.run_cell(c, kernel, vals, lits)
    if t == "outer":
        return runner_outer.run_outer(c, kernel, vals, lits)
    return runner_row.run_row(c, kernel, vals, lits)


def _empty_inputs(c: Canon) -> dict[int, Any]:
    """Inputs of a 0 x 0 problem (the warm-up call that makes Numba compile or load the kernel)."""
    shapes = {ROWVEC: (0, 1), COLVEC: (1, 0)}
    vals: dict[int, Any] = {}
    for s, acc in c.access.items():
        vals[s] = 0.0 if acc == SCALAR else np.zeros(shapes.get(acc, (0, 0)))
    if c.mm_slot >= 0:
        vals[c.mm_slot] = np.zeros((0, 0))
    if c.plan.template == "row":
        runner_row.fit_empty_inputs(c, vals)
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
    """The fused operator of ``plan``, its kernels compiled or found in the in-memory or disk plan
    cache (codegen.kernels). Its kernel has one function per mode of its inputs' formats, each
    compiled or loaded on first use; ``eager`` does the dense one now (the warm-up call on empty
    inputs runs that mode). The runtime passes ``eager=False``: a script whose inputs are CSR then
    never compiles the dense mode, and an operator that never runs compiles nothing."""
    key, _, lits = plan.canonical_key()
    c = canon(plan)

    def warm(kernel: Any) -> None:
        _run(c, kernel, _empty_inputs(c), np.zeros(len(lits)))

    ks = codegen.kernels(plan, warm)
    if eager:
        ks.for_mode(0)
    return FusedOperator(plan, c, key, ks.source, ks, lits, threads)


def predict_mode(plan: CPlan, inputs: Sequence[tuple[int, int, bool]]) -> int:
    """The mode (the input-format variant, cache.ByMode) a call of ``plan`` runs whose inputs, by plan
    position, have these (rows, cols, CSR or not): the optimizer's sizes, before any value exists.
    Why: a kernel compiled ahead of its first call (a deferred compile) is compiled in that mode; the
    dense mode compiled instead left KMeans' row kernels (block-product mode) to a cold compile of
    1.2-2.0 s each in the next run, which the optimizer had taken for cache loads."""
    c = canon(plan)
    try:
        if plan.template == "row":
            return runner_row.predict_mode(c, inputs)
        if plan.template == "outer":
            return int(any(inputs[c.perm[s]][2] for s, a in c.access.items() if a == MAIN))
        return runner.predict_cell_mode(c, inputs, plan.canonical_key()[2])
    except (ValueError, IndexError, KeyError):  # sizes that do not fit the plan (guessed ones): dense
        return 0


def precompile(plan: CPlan, inputs: Sequence[tuple[int, int, bool]] | None = None) -> bool:
    """Compile (into the disk cache) the kernel function a call with ``inputs`` (``predict_mode``; the
    dense mode without them) would run, unless it is cached; True if it compiled."""
    mode = 0 if inputs is None else predict_mode(plan, inputs)
    if codegen.is_cached(plan, mode):
        return False
    compile_plan(plan, eager=False)._kernel.for_mode(mode)
    return True


__all__ = ["FusedOperator", "compile_plan", "precompile", "predict_mode"]
