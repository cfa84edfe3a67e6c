"""lafuse's pnmf / gnmf / alsCG / autoencoder_2layer builtins.

The random initializations are out of reach of a NumPy reference, so the deterministic cores are
tested by sourcing the builtin file and calling its update helper from a given start (pnmf_mu,
gnmf_mu, als_cg_half), or -- for the autoencoder -- through the W*_rand / order_rand inputs.
The public functions are checked on problems with a known answer (rank-1 closed forms, exact
low-rank completion), against scikit-learn's NMF objective levels, against SystemDS 3.4.0's own
scripts (run_sds), and on edge cases and invalid inputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import NMF

import lafuse
from library.run import assert_close, assert_stops, run_lib, run_sds

BUILTINS = Path(lafuse.__file__).parent / "builtins"
RTOL = 1e-9  # same deterministic updates in the same order: only float round-off differs


def _close(a, b, rtol=RTOL):
    assert_close(a, b, rtol)


_stop = assert_stops


def _source(name):
    return f'source("{BUILTINS / (name + ".dml")}") as f\n'


def _floats(pattern, text):
    return [float(v) for v in re.findall(pattern, text)]


def _poisson_data(n=40, m=30, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.poisson(rng.gamma(2.0, 1.0, (n, k)) @ rng.gamma(2.0, 1.0, (k, m))).astype(float)


# ================================================================ pnmf

def _kl_obj(X, W, H, eps=1e-8):
    WH = W @ H
    return WH.sum() - (X * np.log(WH + eps)).sum()


def _pnmf_ref(X, W, H, eps, maxi):
    """KL multiplicative updates (Lee & Seung), H first, eps-guarded; returns W, H, objective trace."""
    objs = []
    for _ in range(maxi):
        H = H * (W.T @ (X / (W @ H + eps))) / (W.sum(0)[:, None] + eps)
        W = W * ((X / (W @ H + eps)) @ H.T) / (H.sum(1)[None, :] + eps)
        objs.append(_kl_obj(X, W, H, eps))
    return W, H, objs


def test_pnmf_updates_match_numpy_and_decrease_objective():
    X = _poisson_data()
    rng = np.random.default_rng(1)
    W0, H0 = rng.uniform(0, 0.5, (40, 3)), rng.uniform(0, 0.5, (3, 30))
    out, printed = run_lib(_source("pnmf") + "[W, H] = f::pnmf_mu(X, W0, H0, 1e-8, 25, TRUE)",
                           {"X": X, "W0": W0, "H0": H0}, ["W", "H"])
    W, H, objs = _pnmf_ref(X, W0, H0, 1e-8, 25)
    _close(out["W"], W)
    _close(out["H"], H)
    printed_objs = _floats(r"pnmf: iter=\d+ obj=(\S+)", printed)
    _close(printed_objs, objs)
    assert np.all(np.diff(printed_objs) <= 1e-9 * np.abs(printed_objs[:-1]))  # monotone (MU theory)
    assert printed_objs[-1] < printed_objs[0]


def test_pnmf_rank1_closed_form():
    # rank-1 KL NMF has the closed-form optimum W H = rowSums(X) colSums(X) / sum(X) (the
    # independence model); the updates reach it after one round from any positive start
    X = _poisson_data(25, 12, k=2, seed=3)
    out, printed = run_lib("[W, H] = pnmf(X=X, rnk=1, maxi=3, verbose=FALSE, seed=11)", {"X": X}, ["W", "H"])
    assert out["W"].shape == (25, 1) and out["H"].shape == (1, 12)
    _close(out["W"] @ out["H"], np.outer(X.sum(1), X.sum(0)) / X.sum(), rtol=1e-6)  # eps=1e-8 perturbs
    assert printed == ""


def test_pnmf_public_api_seed_objective_level_and_sklearn():
    X = _poisson_data()
    text = "[W, H] = pnmf(X=X, rnk=3, maxi=200, verbose=TRUE, seed=7)"
    out, printed = run_lib(text, {"X": X}, ["W", "H"])
    W, H = out["W"], out["H"]
    assert W.shape == (40, 3) and H.shape == (3, 30)
    assert W.min() >= 0 and H.min() >= 0
    objs = _floats(r"pnmf: iter=\d+ obj=(\S+)", printed)
    assert len(objs) == 200
    assert np.all(np.diff(objs) <= 1e-9 * np.abs(objs[:-1]))
    _close(objs[-1], _kl_obj(X, W, H), rtol=1e-12)
    # same seed -> identical factors; seed=-1 -> a different random start
    again, _ = run_lib(text, {"X": X}, ["W", "H"])
    _close(again["W"], W, rtol=0)
    other, _ = run_lib("[W, H] = pnmf(X=X, rnk=3, maxi=2, verbose=FALSE, seed=-1)", {"X": X}, ["W"])
    other2, _ = run_lib("[W, H] = pnmf(X=X, rnk=3, maxi=2, verbose=FALSE, seed=-1)", {"X": X}, ["W"])
    assert not np.allclose(other["W"], other2["W"])
    # objective level of scikit-learn's KL multiplicative-update NMF (a different random start,
    # so a local optimum of its own: 0.1% of the objective's spread above the data term)
    m = NMF(3, solver="mu", beta_loss="kullback-leibler", init="random", max_iter=200, tol=0, random_state=0)
    Wk = m.fit_transform(X)
    gen_kl = lambda W_, H_: _kl_obj(X, W_, H_) + (X[X > 0] * np.log(X[X > 0])).sum() - X.sum()  # noqa: E731
    assert gen_kl(W, H) <= 1.02 * gen_kl(Wk, m.components_)


def test_pnmf_portable_with_systemds():
    X = _poisson_data()
    text = "[W, H] = pnmf(X=X, rnk=3, maxi=200, verbose=TRUE, seed=7)"
    ours, _ = run_lib(text, {"X": X}, ["W", "H"])
    theirs, printed = run_sds(text, {"X": X}, ["W", "H"])
    assert ours["W"].shape == theirs["W"].shape and ours["H"].shape == theirs["H"].shape
    # SystemDS prints the same objective; different starts (it draws W and H from one seed)
    # reach local optima of (nearly) the same level
    sds_objs = _floats(r"iter=\d+ obj=(\S+)", printed)
    assert len(sds_objs) == 200
    _close(sds_objs[-1], _kl_obj(X, theirs["W"], theirs["H"]), rtol=1e-9)
    gap = _kl_obj(X, ours["W"], ours["H"]) - sds_objs[-1]
    assert abs(gap) < 1e-3 * abs(sds_objs[-1])


def test_pnmf_edge_cases():
    # one column / one row: rank 1 reproduces the data exactly (independence model = X)
    col = np.arange(1.0, 8.0)[:, None]
    out, _ = run_lib("[W, H] = pnmf(X=X, rnk=1, maxi=2, verbose=FALSE, seed=1)", {"X": col}, ["W", "H"])
    _close(out["W"] @ out["H"], col, rtol=1e-6)
    out, _ = run_lib("[W, H] = pnmf(X=X, rnk=1, maxi=2, verbose=FALSE, seed=1)", {"X": col.T}, ["W", "H"])
    _close(out["W"] @ out["H"], col.T, rtol=1e-6)
    # an all-zero column and rnk > min(n, m) stay finite and non-negative
    X = _poisson_data(10, 6, seed=5)
    X[:, 2] = 0
    out, _ = run_lib("[W, H] = pnmf(X=X, rnk=8, maxi=50, verbose=FALSE, seed=2)", {"X": X}, ["W", "H"])
    assert np.isfinite(out["W"]).all() and np.isfinite(out["H"]).all() and out["H"].min() >= 0
    assert np.abs((out["W"] @ out["H"])[:, 2]).max() < 1e-6
    # maxi=0 returns the initialization, uniform in [0, 0.025]
    out, _ = run_lib("[W, H] = pnmf(X=X, rnk=2, maxi=0, seed=2)", {"X": X}, ["W", "H"])
    assert out["W"].shape == (10, 2) and 0 <= out["W"].min() and out["W"].max() <= 0.025
    _stop("[W, H] = pnmf(X=X, rnk=2)", {"X": X - 1}, r"pnmf: X must be non-negative")
    _stop("[W, H] = pnmf(X=X, rnk=0)", {"X": X}, r"pnmf: rnk must be at least 1")
    _stop("[W, H] = pnmf(X=X, rnk=2, eps=0)", {"X": X}, r"pnmf: eps must be positive")


# ================================================================ gnmf

def _gnmf_ref(X, W, H, eps, maxi):
    for _ in range(maxi):
        H = H * (W.T @ X) / (W.T @ W @ H + eps)
        W = W * (X @ H.T) / (W @ (H @ H.T) + eps)
    return W, H


def test_gnmf_updates_match_numpy_and_decrease_objective():
    X = _poisson_data()
    rng = np.random.default_rng(2)
    W0, H0 = rng.uniform(0, 1, (40, 3)), rng.uniform(0, 1, (3, 30))
    # 30 single rounds from the script, recording the Frobenius error after each
    text = _source("gnmf") + """
