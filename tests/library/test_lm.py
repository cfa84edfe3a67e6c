"""lafuse's lm / lmDS / lmCG / lmPredict / lmPredictStats builtins.

Checked against independent references (NumPy normal equations / lstsq, scikit-learn Ridge and
LinearRegression with the same objective ||y - Xw - b0||^2 + reg*||w||^2, intercept unpenalised),
against SystemDS 3.4.0's own scripts (run_sds), and on edge cases and invalid inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import r2_score

from library.run import assert_close, assert_stops, run_lib, run_sds

RTOL = 1e-8  # exact optima of well-conditioned problems: only float round-off separates the solutions


def _data(n=60, m=5, seed=0, k=1):
    """Well-conditioned regression data with features of different means and scales."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m)) * np.linspace(0.5, 3.0, m) + np.linspace(-4.0, 6.0, m)
    w = rng.normal(size=(m, k))
    y = X @ w + 1.5 + 0.1 * rng.normal(size=(n, k))
    return X, y


def _close(a, b, rtol=RTOL):
    assert_close(a, b, rtol)


_stop = assert_stops


def _ridge_ref(X, y, icpt, reg):
    """Reference B (intercept last for icpt > 0) from scikit-learn / NumPy."""
    n, m = X.shape
    if icpt == 0:
        return np.linalg.solve(X.T @ X + reg * np.eye(m), X.T @ y)
    if icpt == 1:
        r = Ridge(alpha=reg, fit_intercept=True, solver="cholesky").fit(X, y)
        return np.vstack([r.coef_.reshape(y.shape[1], -1).T, np.atleast_2d(r.intercept_)])
    # icpt = 2: ridge on columns standardised with the sample (n-1) std, mapped back
    mu, sd = X.mean(0), X.std(0, ddof=1)
    r = Ridge(alpha=reg, fit_intercept=True, solver="cholesky").fit((X - mu) / sd, y)
    w = r.coef_.reshape(y.shape[1], -1).T / sd[:, None]
    return np.vstack([w, np.atleast_2d(r.intercept_) - mu @ w])


# ---------------------------------------------------------------- lmDS / lmCG / lm vs references

@pytest.mark.parametrize("icpt", [0, 1, 2])
def test_direct_and_cg_match_ridge_reference(icpt):
    X, y = _data()
    text = """
    D0 = lmDS(X, y, icpt, 0.0, FALSE)
    D = lmDS(X, y, icpt, 2.5, FALSE)
    C = lmCG(X, y, icpt, 2.5, 1e-13, 0, FALSE)
    L = lm(X, y, icpt, 2.5, 1e-7, 0, FALSE)
    """
    r, out = run_lib(text, {"X": X, "y": y, "icpt": icpt}, ["D0", "D", "C", "L"])
    assert out == ""  # verbose=FALSE prints nothing
    _close(r["D"], _ridge_ref(X, y, icpt, 2.5))
    _close(r["C"], _ridge_ref(X, y, icpt, 2.5))
    _close(r["L"], r["D"], rtol=1e-12)  # narrow X: lm is lmDS
    # reg = 0: ordinary least squares
    if icpt == 0:
        _close(r["D0"], np.linalg.lstsq(X, y, rcond=None)[0])
    else:  # with an intercept, standardising does not change the unregularised fit
        ols = LinearRegression().fit(X, y)
        _close(r["D0"], np.vstack([ols.coef_.T, ols.intercept_]))


def test_intercept_is_not_penalised_and_icpt2_penalises_standardised_coefficients():
    X, y = _data(seed=3)
    X[:, 0] *= 100.0  # a large-scale column: icpt=1 barely shrinks it, icpt=2 shrinks it like the others
    r, _ = run_lib("B1 = lmDS(X, y, 1, 50.0, FALSE)\nB2 = lmDS(X, y, 2, 50.0, FALSE)",
                   {"X": X, "y": y}, ["B1", "B2"])
    # unpenalised intercept => residuals have mean exactly 0 for any reg
    for B in (r["B1"], r["B2"]):
        assert abs(np.mean(y - X @ B[:-1] - B[-1])) < 1e-10
    _close(r["B1"], _ridge_ref(X, y, 1, 50.0))
    _close(r["B2"], _ridge_ref(X, y, 2, 50.0))
    assert not np.allclose(r["B1"], r["B2"], rtol=1e-3)


