"""Hand-written Numba kernels for the fusion benchmark (``benchmarks/fusion.py``): the practical limit.

One kernel per workload, each a single parallel pass over its inputs (``prange`` over rows, no
``fastmath``, float64), so it reads every input once and materializes no intermediate:

* ``cell3_dense`` / ``cell3_csr``: ``sum(X*Y*Z)`` (dense; CSR with a three-way index intersection)
* ``magg2_dense`` / ``magg2_csr``: ``sum(X*Y)`` and ``sum(X*Z)`` in one pass over X, Y and Z
* ``mmchain`` / ``mmchain_mat`` / ``mmchain_csr``: ``t(X) %*% (X %*% v)`` (or a V of few columns) row by
  row, one partial result per chunk of rows
* ``outer_log_sum``: ``sum(X * log(U %*% t(V) + eps))`` over the non-zeros of the CSR matrix X only
* ``outer_div_mm``: ``(X / (U %*% t(V) + eps)) %*% V`` over the non-zeros of X only

Partial sums are kept per row (or per chunk) and added afterwards, so results do not depend on the
thread schedule. The CSR kernels need sorted column indices (``sort_indices()``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_OPTS = {"parallel": True, "cache": True, "fastmath": False, "nogil": True}


# Without fastmath the compiler must keep a reduction's order, so one accumulator is bound by the
# latency of an addition; four independent accumulators (a fixed, deterministic order) are what one
# writes by hand instead.
@nb.njit(inline="always", cache=True)
def _dot(a, b):  # pragma: no cover - compiled
    n = a.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= n:
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
        j += 4
    while j < n:
        s0 += a[j] * b[j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@nb.njit(inline="always", cache=True)
def _dot3(a, b, c):  # pragma: no cover - compiled
    n = a.shape[0]
    s0 = s1 = s2 = s3 = 0.0
    j = 0
    while j + 4 <= n:
        s0 += a[j] * b[j] * c[j]
        s1 += a[j + 1] * b[j + 1] * c[j + 1]
        s2 += a[j + 2] * b[j + 2] * c[j + 2]
        s3 += a[j + 3] * b[j + 3] * c[j + 3]
        j += 4
    while j < n:
        s0 += a[j] * b[j] * c[j]
        j += 1
    return (s0 + s1) + (s2 + s3)


@nb.njit(**_OPTS)
def cell3_dense(x, y, z):  # pragma: no cover - compiled
    n = x.shape[0]
    part = np.zeros(n)
    for i in nb.prange(n):
        part[i] = _dot3(x[i], y[i], z[i])
    return part.sum()


@nb.njit(**_OPTS)
def cell3_csr(n, xp, xi, xv, yp, yi, yv, zp, zi, zv):  # pragma: no cover - compiled
    part = np.zeros(n)
    for i in nb.prange(n):
        a, ae = xp[i], xp[i + 1]
        b, be = yp[i], yp[i + 1]
        c, ce = zp[i], zp[i + 1]
        s = 0.0
        while a < ae and b < be and c < ce:
            ca, cb, cc = xi[a], yi[b], zi[c]
            if ca == cb and cb == cc:
                s += xv[a] * yv[b] * zv[c]
                a += 1
                b += 1
                c += 1
            else:
                hi = max(ca, max(cb, cc))
                if ca < hi:
                    a += 1
                if cb < hi:
                    b += 1
                if cc < hi:
                    c += 1
        part[i] = s
    return part.sum()


@nb.njit(**_OPTS)
def magg2_dense(x, y, z):  # pragma: no cover - compiled
    n, m = x.shape
    p1 = np.zeros(n)
    p2 = np.zeros(n)
    for i in nb.prange(n):
        xi, yi, zi = x[i], y[i], z[i]
        a0 = a1 = b0 = b1 = 0.0
        j = 0
        while j + 2 <= m:
            a0 += xi[j] * yi[j]
            b0 += xi[j] * zi[j]
            a1 += xi[j + 1] * yi[j + 1]
            b1 += xi[j + 1] * zi[j + 1]
            j += 2
        if j < m:
            a0 += xi[j] * yi[j]
            b0 += xi[j] * zi[j]
        p1[i] = a0 + a1
        p2[i] = b0 + b1
    return p1.sum(), p2.sum()


@nb.njit(**_OPTS)
def mmchain(x, v, nchunks):  # pragma: no cover - compiled
    """``t(X) %*% (X %*% v)`` reading X once: for each row, q = x_i . v, then out += q * x_i."""
    n, m = x.shape
    parts = np.zeros((nchunks, m))
    step = (n + nchunks - 1) // nchunks
    for c in nb.prange(nchunks):
        acc = parts[c]
        for i in range(c * step, min(n, (c + 1) * step)):
            q = _dot(x[i], v)
            for j in range(m):
                acc[j] += q * x[i, j]
    out = np.zeros((m, 1))
    for c in range(nchunks):
        for j in range(m):
            out[j, 0] += parts[c, j]
    return out


@nb.njit(**_OPTS)
def outer_log_sum(n, xp, xi, xv, u, v, eps):  # pragma: no cover - compiled
    part = np.zeros(n)
    for i in nb.prange(n):
        s = 0.0
        for p in range(xp[i], xp[i + 1]):
            d = _dot(u[i], v[xi[p]])
            s += xv[p] * np.log(d + eps)
        part[i] = s
    return part.sum()


@nb.njit(**_OPTS)
def outer_div_mm(n, xp, xi, xv, u, v, eps):  # pragma: no cover - compiled
    out = np.zeros((n, v.shape[1]))
    for i in nb.prange(n):
        for p in range(xp[i], xp[i + 1]):
            j = xi[p]
            w = xv[p] / (_dot(u[i], v[j]) + eps)
            for t in range(v.shape[1]):
                out[i, t] += w * v[j, t]
    return out


def csr_parts(a) -> tuple:
    """(indptr, indices, data) of a CSR matrix with sorted indices."""
    a.sort_indices()
    return a.indptr, a.indices, a.data


@nb.njit(**_OPTS)
def stream_sum(x, nchunks):  # pragma: no cover - compiled
    """Sum of a large 1-D array: the read bandwidth a parallel kernel reaches on this machine."""
    n = x.shape[0]
    part = np.zeros(nchunks)
    step = (n + nchunks - 1) // nchunks
    for c in nb.prange(nchunks):
        part[c] = _dot(x[c * step:min(n, (c + 1) * step)], x[c * step:min(n, (c + 1) * step)])
    return part.sum()


@nb.njit(inline="always", cache=True)
def _intersect_dot(ap, ae, ai, av, bp, be, bi, bv):  # pragma: no cover - compiled
    """Sum of a*b over the common columns of two sorted CSR rows."""
    s = 0.0
    while ap < ae and bp < be:
        ca, cb = ai[ap], bi[bp]
        if ca == cb:
            s += av[ap] * bv[bp]
            ap += 1
            bp += 1
        elif ca < cb:
            ap += 1
        else:
            bp += 1
    return s


@nb.njit(**_OPTS)
def magg2_csr(n, xp, xi, xv, yp, yi, yv, zp, zi, zv):  # pragma: no cover - compiled
    """``sum(X*Y)`` and ``sum(X*Z)`` over CSR rows: one pass over X's row for both intersections."""
    p1 = np.zeros(n)
    p2 = np.zeros(n)
    for i in nb.prange(n):
        p1[i] = _intersect_dot(xp[i], xp[i + 1], xi, xv, yp[i], yp[i + 1], yi, yv)
        p2[i] = _intersect_dot(xp[i], xp[i + 1], xi, xv, zp[i], zp[i + 1], zi, zv)
    return p1.sum(), p2.sum()


