"""lafuse's classification builtins: l2svm, l2svmPredict, multiLogReg, multiLogRegPredict, naiveBayes,
getAccuracy, confusionMatrix, sigmoid.

Checked against independent references (scikit-learn LinearSVC / LogisticRegression / MultinomialNB /
accuracy_score / balanced_accuracy_score / confusion_matrix, SciPy expit, a NumPy full-Hessian Newton solver
for the exact penalised multinomial likelihood), against SystemDS 3.4.0's own scripts (run_sds), and on edge
cases and invalid inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, balanced_accuracy_score, confusion_matrix
from sklearn.naive_bayes import MultinomialNB
from sklearn.svm import LinearSVC

from library.run import assert_close, assert_stops, run_lib, run_sds

RTOL = 1e-8  # exact optima of well-conditioned problems: only float round-off separates the solutions


def _close(a, b, rtol=RTOL):
    assert_close(a, b, rtol)


_stop = assert_stops


def _col(v):
    return np.asarray(v, float).reshape(-1, 1)


# ---------------------------------------------------------------- data and references

def _svm_data(n=120, m=4, seed=3):
    """Overlapping (non-separable) binary data, features of different scales and offsets, labels -1/+1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m)) * np.linspace(0.5, 2.0, m) + np.linspace(-1.0, 2.0, m)
    w = np.linspace(1.0, -1.0, m) + 0.3
    y = np.where(X @ w - 0.5 + rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _svc_ref(X, y, reg, intercept):
    """sklearn's primal L2-loss SVM: 0.5||w||^2 + C sum sqhinge == (1/reg) * our objective with C = 1/(2 reg);
    liblinear regularises the intercept (a synthetic feature of ones), like l2svm."""
    sk = LinearSVC(loss="squared_hinge", penalty="l2", C=1 / (2 * reg), fit_intercept=intercept,
                   intercept_scaling=1.0, dual=False, tol=1e-14, max_iter=100000).fit(X, y)
    w = sk.coef_.ravel()
    return _col(np.r_[w, sk.intercept_] if intercept else w)


def _mlr_data(n=240, m=4, k=3, seed=1):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, m))
    X = Z * np.linspace(0.3, 4.0, m) + np.linspace(-2.0, 5.0, m)  # different scales and offsets
    W = rng.normal(size=(m, k))
    y = np.argmax(Z @ W + rng.gumbel(size=(n, k)), axis=1) + 1.0  # noisy labels: no separation, finite MLE
    return X, _col(y)


def _mlr_ref(X, y, reg, icpt):
    """Exact minimiser of the penalised multinomial likelihood (baseline = last class, intercept unpenalised,
    icpt=2 standardised with the sample std and mapped back), by Newton with the full Hessian."""
    n, m = X.shape
    y = y.ravel().copy()
    y[y <= 0] = y.max() + 1
    k = int(y.max())
    K = k - 1
    Yi = np.eye(k)[y.astype(int) - 1]
    cs, sh = np.ones(m), np.zeros(m)
    if icpt == 2:
        sd = X.std(0, ddof=1)
        cs = np.where(sd > 0, 1 / np.where(sd > 0, sd, 1), 1.0)
        sh = -X.mean(0) * cs
    Z = X * cs + sh
    if icpt > 0:
        Z = np.hstack([Z, np.ones((n, 1))])
    d = Z.shape[1]
    lam = np.full(d, reg)
    if icpt > 0:
        lam[-1] = 0.0

    def fgh(w):
        W = w.reshape(d, K, order="F")
        L = np.hstack([Z @ W, np.zeros((n, 1))])
        mx = L.max(1, keepdims=True)
        E = np.exp(L - mx)
        P = E / E.sum(1, keepdims=True)
        f = (np.log(E.sum(1)) + mx.ravel()).sum() - (Yi * L).sum() + 0.5 * (lam[:, None] * W ** 2).sum()
        g = (Z.T @ (P[:, :K] - Yi[:, :K]) + lam[:, None] * W).ravel(order="F")
        H = np.zeros((d * K, d * K))
        for a in range(K):
            for b in range(K):
                H[a * d:(a + 1) * d, b * d:(b + 1) * d] = Z.T @ (Z * (P[:, a] * ((a == b) - P[:, b]))[:, None])
        return f, g, H + np.diag(np.tile(lam, K))

    w = np.zeros(d * K)
    for _ in range(100):
        f, g, H = fgh(w)
        if np.linalg.norm(g) < 1e-11:
            break
        step, t = -np.linalg.solve(H, g), 1.0
        while fgh(w + t * step)[0] > f + 1e-4 * t * (g @ step) and t > 1e-8:
            t /= 2
        w = w + t * step
    W = w.reshape(d, K, order="F")
    if icpt == 0:
        return W
    return np.vstack([cs[:, None] * W[:m], W[m] + sh @ W[:m]])