def test_wide_lm_dispatches_to_cg_on_sparse_input():
    rng = np.random.default_rng(1)
    X = sp.random(60, 1100, density=0.05, random_state=1, format="csr")
    y = rng.normal(size=(60, 1))
    r, out = run_lib("B = lm(X, y, 1, 0.1, 1e-11, 0, TRUE)", {"X": X, "y": y}, ["B"])
    assert "lmCG: conjugate gradient (60 rows, 1100 features" in out
    assert "converged after" in out and "lmDS" not in out
    Xd = X.toarray()
    _close(r["B"], _ridge_ref(Xd, y, 1, 0.1), rtol=1e-7)  # CG stopped at tol=1e-11 on a system with cond ~1e2


def test_cg_iteration_count_and_warning():
    X, y = _data(m=6, seed=5)
    text = """
    B1 = lmCG(X, y, 0, 0.0, 0.0, 1, TRUE)
    B3 = lmCG(X, y, 0, 0.0, 1e-14, 3, FALSE)
    """
    r, out = run_lib(text, {"X": X, "y": y}, ["B1", "B3"])
    # one CG iteration from w=0 is a steepest-descent step: w = (g'g / g'Ag) g with g = X'y
    A, g = X.T @ X, X.T @ y
    _close(r["B1"], (g.T @ g) / (g.T @ A @ g) * g)
    assert "lmCG: iteration 1," in out
    assert "warning: maximum number of iterations (1) reached" in out
    # more iterations, closer to the optimum (Krylov property of CG)
    opt = np.linalg.solve(A, g)
    assert np.linalg.norm(r["B3"] - opt) < np.linalg.norm(r["B1"] - opt)


def test_multi_column_response_fits_each_column():
    X, y = _data(seed=7, k=3)
    text = """
    D = lmDS(X, y, 2, 0.7, FALSE)
    C = lmCG(X, y, 2, 0.7, 1e-13, 0, FALSE)
    P = lmPredict(X, D, y, 2, FALSE)
    R = lmPredictStats(P, y, TRUE)
    R2 = lmPredictStats(P[, 2], y[, 2], TRUE)
    """
    r, out = run_lib(text, {"X": X, "y": y}, ["D", "C", "P", "R", "R2"])
    ref = _ridge_ref(X, y, 2, 0.7)
    assert r["D"].shape == (X.shape[1] + 1, 3)
    _close(r["D"], ref)
    _close(r["C"], ref)
    _close(r["P"], X @ ref[:-1] + ref[-1])
    # statistics per response column (3 x k), column 2 equals the single-column statistics
    assert r["R"].shape == (3, 3)
    _close(r["R"][:, 1:2], r["R2"], rtol=1e-12)
    _close(r["R"][2], r2_score(y, r["P"], multioutput="raw_values"))
    r2_line = [ln for ln in out.splitlines() if ln.startswith("R2, ")][0]
    assert len(r2_line.split(", ")[1].split()) == 3


