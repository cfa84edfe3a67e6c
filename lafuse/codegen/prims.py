"""Numba primitives the generated kernels call: DML scalar semantics and vector building blocks.

Why a shared library instead of inlining everything into the generated source: the scalar ops
must mean exactly what lafuse's unfused kernels mean (Java ``%/%``/``%%``, ``Math.pow``, NaN
propagating min/max, Java round), and writing each once keeps all templates consistent. Numba
inlines these small functions into the kernels, so calling them costs nothing at run time.

All functions use ``error_model="numpy"`` (division by zero gives Inf/NaN instead of raising) and
never ``fastmath`` (which would break NaN/Inf propagation).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_jit = njit(cache=True, error_model="numpy", nogil=True)
_jit_inline = njit(cache=True, error_model="numpy", nogil=True, inline="always")
EPS = 2.0 ** -53  # UtilFunctions.DOUBLE_EPS
TWO63 = 9.223372036854776e18

# ----------------------------------------------------------------------------- scalar ops


@_jit
def s_pow(a: float, b: float) -> float:
    if b != b:
        return np.nan
    if np.isinf(b) and abs(a) == 1.0:
        return np.nan
    return np.power(a, b)


@_jit
def s_intdiv(a: float, b: float) -> float:
    q = a / b
    if np.isfinite(q):
        return np.copysign(np.floor(abs(q) + EPS), q)
    return q


@_jit
def s_mod(a: float, b: float) -> float:
    if b == 0.0:
        return np.nan
    return a - s_intdiv(a, b) * b


@_jit
def s_min(a: float, b: float) -> float:
    if a != a or b != b:
        return np.nan
    return a if a < b else b


@_jit
def s_max(a: float, b: float) -> float:
    if a != a or b != b:
        return np.nan
    return a if a > b else b


@_jit
def s_round(x: float) -> float:
    """Java Math.round as a double: half up, NaN -> 0, saturating at the long range."""
    if x != x:
        return 0.0
    r = np.floor(x)
    if x - r >= 0.5:
        r += 1.0
    if r > TWO63:
        return TWO63
    if r < -TWO63:
        return -TWO63
    return r


@_jit
def s_sign(x: float) -> float:
    if x != x:
        return np.nan
    if x == 0.0:
        return x
    return 1.0 if x > 0.0 else -1.0


@_jit
def b2d(c: bool) -> float:
    return 1.0 if c else 0.0


# ------------------------------------------------------------------------ block set-up

# Why primitives for integer min/max and array allocation: Numba implements the builtins ``min``/
# ``max`` and ``np.empty``/``np.zeros``/``np.full`` as overloads that it compiles afresh in every
# process (not cached), the first kernel of a process paying for them: ~0.2 s of the row kernel of
# ``t(X) %*% (X %*% V)``'s 1.0 s cold compile (measured with every primitive in Numba's cache). As
# primitives they are compiled once, at installation (``lafuse cache warm``), and loaded after.


@_jit
def imin(a: int, b: int) -> int:
    return a if a < b else b


@_jit
def imax(a: int, b: int) -> int:
    return a if a > b else b


@_jit
def empty1(n: int) -> np.ndarray:
    return np.empty(n)


@_jit
def empty2(r: int, c: int) -> np.ndarray:
    return np.empty((r, c))


@_jit
def zeros2(r: int, c: int) -> np.ndarray:
    return np.zeros((r, c))


@_jit
def full2(r: int, c: int, v: float) -> np.ndarray:
    return np.full((r, c), v)


# ------------------------------------------------------------------------ compensated sums


@_jit
def kadd(s: float, c: float, x: float) -> tuple[float, float]:
    """One Neumaier step. Once ``s`` is non-finite it stays so and ``c`` is ignored (:func:`kfin`)."""
    t = s + x
    if abs(s) >= abs(x):
        c += (s - t) + x
    else:
        c += (x - t) + s
    return t, c


@_jit
def kfin(s: float, c: float) -> float:
    return s + c if np.isfinite(s) else s


@_jit
def kcombine(parts: np.ndarray) -> float:
    """Block partials (sum, compensation) combined in block order: independent of thread count."""
    s = 0.0
    c = 0.0
    for b in range(parts.shape[0]):
        s, c = kadd(s, c, kfin(parts[b, 0], parts[b, 1]))
    return kfin(s, c)


# ------------------------------------------------------------------------ finiteness check


@_jit
def all_finite(a: np.ndarray) -> bool:
    for k in range(a.shape[0]):
        if not np.isfinite(a[k]):
            return False
    return True


# ------------------------------------------------------------------------- CSR row access


@_jit
def csr_seek(idx: np.ndarray, k: int, end: int, j: int) -> int:
    """Advance a row cursor to the first stored column >= j (callers read columns in order)."""
    while k < end and idx[k] < j:
        k += 1
    return k


@_jit
def csr_get(data: np.ndarray, idx: np.ndarray, k: int, end: int, j: int) -> float:
    if k < end and idx[k] == j:
        return data[k]
    return 0.0


@_jit
def densify_row(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, out: np.ndarray) -> None:
    out[:] = 0.0
    for k in range(p0, p1):
        out[idx[k]] = data[k]


# ---------------------------------------------------------------------- dense vector prims


@_jit
def vvar(a: np.ndarray, n: int) -> float:
    """Sample variance of a row (rowVars): two passes, the mean then the squared deviations, as
    ``np.var(ddof=1)``; one element: 0, or NaN for NaN (kernels_agg._var_axis)."""
    if n == 1:
        return np.nan if a[0] != a[0] else 0.0
    mu = vsum(a, n) / n
    s = 0.0
    for k in range(n):
        d = a[k] - mu
        s += d * d
    return s / (n - 1)


@_jit
def vsum(a: np.ndarray, n: int) -> float:
    """Sum with 4 independent partials (a fixed order: without fastmath one accumulator is bound
    by the latency of an addition)."""
    s0 = s1 = s2 = s3 = 0.0
    n4 = n - n % 4
    for k in range(0, n4, 4):
        s0 += a[k]
        s1 += a[k + 1]
        s2 += a[k + 2]
        s3 += a[k + 3]
    for k in range(n4, n):
        s0 += a[k]
    return (s0 + s1) + (s2 + s3)


@_jit
def dot1(a: np.ndarray, b: np.ndarray, n: int) -> float:
    """dot of two contiguous vectors, 4 independent partials."""
    s0 = s1 = s2 = s3 = 0.0
    n4 = n - n % 4
    for k in range(0, n4, 4):
        s0 += a[k] * b[k]
        s1 += a[k + 1] * b[k + 1]
        s2 += a[k + 2] * b[k + 2]
        s3 += a[k + 3] * b[k + 3]
    for k in range(n4, n):
        s0 += a[k] * b[k]
    return (s0 + s1) + (s2 + s3)


@_jit
def vmin(a: np.ndarray, n: int) -> float:
    r = np.inf
    for k in range(n):
        r = s_min(r, a[k])
    return r


@_jit
def vmax(a: np.ndarray, n: int) -> float:
    r = -np.inf
    for k in range(n):
        r = s_max(r, a[k])
    return r


@_jit
def dot(a: np.ndarray, sa: int, b: np.ndarray, sb: int, n: int) -> float:
    """dot of two vectors with strides 0 (a broadcast single element) or 1."""
    if sa == 1 and sb == 1:
        return dot1(a, b, n)
    s = 0.0
    for k in range(n):
        s += a[k * sa] * b[k * sb]
    return s


@_jit_inline  # per stored entry of the outer template: inlined into the kernel
def dot_rows(U: np.ndarray, i: int, V: np.ndarray, j: int) -> float:
    """dot(U[i, :], V[j, :]) as ``dot1`` computes it, with 2-D indexing: no row views, whose
    reference counts (shared by all threads reading U and V) would cost an atomic per call."""
    n = U.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    n4 = n - n % 4
    for k in range(0, n4, 4):
        s0 += U[i, k] * V[j, k]
        s1 += U[i, k + 1] * V[j, k + 1]
        s2 += U[i, k + 2] * V[j, k + 2]
        s3 += U[i, k + 3] * V[j, k + 3]
    for k in range(n4, n):
        s0 += U[i, k] * V[j, k]
    return (s0 + s1) + (s2 + s3)


@_jit
def vect_mult_add(a: np.ndarray, sa: int, s: float, out: np.ndarray, n: int) -> None:
    """out += a * s (a with stride 0 broadcasts its single element); the stride-1 loop vectorizes."""
    if sa == 1:
        for k in range(n):
            out[k] += a[k] * s
    else:
        for k in range(n):
            out[k] += a[0] * s


@_jit
def rows_dot_axpy(X: np.ndarray, r0: int, r1: int, B: np.ndarray, acc: np.ndarray) -> None:
    """acc += X[i, :] * (X[i, :] . B[:, 0]) for the rows r0 <= i < r1 of a dense X and a one-column
    B: ``t(X) %*% (X %*% v)``'s block loop with 2-D indexing (no per-row views, whose reference
    counts are shared between threads). Same operation order as ``dot1`` + ``vect_mult_add``."""
    K = X.shape[1]
    n4 = K - K % 4
    for i in range(r0, r1):
        s0 = s1 = s2 = s3 = 0.0
        for k in range(0, n4, 4):
            s0 += X[i, k] * B[k, 0]
            s1 += X[i, k + 1] * B[k + 1, 0]
            s2 += X[i, k + 2] * B[k + 2, 0]
            s3 += X[i, k + 3] * B[k + 3, 0]
        for k in range(n4, K):
            s0 += X[i, k] * B[k, 0]
        q = (s0 + s1) + (s2 + s3)
        for k in range(K):
            acc[k] += X[i, k] * q


SMALL_MM_COLS, SMALL_MM_MIN_K = 2, 16  # (small_mm; runner_row.block_mode calls its Python function)


@_jit
def small_mm(L: int, K: int) -> bool:
    """Whether a block body multiplies its K-column main by a K x L matrix (and back) with the loops
    below rather than BLAS. Measured per 500000 x K block sweep (1 thread, 2^17-cell blocks, ms,
    BLAS / loops): K=10: L=1 4.7/6.9, L=2 9.7/10.6, L=4 9.7/17.7; K=30: L=1 11.7/15.3, L=2 29.3/19.7,
    L=4 30.0/34.0; K=100: L=1 44.5/46.9, L=2 116.9/60.9, L=4 110.7/93.1. OpenBLAS's product with two
    columns is slow (gemv serves one column, packed gemm wider ones), so only that case loops."""
    return L == SMALL_MM_COLS and K >= SMALL_MM_MIN_K


@_jit
def rows_matmul_small(X: np.ndarray, r0: int, r1: int, M: np.ndarray, out: np.ndarray, tr: bool) -> None:
    """out[r - r0, c] (``tr``: out[c, r - r0]) = X[r, :] . M[:, c] for the rows r0 <= r < r1 of a dense
    X and an M of a few columns (``dot_rows``: 4 partials, 2-D indexing, no per-row views); see small_mm.
    multiLogReg's Hessian-vector kernel over 1e6 x 100 with 2 columns, per call inside the script:
    120 ms with BLAS per block, 60 ms with these loops (a hand-written Numba loop: 60.6 ms; NumPy's
    operators: 143 ms)."""
    Mt = np.ascontiguousarray(M.T)
    for r in range(r0, r1):
        for c in range(M.shape[1]):
            v = dot_rows(X, r, Mt, c)
            if tr:
                out[c, r - r0] = v
            else:
                out[r - r0, c] = v


@_jit
def rows_t_matmul_small(X: np.ndarray, r0: int, r1: int, Q: np.ndarray, tr: bool, acc: np.ndarray) -> None:
    """acc += t(X[r0:r1, :]) %*% Q for a dense X and a block Q of a few columns (R x L; ``tr``: L x R):
    each row of X is read once and added, scaled, into a contiguous row of a per-block transposed
    accumulator (see small_mm for when this beats BLAS)."""
    K = X.shape[1]
    L = acc.shape[1]
    At = np.zeros((L, K))
    for r in range(r0, r1):
        for c in range(L):
            q = Q[c, r - r0] if tr else Q[r - r0, c]
            for k in range(K):
                At[c, k] += X[r, k] * q
    for k in range(K):
        for c in range(L):
            acc[k, c] += At[c, k]


@_jit
def row_mult_add(w: float, B: np.ndarray, r: int, out: np.ndarray, o: int) -> None:
    """out[o, :] += w * B[r, :]."""
    for k in range(B.shape[1]):
        out[o, k] += w * B[r, k]


@_jit
def vecmat(a: np.ndarray, sa: int, K: int, B: np.ndarray, out: np.ndarray) -> None:
    """out = a (1 x K) %*% B (K x L), zeros included (0 * NaN is NaN as in the unfused product).
    A single column is a dot product (4 partials); wider B accumulates rows (vectorized)."""
    L = B.shape[1]
    if L == 1 and sa == 1 and K > 0:
        out[0] = dot1(a, B.reshape(K), K)
        return
    out[:] = 0.0
    for k in range(K):
        x = a[k * sa]
        for c in range(L):
            out[c] += x * B[k, c]


@_jit
def outer_add(a: np.ndarray, sa: int, La: int, b: np.ndarray, sb: int, Lb: int, acc: np.ndarray) -> None:
    """acc += t(a) %*% b for two row vectors."""
    for p in range(La):
        x = a[p * sa]
        for q in range(Lb):
            acc[p, q] += x * b[q * sb]


# --------------------------------------------------------------------- sparse vector prims
# A sparse row value is the stored range [p0, p1) of the main CSR input, each entry mapped by
# x -> (x * m) / d. Callers use these only when that map sends 0 to 0 (m finite, d non-zero and
# not NaN) and the dense operand is finite, so skipping the zeros gives the dense result.


@_jit
def sp_dot(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, m: float, d: float,
           b: np.ndarray, sb: int) -> float:
    s = 0.0
    for k in range(p0, p1):
        s += ((data[k] * m) / d) * b[idx[k] * sb]
    return s


@_jit
def sp_sum(data: np.ndarray, p0: int, p1: int, m: float, d: float) -> float:
    s = 0.0
    for k in range(p0, p1):
        s += (data[k] * m) / d
    return s


@_jit
def sp_min(data: np.ndarray, p0: int, p1: int, m: float, d: float, L: int) -> float:
    r = np.inf if p1 - p0 == L else 0.0
    for k in range(p0, p1):
        r = s_min(r, (data[k] * m) / d)
    return r


@_jit
def sp_max(data: np.ndarray, p0: int, p1: int, m: float, d: float, L: int) -> float:
    r = -np.inf if p1 - p0 == L else 0.0
    for k in range(p0, p1):
        r = s_max(r, (data[k] * m) / d)
    return r


@_jit
def sp_mult_add(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, m: float, d: float,
                out: np.ndarray) -> None:
    for k in range(p0, p1):
        out[idx[k]] += (data[k] * m) / d


@_jit
def sp_vecmat(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, m: float, d: float,
              B: np.ndarray, out: np.ndarray) -> None:
    out[:] = 0.0
    for k in range(p0, p1):
        x = (data[k] * m) / d
        r = idx[k]
        for c in range(B.shape[1]):
            out[c] += x * B[r, c]


@_jit
def sp_outer_add(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, m: float, d: float,
                 b: np.ndarray, sb: int, Lb: int, acc: np.ndarray) -> None:
    for k in range(p0, p1):
        x = (data[k] * m) / d
        r = idx[k]
        for q in range(Lb):
            acc[r, q] += x * b[q * sb]


@_jit
def zero_safe(m: float, d: float) -> bool:
    return np.isfinite(m) and d != 0.0 and d == d


@_jit
def kcombine_cols(parts: np.ndarray) -> np.ndarray:
    """Per-column block partials (nb x 2 x m: sums, compensations) combined in block order."""
    m = parts.shape[2]
    out = np.empty(m)
    for j in range(m):
        s = 0.0
        c = 0.0
        for b in range(parts.shape[0]):
            s, c = kadd(s, c, kfin(parts[b, 0, j], parts[b, 1, j]))
        out[j] = kfin(s, c)
    return out


@_jit
def all_finite_n(a: np.ndarray, n: int) -> bool:
    for k in range(n):
        if not np.isfinite(a[k]):
            return False
    return True


@_jit
def sp_scatter_row(data: np.ndarray, idx: np.ndarray, p0: int, p1: int, m: float, d: float,
                   out: np.ndarray, i: int) -> None:
    out[i, :] = 0.0
    for k in range(p0, p1):
        out[i, idx[k]] = (data[k] * m) / d


@_jit
def flat(a: np.ndarray) -> np.ndarray:
    """A C-contiguous matrix as a vector (a view). Why a primitive: Numba compiles ``reshape`` as an
    internal subroutine of every kernel that calls it (0.3 s of a first cold compile); a primitive is
    compiled once and then loaded from Numba's cache with the other primitives."""
    return a.reshape(a.size)


@_jit
def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.dot`` of two matrices (BLAS) as a primitive: typing and lowering Numba's ``np.dot`` cost
    a kernel's compile ~1 s; a primitive is compiled once per operand layout and then loaded from
    Numba's cache."""
    return np.dot(a, b)
