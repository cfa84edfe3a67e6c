"""The benchmark algorithms written with lafuse's Python API (``import lafuse as lf``): each the same
computation as its DML in ``algorithms.py``, a Python loop that persists the model once an outer
iteration (one compute: every lazy value of the iteration in one plan, compiled once and reused from
the second iteration on).

    python benchmarks/python_api.py KEY NAME=PATH ...     (prints "T <ns>" and one "R <x>" per result)

as ``numpy_twin.py``: a process of its own, the algorithm timed after its inputs are read, so the
suite's "lafuse-python" column is measured as its "lafuse" (DML) one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import lafuse as lf
import lafuse.api.run  # noqa: F401  (imported before the timed region, as `lafuse run` has its modules
import lafuse.runtime.interp  # noqa: F401  loaded before a script's first time())

sys.path.insert(0, str(Path(__file__).parent))
import algorithms as A  # noqa: E402
import numpy_twin  # noqa: E402


def _cg(G: Any, hessian: Callable[[Any], Any], steps: int) -> Any:
    """Conjugate gradient with fixed steps on H x = -G (the DML's _cg_dml)."""
    S = lf.zeros(G.shape)
    R = -G
    D = R
    rr = (R * R).sum()
    for _ in range(steps):
        HD = hessian(D)
        alpha = rr / (D * HD).sum()
        S = S + alpha * D
        R = R - alpha * HD
        rr_new = (R * R).sum()
        D = R + (rr_new / rr) * D
        rr = rr_new
    return S


def l2svm(a: dict, iters: int) -> tuple:
    X, y = lf.matrix(a["X"]), lf.matrix(a["y"])
    reg = 1.0
    w, Xw = lf.zeros((X.shape[1], 1)), lf.zeros((X.shape[0], 1))
    g_old = X.T @ y
    s, out = g_old, 1 - y
    for _ in range(iters):
        Xd = X @ s
        wd, dd, step = reg * (w * s).sum(), reg * (s * s).sum(), 0.0
        for _ in range(5):
            out = 1 - y * (Xw + step * Xd)
            sv = out > 0
            out = out * sv
            g = wd + step * dd - (out * y * Xd).sum()
            h = dd + (Xd * sv * Xd).sum()
            step = step - g / h
        w = w + step * s
        Xw = Xw + step * Xd
        out = 1 - y * Xw
        out = (out > 0) * out
        g_new = X.T @ (out * y) - reg * w
        s = ((g_new * g_new).sum() / (g_old * g_old).sum()) * s + g_new
        w, Xw, s, g_old, out = lf.persist(w, Xw, s, g_new, out)
    return lf.compute(w.sum(), 0.5 * (out * out).sum() + reg / 2 * (w * w).sum())


def _softmax_rest(X: Any, B: Any) -> Any:
    E = np.exp(X @ B)
    return E / (1 + E.sum(axis=1))


def mlogreg(a: dict, iters: int) -> tuple:
    X, Y = lf.matrix(a["X"]), lf.matrix(a["Y"])
    B = lf.zeros((X.shape[1], Y.shape[1]))
    for _ in range(iters):
        P = _softmax_rest(X, B)
        G = X.T @ (P - Y) + B

        def hess(D: Any, P: Any = P) -> Any:
            Q = P * (X @ D)
            return X.T @ (Q - P * Q.sum(axis=1)) + D
        B = (B + _cg(G, hess, A.CG_STEPS)).persist()
    P = _softmax_rest(X, B)
    nll = -(Y * np.log(P)).sum() - ((1 - Y.sum(axis=1)) * np.log(1 - P.sum(axis=1))).sum()
    return lf.compute(B.sum(), (B * B).sum(), nll)


def glm(a: dict, iters: int) -> tuple:
    X, y = lf.matrix(a["X"]), lf.matrix(a["y"])
    b = lf.zeros((X.shape[1], 1))
    for _ in range(iters):
        mu = np.exp(X @ b)
        b = (b + _cg(X.T @ (mu - y) + b, lambda D, mu=mu: X.T @ (mu * (X @ D)) + D, A.CG_STEPS)).persist()
    eta = X @ b
    return lf.compute(b.sum(), (np.exp(eta) - y * eta).sum())


def _kmeans_dist(X: Any, C: Any) -> Any:
    return -2 * (X @ C.T) + (C ** 2).sum(axis=1).T


def kmeans(a: dict, iters: int) -> tuple:
    X, C = lf.matrix(a["X"]), lf.matrix(a["C0"])
    for _ in range(iters):
        D = _kmeans_dist(X, C)
        P = D <= D.min(axis=1)
        P = P / P.sum(axis=1)
        C = ((P.T @ X) / P.sum(axis=0).T).persist()
    D = _kmeans_dist(X, C)
    return lf.compute(C.sum(), D.min(axis=1).sum() + (X ** 2).sum())


def alscg(a: dict, iters: int) -> tuple:
    X, U, V = lf.matrix(a["X"]), lf.matrix(a["U0"]), lf.matrix(a["V0"])
    W = X != 0
    for _ in range(iters):
        G = (W * (U @ V.T) - X) @ V + U
        U = U + _cg(G, lambda D, V=V: (W * (D @ V.T)) @ V + D, A.ALSCG_CG_STEPS)
        G = (W * (U @ V.T) - X).T @ U + V
        V = V + _cg(G, lambda D, U=U: (W * (U @ D.T)).T @ U + D, A.ALSCG_CG_STEPS)
        U, V = lf.persist(U, V)
    return lf.compute(U.sum(), V.sum(), ((W * (U @ V.T) - X) ** 2).sum() + (U ** 2).sum() + (V ** 2).sum())


def _sig(Z: Any) -> Any:
    return 1 / (1 + np.exp(-Z))


def autoencoder(a: dict, iters: int) -> tuple:
    X = a["X"]
    W1, W2, W3, W4 = (lf.matrix(a[f"W{k}0"]) for k in range(1, 5))
    b1, b2, b3, b4 = (lf.zeros((1, W.shape[1])) for W in (W1, W2, W3, W4))
    for _ in range(iters):
        for beg in range(0, X.shape[0], A.AE_BATCH):
            Xb = lf.matrix(X[beg:beg + A.AE_BATCH])  # (a view of whole rows: no copy)
            A1 = _sig(Xb @ W1 + b1)
            A2 = _sig(A1 @ W2 + b2)
            A3 = _sig(A2 @ W3 + b3)
            D4 = (A3 @ W4 + b4 - Xb) / Xb.shape[0]
            D3 = (D4 @ W4.T) * A3 * (1 - A3)
            D2 = (D3 @ W3.T) * A2 * (1 - A2)
            D1 = (D2 @ W2.T) * A1 * (1 - A1)
            W1, W2, W3, W4, b1, b2, b3, b4 = lf.persist(
                W1 - 0.1 * (Xb.T @ D1), W2 - 0.1 * (A1.T @ D2), W3 - 0.1 * (A2.T @ D3), W4 - 0.1 * (A3.T @ D4),
                b1 - 0.1 * D1.sum(axis=0), b2 - 0.1 * D2.sum(axis=0), b3 - 0.1 * D3.sum(axis=0),
                b4 - 0.1 * D4.sum(axis=0))
    Xa = lf.matrix(X)
    A3 = _sig(_sig(_sig(Xa @ W1 + b1) @ W2 + b2) @ W3 + b3)
    return lf.compute(W1.sum(), W4.sum(), ((A3 @ W4 + b4 - Xa) ** 2).sum())


def mlp(a: dict, iters: int) -> tuple:
    X, y = a["X"], a["y"]
    W1, W2 = lf.matrix(a["W10"]), lf.matrix(a["W20"])
    b1, b2 = lf.zeros((1, W1.shape[1])), 0.0
    for _ in range(iters):
        for beg in range(0, X.shape[0], A.MLP_BATCH):
            Xb, yb = lf.matrix(X[beg:beg + A.MLP_BATCH]), lf.matrix(y[beg:beg + A.MLP_BATCH])
            H = np.tanh(Xb @ W1 + b1)
            p = _sig(H @ W2 + b2)
            d2 = (p - yb) / Xb.shape[0]
            dH = (d2 @ W2.T) * (1 - H ** 2)
            W2, b2, W1, b1 = lf.persist(W2 - 0.5 * (H.T @ d2), b2 - 0.5 * d2.sum(), W1 - 0.5 * (Xb.T @ dH),
                                        b1 - 0.5 * dH.sum(axis=0))
    Xa, ya = lf.matrix(X), lf.matrix(y)
    p = _sig(np.tanh(Xa @ W1 + b1) @ W2 + b2)
    return lf.compute(W1.sum(), W2.sum(), -(ya * np.log(p) + (1 - ya) * np.log(1 - p)).sum())


def pnmf(a: dict, iters: int) -> tuple:
    X, W, H = lf.matrix(a["X"]), lf.matrix(a["W0"]), lf.matrix(a["H0"])
    for _ in range(iters):
        H = (H * (W.T @ (X / (W @ H)))) / W.sum(axis=0).T
        W = (W * ((X / (W @ H)) @ H.T)) / H.sum(axis=1).T
        W, H = lf.persist(W, H)
    obj = lf.as_scalar(W.sum(axis=0) @ H.sum(axis=1)) - (X * np.log(W @ H)).sum()
    return lf.compute(W.sum(), H.sum(), obj)


def gnmf(a: dict, iters: int) -> tuple:
    X, W, H = lf.matrix(a["X"]), lf.matrix(a["W0"]), lf.matrix(a["H0"])
    for _ in range(iters):
        H = H * (W.T @ X) / (W.T @ W @ H)
        W = W * (X @ H.T) / (W @ (H @ H.T))
        W, H = lf.persist(W, H)
    return lf.compute(W.sum(), H.sum(), ((X - W @ H) ** 2).sum())


RUN: dict[str, Callable[[dict, int], tuple]] = {
    "l2svm": l2svm, "mlogreg": mlogreg, "glm": glm, "kmeans": kmeans, "alscg": alscg, "autoencoder": autoencoder,
    "mlp": mlp, "pnmf": pnmf, "gnmf": gnmf,
}


def main(argv: list[str]) -> int:
    return numpy_twin.twin_main(argv, lambda alg, arrays: RUN[alg.key](arrays, alg.iters))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
