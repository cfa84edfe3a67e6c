"""Tests of the local kernels against NumPy references and against outputs observed on the real
SystemDS 3.4 jar (the literal expected values marked "SystemDS:" were produced by running the
corresponding DML there)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from lafuse.errors import DMLRuntimeError
from lafuse.lang.builtins import SPECS
from lafuse.runtime.local.kernels import KERNELS as K
from lafuse.runtime.values import ListValue

NAN = math.nan
INF = math.inf


def D(x):
    return x.toarray() if sp.issparse(x) else np.asarray(x)


def col(*v):
    return np.array(v, dtype=float).reshape(-1, 1)


def row(*v):
    return np.array(v, dtype=float).reshape(1, -1)


def assert_same(a, b):
    np.testing.assert_array_equal(D(a), D(b))


def sprand(m, n, density, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    S = sp.random_array((m, n), density=density, format="csr", rng=rng, data_sampler=lambda size: rng.uniform(-2, 2, size))
    S = sp.csr_array(S, dtype=np.float64)
    if nan and S.nnz > 3:
        S.data[0] = NAN
        S.data[1] = INF
        S.data[2] = -INF
    return S


def dense_special(m, n, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-3, 3, (m, n))
    A[rng.random((m, n)) < 0.2] = 0.0
    if m * n >= 4:
        A.flat[0] = NAN
        A.flat[1] = INF
        A.flat[2] = -INF
    return A


# ----------------------------------------------------------------------------- coverage

EXTERNAL = {"print", "stop", "assert", "time", "list", "read", "write", "exists", "toString", "as.frame", "as.list"}


def test_every_builtin_has_a_kernel():
    missing = [n for n in SPECS if n not in EXTERNAL and n not in K]
    assert missing == []
    for op in ("+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "%*%", "u-",
               "!", "rix", "lix", "lrix"):
        assert op in K


# ------------------------------------------------------------------- dense binary operators

REF = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
    "<": lambda a, b: (a < b).astype(float), "<=": lambda a, b: (a <= b).astype(float),
    ">": lambda a, b: (a > b).astype(float), ">=": lambda a, b: (a >= b).astype(float),
    "==": lambda a, b: (a == b).astype(float), "!=": lambda a, b: (a != b).astype(float),
    "&": lambda a, b: ((a != 0) & (b != 0)).astype(float), "|": lambda a, b: ((a != 0) | (b != 0)).astype(float),
    "min": np.minimum, "max": np.maximum,
}
SHAPES = [((4, 3), (4, 3)), ((4, 3), (1, 3)), ((4, 3), (4, 1)), ((4, 3), (1, 1)), ((1, 3), (4, 3)),
          ((4, 1), (4, 3)), ((1, 1), (4, 3)), ((0, 0), (0, 0)), ((0, 3), (0, 3)), ((0, 3), (1, 3)),
          ((1, 1), (1, 1)), ((1, 5), (1, 5)), ((5, 1), (5, 1))]


def _kern(op):
    return K[op] if op in K else (lambda a, b: K[op](a, b))


@pytest.mark.parametrize("op", sorted(REF))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_dense_binary_matches_numpy(op, sa, sb):
    a = dense_special(*sa, seed=1)
    b = dense_special(*sb, seed=2)
    f = K[op]
    with np.errstate(all="ignore"):
        ref = REF[op](a, b)
    out = f(a, b)
    assert out.shape == ref.shape
    assert_same(out, ref)
    assert D(a).shape == sa  # inputs untouched
    # matrix-scalar both ways
    with np.errstate(all="ignore"):
        assert_same(f(a, 1.5), REF[op](a, 1.5))
        assert_same(f(-2, a), REF[op](-2.0, a))


def test_dense_arith_fast_path_returns_plain_ndarray():
    a = np.arange(12.0).reshape(3, 4)
    for op in ("+", "-", "*", "/"):
        r = K[op](a, a)
        assert type(r) is np.ndarray and r.dtype == np.float64
    assert_same(K["/"](a, a)[0], [NAN, 1, 1, 1])


def test_outer_combination_of_vectors_is_rejected():
    with pytest.raises(DMLRuntimeError, match="Block sizes are not matched"):
        K["+"](col(1, 2, 3), row(1, 2))
    with pytest.raises(DMLRuntimeError):
        K["*"](np.ones((2, 2)), np.ones((3, 3)))
    with pytest.raises(DMLRuntimeError):
        K["+"](np.ones((2, 2)), "x")


def test_pow_follows_java_math_pow():
    a = row(1, -1, 2, 0, -8, NAN)
    out = D(K["^"](a, NAN))
    assert np.isnan(out).all()  # Java: NaN exponent always gives NaN
    assert_same(K["^"](a, INF), [[NAN, NAN, INF, 0, INF, NAN]])
    assert_same(K["^"](a, 0), np.ones((1, 6)))
    assert_same(K["^"](row(-8), 1 / 3), [[NAN]])
    assert_same(K["^"](row(0), -1), [[INF]])
    assert K["^"](1, NAN) != K["^"](1, NAN)
    assert K["^"](2, 3) == 8.0 and isinstance(K["^"](2, 3), float)
    assert K["^"](0, -1) == INF
    assert math.isnan(K["^"](-8, 1 / 3))
    b = row(NAN, INF, 2)
    assert_same(K["^"](row(1, 1, 3), b), [[NAN, NAN, 9]])
    # Java (and libm, which the generated kernels call): (-Inf)^0.5 = +Inf and (-0)^0.5 = +0, where
    # NumPy's square-root shortcut gives NaN and -0 (found by the fused-vs-unfused property test)
    half = D(K["^"](row(-INF, -0.0, 4), 0.5))
    assert_same(half, [[INF, 0, 2]])
    assert math.copysign(1.0, half[0, 1]) == 1.0
    assert_same(K["^"](row(-INF, -INF), row(0.5, 2)), [[INF, INF]])
    assert K["^"](-INF, 0.5) == INF and math.copysign(1.0, K["^"](-0.0, 0.5)) == 1.0


def test_modulus_and_intdiv_follow_systemds():
    # SystemDS: X = (-7 7 -7.5 7.5 0 3)
    X = row(-7, 7, -7.5, 7.5, 0, 3)
    assert_same(K["%%"](X, 3), [[-1, 1, -1.5, 1.5, 0, 0]])
    assert_same(K["%%"](X, -3), [[-1, 1, -1.5, 1.5, 0, 0]])
    assert_same(K["%/%"](X, 2), [[-3, 3, -3, 3, 0, 1]])
    assert_same(K["%/%"](X, -2), [[3, -3, 3, -3, 0, -1]])
    assert np.isnan(D(K["%%"](X, 0))).all()
    assert_same(K["%/%"](X, 0), [[-INF, INF, -INF, INF, NAN, INF]])
    assert_same(K["%%"](X, 2.5), [[-2, 2, 0, 0, 0, 0.5]])
    assert_same(K["%%"](2.5, X), [[2.5, 2.5, 2.5, 2.5, NAN, 2.5]])
    # scalars (SystemDS outputs)
    assert K["%%"](-7, 3) == -1 and type(K["%%"](-7, 3)) is int
    assert K["%/%"](-7, 2) == -3 and type(K["%/%"](-7, 2)) is int
    assert K["%%"](7, -3) == 1 and K["%%"](-7, -3) == -1 and K["%/%"](7, -2) == -3
    assert K["%%"](-7.5, 2) == -1.5 and K["%/%"](-7.5, 2) == -3.0
    assert K["%%"](7.0, -3) == 1.0 and K["%%"](-7.0, 3) == -1.0
    assert K["%/%"](-7, 2.0) == -3.0 and type(K["%/%"](-7, 2.0)) is float
    assert K["%%"](7, 0) == 0
    assert math.isnan(K["%%"](7.5, 0)) and K["%/%"](-7.5, 0) == -INF
    assert math.isnan(K["%/%"](0.0, 0)) and math.isnan(K["%%"](0.0, 0))
    with pytest.raises(DMLRuntimeError, match="Integer operation created numerical result overflow"):
        K["%/%"](7, 0)
    assert math.isnan(K["%%"](5.0, INF))


# ------------------------------------------------------------------------- scalar typing

def test_scalar_value_types():
    assert K["+"](2, 3) == 5 and type(K["+"](2, 3)) is int
    assert type(K["*"](2, 3)) is int and type(K["-"](2, 3)) is int
    assert K["/"](3, 2) == 1.5 and type(K["/"](4, 2)) is float
    assert type(K["+"](2, 3.0)) is float
    assert K["+"](True, True) == 2.0 and type(K["+"](True, True)) is float
    assert K["+"](True, 1) == 2 and type(K["+"](True, 1)) is int
    assert K["<"](1, 2) is True and K[">="](1, 2.0) is False
    assert K["/"](7, 0) == INF and K["/"](-7, 0) == -INF and math.isnan(K["/"](0, 0))
    assert K["&"](True, False) is False and K["|"](0, 2.5) is True
    assert K["!"](True) is False and K["!"](0.0) is True
    assert K["u-"](3) == -3 and type(K["u-"](3)) is int and K["u-"](2.5) == -2.5
    assert K["max"](3, 4) == 4 and type(K["max"](3, 4)) is int
    assert K["max"](3, 4.0) == 4.0 and type(K["max"](3, 4.0)) is float
    assert K["max"](3, 2, 7, 1) == 7.0 and type(K["max"](3, 2, 7, 1)) is float  # SystemDS n-ary: DOUBLE
    assert math.isnan(K["max"](NAN, 2)) and math.isnan(K["min"](2, NAN))
    with pytest.raises(DMLRuntimeError, match="Integer operation created numerical result overflow"):
        K["*"](2**62, 4)


def test_string_concatenation_and_comparison():
    assert K["+"]("x", 1e-7) == "x1.0E-7"
    assert K["+"](1.5, "x") == "1.5x"
    assert K["+"](True, "x") == "TRUEx"
    assert K["+"](3, "x") == "3x"
    assert K["+"](K["+"]("x", 1e20), 123456789.0) == "x1.0E201.23456789E8"
    # SystemDS: a string comparison compares the string forms
    assert K["=="](1, "1") is True and K["=="](1.0, "1") is False and K["=="](1.0, "1.0") is True
    assert K["=="](True, "TRUE") is True and K["=="](True, "true") is False
    assert K["<"]("a", "b") is True and K["<"](2, "10") is False
    assert K["!="](1e-6, "L2") is True
    with pytest.raises(DMLRuntimeError, match="Arithmetic '-' not supported over string inputs"):
        K["-"]("a", "b")
    with pytest.raises(DMLRuntimeError, match="not supported over string inputs"):
        K["max"]("a", "b")
    assert K["append"]("a", "b") == "a\nb"


# ------------------------------------------------------------------------------ sparse ops

ALL_BIN = ["+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|"]


def _ref_binary(op, a, b):
    """Reference on dense data; '*' and '&' keep SystemDS's sparse-safe zeros."""
    return D(K[op](D(a) if not np.isscalar(a) else a, D(b) if not np.isscalar(b) else b))