def _softmax_base(L):
    L = np.hstack([L, np.zeros((L.shape[0], 1))])
    E = np.exp(L - L.max(1, keepdims=True))
    return E / E.sum(1, keepdims=True)


# ---------------------------------------------------------------- sigmoid

def test_sigmoid_matrix_and_scalar_match_expit_and_systemds():
    X = np.array([[-800.0, -3.0, -1e-3], [0.0, 2.5, 800.0]])
    # (sigmoid(as.scalar(X[2, 2])) directly hits a lafuse dispatch bug, see /tmp/bugs/classify.md)
    text = "Y = sigmoid(X); a = sigmoid(0.5); b = sigmoid(-2); x = as.scalar(X[2, 2]); c = sigmoid(x)"
    r, out = run_lib(text, {"X": X}, ["Y", "a", "b", "c"])
    assert out == ""
    _close(r["Y"], expit(X), rtol=1e-15)
    assert np.isfinite(r["Y"]).all() and r["Y"][0, 0] == 0.0 and r["Y"][1, 2] == 1.0  # no NaN on overflow
    assert r["a"] == pytest.approx(expit(0.5), rel=1e-15)
    assert r["b"] == pytest.approx(expit(-2.0), rel=1e-15)  # Integer argument widened to Double
    assert r["c"] == pytest.approx(expit(2.5), rel=1e-15)
    s, _ = run_sds(text, {"X": X}, ["Y", "a", "b", "c"])
    for name in ("Y", "a", "b", "c"):
        _close(r[name], s[name], rtol=1e-15)


@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1)])
def test_sigmoid_vector_shapes(shape):
    X = np.linspace(-2, 2, int(np.prod(shape))).reshape(shape)
    r, _ = run_lib("Y = sigmoid(X)", {"X": X}, ["Y"])
    _close(r["Y"], expit(X), rtol=1e-15)


# ---------------------------------------------------------------- getAccuracy

def test_get_accuracy_matches_sklearn_and_systemds():
    rng = np.random.default_rng(5)
    y = rng.integers(1, 5, size=80).astype(float)
    yhat = np.where(rng.random(80) < 0.6, y, rng.integers(1, 5, size=80)).astype(float)
    text = ("a = getAccuracy(y=y, yhat=yhat, isWeighted=FALSE); w = getAccuracy(y=y, yhat=yhat, isWeighted=TRUE)\n"
            "d = getAccuracy(y=y, yhat=yhat)")
    inputs = {"y": _col(y), "yhat": _col(yhat)}
    r, out = run_lib(text, inputs, ["a", "w", "d"])
    assert out == ""
    assert r["a"] == pytest.approx(100 * accuracy_score(y, yhat), rel=1e-14)
    assert r["d"] == r["a"]  # isWeighted defaults to FALSE
    assert r["w"] == pytest.approx(100 * balanced_accuracy_score(y, yhat), rel=1e-14)
    assert r["w"] != pytest.approx(r["a"])  # the classes are unbalanced: the two measures differ
    s, _ = run_sds(text, inputs, ["a", "w", "d"])
    for name in ("a", "w", "d"):
        assert r[name] == pytest.approx(s[name], rel=1e-14)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_get_accuracy_weighted_with_an_absent_label_value():
    # labels 1 and 3 occur, 2 never does: balanced accuracy over {1, 3}; SystemDS also averages in
    # "class 2" with accuracy 0 (documented difference)
    y, yhat = _col([1, 1, 1, 3, 3]), _col([1, 1, 3, 3, 2])
    text = "w = getAccuracy(y=y, yhat=yhat, isWeighted=TRUE)"
    r, _ = run_lib(text, {"y": y, "yhat": yhat}, ["w"])
    assert r["w"] == pytest.approx(100 * balanced_accuracy_score(y.ravel(), yhat.ravel()))
    assert r["w"] == pytest.approx(100 * (2 / 3 + 1 / 2) / 2)
    s, _ = run_sds(text, {"y": y, "yhat": yhat}, ["w"])
    assert s["w"] == pytest.approx(100 * (2 / 3 + 0 + 1 / 2) / 3)


def test_get_accuracy_edges_and_errors():
    r, _ = run_lib("a = getAccuracy(y=y, yhat=yhat, isWeighted=TRUE); b = getAccuracy(y=y, yhat=y, isWeighted=FALSE)",
                   {"y": np.array([[2.0]]), "yhat": np.array([[1.0]])}, ["a", "b"])
    assert r["a"] == 0.0 and r["b"] == 100.0
    # any label values work unweighted (e.g. -1/+1)
    r, _ = run_lib("a = getAccuracy(y=y, yhat=yhat, isWeighted=FALSE)",
                   {"y": _col([-1, 1, 1, -1]), "yhat": _col([-1, 1, -1, -1])}, ["a"])
    assert r["a"] == 75.0
    _stop("a = getAccuracy(y=y, yhat=yhat, isWeighted=FALSE)", {"y": _col([1, 2, 3]), "yhat": _col([1, 2])},
          "getAccuracy: y and yhat must have the same number of rows")
    _stop("a = getAccuracy(y=y, yhat=yhat, isWeighted=FALSE)", {"y": np.ones((2, 2)), "yhat": np.ones((2, 2))},
          "getAccuracy: y and yhat must be column vectors")
    _stop("a = getAccuracy(y=y, yhat=yhat, isWeighted=TRUE)", {"y": _col([0, 1]), "yhat": _col([0, 1])},
          "getAccuracy: isWeighted=TRUE needs positive integer labels")


