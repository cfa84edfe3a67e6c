"""Data-generation kernels: matrix(), rand(), seq() and sample().

SystemDS behaviour reproduced here (verified with the 3.4 jar):

* ``matrix("1 -1", r, c)`` needs exactly r*c values ("Invalid matrix string intialization"),
  parsed with Java's number syntax (``Infinity``, not ``Inf``); a matrix argument is reshaped
  row-major, or column-major (read and write) with ``byrow=FALSE``.
* ``seq`` accumulates ``from + incr + incr ...`` (so ``seq(0, 1, 0.1)`` ends in 0.9999999999999999),
  its length is SystemDS's ``getSeqLength``; an increment of 1 counts down when ``from > to``,
  other wrong-sign increments are errors.
* ``rand``: uniform in [min, max) (min > max is allowed), ``normal`` ignores min/max, ``poisson``
  uses ``lambda``. Uniform and normal values come from ``sdsrand``, a bit-exact emulation of
  SystemDS's generator (per-block Well1024a seeds, java.util.Random streams), so a seeded rand
  gives SystemDS's matrix. With ``sparsity < 1`` SystemDS's non-zero count is random (about
  sparsity * cells); that exact emulation is on by default (``EXACT_SPARSE_RAND``; the environment
  variable ``LAFUSE_SDS_SPARSE_RAND=0`` switches it off); when it is off, and for poisson, NumPy
  streams are used and the number of non-zeros is exactly round(sparsity * cells).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from lafuse import memory
from lafuse.errors import DMLRuntimeError
from lafuse.formats import sparse_format
from lafuse.hops.sizes import output_bytes
from lafuse.runtime.local import sdsrand
from lafuse.runtime.local.kernels_common import (
    F64,
    fmt_owned,
    is_mat,
    jstr,
    need_float,
    norm_scalar,
    parse_java_double,
    trunc_index,
    type_name,
)
from lafuse.sparse import sp

# SystemDS-exact positions/values for sparse uniform/normal rand (see module docstring).
EXACT_SPARSE_RAND = os.environ.get("LAFUSE_SDS_SPARSE_RAND", "1") not in ("", "0")


def _dim(v: Any, what: str, fname: str) -> int:
    d = trunc_index(v, fname)
    if d < 0:
        raise DMLRuntimeError(f"In {fname} statement, can only assign {what} a long (integer) value >= 0 "
                              f"-- attempted to assign value: {d}")
    return d


def _check_alloc(fname: str, rows: int, cols: int, nnz: int) -> None:
    """The memory guard at the allocation itself, for sizes only known when the kernel runs (the
    lowering guards sizes known at compile or recompile time)."""
    memory.check(output_bytes(rows, cols, nnz), f"'{fname}' with a {rows}x{cols} result")


def _fill(value: float, rows: int, cols: int) -> Any:
    _check_alloc("matrix", rows, cols, 0 if value == 0.0 else rows * cols)
    if value == 0.0 and sparse_format(rows, cols, 0):
        return sp.csr_array((rows, cols), dtype=F64)
    return np.full((rows, cols), value, dtype=F64)


def k_matrix(data: Any, rows: Any = None, cols: Any = None, byrow: Any = True) -> Any:
    data = norm_scalar(data)
    if is_mat(data):
        return _reshape(data, rows, cols, bool(norm_scalar(byrow)) if byrow is not None else True)
    if rows is None or cols is None:
        raise DMLRuntimeError("matrix: rows and cols are required unless the data is a matrix")
    r, c = _dim(rows, "rows", "matrix"), _dim(cols, "cols", "matrix")
    if isinstance(data, str):
        toks = data.split()
        if len(toks) != r * c:
            raise DMLRuntimeError(f"Invalid matrix string intialization: dimensions=[{r}x{c}] vs numValues={len(toks)}")
        vals = np.array([parse_java_double(t, "matrix") for t in toks], dtype=F64)
        return fmt_owned(vals.reshape(r, c))
    if isinstance(data, (bool, int, float)):
        return _fill(float(data), r, c)
    raise DMLRuntimeError(f"matrix: cannot build a matrix from a {type_name(data)}")


def _reshape(x: Any, rows: Any, cols: Any, byrow: bool) -> Any:
    m, n = x.shape
    cells = m * n
    r = _dim(rows, "rows", "matrix") if rows is not None else None
    c = _dim(cols, "cols", "matrix") if cols is not None else None
    if r is None and c is None:
        r, c = m, n
    elif r is None:
        r = cells // c if c else 0
    elif c is None:
        c = cells // r if r else 0
    assert r is not None and c is not None
    if r * c != cells:
        raise DMLRuntimeError(
            f"Reshape matrix requires consistent numbers of input/output cells ({m}:{n}, {r}:{c}).")
    if (r, c) == (m, n):
        return x
    if not sp.issparse(x):
        return np.reshape(x, (r, c), order="C" if byrow else "F").copy()
    co = x.tocoo()
    if byrow:
        lin = co.row.astype(np.int64) * n + co.col
        nr, nc = lin // c, lin % c
    else:
        lin = co.col.astype(np.int64) * m + co.row
        nr, nc = lin % r, lin // r
    return fmt_owned(sp.coo_array((co.data.astype(F64), (nr, nc)), shape=(r, c)).tocsr())


def _rng(seed: Any) -> np.random.Generator:
    s = -1 if seed is None else trunc_index(seed, "rand")
    return np.random.default_rng(None if s == -1 else s & 0xFFFFFFFFFFFFFFFF)


def k_rand(rows: Any = 1, cols: Any = 1, min: Any = 0.0, max: Any = 1.0, sparsity: Any = 1.0,  # noqa: A002
           pdf: Any = "uniform", seed: Any = -1, lam: Any = 1.0) -> Any:
    r, c = _dim(rows, "rows", "rand"), _dim(cols, "cols", "rand")
    lo = need_float(min if min is not None else 0.0, "rand", "min")
    hi = need_float(max if max is not None else 1.0, "rand", "max")
    spars = need_float(sparsity if sparsity is not None else 1.0, "rand", "sparsity")
    if not 0.0 <= spars <= 1.0:
        raise DMLRuntimeError(f"Invalid matrix characteristics: {r}x{c}, {jstr(spars)}")
    dist = str(pdf if pdf is not None else "uniform").lower()
    if dist not in ("uniform", "normal", "poisson"):
        raise DMLRuntimeError(f"rand: unsupported pdf '{pdf}' (uniform, normal or poisson)")
    lam_v = need_float(lam if lam is not None else 1.0, "rand", "lambda")
    cells = r * c
    k = cells if spars >= 1.0 else int(round(spars * cells))
    # before drawing: rand(rows=Inf) is 2^63-1 rows, which would loop over its seeds for ever
    _check_alloc("rand", r, c, 0 if lo == hi == 0.0 else k)

    def draw(size: int) -> np.ndarray:
        if dist == "uniform":
            return lo + (hi - lo) * rng.random(size)
        if dist == "normal":
            return rng.standard_normal(size)
        return rng.poisson(lam_v, size).astype(F64)

    if dist == "uniform" and lo == 0.0 and hi == 0.0:
        return _fill(0.0, r, c)
    if dist != "poisson" and (spars >= 1.0 or EXACT_SPARSE_RAND):
        return _sds_rand(r, c, lo, hi, spars, dist, seed)
    rng = _rng(seed)  # (here: NumPy's generators cost 10 ms to import, SystemDS's draws need none)
    if k == cells:
        return draw(cells).reshape(r, c)
    pos = np.sort(rng.choice(cells, size=k, replace=False)) if k else np.zeros(0, dtype=np.int64)
    vals = draw(k)
    if sparse_format(r, c, k):
        rr, cc = pos // c, pos % c
        indptr = np.zeros(r + 1, dtype=np.int64)
        np.cumsum(np.bincount(rr, minlength=r), out=indptr[1:])
        S = sp.csr_array((vals, cc.astype(np.int32), indptr), shape=(r, c))
        S.eliminate_zeros()
        return S
    out = np.zeros(cells)
    out[pos] = vals
    return out.reshape(r, c)


def _sds_rand(r: int, c: int, lo: float, hi: float, spars: float, dist: str, seed: Any) -> Any:
    s = -1 if seed is None else trunc_index(seed, "rand")
    res = sdsrand.sds_rand(r, c, lo, hi, spars, dist, sdsrand.random_seed() if s == -1 else s)
    if not isinstance(res, tuple):
        if spars >= 1.0:
            return res
        rr, cc = np.nonzero(res)
        res = (rr, cc, res[rr, cc])
    rr, cc, vals = res
    if sparse_format(r, c, len(vals)):
        S = sp.coo_array((vals, (rr, cc)), shape=(r, c)).tocsr()
        S.eliminate_zeros()
        return S
    out = np.zeros((r, c), dtype=F64)
    out[rr, cc] = vals
    return out


def _seq_len(frm: float, to: float, incr: float) -> int:
    """SystemDS UtilFunctions.getSeqLength(from, to, incr, check=true)."""
    special = any(math.isnan(v) or math.isinf(v) for v in (frm, to, incr))
    if special or (frm > to and incr > 0) or (frm < to and incr < 0):
        raise DMLRuntimeError(f"Invalid seq parameters: ({jstr(frm)}, {jstr(to)}, {jstr(incr)})")
    n = math.floor(to / incr - frm / incr)
    last = frm + (n + 1) * incr
    return 1 + n + (1 if (last <= to if incr > 0 else last >= to) else 0)


def k_seq(frm: Any, to: Any, incr: Any = None) -> np.ndarray:
    a = need_float(frm, "seq", "from")
    b = need_float(to, "seq", "to")
    inc = None if incr is None else need_float(incr, "seq", "incr")
    if inc is None or (inc == 1.0 and a > b):
        inc = 1.0 if a <= b else -1.0
    if (a > b and inc > 0) or inc == 0:
        raise DMLRuntimeError(f"Wrong sequence increment: from={jstr(a)}, to={jstr(b)}, incr={jstr(inc)}")
    n = _seq_len(a, b, inc)
    memory.check(16.0 * n, f"'seq' with {n} values")
    steps = np.full(n, inc)
    if n:
        steps[0] = a
    return np.cumsum(steps).reshape(-1, 1)


def k_sample(rng_max: Any, size: Any, replace: Any = False, seed: Any = -1) -> np.ndarray:
    """``sample(range, size, replace, seed)``: a size x 1 column of values in 1..range."""
    n = trunc_index(rng_max, "sample")
    k = trunc_index(size, "sample")
    rep = bool(norm_scalar(replace)) if replace is not None else False
    if n < 1 or k < 0:
        raise DMLRuntimeError(f"sample: invalid range {n} or size {k}")
    if k > n and not rep:
        raise DMLRuntimeError(f"Sample (size={k}) larger than population (size={n}) can only be generated "
                              "with replacement.")
    g = _rng(seed)
    if rep:
        vals = g.integers(1, n + 1, size=k)
    else:
        vals = g.choice(n, size=k, replace=False) + 1
    return vals.astype(F64).reshape(-1, 1)