def test_large_feature_means_are_handled_by_centring():
    # a feature with mean 1e6 and unit spread: the intercept is eliminated by explicit centring,
    # so the fit is as accurate as on the centred data (looser 1e-6: cond of the problem ~1e12 in
    # the uncentred formulation; the reference itself centres). Known difference: SystemDS's scripts,
    # which solve the uncentred bordered system, were measured off by ~7e-4 (lmDS) and ~2 (lmCG,
    # stalls) in the first coefficient here.
    rng = np.random.default_rng(11)
    X = np.column_stack([1e6 + rng.normal(size=80), rng.normal(size=80)])
    y = (X - [1e6, 0]) @ [[2.0], [-1.0]] + 3.0 + 0.01 * rng.normal(size=(80, 1))
    r, _ = run_lib("D = lmDS(X, y, 1, 0.0, FALSE)\nC = lmCG(X, y, 1, 0.0, 1e-14, 0, FALSE)",
                   {"X": X, "y": y}, ["D", "C"])
    Xc = X - X.mean(0)
    w = np.linalg.lstsq(Xc, y - y.mean(), rcond=None)[0]
    for B in (r["D"], r["C"]):
        _close(B[:-1], w, rtol=1e-6)
        _close(B[-1:], (y.mean() - X.mean(0) @ w).reshape(1, 1), rtol=1e-6)


# ---------------------------------------------------------------- lmPredict / lmPredictStats

def test_lm_predict_and_stats_match_numpy():
    X, y = _data(seed=2)
    Xt, yt = _data(n=30, seed=9)
    text = """
    B = lm(X, y, 1, 1e-7, 1e-7, 0, FALSE)
    yhat = lmPredict(Xt, B, yt, 1, TRUE)
    B0 = lmDS(X, y, 0, 1e-7, FALSE)
    yhat0 = lmPredict(Xt, B0)
    R = lmPredictStats(yhat, yt, TRUE)
    Rf = lmPredictStats(yhat, yt, FALSE)
    """
    r, out = run_lib(text, {"X": X, "y": y, "Xt": Xt, "yt": yt}, ["B", "yhat", "B0", "yhat0", "R", "Rf"])
    B = r["B"]
    _close(r["yhat"], Xt @ B[:-1] + B[-1])
    _close(r["yhat0"], Xt @ r["B0"])
    e = yt - r["yhat"]
    n = len(yt)
    ss_avg_res = np.sum(e**2) - n * np.mean(e) ** 2
    _close(r["R"], np.array([[np.mean(e)], [ss_avg_res], [r2_score(yt, r["yhat"])]]))
    explained = np.sum((r["yhat"] - yt.mean()) ** 2) / np.sum((yt - yt.mean()) ** 2)
    _close(r["Rf"], np.array([[np.mean(e)], [ss_avg_res], [explained]]))
    # printed statistics (once from lmPredict verbose, twice directly)
    assert out.count("Computing the statistics...") == 3
    for label in ("sum(ytest) = ", "sum(yhat) = ", "SS_AVG_RES_Y: ", "AVG_TOT_Y, ", "STDEV_TOT_Y, ",
                  "AVG_RES_Y, ", "R2, ", "R2_NOBIAS, "):
        assert label in out
    stdev = [ln for ln in out.splitlines() if ln.startswith("STDEV_TOT_Y, ")][0]
    assert float(stdev.split(", ")[1]) == pytest.approx(np.std(yt, ddof=1), rel=1e-12)


def test_predict_intercept_row_detection_and_verbose_without_ytest():
    X = np.arange(12.0).reshape(4, 3)
    B = np.array([[1.0], [2.0], [3.0], [10.0]])
    text = """
    p1 = lmPredict(X, B)
    p2 = lmPredict(X, B[1:3, ])
    p3 = lmPredict(X, B, matrix(0, 1, 1), 0, TRUE)
    """
    r, out = run_lib(text, {"X": X, "B": B}, ["p1", "p2", "p3"])
    # B with ncol(X)+1 rows: last row is the intercept even with icpt=0 (as in SystemDS)
    _close(r["p1"], X @ B[:3] + 10.0, rtol=1e-15)
    _close(r["p2"], X @ B[:3], rtol=1e-15)
    assert "lmPredict: 4 predictions (no ytest given, no statistics)" in out
    assert "Computing the statistics" not in out