@pytest.mark.parametrize("density,special", [(0.1, False), (1e-3, False), (0.1, True)])
@pytest.mark.parametrize("op", ALL_BIN)
def test_sparse_binary_matches_dense(op, density, special):
    S = sprand(200, 150, density, seed=3, nan=special)
    S2 = sprand(200, 150, density, seed=4, nan=special)
    Dn = np.random.default_rng(5).uniform(0.5, 2, (200, 150))
    rv = np.random.default_rng(6).uniform(0.5, 2, (1, 150))
    cv = np.random.default_rng(7).uniform(0.5, 2, (200, 1))
    for a, b in ((S, 2.0), (2.0, S), (S, 0.0), (S, S2), (S, Dn), (Dn, S), (S, rv), (S, cv), (S, np.full((1, 1), 3.0))):
        out = K[op](a, b)
        assert_same(out, _ref_binary(op, a, b))
    assert D(S).shape == (200, 150)


def test_sparse_safe_operations_stay_sparse():
    S = sprand(300, 200, 0.05, seed=1)
    Dn = np.random.default_rng(2).uniform(-1, 1, (300, 200))
    assert sp.issparse(K["*"](S, 2.0))
    assert sp.issparse(K["*"](S, Dn))
    assert sp.issparse(K["*"](Dn, S))
    assert sp.issparse(K["/"](S, 4.0))
    assert sp.issparse(K["^"](S, 2))
    assert sp.issparse(K["!="](S, 0))
    assert sp.issparse(K[">"](S, 0.5))
    assert sp.issparse(K["*"](S, np.ones((1, 200))))
    for f in ("abs", "sqrt", "round", "sign", "sin", "tan", "floor", "ceil", "u-"):
        r = K[f](S)
        assert sp.issparse(r), f
        with np.errstate(all="ignore"):
            assert_same(r, K[f](D(S)))
    assert sp.issparse(K["t"](S))
    assert not sp.issparse(K["+"](S, 1))
    assert not sp.issparse(K["exp"](S))
    assert not sp.issparse(K["=="](S, 0))
    assert_same(K["exp"](S), np.exp(D(S)))
    assert_same(K["cos"](S), np.cos(D(S)))


def test_sparse_multiply_ignores_nan_in_dense_operand_like_systemds():
    S = sp.csr_array(np.array([[0.0, 2.0], [0.0, 0.0]]))
    S = sp.csr_array(sp.block_array([[S, None], [None, sp.csr_array((40, 40))]]), dtype=float)
    Dn = np.full(S.shape, NAN)
    r = K["*"](S, Dn)
    assert D(r)[0, 0] == 0.0 and np.isnan(D(r)[0, 1])