# ---------------------------------------------------------------- confusionMatrix

def test_confusion_matrix_matches_sklearn_and_systemds():
    rng = np.random.default_rng(7)
    Y = rng.integers(1, 5, size=60).astype(float)
    P = np.where(rng.random(60) < 0.5, Y, rng.integers(1, 5, size=60)).astype(float)
    text = "[S, A] = confusionMatrix(P, Y)"
    r, out = run_lib(text, {"P": _col(P), "Y": _col(Y)}, ["S", "A"])
    assert out == ""
    ref = confusion_matrix(Y, P, labels=[1, 2, 3, 4]).T  # sklearn: rows = true; SystemDS: rows = predicted
    _close(r["S"], ref, rtol=0)
    _close(r["A"], ref / ref.sum(0, keepdims=True), rtol=1e-15)
    _close(r["A"].sum(0), np.ones(4), rtol=1e-15)
    # diagonal of the normalised matrix = per-class recall; its mean is the weighted accuracy
    assert 100 * np.diag(r["A"]).mean() == pytest.approx(100 * balanced_accuracy_score(Y, P))
    s, _ = run_sds(text, {"P": _col(P), "Y": _col(Y)}, ["S", "A"])
    _close(r["S"], s["S"], rtol=0)
    _close(r["A"], s["A"], rtol=1e-15)


def test_confusion_matrix_edges_and_errors():
    # a class that is only predicted (never true) gets a zero column in confusionAvg, not NaN
    r, _ = run_lib("[S, A] = confusionMatrix(P, Y)", {"P": _col([1, 3, 2]), "Y": _col([1, 2, 2])}, ["S", "A"])
    _close(r["S"], [[1, 0, 0], [0, 1, 0], [0, 1, 0]], rtol=0)
    _close(r["A"], [[1, 0, 0], [0, 0.5, 0], [0, 0.5, 0]], rtol=0)
    r, _ = run_lib("[S, A] = confusionMatrix(P, Y)", {"P": np.array([[2.0]]), "Y": np.array([[2.0]])}, ["S", "A"])
    _close(r["S"], [[0, 0], [0, 1]], rtol=0)
    text = "[S, A] = confusionMatrix(P, Y)"
    _stop(text, {"P": _col([1, 2]), "Y": _col([1, 2, 2])}, "confusionMatrix: P and Y must have the same number of rows")
    _stop(text, {"P": np.ones((2, 2)), "Y": _col([1, 2])}, "confusionMatrix: P and Y must have one column each")
    _stop(text, {"P": _col([0, 1]), "Y": _col([1, 2])}, r"confusionMatrix: labels must be >= 1")
    _stop(text, {"P": _col([1.5, 1]), "Y": _col([1, 2])}, "confusionMatrix: labels must be integers")


# ---------------------------------------------------------------- naiveBayes

def _nb_data(n=90, m=6, k=3, seed=11):
    rng = np.random.default_rng(seed)
    C = rng.integers(1, k + 1, size=n)
    rates = rng.uniform(0.5, 6.0, size=(k, m))
    D = rng.poisson(rates[C - 1]).astype(float)
    return D, _col(C)


@pytest.mark.parametrize("laplace", [1.0, 0.25])
def test_naive_bayes_matches_multinomial_nb_and_systemds(laplace):
    D, C = _nb_data()
    text = "[prior, cond] = naiveBayes(D=D, C=C, laplace=lp, verbose=TRUE)"
    inputs = {"D": D, "C": C, "lp": laplace}
    r, out = run_lib(text, inputs, ["prior", "cond"])
    nb = MultinomialNB(alpha=laplace).fit(D, C.ravel())
    _close(r["prior"], _col(np.exp(nb.class_log_prior_)), rtol=1e-12)
    _close(r["cond"], np.exp(nb.feature_log_prob_), rtol=1e-12)
    _close(r["cond"].sum(1), np.ones(3), rtol=1e-14)
    acc = 100 * nb.score(D, C.ravel())
    assert "naiveBayes: 90 rows, 6 features, 3 classes; training accuracy (%): " in out
    assert float(out.strip().rsplit(" ", 1)[1]) == pytest.approx(acc)
    s, sout = run_sds(text, inputs, ["prior", "cond"])
    _close(r["prior"], s["prior"], rtol=1e-14)
    _close(r["cond"], s["cond"], rtol=1e-14)
    assert float(sout.strip().rsplit(" ", 1)[1]) == pytest.approx(acc)


