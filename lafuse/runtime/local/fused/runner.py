"""Calling generated kernels: input checks and formats, block sizes, outputs and their finishing.

Why here and not in the generated source: everything that depends on the actual inputs (formats,
shapes, finiteness, which loop nest to run) is decided once per call in Python; the generated
kernels only hold the loops, so one compiled kernel serves every input format.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from lafuse import threads as pools
from lafuse.codegen import finite
from lafuse.codegen.emit import Canon
from lafuse.codegen.gen_cell import isect_ok
from lafuse.codegen.prims import kcombine, kcombine_cols
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COLVEC,
    FULL_AGG,
    MAIN,
    NO_AGG,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    finite_required,
)
from lafuse.sparse import sp

F64 = np.float64
E2 = np.empty((0, 0))
E1 = np.empty(0)
EI = np.empty(0, dtype=np.int32)
BLOCK_CELLS = 1 << 14  # minimum work per block
MAX_BLOCKS = 64
ACC_BUDGET = 1 << 24  # doubles of per-block partial outputs
# cells of the main input per block of a row kernel. Why: the block body reads its block once per
# BLAS product (``X %*% B``, then ``t(X) %*% Q``), and the second read must hit the cache. With
# n/MAX_BLOCKS rows, multiLogReg's Hessian-vector kernel over 1e6 x 100 had 12.5 MB blocks per
# thread and took 158.7 ms per call; 120 ms with this cap (2^15: 119 ms, 2^19: 137 ms). NumPy's two
# products alone take 74 + 63 ms there
ROW_BLOCK_CELLS = 1 << 17
# cells of the main input a pool thread must get before a kernel call fans out to the pool: handing
# blocks to the pool and waiting for them costs 130-150 us here (a trivial nogil Numba function run by
# two pool threads against twice in the calling thread: 149 us vs 3 us; 288 vs 200 us for 100 us of
# work each), more than a mini-batch's work. AutoEncoder's row kernels over 256 x 100 blocks (2 blocks)
# took 722 us a call through the pool and 294 us in the calling thread
PARALLEL_CELLS = 1 << 16


@dataclass
class Mat:
    """A matrix input in kernel form: the dense array or the canonical CSR arrays (the other as
    empty dummies); ``orig`` is the caller's object (the key of the finiteness memo)."""

    shape: tuple[int, int]
    sparse: bool
    a: np.ndarray
    d: np.ndarray
    i: np.ndarray
    p: np.ndarray
    orig: Any

    @property
    def nnz(self) -> int:
        return int(self.p[-1]) if self.sparse and len(self.p) else 0

    def args(self) -> list[Any]:
        return [self.a, self.d, self.i, self.p]


def kernel_array(a: np.ndarray, dtype: Any = F64) -> np.ndarray:
    """A C-contiguous, writeable-typed array for a kernel argument. Numba types a read-only array
    (pandas' to_numpy under copy-on-write, np.load with mmap) apart from a writeable one, so passing
    one would compile a second specialization of a cached kernel (~3 s) on its first call. Kernels
    never write their inputs: a read-only view of writeable memory is passed as a writeable view;
    memory nobody may write is copied."""
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.flags.writeable:
        return a
    v = a.view()
    try:
        v.flags.writeable = True
    except ValueError:
        return a.copy()
    return v