def test_nnz_estimate_of_cost_hints():
    """The cost model's non-zero hints: exact below the sample size and for CSR (stored count),
    within a few percent for a large dense block (a strided sample of rows), never negative."""
    from lafuse.runtime.values import SAMPLE_CELLS, nnz, nnz_estimate

    rng = np.random.default_rng(3)
    small = rng.random((100, 10)) * (rng.random((100, 10)) < 0.3)
    assert nnz_estimate(small) == nnz(small)
    c = sp.csr_array(small)
    assert nnz_estimate(c) == nnz(c)
    big = rng.random((SAMPLE_CELLS // 50 + 7, 100)) * (rng.random((SAMPLE_CELLS // 50 + 7, 100)) < 0.4)
    assert abs(nnz_estimate(big) - nnz(big)) < 0.03 * nnz(big)
    # few non-zeros in the small sample: the 1-in-16 one decides, still near the exact count
    thin = rng.random(big.shape) * (rng.random(big.shape) < 0.002)
    assert abs(nnz_estimate(thin) - nnz(thin)) < 0.1 * nnz(thin)
    assert nnz_estimate(np.zeros((SAMPLE_CELLS, 2))) == 0.0
    assert nnz_estimate(np.zeros((0, 5))) == 0.0


def test_column_vectors_stay_dense_like_systemds():
    """SystemDS keeps a one-column matrix dense in memory whatever its sparsity
    (MatrixBlock.evalSparseFormatInMemory), so a zero of a mostly-zero column vector does not
    annihilate NaN in a product; a mostly-zero matrix of two columns is CSR and does."""
    from lafuse.formats import sparse_format
    from lafuse.runtime.values import as_matrix_value, choose_format

    assert not sparse_format(100_000, 1, 0) and sparse_format(50_000, 2, 0)
    v = np.zeros((5000, 1))
    v[3, 0] = 1.0
    assert not sp.issparse(choose_format(sp.csr_array(v))) and not sp.issparse(as_matrix_value(v))
    assert sp.issparse(choose_format(np.zeros((2500, 2))))
    x = np.random.default_rng(0).uniform(-1, 1, (5000, 1))
    x[7, 0] = NAN
    for op in (">", "=="):  # a comparison result of almost only zeros
        z = K[op](x, 2.0)
        assert not sp.issparse(z)
        assert np.isnan(D(K["*"](x, z))[7, 0])
    X2 = np.repeat(x, 2, axis=1)
    z2 = K[">"](X2, 2.0)
    assert sp.issparse(z2) and D(K["*"](X2, z2))[7, 0] == 0.0

def test_sparse_input_with_explicit_zeros_is_not_mutated():
    data = np.array([1.0, 0.0, 2.0])
    S = sp.csr_array((data, np.array([0, 1, 2]), np.array([0, 2, 3])), shape=(2, 3))
    before = (S.data.copy(), S.indices.copy(), S.indptr.copy())
    K["*"](S, 3.0)
    K[">"](S, 0.5)
    K["replace"](S, 2, 5)
    K["removeEmpty"](S, "rows")
    K["lix"](S, 7.0, 1, 1, 1, 1)
    for x, y in zip(before, (S.data, S.indices, S.indptr)):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------------- unary

def test_unary_math_and_systemds_rounding():
    X = row(2.5, -2.5, 0.5, -0.4, NAN, 1e300, -1e300, 0.49999999999999994, INF)
    assert_same(K["round"](X), [[3, -2, 1, 0, 0, 9.223372036854776e18, -9.223372036854776e18, 0, 9.223372036854776e18]])
    assert K["round"](-2.5) == -2.0 and K["round"](2.5) == 3.0 and K["round"](NAN) == 0.0
    assert K["round"](1e300) == 9.223372036854776e18
    assert K["ceil"](2.1) == 3.0 and K["floor"](-2.1) == -3.0
    # SystemDS prints abs(-3) as 3.0 and sign(5) as 1.0: they are DOUBLE
    assert K["abs"](-3) == 3.0 and type(K["abs"](-3)) is float
    assert K["sign"](5) == 1.0 and math.isnan(K["sign"](NAN))
    assert math.copysign(1, K["sign"](-0.0)) < 0
    assert K["isNaN"](NAN) == 1.0 and K["isNaN"](3) == 0.0 and K["isNA"](NAN) == 1.0 and K["isInf"](-INF) == 1.0
    assert_same(K["isNaN"](row(1, NAN)), [[0, 1]])
    assert math.isnan(K["sqrt"](-1)) and K["sqrt"](4) == 2.0 and K["exp"](0) == 1.0
    assert K["log"](0) == -INF and math.isnan(K["log"](-1))
    assert K["log"](8.0, 2) == pytest.approx(3.0)
    assert K["log"](5, 2) == pytest.approx(math.log(5) / math.log(2)) and type(K["log"](5, 2)) is float
    assert_same(K["log"](row(8, 0, 1), 0), [[-0.0, NAN, -0.0]])
    assert_same(K["!"](row(1, 0, NAN)), [[0, 1, 0]])
    A = dense_special(5, 4)
    with np.errstate(all="ignore"):
        for f, ref in (("exp", np.exp), ("sqrt", np.sqrt), ("abs", np.abs), ("tanh", np.tanh), ("asin", np.arcsin)):
            assert_same(K[f](A), ref(A))


# ---------------------------------------------------------------------------- aggregates

@pytest.mark.parametrize("kind", ["dense", "sparse0.1", "sparse0.001", "nan", "sparse-nan"])
def test_full_and_rowcol_aggregates(kind):
    if kind == "dense":
        X = np.random.default_rng(1).uniform(-2, 2, (60, 40))
    elif kind == "nan":
        X = dense_special(60, 40)
    elif kind == "sparse-nan":
        X = sprand(300, 200, 0.01, seed=2, nan=True)
    else:
        X = sprand(300, 200, float(kind[6:]), seed=2)
    A = D(X)
    with np.errstate(all="ignore"):
        assert K["sum"](X) == pytest.approx(np.sum(A), nan_ok=True, rel=1e-12)
        assert K["mean"](X) == pytest.approx(np.mean(A), nan_ok=True, rel=1e-12)
        assert K["max"](X) == pytest.approx(np.max(A), nan_ok=True)
        assert K["min"](X) == pytest.approx(np.min(A), nan_ok=True)
        assert K["prod"](X) == pytest.approx(np.prod(A), nan_ok=True)
        assert K["var"](X) == pytest.approx(np.var(A, ddof=1), nan_ok=True, rel=1e-10)
        assert K["sd"](X) == pytest.approx(np.std(A, ddof=1), nan_ok=True, rel=1e-10)
        checks = {
            "rowSums": A.sum(1, keepdims=True), "colSums": A.sum(0, keepdims=True),
            "rowMeans": A.mean(1, keepdims=True), "colMeans": A.mean(0, keepdims=True),
            "rowMaxs": A.max(1, keepdims=True), "colMaxs": A.max(0, keepdims=True),
            "rowMins": A.min(1, keepdims=True), "colMins": A.min(0, keepdims=True),
            "rowProds": A.prod(1, keepdims=True), "colProds": A.prod(0, keepdims=True),
            "rowVars": A.var(1, ddof=1, keepdims=True), "colVars": A.var(0, ddof=1, keepdims=True),
            "rowSds": A.std(1, ddof=1, keepdims=True), "colSds": A.std(0, ddof=1, keepdims=True),
            "cumsum": np.cumsum(A, 0), "cumprod": np.cumprod(A, 0),
            "cummin": np.minimum.accumulate(A, 0), "cummax": np.maximum.accumulate(A, 0),
        }
    for name, ref in checks.items():
        out = D(K[name](X))
        assert out.shape == ref.shape, name
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12, err_msg=name)


def test_aggregates_on_empty_and_tiny_matrices():
    E = np.zeros((0, 0))
    assert K["sum"](E) == 0.0 and math.isnan(K["mean"](E)) and K["max"](E) == -INF and K["min"](E) == INF
    assert K["prod"](E) == 1.0 and math.isnan(K["var"](E)) and K["trace"](E) == 0.0
    with pytest.raises(DMLRuntimeError, match=r"Invalid input dimensions \(0x0\) to sort operation"):
        K["median"](E)
    Z = np.zeros((0, 3))
    assert_same(K["colSums"](Z), np.zeros((1, 3)))
    assert_same(K["colMaxs"](Z), np.zeros((1, 3)))  # SystemDS: zeros, not -Inf
    assert_same(K["colMeans"](Z), np.zeros((1, 3)))
    assert K["rowSums"](Z).shape == (0, 1)
    W = np.zeros((3, 0))
    for name in ("rowVars", "rowMeans", "rowMaxs", "rowProds", "rowIndexMax"):
        assert_same(K[name](W), np.zeros((3, 1)))
    one = np.full((1, 1), 7.0)
    assert K["var"](one) == 0.0 and K["sd"](one) == 0.0  # SystemDS: single cell gives 0
    assert_same(K["rowVars"](one), [[0.0]])
    assert_same(K["colVars"](np.array([[1.0, 2], [3, 4]])), [[2, 2]])
    np.testing.assert_allclose(K["rowSds"](np.array([[1.0, 2], [3, 5]])), [[0.7071067811865476], [1.4142135623730951]])
    with pytest.raises(DMLRuntimeError):
        K["trace"](np.ones((2, 3)))


def test_row_index_max_min_last_tie_and_nan():
    # SystemDS outputs
    X = np.array([[1, NAN, 3], [3, 2, 3], [0, 0, 0], [-1, -5, -1]])
    assert_same(K["rowIndexMax"](X), col(3, 3, 3, 3))
    assert_same(K["rowIndexMin"](X), col(1, 2, 3, 2))
    Y = np.array([[NAN, 1, 3], [1, 3, NAN], [NAN, NAN, NAN], [3, NAN, 1], [-1, NAN, -3]])
    assert_same(K["rowIndexMax"](Y), col(3, 2, 1, 1, 1))
    assert_same(K["rowIndexMin"](Y), col(2, 1, 1, 3, 3))
    Z = np.array([[1, 0, 0], [0, 0, 0], [3, 0, 4]])
    assert_same(K["rowIndexMax"](Z), col(1, 3, 3))
    assert_same(K["rowIndexMin"](Z), col(3, 3, 2))
    S = sprand(400, 50, 0.02, seed=9)
    assert_same(K["rowIndexMax"](S), K["rowIndexMax"](D(S)))
    assert_same(K["rowIndexMin"](S), K["rowIndexMin"](D(S)))
    assert_same(K["rowIndexMax"](np.array([[-INF, NAN]])), [[1]])


def test_cumulative_and_nan_propagation():
    X = np.array([[1, NAN, 3], [3, 2, 3], [0, 0, 0], [-1, -5, -1]])
    assert_same(K["cummax"](X), [[1, NAN, 3], [3, NAN, 3], [3, NAN, 3], [3, NAN, 3]])
    assert_same(K["cummin"](X), [[1, NAN, 3], [1, NAN, 3], [0, NAN, 0], [-1, NAN, -1]])
    assert_same(K["cumsum"](X), [[1, NAN, 3], [4, NAN, 6], [4, NAN, 6], [3, NAN, 5]])
    assert_same(K["cumprod"](X), [[1, NAN, 3], [3, NAN, 9], [0, NAN, 0], [0, NAN, 0]])
    assert math.isnan(K["max"](X)) and math.isnan(K["min"](X))
    assert_same(K["colMaxs"](X), [[3, NAN, 3]])
    # SystemDS: cumsum accumulates sequentially without compensation
    assert_same(K["cumsum"](col(1e16, 1, -1e16, 1)), col(1e16, 1e16, 0, 1))
    assert K["sum"](col(1e16, 1, -1e16, 1)) == 1.0


def test_min_max_elementwise_overloads():
    a, b = row(1, 5), row(3, 2)
    assert_same(K["max"](a, b, 4), [[4, 5]])
    assert_same(K["min"](row(1, 5, NAN), 2), [[1, 2, NAN]])
    assert_same(K["max"](1, row(0, 3)), [[1, 3]])
    S = sprand(100, 100, 0.05, seed=3)
    assert_same(K["max"](S, 0), np.maximum(D(S), 0))
    assert_same(K["min"](S, S), D(S))


def test_quantile_and_median_follow_systemds():
    X = col(5, 1, 3, 2, 4)
    assert [K["quantile"](X, p) for p in (0.5, 0.25, 0.2, 0.21, 0.0, 1.0)] == [3, 2, 1, 2, 1, 5]
    assert_same(K["quantile"](X, col(0.1, 0.5, 0.9)), col(1, 3, 5))
    assert K["median"](X) == 3.0
    Y = col(5, 1, 3, 2)
    assert [K["quantile"](Y, p) for p in (0.5, 0.25, 0.75, 0.3, 0.0, 1.0)] == [2.5, 1.5, 4.0, 2.5, 1.0, 5.0]
    assert_same(K["quantile"](Y, col(0.25, 0.5, 0.75)), col(1, 2, 3))  # no averaging for a p vector
    assert K["median"](Y) == 2.5
    assert K["median"](col(5, 1, 3, 2, 2, 2)) == 2.0
    assert K["quantile"](Y, 0.5, col(1, 2, 1, 1)) == 2.0
    assert K["quantile"](Y, 0.5, col(1, 2, 3, 4)) == 2.0
    assert K["quantile"](Y, col(1, 2, 1, 1), 0.5) == 2.0  # SystemDS positional order quantile(X, W, p)
    with pytest.raises(DMLRuntimeError, match="one-dimensional"):
        K["quantile"](np.ones((3, 2)), 0.5)
    with pytest.raises(DMLRuntimeError, match="expected to be integers"):
        K["quantile"](Y, 0.5, col(1, 1.5, 1, 1))
    with pytest.raises(DMLRuntimeError, match=r"\(2x2\)"):
        K["median"](np.ones((2, 2)))


# ------------------------------------------------------------------ table and aggregate

def test_table_semantics():
    A, B = col(1, 2.7, 1.2, 3), col(1, 1, 2, 1)
    assert_same(K["table"](A, B), [[1, 1], [1, 0], [1, 0]])
    assert_same(K["table"](A, 2), [[0, 2], [0, 1], [0, 1]])
    assert_same(K["table"](A, B, 2.5), [[2.5, 2.5], [2.5, 0], [2.5, 0]])
    assert_same(K["table"](A, B, col(1, 2, 3, 4)), [[1, 3], [2, 0], [4, 0]])
    assert_same(K["table"](A, B, None, 2, 1), [[1], [1]])  # out-of-range entries dropped
    assert_same(K["table"](A, B, None, 5, 3), [[1, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]])
    assert_same(K["table"](A, B, col(1, 2, 3, 4), 2, 2), [[1, 3], [2, 0]])
    assert_same(K["table"](A, B, 2, 1), [[1], [1]])  # positional table(A, B, nr, nc)
    assert_same(K["table"](col(1, NAN, 3), col(1, 1, 1)), col(1, 0, 1))
    assert_same(K["table"](col(1, 1, 2), 1, col(1, NAN, 2)), col(1, 2))
    with pytest.raises(DMLRuntimeError, match=r"one of the value <= zero\): 0.0 1.0"):
        K["table"](col(1, 2, 0, 3), col(1, 1, 1, 1))
    with pytest.raises(DMLRuntimeError, match=r"0.5 1.0"):
        K["table"](col(0.5, 1, 2), 1)
    with pytest.raises(DMLRuntimeError, match="Mismatch in matrix dimensions"):
        K["table"](col(1, 2, 3), col(1, 1))
    n = 5000
    perm = np.random.default_rng(0).permutation(n) + 1.0
    T = K["table"](np.arange(1.0, n + 1).reshape(-1, 1), perm.reshape(-1, 1))
    assert sp.issparse(T) and T.shape == (n, n) and T.nnz == n
    assert_same(T @ np.arange(1.0, n + 1).reshape(-1, 1), perm.reshape(-1, 1))


def test_aggregate_semantics():
    X, G = col(1, 2, 3, 4, 5, 6), col(1, 2, 1, 4, 4, 4)
    agg = K["aggregate"]
    assert_same(agg(X, G, "sum", None, None), col(4, 2, 0, 15))
    assert_same(agg(X, G, "count", None, None), col(2, 1, 0, 3))
    assert_same(agg(X, G, "mean", None, None), col(2, 2, 0, 5))
    assert_same(agg(X, G, "variance", None, None), col(2, 0, 0, 1))
    assert_same(agg(X, G, "min", None, None), col(1, 2, 0, 4))
    assert_same(agg(X, G, "max", 6, None), col(3, 2, 0, 6, 0, 0))
    assert_same(agg(X, G, "count", 6, None), col(2, 1, 0, 3, 0, 0))
    assert_same(agg(X, G, "sum", 2, None), col(4, 2))
    W = col(1, 1, 2, 1, 1, 1)
    assert_same(agg(X, G, "sum", None, W), col(7, 2, 0, 15))
    assert_same(agg(X, G, "count", None, W), col(3, 1, 0, 3))
    np.testing.assert_allclose(agg(X, G, "mean", None, W), col(7 / 3, 2, 0, 5))
    np.testing.assert_allclose(agg(X, G, "variance", None, W), col(4 / 3, 0, 0, 1))
    X2 = np.arange(1.0, 13).reshape(6, 2)
    assert_same(agg(X2, G, "sum", 4, None), [[6, 8], [3, 4], [0, 0], [27, 30]])
    assert_same(agg(col(1, 2, 3, 4, 5, 6), col(1, 2, 1.5, 4, 4, 4), "sum", None, None), col(4, 2, 0, 15))
    Xn = col(1, 2, 3, NAN, 5, 6)
    out = agg(Xn, G, "sum", 4, None)
    assert out[0, 0] == 4 and np.isnan(out[3, 0])
    assert_same(agg(Xn, G, "count", 4, None), col(2, 1, 0, 3))
    with pytest.raises(DMLRuntimeError, match=r"Invalid value \(0.0\) encountered in 'groups'"):
        agg(X, col(1, 2, 0, 4, 4, 4), "sum", None, None)
    with pytest.raises(DMLRuntimeError, match="without specified numgroups"):
        agg(X2, G, "sum", None, None)
    with pytest.raises(DMLRuntimeError, match="must be either"):
        agg(X, G, "median", None, None)
    with pytest.raises(DMLRuntimeError, match="same dimensions"):
        agg(col(1, 2, 3, 4), G, "sum", 4, None)


# ------------------------------------------------------------------------------- reorg

def test_order_is_stable_with_nan_placement():
    X = np.array([[3, 1], [2, 1], [1, 5], [3, 0], [2, 2], [NAN, 7]])
    o = K["order"]
    assert_same(o(X, 1, False, False), [[1, 5], [2, 1], [2, 2], [3, 1], [3, 0], [NAN, 7]])
    assert_same(o(X, 1, True, False), [[NAN, 7], [3, 1], [3, 0], [2, 1], [2, 2], [1, 5]])
    assert_same(o(X, 1, False, True), col(3, 2, 5, 1, 4, 6))
    assert_same(o(X, 1, True, True), col(6, 1, 4, 2, 5, 3))
    assert_same(o(X, 2, False, True), col(4, 1, 2, 5, 3, 6))
    with pytest.raises(DMLRuntimeError, match=r"invalid orderby columns: \[3\] \(6x2 input\)"):
        o(X, 3, False, False)
    S = sprand(300, 5, 0.2, seed=4)
    assert_same(o(S, 2, True, False), o(D(S), 2, True, False))
    assert_same(o(X, row(2, 1), False, True), col(4, 2, 1, 5, 3, 6))


def test_remove_empty():
    X = np.array([[1, 0, 0], [0, 0, 0], [3, 0, 4]], dtype=float)
    re = K["removeEmpty"]
    assert_same(re(X, "rows", None, True), [[1, 0, 0], [3, 0, 4]])
    assert_same(re(X, "cols", None, True), [[1, 0], [0, 0], [3, 4]])
    assert_same(re(X, "rows", col(1, 1, 0), True), [[1, 0, 0], [0, 0, 0]])
    assert_same(re(X, "cols", row(0, 1, 1), True), [[0, 0], [0, 0], [0, 4]])
    assert_same(re(X, "rows", row(2, -1, 0), True), [[1, 0, 0], [0, 0, 0]])
    Z = np.zeros((3, 3))
    assert_same(re(Z, "rows", None, True), np.zeros((1, 3)))
    assert_same(re(Z, "cols", None, True), np.zeros((3, 1)))
    assert re(Z, "rows", None, False).shape == (0, 3)
    assert re(Z, "cols", None, False).shape == (3, 0)
    assert_same(re(X, "rows", col(0, 0, 0), True), np.zeros((1, 3)))
    assert_same(re(row(NAN, 0), "cols", None, True), [[NAN]])
    S = sprand(500, 300, 0.001, seed=5)
    assert_same(re(S, "rows", None, True), D(S)[np.any(D(S) != 0, axis=1)])
    assert_same(re(S, "cols", None, True), D(S)[:, np.any(D(S) != 0, axis=0)])
    with pytest.raises(DMLRuntimeError):
        re(X, "diag", None, True)


def test_replace_and_contains():
    X = np.array([[1, NAN], [3, INF]])
    assert_same(K["replace"](X, NAN, 0), [[1, 0], [3, INF]])
    assert_same(K["replace"](X, INF, -1), [[1, NAN], [3, -1]])
    assert_same(K["replace"](X, 3, NAN), [[1, NAN], [NAN, INF]])
    S = sprand(200, 100, 0.01, seed=6, nan=True)
    assert_same(K["replace"](S, NAN, 9), np.where(np.isnan(D(S)), 9, D(S)))
    assert_same(K["replace"](S, 0, 5), np.where(D(S) == 0, 5, D(S)))
    assert K["contains"](X, NAN) is True and K["contains"](X, INF) is True
    assert K["contains"](X, -INF) is False and K["contains"](X, 3) is True and K["contains"](X, 0) is False
    assert K["contains"](np.zeros((2, 2)), 0) is True and K["contains"](X, 3.0000000001) is False
    assert K["contains"](S, 0) is True and K["contains"](S, NAN) is True


def test_tri_diag_rev_t_bind():
    X = np.arange(1.0, 10).reshape(3, 3)
    assert_same(K["lower.tri"](X, False, False), [[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    assert_same(K["lower.tri"](X, True, False), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert_same(K["lower.tri"](X, False, True), [[0, 0, 0], [4, 0, 0], [7, 8, 0]])
    assert_same(K["upper.tri"](X, True, True), [[1, 2, 3], [0, 5, 6], [0, 0, 9]])
    Y = np.arange(1.0, 7).reshape(2, 3)
    assert_same(K["upper.tri"](Y, False, True), [[0, 2, 3], [0, 0, 6]])
    assert_same(K["lower.tri"](Y, False, True), [[0, 0, 0], [4, 0, 0]])
    assert_same(K["diag"](col(1, 2, 3)), np.diag([1.0, 2, 3]))
    assert_same(K["diag"](np.array([[1.0, 2], [3, 4]])), col(1, 4))
    assert_same(K["diag"](np.full((1, 1), 7.0)), [[7]])
    big = K["diag"](np.arange(1.0, 101).reshape(-1, 1))
    assert sp.issparse(big)
    assert_same(big, np.diag(np.arange(1.0, 101)))
    with pytest.raises(DMLRuntimeError, match="diag can either"):
        K["diag"](row(1, 2, 3))
    assert_same(K["rev"](X), X[::-1])
    assert_same(K["t"](Y), Y.T)
    S = sprand(50, 30, 0.1)
    assert_same(K["rev"](S), D(S)[::-1])
    assert_same(K["t"](S), D(S).T)
    assert_same(K["cbind"](np.ones((2, 1)), np.full((2, 2), 2.0)), [[1, 2, 2], [1, 2, 2]])
    assert_same(K["rbind"](np.ones((1, 2)), np.full((2, 2), 2.0)), [[1, 1], [2, 2], [2, 2]])
    assert_same(K["cbind"](col(1, 1), np.full((2, 2), 2.0), col(3, 3)), [[1, 2, 2, 3], [1, 2, 2, 3]])
    assert_same(K["append"](col(1, 1), col(2, 2)), [[1, 2], [1, 2]])
    assert K["cbind"](np.zeros((0, 0)), np.zeros((0, 3))).shape == (0, 3)
    assert_same(K["cbind"](S, D(S)), np.hstack([D(S), D(S)]))
    with pytest.raises(DMLRuntimeError, match="inputs to cbind must have same number of rows: input 1 rows: 2"):
        K["cbind"](np.ones((2, 1)), np.ones((3, 2)))
    with pytest.raises(DMLRuntimeError, match="Expecting matrix"):
        K["cbind"](np.ones((2, 1)), 5)


# ---------------------------------------------------------------------------- indexing

def test_right_indexing():
    A = np.arange(1.0, 10).reshape(3, 3)
    rix = K["rix"]
    assert_same(rix(A, 2, 2, None, None), [[4, 5, 6]])
    assert_same(rix(A, 1, 3, 2, 2), col(2, 5, 8))
    assert_same(rix(A, 1.7, 1.7, 1, 3), [[1, 2, 3]])  # doubles truncate
    assert_same(rix(A, 1, 2.9, 2.5, 2.5), col(2, 5))
    r = rix(A, 2, 3, 2, 3)
    r[0, 0] = -1
    assert A[1, 1] == 5  # result does not alias the input
    for bounds, msg in (((0, 0, 1, 3), r"\[0:0,1:3\] must be within matrix dimensions \[3,3\]"),
                        ((2, 4, 1, 2), r"\[2:4,1:2\]"), ((1, 3, 4, 4), r"\[1:3,4:4\]"), ((3, 2, 1, 3), r"\[3:2,1:3\]")):
        with pytest.raises(DMLRuntimeError, match=msg):
            rix(A, *bounds)
    S = sprand(200, 100, 0.05, seed=8)
    assert_same(rix(S, 10, 50, 3, 80), D(S)[9:50, 2:80])
    assert_same(rix(S, 7, 7, None, None), D(S)[6:7])
    assert rix(np.zeros((0, 3)), 1, 0, 2, 2).shape == (0, 1)
    # whole rows by integer bounds (mini-batches): a view, with or without the column bounds
    for cb in ((None, None), (1, 3)):
        v = rix(A, 2, 3, *cb)
        assert_same(v, A[1:3])
        assert np.shares_memory(v, A)
    assert rix(A, 1, 3, None, None) is A
    with pytest.raises(DMLRuntimeError, match=r"\[2:4,1:3\]"):
        rix(A, 2, 4, None, None)


def test_left_indexing():
    A = np.arange(1.0, 10).reshape(3, 3)
    lix = K["lix"]
    r = lix(A, 5, 1, 1, 1, 1)
    assert r[0, 0] == 5 and A[0, 0] == 1
    assert_same(lix(A, col(7, 8), 1, 2, 3, 3), [[1, 2, 7], [4, 5, 8], [7, 8, 9]])
    assert_same(lix(A, 0.0, 2, 2, None, None), [[1, 2, 3], [0, 0, 0], [7, 8, 9]])
    assert_same(lix(A, 100, 1.7, 1.7, 2.2, 2.2), [[1, 100, 3], [4, 5, 6], [7, 8, 9]])
    with pytest.raises(DMLRuntimeError, match=r"\[0:0,1:1\] must be within matrix dimensions \[3x3\]\."):
        lix(A, 5, 0, 0, 1, 1)
    with pytest.raises(DMLRuntimeError, match=r"dimensions of the source matrix \[3x1\] do not match the shape "
                                              r"of the matrix specified by indices \[1:2, 1:1\] \(i.e., \[2x1\]\)\."):
        lix(A, np.ones((3, 1)), 1, 2, 1, 1)
    with pytest.raises(DMLRuntimeError, match=r"\[1:4,1:1\]"):
        lix(A, np.ones((4, 1)), 1, 4, 1, 1)
    S = sprand(200, 100, 0.05, seed=8)
    before = D(S).copy()
    Y = np.random.default_rng(1).uniform(size=(20, 30))
    ref = before.copy()
    ref[10:30, 5:35] = Y
    assert_same(lix(S, Y, 11, 30, 6, 35), ref)
    ref2 = before.copy()
    ref2[:, 3] = 0
    out = lix(S, 0, None, None, 4, 4)
    assert sp.issparse(out)
    assert_same(out, ref2)
    ref3 = before.copy()
    ref3[0:2, 0:2] = 3.0
    assert_same(lix(S, 3.0, 1, 2, 1, 2), ref3)
    assert_same(S, before)


def test_list_indexing():
    L = ListValue([1, "a", np.ones((2, 2))], ["x", "y", "z"])
    assert K["lrix"](L, 1) == 1 and K["lrix"](L, 2.9) == "a" and K["lrix"](L, "z").shape == (2, 2)
    with pytest.raises(DMLRuntimeError):
        K["lrix"](L, 4)
    with pytest.raises(DMLRuntimeError):
        K["lrix"](L, "w")


# ------------------------------------------------------------------------------- casts

def test_casts():
    assert K["as.scalar"](np.full((1, 1), 3.5)) == 3.5 and K["as.scalar"](5) == 5
    with pytest.raises(DMLRuntimeError, match="dimension mismatch while casting matrix to scalar: dim1: 2 dim2 1"):
        K["as.scalar"](np.ones((2, 1)))
    assert_same(K["as.matrix"](5), [[5]])
    assert_same(K["as.matrix"](True), [[1]])
    assert_same(K["as.matrix"](ListValue([1, 2.5, np.full((1, 1), 4.0)])), col(1, 2.5, 4))
    assert K["as.integer"](-3.7) == -3 and K["as.integer"](True) == 1
    assert K["as.integer"]("12") == 12 and K["as.integer"]("3.5") == 3 and K["as.integer"](NAN) == 0
    assert type(K["as.integer"](2.9999999999999996)) is int and K["as.integer"](2.9999999999999996) == 2
    assert K["as.double"](3) == 3.0 and type(K["as.double"](3)) is float and K["as.double"]("2.5") == 2.5
    assert K["as.double"](True) == 1.0
    assert K["as.logical"](2.5) is True and K["as.logical"](0) is False and K["as.logical"]("TRUE") is True
    assert K["as.logical"]("true") is True and K["as.logical"]("yes") is False and K["as.logical"](NAN) is True
    with pytest.raises(DMLRuntimeError, match="Expecting scalar parameter"):
        K["as.integer"](np.ones((2, 1)))
    assert K["nrow"](np.zeros((0, 0))) == 0 and K["ncol"](np.zeros((2, 5))) == 5
    assert K["length"](np.zeros((2, 5))) == 10 and K["length"](ListValue([1, 2])) == 2


# ---------------------------------------------------------------------- ternary and friends

def test_ifelse_xor_bitwand_outer():
    X = np.array([[1, 0], [NAN, 2]])
    assert_same(K["ifelse"](X, 10, 20), [[10, 20], [10, 10]])
    assert_same(K["ifelse"](X, np.array([[1.0, 2], [3, 4]]), -1), [[1, -1], [3, 4]])
    assert K["ifelse"](True, X, -1) is X
    assert_same(K["ifelse"](False, X, 5), np.full((2, 2), 5.0))
    assert K["ifelse"](False, "a", "b") == "b" and K["ifelse"](True, 3, 4.5) == 3
    assert type(K["ifelse"](True, 3, 4.5)) is int and K["ifelse"](NAN, 3, 4) == 3
    with pytest.raises(DMLRuntimeError, match="Block sizes are not matched for ternary"):
        K["ifelse"](np.ones((2, 2)), row(1, 2), row(7, 8))
    I1 = row(1, 0, 1)
    assert_same(K["ifelse"](K["xor"](I1, True), row(5, 6, 7), row(-5, -6, -7)), [[-5, 6, -7]])
    assert K["xor"](True, False) is True and K["xor"](True, True) is False
    assert_same(K["xor"](row(1, 0), True), [[0, 1]])
    assert K["bitwAnd"](12, 10) == 8 and type(K["bitwAnd"](12, 10)) is int
    assert K["bitwAnd"](12.7, 10) == 8.0 and type(K["bitwAnd"](12.7, 10)) is float
    assert K["bitwAnd"](-12, 10) == 0
    assert_same(K["bitwAnd"](row(12.9, -5), 6), [[4, 2]])
    a, b = col(1, 2, 3), row(1, 2)
    assert_same(K["outer"](a, b, "*"), [[1, 2], [2, 4], [3, 6]])
    assert_same(K["outer"](a, b, "<"), [[0, 1], [0, 0], [0, 0]])
    assert_same(K["outer"](a, b, "-"), [[0, -1], [1, 0], [2, 1]])
    assert_same(K["outer"](a, b, "^"), [[1, 1], [2, 4], [3, 9]])
    assert_same(K["outer"](a, b, "max"), [[1, 2], [2, 2], [3, 3]])
    assert_same(K["outer"](a, b, "%%"), [[0, 1], [0, 0], [0, 1]])
    with pytest.raises(DMLRuntimeError, match="common dimension of one: 3x1 o 2x1"):
        K["outer"](a, col(1, 2), "*")


# ------------------------------------------------------------------------- linear algebra

def test_matmult_combinations():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 20))
    B = rng.standard_normal((20, 10))
    SA = sprand(300, 200, 0.01, seed=1)
    SB = sprand(200, 100, 0.01, seed=2)
    DB = rng.standard_normal((200, 7))
    DA = rng.standard_normal((5, 300))
    np.testing.assert_allclose(K["%*%"](A, B), A @ B, rtol=1e-12)
    np.testing.assert_allclose(D(K["%*%"](SA, DB)), D(SA) @ DB, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D(K["%*%"](DA, SA)), DA @ D(SA), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D(K["%*%"](SA, SB)), D(SA) @ D(SB), rtol=1e-12, atol=1e-12)
    assert type(K["%*%"](SA, DB)) is np.ndarray
    assert K["%*%"](np.zeros((0, 3)), np.ones((3, 2))).shape == (0, 2)
    assert_same(K["%*%"](col(1, 2), row(1, 2, 3)), [[1, 2, 3], [2, 4, 6]])
    with pytest.raises(DMLRuntimeError, match=r"invalid dimensions for matrix multiplication \(k1=2, k2=3\)"):
        K["%*%"](np.ones((2, 2)), np.ones((3, 3)))


def test_solve_inv_cholesky_det():
    A = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    b = col(1, 2, 3)
    np.testing.assert_allclose(A @ K["solve"](A, b), b)
    np.testing.assert_allclose(K["inv"](A) @ A, np.eye(3), atol=1e-14)
    L = K["cholesky"](A)
    np.testing.assert_allclose(L @ L.T, A, atol=1e-14)
    # SystemDS toString(cholesky(A)): 2 0 0 / 0.5 1.658 0 / 1 -0.302 1.977
    np.testing.assert_allclose(L, [[2, 0, 0], [0.5, 1.658, 0], [1, -0.302, 1.977]], atol=5e-4)
    assert K["det"](A) == pytest.approx(43.0)
    with pytest.raises(DMLRuntimeError, match="squared dimensions"):
        K["solve"](np.ones((2, 3)), col(1, 2))
    with pytest.raises(DMLRuntimeError, match="singular"):
        K["solve"](np.ones((2, 2)), col(1, 2))
    with pytest.raises(DMLRuntimeError, match=r"inv\(\) must be square matrix -- given: a 2x3 matrix"):
        K["inv"](np.ones((2, 3)))
    with pytest.raises(DMLRuntimeError, match="positive definite"):
        K["cholesky"](np.array([[1.0, 2], [2, 1]]))
    with pytest.raises(DMLRuntimeError, match="symmetric"):
        K["cholesky"](np.array([[1.0, 2], [0, 1]]))


def test_eigen_matches_systemds_signs_and_order():
    A = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    vals, vecs = K["eigen"](A)
    # SystemDS: write(e) / write(v) of eigen(A)
    np.testing.assert_allclose(vals, col(1.854897308799577, 3.476023602918134, 6.669079088282288), rtol=1e-13)
    np.testing.assert_allclose(vecs, [[-0.6793130619863368, 0.37436195478307144, -0.631178968776483],
                                      [0.5932333119173848, 0.7864356987513781, -0.1720265367929081],
                                      [0.4319814827585529, -0.49129626351156847, -0.7563200248659911]], atol=1e-13)
    C = np.eye(5)
    C[0, 1] = C[1, 0] = 0.5
    C[4, 4] = 0
    vals, vecs = K["eigen"](C)
    np.testing.assert_allclose(vals, col(0, 0.5, 1, 1, 1.5), atol=1e-15)
    s = 0.7071067811865475
    np.testing.assert_allclose(vecs, [[0, s, 0, 0, s], [0, -s, 0, 0, s], [0, 0, 0, 1, 0], [0, 0, 1, 0, 0],
                                      [1, 0, 0, 0, 0]], atol=1e-15)
    rng = np.random.default_rng(0)
    M = rng.standard_normal((60, 30))
    C = M.T @ M
    vals, vecs = K["eigen"](C)
    assert np.all(np.diff(vals[:, 0]) >= 0)
    np.testing.assert_allclose(C @ vecs, vecs * vals[:, 0], atol=1e-9)
    with pytest.raises(DMLRuntimeError, match="square matrix"):
        K["eigen"](np.ones((2, 3)))


def test_svd_qr_lu():
    A = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]])
    U, S, V = K["svd"](A)
    assert U.shape == (4, 3) and S.shape == (3, 3) and V.shape == (3, 3)
    np.testing.assert_allclose(U @ S @ V.T, A, atol=1e-12)
    np.testing.assert_allclose(np.diag(S), [25.46240743582254, 1.2906616757612, 0], atol=1e-9)
    B = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    H, R = K["qr"](B)
    # SystemDS: [H, R] = qr(B) (commons-math Householder form)
    np.testing.assert_allclose(H, [[1.8728715609, 0, 0], [0.2182178902, 1.9771135954, 0],
                                   [0.4364357805, -0.2127181553, 2.0]], atol=1e-9)
    np.testing.assert_allclose(R, [[-4.5825756950, -1.5275252317, -3.9279220242], [0, -2.7688746209, 1.4446302480],
                                   [0, 0, -3.3888747497]], atol=1e-9)
    P, L, Uu = K["lu"](B)
    np.testing.assert_allclose(P @ B, L @ Uu, atol=1e-12)
    assert_same(P, np.eye(3))
    np.testing.assert_allclose(L, [[1, 0, 0], [0.25, 1, 0], [0.5, -0.18181818181818, 1]], atol=1e-12)
    P2, L2, U2 = K["lu"](np.array([[1.0, 2], [3, 4]]))
    assert_same(P2, [[0, 1], [1, 0]])
    with pytest.raises(DMLRuntimeError, match="non-singular"):
        K["lu"](np.ones((2, 2)))