def test_naive_bayes_edges():
    D, C = _nb_data(n=30, m=1, k=2)  # one feature: every conditional is exactly 1
    r, out = run_lib("[p, c] = naiveBayes(D=D, C=C, laplace=1, verbose=FALSE)", {"D": D, "C": C}, ["p", "c"])
    assert out == ""
    _close(r["c"], np.ones((2, 1)), rtol=1e-15)
    # label 2 never occurs: prior 0 and uniform conditionals; an all-zero feature column gets laplace mass only
    D = np.array([[1.0, 0, 3], [2, 0, 0], [0, 0, 1], [4, 0, 4]])
    C = _col([1, 3, 1, 3])
    text = "[p, c] = naiveBayes(D=D, C=C, laplace=1, verbose=FALSE)"
    r, _ = run_lib(text, {"D": D, "C": C}, ["p", "c"])
    _close(r["p"], _col([0.5, 0.0, 0.5]), rtol=1e-15)
    _close(r["c"], [[2 / 8, 1 / 8, 5 / 8], [1 / 3, 1 / 3, 1 / 3], [7 / 13, 1 / 13, 5 / 13]], rtol=1e-14)
    s, _ = run_sds(text, {"D": D, "C": C}, ["p", "c"])
    _close(r["p"], s["p"], rtol=1e-15)
    _close(r["c"], s["c"], rtol=1e-15)


def test_naive_bayes_errors():
    D, C = _nb_data(n=10)
    text = "[p, c] = naiveBayes(D=D, C=C, laplace=lp, verbose=FALSE)"
    _stop(text, {"D": -D, "C": C, "lp": 1.0}, "naiveBayes: D must hold non-negative counts")
    _stop(text, {"D": D, "C": C - 1, "lp": 1.0}, "naiveBayes: labels in C must be positive integers")
    _stop(text, {"D": D, "C": C + 0.5, "lp": 1.0}, "naiveBayes: labels in C must be positive integers")
    _stop(text, {"D": D, "C": np.ones_like(C), "lp": 1.0}, "naiveBayes: need at least two classes")
    _stop(text, {"D": D, "C": C[:8], "lp": 1.0}, "naiveBayes: C must be a column vector with one label per row")
    _stop(text, {"D": D, "C": C, "lp": -1.0}, "naiveBayes: laplace must be non-negative")
    _stop(text, {"D": D[:1], "C": C[:1], "lp": 1.0}, "naiveBayes: need at least 2 rows")


# ---------------------------------------------------------------- l2svm / l2svmPredict

@pytest.mark.parametrize("intercept", [False, True])
def test_l2svm_matches_linear_svc(intercept):
    X, y = _svm_data()
    text = ("w = l2svm(X=X, Y=Y, intercept=icpt, epsilon=0, reg=0.7, maxIterations=100, maxii=20, "
            "verbose=FALSE, columnId=-1)")
    r, out = run_lib(text, {"X": X, "Y": _col(y), "icpt": intercept}, ["w"])
    assert out == ""
    assert r["w"].shape == (X.shape[1] + intercept, 1)
    _close(r["w"], _svc_ref(X, y, 0.7, intercept))


def test_l2svm_label_encodings_give_the_same_model():
    X, y = _svm_data(n=60)
    text = "w = l2svm(X=X, Y=Y, intercept=TRUE, epsilon=0, reg=1.0, maxIterations=100, maxii=20, verbose=FALSE, columnId=-1)"
    ref = _svc_ref(X, y, 1.0, True)
    for Y in (y, (y + 1) / 2, (y + 3) / 2, 5 * y + 2):  # -1/1, 0/1, 1/2, -3/7: smaller -> -1, larger -> +1
        r, _ = run_lib(text, {"X": X, "Y": _col(Y)}, ["w"])
        _close(r["w"], ref)


def test_l2svm_default_settings_are_near_the_optimum_and_systemds():
    # default epsilon=0.001 stops early (the rule is relative to the objective). Our Newton iterations reach the
    # optimum here (4e-16); SystemDS's nonlinear CG stops ~2% away from it.
    X, y = _svm_data(n=200, m=5, seed=4)
    text = "w = l2svm(X=X, Y=Y, intercept=TRUE)"
    r, _ = run_lib(text, {"X": X, "Y": _col(y)}, ["w"])
    s, _ = run_sds(text, {"X": X, "Y": _col(y)}, ["w"])
    ref = _svc_ref(X, y, 1.0, True)
    assert r["w"].shape == s["w"].shape == (6, 1)
    err_lib = np.abs(r["w"] - ref).max() / np.abs(ref).max()
    err_sds = np.abs(s["w"] - ref).max() / np.abs(ref).max()
    assert err_lib < 1e-8 and err_sds < 0.1


