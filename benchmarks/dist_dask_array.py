"""The hand-written ``dask.array`` versions of the distributed section's workloads (dist_section.py):
the same arithmetic as the DML, unfused, with dask's own ``da.dot``, on dense chunks (SciPy chunks
compute ``X * dense`` as a product and fail in ``@`` and reductions, and pydata sparse's ``.sum()``
reaches a distributed client as 0.0). Inputs are scattered from the calling process, as lafuse's are."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

SCATTER_BATCH = 32 * 2 ** 20  # bytes per scatter call of the dask.array versions


def _scatter(client: Any, a: Any, rows: int, cols: int) -> Any:
    """A dask.array of ``a``'s blocks scattered to the workers from this process (as lafuse's
    scatter does; ``da.from_array`` would ship the whole array through the graph). Sparse inputs as
    dense blocks."""
    import dask.array as da

    n, m = a.shape
    rb = [min(rows, n - i) for i in range(0, n, rows)]
    cb = [min(cols, m - j) for j in range(0, m, cols)]
    keys, parts = [], []
    for bi, i in enumerate(range(0, n, rows)):
        for bj, j in enumerate(range(0, m, cols)):
            b = a[i:i + rows, j:j + cols]
            parts.append(b.toarray() if sp.issparse(b) else np.array(b))
            keys.append((bi, bj))
    futs: list[Any] = []
    step = max(2, 2 * (SCATTER_BATCH // max(1, 2 * parts[0].nbytes)))  # even: both workers alike
    for k in range(0, len(parts), step):  # one message per worker per batch: never one of all its blocks
        futs += client.scatter(parts[k:k + step], hash=False)
    name = "input-" + uuid.uuid4().hex
    return da.Array({(name, *k): f for k, f in zip(keys, futs)}, name, chunks=(tuple(rb), tuple(cb)),
                    dtype=np.float64)


class SyncClient:
    """What the dask.array versions ask of a client, on dask's single-process scheduler (no cluster:
    the test of tests/bench checks their numbers with it)."""

    def scatter(self, parts: list[Any], hash: bool = False) -> list[Any]:  # noqa: A002 - Client's name
        return list(parts)

    def persist(self, xs: list[Any]) -> list[Any]:
        import dask

        return list(dask.persist(*xs, scheduler="synchronous"))

    def compute(self, x: Any, sync: bool = True) -> Any:
        import dask

        if isinstance(x, list):
            return list(dask.compute(*x, scheduler="synchronous"))
        return dask.compute(x, scheduler="synchronous")[0]


def _persist(client: Any, *xs: Any) -> Any:
    out = client.persist(list(xs))
    return out if len(xs) > 1 else out[0]


def dask_gnmf(client: Any, a: dict[str, Any], bs: int, iters: int, cg: int) -> tuple[float, ...]:
    import dask.array as da

    X = _scatter(client, a["X"], bs, bs)
    W = _scatter(client, a["W0"], bs, a["W0"].shape[1])
    H = _scatter(client, a["H0"], a["H0"].shape[0], bs)
    for _ in range(iters):
        H = _persist(client, H * da.dot(W.T, X) / da.dot(da.dot(W.T, W), H))
        W = _persist(client, W * da.dot(X, H.T) / da.dot(W, da.dot(H, H.T)))
    r = client.compute([W.sum(), H.sum(), ((X - da.dot(W, H)) ** 2).sum()], sync=True)
    return tuple(float(v) for v in r)


def dask_l2svm(client: Any, a: dict[str, Any], bs: int, iters: int, cg: int) -> tuple[float, ...]:
    """The DML's arithmetic: the n-vectors distributed, the m-vectors and scalars in this process
    (the line search steers on g and h: computed each step)."""
    import dask.array as da

    X = _scatter(client, a["X"], bs, a["X"].shape[1])
    y = _scatter(client, a["y"], bs, 1)
    m = a["X"].shape[1]
    reg = 1.0
    w = np.zeros((m, 1))
    Xw = da.zeros((a["X"].shape[0], 1), chunks=(X.chunks[0], (1,)))
    g_old = client.compute(da.dot(X.T, y), sync=True)
    s = g_old
    out = 1 - y
    for _ in range(iters):
        Xd = _persist(client, da.dot(X, s))
        wd, dd, step = reg * float(np.sum(w * s)), reg * float(np.sum(s * s)), 0.0
        for _ii in range(5):
            out = 1 - y * (Xw + step * Xd)
            sv = out > 0
            out = out * sv
            gs, hs = client.compute([(out * y * Xd).sum(), (Xd * sv * Xd).sum()], sync=True)
            g = wd + step * dd - float(gs)
            h = dd + float(hs)
            step = step - g / h
        w = w + step * s
        Xw = _persist(client, Xw + step * Xd)
        out = 1 - y * Xw
        out = _persist(client, (out > 0) * out)
        g_new = client.compute(da.dot(X.T, out * y), sync=True) - reg * w
        s = (float(np.sum(g_new * g_new)) / float(np.sum(g_old * g_old))) * s + g_new
        g_old = g_new
    r2 = client.compute((out * out).sum(), sync=True)
    return float(np.sum(w)), 0.5 * float(r2) + reg / 2 * float(np.sum(w * w))


def _dask_cg(client: Any, G: Any, hessian: Callable[[Any], Any], steps: int) -> Any:
    S = G * 0
    R = -G
    D = R
    rr = float(client.compute((R * R).sum(), sync=True))
    for _ in range(steps):
        HD = _persist(client, hessian(D))
        alpha = rr / float(client.compute((D * HD).sum(), sync=True))
        S, R = _persist(client, S + alpha * D, R - alpha * HD)
        rr_new = float(client.compute((R * R).sum(), sync=True))
        D = _persist(client, R + (rr_new / rr) * D)
        rr = rr_new
    return S


def dask_alscg(client: Any, a: dict[str, Any], bs: int, iters: int, cg: int) -> tuple[float, ...]:
    import dask.array as da

    X = _scatter(client, a["X"], bs, bs)
    U = _scatter(client, a["U0"], bs, a["U0"].shape[1])
    V = _scatter(client, a["V0"], bs, a["V0"].shape[1])
    W = _persist(client, (X != 0).astype(np.float64))
    for _ in range(iters):
        G = _persist(client, da.dot(W * da.dot(U, V.T) - X, V) + U)
        U = _persist(client, U + _dask_cg(client, G, lambda D, V=V: da.dot(W * da.dot(D, V.T), V) + D, cg))
        G = _persist(client, da.dot((W * da.dot(U, V.T) - X).T, U) + V)
        V = _persist(client, V + _dask_cg(client, G, lambda D, U=U: da.dot((W * da.dot(U, D.T)).T, U) + D, cg))
    r = client.compute([U.sum(), V.sum(), ((W * da.dot(U, V.T) - X) ** 2).sum() + (U ** 2).sum()
                        + (V ** 2).sum()], sync=True)
    return tuple(float(v) for v in r)


def dask_autoencoder(client: Any, a: dict[str, Any], bs: int, iters: int, cg: int) -> tuple[float, ...]:
    """Full-batch steps of the two-layer autoencoder: X and the activations in row panels, the
    weights and biases in this process (their gradients computed each step)."""
    import dask.array as da

    X = _scatter(client, a["X"], bs, a["X"].shape[1])
    W = [np.array(a[f"W{k}0"]) for k in range(1, 5)]
    b = [np.zeros((1, w.shape[1])) for w in W]
    n = a["X"].shape[0]

    def sig(Z: Any) -> Any:
        return 1 / (1 + da.exp(-Z))

    for _ in range(iters):
        A1 = _persist(client, sig(da.dot(X, W[0]) + b[0]))
        A2 = _persist(client, sig(da.dot(A1, W[1]) + b[1]))
        A3 = _persist(client, sig(da.dot(A2, W[2]) + b[2]))
        D4 = _persist(client, (da.dot(A3, W[3]) + b[3] - X) / n)
        D3 = _persist(client, da.dot(D4, W[3].T) * A3 * (1 - A3))
        D2 = _persist(client, da.dot(D3, W[2].T) * A2 * (1 - A2))
        D1 = _persist(client, da.dot(D2, W[1].T) * A1 * (1 - A1))
        grads = client.compute([da.dot(A.T, D) for A, D in ((X, D1), (A1, D2), (A2, D3), (A3, D4))]
                               + [D.sum(axis=0, keepdims=True) for D in (D1, D2, D3, D4)], sync=True)
        W = [w - 0.1 * np.asarray(g) for w, g in zip(W, grads[:4])]
        b = [v - 0.1 * np.asarray(g) for v, g in zip(b, grads[4:])]
    return float(np.sum(W[0])), float(np.sum(W[3]))


def dask_outer_log(client: Any, a: dict[str, Any], bs: int, iters: int, cg: int) -> tuple[float, ...]:
    import dask.array as da

    X = _scatter(client, a["X"], bs, bs)
    U = _scatter(client, a["U"], bs, a["U"].shape[1])
    V = _scatter(client, a["V"], bs, a["V"].shape[1])
    return (float(client.compute((X * da.log(da.dot(U, V.T) + 1e-15)).sum(), sync=True)),)