# --------------------------------------------------------------------------- data generation

def test_matrix_constructor():
    m = K["matrix"]
    assert_same(m("1 -1 2.5e1 -Infinity NaN 3", 2, 3, True), [[1, -1, 25], [-INF, NAN, 3]])
    with pytest.raises(DMLRuntimeError, match=r"dimensions=\[2x2\] vs numValues=3"):
        m("1 2 3", 2, 2, True)
    with pytest.raises(DMLRuntimeError):
        m("1 Inf 2 3", 2, 2, True)
    M = np.arange(1.0, 7).reshape(2, 3)
    assert_same(m(M, 3, 2, True), [[1, 2], [3, 4], [5, 6]])
    assert_same(m(M, 3, 2, False), [[1, 5], [4, 3], [2, 6]])
    assert_same(m(M, 1, 6, False), [[1, 4, 2, 5, 3, 6]])
    with pytest.raises(DMLRuntimeError, match=r"consistent numbers of input/output cells \(2:3, 4:2\)"):
        m(M, 4, 2, True)
    assert_same(m(3, 2.7, 2, True), np.full((2, 2), 3.0))
    assert m(0, 0, 0, True).shape == (0, 0)
    Z = m(0, 10000, 10000, True)
    assert sp.issparse(Z) and Z.nnz == 0
    S = sprand(60, 40, 0.05, seed=2)
    assert_same(m(S, 40, 60, True), D(S).reshape(40, 60))
    assert_same(m(S, 40, 60, False), D(S).reshape(40, 60, order="F"))
    with pytest.raises(DMLRuntimeError, match=">= 0"):
        m(3, -1, 2, True)


