"""Dynamic recompilation: re-optimize a block's HOP DAG once the actual input sizes are known.

Why: sizes unknown at compile time (function parameters, data-dependent results) block
size-dependent rewrites such as matrix-multiply chain ordering and size-based constant folding.
At run time the symbol table knows every input's dims, so the block's DAG is copied, its TReads
get the real sizes, sizes are propagated, dynamic rewrites run, and the result is lowered. Plans
are cached per input signature (shapes, and the scalars that determine output sizes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.hops import sizes
from lafuse.hops.hop import MATRIX, SCALAR, Hop
from lafuse.hops.program import Dag, GenericBlock, copy_dag
from lafuse.hops.validate import user_size_conflict
from lafuse.plan import render
from lafuse.runtime import straight
from lafuse.runtime.dask.matrix import Blocked, any_matrix
from lafuse.runtime.values import is_matrix, nnz, nnz_estimate

MAX_CACHED_PLANS = 8
# ops whose scalar inputs determine output sizes
_SIZE_OPS = {"matrix", "rand", "Rand", "seq", "rix", "table", "aggregate", "sample"}


def size_scalars(dag: Dag) -> set[str]:
    """Scalar variables whose values feed a size-determining argument."""
    out: set[str] = set()
    for h in dag.hops():
        if h.op in _SIZE_OPS:
            ins = h.inputs
            if h.op == "rix" and len(ins) == 5:
                # X[i, ] has one row whatever i is, and X[lo:hi, ] has hi - lo + 1 rows whatever lo is:
                # index bounds do not enter the plan-cache key by value (else a loop over rows or
                # mini-batches recompiles on every iteration); range_spans keys the extent instead
                ins = [ins[0]]
            stack = [i for i in ins if i.dt == SCALAR]
            while stack:
                s = stack.pop()
                if s.op == "tread" and s.name:
                    out.add(s.name)
                stack.extend(i for i in s.inputs if i.dt == SCALAR)
    return out


def range_spans(dag: Dag) -> list[tuple[Hop, Hop]]:
    """(lower, upper) bounds of the ``X[lo:hi, ]`` / ``X[, lo:hi]`` ranges that are not literals: their
    extent ``hi - lo + 1``, not their values, is what the plan depends on (mini-batch slices
    ``X[(i-1)*b+1:min(n, i*b), ]`` have one extent for all full batches and one for the last)."""
    out: list[tuple[Hop, Hop]] = []
    seen: set[tuple[int, int]] = set()
    for h in dag.hops():
        if h.op == "rix" and len(h.inputs) == 5:
            for lo, hi in ((h.inputs[1], h.inputs[2]), (h.inputs[3], h.inputs[4])):
                key = (lo.id, hi.id)
                if key in seen or _same_scalar(lo, hi) or (lo.kind == "literal" and hi.kind == "literal"):
                    continue
                seen.add(key)
                out.append((lo, hi))
    return out


def _extent(lo: Hop, hi: Hop, st: dict[str, Any]) -> int | None:
    """The range's length as indexing will compute it, or None when a bound is not a simple expression
    of known scalars (or the range is empty: an error when it runs)."""
    n = sizes.range_len(lo, hi, None, st)
    return n if n > 0 else None


def _same_scalar(a: Hop, b: Hop) -> bool:
    return a is b or (a.op == b.op == "tread" and a.name is not None and a.name == b.name)


def signature(b: GenericBlock, st: dict[str, Any]) -> tuple:
    """The plan-cache key: the extent of each non-literal index range, the shape of each matrix the
    block reads, and the value of each scalar that determines a size (``size_scalars``), by position."""
    fn = b.signature_fn
    if fn is None:
        b.size_scalars = size_scalars(b.dag)
        fn = b.signature_fn = _signature_fn(b.dag, b.size_scalars)
    return fn(st)


_SCALAR_TYPES = (int, float, bool, str, type(None))


def _signature_fn(dag: Dag, sizers: set[str]) -> Callable[[dict[str, Any]], tuple]:
    """``signature`` of a block as one generated function of the symbol table: a mini-batch loop asks
    for it at every iteration, and the loop over the block's variables cost 19.6 us of it (MLP 200000 x
    64, 3126 iterations); generated, 12.6 us (6 us timed alone). An entry is a matrix's shape, else
    None, or a size scalar's value (never a tuple, so never equal to a shape)."""
    ns: dict[str, Any] = {"T": type, "ND": np.ndarray, "SC": _SCALAR_TYPES, "ismat": any_matrix,
                          "SPAN": sizes.span_len}

    def bind(value: Any) -> str:
        name = f"c{len(ns)}"
        ns[name] = value
        return name

    parts: list[str] = []
    lines = []
    for k, (lo, hi) in enumerate(range_spans(dag)):
        # the extent as _extent computes it; scalar_source leaves overflow to the caller
        body: list[str] = []
        a, b = sizes.scalar_source(lo, bind, body, "st"), sizes.scalar_source(hi, bind, body, "st")
        lines += ["try:", *(f" {ln}" for ln in body), f" e{k} = SPAN({a}, {b})",
                  "except (OverflowError, TypeError):", f" e{k} = -1"]
        parts.append(f"(e{k} if e{k} > 0 else None)")
    lines.append("g = st.get")
    for k, name in enumerate(sorted(dag.reads())):
        other = "v" if name in sizers else "None"
        lines += [f"v = g({name!r})",
                  f"s{k} = v.shape if T(v) is ND else ({other} if T(v) in SC else (v.shape if ismat(v) else {other}))"]
        parts.append(f"s{k}")
    lines.append(f"return ({', '.join(parts)}{',' if len(parts) == 1 else ''})")
    return straight.closure(ns, "sig(st)", lines, "<lafuse plan-cache key>")