@pytest.mark.parametrize("intercept", [False, True])
def test_l2svm_portability_converged(intercept):
    # both implementations run to convergence: the unique optimum of the same objective
    X, y = _svm_data(n=150, m=5, seed=9)
    text = (f"w = l2svm(X=X, Y=Y, intercept={str(intercept).upper()}, epsilon=1e-14, reg=0.5, maxIterations=400, "
            "maxii=20, verbose=FALSE, columnId=-1)")
    r, _ = run_lib(text, {"X": X, "Y": _col(y)}, ["w"])
    s, _ = run_sds(text, {"X": X, "Y": _col(y)}, ["w"])
    # the objective-relative stopping rule leaves both ~1e-7 (relative) from the optimum at epsilon=1e-14
    _close(r["w"], s["w"], rtol=1e-6)


def test_l2svm_edges():
    X, y = _svm_data(n=50, m=3)
    text = "w = l2svm(X=X, Y=Y, intercept=TRUE, epsilon=0, reg=0.7, maxIterations=100, maxii=20, verbose=FALSE, columnId=-1)"
    # one feature
    r, _ = run_lib(text, {"X": X[:, :1], "Y": _col(y)}, ["w"])
    _close(r["w"], _svc_ref(X[:, :1], y, 0.7, True))
    # an all-zero column gets weight exactly 0, the rest is the model without it
    Xz = np.hstack([X[:, :1], np.zeros((50, 1)), X[:, 1:]])
    r, _ = run_lib(text, {"X": Xz, "Y": _col(y)}, ["w"])
    assert r["w"][1, 0] == 0.0
    _close(np.delete(r["w"], 1, axis=0), _svc_ref(X, y, 0.7, True))
    # two rows, no intercept
    r, _ = run_lib("w = l2svm(X=X, Y=Y, intercept=FALSE, epsilon=0, reg=1.0, maxIterations=100, maxii=20, "
                   "verbose=FALSE, columnId=-1)", {"X": np.array([[1.0, 0], [0, 1]]), "Y": _col([1, -1])}, ["w"])
    # optimum of (1-w1)^2/2 + (1+w2)^2/2 + (w1^2+w2^2)/2: w = (1/2, -1/2)
    _close(r["w"], _col([0.5, -0.5]), rtol=1e-14)


def test_l2svm_verbose_output():
    X, y = _svm_data(n=40)
    r, out = run_lib("w = l2svm(X=X, Y=Y, intercept=TRUE, epsilon=0.001, reg=1, maxIterations=100, maxii=20, "
                     "verbose=TRUE, columnId=-1)", {"X": X, "Y": _col(y)}, ["w"])
    lines = out.strip().splitlines()
    assert lines[0].startswith("l2svm: n=40 features=5 reg=1.0 initial objective=20.0")
    assert "l2svm: iter 1: CG steps=" in out and "objective=" in out
    assert lines[-1].startswith("l2svm: finished after ")
    _, out = run_lib("w = l2svm(X=X, Y=Y, intercept=FALSE, epsilon=0.001, reg=1, maxIterations=2, maxii=20, "
                     "verbose=TRUE, columnId=3)", {"X": X, "Y": _col(y)}, ["w"])
    assert "l2svm (class 3): iter 2:" in out and "finished after 2 iterations" in out


def test_l2svm_errors():
    X, y = _svm_data(n=20)
    base = "w = l2svm(X=X, Y=Y, intercept=FALSE, epsilon={e}, reg={r}, maxIterations={mi}, maxii=20, verbose=FALSE, columnId=-1)"
    ok = {"e": 0.001, "r": 1.0, "mi": 100}
    _stop(base.format(**ok), {"X": X[:1], "Y": _col(y[:1])}, "l2svm: need at least 2 rows")
    _stop(base.format(**ok), {"X": X, "Y": _col(y[:19])}, "l2svm: X and Y must have the same number of rows")
    _stop(base.format(**ok), {"X": X, "Y": np.ones((20, 2))}, "l2svm: Y must have exactly one column")
    _stop(base.format(**ok), {"X": X, "Y": np.ones((20, 1))}, "l2svm: Y must contain two distinct labels")
    _stop(base.format(**ok), {"X": X, "Y": _col(np.arange(20) % 3)}, "l2svm: Y must contain exactly two distinct labels")
    _stop(base.format(**{**ok, "e": -1.0}), {"X": X, "Y": _col(y)}, "l2svm: epsilon must be non-negative")
    _stop(base.format(**{**ok, "r": -1.0}), {"X": X, "Y": _col(y)}, "l2svm: reg must be non-negative")
    _stop(base.format(**{**ok, "mi": 0}), {"X": X, "Y": _col(y)}, "l2svm: maxIterations must be a positive integer")