def test_rand():
    r = K["rand"]
    X = r(100, 50, 2, 5, 1.0, "uniform", 7, 1.0)
    assert X.shape == (100, 50) and X.min() >= 2 and X.max() < 5
    assert_same(X, r(100, 50, 2, 5, 1.0, "uniform", 7, 1.0))  # seeded: reproducible
    Y = r(3, 2, 5, 2, 1.0, "uniform", 1, 1.0)
    assert Y.min() >= 2 and Y.max() <= 5  # min > max is allowed
    # SystemDS draws sparse positions at random (skips or per-cell draws), so the non-zero count is
    # only near sparsity * cells (verified against SystemDS 3.4 in test_sdsrand.py)
    S = r(1000, 100, 0, 1, 0.1, "uniform", 3, 1.0)
    assert sp.issparse(S) and abs(S.nnz - 10000) < 400
    half = D(r(10, 10, 3, 3, 0.5, "uniform", 1, 1.0))
    assert 30 <= half.astype(bool).sum() <= 70 and set(np.unique(half)) <= {0.0, 3.0}
    N = r(1000, 100, 5, 10, 1.0, "NORMAL", 3, 1.0)
    assert abs(N.mean()) < 0.05 and abs(N.std() - 1) < 0.05
    P = r(1000, 100, 0, 1, 1.0, "Poisson", 3, 3.0)
    assert abs(P.mean() - 3) < 0.05 and np.all(P == np.round(P))
    assert r(0, 3, 0, 1, 1.0, "uniform", -1, 1.0).shape == (0, 3)
    with pytest.raises(DMLRuntimeError, match=r"Invalid matrix characteristics: 3x3, 1.5"):
        r(3, 3, 0, 1, 1.5, "uniform", -1, 1.0)
    with pytest.raises(DMLRuntimeError):
        r(3, 3, 0, 1, 1.0, "exp", -1, 1.0)