@nb.njit(**_OPTS)
def mmchain_mat(x, v, nchunks):  # pragma: no cover - compiled
    """``t(X) %*% (X %*% V)`` for a V of few columns, reading X once (as ``mmchain``, per column of V)."""
    n, m = x.shape
    k = v.shape[1]
    vt = np.ascontiguousarray(v.T)
    parts = np.zeros((nchunks, m, k))
    step = (n + nchunks - 1) // nchunks
    for c in nb.prange(nchunks):
        acc = parts[c]
        q = np.zeros(k)
        for i in range(c * step, min(n, (c + 1) * step)):
            for t in range(k):
                q[t] = _dot(x[i], vt[t])
            for j in range(m):
                xij = x[i, j]
                for t in range(k):
                    acc[j, t] += q[t] * xij
    out = np.zeros((m, k))
    for c in range(nchunks):
        out += parts[c]
    return out


@nb.njit(**_OPTS)
def mmchain_csr(n, m, xp, xi, xv, v, nchunks):  # pragma: no cover - compiled
    """``t(X) %*% (X %*% v)`` over a CSR X, one pass over its non-zeros."""
    parts = np.zeros((nchunks, m))
    step = (n + nchunks - 1) // nchunks
    for c in nb.prange(nchunks):
        acc = parts[c]
        for i in range(c * step, min(n, (c + 1) * step)):
            q = 0.0
            for p in range(xp[i], xp[i + 1]):
                q += xv[p] * v[xi[p]]
            for p in range(xp[i], xp[i + 1]):
                acc[xi[p]] += q * xv[p]
    out = np.zeros((m, 1))
    for c in range(nchunks):
        for j in range(m):
            out[j, 0] += parts[c, j]
    return out