def recompile_dag(dag: Dag, st: dict[str, Any], compiler: Any, exact_nnz: bool = False,
                  scalars: set[str] | None = None) -> Dag:
    """``scalars``: the scalar variables whose values may be used (they must be part of the plan
    cache key, or a cached plan would carry facts of another iteration's values). Range extents
    (``range_spans``) are used too: they are part of the key as well. The extents are evaluated on
    the copy's bound HOPs, which keep the ids and inputs of the original's."""
    new = copy_dag(dag)
    for h in new.hops():
        if h.op == "rix" and len(h.inputs) == 5:
            for (lo, hi), key in (((h.inputs[1], h.inputs[2]), "row_extent"), ((h.inputs[3], h.inputs[4]), "col_extent")):
                n = None if _same_scalar(lo, hi) else _extent(lo, hi, st)
                if n is not None:
                    h.params[key] = n
    names = scalars if scalars is not None else set(st)
    known = {k: v for k, v in st.items() if k in names and isinstance(v, (int, float, bool, str))}
    for h in new.hops():
        if h.op == "tread" and h.dt in (MATRIX, "unknown"):
            v = st.get(h.name or "")
            if v is not None and is_matrix(v):
                h.dt = MATRIX
                h.rows, h.cols = v.shape
                h.nnz = nnz(v) if exact_nnz else -1
            elif isinstance(v, Blocked):  # a distributed value: its dims (non-zeros per block unknown here)
                h.dt = MATRIX
                h.rows, h.cols = v.shape
    for h in new.hops():
        sizes.infer(h, known)
        msg = user_size_conflict(h)
        if msg is not None:
            raise DMLRuntimeError(msg, h.span)
    hints = {n: nnz_estimate(v) for n in new.reads() if is_matrix(v := st.get(n))}
    compiler.rewrite_dag(new, dynamic=True, known=known, hints=hints)
    return new


def plan_for(interp: Any, b: GenericBlock, st: dict[str, Any]) -> Any:
    sig = signature(b, st)
    cache = b.recompiled
    if cache is None:
        cache = b.recompiled = {}
    plan = cache.get(sig)
    if plan is not None:
        return plan
    t0 = time.perf_counter()
    dag = recompile_dag(b.dag, st, interp.compiler, scalars=b.size_scalars)
    plan = interp.compiler.lower_dag(dag, b.weight, st, recompile=True)
    if len(cache) >= MAX_CACHED_PLANS:
        cache.pop(next(iter(cache)))
    cache[sig] = plan
    stats = interp.stats
    if stats is not None:
        stats.recompiles += 1
        stats.recompile_time += time.perf_counter() - t0
    explain = interp.cfg.explain
    if explain in ("recompile_hops", "recompile_runtime"):
        text = render.explain_dag(dag, b) if explain == "recompile_hops" else render.explain_plan(plan, b)
        interp.compiler.explain_out.write(text + "\n")
    elif explain == "formats":
        explain_formats(interp, b, plan)
    return plan


def explain_formats(interp: Any, b: GenericBlock, plan: Any) -> None:
    """``--explain formats`` at run time: the format choice of a plan the run builds (with the formats
    its variables are stored in), where one was weighed."""
    if plan.layout is not None:
        lines = [render.generic_header(b)] + ["------" + ln for ln in plan.layout.render().splitlines()]
        interp.compiler.explain_out.write("\n".join(lines) + "\n")