def test_seq():
    s = K["seq"]
    assert_same(s(1, 5, None), col(1, 2, 3, 4, 5))
    assert_same(s(5, 1, None), col(5, 4, 3, 2, 1))
    assert_same(s(5, 1, 1), col(5, 4, 3, 2, 1))  # SystemDS run time: an increment of 1 counts down
    assert_same(s(1, 2, 0.3), col(1, 1.3, 1.6, 1.9000000000000001))
    assert_same(s(1, 1, None), col(1))
    # SystemDS: seq(0, 1, 0.1) accumulates (ends in 0.9999999999999999)
    assert s(0, 1, 0.1)[-1, 0] == 0.9999999999999999 and s(0, 1, 0.1)[8, 0] == 0.7999999999999999
    assert_same(s(10, 1, -3), col(10, 7, 4, 1))
    with pytest.raises(DMLRuntimeError, match=r"Invalid seq parameters: \(1.0, 5.0, -1.0\)"):
        s(1, 5, -1)
    with pytest.raises(DMLRuntimeError, match=r"Wrong sequence increment: from=5.0, to=1.0, incr=2.0"):
        s(5, 1, 2)
    with pytest.raises(DMLRuntimeError, match=r"Wrong sequence increment: from=1.0, to=5.0, incr=0.0"):
        s(1, 5, 0)


