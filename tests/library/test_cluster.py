"""lafuse's own kmeans, kmeansPredict, pca, scale, normalize and normalizeApply builtins: checked against
NumPy / scikit-learn references, against SystemDS 3.4.0's shipped scripts (run_sds), and on edge cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.decomposition import PCA
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import lafuse
from lafuse.errors import DMLError
from library.run import run_lib, run_sds

BUILTINS = Path(lafuse.__file__).parent / "builtins"
BOTH = pytest.mark.parametrize("impl", [run_lib, run_sds], ids=["lafuse", "systemds"])


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _data(n: int = 60, m: int = 4, seed: int = 0) -> np.ndarray:
    """Correlated, non-centred, differently scaled columns with well separated covariance eigenvalues."""
    rng = _rng(seed)
    A = rng.normal(size=(m, m)) * np.linspace(1, 3, m)
    return rng.normal(size=(n, m)) @ A + np.arange(1, m + 1) * 10.0


def _errors(text: str, inputs: dict, match: str) -> None:
    with pytest.raises(DMLError, match=match):
        run_lib(text, inputs, [])


# ------------------------------------------------------------------------------------------------- scale

SCALE = "[O, Cn, S] = scale(X=X, center=c, scale=s)"


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("scale", [True, False])
def test_scale_matches_numpy(center: bool, scale: bool) -> None:
    X = _data(50, 5)
    r, _ = run_lib(SCALE, {"X": X, "c": center, "s": scale}, ["O", "Cn", "S"])
    ref = X.copy()
    if center:
        np.testing.assert_allclose(r["Cn"], X.mean(0, keepdims=True), rtol=1e-12)
        ref = ref - X.mean(0)
    else:
        assert r["Cn"].shape == (0, 0)
    if scale:
        # sample standard deviation (ddof=1) when centred, root mean square with n-1 otherwise (R's scale())
        sf = np.sqrt((ref ** 2).sum(0) / (len(X) - 1))
        np.testing.assert_allclose(r["S"], sf[None, :], rtol=1e-12)
        ref = ref / sf
    else:
        assert r["S"].shape == (0, 0)
    np.testing.assert_allclose(r["O"], ref, rtol=1e-12, atol=1e-12)


def test_scale_vs_sklearn_standard_scaler() -> None:
    X = _data(40, 3)
    r, _ = run_lib(SCALE, {"X": X, "c": True, "s": True}, ["O", "S"])
    n = len(X)
    # StandardScaler divides by the ddof=0 standard deviation: ours = sklearn * sqrt((n-1)/n)
    np.testing.assert_allclose(r["O"], StandardScaler().fit_transform(X) * np.sqrt((n - 1) / n), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(r["S"].ravel(), X.std(0, ddof=1), rtol=1e-12)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("scale", [True, False])
def test_scale_portable_to_systemds(center: bool, scale: bool) -> None:
    X = _data(30, 4, seed=2)
    inputs = {"X": X, "c": center, "s": scale}
    ours, _ = run_lib(SCALE, inputs, ["O", "Cn", "S"])
    sds, _ = run_sds(SCALE, inputs, ["O", "Cn", "S"])
    for k in ("O", "Cn", "S"):
        assert ours[k].shape == sds[k].shape, k
        np.testing.assert_allclose(ours[k], sds[k], rtol=1e-12, atol=1e-12)


def test_scale_special_columns() -> None:
    # zero column, constant 0.1 column (its centred values are rounding noise), NaN column, ordinary column
    X = np.c_[np.zeros(10), np.full(10, 0.1), np.r_[np.nan, np.arange(9.0)], np.arange(10.0) ** 2]
    r, _ = run_lib(SCALE, {"X": X, "c": True, "s": True}, ["O", "Cn", "S"])
    np.testing.assert_array_equal(r["S"][0, :3], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(r["O"][:, :2], 0.0, atol=1e-15)        # no 0/0, no +-1 from noise/noise
    assert r["Cn"][0, 2] == 0.0                                        # NaN column passes through unchanged
    np.testing.assert_array_equal(r["O"][1:, 2], X[1:, 2])
    assert np.isnan(r["O"][0, 2])
    np.testing.assert_allclose(r["O"][:, 3], (X[:, 3] - X[:, 3].mean()) / X[:, 3].std(ddof=1), rtol=1e-12)
    # SystemDS's script (no noise threshold) turns the constant 0.1 column into +-0.95 when the column mean is
    # not exactly 0.1 in floating point; the other columns agree
    sds, _ = run_sds(SCALE, {"X": X, "c": True, "s": True}, ["O"])
    np.testing.assert_allclose(sds["O"][:, [0, 3]], r["O"][:, [0, 3]], rtol=1e-12)


def test_scale_one_row_and_one_column() -> None:
    r, _ = run_lib(SCALE, {"X": np.array([[2.0, -3.0]]), "c": True, "s": True}, ["O", "Cn", "S"])
    np.testing.assert_array_equal(r["O"], [[0.0, 0.0]])
    np.testing.assert_array_equal(r["S"], [[1.0, 1.0]])
    r, _ = run_lib(SCALE, {"X": np.array([[2.0, -3.0]]), "c": False, "s": True}, ["O", "S"])
    np.testing.assert_array_equal(r["S"], [[2.0, 3.0]])               # divisor max(n-1, 1) = 1, as in R
    np.testing.assert_array_equal(r["O"], [[1.0, -1.0]])
    x = np.arange(1.0, 6.0)[:, None]
    r, _ = run_lib(SCALE, {"X": x, "c": True, "s": True}, ["O"])
    np.testing.assert_allclose(r["O"], (x - 3) / np.sqrt(2.5), rtol=1e-14)


def test_scale_positional_and_defaults() -> None:
    X = _data(20, 2)
    a, _ = run_lib("[O, Cn, S] = scale(X, TRUE, TRUE)", {"X": X}, ["O"])
    b, _ = run_lib("[O, Cn, S] = scale(X=X)", {"X": X}, ["O"])
    np.testing.assert_array_equal(a["O"], b["O"])


# ----------------------------------------------------------------------------------------- normalize

def test_normalize_matches_minmax_scaler() -> None:
    X = _data(40, 4, seed=3)
    Xnew = _data(10, 4, seed=4)
    r, _ = run_lib("[Y, lo, hi] = normalize(X=X); Z = normalizeApply(X=Xnew, cmin=lo, cmax=hi)",
                   {"X": X, "Xnew": Xnew}, ["Y", "lo", "hi", "Z"])
    mm = MinMaxScaler().fit(X)
    np.testing.assert_allclose(r["Y"], mm.transform(X), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(r["lo"], X.min(0, keepdims=True))
    np.testing.assert_array_equal(r["hi"], X.max(0, keepdims=True))
    np.testing.assert_allclose(r["Z"], mm.transform(Xnew), rtol=1e-12, atol=1e-14)
    assert r["Y"].min() == 0.0 and r["Y"].max() == 1.0


@BOTH
def test_normalize_portable(impl) -> None:
    X = np.c_[_data(25, 3, seed=5), np.full(25, 7.0)]
    r, _ = impl("[Y, lo, hi] = normalize(X=X); Z = normalizeApply(X, lo, hi)", {"X": X}, ["Y", "lo", "hi", "Z"])
    assert r["Y"].shape == (25, 4) and r["lo"].shape == (1, 4) and r["hi"].shape == (1, 4)
    np.testing.assert_allclose(r["Y"][:, :3], MinMaxScaler().fit_transform(X[:, :3]), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(r["Y"][:, 3], 0.0)                   # constant column -> 0, no NaN
    np.testing.assert_array_equal(r["Z"], r["Y"])


def test_normalize_edge_cases() -> None:
    r, _ = run_lib("[Y, lo, hi] = normalize(X=X)", {"X": np.array([[3.0, -1.0, 0.0]])}, ["Y", "lo", "hi"])
    np.testing.assert_array_equal(r["Y"], [[0.0, 0.0, 0.0]])          # one row: every column is constant
    x = np.array([[2.0], [4.0], [3.0]])
    r, _ = run_lib("[Y, lo, hi] = normalize(X=X)", {"X": x}, ["Y"])
    np.testing.assert_array_equal(r["Y"], [[0.0], [1.0], [0.5]])
    # a 1x1 min/max applies to every column
    r, _ = run_lib("Y = normalizeApply(X, matrix(1, 1, 1), matrix(3, 1, 1))", {"X": np.array([[1.0, 2.0, 5.0]])},
                   ["Y"])
    np.testing.assert_array_equal(r["Y"], [[0.0, 0.5, 2.0]])
    _errors("Y = normalizeApply(X, matrix(0, 1, 2), matrix(1, 1, 3))", {"X": np.ones((4, 3))},
            "normalizeApply: cmin must be 1 x 3")
    _errors("Y = normalizeApply(X, matrix(0, 1, 3), matrix(1, 2, 3))", {"X": np.ones((4, 3))},
            "normalizeApply: cmax must be 1 x 3")


# ----------------------------------------------------------------------------------------------- pca

PCA_TEXT = "[R, V, Cn, S] = pca(X=X, K=k, center=c, scale=s, onlyComponents=only)"


def _pca(impl, X, k=2, center=True, scale=True, only=False):
    r, out = impl(PCA_TEXT, {"X": X, "k": k, "c": center, "s": scale, "only": only}, ["R", "V", "Cn", "S"])
    return r, out


def _align(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A with every column's sign flipped to agree with B's (eigenvector signs are arbitrary)."""
    return A * np.where((A * B).sum(0) < 0, -1.0, 1.0)