def test_l2svm_predict_matches_numpy_and_systemds():
    X, y = _svm_data(n=80)
    w_icpt = _svc_ref(X, y, 1.0, True)
    W3 = np.random.default_rng(2).normal(size=(X.shape[1] + 1, 3))  # e.g. a one-vs-rest model
    text = ("[R1, Y1] = l2svmPredict(X=X, W=W1, verbose=FALSE)\n[R2, Y2] = l2svmPredict(X=X, W=W2, verbose=FALSE)\n"
            "[R3, Y3] = l2svmPredict(X=X, W=W3, verbose=TRUE)")
    inputs = {"X": X, "W1": w_icpt[:-1], "W2": w_icpt, "W3": W3}
    outs = ["R1", "Y1", "R2", "Y2", "R3", "Y3"]
    r, out = run_lib(text, inputs, outs)
    _close(r["R1"], X @ w_icpt[:-1], rtol=1e-13)
    _close(r["R2"], X @ w_icpt[:-1] + w_icpt[-1], rtol=1e-13)
    _close(r["Y1"], np.ones((80, 1)), rtol=0)  # one model column: rowIndexMax is 1 everywhere (as SystemDS)
    _close(r["Y2"], np.ones((80, 1)), rtol=0)
    R3 = X @ W3[:-1] + W3[-1]
    _close(r["R3"], R3, rtol=1e-13)
    _close(r["Y3"], _col(R3.argmax(1) + 1), rtol=0)
    assert out.strip() == f"l2svmPredict: 80 rows, 3 model column(s), {int((R3 > 0).sum())} positive scores"
    # the binary class is the sign of the raw score: agrees with sklearn's decision
    sk = LinearSVC(C=0.5, dual=False, tol=1e-14, intercept_scaling=1.0).fit(X, y)
    np.testing.assert_array_equal(np.where(r["R2"].ravel() > 0, 1.0, -1.0), sk.predict(X))
    s, _ = run_sds(text, inputs, outs)
    for name in outs:
        _close(r[name], s[name], rtol=1e-14)


def test_l2svm_predict_errors_and_single_row():
    r, _ = run_lib("[R, Y] = l2svmPredict(X=X, W=W, verbose=FALSE)", {"X": np.array([[1.0, 2.0]]),
                   "W": _col([0.5, -1.0, 3.0])}, ["R", "Y"])
    _close(r["R"], [[1.5]], rtol=1e-15)
    _stop("[R, Y] = l2svmPredict(X=X, W=W, verbose=FALSE)", {"X": np.ones((3, 2)), "W": np.ones((5, 1))},
          r"l2svmPredict: W has 5 rows, expected ncol\(X\)=2 \(no intercept\) or 3 \(intercept\)")


# ---------------------------------------------------------------- multiLogReg / multiLogRegPredict

@pytest.mark.parametrize("icpt", [0, 1, 2])
@pytest.mark.parametrize("reg", [1.0, 0.0])
def test_multilogreg_matches_exact_newton(icpt, reg):
    X, Y = _mlr_data()
    text = "B = multiLogReg(X=X, Y=Y, icpt=icpt, tol=1e-12, reg=reg, maxi=100, maxii=0, verbose=FALSE)"
    r, out = run_lib(text, {"X": X, "Y": Y, "icpt": icpt, "reg": reg}, ["B"])
    assert out == ""
    ref = _mlr_ref(X, Y, reg, icpt)
    assert r["B"].shape == ((4, 2) if icpt == 0 else (5, 2))
    _close(r["B"], ref)


def test_multilogreg_unpenalised_probabilities_match_sklearn():
    # reg = 0: the maximum-likelihood probabilities do not depend on the parametrisation (baseline vs symmetric)
    X, Y = _mlr_data(n=300, m=3, k=4, seed=8)
    text = ("B = multiLogReg(X=X, Y=Y, icpt=2, tol=1e-12, reg=0, maxi=100, maxii=0, verbose=FALSE)\n"
            "[M, yhat, acc] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=FALSE)")
    r, _ = run_lib(text, {"X": X, "Y": Y}, ["B", "M", "yhat", "acc"])
    sk = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(X, Y.ravel())
    _close(r["M"], sk.predict_proba(X), rtol=1e-6)  # sklearn's lbfgs stops at ~1e-8 in the probabilities
    np.testing.assert_array_equal(r["yhat"].ravel(), sk.predict(X))
    assert r["acc"] == pytest.approx(100 * accuracy_score(Y.ravel(), sk.predict(X)))


