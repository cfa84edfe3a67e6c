"""The benchmark algorithms written with lafuse's Python API (``import lafuse as lf``): each the same
computation as its DML in ``algorithms.py``, statement for statement, its loops staged
(``lf.fori_loop``: DML loops of the one compiled script, so the same plans as the DML's), built and
compiled before the timed region and run by ``compute`` in it, as ``lafuse run`` compiles a script
before the script's first ``time()``.

    python benchmarks/python_api.py KEY ITERS NAME=PATH ...   (prints "T <ns>" and one "R <x>" per result)

as ``numpy_twin.py``: a process of its own, the algorithm timed after its inputs are read, so the
suite's "lafuse-python" column is measured as its "lafuse" (DML) one; the process imports lafuse,
NumPy and ``steps.py`` (SciPy for a sparse input), as a user's script would.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lafuse as lf  # (before NumPy, as a lafuse run has it: lafuse sets OpenBLAS's idle spin first)
import lafuse.api.run  # noqa: F401  (imported before the timed region, as `lafuse run` has its modules
import lafuse.runtime.interp  # noqa: F401  loaded before a script's first time())

sys.path.insert(0, str(Path(__file__).parent))
import numpy as np  # noqa: E402  (after lafuse: see above)
import steps as A  # noqa: E402  (only the constants: no benchmark machinery, see steps.py)


def _cg(G: Any, hessian: Callable[[Any], Any], steps: int) -> Any:
    """Conjugate gradient with fixed steps on H x = -G, a staged loop (the DML's _cg_dml)."""
    def step(_: Any, st: tuple) -> tuple:
        S, R, D, rr = st
        HD = hessian(D)
        alpha = rr / (D * HD).sum()
        S = S + alpha * D
        R = R - alpha * HD
        rr_new = (R * R).sum()
        return S, R, R + (rr_new / rr) * D, rr_new

    R = -G
    return lf.fori_loop(0, steps, step, (lf.zeros(G.shape), R, R, (R * R).sum()))[0]


def l2svm(a: dict, iters: int) -> tuple:
    X, y = lf.matrix(a["X"]), lf.matrix(a["y"])
    reg = 1

    def iteration(_: Any, st: tuple) -> tuple:
        w, Xw, s, g_old, out = st
        Xd = X @ s
        wd, dd = reg * (w * s).sum(), reg * (s * s).sum()

        def line_search(_: Any, ls: tuple) -> tuple:
            step, out = ls
            out = 1 - y * (Xw + step * Xd)
            sv = out > 0
            out = out * sv
            g = wd + step * dd - (out * y * Xd).sum()
            h = dd + (Xd * sv * Xd).sum()
            return step - g / h, out

        step, out = lf.fori_loop(0, 5, line_search, (0, out))
        w = w + step * s
        Xw = Xw + step * Xd
        out = 1 - y * Xw
        out = (out > 0) * out
        g_new = X.T @ (out * y) - reg * w
        s = ((g_new * g_new).sum() / (g_old * g_old).sum()) * s + g_new
        return w, Xw, s, g_new, out

    g_old = X.T @ y
    w, _, _, _, out = lf.fori_loop(0, iters, iteration, (lf.zeros((X.shape[1], 1)), lf.zeros((X.shape[0], 1)),
                                                         g_old, g_old, 1 - y))
    return w.sum(), 0.5 * (out * out).sum() + reg / 2 * (w * w).sum()


def _softmax_rest(X: Any, B: Any) -> Any:
    E = np.exp(X @ B)
    return E / (1 + E.sum(axis=1))


def mlogreg(a: dict, iters: int) -> tuple:
    X, Y = lf.matrix(a["X"]), lf.matrix(a["Y"])

    def iteration(_: Any, B: Any) -> Any:
        P = _softmax_rest(X, B)
        G = X.T @ (P - Y) + B
        return B + _cg(G, lambda D: X.T @ (P * (X @ D) - P * (P * (X @ D)).sum(axis=1)) + D, A.CG_STEPS)

    B = lf.fori_loop(0, iters, iteration, lf.zeros((X.shape[1], Y.shape[1])))
    P = _softmax_rest(X, B)
    nll = -(Y * np.log(P)).sum() - ((1 - Y.sum(axis=1)) * np.log(1 - P.sum(axis=1))).sum()
    return B.sum(), (B * B).sum(), nll


def glm(a: dict, iters: int) -> tuple:
    X, y = lf.matrix(a["X"]), lf.matrix(a["y"])

    def iteration(_: Any, b: Any) -> Any:
        mu = np.exp(X @ b)
        G = X.T @ (mu - y) + b
        return b + _cg(G, lambda D: X.T @ (mu * (X @ D)) + D, A.CG_STEPS)

    b = lf.fori_loop(0, iters, iteration, lf.zeros((X.shape[1], 1)))
    return b.sum(), (np.exp(X @ b) - y * (X @ b)).sum()


def _kmeans_dist(X: Any, C: Any) -> Any:
    return -2 * (X @ C.T) + (C ** 2).sum(axis=1).T


def kmeans(a: dict, iters: int) -> tuple:
    X = lf.matrix(a["X"])

    def iteration(_: Any, C: Any) -> Any:
        D = _kmeans_dist(X, C)
        P = D <= D.min(axis=1)
        P = P / P.sum(axis=1)
        return (P.T @ X) / P.sum(axis=0).T

    C = lf.fori_loop(0, iters, iteration, lf.matrix(a["C0"]))
    D = _kmeans_dist(X, C)
    return C.sum(), D.min(axis=1).sum() + (X ** 2).sum()


def alscg(a: dict, iters: int) -> tuple:
    X = lf.matrix(a["X"])
    W = X != 0

    def iteration(_: Any, st: tuple) -> tuple:
        U, V = st
        G = (W * (U @ V.T) - X) @ V + U
        U = U + _cg(G, lambda D: (W * (D @ V.T)) @ V + D, A.ALSCG_CG_STEPS)
        G = (W * (U @ V.T) - X).T @ U + V
        V = V + _cg(G, lambda D: (W * (U @ D.T)).T @ U + D, A.ALSCG_CG_STEPS)
        return U, V

    U, V = lf.fori_loop(0, iters, iteration, (lf.matrix(a["U0"]), lf.matrix(a["V0"])))
    return U.sum(), V.sum(), ((W * (U @ V.T) - X) ** 2).sum() + (U ** 2).sum() + (V ** 2).sum()


def _sig(Z: Any) -> Any:
    return 1 / (1 + np.exp(-Z))


def _batches(X: Any, batch: int, iters: int, step: Callable[[Any, tuple], tuple], init: tuple) -> tuple:
    """``iters`` epochs of mini-batch steps over X's rows (the DML's two nested loops); ``step(rows,
    state)`` with ``rows`` the batch's row range (lazy bounds: one compiled body for every batch)."""
    n = X.shape[0]

    def batch_step(i: Any, st: tuple) -> tuple:
        return step(slice(i * batch, lf.min(n, (i + 1) * batch)), st)

    return lf.fori_loop(0, iters, lambda _, st: lf.fori_loop(0, -(-n // batch), batch_step, st), init)


def autoencoder(a: dict, iters: int) -> tuple:
    X = lf.matrix(a["X"])

    def step(rows: slice, st: tuple) -> tuple:
        W1, W2, W3, W4, b1, b2, b3, b4 = st
        Xb = X[rows]
        A1 = _sig(Xb @ W1 + b1)
        A2 = _sig(A1 @ W2 + b2)
        A3 = _sig(A2 @ W3 + b3)
        D4 = (A3 @ W4 + b4 - Xb) / lf.nrow(Xb)
        D3 = (D4 @ W4.T) * A3 * (1 - A3)
        D2 = (D3 @ W3.T) * A2 * (1 - A2)
        D1 = (D2 @ W2.T) * A1 * (1 - A1)
        return (W1 - 0.1 * (Xb.T @ D1), W2 - 0.1 * (A1.T @ D2), W3 - 0.1 * (A2.T @ D3), W4 - 0.1 * (A3.T @ D4),
                b1 - 0.1 * D1.sum(axis=0), b2 - 0.1 * D2.sum(axis=0), b3 - 0.1 * D3.sum(axis=0),
                b4 - 0.1 * D4.sum(axis=0))

    Ws = tuple(lf.matrix(a[f"W{k}0"]) for k in range(1, 5))
    W1, W2, W3, W4, b1, b2, b3, b4 = _batches(X, A.AE_BATCH, iters, step,
                                              Ws + tuple(lf.zeros((1, W.shape[1])) for W in Ws))
    A3 = _sig(_sig(_sig(X @ W1 + b1) @ W2 + b2) @ W3 + b3)
    return W1.sum(), W4.sum(), ((A3 @ W4 + b4 - X) ** 2).sum()


def mlp(a: dict, iters: int) -> tuple:
    X, y = lf.matrix(a["X"]), lf.matrix(a["y"])

    def step(rows: slice, st: tuple) -> tuple:
        W1, W2, b1, b2 = st
        Xb, yb = X[rows], y[rows]
        H = np.tanh(Xb @ W1 + b1)
        p = _sig(H @ W2 + b2)
        d2 = (p - yb) / lf.nrow(Xb)
        dH = (d2 @ W2.T) * (1 - H ** 2)
        return W1 - 0.5 * (Xb.T @ dH), W2 - 0.5 * (H.T @ d2), b1 - 0.5 * dH.sum(axis=0), b2 - 0.5 * d2.sum()

    W1, W2 = lf.matrix(a["W10"]), lf.matrix(a["W20"])
    W1, W2, b1, b2 = _batches(X, A.MLP_BATCH, iters, step, (W1, W2, lf.zeros((1, W1.shape[1])), 0))
    p = _sig(np.tanh(X @ W1 + b1) @ W2 + b2)
    return W1.sum(), W2.sum(), -(y * np.log(p) + (1 - y) * np.log(1 - p)).sum()


def pnmf(a: dict, iters: int) -> tuple:
    X = lf.matrix(a["X"])

    def iteration(_: Any, st: tuple) -> tuple:
        W, H = st
        H = (H * (W.T @ (X / (W @ H)))) / W.sum(axis=0).T
        W = (W * ((X / (W @ H)) @ H.T)) / H.sum(axis=1).T
        return W, H

    W, H = lf.fori_loop(0, iters, iteration, (lf.matrix(a["W0"]), lf.matrix(a["H0"])))
    return W.sum(), H.sum(), lf.as_scalar(W.sum(axis=0) @ H.sum(axis=1)) - (X * np.log(W @ H)).sum()


def gnmf(a: dict, iters: int) -> tuple:
    X = lf.matrix(a["X"])

    def iteration(_: Any, st: tuple) -> tuple:
        W, H = st
        H = H * (W.T @ X) / (W.T @ W @ H)
        W = W * (X @ H.T) / (W @ (H @ H.T))
        return W, H

    W, H = lf.fori_loop(0, iters, iteration, (lf.matrix(a["W0"]), lf.matrix(a["H0"])))
    return W.sum(), H.sum(), ((X - W @ H) ** 2).sum()


RUN: dict[str, Callable[[dict, int], tuple]] = {
    "l2svm": l2svm, "mlogreg": mlogreg, "glm": glm, "kmeans": kmeans, "alscg": alscg, "autoencoder": autoencoder,
    "mlp": mlp, "pnmf": pnmf, "gnmf": gnmf,
}


def compiled(key: str, arrays: dict, iters: int) -> Callable[[], tuple]:
    """The algorithm built and compiled, to run: its ``compute`` (as ``lafuse run`` compiles a script
    before the script's first ``time()``)."""
    return lf.compile(*RUN[key](arrays, iters)).compute


def main(argv: list[str]) -> int:
    """``KEY ITERS NAME=PATH ...``: the inputs read, the algorithm built and compiled, then run, timed
    (as ``numpy_twin.py``, without importing the suite)."""
    key, iters = argv[0], int(argv[1])
    return A.timed_process(argv[2:], lambda arrays: compiled(key, arrays, iters))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
