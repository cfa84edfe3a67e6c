"""End-to-end algorithms of paper 000 Table 2 (L2SVM, MLogreg, GLM, KMeans, ALS-CG, AutoEncoder) and
PNMF and GNMF (papers 001 and 004), and a mini-batch SGD loop of a small two-layer network (the shape
of most training code: many small slices and products per epoch), each at two data sizes.

Each algorithm is written once in DML (run by lafuse and SystemDS) and once against an array module
``xp`` (run with NumPy/SciPy, and with JAX: ``jax.jit`` of one iteration, float64 on the CPU), the same
arithmetic in the same order, so every system's printed results are checked against NumPy's. Why not
the builtins (``l2svm()``, ``multiLogReg()``, ...): their convergence checks, random initialization and
verbose output differ between systems; here the iteration counts are fixed and the initial values are
inputs, so all systems do the same work. SystemDS's own scripts are measured by
``systemds_algorithms.py`` and ``systemds_whole.py``.

Sparse inputs (ALS-CG, PNMF) are handled the way a NumPy or JAX user would: products sampled at the
non-zeros of X (a gather over the non-zeros and a sparse product or segment sum), never the dense
``U %*% t(V)``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from harness import DataSet, Workload, csr
from steps import AE_BATCH, ALSCG_CG_STEPS, CG_STEPS, MLP_BATCH

ALG_REL_TOL = 1e-6  # iterative algorithms amplify rounding differences (reduction order, BLAS)
NUMBA_NOTE = "n/a: hand-written kernels are per operator (micro-benchmarks), not whole algorithms"
NUMEXPR_NOTE = "n/a: numexpr evaluates element-wise expressions, not matrix products or loops"


# ---------------------------------------------------------------------------------------------
# sparse products sampled at the non-zeros of X
# ---------------------------------------------------------------------------------------------

class NumpyOps:
    """X's structure as CSR: ``sampled`` is (U %*% t(V)) at X's non-zeros, ``mm``/``tmm`` multiply a
    matrix of X's structure with values ``vals`` (or its transpose) by a dense B."""

    def __init__(self, shape: tuple[int, int]):
        self.shape = shape

    def sampled(self, d: dict, U: Any, V: Any) -> Any:
        return np.einsum("ij,ij->i", U[d["rows"]], V[d["cols"]])

    def _s(self, d: dict, vals: Any) -> sp.csr_array:
        return sp.csr_array((vals, d["cols"], d["indptr"]), shape=self.shape)

    def mm(self, d: dict, vals: Any, B: Any) -> Any:
        return self._s(d, vals) @ B

    def tmm(self, d: dict, vals: Any, B: Any) -> Any:
        return self._s(d, vals).T @ B


class JaxOps:
    def __init__(self, shape: tuple[int, int], jax: Any):
        self.shape, self.jax = shape, jax

    def sampled(self, d: dict, U: Any, V: Any) -> Any:
        return self.jax.numpy.sum(U[d["rows"]] * V[d["cols"]], axis=1)

    def mm(self, d: dict, vals: Any, B: Any) -> Any:
        return self.jax.ops.segment_sum(vals[:, None] * B[d["cols"]], d["rows"], num_segments=self.shape[0])

    def tmm(self, d: dict, vals: Any, B: Any) -> Any:
        return self.jax.ops.segment_sum(vals[:, None] * B[d["rows"]], d["cols"], num_segments=self.shape[1])


# ---------------------------------------------------------------------------------------------
# the algorithms: DML, and the same steps against xp
# ---------------------------------------------------------------------------------------------

L2SVM_DML = """
reg = 1
w = matrix(0, rows=ncol(X), cols=1)
Xw = matrix(0, rows=nrow(X), cols=1)
g_old = t(X) %*% y
s = g_old
out = 1 - y
for (iter in 1:ITER) {
  Xd = X %*% s
  wd = reg * sum(w * s)
  dd = reg * sum(s * s)
  step = 0
  for (ii in 1:5) {
    out = 1 - y * (Xw + step * Xd)
    sv = out > 0
    out = out * sv
    g = wd + step * dd - sum(out * y * Xd)
    h = dd + sum(Xd * sv * Xd)
    step = step - g / h
  }
  w = w + step * s
  Xw = Xw + step * Xd
  out = 1 - y * Xw
  out = (out > 0) * out
  g_new = t(X) %*% (out * y) - reg * w
  s = (sum(g_new * g_new) / sum(g_old * g_old)) * s + g_new
  g_old = g_new
}
r1 = sum(w)
r2 = 0.5 * sum(out * out) + reg / 2 * sum(w * w)
"""