def test_verbose_fit_messages():
    X, y = _data(n=20, m=2)
    _, out = run_lib("B = lm(X, y)\nC = lmCG(X, y)", {"X": X, "y": y}, [])
    assert "lmDS: direct solve of the normal equations (20 rows, 2 features, icpt=0" in out
    assert "lmCG: conjugate gradient (20 rows, 2 features" in out
    assert "||r|| initial = " in out and "converged after" in out


# ---------------------------------------------------------------- portability vs SystemDS's scripts

def test_same_results_as_systemds_scripts():
    X, y = _data(n=50, m=4, seed=4)
    Xt, yt = _data(n=20, m=4, seed=8)
    text = """
    D0 = lmDS(X, y, 0, 0.3, TRUE)
    D1 = lmDS(X, y, 1, 0.3, FALSE)
    D2 = lmDS(X, y, 2, 0.3, FALSE)
    C0 = lmCG(X, y, 0, 0.3, 1e-13, 0, FALSE)
    C1 = lmCG(X, y, 1, 0.3, 1e-13, 0, FALSE)
    C2 = lmCG(X, y, 2, 0.3, 1e-13, 0, TRUE)
    L = lm(X, y, 2, 0.3, 1e-7, 0, FALSE)
    L0 = lm(X, y)
    P = lmPredict(Xt, D2, yt, 2, TRUE)
    P0 = lmPredict(Xt, D0)
    R = lmPredictStats(P, yt, TRUE)
    Rf = lmPredictStats(P, yt, FALSE)
    """
    names = ["D0", "D1", "D2", "C0", "C1", "C2", "L", "L0", "P", "P0", "R", "Rf"]
    inputs = {"X": X, "y": y, "Xt": Xt, "yt": yt}
    ours, out_ours = run_lib(text, inputs, names)
    theirs, out_theirs = run_sds(text, inputs, names)
    for k in names:
        # identical optima; the formulations differ (we centre, SystemDS solves the bordered
        # system), and CG's stopping residuals differ slightly, hence 1e-8 not bit-equality
        _close(ours[k], theirs[k])
    # same printed statistic lines (labels and values up to round-off)
    def stats(text_out):
        return {ln.split(", ")[0]: float(ln.split(", ")[1]) for ln in text_out.splitlines()
                if ln.split(", ")[0] in ("AVG_TOT_Y", "STDEV_TOT_Y", "R2", "R2_NOBIAS")}
    s1, s2 = stats(out_ours), stats(out_theirs)
    assert s1.keys() == s2.keys() == {"AVG_TOT_Y", "STDEV_TOT_Y", "R2", "R2_NOBIAS"}
    for k in s1:
        assert s1[k] == pytest.approx(s2[k], rel=1e-9)


# ---------------------------------------------------------------- edge cases

def test_single_column_and_single_row():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(25, 1)) + 2.0
    y = 3.0 * x - 1.0 + 0.05 * rng.normal(size=(25, 1))
    text = """
    A0 = lmDS(x, y, 0, 0.0, FALSE)
    A1 = lmDS(x, y, 1, 0.0, FALSE)
    A2 = lmCG(x, y, 2, 0.0, 1e-14, 0, FALSE)
    r0 = lmDS(xr, yr, 0, 0.5, FALSE)
    r1 = lmCG(xr, yr, 0, 0.5, 1e-14, 0, FALSE)
    r2 = lmDS(xr, yr, 2, 0.5, FALSE)
    """
    xr = np.array([[1.0, 2.0, -1.0]])
    yr = np.array([[4.0]])
    r, _ = run_lib(text, {"x": x, "y": y, "xr": xr, "yr": yr}, ["A0", "A1", "A2", "r0", "r1", "r2"])
    _close(r["A0"], (x.T @ y) / (x.T @ x))
    ols = np.polyfit(x[:, 0], y[:, 0], 1)
    _close(r["A1"], ols.reshape(2, 1))
    _close(r["A2"], ols.reshape(2, 1))
    # one row, no intercept: minimum-norm-like ridge solution  w = x' (x x' + reg)^-1 y
    w = xr.T @ np.linalg.solve(xr @ xr.T + 0.5, yr)
    _close(r["r0"], w)
    _close(r["r1"], w)
    # one row with intercept: every column is constant, so B = [0, 0, 0, y]
    _close(r["r2"], np.array([[0.0], [0.0], [0.0], [4.0]]), rtol=1e-15)


