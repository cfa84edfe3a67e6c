"""Parallel parfor: iterations run on a thread pool when their results are independent
left-indexed slices; otherwise the interpreter runs them sequentially.

Why threads: NumPy and SciPy release the GIL in their kernels, so iterations that do real
matrix work overlap; each iteration gets its own copy of the symbol table.

Result merge follows SystemDS's local result merge: for each result variable, the cells an
iteration changed (compared with the value before the loop) are copied into the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lafuse.hops.program import Block, ForBlock, GenericBlock, IfBlock, WhileBlock, iter_blocks
from lafuse.plan.instructions import DASK
from lafuse.runtime import deepstack
from lafuse.runtime.local.kernels_common import ieee_thread
from lafuse.runtime.values import choose_format, is_matrix, is_sparse, to_dense


def _lix_targets(blocks: list[Block]) -> tuple[set[str], set[str]]:
    """(variables only ever written through left indexing, variables written as a whole)."""
    lix: set[str] = set()
    whole: set[str] = set()
    for b in iter_blocks(blocks):
        if isinstance(b, GenericBlock):
            for r in b.dag.roots:
                if r.op == "twrite" and r.name:
                    (lix if r.inputs and r.inputs[0].op == "lix" else whole).add(r.name)
    return lix - whole, whole


def _reads_results(blocks: list[Block], results: set[str]) -> bool:
    """True if a result variable is read other than as the base of its own left indexing."""
    for b in iter_blocks(blocks):
        for d in ([b.dag] if isinstance(b, GenericBlock) else []):
            for h in d.hops():
                for k, i in enumerate(h.inputs):
                    if i.op == "tread" and i.name in results and not (h.op == "lix" and k == 0):
                        return True
        if isinstance(b, (IfBlock, WhileBlock)) and b.pred.reads() & results:
            return True
    return False


def _has_side_effects(blocks: list[Block]) -> bool:
    for b in iter_blocks(blocks):
        if isinstance(b, GenericBlock):
            for h in b.dag.hops():
                if h.op in ("print", "stop", "write", "fcall", "assert"):
                    return True
    return False


def run_parallel(interp: Any, b: ForBlock, values: Any, st: dict[str, Any]) -> bool:
    """Run the loop in parallel if safe; returns False (nothing done) when it must run sequentially."""
    vals = list(values)
    if len(vals) < 2 or _has_side_effects(b.body):
        return False
    results, whole = _lix_targets(b.body)
    live_after = b.live_out
    # variables assigned as a whole must be iteration-local: not needed after the loop
    if (whole - {b.var}) & live_after:
        return False
    if not results or any(not is_matrix(st.get(r)) for r in results):
        return False
    if _reads_results(b.body, results):
        return False
    originals = {r: st[r] for r in results}

    def one(v: Any) -> dict[str, Any]:
        local = dict(st)
        local[b.var] = v
        with ieee_thread():
            interp.exec_blocks(b.body, local)
        return {r: local[r] for r in results}

    # deep threads: an iteration may recurse as deeply as the main program (runtime.deepstack)
    outs = deepstack.parallel_map(one, vals, interp.cfg.threads)
    collect = interp.compiler.backends[DASK].collect  # (an iteration's result may be distributed: --exec dask)
    for r in results:
        base = to_dense(originals[r])
        merged = base.copy()
        for o in outs:
            new = to_dense(collect(o[r]))
            if new.shape != base.shape:
                raise ValueError(f"parfor result '{r}' changed shape")
            changed = ~((new == base) | (np.isnan(new) & np.isnan(base)))
            merged[changed] = new[changed]
        st[r] = choose_format(merged) if is_sparse(originals[r]) else merged
    st[b.var] = vals[-1]
    return True