def test_sample():
    S = K["sample"](10, 3, False, 7)
    assert S.shape == (3, 1) and len(set(S[:, 0])) == 3 and S.min() >= 1 and S.max() <= 10
    R = K["sample"](3, 10, True, 7)
    assert R.shape == (10, 1) and set(R[:, 0]) <= {1.0, 2.0, 3.0}
    P = K["sample"](5, 5, False, -1)
    assert sorted(P[:, 0]) == [1, 2, 3, 4, 5]
    assert_same(K["sample"](100, 10, False, 42), K["sample"](100, 10, False, 42))
    with pytest.raises(DMLRuntimeError, match="can only be generated with replacement"):
        K["sample"](3, 10, False, -1)


@pytest.mark.parametrize("sa,sb", [((5000, 2), (1, 2)), ((5000, 3), (5000, 1)), ((1, 4), (5000, 4)),
                                   ((5000, 2), (1, 1)), ((5000, 4), (5000, 1)), ((5000, 5), (1, 5))])
def test_narrow_broadcasts_equal_numpy(sa, sb):
    # tall matrices of up to 4 columns broadcast a vector column by column (NumPy's row-at-a-time
    # broadcast is 2-4x slower there): same values, NaN/Inf/zeros included, same result types
    rng = np.random.default_rng(5)
    a, b = rng.random(sa), rng.random(sb)
    a.flat[::7], b.flat[::3], a.flat[::5] = NAN, INF, 0.0
    for op in ["+", "*", "<", "^", "%%", "min", "&", "/", "%/%", "!="]:
        got = D(K[op](a, b))
        assert got.shape == np.broadcast_shapes(sa, sb), op
        cols = [D(K[op](a[:, [j]] if sa[1] > 1 else a, b[:, [j]] if sb[1] > 1 else b)) for j in range(got.shape[1])]
        assert_same(got, np.hstack(cols))