def test_zero_and_constant_columns_get_zero_coefficients():
    X, y = _data(m=3, seed=12)
    Xz = np.column_stack([X[:, :1], np.zeros(len(X)), X[:, 1:], np.full(len(X), 0.1)])
    text = """
    Z0 = lmDS(X, y, 0, 1e-7, FALSE)
    Z00 = lmDS(X, y, 0, 0.0, FALSE)
    Z1 = lmDS(X, y, 1, 0.0, FALSE)
    Z2 = lmDS(X, y, 2, 0.0, FALSE)
    C2 = lmCG(X, y, 2, 0.0, 1e-14, 0, FALSE)
    """
    r, _ = run_lib(text, {"X": Xz, "y": y}, ["Z0", "Z00", "Z1", "Z2", "C2"])
    # an all-zero column gets exactly 0, also with reg = 0 (the system would otherwise be singular)
    assert r["Z0"][1, 0] == 0.0 and r["Z00"][1, 0] == 0.0
    _close(r["Z00"][[0, 2, 3, 4]], np.linalg.lstsq(Xz[:, [0, 2, 3, 4]], y, rcond=None)[0])
    ref = _ridge_ref(X, y, 1, 0.0)
    for k in ("Z1", "Z2", "C2"):
        B = r[k]
        assert B[1, 0] == 0.0 and B[4, 0] == 0.0  # all-zero and constant column: exactly 0
        _close(B[[0, 2, 3, 5]], ref)  # the rest is the fit without those columns


def test_invalid_inputs_stop_with_clear_messages():
    X, y = np.ones((5, 2)), np.ones((4, 1))
    _stop("B = lmDS(X, y)", {"X": X, "y": y}, r"lmDS: y has 4 rows but X has 5 rows")
    _stop("B = lmCG(X, y)", {"X": X, "y": y}, r"lmCG: y has 4 rows but X has 5 rows")
    _stop("B = lm(X, y)", {"X": X, "y": y}, r"lmDS: y has 4 rows but X has 5 rows")
    Xg, yg = _data(n=10, m=2)
    ok = {"X": Xg, "y": yg}
    _stop("B = lmDS(X, y, 3)", ok, r"lmDS: icpt must be 0, 1 or 2, got 3")
    _stop("B = lmCG(X, y, 0, -1.0)", ok, r"lmCG: reg must be >= 0, got -1.0")
    _stop("B = lmCG(X, y, 0, 0.1, -1e-3)", ok, r"lmCG: tol must be >= 0")
    _stop("B = lmCG(X, y, 0, 0.1, 1e-7, -2)", ok, r"lmCG: maxi must be >= 0, got -2")
    B3 = np.ones((3, 1))
    _stop("p = lmPredict(X, B)", {"X": np.ones((4, 5)), "B": B3},
          r"lmPredict: B has 3 rows but X has 5 columns; expected 5 \(no intercept\) or 6")
    _stop("p = lmPredict(X, B, matrix(0,1,1), 1)", {"X": np.ones((4, 3)), "B": B3},
          r"lmPredict: icpt=1 needs B with ncol\(X\)\+1 = 4 rows")
    _stop("p = lmPredict(X, B, yt, 0, TRUE)", {"X": np.ones((4, 3)), "B": B3, "yt": np.ones((3, 1))},
          r"lmPredict: ytest is 3 x 1 but the predictions are 4 x 1")
    _stop("R = lmPredictStats(a, b, TRUE)", {"a": np.ones((4, 1)), "b": np.ones((5, 1))},
          r"lmPredictStats: yhat is 4 x 1 but ytest is 5 x 1")
