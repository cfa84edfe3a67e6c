"""Hand-written Numba kernels for the fusion benchmark (``benchmarks/fusion.py``): the practical limit.

One kernel per workload, each a single parallel pass over its inputs (``prange`` over rows, no
``fastmath``, float64), so it reads every input once and materializes no intermediate:

* ``cell3_dense`` / ``cell3_csr``: ``sum(X*Y*Z)`` (dense; CSR with a three-way index intersection)
* ``magg2_dense``: ``sum(X*Y)`` and ``sum(X*Z)`` in one pass over X, Y and Z
* ``mmchain``: ``t(X) %*% (X %*% v)`` row by row, one partial result vector per chunk of rows
* ``outer_log_sum``: ``sum(X * log(U %*% t(V) + eps))`` over the non-zeros of the CSR matrix X only
* ``outer_div_mm``: ``(X / (U %*% t(V) + eps)) %*% V`` over the non-zeros of X only

Partial sums are kept per row (or per chunk) and added afterwards, so results do not depend on the
thread schedule. The CSR kernels need sorted column indices (``sort_indices()``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_OPTS = {"parallel": True, "cache": True, "fastmath": False, "nogil": True}


@nb.njit(**_OPTS)
def cell3_dense(x, y, z):  # pragma: no cover - compiled
    n, m = x.shape
    part = np.zeros(n)
    for i in nb.prange(n):
        s = 0.0
        for j in range(m):
            s += x[i, j] * y[i, j] * z[i, j]
        part[i] = s
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
        s1 = 0.0
        s2 = 0.0
        for j in range(m):
            xv = x[i, j]
            s1 += xv * y[i, j]
            s2 += xv * z[i, j]
        p1[i] = s1
        p2[i] = s2
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
            q = 0.0
            for j in range(m):
                q += x[i, j] * v[j]
            for j in range(m):
                acc[j] += q * x[i, j]
    out = np.zeros((m, 1))
    for c in range(nchunks):
        for j in range(m):
            out[j, 0] += parts[c, j]
    return out


@nb.njit(**_OPTS)
def outer_log_sum(n, xp, xi, xv, u, v, eps):  # pragma: no cover - compiled
    k = u.shape[1]
    part = np.zeros(n)
    for i in nb.prange(n):
        s = 0.0
        for p in range(xp[i], xp[i + 1]):
            j = xi[p]
            d = 0.0
            for t in range(k):
                d += u[i, t] * v[j, t]
            s += xv[p] * np.log(d + eps)
        part[i] = s
    return part.sum()


@nb.njit(**_OPTS)
def outer_div_mm(n, xp, xi, xv, u, v, eps):  # pragma: no cover - compiled
    k = u.shape[1]
    out = np.zeros((n, v.shape[1]))
    for i in nb.prange(n):
        for p in range(xp[i], xp[i + 1]):
            j = xi[p]
            d = 0.0
            for t in range(k):
                d += u[i, t] * v[j, t]
            w = xv[p] / (d + eps)
            for t in range(v.shape[1]):
                out[i, t] += w * v[j, t]
    return out


def csr_parts(a) -> tuple:
    """(indptr, indices, data) of a CSR matrix with sorted indices."""
    a.sort_indices()
    return a.indptr, a.indices, a.data
