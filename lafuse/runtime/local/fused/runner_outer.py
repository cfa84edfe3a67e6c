"""Calling outer-template kernels (see gen_outer for the loop structure)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lafuse.codegen.emit import Canon
from lafuse.codegen.prims import kcombine
from lafuse.hops.cplan import (
    CELL,
    COLVEC,
    FULL_AGG,
    LEFT_MM,
    MAIN,
    NO_AGG,
    OUTER_U,
    OUTER_V,
    ROWVEC,
    SCALAR,
)
from lafuse.runtime.local.fused.runner import (
    E1,
    E2,
    Mat,
    as_mat,
    blocks,
    dense,
    launch,
    make_csr,
    scalar,
    vector,
)
from lafuse.sparse import sp


def _transposed(x: Mat) -> Mat:
    """The CSR of t(x) (LEFT_MM iterates t(X)); dense inputs are read transposed in place."""
    if not x.sparse:
        return x
    n, m = x.shape
    t = sp.csr_array((x.d, x.i, x.p), shape=(n, m)).T.tocsr()
    t.sort_indices()
    return as_mat(t, "t(X)")


def run_outer(c: Canon, kernel: Any, vals: dict[int, Any], lits: np.ndarray) -> Any:
    plan = c.plan
    trans = plan.agg == LEFT_MM
    ms = next(s for s, a in c.access.items() if a == MAIN)
    main = as_mat(vals[ms], "the main input")
    n, m = main.shape
    sc = np.zeros(max(c.access, default=-1) + 1)
    args: list[Any] = []
    rank = -1
    for s in sorted(c.access):
        acc, v = c.access[s], vals[s]
        what = f"input {c.perm[s]} ({acc})"
        if acc == MAIN:
            args += (_transposed(main) if trans else main).args()
        elif acc == SCALAR:
            sc[s] = scalar(v, what)
        elif acc == CELL:
            x = as_mat(v, what)
            if x.shape != (n, m):
                raise ValueError(f"{what} has shape {x.shape}, expected {(n, m)}")
            args += [*(_transposed(x) if trans else x).args(), int(x.sparse)]
        elif acc == ROWVEC:
            args.append(vector(v, (n, 1), what))
        elif acc == COLVEC:
            args.append(vector(v, (1, m), what))
        elif acc in (OUTER_U, OUTER_V):
            f = dense(v, what)
            rows = n if acc == OUTER_U else m
            if f.shape[0] != rows or (rank >= 0 and f.shape[1] != rank):
                raise ValueError(f"{what} has shape {f.shape}, expected {rows} rows"
                                 + (f" and {rank} columns" if rank >= 0 else ""))
            rank = f.shape[1]
            args.append(f)
        else:
            raise ValueError(f"input access {acc!r} is not valid in an outer plan")
    mm = E2
    out, outd, parts = E2, E1, np.zeros((0, 1, 2))
    nrows, ncols = (m, n) if trans else (n, m)
    if c.mm_slot >= 0:
        mm = dense(vals[c.mm_slot], "the mm input")
        if mm.shape[0] != ncols:
            raise ValueError(f"the mm input has shape {mm.shape}, expected {ncols} rows")
        out = np.zeros((nrows, mm.shape[1]))
    rpb, nb = blocks(nrows, ncols)
    mode = 1 if main.sparse else 0
    if plan.agg == NO_AGG:
        if main.sparse:
            outd = np.zeros(main.nnz)
        else:
            out = np.zeros((n, m))
    elif plan.agg == FULL_AGG:
        parts = np.zeros((nb, 1, 2))
    launch(kernel, nb, mode, n, m, rpb, nb, lits, sc, *args, mm, out, outd, parts)
    if plan.agg == NO_AGG:
        return make_csr(outd, main) if main.sparse else out
    if plan.agg == FULL_AGG:
        return float(kcombine(np.ascontiguousarray(parts[:, 0, :])))
    return out