def _index(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.int32:
        return kernel_array(a, np.int32)
    if a.size == 0 or int(a.max()) < 2**31 - 1:
        return a.astype(np.int32)
    return kernel_array(a, np.int64)


def is_matrix(v: Any) -> bool:
    return isinstance(v, np.ndarray) or sp.issparse(v)


def as_mat(v: Any, what: str) -> Mat:
    if sp.issparse(v):
        c = v if v.format == "csr" else v.tocsr()
        if c.dtype != F64:
            c = c.astype(F64)
        if not c.has_canonical_format:
            c = c.copy()
            c.sum_duplicates()
        return Mat(c.shape, True, E2, kernel_array(c.data), _index(c.indices), _index(c.indptr), v)
    if not isinstance(v, np.ndarray):
        raise ValueError(f"{what} must be a matrix, got {type(v).__name__}")
    if v.ndim != 2:
        raise ValueError(f"{what} must be a 2-D matrix, got {v.ndim}-D")
    return Mat(v.shape, False, kernel_array(v), E1, EI, EI, v)


def dense(v: Any, what: str) -> np.ndarray:
    if sp.issparse(v):
        return kernel_array(v.toarray())
    if not isinstance(v, np.ndarray) or v.ndim != 2:
        raise ValueError(f"{what} must be a 2-D matrix")
    return kernel_array(v)


def vector(v: Any, shape: tuple[int, int], what: str) -> np.ndarray:
    d = dense(v, what)
    if d.shape != shape:
        raise ValueError(f"{what} has shape {d.shape}, expected {shape}")
    return d.reshape(-1)


def scalar(v: Any, what: str) -> float:
    if is_matrix(v):
        if v.shape != (1, 1):
            raise ValueError(f"{what} must be a scalar or 1x1 matrix, got shape {v.shape}")
        return float(dense(v, what)[0, 0])
    return float(v)


def blocks(n: int, m: int, acc: int = 0, max_cells: int = 0) -> tuple[int, int]:
    """Rows per block and block count: a function of the shape only (never of the thread count),
    so the order in which partials combine, and hence the result, is fixed. ``max_cells`` caps a
    block's cells of the main input (row kernels, which read a block more than once); the budget of
    per-block partials comes first."""
    rpb = max(1, -(-BLOCK_CELLS // max(m, 1)), -(-n // MAX_BLOCKS))
    if max_cells > 0:
        rpb = min(rpb, max(1, max_cells // max(m, 1)))
    if acc > 0:
        rpb = max(rpb, -(-n // max(1, ACC_BUDGET // acc)))
    return rpb, -(-n // rpb) if n > 0 else 0


_LOCAL = threading.local()


def set_threads(n: int | None) -> None:
    """Thread count of the kernel calls made by the calling thread (None: Numba's configured count)."""
    cap = int(getattr(numba.config, "NUMBA_NUM_THREADS", 1))
    _LOCAL.threads = cap if n is None else max(1, min(int(n), cap))


def threads() -> int:
    t = getattr(_LOCAL, "threads", None)
    if t is None:
        set_threads(None)
        t = _LOCAL.threads
    return int(t)


def _uses_blas(kernel: Any) -> bool:
    """The generated kernel calls BLAS (``prims.mm``, gen_row_block); a kernel that is not a Numba
    dispatcher is assumed to."""
    known = getattr(kernel, "uses_blas", None)
    if known is not None:
        return bool(known)
    code = getattr(getattr(kernel, "py_func", None), "__code__", None)
    return code is None or "mm" in code.co_names or "dot" in code.co_names


def launch(kernel: Any, nb: int, *args: Any) -> None:
    """Run ``kernel(b0, b1, *args)`` over blocks [0, nb) split into contiguous ranges, one per
    thread (the kernels release the GIL). Which thread runs a block never changes a result."""
    pick = getattr(kernel, "for_mode", None)  # cache.ByMode: the function of this mode (args[0])
    if pick is not None:
        kernel = pick(args[0])
    # every call site passes (mode, rows, cols, ...): a thread gets PARALLEL_CELLS of the main at least
    t = min(threads(), nb, max(1, args[1] * args[2] // PARALLEL_CELLS))
    blas = _uses_blas(kernel)
    if blas:  # Numba's np.dot calls SciPy's BLAS: loaded before its thread count is looked for
        import scipy.linalg.cython_blas  # noqa: F401
    # with products, BLAS at one thread in the calling thread too: a mini-batch's blocks are small, and
    # the BLAS Numba calls (SciPy's OpenBLAS) is another library than NumPy's, whose threads still spin
    # after the unfused products (AutoEncoder's row kernels over 256 x 100 blocks: 0.97-1.23 ms a call
    # with BLAS at 2 threads, 0.28 ms with 1)
    if t <= 1:
        if blas:
            with pools.blas_single():
                kernel(0, nb, *args)
        else:
            kernel(0, nb, *args)
        return
    pools.run_ranges(kernel, [nb * k // t for k in range(t + 1)], *args, one_blas=blas)


def ordered_min_max(vals: np.ndarray, op: str) -> float:
    r = np.inf if op == "min" else -np.inf
    for x in vals:
        if x != x:
            return float("nan")
        r = min(r, x) if op == "min" else max(r, x)
    return float(r)


def make_csr(data: np.ndarray, m: Mat) -> Any:
    r = sp.csr_array((data, m.i.copy(), m.p.copy()), shape=m.shape)
    r.eliminate_zeros()
    return r


# ------------------------------------------------------------------------------------ cell


def cell_args(c: Canon, vals: dict[int, Any]) -> tuple[Mat, list[Any], np.ndarray, bool, bool]:
    """Checked kernel arguments of the input slots: (main, args, scalar array, sparse iteration
    allowed by the data, some CELL input is CSR). Skipping a CSR main's zeros needs only the inputs of
    :func:`cplan.finite_required` to be finite: a sparse zero annihilates ``*``/``&`` with a
    full-size operand whatever it holds, as in the unfused kernels."""
    ms = next(s for s, a in c.access.items() if a == MAIN)
    main = as_mat(vals[ms], "the main input")
    n, m = main.shape
    sc = np.zeros(max(c.access, default=-1) + 1)
    args: list[Any] = []
    need = c.memo.get("finite")
    if need is None:
        need = c.memo["finite"] = {c.slot[p] for p in finite_required(c.plan) if p in c.slot}
    fin = True
    csr_side = False
    for s in sorted(c.access):
        acc, v = c.access[s], vals[s]
        what = f"input {c.perm[s]} ({acc})"
        if acc == MAIN:
            args += main.args()
            continue
        if acc == SCALAR:
            sc[s] = scalar(v, what)
        elif acc == CELL:
            x = as_mat(v, what)
            if x.shape != (n, m):
                raise ValueError(f"{what} has shape {x.shape}, expected {(n, m)}")
            args += [*x.args(), int(x.sparse)]
            csr_side = csr_side or x.sparse
            if fin and main.sparse and x.sparse and c.plan.sparse_safe:
                # two CSR operands of * combine over the union of their patterns (-inf * 0 is
                # NaN where only this one stores a value): skipping the main's zeros needs it finite
                fin = finite.is_finite(v)
        elif acc == ROWVEC:
            args.append(vector(v, (n, 1), what))
        elif acc == COLVEC:
            args.append(vector(v, (1, m), what))
        else:
            raise ValueError(f"input access {acc!r} is not valid in a cell plan")
        if fin and main.sparse and s in need:  # only then does the answer matter
            fin = bool(np.isfinite(sc[s])) if acc == SCALAR else finite.is_finite(v)
    return main, args, sc, fin, csr_side


def _cell_flags(c: Canon, args: list[Any]) -> list[Any]:
    """The ``f{s}`` arguments (1 if CSR) of the CELL slots, in slot order."""
    out, pos = [], 0
    for s in sorted(c.access):
        acc = c.access[s]
        if acc in (MAIN, CELL):
            pos += 4
            if acc == CELL:
                out.append(args[pos])
                pos += 1
        elif acc != SCALAR:
            pos += 1
    return out


def predict_cell_mode(c: Canon, inputs: Sequence[tuple[int, int, bool]], lits: Sequence[float]) -> int:
    """The mode ``run_cell`` picks for inputs (plan positions) of these (rows, cols, CSR or not),
    their values taken as finite (a value that is not turns mode 2 or 3 into 1 at the call)."""
    main_sparse = any(inputs[c.perm[s]][2] for s, a in c.access.items() if a == MAIN)
    cells = [inputs[c.perm[s]][2] for s, a in c.access.items() if a == CELL]
    if not main_sparse:
        return 1 if any(cells) else 0
    if not (c.plan.sparse_safe and c.consts_finite and all(np.isfinite(x) for x in lits)):
        return 1
    return 3 if isect_ok(c) and all(cells) else 2


def run_cell(c: Canon, kernel: Any, vals: dict[int, Any], lits: np.ndarray) -> Any:
    plan = c.plan
    main, args, sc, fin, csr_side = cell_args(c, vals)
    n, m = main.shape
    mode = 0
    if main.sparse:
        mode = 2 if plan.sparse_safe and fin and c.consts_finite and bool(np.all(np.isfinite(lits))) else 1
    elif csr_side:
        mode = 1
    if mode == 2 and isect_ok(c) and all(isinstance(a, int) and a for a in _cell_flags(c, args)) \
            and finite.is_finite(main.orig):
        mode = 3  # all CELL inputs CSR and finite (checked above), the main finite: merge-intersect
    magg = plan.template == "magg"
    agg = FULL_AGG if magg else plan.agg
    ops = list(plan.agg_ops) if magg else [plan.agg_op]
    out, outd, parts = E2, E1, np.empty((0, 0, 0))
    rpb, nb = blocks(n, m, 2 * m if agg == COL_AGG else 0)
    if agg == NO_AGG:
        if mode == 3:
            outd = np.zeros(main.nnz)  # entries outside the intersection are zero
        elif mode == 2:
            outd = np.empty(main.nnz)
        else:
            out = np.empty((n, m))
    elif agg == ROW_AGG:
        out = np.empty((n, 1))
    elif agg == FULL_AGG:
        parts = np.zeros((nb, len(ops), 2))
    else:
        parts = np.zeros((nb, 2, m))
        if ops[0] in ("min", "max"):
            parts[:, 0, :] = np.inf if ops[0] == "min" else -np.inf
    launch(kernel, nb, mode, n, m, rpb, nb, lits, sc, *args, out.reshape(-1) if agg == ROW_AGG else out,
           outd, parts)
    if agg == NO_AGG:
        return make_csr(outd, main) if mode >= 2 else out
    if agg == ROW_AGG:
        if m == 0:
            out[:] = 0.0
        return out
    unseen = mode >= 2
    if agg == FULL_AGG:
        res = []
        for r, op in enumerate(ops):
            if op in ("sum", "sumsq"):
                res.append(float(kcombine(np.ascontiguousarray(parts[:, r, :]))))
            else:
                v = ordered_min_max(parts[:, r, 0], op)
                if unseen and main.nnz < n * m:
                    v = ordered_min_max(np.array([v, 0.0]), op)
                res.append(v)
        return tuple(res) if magg else res[0]
    if ops[0] in ("sum", "sumsq"):
        col = kcombine_cols(parts)
    else:
        with np.errstate(all="ignore"):
            red = np.minimum if ops[0] == "min" else np.maximum
            col = np.full(m, np.inf if ops[0] == "min" else -np.inf)
            for b in range(nb):
                col = red(col, parts[b, 0, :])
            if unseen:
                gaps = np.bincount(main.i, minlength=m) < n
                col = np.where(gaps, red(col, 0.0), col)
    if n == 0:
        col[:] = 0.0
    return col.reshape(1, m)