def l2svm_init(xp: Any, d: dict) -> tuple:
    X, y = d["X"], d["y"]
    g = X.T @ y
    return xp.zeros((X.shape[1], 1)), xp.zeros((X.shape[0], 1)), g, g, 1 - y


def l2svm_step(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    X, y = d["X"], d["y"]
    w, Xw, s, g_old, out = st
    Xd = X @ s
    wd, dd, step = xp.sum(w * s), xp.sum(s * s), 0.0
    for _ in range(5):
        out = 1 - y * (Xw + step * Xd)
        sv = out > 0
        out = out * sv
        g = wd + step * dd - xp.sum(out * y * Xd)
        h = dd + xp.sum(Xd * sv * Xd)
        step = step - g / h
    w = w + step * s
    Xw = Xw + step * Xd
    out = 1 - y * Xw
    out = (out > 0) * out
    g_new = X.T @ (out * y) - w
    s = (xp.sum(g_new * g_new) / xp.sum(g_old * g_old)) * s + g_new
    return w, Xw, s, g_new, out


def l2svm_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    w, out = st[0], st[4]
    return xp.sum(w), 0.5 * xp.sum(out * out) + 0.5 * xp.sum(w * w)


def _cg_dml(unknown: str, hessian: str, update: str) -> str:
    """Conjugate gradient with CG fixed steps on H x = -G, H applied by ``hessian`` (of D, into HD)."""
    return f"""  {unknown} = matrix(0, rows=nrow(G), cols=ncol(G))
  R = -G
  D = R
  rr = sum(R * R)
  for (ii in 1:CG) {{
    HD = {hessian}
    alpha = rr / sum(D * HD)
    {unknown} = {unknown} + alpha * D
    R = R - alpha * HD
    rr_new = sum(R * R)
    D = R + (rr_new / rr) * D
    rr = rr_new
  }}
  {update}
"""


def _cg(xp: Any, G: Any, hessian: Callable[[Any], Any], steps: int) -> Any:
    S = xp.zeros(G.shape)
    R = -G
    D = R
    rr = xp.sum(R * R)
    for _ in range(steps):
        HD = hessian(D)
        alpha = rr / xp.sum(D * HD)
        S = S + alpha * D
        R = R - alpha * HD
        rr_new = xp.sum(R * R)
        D = R + (rr_new / rr) * D
        rr = rr_new
    return S


MLOGREG_DML = """
B = matrix(0, rows=ncol(X), cols=ncol(Y))
for (iter in 1:ITER) {
  E = exp(X %*% B)
  P = E / (1 + rowSums(E))
  G = t(X) %*% (P - Y) + B
""" + _cg_dml("S", "t(X) %*% (P * (X %*% D) - P * rowSums(P * (X %*% D))) + D", "B = B + S") + """}
E = exp(X %*% B)
P = E / (1 + rowSums(E))
r1 = sum(B)
r2 = sum(B * B)
r3 = -sum(Y * log(P)) - sum((1 - rowSums(Y)) * log(1 - rowSums(P)))
"""


def _softmax_rest(xp: Any, X: Any, B: Any) -> Any:
    E = xp.exp(X @ B)
    return E / (1 + xp.sum(E, axis=1, keepdims=True))


def mlogreg_step(xp: Any, ops: Any, d: dict, B: Any) -> Any:
    X, Y = d["X"], d["Y"]
    P = _softmax_rest(xp, X, B)
    G = X.T @ (P - Y) + B

    def hess(D: Any) -> Any:
        Q = P * (X @ D)
        return X.T @ (Q - P * xp.sum(Q, axis=1, keepdims=True)) + D
    return B + _cg(xp, G, hess, CG_STEPS)


def mlogreg_finish(xp: Any, ops: Any, d: dict, B: Any) -> tuple:
    X, Y = d["X"], d["Y"]
    P = _softmax_rest(xp, X, B)
    nll = -xp.sum(Y * xp.log(P)) - xp.sum((1 - xp.sum(Y, axis=1)) * xp.log(1 - xp.sum(P, axis=1)))
    return xp.sum(B), xp.sum(B * B), nll


GLM_DML = """
b = matrix(0, rows=ncol(X), cols=1)
for (iter in 1:ITER) {
  mu = exp(X %*% b)
  G = t(X) %*% (mu - y) + b
""" + _cg_dml("S", "t(X) %*% (mu * (X %*% D)) + D", "b = b + S") + """}
r1 = sum(b)
r2 = sum(exp(X %*% b) - y * (X %*% b))
"""


def glm_step(xp: Any, ops: Any, d: dict, b: Any) -> Any:
    X, y = d["X"], d["y"]
    mu = xp.exp(X @ b)
    return b + _cg(xp, X.T @ (mu - y) + b, lambda D: X.T @ (mu * (X @ D)) + D, CG_STEPS)


def glm_finish(xp: Any, ops: Any, d: dict, b: Any) -> tuple:
    X, y = d["X"], d["y"]
    eta = X @ b
    return xp.sum(b), xp.sum(xp.exp(eta) - y * eta)


KMEANS_DML = """
C = C0
for (iter in 1:ITER) {
  D = -2 * (X %*% t(C)) + t(rowSums(C ^ 2))
  P = D <= rowMins(D)
  P = P / rowSums(P)
  C = (t(P) %*% X) / t(colSums(P))
}
D = -2 * (X %*% t(C)) + t(rowSums(C ^ 2))
r1 = sum(C)
r2 = sum(rowMins(D)) + sum(X ^ 2)
"""


def _kmeans_dist(xp: Any, X: Any, C: Any) -> Any:
    return -2 * (X @ C.T) + xp.sum(C ** 2, axis=1)[None, :]


def kmeans_step(xp: Any, ops: Any, d: dict, C: Any) -> Any:
    X = d["X"]
    D = _kmeans_dist(xp, X, C)
    P = (D <= xp.min(D, axis=1, keepdims=True)) * 1.0
    P = P / xp.sum(P, axis=1, keepdims=True)
    return (P.T @ X) / xp.sum(P, axis=0)[:, None]


def kmeans_finish(xp: Any, ops: Any, d: dict, C: Any) -> tuple:
    X = d["X"]
    return xp.sum(C), xp.sum(xp.min(_kmeans_dist(xp, X, C), axis=1)) + xp.sum(X ** 2)


ALSCG_DML = """
U = U0
V = V0
W = X != 0
for (iter in 1:ITER) {
  G = (W * (U %*% t(V)) - X) %*% V + U
""" + _cg_dml("SU", "(W * (D %*% t(V))) %*% V + D", "U = U + SU") + """
  G = t(W * (U %*% t(V)) - X) %*% U + V
""" + _cg_dml("SV", "t(W * (U %*% t(D))) %*% U + D", "V = V + SV") + """}
r1 = sum(U)
r2 = sum(V)
r3 = sum((W * (U %*% t(V)) - X) ^ 2) + sum(U ^ 2) + sum(V ^ 2)
"""


def alscg_step(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    U, V = st
    vals = d["vals"]
    G = ops.mm(d, ops.sampled(d, U, V) - vals, V) + U
    U = U + _cg(xp, G, lambda D: ops.mm(d, ops.sampled(d, D, V), V) + D, ALSCG_CG_STEPS)
    G = ops.tmm(d, ops.sampled(d, U, V) - vals, U) + V
    V = V + _cg(xp, G, lambda D: ops.tmm(d, ops.sampled(d, U, D), U) + D, ALSCG_CG_STEPS)
    return U, V


def alscg_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    U, V = st
    err = ops.sampled(d, U, V) - d["vals"]
    return xp.sum(U), xp.sum(V), xp.sum(err ** 2) + xp.sum(U ** 2) + xp.sum(V ** 2)


AE_INIT = """W1 = W10
W2 = W20
W3 = W30
W4 = W40
b1 = matrix(0, rows=1, cols=ncol(W1))
b2 = matrix(0, rows=1, cols=ncol(W2))
b3 = matrix(0, rows=1, cols=ncol(W3))
b4 = matrix(0, rows=1, cols=ncol(W4))
"""


def ae_step_dml(x: str, indent: str) -> str:
    """One gradient step of the two-layer autoencoder on the rows ``x`` (DML lines, indented): the
    mini-batch benchmark's and the distributed section's full-batch one."""
    lines = f"""A1 = 1 / (1 + exp(-({x} %*% W1 + b1)))
A2 = 1 / (1 + exp(-(A1 %*% W2 + b2)))
A3 = 1 / (1 + exp(-(A2 %*% W3 + b3)))
D4 = (A3 %*% W4 + b4 - {x}) / nrow({x})
D3 = (D4 %*% t(W4)) * A3 * (1 - A3)
D2 = (D3 %*% t(W3)) * A2 * (1 - A2)
D1 = (D2 %*% t(W2)) * A1 * (1 - A1)
W4 = W4 - 0.1 * (t(A3) %*% D4)
b4 = b4 - 0.1 * colSums(D4)
W3 = W3 - 0.1 * (t(A2) %*% D3)
b3 = b3 - 0.1 * colSums(D3)
W2 = W2 - 0.1 * (t(A1) %*% D2)
b2 = b2 - 0.1 * colSums(D2)
W1 = W1 - 0.1 * (t({x}) %*% D1)
b1 = b1 - 0.1 * colSums(D1)
"""
    return "".join(indent + ln for ln in lines.splitlines(keepends=True))


AE_DML = f"""
n = nrow(X)
nb = ceil(n / {AE_BATCH})
{AE_INIT}for (ep in 1:ITER) {{
  for (bi in 1:nb) {{
    Xb = X[((bi - 1) * {AE_BATCH} + 1):min(n, bi * {AE_BATCH}), ]
{ae_step_dml("Xb", "    ")}  }}
}}
A1 = 1 / (1 + exp(-(X %*% W1 + b1)))
A2 = 1 / (1 + exp(-(A1 %*% W2 + b2)))
A3 = 1 / (1 + exp(-(A2 %*% W3 + b3)))
r1 = sum(W1)
r2 = sum(W4)
r3 = sum((A3 %*% W4 + b4 - X) ^ 2)
"""


def _sig(xp: Any, Z: Any) -> Any:
    return 1 / (1 + xp.exp(-Z))


def ae_init(xp: Any, d: dict) -> tuple:
    Ws = tuple(d[f"W{k}0"] for k in range(1, 5))
    return Ws + tuple(xp.zeros((1, W.shape[1])) for W in Ws)


def ae_step(xp: Any, ops: Any, d: dict, st: tuple, Xb: Any) -> tuple:
    W1, W2, W3, W4, b1, b2, b3, b4 = st
    A1 = _sig(xp, Xb @ W1 + b1)
    A2 = _sig(xp, A1 @ W2 + b2)
    A3 = _sig(xp, A2 @ W3 + b3)
    D4 = (A3 @ W4 + b4 - Xb) / Xb.shape[0]
    D3 = (D4 @ W4.T) * A3 * (1 - A3)
    D2 = (D3 @ W3.T) * A2 * (1 - A2)
    D1 = (D2 @ W2.T) * A1 * (1 - A1)

    def cs(D: Any) -> Any:
        return xp.sum(D, axis=0, keepdims=True)
    return (W1 - 0.1 * (Xb.T @ D1), W2 - 0.1 * (A1.T @ D2), W3 - 0.1 * (A2.T @ D3), W4 - 0.1 * (A3.T @ D4),
            b1 - 0.1 * cs(D1), b2 - 0.1 * cs(D2), b3 - 0.1 * cs(D3), b4 - 0.1 * cs(D4))


def ae_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W1, W2, W3, W4, b1, b2, b3, b4 = st
    X = d["X"]
    A3 = _sig(xp, _sig(xp, _sig(xp, X @ W1 + b1) @ W2 + b2) @ W3 + b3)
    return xp.sum(W1), xp.sum(W4), xp.sum((A3 @ W4 + b4 - X) ** 2)


def ae_batches(d: dict, iters: int) -> Iterator[tuple]:
    n = d["X"].shape[0]
    for _ in range(iters):
        for beg in range(0, n, AE_BATCH):
            yield (d["X"][beg:beg + AE_BATCH],)


MLP_DML = f"""
n = nrow(X)
nb = ceil(n / {MLP_BATCH})
W1 = W10
W2 = W20
b1 = matrix(0, rows=1, cols=ncol(W1))
b2 = 0
for (ep in 1:ITER) {{
  for (bi in 1:nb) {{
    beg = (bi - 1) * {MLP_BATCH} + 1
    end = min(n, bi * {MLP_BATCH})
    Xb = X[beg:end, ]
    yb = y[beg:end, ]
    H = tanh(Xb %*% W1 + b1)
    p = 1 / (1 + exp(-(H %*% W2 + b2)))
    d2 = (p - yb) / nrow(Xb)
    dH = (d2 %*% t(W2)) * (1 - H ^ 2)
    W2 = W2 - 0.5 * (t(H) %*% d2)
    b2 = b2 - 0.5 * sum(d2)
    W1 = W1 - 0.5 * (t(Xb) %*% dH)
    b1 = b1 - 0.5 * colSums(dH)
  }}
}}
p = 1 / (1 + exp(-(tanh(X %*% W1 + b1) %*% W2 + b2)))
r1 = sum(W1)
r2 = sum(W2)
r3 = -sum(y * log(p) + (1 - y) * log(1 - p))
"""


def mlp_init(xp: Any, d: dict) -> tuple:
    return d["W10"], d["W20"], xp.zeros((1, d["W10"].shape[1])), 0.0


def mlp_step(xp: Any, ops: Any, d: dict, st: tuple, Xb: Any, yb: Any) -> tuple:
    W1, W2, b1, b2 = st
    H = xp.tanh(Xb @ W1 + b1)
    p = _sig(xp, H @ W2 + b2)
    d2 = (p - yb) / Xb.shape[0]
    dH = (d2 @ W2.T) * (1 - H ** 2)
    return (W1 - 0.5 * (Xb.T @ dH), W2 - 0.5 * (H.T @ d2), b1 - 0.5 * xp.sum(dH, axis=0, keepdims=True),
            b2 - 0.5 * xp.sum(d2))


def mlp_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W1, W2, b1, b2 = st
    X, y = d["X"], d["y"]
    p = _sig(xp, xp.tanh(X @ W1 + b1) @ W2 + b2)
    return xp.sum(W1), xp.sum(W2), -xp.sum(y * xp.log(p) + (1 - y) * xp.log(1 - p))


def mlp_batches(d: dict, iters: int) -> Iterator[tuple]:
    n = d["X"].shape[0]
    for _ in range(iters):
        for beg in range(0, n, MLP_BATCH):
            yield d["X"][beg:beg + MLP_BATCH], d["y"][beg:beg + MLP_BATCH]


PNMF_DML = """
W = W0
H = H0
for (iter in 1:ITER) {
  H = (H * (t(W) %*% (X / (W %*% H)))) / t(colSums(W))
  W = (W * ((X / (W %*% H)) %*% t(H))) / t(rowSums(H))
}
r1 = sum(W)
r2 = sum(H)
r3 = as.scalar(colSums(W) %*% rowSums(H)) - sum(X * log(W %*% H))
"""


def pnmf_step(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W, H = st
    vals = d["vals"]
    H = (H * ops.tmm(d, vals / ops.sampled(d, W, H.T), W).T) / xp.sum(W, axis=0)[:, None]
    W = (W * ops.mm(d, vals / ops.sampled(d, W, H.T), H.T)) / xp.sum(H, axis=1)[None, :]
    return W, H


def pnmf_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W, H = st
    obj = xp.sum(W, axis=0) @ xp.sum(H, axis=1) - xp.sum(d["vals"] * xp.log(ops.sampled(d, W, H.T)))
    return xp.sum(W), xp.sum(H), obj


GNMF_DML = """
W = W0
H = H0
for (iter in 1:ITER) {
  H = H * (t(W) %*% X) / (t(W) %*% W %*% H)
  W = W * (X %*% t(H)) / (W %*% (H %*% t(H)))
}
r1 = sum(W)
r2 = sum(H)
r3 = sum((X - W %*% H) ^ 2)
"""


def gnmf_step(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W, H = st
    X = d["X"]
    H = H * (W.T @ X) / (W.T @ W @ H)
    W = W * (X @ H.T) / (W @ (H @ H.T))
    return W, H


def gnmf_finish(xp: Any, ops: Any, d: dict, st: tuple) -> tuple:
    W, H = st
    return xp.sum(W), xp.sum(H), xp.sum((d["X"] - W @ H) ** 2)


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------

def _gen_classes(rng: np.random.Generator, n: int, m: int) -> dict:
    X = rng.normal(size=(n, m)) / np.sqrt(m)
    score = X @ rng.normal(size=(m, 1)) + 0.3 * rng.normal(size=(n, 1))
    return {"X": X, "y": np.where(score > 0, 1.0, -1.0),
            "Y": np.eye(3)[np.digitize(score[:, 0], np.quantile(score, [1 / 3, 2 / 3]))][:, 1:].copy()}


def _gen_glm(rng: np.random.Generator, n: int, m: int) -> dict:
    X = rng.normal(size=(n, m)) / np.sqrt(m)
    return {"X": X, "y": rng.poisson(np.exp(X @ rng.normal(size=(m, 1)))).astype(np.float64)}


def _gen_kmeans(rng: np.random.Generator, n: int, m: int, k: int = 10) -> dict:
    centres = 4 * rng.normal(size=(k, m))
    X = centres[np.arange(n) % k] + rng.normal(size=(n, m))
    return {"X": X, "C0": X[:k].copy()}


def _gen_sparse_factors(rng: np.random.Generator, n: int, m: int, rank: int, counts: bool) -> dict:
    # no empty row or column: the dense semantics of X / (W %*% H) give 0/0 = NaN where a factor's
    # column is driven to zero, the sampled NumPy form would not
    k = max(n, m)
    cover = sp.coo_array((rng.random(k), (np.arange(k) % n, np.arange(k) % m)), shape=(n, m))
    X = csr(sp.random_array((n, m), density=0.01, format="csr", rng=rng) + cover)
    X.data = np.floor(1 + 4 * X.data) if counts else 1 + 4 * X.data
    if counts:
        return {"X": X, "W0": rng.uniform(0.5, 1.5, (n, rank)), "H0": rng.uniform(0.5, 1.5, (rank, m))}
    return {"X": X, "U0": rng.uniform(-0.5, 0.5, (n, rank)), "V0": rng.uniform(-0.5, 0.5, (m, rank))}


def _gen_ae(rng: np.random.Generator, n: int, m: int, h1: int = 50, h2: int = 10) -> dict:
    base = rng.random((20, m))
    X = np.clip(base[rng.integers(0, 20, n)] + 0.1 * rng.normal(size=(n, m)), 0, 1)
    dims = [(m, h1), (h1, h2), (h2, h1), (h1, m)]
    return {"X": X, **{f"W{k + 1}0": rng.normal(size=s) / np.sqrt(s[0]) for k, s in enumerate(dims)}}


def _gen_mlp(rng: np.random.Generator, n: int, m: int, hidden: int = 32) -> dict:
    X = rng.normal(size=(n, m))
    y = (np.sin(X[:, :1]) + X[:, 1:2] * X[:, 2:3] + 0.3 * rng.normal(size=(n, 1)) > 0).astype(np.float64)
    return {"X": X, "y": y, "W10": rng.normal(size=(m, hidden)) / np.sqrt(m),
            "W20": rng.normal(size=(hidden, 1)) / np.sqrt(hidden)}


def _gen_gnmf(rng: np.random.Generator, n: int, m: int, rank: int = 10) -> dict:
    X = rng.random((n, rank)) @ rng.random((rank, m)) + 0.1 * rng.random((n, m))
    return {"X": X, "W0": rng.uniform(0.5, 1.5, (n, rank)), "H0": rng.uniform(0.5, 1.5, (rank, m))}


# ---------------------------------------------------------------------------------------------
# the benchmark table
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Algorithm:
    key: str
    title: str
    dml: str
    inputs: tuple[str, ...]
    gen: Callable[[np.random.Generator, int, int], dict]
    step: Callable[..., Any]
    finish: Callable[..., tuple]
    iters: int
    sizes: dict[str, tuple[tuple[int, int], tuple[int, int]]]  # "quick"/"full" -> (small, large) (n, m)
    init: Callable[[Any, dict], Any] | None = None  # default: the tuple of the inputs named *0
    batches: Callable[[dict, int], Iterator[tuple]] | None = None
    n_out: int = 3
    sparse: bool = False
    data: str = ""  # algorithms with the same data name share their generated inputs (default: key)
    known_wrong: tuple[tuple[str, str], ...] = ()  # (system, evidence): Workload.known_wrong
    cg: int = CG_STEPS  # the DML's 1:CG; the step function passes the same count to _cg

    def start(self, xp: Any, d: dict) -> Any:
        if self.init is not None:
            return self.init(xp, d)
        st = tuple(d[k] for k in self.inputs if k.endswith("0"))
        return st if len(st) > 1 else xp.zeros((d["X"].shape[1], d["Y"].shape[1] if "Y" in d else 1))


def _prepare(a: dict, sparse: bool) -> dict:
    d = {k: v for k, v in a.items() if k != "X" or not sparse}
    if sparse:
        X = a["X"]
        d["rows"] = np.repeat(np.arange(X.shape[0], dtype=np.int32), np.diff(X.indptr))
        d["cols"], d["vals"], d["indptr"] = X.indices.astype(np.int32), X.data, X.indptr
    return d


def _iterations(alg: Algorithm, d: dict) -> Iterator[tuple]:
    return alg.batches(d, alg.iters) if alg.batches else iter([()] * alg.iters)


def run_numpy(alg: Algorithm, a: dict) -> tuple[float, ...]:
    d = _prepare(a, alg.sparse)
    ops = NumpyOps(a["X"].shape)
    st = alg.start(np, d)
    for extra in _iterations(alg, d):
        st = alg.step(np, ops, d, st, *extra)
    return tuple(float(v) for v in alg.finish(np, ops, d, st))


def build_jax(alg: Algorithm) -> Callable[[Any, dict], Callable[[], Any]]:
    """One jitted iteration (and a jitted final evaluation), looped over in Python: the inputs are
    arguments, not constants folded into the program."""
    def build(jax: Any, a: dict) -> Callable[[], Any]:
        jnp = jax.numpy
        d = {k: jax.device_put(v) for k, v in _prepare(a, alg.sparse).items() if k != "indptr"}
        ops = JaxOps(a["X"].shape, jax)
        step = jax.jit(functools.partial(alg.step, jnp, ops))
        finish = jax.jit(functools.partial(alg.finish, jnp, ops))

        def run() -> tuple[float, ...]:
            st = alg.start(jnp, d)
            for extra in _iterations(alg, d):
                st = step(d, st, *extra)
            return tuple(float(v) for v in jax.block_until_ready(finish(d, st)))
        return run
    return build


_CLS = {"quick": ((10000, 100), (50000, 100)), "full": ((100000, 100), (1000000, 100))}
ALGORITHMS = [
    Algorithm("l2svm", "L2SVM", L2SVM_DML, ("X", "y"), _gen_classes, l2svm_step, l2svm_finish, 10, _CLS,
              init=l2svm_init, n_out=2, data="classes"),
    Algorithm("mlogreg", "MLogreg", MLOGREG_DML, ("X", "Y"), _gen_classes, mlogreg_step, mlogreg_finish, 5,
              _CLS, data="classes"),
    Algorithm("glm", "GLM (Poisson)", GLM_DML, ("X", "y"), _gen_glm, glm_step, glm_finish, 5, _CLS, n_out=2),
    Algorithm("kmeans", "KMeans", KMEANS_DML, ("X", "C0"), _gen_kmeans, kmeans_step, kmeans_finish, 10,
              {"quick": ((10000, 50), (50000, 50)), "full": ((100000, 50), (1000000, 50))},
              init=lambda xp, d: d["C0"], n_out=2),
    Algorithm("alscg", "ALS-CG", ALSCG_DML, ("X", "U0", "V0"),
              lambda r, n, m: _gen_sparse_factors(r, n, m, 20, False), alscg_step, alscg_finish, 2,
              {"quick": ((2000, 2000), (5000, 5000)), "full": ((5000, 5000), (10000, 10000))}, sparse=True,
              cg=ALSCG_CG_STEPS),
    Algorithm("autoencoder", "AutoEncoder", AE_DML, ("X", "W10", "W20", "W30", "W40"), _gen_ae, ae_step,
              ae_finish, 1, {"quick": ((5000, 100), (20000, 100)), "full": ((20000, 100), (100000, 100))},
              init=ae_init, batches=ae_batches),
    Algorithm("mlp", "Mini-batch MLP", MLP_DML, ("X", "y", "W10", "W20"), _gen_mlp, mlp_step, mlp_finish, 2,
              {"quick": ((10000, 64), (50000, 64)), "full": ((50000, 64), (200000, 64))},
              init=mlp_init, batches=mlp_batches,
              known_wrong=(("systemds-codegen-on", "SystemDS 3.4 with codegen computes other values (make bench at "
                            "b2b8a1a: r1 0.780 vs 1.772 at the small size); with codegen off it agrees with NumPy, "
                            "JAX and every lafuse policy"),)),
    Algorithm("pnmf", "PNMF", PNMF_DML, ("X", "W0", "H0"),
              lambda r, n, m: _gen_sparse_factors(r, n, m, 10, True), pnmf_step, pnmf_finish, 10,
              {"quick": ((2000, 2000), (5000, 5000)), "full": ((5000, 5000), (10000, 10000))}, sparse=True),
    Algorithm("gnmf", "GNMF", GNMF_DML, ("X", "W0", "H0"), _gen_gnmf, gnmf_step, gnmf_finish, 10,
              {"quick": ((2000, 500), (10000, 500)), "full": ((10000, 1000), (50000, 1000))}),
]


def data_name(alg: Algorithm, size: str) -> str:
    return f"{alg.data or alg.key}-{size}"


def generate(alg: Algorithm, size: str, quick: bool) -> DataSet:
    """The inputs of every algorithm sharing this one's data (L2SVM and MLogreg: one X, two labelings)."""
    n, m = alg.sizes["quick" if quick else "full"][0 if size == "small" else 1]
    rng = np.random.default_rng([sum(map(ord, alg.data or alg.key)), n, m])
    return DataSet(data_name(alg, size), alg.gen(rng, n, m))


def workload(alg: Algorithm, size: str) -> Workload:
    body = alg.dml.replace("1:ITER", f"1:{alg.iters}").replace("1:CG", f"1:{alg.cg}")
    return Workload(
        f"{alg.key}-{size}", alg.title, data_name(alg, size), list(alg.inputs), body, "scalars",
        numpy=functools.partial(run_numpy, alg), numba=None, numba_note=NUMBA_NOTE, numexpr_note=NUMEXPR_NOTE,
        jax=build_jax(alg), jax_note="jit of one iteration" + (", gather over nnz(X)" if alg.sparse else ""),
        numpy_note="SciPy CSR, products sampled at nnz(X)" if alg.sparse else "", n_out=alg.n_out,
        group="algorithm", size=size, algorithm=alg.title, passes=alg.iters, single=True, rel_tol=ALG_REL_TOL,
        known_wrong=dict(alg.known_wrong),
        numpy_process=[sys.executable, str(Path(__file__).with_name("numpy_twin.py")), alg.key],
        python_process=[sys.executable, str(Path(__file__).with_name("python_api.py")), alg.key, str(alg.iters)])