def _check_sign_convention(V: np.ndarray) -> None:
    idx = np.argmax(np.abs(V), axis=0)
    assert np.all(V[idx, np.arange(V.shape[1])] > 0)


@pytest.mark.parametrize("n", [200, 5], ids=["tall-svd", "wide-eigen"])
def test_pca_matches_sklearn(n: int) -> None:
    X = _data(n, 6, seed=7) if n > 6 else _rng(8).normal(size=(n, 6))
    k = 3
    r, _ = _pca(run_lib, X, k=k, center=True, scale=False)
    p = PCA(k).fit(X)
    V = r["V"]
    assert V.shape == (6, k) and r["R"].shape == (n, k)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-12)
    _check_sign_convention(V)
    np.testing.assert_allclose(_align(V, p.components_.T), p.components_.T, atol=1e-10)
    np.testing.assert_allclose(_align(r["R"], p.transform(X)), p.transform(X), atol=1e-9)
    # decreasing eigenvalue order: the projected variances are sklearn's explained variances
    np.testing.assert_allclose(r["R"].var(0, ddof=1), p.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(r["Cn"], X.mean(0, keepdims=True), rtol=1e-12)
    assert r["S"].shape == (0, 0)


def test_pca_scaled_and_uncentred_vs_numpy() -> None:
    X = _data(120, 5, seed=9)
    # center + scale: PCA of the ddof=1 z-scores
    r, _ = _pca(run_lib, X, k=5, center=True, scale=True)
    Z = (X - X.mean(0)) / X.std(0, ddof=1)
    _, sv, Vt = np.linalg.svd(Z, full_matrices=False)
    np.testing.assert_allclose(_align(r["V"], Vt.T), Vt.T, atol=1e-10)
    np.testing.assert_allclose(r["R"], Z @ r["V"], atol=1e-10)
    np.testing.assert_allclose(r["S"].ravel(), X.std(0, ddof=1), rtol=1e-12)
    # center=FALSE: the covariance is still taken about the means (as in SystemDS), but X is projected as is
    r, _ = _pca(run_lib, X, k=2, center=False, scale=False)
    _, _, Vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
    np.testing.assert_allclose(_align(r["V"], Vt[:2].T), Vt[:2].T, atol=1e-10)
    np.testing.assert_allclose(r["R"], X @ r["V"], rtol=1e-10)
    assert r["Cn"].shape == (0, 0) and r["S"].shape == (0, 0)


@pytest.mark.parametrize("center,scale", [(True, True), (True, False), (False, True)])
def test_pca_portable_to_systemds(center: bool, scale: bool) -> None:
    X = _data(80, 5, seed=11)
    ours, _ = _pca(run_lib, X, k=3, center=center, scale=scale)
    sds, _ = _pca(run_sds, X, k=3, center=center, scale=scale)
    for key in ("R", "V", "Cn", "S"):
        assert ours[key].shape == sds[key].shape, key
    # SystemDS's eigensolver picks its own signs; the subspaces and everything else agree
    np.testing.assert_allclose(_align(sds["V"], ours["V"]), ours["V"], atol=1e-9)
    np.testing.assert_allclose(_align(sds["R"], ours["R"]), ours["R"], atol=1e-8)
    np.testing.assert_allclose(sds["Cn"], ours["Cn"], rtol=1e-12)
    np.testing.assert_allclose(sds["S"], ours["S"], rtol=1e-12)


@BOTH
def test_pca_only_components_and_large_k(impl) -> None:
    X = _data(30, 3, seed=12)
    r, out = _pca(impl, X, k=5, only=True)
    assert r["R"].shape == (0, 0)
    assert r["V"].shape == (3, 3)                                      # K > ncol(X) falls back to K = ncol(X)
    np.testing.assert_allclose(np.abs(r["V"].T @ r["V"]), np.eye(3), atol=1e-10)
    assert "K" in out and "ncol(X)" in out


def test_pca_rank_deficient_wide_data() -> None:
    # 4 rows in 5-D: two exactly-zero covariance eigenvalues. Ours still returns the components in decreasing
    # eigenvalue order. (SystemDS's script builds its sort permutation with table(seq, order(...)), which
    # applies the inverse permutation, so with tied eigenvalues it can return components out of order.)
    X = _rng(0).normal(size=(4, 5))
    r, _ = _pca(run_lib, X, k=3, center=True, scale=False)
    p = PCA(3).fit(X)
    np.testing.assert_allclose(_align(r["V"], p.components_.T), p.components_.T, atol=1e-10)
    np.testing.assert_allclose(r["R"].var(0, ddof=1), p.explained_variance_, rtol=1e-10)


def test_pca_edge_cases() -> None:
    # one column: the single component is [1]
    x = _rng(1).normal(size=(10, 1))
    r, _ = _pca(run_lib, x, k=1, center=True, scale=False)
    np.testing.assert_allclose(r["V"], [[1.0]])
    np.testing.assert_allclose(r["R"], x - x.mean(), rtol=1e-12)
    # one row: zero covariance, no NaN; components are an orthonormal basis
    r, _ = _pca(run_lib, np.array([[1.0, 2.0, 3.0]]), k=2)
    assert np.all(np.isfinite(r["V"])) and np.all(np.isfinite(r["R"]))
    np.testing.assert_allclose(r["V"].T @ r["V"], np.eye(2), atol=1e-12)
    np.testing.assert_allclose(r["R"], 0.0, atol=1e-15)
    # an all-zero column contributes nothing: it gets weight 0 in the leading components
    X = np.c_[_data(50, 3, seed=13), np.zeros(50)]
    r, _ = _pca(run_lib, X, k=3)
    np.testing.assert_allclose(r["V"][3], 0.0, atol=1e-12)
    assert np.all(np.isfinite(r["R"]))
    _errors("[R, V, Cn, S] = pca(X=X, K=0)", {"X": np.ones((5, 2))}, "pca: K must be >= 1")
    _errors("[R, V, Cn, S] = pca(X=X, K=1)", {"X": np.array([[1.0, np.nan], [2.0, 3.0]])}, "pca: X contains NaN")


# -------------------------------------------------------------------------------------------- kmeans

KM = "[C, Y] = kmeans(X=X, k=k, runs=runs, max_iter=200, eps=1e-9, seed=seed)"


def _kmeans(impl, X, k, runs=5, seed=7):
    r, out = impl(KM, {"X": X, "k": k, "runs": runs, "seed": seed}, ["C", "Y"])
    return r["C"], r["Y"].astype(int).ravel(), out


def _wcss(X, C, Y) -> float:
    return float(((X - C[Y - 1]) ** 2).sum())


def _same_partition(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Asserts label vectors a, b (1-based) are the same partition; returns perm with b == perm[a]."""
    ka, kb = a.max(), b.max()
    T = np.zeros((ka + 1, kb + 1), int)
    np.add.at(T, (a, b), 1)
    assert np.all((T > 0).sum(1)[1:] <= 1) and np.all((T > 0).sum(0)[1:] <= 1), "partitions differ"
    return T.argmax(1)


BLOBS = make_blobs(n_samples=300, n_features=3, centers=4, cluster_std=0.5, random_state=3)[0]


def test_kmeans_blobs_match_sklearn() -> None:
    X = BLOBS
    C, Y, _ = _kmeans(run_lib, X, 4)
    km = KMeans(4, n_init=10, random_state=0, tol=0).fit(X)
    perm = _same_partition(Y, km.labels_ + 1)
    assert C.shape == (4, 3) and Y.shape == (300,) and set(Y) == {1, 2, 3, 4}
    np.testing.assert_allclose(C, km.cluster_centers_[perm[1:] - 1], rtol=1e-10)
    np.testing.assert_allclose(_wcss(X, C, Y), km.inertia_, rtol=1e-9)


def test_kmeans_is_a_lloyd_fixed_point_and_competitive() -> None:
    # overlapping clusters: many local optima; ours must be a Lloyd fixed point and close to sklearn's inertia
    X = make_blobs(n_samples=600, n_features=5, centers=10, cluster_std=2.5, random_state=5)[0]
    C, Y, _ = _kmeans(run_lib, X, 10, runs=5)
    D = ((X[:, None, :] - C[None]) ** 2).sum(2)
    np.testing.assert_array_equal(Y, D.argmin(1) + 1)                  # nearest centroid
    for j in range(1, 11):
        np.testing.assert_allclose(C[j - 1], X[Y == j].mean(0), rtol=1e-6)   # 1e-6: eps-converged, not exact
    ours = _wcss(X, C, Y)
    ref = KMeans(10, n_init=5, random_state=0).fit(X).inertia_
    assert ours <= 1.03 * ref, (ours, ref)                            # different seeds: allow 3%


def test_kmeans_seed_reproducible() -> None:
    X = make_blobs(n_samples=200, n_features=2, centers=6, cluster_std=2.0, random_state=1)[0]
    C1, Y1, _ = _kmeans(run_lib, X, 6, runs=2, seed=11)
    C2, Y2, _ = _kmeans(run_lib, X, 6, runs=2, seed=11)
    np.testing.assert_array_equal(C1, C2)
    np.testing.assert_array_equal(Y1, Y2)
    C3, Y3, _ = _kmeans(run_lib, X, 6, runs=2, seed=-1)               # random seed: still a valid clustering
    assert C3.shape == (6, 2) and set(Y3) <= set(range(1, 7))


def test_kmeans_portable_to_systemds() -> None:
    X = BLOBS
    C, Y, _ = _kmeans(run_lib, X, 4)
    Cs, Ys, _ = _kmeans(run_sds, X, 4)
    assert Cs.shape == C.shape and Ys.shape == Y.shape
    perm = _same_partition(Y, Ys)
    np.testing.assert_allclose(C, Cs[perm[1:] - 1], rtol=1e-10)
    # kmeansPredict: SystemDS's and ours give identical ids for the same centroids
    text = "P = kmeansPredict(X=X, C=C)"
    a, _ = run_lib(text, {"X": X, "C": C}, ["P"])
    b, _ = run_sds(text, {"X": X, "C": C}, ["P"])
    np.testing.assert_array_equal(a["P"], b["P"])
    np.testing.assert_array_equal(a["P"].ravel(), Y)


def test_kmeans_verbose_and_defaults() -> None:
    r, out = run_lib("[C, Y] = kmeans(X=X, k=3, runs=3, seed=1, is_verbose=TRUE)", {"X": BLOBS[:60]}, ["C"])
    assert "run 3" in out and "converged" in out and "best run" in out and "WCSS" in out
    r, out = run_lib("[C, Y] = kmeans(X=X, k=3, seed=1)", {"X": BLOBS[:60]}, ["C"])
    assert out == "" and r["C"].shape == (3, 3)
    _, out = run_lib("[C, Y] = kmeans(X=X, k=4, runs=1, max_iter=1, seed=2, is_verbose=TRUE)", {"X": BLOBS}, ["C"])
    assert "1 iteration(s), stopped at max_iter" in out


def test_kmeans_edge_cases() -> None:
    X = BLOBS[:50]
    # k = 1: the mean
    C, Y, _ = _kmeans(run_lib, X, 1)
    np.testing.assert_allclose(C, X.mean(0, keepdims=True), rtol=1e-12)
    np.testing.assert_array_equal(Y, 1)
    # one row
    C, Y, _ = _kmeans(run_lib, np.array([[2.0, -1.0]]), 1)
    np.testing.assert_array_equal(C, [[2.0, -1.0]])
    np.testing.assert_array_equal(Y, [1])
    # k = n: every row its own centroid
    x = np.array([[1.0], [4.0], [2.0], [8.0]])
    C, Y, _ = _kmeans(run_lib, x, 4)
    np.testing.assert_array_equal(np.sort(C.ravel()), [1.0, 2.0, 4.0, 8.0])
    np.testing.assert_array_equal(C[Y - 1], x)
    # one column
    x = np.r_[np.zeros(10), np.full(10, 5.0)][:, None] + np.arange(20)[:, None] * 1e-3
    C, Y, _ = _kmeans(run_lib, x, 2)
    np.testing.assert_allclose(np.sort(C.ravel()), [x[:10].mean(), x[10:].mean()], rtol=1e-12)
    # fewer distinct rows than k: duplicated centroid, ties go to the smallest id, no NaN
    x = np.array([[1.0, 0.0]] * 4 + [[3.0, 1.0]] * 2)
    C, Y, _ = _kmeans(run_lib, x, 3)
    assert np.all(np.isfinite(C)) and _wcss(x, C, Y) == 0.0
    assert {tuple(c) for c in C} == {(1.0, 0.0), (3.0, 1.0)}
    assert Y[0] == Y[1] == Y[2] == Y[3] and Y[4] == Y[5] and Y[0] != Y[4]
    dup = [i + 1 for i, c in enumerate(C) if tuple(c) == tuple(C[Y[0] - 1])]
    assert Y[0] == min(dup)
    # seeding only
    r, _ = run_lib("[C, Y] = kmeans(X=X, k=3, max_iter=0, runs=1, seed=3)", {"X": X}, ["C"])
    # k-means++ picks data rows (up to the rounding of centring and un-centring)
    assert all(np.abs(X - c).max(1).min() < 1e-12 for c in r["C"])
    _errors("[C, Y] = kmeans(X=X, k=5)", {"X": np.ones((3, 2))}, "kmeans: k must be between 1 and nrow")
    _errors("[C, Y] = kmeans(X=X, k=0)", {"X": np.ones((3, 2))}, "kmeans: k must be between 1 and nrow")
    _errors("[C, Y] = kmeans(X=X, k=2, runs=0)", {"X": np.ones((3, 2))}, "kmeans: runs must be >= 1")
    _errors("[C, Y] = kmeans(X=X, k=1)", {"X": np.array([[np.nan], [1.0]])}, "kmeans: X contains NaN")


def test_kmeans_empty_cluster_is_relocated() -> None:
    # drive the Lloyd helper directly from a start where centroid 3 owns no row: it must move to the row
    # farthest from its centroid (5.0) and the run must end at the optimum {0,1}, {10,11}, {5}
    text = f"""
    source("{BUILTINS / 'kmeans.dml'}") as km
    [C, it, conv] = km::kmeans_lloyd(X, X^2, C0, 100, 0.000001)
    """
    x = np.array([[0.0], [1.0], [5.0], [10.0], [11.0]])
    r, _ = run_lib(text, {"X": x, "C0": np.array([[1.0], [10.5], [100.0]])}, ["C", "conv"])
    np.testing.assert_allclose(r["C"].ravel(), [0.5, 10.5, 5.0])
    assert r["conv"] is True or r["conv"] == 1


# -------------------------------------------------------------------------------------- kmeansPredict

def test_kmeans_predict_matches_numpy() -> None:
    rng = _rng(4)
    X, C = rng.normal(size=(100, 3)), rng.normal(size=(5, 3))
    r, _ = run_lib("Y = kmeansPredict(X=X, C=C)", {"X": X, "C": C}, ["Y"])
    assert r["Y"].shape == (100, 1)
    D = ((X[:, None, :] - C[None]) ** 2).sum(2)
    np.testing.assert_array_equal(r["Y"].ravel(), D.argmin(1) + 1)


@BOTH
def test_kmeans_predict_ties_and_shapes(impl) -> None:
    # row 1 is equidistant from centroids 1 and 2 -> the larger id (SystemDS's rule); one-column data
    C = np.array([[0.0], [2.0], [10.0]])
    X = np.array([[1.0], [-1.0], [9.0], [6.0]])
    r, _ = impl("Y = kmeansPredict(X, C)", {"X": X, "C": C}, ["Y"])
    np.testing.assert_array_equal(r["Y"].ravel(), [2, 1, 3, 3])
    r, _ = impl("Y = kmeansPredict(X, C)", {"X": np.array([[1.0, 1.0]]), "C": np.array([[0.0, 0.0]])}, ["Y"])
    np.testing.assert_array_equal(r["Y"], [[1]])


def test_kmeans_predict_errors() -> None:
    _errors("Y = kmeansPredict(X, C)", {"X": np.ones((4, 3)), "C": np.ones((2, 2))},
            "kmeansPredict: X has 3 columns but the centroids C have 2")