@pytest.mark.parametrize("shape", [(6000, 1), (6000, 2), (6000, 4), (6000, 5), (3, 6000), (0, 3), (6000, 0)])
def test_narrow_row_and_column_aggregates_equal_numpy(shape):
    # up to 4 columns, rowSums/rowMaxs/rowMins/col* work a column at a time; same values (NaN
    # propagating through min/max, +-Inf) as NumPy's axis reductions, and zeros for empty axes
    rng = np.random.default_rng(11)
    x = rng.random(shape) - 0.5
    x.flat[::11], x.flat[::13], x.flat[::17] = NAN, INF, -INF
    for name, f, ax in [("rowMaxs", np.max, 1), ("rowMins", np.min, 1), ("colMaxs", np.max, 0),
                        ("colMins", np.min, 0), ("rowSums", np.sum, 1), ("colSums", np.sum, 0)]:
        with np.errstate(all="ignore"):
            want = f(x, axis=ax, keepdims=True) if x.shape[ax] else np.zeros((x.shape[0], 1) if ax else (1, x.shape[1]))
        assert_same(K[name](x), want)


@pytest.mark.parametrize("rows,cols", [((1, 6000), (1, 2)), ((1, 6000), (2, 4)), ((101, 5000), (1, 3)),
                                       ((1, 6000), (1, 5)), ((1, 6000), (3, 3))])
def test_narrow_column_slices_equal_numpy(rows, cols):
    # a few columns of a tall matrix are copied a column at a time: same values, a C-ordered copy
    rng = np.random.default_rng(4)
    x = rng.random((6000, 5))
    x.flat[::7], x.flat[::9] = NAN, -INF
    got = K["rix"](x, rows[0], rows[1], cols[0], cols[1])
    assert_same(got, x[rows[0] - 1:rows[1], cols[0] - 1:cols[1]])
    assert got.flags.c_contiguous
    full = (rows, cols) == ((1, 6000), (1, 5))  # the whole matrix: values are immutable, no copy
    assert np.shares_memory(got, x) == full


# ----------------------------------------------------------------- fast paths of binary kernels

_FAST_OPS = ["+", "-", "*", "/", "^", "%%", "%/%", "min", "max"]
_SHAPES = [((3, 4), (3, 4)), ((3, 4), (1, 4)), ((3, 4), (3, 1)), ((1, 4), (3, 4)), ((3, 1), (3, 4)),
           ((0, 4), (1, 4)), ((5000, 3), (1, 3)), ((5000, 3), (5000, 1)), ((3, 4), (1, 1)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("op", _FAST_OPS)
@pytest.mark.parametrize("shapes", _SHAPES)
def test_binary_fast_paths_agree_with_the_general_kernel(op, shapes):
    """make_binary's kernels take shortcuts for dense operands of matching or vector-broadcast shapes
    and int/float scalars; each shortcut must give exactly what binary() gives (NaN, Inf, signed
    zeros and negative operands included), and leave the rest (narrow broadcasts, 1x1) to it."""
    from lafuse.runtime.local.kernels_common import ieee_thread
    from lafuse.runtime.local.kernels_elementwise import binary, make_binary

    rng = np.random.default_rng(len(op) * 31 + shapes[0][0])
    special = np.array([NAN, INF, -INF, 0.0, -0.0, -2.5, 3.0, 1e308])

    def mat(shape):
        a = rng.normal(size=shape) * 4
        if a.size:
            a.flat[rng.integers(0, a.size, max(1, a.size // 3))] = rng.choice(special, max(1, a.size // 3))
        return a

    a, b = mat(shapes[0]), mat(shapes[1])
    k = make_binary(op)
    for x, y in ((a, b), (a, 2), (a, -0.5), (3, b), (NAN, b), (b, INF)):
        want = binary(op, x, y)
        with ieee_thread():
            got = k(x, y)
        assert type(got) is type(want)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_binary_kernels_are_quiet_inside_and_outside_an_execution_thread():
    """errstate() is a no-op inside ieee_thread() (the interpreter and parfor workers enter it
    once); called from anywhere else, kernels still give IEEE results without warnings."""
    import warnings

    from lafuse.runtime.local.kernels_common import ieee_thread
    from lafuse.runtime.local.kernels_elementwise import make_binary

    a = np.array([[1.0, 0.0, -1.0]])
    for ctx in (ieee_thread, None):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            if ctx is None:
                r = make_binary("/")(a, 0.0)
            else:
                with ctx():
                    r = make_binary("/")(a, 0.0)
        np.testing.assert_array_equal(r, [[INF, NAN, -INF]])
    with pytest.raises(DMLRuntimeError, match="Block sizes are not matched"):
        make_binary("+")(np.ones((3, 4)), np.ones((2, 4)))


@pytest.mark.parametrize("shape", [(2048, 3), (6001, 10), (5000, 511), (4096, 1), (3000, 600)])
def test_blocked_column_sums_match_per_column_sums(shape):
    # tall matrices with fewer than 512 columns are summed in blocks of 512 rows (one long vector
    # addition per block, the rows beyond whole blocks added after; 600 columns: NumPy): the per-column sums within
    # rounding, NaN and +-Inf propagated per column as NumPy does
    rng = np.random.default_rng(12)
    x = rng.random(shape) - 0.5
    want = np.array([[np.sum(x[:, j]) for j in range(shape[1])]])
    np.testing.assert_allclose(K["colSums"](x), want, rtol=1e-12, atol=1e-12)
    x[shape[0] - 1, 0], x[5, -1] = NAN, INF
    if shape[1] > 2:
        x[7, 1], x[9, 1] = INF, -INF
    with np.errstate(all="ignore"):
        want = np.array([[np.sum(x[:, j]) for j in range(shape[1])]])
    got = K["colSums"](x)
    assert got.shape == (1, shape[1])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-12, atol=1e-12)


def test_one_format_rule_for_estimates_and_values():
    """lafuse.formats is the one rule: the size propagation's bytes, the cost model's format and the
    format a kernel gives a result agree, at the turn point and for tiny and one-column matrices."""
    from lafuse.cost.operators import Meta
    from lafuse.formats import CSR, DENSE, default_format, format_bytes
    from lafuse.hops.sizes import output_bytes
    from lafuse.runtime.values import as_matrix_value, choose_format

    rng = np.random.default_rng(11)
    for rows, cols, density in ((100, 50, 0.39), (100, 50, 0.41), (20, 40, 0.1), (3000, 1, 0.01), (1, 2000, 0.0)):
        m = rng.random((rows, cols)) * (rng.random((rows, cols)) < density)
        nnz = int(np.count_nonzero(m))
        fmt = default_format(rows, cols, nnz)
        got = choose_format(as_matrix_value(m))
        assert (CSR if sp.issparse(got) else DENSE) == fmt, (rows, cols, density)
        assert output_bytes(rows, cols, nnz) == format_bytes(fmt, rows, cols, nnz)
        meta = Meta(rows, cols, nnz, True, True)
        assert meta.sparse == (fmt == CSR) and meta.bytes == format_bytes(fmt, rows, cols, nnz)


def test_kept_csr_rows_are_the_rows_and_follow_the_structure(monkeypatch):
    """csr_rows_kept: the row of every stored entry (empty rows and an empty matrix too), the same
    array again for the same matrix, recomputed for a matrix whose structure changed, not kept above
    the size limit, forgotten when the matrix dies, and never writable."""
    import gc

    from lafuse.runtime.local import kernels_common as kc

    S = sp.csr_array(np.array([[0, 2.0, 0], [0, 0, 0], [1.0, 0, 3.0]]))
    rows = kc.csr_rows_kept(S)
    assert rows.tolist() == [0, 2, 2]
    assert kc.csr_rows_kept(S) is rows and not rows.flags.writeable
    S.data[:] = 0.0
    S.eliminate_zeros()  # a structure change in place: a new indptr
    assert kc.csr_rows_kept(S).tolist() == []
    assert kc.csr_rows_kept(sp.csr_array((0, 4))).tolist() == []
    n = len(kc._KEPT_ROWS)
    T = sp.csr_array(np.eye(5))
    assert kc.csr_rows_kept(T).tolist() == [0, 1, 2, 3, 4] and len(kc._KEPT_ROWS) == n + 1
    del T
    gc.collect()
    assert len(kc._KEPT_ROWS) == n
    monkeypatch.setattr(kc, "KEPT_ROWS_MAX_BYTES", 8)
    B = sp.csr_array(np.eye(3))
    first = kc.csr_rows_kept(B)
    assert first.tolist() == [0, 1, 2] and kc.csr_rows_kept(B) is not first