def test_multilogreg_binary_case_is_logistic_regression_with_sigmoid():
    # k = 2: P(class 1) = sigmoid(x b + b0)
    X, Y = _mlr_data(n=150, m=3, k=2, seed=4)
    text = ("B = multiLogReg(X=X, Y=Y, icpt=1, tol=1e-12, reg=0, maxi=100, maxii=0, verbose=FALSE)\n"
            "[M, yhat, acc] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=FALSE)\n"
            "p1 = sigmoid(X %*% B[1:3, ] + as.scalar(B[4, 1]))")
    r, _ = run_lib(text, {"X": X, "Y": Y}, ["B", "M", "p1"])
    sk = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(X, Y.ravel())
    # sklearn models P(class 2); our baseline is class 2, so our betas are the negated sklearn ones
    _close(r["B"], -np.r_[sk.coef_.ravel(), sk.intercept_][:, None], rtol=1e-6)
    _close(r["p1"], r["M"][:, :1], rtol=1e-14)


def test_multilogreg_labels_zero_and_negative_are_the_baseline():
    X, Y = _mlr_data(n=120, m=3, k=3, seed=2)
    Y0 = np.where(Y == 3, 0.0, Y)
    Yneg = np.where(Y == 3, -1.0, Y)
    text = "B = multiLogReg(X=X, Y=Y, icpt=2, tol=1e-12, reg=1, maxi=100, maxii=0, verbose=FALSE)"
    ref, _ = run_lib(text, {"X": X, "Y": Y}, ["B"])
    for Yalt in (Y0, Yneg):
        r, _ = run_lib(text, {"X": X, "Y": Yalt}, ["B"])
        _close(r["B"], ref["B"], rtol=1e-14)


@pytest.mark.parametrize("icpt", [0, 2])
def test_multilogreg_portability_converged(icpt):
    X, Y = _mlr_data(n=200, m=3, k=3, seed=6)
    text = f"B = multiLogReg(X=X, Y=Y, icpt={icpt}, tol=1e-10, reg=0.5, maxi=200, maxii=0, verbose=FALSE)"
    r, _ = run_lib(text, {"X": X, "Y": Y}, ["B"])
    s, _ = run_sds(text, {"X": X, "Y": Y}, ["B"])
    _close(r["B"], s["B"], rtol=1e-7)  # ours reaches 1e-14 of the optimum, SystemDS ~2e-8 (fixed 0.1 CG forcing)


def test_multilogreg_default_settings_vs_systemds():
    X, Y = _mlr_data()
    text = "B = multiLogReg(X=X, Y=Y)\n[M, yhat, acc] = multiLogRegPredict(X=X, B=B, Y=Y)"
    r, rout = run_lib(text, {"X": X, "Y": Y}, ["B", "M", "yhat", "acc"])
    s, _ = run_sds(text, {"X": X, "Y": Y}, ["B", "M", "yhat", "acc"])
    ref = _mlr_ref(X, Y, 1.0, 2)
    # tol=1e-6 on the relative gradient norm: ours ends 6e-10 from the optimum, SystemDS 6e-7
    _close(r["B"], ref, rtol=1e-8)
    _close(s["B"], ref, rtol=1e-5)
    _close(r["M"], s["M"], rtol=1e-5)
    np.testing.assert_array_equal(r["yhat"], s["yhat"])
    assert r["acc"] == s["acc"]
    assert "multiLogReg: n=240 features=4 classes=3 icpt=2" in rout  # verbose defaults to TRUE
    assert "multiLogReg: finished after" in rout


def test_multilogreg_edges():
    X, Y = _mlr_data(n=120, m=3, k=3, seed=3)
    text = "B = multiLogReg(X=X, Y=Y, icpt=icpt, tol=1e-12, reg=1, maxi=100, maxii=0, verbose=FALSE)"
    # one feature
    r, _ = run_lib(text, {"X": X[:, :1], "Y": Y, "icpt": 2}, ["B"])
    _close(r["B"], _mlr_ref(X[:, :1], Y, 1.0, 2))
    # a constant (non-zero) column under icpt=2 is centred to zero: coefficient 0, model as without it
    Xc = np.hstack([X[:, :1], np.full((120, 1), 7.0), X[:, 1:]])
    r, _ = run_lib(text, {"X": Xc, "Y": Y, "icpt": 2}, ["B"])
    _close(r["B"][1], np.zeros(2), rtol=0)
    _close(np.delete(r["B"], 1, axis=0), _mlr_ref(X, Y, 1.0, 2))
    # an all-zero column without intercept: coefficient 0
    Xz = np.hstack([X, np.zeros((120, 1))])
    r, _ = run_lib(text, {"X": Xz, "Y": Y, "icpt": 0}, ["B"])
    _close(r["B"][3], np.zeros(2), rtol=0)
    _close(r["B"][:3], _mlr_ref(X, Y, 1.0, 0))
    # missing values are replaced by 0 (and reported when verbose)
    Xn = X.copy()
    Xn[[3, 10], [0, 2]] = np.nan
    Xf = np.nan_to_num(Xn)
    r, out = run_lib(text.replace("verbose=FALSE", "verbose=TRUE"), {"X": Xn, "Y": Y, "icpt": 1}, ["B"])
    assert "multiLogReg: X contains 2 missing values, replacing with 0" in out
    _close(r["B"], _mlr_ref(Xf, Y, 1.0, 1))


