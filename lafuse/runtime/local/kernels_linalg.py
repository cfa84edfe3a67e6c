"""Linear-algebra kernels: matrix multiply, solve, inv, cholesky, det, eigen, svd, qr and lu.

Why some decompositions are re-implemented instead of calling LAPACK: SystemDS computes them with
Apache commons-math, and the *signs* of eigenvectors and the Householder form of ``qr`` are
visible in results (pca's components and projections). ``eigen`` of a symmetric matrix therefore
follows commons-math's tridiagonalization + implicit QL and SystemDS's ascending selection sort,
and ``qr`` returns commons-math's ``[H, R]`` (Householder vectors, not Q). Large symmetric inputs
fall back to LAPACK with a deterministic sign convention, because the QL port runs its inner
loop in Python.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse import threads
from lafuse.errors import DMLRuntimeError
from lafuse.hops.patterns import SQUARED_LOSS_BLOCK_BYTES
from lafuse.runtime.local.kernels_agg import k_sum
from lafuse.runtime.local.kernels_common import (
    F64,
    canon_csr,
    csr_rows_kept,
    errstate,
    fmt_owned,
    is_mat,
    need_matrix,
    to_dense,
)
from lafuse.runtime.local.kernels_elementwise import add_at_nonzeros, binary, k_log, make_binary, unary
from lafuse.sparse import sp

ndarray = np.ndarray
_EPS = 2.0**-53  # commons-math Precision.EPSILON
EIGEN_PORT_MAX = 400  # above this order the commons-math port is too slow in Python


# ---------------------------------------------------------------------------- multiplication

def k_matmult(a: Any, b: Any) -> Any:
    """``%*%`` on dense/sparse combinations; dense products go straight to BLAS."""
    if not is_mat(a) or not is_mat(b):
        raise DMLRuntimeError("matrix multiplication '%*%' needs two matrices")
    if a.shape[1] != b.shape[0]:
        raise DMLRuntimeError(f"invalid dimensions for matrix multiplication (k1={a.shape[1]}, k2={b.shape[0]})")
    with errstate():
        if type(a) is ndarray and type(b) is ndarray:
            return a @ b
        if sp.issparse(a) and sp.issparse(b):
            return fmt_owned(sp.csr_array(a @ b, dtype=F64))
        r = a @ b
    if sp.issparse(r):
        return fmt_owned(sp.csr_array(r, dtype=F64))
    return np.asarray(r, dtype=F64)


k_matmult.dense_matmul = True  # type: ignore[attr-defined]  # a @ b for dense operands (runtime.straight)

# Row blocks of the blocked t(X) %*% (w * (X %*% v)): each thread multiplies its own blocks twice,
# both products on one BLAS thread, so the second reads the block from cache. Measured (2 threads,
# median of 7 calls, two processes each, random X, v one column): X 1e5 x 1000 at 1 / 2 / 4 / 8 MiB
# 62 / 52-55 / 36 / 40-42 ms, X 1e6 x 100 56 / 47-55 / 51-57 / 60-63 ms; the plain two products 53-57
# and 90 ms. One 4 MiB block at a time through BLAS's own two threads (before) took GLM's X 1e6 x 100
# 53-56 ms a call in some processes and 83-89 in others.
MMCHAIN_BLOCK_BYTES = 4 << 20
MMCHAIN_MIN_BYTES = 16 << 20  # smaller X: the second product reads it from the 32 MiB L3 anyway
MMCHAIN_MAX_COLS = 16  # columns of v: beyond, X %*% V is a product of its own rather than a pass
_MUL = make_binary("*")  # the chain's * where the blocked pass does not apply


def _chain_rows(lo: int, hi: int, x: np.ndarray, v: np.ndarray, w: Any, w_first: bool, b: int) -> np.ndarray:
    r = np.zeros((x.shape[1], v.shape[1]))
    with errstate():
        for i in range(lo, hi, b):
            e = min(hi, i + b)
            xb = x[i:e]
            q = xb @ v
            if w is not None:
                q = w[i:e] * q if w_first else q * w[i:e]
            r += xb.T @ q
    return r


def mmchain_blocked(x: Any, v: Any, w: Any = None, w_first: bool = True) -> np.ndarray | None:
    """``t(X) %*% (X %*% v)`` (``w`` None) or ``t(X) %*% (w * (X %*% v))`` as one pass over a dense X
    in row blocks, each multiplied twice while it is in cache: SystemML's hand-coded mmchain operator,
    a single scan over X (paper 001 §5), for plans that leave the chain unfused. The rows are split
    into one contiguous range per thread of the run's budget (lafuse.threads), each summed on its
    own and added in range order, so the result depends on the thread count, not on scheduling. None
    where the plain products are the right code: a sparse or small X, a wide v, a w neither a column
    nor of the product's shape."""
    if type(x) is not ndarray or type(v) is not ndarray or x.dtype != F64 or not x.flags.c_contiguous:
        return None
    n, m = x.shape
    k = v.shape[1]
    if x.nbytes < MMCHAIN_MIN_BYTES or v.shape[0] != m or not 1 <= k <= MMCHAIN_MAX_COLS:
        return None
    if w is not None and (type(w) is not ndarray or w.shape not in ((n, 1), (n, k))):
        return None
    b = max(1, MMCHAIN_BLOCK_BYTES // (8 * m))
    t = min(threads.budget(), -(-n // b))
    if t <= 1:
        return _chain_rows(0, n, x, v, w, w_first, b)
    parts = threads.run_ranges(_chain_rows, [n * j // t for j in range(t + 1)], x, v, w, w_first, b, one_blas=True)
    r = parts[0]
    for p in parts[1:]:
        r += p
    return r


def k_mmchain(x: Any, v: Any, w: Any = None, w_first: bool = True, transposed: bool = False) -> Any:
    """The instruction of an unfused chain (hops.patterns.mmchains): the blocked pass where it
    applies, else the chain's own operators, so every other case (CSR, small, broadcasting) keeps
    their semantics. ``w_first``: whether ``w`` is the left operand of ``*``; ``transposed``: the
    form ``t(q) %*% X``, whose result is the chain's transposed."""
    r = mmchain_blocked(x, v, w, w_first)
    if r is None:
        q = k_matmult(x, v)
        if w is not None:
            q = _MUL(w, q) if w_first else _MUL(q, w)
        if transposed:
            return k_matmult(q.T, x)
        r = k_matmult(x.T, q)
    return np.ascontiguousarray(r.T) if transposed else r


def _factors(x: Any, u: Any, v: Any, ta: bool, tb: bool, op: str) -> tuple[np.ndarray, np.ndarray]:
    """A loss operator's U and V as the product multiplies them (dense), after the checks the unfused
    ``%*%`` and the cell-wise ``op`` with X would make."""
    for m in (x, u, v):
        if not is_mat(m):
            raise DMLRuntimeError("matrix multiplication '%*%' needs two matrices")
    U = to_dense(u).T if ta else to_dense(u)
    V = to_dense(v).T if tb else to_dense(v)
    if U.shape[1] != V.shape[0]:
        raise DMLRuntimeError(f"invalid dimensions for matrix multiplication (k1={U.shape[1]}, k2={V.shape[0]})")
    if x.shape != (U.shape[0], V.shape[1]):
        raise DMLRuntimeError(f"'{op}' needs matrices of one shape or a vector (got {x.shape[0]}x{x.shape[1]} "
                              f"and {U.shape[0]}x{V.shape[1]})")
    return U, V


def k_wsloss(x: Any, u: Any, v: Any, ta: bool = False, tb: bool = False) -> float:
    """``sum((X - U %*% V) ^ 2)`` (hops.patterns.squared_losses; ``ta``/``tb``: U or V given as the
    matrix whose transpose the product reads), the product formed SQUARED_LOSS_BLOCK_BYTES of rows at a
    time into one buffer: each cell is ``(u_i . v_j - x_ij)^2``, the square of the unfused
    difference's negation (the same value: IEEE subtraction is symmetric), so NaN and Inf come out as
    unfused; only the order of the sum's additions differs (a sum per block, then the blocks'). No
    array of the product's size is ever allocated: GNMF's loss over a 14000 x 7500 X held 840 MB."""
    U, V = _factors(x, u, v, ta, tb, "-")
    n, m = U.shape[0], V.shape[1]
    if n == 0 or m == 0:
        return 0.0
    U = np.ascontiguousarray(U, dtype=F64)
    V = np.ascontiguousarray(V, dtype=F64)
    rows = max(1, min(n, SQUARED_LOSS_BLOCK_BYTES // (8 * m)))
    buf = np.empty((rows, m))
    xs = sp.issparse(x)
    X: Any = x.tocsr() if xs else to_dense(x)
    total = 0.0
    with errstate():
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            blk = buf[:r1 - r0]
            np.matmul(U[r0:r1], V, out=blk)
            if xs:
                part = X[r0:r1]
                part.sum_duplicates()
                add_at_nonzeros(blk, part, subtract=True)
            else:
                np.subtract(blk, X[r0:r1], out=blk)
            np.multiply(blk, blk, out=blk)
            total += float(np.add.reduce(blk, axis=None))
    return total


# bytes of U's (and V's) rows a sampled sum gathers at once, into two buffers each thread keeps: small
# enough to stay in cache while the dot products read them, large enough that the calls per gather
# (and, on several threads, their turns at the GIL) do not dominate, and never allocated per call
# (this host page-faults fresh memory slowly). Measured on 3000^2 at 1%, k=50 (the dot products
# alone, medians of 60 interleaved calls), one thread / two: 3.3 / 3.9 ms at 128 KB, 2.9 / 2.8 at
# 256 KB, 2.7 / 1.8 at 512 KB, 2.6-2.8 / 1.4-1.7 at 1 MB, 2.7 / 1.7 at 2 MB, 3.0 / 2.4 at 4 MB; in
# fresh 26 MB gathers, one thread, 9.5 ms.
SAMPLED_GATHER_BYTES = 1 << 20
# non-zeros a thread takes at a time (in whole gathers; threads.run_taken): ~6 per thread at 3000^2 1%,
# so a thread another process slows takes fewer, and the terms' per-range calls stay few
SAMPLED_TASK_NNZ = 1 << 14
_GATHER = threading.local()


def _gather_rows(k: int) -> int:
    """Non-zeros per gather of a rank-``k`` sampled sum."""
    return max(1, SAMPLED_GATHER_BYTES // (8 * max(1, k)))


def _gather_buffers(rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The calling thread's two ``rows x k`` gather buffers (kept, regrown only when too small)."""
    have = getattr(_GATHER, "bufs", None)
    if have is None or have[0].size < rows * k:
        have = _GATHER.bufs = (np.empty(rows * k), np.empty(rows * k))
    return have[0][:rows * k].reshape(rows, k), have[1][:rows * k].reshape(rows, k)


def _sampled_terms(lo: int, hi: int, step: int, U: np.ndarray, Vt: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                   out: np.ndarray, term: Callable[[int, int, np.ndarray], np.ndarray]) -> None:
    """``out[p] = term(lo, hi, d)[p - lo]`` for ``p`` in ``[lo, hi)``, ``d`` the dot products
    ``U[rows[p]] . Vt[cols[p]]``, formed ``step`` (_gather_rows) at a time (on a pool thread too,
    hence its own error state; each term on its own, so the thread count never changes one).
    ``np.take`` with ``mode="clip"``: the default mode buffers a take into ``out`` (the indices
    are valid, so clipping never happens)."""
    a, b = _gather_buffers(min(step, hi - lo), U.shape[1])
    with errstate():
        for c0 in range(lo, hi, step):
            c1 = min(hi, c0 + step)
            n = c1 - c0
            np.take(U, rows[c0:c1], axis=0, out=a[:n], mode="clip")
            np.take(Vt, cols[c0:c1], axis=0, out=b[:n], mode="clip")
            np.einsum("ij,ij->i", a[:n], b[:n], out=out[c0:c1])
        out[lo:hi] = term(lo, hi, out[lo:hi])


def k_sampled_sum(x: Any, u: Any, v: Any, ta: bool = False, tb: bool = False, x_left: bool = True,
                  chain: tuple[tuple[str, float | None, bool], ...] = ()) -> float:
    """``sum(X * g(U %*% V))`` (hops.patterns.sampled_sums; ``chain``: g's operators, innermost first,
    each ``(op, literal, literal on the left)``, a unary one without literal): for a CSR X, the
    product's value ``u_i . v_j`` only at X's non-zeros, g applied to those values by the element-wise
    kernels, times X's values, summed, as the unfused ``*`` reads a dense operand only where the
    sparse one is not zero (a NaN or Inf of g elsewhere counts for nothing, there and here). The dot
    products add in another order than BLAS's, so a value may differ in its last bits. A dense X at
    run time: the operators themselves, every cell."""
    def g(d: Any) -> Any:
        for op, lit, lit_left in chain:
            if lit is None:
                d = k_log(d) if op == "log" else unary(op, d)
            else:
                d = binary(op, lit, d) if lit_left else binary(op, d, lit)
        return d

    def times(a: Any, b: Any) -> Any:
        return _MUL(a, b) if x_left else _MUL(b, a)

    U, V = _factors(x, u, v, ta, tb, "*")
    if not sp.issparse(x):
        return k_sum(times(x, g(k_matmult(U, V))))
    S = x.tocsr()
    S = S if S.has_canonical_format else canon_csr(S)
    if S.nnz == 0:
        return 0.0
    Uc = np.ascontiguousarray(U, dtype=F64)
    Vt = np.ascontiguousarray(V.T, dtype=F64)
    rows, cols = csr_rows_kept(S), S.indices

    def term(lo: int, hi: int, d: np.ndarray) -> np.ndarray:  # x_p * g(d_p), as the unfused '*'
        return times(S.data[lo:hi].reshape(1, -1), g(d.reshape(1, -1))).reshape(-1)

    vals = np.empty(S.nnz)
    step = _gather_rows(Uc.shape[1])
    cuts = [*range(0, S.nnz, step * max(1, SAMPLED_TASK_NNZ // step)), S.nnz]
    # (NumPy's take, einsum and ufuncs release the GIL for most of a 1 MB gather)
    threads.run_taken(_sampled_terms, cuts, min(threads.budget(), len(cuts) - 1), step, Uc, Vt, rows, cols, vals,
                      term)
    return k_sum(vals.reshape(1, -1))


# ------------------------------------------------------------------------- solvers and co.

def _square(x: Any, msg: str) -> np.ndarray:
    x = need_matrix(x, msg.split("(")[0])
    if x.shape[0] != x.shape[1]:
        raise DMLRuntimeError(msg.format(r=x.shape[0], c=x.shape[1]))
    return np.array(to_dense(x), dtype=F64)


def k_solve(a: Any, b: Any) -> np.ndarray:
    A = _square(a, "The A matrix, in solve(A,b) should have squared dimensions.")
    B = to_dense(need_matrix(b, "solve"))
    if B.shape[0] != A.shape[0]:
        raise DMLRuntimeError(f"solve: b has {B.shape[0]} rows but A is {A.shape[0]}x{A.shape[1]}")
    if A.shape[0] == 0:
        return np.zeros(B.shape)
    try:
        with errstate():
            return np.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        raise DMLRuntimeError("solve: matrix is singular") from None


def k_inv(x: Any) -> np.ndarray:
    A = _square(x, "Input to inv() must be square matrix -- given: a {r}x{c} matrix.")
    if A.shape[0] == 0:
        return A
    try:
        with errstate():
            return np.linalg.inv(A)
    except np.linalg.LinAlgError:
        raise DMLRuntimeError("inv: matrix is singular") from None


def k_cholesky(x: Any) -> np.ndarray:
    """Lower Cholesky factor; commons-math's symmetry (1e-6 relative) and positivity (1e-10) checks."""
    A = _square(x, "Input to cholesky() must be square matrix -- given: a {r}x{c} matrix.")
    if A.shape[0] == 0:
        return A
    with errstate():
        d = np.abs(A - A.T)
        tol = np.maximum(np.abs(A), np.abs(A.T)) * 1e-6
    if np.any(d > tol):
        raise DMLRuntimeError("cholesky: not symmetric matrix")
    try:
        L = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        raise DMLRuntimeError("cholesky: not positive definite matrix") from None
    if np.any(np.diagonal(L) ** 2 <= 1e-10):
        raise DMLRuntimeError("cholesky: not positive definite matrix")
    return L


def k_det(x: Any) -> float:
    A = _square(x, "Determinant can only be computed for a square matrix. Input matrix is rectangular")
    if A.shape[0] == 0:
        return 1.0
    with errstate():
        return float(np.linalg.det(A))


# ---------------------------------------------------------------------------------- eigen

def _tridiagonalize(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """commons-math TriDiagonalTransformer: main/secondary diagonals and Q."""
    m = A.shape[0]
    H = A.copy()
    main = np.zeros(m)
    sec = np.zeros(max(m - 1, 0))
    for k in range(m - 1):
        hk = H[k]
        main[k] = hk[k]
        x = hk[k + 1:]
        nrm = math.sqrt(float(x @ x))
        a = -nrm if hk[k + 1] > 0 else nrm
        sec[k] = a
        if a != 0.0:
            hk[k + 1] -= a
            v = hk[k + 1:]
            beta = -1.0 / (a * hk[k + 1])
            U = np.triu(H[k + 1:, k + 1:])
            z = beta * (U @ v + np.triu(U, 1).T @ v)
            gamma = beta / 2.0 * float(z @ v)
            z -= gamma * v
            H[k + 1:, k + 1:] -= np.outer(v, z) + np.outer(z, v)
    if m:
        main[m - 1] = H[m - 1, m - 1]
    qt = np.zeros((m, m))
    for k in range(m - 1, 0, -1):
        hk = H[k - 1]
        qt[k, k] = 1.0
        if hk[k] != 0.0:
            inv = 1.0 / (sec[k - 1] * hk[k])
            beta = 1.0 / sec[k - 1]
            qt[k, k] = 1.0 + beta * hk[k]
            qt[k, k + 1:] = beta * hk[k + 1:]
            bj = inv * (qt[k + 1:, k + 1:] @ hk[k + 1:])
            qt[k + 1:, k] = bj * hk[k]
            qt[k + 1:, k + 1:] += np.outer(bj, hk[k + 1:])
    if m:
        qt[0, 0] = 1.0
    return main, sec, qt.T.copy()


def _ql(main: np.ndarray, sec: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """commons-math EigenDecomposition.findEigenVectors (implicit QL, Dubrulle et al.)."""
    n = len(main)
    d = [float(v) for v in main]
    e = [float(v) for v in sec] + [0.0]
    zt = np.ascontiguousarray(z.T)  # rows of zt are the columns of z
    mx = max([abs(v) for v in d] + [abs(v) for v in e] + [0.0])
    if mx != 0.0:
        for i in range(n):
            if abs(d[i]) <= _EPS * mx:
                d[i] = 0.0
            if abs(e[i]) <= _EPS * mx:
                e[i] = 0.0
    for j in range(n):
        its = 0
        while True:
            m = j
            while m < n - 1:
                delta = abs(d[m]) + abs(d[m + 1])
                if abs(e[m]) + delta == delta:
                    break
                m += 1
            if m == j:
                break
            if its == 30:
                raise DMLRuntimeError("eigen: convergence failed (30 iterations)")
            its += 1
            q = (d[j + 1] - d[j]) / (2 * e[j])
            t = math.sqrt(1 + q * q)
            q = d[m] - d[j] + e[j] / (q - t if q < 0.0 else q + t)
            u, s, c = 0.0, 1.0, 1.0
            i = m - 1
            while i >= j:
                p = s * e[i]
                h = c * e[i]
                if abs(p) >= abs(q):
                    c = q / p
                    t = math.sqrt(c * c + 1.0)
                    e[i + 1] = p * t
                    s = 1.0 / t
                    c = c * s
                else:
                    s = p / q
                    t = math.sqrt(s * s + 1.0)
                    e[i + 1] = q * t
                    c = 1.0 / t
                    s = s * c
                if e[i + 1] == 0.0:
                    d[i + 1] -= u
                    e[m] = 0.0
                    break
                q = d[i + 1] - u
                t = (d[i] - q) * s + 2.0 * c * h
                u = s * t
                d[i + 1] = q + u
                q = c * t - h
                zi, zi1 = zt[i], zt[i + 1]
                p_col = zi1.copy()
                zt[i + 1] = s * zi + c * p_col
                zt[i] = c * zi - s * p_col
                i -= 1
            if t == 0.0 and i >= j:
                continue
            d[j] -= u
            e[j] = q
            e[m] = 0.0
    vals = np.array(d)
    # commons-math sorts decreasingly (first maximum wins) ...
    for i in range(n):
        k = i + int(np.argmax(vals[i:]))
        if vals[k] > vals[i] and k != i:
            vals[i], vals[k] = vals[k], vals[i]
            zt[[i, k]] = zt[[k, i]]
    mx = float(np.max(np.abs(vals))) if n else 0.0
    if mx != 0.0:
        vals[np.abs(vals) < _EPS * mx] = 0.0
    return vals, zt.T.copy()


def _sort_ascending(vals: np.ndarray, vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SystemDS LibCommonsMath.sortEVs: selection sort, first minimum wins, columns swapped along."""
    vals = vals.copy()
    vecs = vecs.copy()
    for i in range(len(vals)):
        k = i + int(np.argmin(vals[i:]))
        if vals[k] < vals[i]:
            vals[i], vals[k] = vals[k], vals[i]
            vecs[:, [i, k]] = vecs[:, [k, i]]
    return vals.reshape(-1, 1), vecs


def _is_symmetric(A: np.ndarray) -> bool:
    n = A.shape[0]
    eps = 10 * n * n * _EPS
    with errstate():
        d = np.abs(A - A.T)
        return not np.any(d > np.maximum(np.abs(A), np.abs(A.T)) * eps)


def k_eigen(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """``[values, vectors] = eigen(A)``: eigenvalues ascending as a column vector."""
    x = need_matrix(x, "eigen")
    if x.shape[0] != x.shape[1]:
        raise DMLRuntimeError("Eigen Decomposition can only be done on a square matrix. Input matrix is rectangular "
                              f"(rows={x.shape[0]}, cols={x.shape[1]})")
    A = np.array(to_dense(x), dtype=F64)
    n = A.shape[0]
    if n == 0:
        return np.zeros((0, 1)), np.zeros((0, 0))
    if not np.all(np.isfinite(A)):
        raise DMLRuntimeError("eigen: the input contains NaN or Inf")
    if _is_symmetric(A):
        if n <= EIGEN_PORT_MAX:
            main, sec, Q = _tridiagonalize(A)
            vals, vecs = _ql(main, sec, Q)
            return _sort_ascending(vals, vecs)
        w, v = np.linalg.eigh(A)
        # deterministic orientation: the largest-magnitude component of each vector is positive
        idx = np.argmax(np.abs(v), axis=0)
        v = v * np.where(v[idx, np.arange(n)] < 0, -1.0, 1.0)
        return _sort_ascending(w, v)
    w, v = np.linalg.eig(A)
    return _sort_ascending(np.real(w).astype(F64), np.real(v).astype(F64))


# ---------------------------------------------------------------------------- svd, qr, lu

def k_svd(x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[U, S, V] = svd(A)``: thin SVD with S as a min(m,n) square diagonal matrix (commons-math)."""
    A = np.array(to_dense(need_matrix(x, "svd")), dtype=F64)
    m, n = A.shape
    if m == 0 or n == 0:
        p = min(m, n)
        return np.zeros((m, p)), np.zeros((p, p)), np.zeros((n, p))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    return U, np.diag(s), np.ascontiguousarray(Vt.T)


def k_qr(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """``[H, R] = qr(A)``: commons-math QRDecomposition's Householder vectors H and R."""
    A = np.array(to_dense(need_matrix(x, "qr")), dtype=F64)
    m, n = A.shape
    qrt = A.T.copy()
    p = min(m, n)
    rdiag = np.zeros(p)
    for minor in range(p):
        col = qrt[minor]
        xs = col[minor:]
        nrm = math.sqrt(float(xs @ xs))
        a = -nrm if col[minor] > 0 else nrm
        rdiag[minor] = a
        if a != 0.0:
            col[minor] -= a
            v = col[minor:]
            sub = qrt[minor + 1:, minor:]
            alpha = -(sub @ v) / (a * col[minor])
            sub -= np.outer(alpha, v)
    H = np.zeros((m, n))
    R = np.zeros((m, n))
    with errstate():
        for j in range(p):
            H[j:, j] = qrt[j, j:] / -rdiag[j]
            R[j, j] = rdiag[j]
            R[j, j + 1:] = qrt[j + 1:, j]
    return H, R


def k_lu(x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[P, L, U] = lu(A)`` with ``P %*% A = L %*% U`` (partial pivoting, commons-math)."""
    A = _square(x, "LU Decomposition can only be done on a square matrix. Input matrix is rectangular "
                   "(rows={r}, cols={c})")
    n = A.shape[0]
    if n == 0:
        return A, A.copy(), A.copy()
    import scipy.linalg as sla  # imported on use: SciPy's import is slow

    p, L, U = sla.lu(A)
    if np.any(np.abs(np.diagonal(U)) < 1e-11):
        raise DMLRuntimeError("LU Decomposition can only be done on a non-singular matrix.")
    return np.ascontiguousarray(p.T), L, U