W = W0
H = H0
errs = matrix(0, rows=30, cols=1)
for (i in 1:30) {
  [W, H] = f::gnmf_mu(X, W, H, 1e-8, 1)
  errs[i, 1] = sum((X - W %*% H)^2)
}
"""
    out, _ = run_lib(text, {"X": X, "W0": W0, "H0": H0}, ["W", "H", "errs"])
    W, H = _gnmf_ref(X, W0, H0, 1e-8, 30)
    _close(out["W"], W)
    _close(out["H"], H)
    errs = out["errs"].ravel()
    assert np.all(np.diff(errs) <= 1e-9 * errs[:-1]) and errs[-1] < 0.6 * errs[0]
    # the same 30 rounds in one call
    once, _ = run_lib(_source("gnmf") + "[W, H] = f::gnmf_mu(X, W0, H0, 1e-8, 30)",
                      {"X": X, "W0": W0, "H0": H0}, ["W"])
    _close(once["W"], W)


def test_gnmf_objective_level_matches_sklearn():
    X = _poisson_data()
    out, _ = run_lib("[W, H] = gnmf(X=X, rnk=3, maxi=300)", {"X": X}, ["W", "H"])
    W, H = out["W"], out["H"]
    assert W.shape == (40, 3) and H.shape == (3, 30) and W.min() >= 0 and H.min() >= 0
    m = NMF(3, solver="mu", beta_loss="frobenius", init="random", max_iter=300, tol=0, random_state=0)
    Wk = m.fit_transform(X)
    ours, sk = np.linalg.norm(X - W @ H), np.linalg.norm(X - Wk @ m.components_)
    # random starts (ours is unseeded, as in the signature): local optima within 2% of each other,
    # and close to the unconstrained rank-3 optimum (truncated SVD), a lower bound for NMF
    assert ours <= 1.02 * sk
    assert ours <= 1.05 * np.sqrt((np.linalg.svd(X, compute_uv=False)[3:] ** 2).sum())


def test_gnmf_portable_with_systemds():
    X = _poisson_data()
    text = "[W, H] = gnmf(X=X, rnk=3, maxi=100)"
    ours, _ = run_lib(text, {"X": X}, ["W", "H"])
    theirs, _ = run_sds(text, {"X": X}, ["W", "H"])
    assert ours["W"].shape == theirs["W"].shape == (40, 3)
    assert ours["H"].shape == theirs["H"].shape == (3, 30)
    # SystemDS starts from uniform [-0.05, 0.05], so its factors may go negative (no assertion on
    # its values); ours are non-negative and fit X
    assert ours["W"].min() >= 0 and ours["H"].min() >= 0
    assert np.isfinite(theirs["W"]).all()
    assert np.linalg.norm(X - ours["W"] @ ours["H"]) < 0.25 * np.linalg.norm(X)


def test_gnmf_edge_cases():
    # a single column / row at rank 1 is reproduced exactly after one round (up to eps, whose relative
    # effect eps / (w^2 h) grows as the unseeded start w nears 0: eps=1e-8 failed 1e-6 in ~2% of runs)
    col = np.arange(1.0, 8.0)[:, None]
    for X in (col, col.T):
        out, _ = run_lib("[W, H] = gnmf(X=X, rnk=1, maxi=1, eps=1e-30)", {"X": X}, ["W", "H"])
        _close(out["W"] @ out["H"], X, rtol=1e-6)
    # all-zero column / all-zero matrix: finite factors, zero fit there
    X = _poisson_data(10, 6, seed=5)
    X[:, 2] = 0
    out, _ = run_lib("[W, H] = gnmf(X=X, rnk=2, maxi=100)", {"X": X}, ["W", "H"])
    assert np.isfinite(out["H"]).all() and np.abs(out["H"][:, 2]).max() < 1e-3
    out, _ = run_lib("[W, H] = gnmf(X=X, rnk=2, maxi=20)", {"X": np.zeros((5, 4))}, ["W", "H"])
    assert np.isfinite(out["W"]).all() and np.abs(out["W"] @ out["H"]).max() < 1e-6
    _stop("[W, H] = gnmf(X=X, rnk=2)", {"X": X - 1}, r"gnmf: X must be non-negative")
    _stop("[W, H] = gnmf(X=X, rnk=0)", {"X": X}, r"gnmf: rnk must be at least 1")
    _stop("[W, H] = gnmf(X=X, rnk=2, maxi=-1)", {"X": X}, r"gnmf: maxi must be non-negative")


# ================================================================ alsCG

def _lowrank(n=40, m=30, k=3, seed=0, frac=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k)) @ rng.normal(size=(k, m))
    if frac is not None:
        X = X * (rng.uniform(size=(n, m)) < frac)
    return X


def _half_ref(X, A, B, w, reg):
    """Exact per-row solution of min_a 0.5 ||M_i (a B' - x_i)||^2 + 0.5 reg w_i ||a||^2."""
    M = X != 0
    out = np.empty_like(A)
    for i in range(X.shape[0]):
        Bi = B[M[i]]
        out[i] = np.linalg.solve(Bi.T @ Bi + reg * w[i] * np.eye(A.shape[1]), Bi.T @ X[i, M[i]])
    return out


def _als_loss(X, U, V, reg, wU, wV):
    M = X != 0
    return 0.5 * ((M * (U @ V) - X) ** 2).sum() + 0.5 * reg * ((wU[:, None] * U**2).sum()
                                                               + (wV[None, :] * V**2).sum())


@pytest.mark.parametrize("reg_type", ["L2", "wL2"])
def test_alscg_half_steps_are_exact_least_squares(reg_type):
    # 4 full alternations of the CG half-steps from a given start == exact per-row ridge solves
    X = _lowrank(frac=0.6)
    X += 0.1 * np.random.default_rng(5).normal(size=X.shape) * (X != 0)  # noisy observed cells
    rng = np.random.default_rng(3)
    U0, V0 = rng.uniform(-0.5, 0.5, (40, 3)), rng.uniform(-0.5, 0.5, (30, 3))
    M = X != 0
    wU, wV = (np.ones(40), np.ones(30)) if reg_type == "L2" else (M.sum(1) * 1.0, M.sum(0) * 1.0)
    reg = 0.5
    text = _source("alsCG") + """
U = U0
Vt = V0
for (i in 1:4) {
  U = f::als_cg_half(X, X != 0, U, Vt, wU, reg)
  Vt = f::als_cg_half(t(X), t(X) != 0, Vt, U, wV, reg)
}
"""
    out, _ = run_lib(text, {"X": X, "U0": U0, "V0": V0, "wU": wU[:, None], "wV": wV[:, None], "reg": reg},
                     ["U", "Vt"])
    U, V = U0, V0
    for _ in range(4):
        U = _half_ref(X, U, V, wU, reg)
        V = _half_ref(X.T, V, U, wV, reg)
    _close(out["U"], U, rtol=1e-7)  # CG with rank steps: exact up to round-off of a 3x3 solve
    _close(out["Vt"], V, rtol=1e-7)


def test_alscg_fully_observed_low_rank_is_recovered():
    X = _lowrank()
    out, printed = run_lib('[U, V] = alsCG(X=X, rank=3, regType="L2", reg=0, maxi=20, check=TRUE, '
                           'thr=1e-10, verbose=TRUE)', {"X": X}, ["U", "V"])
    assert out["U"].shape == (40, 3) and out["V"].shape == (3, 30)
    assert np.abs(out["U"] @ out["V"] - X).max() < 1e-8 * np.abs(X).max()
    assert "converged after" in printed and "initial loss" in printed


@pytest.mark.parametrize("reg_type", ["L2", "wL2"])
def test_alscg_masked_loss_decreases_and_completes(reg_type):
    Xfull = _lowrank(60, 50, seed=4)
    X = Xfull * (np.random.default_rng(8).uniform(size=Xfull.shape) < 0.5)
    out, printed = run_lib(f'[U, V] = alsCG(X=X, rank=3, regType="{reg_type}", reg=1e-6, maxi=100, '
                           'thr=1e-12, verbose=TRUE)', {"X": X}, ["U", "V"])
    U, V = out["U"], out["V"]
    losses = _floats(r"alsCG: iter \d+ loss (\S+)", printed)
    init = _floats(r"initial loss (\S+)", printed)[0]
    assert losses[0] < init and np.all(np.diff(losses) <= 1e-9 * np.array(losses[:-1]) + 1e-20)
    M = X != 0
    wU, wV = (np.ones(60), np.ones(50)) if reg_type == "L2" else (M.sum(1) * 1.0, M.sum(0) * 1.0)
    _close(losses[-1], _als_loss(X, U, V, 1e-6, wU, wV), rtol=1e-8)
    # half the cells of a rank-3 60x50 matrix determine it: the unobserved ones are completed too
    assert np.abs(U @ V - Xfull).max() < 1e-3 * np.abs(Xfull).max()


def test_alscg_portable_with_systemds():
    Xfull = _lowrank(60, 50, seed=4)
    X = Xfull * (np.random.default_rng(8).uniform(size=Xfull.shape) < 0.5)
    text = '[U, V] = alsCG(X=X, rank=3, regType="L2", reg=1e-6, maxi=100, thr=1e-12, verbose=FALSE)'
    ours, _ = run_lib(text, {"X": X}, ["U", "V"])
    theirs, _ = run_sds(text, {"X": X}, ["U", "V"])
    assert ours["U"].shape == theirs["U"].shape == (60, 3)
    assert ours["V"].shape == theirs["V"].shape == (3, 50)  # SystemDS returns V as rank x m too
    # the completed matrix is unique (U, V only up to an invertible rank x rank factor)
    _close(ours["U"] @ ours["V"], theirs["U"] @ theirs["V"], rtol=1e-3)
    _close(theirs["U"] @ theirs["V"], Xfull, rtol=1e-3)


def test_alscg_edge_cases():
    # sparse input gives the same result as dense
    X = _lowrank(30, 20, seed=6, frac=0.5)
    text = '[U, V] = alsCG(X=X, rank=2, regType="wL2", reg=0.1, maxi=5, check=FALSE, verbose=TRUE)'
    dense, printed = run_lib(text, {"X": X}, ["U", "V"])
    sparse, _ = run_lib(text, {"X": sp.csr_matrix(X)}, ["U", "V"])
    _close(sparse["U"], dense["U"], rtol=1e-12)
    _close(sparse["V"], dense["V"], rtol=1e-12)
    assert "ran 5 iterations (check=FALSE)" in printed
    # an unobserved row / column and a single-column matrix stay finite
    X[3, :] = 0
    X[:, 4] = 0
    out, _ = run_lib('[U, V] = alsCG(X=X, rank=2, reg=0, maxi=5, verbose=FALSE)', {"X": X}, ["U", "V"])
    assert np.isfinite(out["U"]).all() and np.isfinite(out["V"]).all()
    col = np.arange(1.0, 9.0)[:, None]
    out, _ = run_lib('[U, V] = alsCG(X=X, rank=1, reg=0, maxi=10, verbose=FALSE)', {"X": col}, ["U", "V"])
    assert out["U"].shape == (8, 1) and out["V"].shape == (1, 1)
    _close(out["U"] @ out["V"], col, rtol=1e-8)
    _stop('[U, V] = alsCG(X=X, rank=2, regType="L1")', {"X": col}, r'alsCG: regType must be "L2" or "wL2"')
    _stop('[U, V] = alsCG(X=X, rank=0)', {"X": col}, r"alsCG: rank must be at least 1")
    _stop('[U, V] = alsCG(X=X, rank=1, reg=-1)', {"X": col}, r"alsCG: reg must be non-negative")


# ================================================================ autoencoder_2layer

AE_OUT = ["W1", "b1", "W2", "b2", "W3", "b3", "W4", "b4", "H"]


def _ae_call(h1, h2, epochs, batch, step, decay, mu, full_obj=False, given=True):
    extra = ", W1_rand=R1, W2_rand=R2, W3_rand=R3, W4_rand=R4, order_rand=O" if given else ""
    return (f"[W1, b1, W2, b2, W3, b3, W4, b4, H] = autoencoder_2layer(X=X, num_hidden1={h1}, "
            f"num_hidden2={h2}, max_epochs={epochs}, full_obj={'TRUE' if full_obj else 'FALSE'}, "
            f"batch_size={batch}, step={step}, decay={decay}, mu={mu}{extra})")


def _ae_inputs(n=50, m=6, h1=5, h2=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) @ rng.normal(size=(2, m)) + 0.1 * rng.normal(size=(n, m)) + 4.0
    return {"X": X, "R1": rng.uniform(-1, 1, (h1, m)), "R2": rng.uniform(-1, 1, (h2, h1)),
            "R3": rng.uniform(-1, 1, (h1, h2)), "R4": rng.uniform(-1, 1, (m, h1)),
            "O": rng.uniform(size=(n, 1))}


def _ae_ref(X, R1, R2, R3, R4, O, epochs, batch, step, decay, mu):
    """NumPy autoencoder: stable-sort shuffle, column z-scores, Glorot scaling, Nesterov SGD."""
    n, m = X.shape
    perm = np.argsort(O.ravel(), kind="stable")
    Z = X[perm]
    mean, sd = Z.mean(0), Z.std(0, ddof=1)
    Z = (Z - mean) / np.where(sd <= 1e-12 * np.abs(mean), 1.0, sd)  # constant column -> 0
    h1, h2 = R1.shape[0], R2.shape[0]
    P = [np.sqrt(6 / (m + h1)) * R1, np.zeros(h1), np.sqrt(6 / (h1 + h2)) * R2, np.zeros(h2),
         np.sqrt(6 / (h1 + h2)) * R3, np.zeros(h1), np.sqrt(6 / (h1 + m)) * R4, np.zeros(m)]
    vel = [np.zeros_like(p) for p in P]

    def forward(A, P):
        hs = [A]
        for W, b in zip(P[0::2], P[1::2]):
            hs.append(np.tanh(hs[-1] @ W.T + b))
        return hs

    for _ in range(epochs):
        for beg in range(0, n, batch):
            A = Z[beg:beg + batch]
            hs = forward(A, P)
            d = (hs[4] - A) * (1 - hs[4] ** 2)
            grads = [None] * 8
            for layer in (3, 2, 1, 0):
                grads[2 * layer], grads[2 * layer + 1] = d.T @ hs[layer], d.sum(0)
                if layer:
                    d = (d @ P[2 * layer]) * (1 - hs[layer] ** 2)
            lr = step / A.shape[0]
            for j in range(8):
                v_old = vel[j]
                vel[j] = mu * vel[j] - lr * grads[j]
                P[j] = P[j] - mu * v_old + (1 + mu) * vel[j]
        step *= decay
    H = np.empty((n, h2))
    H[perm] = forward(Z, P)[2]
    obj = 0.5 * ((forward(Z, P)[4] - Z) ** 2).sum()
    return [p if p.ndim == 2 else p[:, None] for p in P] + [H], obj


@pytest.mark.parametrize("epochs,batch,mu", [(1, 50, 0.9), (1, 16, 0.9), (3, 16, 0.5), (2, 64, 0.0)])
def test_autoencoder_matches_numpy_reference(epochs, batch, mu):
    ins = _ae_inputs()
    out, printed = run_lib(_ae_call(5, 2, epochs, batch, 0.05, 0.9, mu), ins, AE_OUT)
    ref, _ = _ae_ref(ins["X"], ins["R1"], ins["R2"], ins["R3"], ins["R4"], ins["O"], epochs, batch,
                     0.05, 0.9, mu)
    for name, r in zip(AE_OUT, ref):
        _close(out[name], r)
    assert len(printed.strip().splitlines()) == epochs  # one line per epoch, not per batch


def test_autoencoder_reconstruction_error_drops():
    ins = _ae_inputs(n=120, m=8, h1=6, h2=2, seed=1)
    out, printed = run_lib(_ae_call(6, 2, 20, 16, 0.05, 0.95, 0.9, full_obj=True), ins, AE_OUT)
    full = _floats(r"full obj=(\S+)", printed)
    assert len(full) == 21 and "epoch 0 full obj" in printed
    assert full[-1] < 0.3 * full[0]
    ref, obj = _ae_ref(ins["X"], ins["R1"], ins["R2"], ins["R3"], ins["R4"], ins["O"], 20, 16, 0.05, 0.95, 0.9)
    _close(full[-1], obj, rtol=1e-8)  # 20 epochs of chaotic-ish SGD: round-off grows a little
    _close(out["H"], ref[8], rtol=1e-7)


def test_autoencoder_portable_with_systemds():
    # SystemDS never trains its biases and uses classical momentum; with mu=0, h1 = h2 (same
    # Glorot factors) and a small step the weights agree closely and its biases are exactly 0
    ins = _ae_inputs(h1=4, h2=4)
    text = _ae_call(4, 4, 3, 16, 1e-3, 0.9, 0.0, full_obj=True)
    ours, printed = run_lib(text, ins, AE_OUT)
    theirs, sds_printed = run_sds(text, ins, AE_OUT)
    for name in AE_OUT:
        assert ours[name].shape == theirs[name].shape, name
    for name in ("W1", "W2", "W3", "W4"):
        _close(ours[name], theirs[name], rtol=1e-4)
    for name in ("b1", "b2", "b3", "b4"):
        assert not theirs[name].any() and np.abs(ours[name]).max() < 1e-2
    assert np.abs(ours["H"] - theirs["H"]).max() < 0.02
    their_obj = _floats(r"OBJ \(FULL DATA\)=(\S+)", sds_printed)[-1]
    _close(_floats(r"full obj=(\S+)", printed)[-1], their_obj, rtol=1e-3)
    # random initialization (no *_rand) runs with the same shapes in both
    text = _ae_call(5, 3, 1, 32, 1e-3, 0.9, 0.9, given=False)
    ours, _ = run_lib(text, ins, AE_OUT)
    theirs, _ = run_sds(text, ins, AE_OUT)
    assert [ours[k].shape for k in AE_OUT] == [theirs[k].shape for k in AE_OUT]
    assert ours["H"].shape == (50, 3) and np.abs(ours["H"]).max() <= 1


def test_autoencoder_edge_cases():
    ins = _ae_inputs()
    ins["X"][:, 1] = 0.1  # constant column: standardized to 0 (SystemDS divides by ~1e-17)
    out, _ = run_lib(_ae_call(5, 2, 2, 16, 0.05, 0.9, 0.9), ins, AE_OUT)
    assert all(np.isfinite(out[k]).all() for k in AE_OUT)
    ref, _ = _ae_ref(ins["X"], ins["R1"], ins["R2"], ins["R3"], ins["R4"], ins["O"], 2, 16, 0.05, 0.9, 0.9)
    _close(out["H"], ref[8], rtol=1e-7)  # constant column ~1e-17 noise instead of exact 0
    # max_epochs=0: the Glorot-scaled initial weights, zero biases
    out, printed = run_lib(_ae_call(5, 2, 0, 16, 0.05, 0.9, 0.9), ins, AE_OUT)
    _close(out["W1"], np.sqrt(6 / 11) * ins["R1"])
    assert not out["b1"].any() and printed == ""
    # a single-column X with 1-unit layers, batch larger than n
    one = {"X": np.linspace(-1, 1, 9)[:, None]}
    out, _ = run_lib(_ae_call(1, 1, 2, 100, 0.1, 0.9, 0.9, given=False), one, AE_OUT)
    assert out["W1"].shape == (1, 1) and out["H"].shape == (9, 1)
    bad = dict(ins, R1=ins["R1"].T)
    _stop(_ae_call(5, 2, 1, 16, 0.05, 0.9, 0.9), bad, r"autoencoder_2layer: W1_rand must be 5x6, got 6x5")
    _stop(_ae_call(5, 2, 1, 16, 0.05, 0.9, 0.9), dict(ins, O=ins["O"][:10]),
          r"autoencoder_2layer: order_rand must be 50x1")
    _stop(_ae_call(5, 0, 1, 16, 0.05, 0.9, 0.9, given=False), ins, r"num_hidden1 and num_hidden2 must be at least 1")
    _stop(_ae_call(1, 1, 1, 16, 0.05, 0.9, 0.9, given=False), {"X": np.ones((1, 3))},
          r"X needs at least 2 rows")