def test_multilogreg_verbose_output():
    X, Y = _mlr_data(n=60, m=2, k=3)
    _, out = run_lib("B = multiLogReg(X=X, Y=Y, icpt=2, tol=1e-6, reg=1, maxi=3, maxii=20, verbose=TRUE)",
                     {"X": X, "Y": Y}, ["B"])
    lines = out.strip().splitlines()
    assert lines[0].startswith(f"multiLogReg: n=60 features=2 classes=3 icpt=2 reg=1.0; initial objective={60 * np.log(3)}")
    assert lines[1].startswith("multiLogReg: iter 1: CG steps=")
    assert "gradient norm=" in lines[1] and "trust radius=" in lines[1]
    assert lines[-1].startswith("multiLogReg: finished after 3 iterations")


def test_multilogreg_errors():
    X, Y = _mlr_data(n=30, m=2)
    base = "B = multiLogReg(X=X, Y=Y, icpt={i}, tol=1e-6, reg={r}, maxi=100, maxii=20, verbose=FALSE)"
    _stop(base.format(i=2, r=1), {"X": X, "Y": Y[:29]}, "multiLogReg: X and Y must have the same number of rows")
    _stop(base.format(i=2, r=1), {"X": X, "Y": np.ones((30, 2))}, "multiLogReg: Y must be a column vector")
    _stop(base.format(i=3, r=1), {"X": X, "Y": Y}, "multiLogReg: icpt must be 0, 1 or 2")
    _stop(base.format(i=2, r=-1), {"X": X, "Y": Y}, "multiLogReg: reg must be non-negative")
    _stop(base.format(i=2, r=1), {"X": X, "Y": np.ones((30, 1))}, "multiLogReg: need at least two classes")
    _stop(base.format(i=2, r=1), {"X": X, "Y": Y + 0.5}, "multiLogReg: labels in Y must be integers")


def test_multilogreg_predict_matches_numpy_and_systemds():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(50, 3))
    B = rng.normal(size=(4, 3))  # 4 classes, intercept row
    Y = _col(rng.integers(1, 5, size=50))
    text = ("[M, p, a] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=TRUE)\n"
            "[M0, p0, a0] = multiLogRegPredict(X=X, B=B0, Y=Y, verbose=FALSE)")
    inputs = {"X": X, "B": B, "B0": B[:3], "Y": Y}
    outs = ["M", "p", "a", "M0", "p0", "a0"]
    r, out = run_lib(text, inputs, outs)
    M = _softmax_base(X @ B[:3] + B[3])
    _close(r["M"], M, rtol=1e-13)
    _close(r["p"], _col(M.argmax(1) + 1), rtol=0)
    assert r["a"] == pytest.approx(100 * accuracy_score(Y.ravel(), M.argmax(1) + 1))
    assert out.strip() == f"multiLogRegPredict: accuracy (%): {r['a']}"
    _close(r["M0"], _softmax_base(X @ B[:3]), rtol=1e-13)
    s, _ = run_sds(text, inputs, outs)
    for name in outs:
        _close(r[name], s[name], rtol=1e-13)


def test_multilogreg_predict_edges_and_errors():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(20, 2))
    B = rng.normal(size=(3, 2)) * 1000  # huge linear terms: naive exp overflows, softmax here does not
    text = "[M, p, a] = multiLogRegPredict(X=X, B=B, verbose=FALSE)"
    r, out = run_lib(text, {"X": X, "B": B}, ["M", "p", "a"])
    assert out == "" and r["a"] == 0.0  # no labels given
    assert np.isfinite(r["M"]).all()
    _close(r["M"], _softmax_base(X @ B[:2] + B[2]), rtol=1e-12)
    # labels <= 0 denote the baseline class ncol(B)+1 = 3
    yhat = r["p"].ravel()
    Y0 = np.where(yhat == 3, 0.0, yhat)
    r2, _ = run_lib("[M, p, a] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=FALSE)", {"X": X, "B": B, "Y": _col(Y0)},
                    ["a"])
    assert r2["a"] == 100.0
    # single row
    r3, _ = run_lib("[M, p, a] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=FALSE)",
                    {"X": X[:1], "B": B, "Y": _col(yhat[:1])}, ["M", "a"])
    assert r3["M"].shape == (1, 3) and r3["a"] == 100.0
    _stop(text, {"X": X, "B": np.ones((5, 2))}, r"multiLogRegPredict: B has 5 rows, expected ncol\(X\)=2")
    _stop("[M, p, a] = multiLogRegPredict(X=X, B=B, Y=Y, verbose=FALSE)", {"X": X, "B": B, "Y": _col([1, 2])},
          "multiLogRegPredict: Y must have one label per row of X")
