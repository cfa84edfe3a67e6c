"""Behaviours where SystemDS 3.4.0 itself is wrong: lafuse is checked against NumPy / the DML spec instead.

Each test documents the SystemDS behaviour it deliberately does not copy (dml-semantics §5 plus bugs found while
building the corpus), runs lafuse through the same CLI runner as the conformance tests, and compares with
expected output computed here.
"""

from __future__ import annotations

import math
import textwrap
from decimal import Decimal
from pathlib import Path

import numpy as np

from . import compare, corpus


def _run(tmp_path: Path, dml: str, nvargs: dict[str, str] | None = None) -> corpus.LafuseResult:
    script = tmp_path / "script.dml"
    script.write_text(textwrap.dedent(dml).lstrip())
    res = corpus.run_lafuse_file(script, nvargs or {}, cwd=tmp_path)
    assert res.returncode == 0, (
        f"lafuse exited with {res.returncode}\n--- stderr:\n{res.stderr[-4000:]}\n"
        f"--- stdout:\n{chr(10).join(res.stdout_lines)}\n--- script:\n{script.read_text()}")
    return res


def _expect_lines(res: corpus.LafuseResult, expected: list[str]) -> None:
    diff = compare.compare_lines(expected, res.stdout_lines, expected_name="expected")
    assert diff is None, diff


def _expect_matrix(path: Path, expected: np.ndarray) -> None:
    diff = compare.compare_matrices(np.atleast_2d(expected), compare.read_matrix(path, "csv"),
                                    expected_name="numpy")
    assert diff is None, diff


def java_double(x: float) -> str:
    """Java's Double.toString layout over Python's shortest round-trip digits."""
    x = float(x)  # numpy scalars have a different repr
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp = len(digits) + exp - 1  # exponent of the first significant digit
    neg = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if exp >= 0:
            ip, fp = ds[:exp + 1].ljust(exp + 1, "0"), ds[exp + 1:]
        else:
            ip, fp = "0", "0" * (-exp - 1) + ds
        return f"{neg}{ip}.{fp or '0'}"
    return f"{neg}{ds[0]}.{ds[1:] or '0'}E{exp}"


def test_java_double_helper():
    assert java_double(21.0) == "21.0"
    assert java_double(1e-7) == "1.0E-7"
    assert java_double(1.5e-10) == "1.5E-10"
    assert java_double(12345678.9) == "1.23456789E7"
    assert java_double(0.001) == "0.001"
    assert java_double(float("inf")) == "Infinity"
    assert java_double(-2.5e-4) == "-2.5E-4"
    assert java_double(100.0) == "100.0"
    assert java_double(0.30000000000000004) == "0.30000000000000004"
    assert java_double(1e21) == "1.0E21"
    assert java_double(-1e8) == "-1.0E8"
    assert java_double(123456789012.0) == "1.23456789012E11"
    assert java_double(3.3219280948873626) == "3.3219280948873626"
    assert java_double(9999999.0) == "9999999.0"
    assert java_double(-0.14285714285714285) == "-0.14285714285714285"


# ------------------------------------------------------------------ dml-semantics §5(a): defaults are applied

def test_user_function_defaults_are_applied(tmp_path: Path):
    # SystemDS 3.4.0: "Wrong number of function input arguments: 1 found, but 3 expected"
    res = _run(tmp_path, """
        f = function(Double a, Double b = 10, Integer c = 2) return (Double r) {
          r = a + b * c
        }
        g = function(Matrix[Double] X, Matrix[Double] W = matrix(0, rows=0, cols=0)) return (Integer n) {
          n = nrow(W) + ncol(W) + nrow(X)
        }
        print(f(1))
        print(f(1, 2))
        print(f(a=1))
        print(f(a=1, c=3))
        print(g(matrix(1, 3, 1)))
        """)
    f = lambda a, b=10.0, c=2: a + b * c  # noqa: E731
    _expect_lines(res, [java_double(f(1)), java_double(f(1, 2)), java_double(f(a=1)), java_double(f(a=1, c=3)),
                        "3"])


def _lsq(X: np.ndarray, y: np.ndarray, reg: float) -> np.ndarray:
    return np.linalg.solve(X.T @ X + reg * np.eye(X.shape[1]), X.T @ y)


def test_builtin_positional_call_uses_defaults(tmp_path: Path):
    # SystemDS 3.4.0: lm(X, y) fails with "Missing default expression for unspecified function argument 'X'"
    X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0], [2.0, -1.0]])
    y = np.array([[1.0], [2.0], [2.0], [0.5]])
    res = _run(tmp_path, """
        X = matrix("1 2 3 4 5 7 2 -1", 4, 2)
        y = matrix("1 2 2 0.5", 4, 1)
        B = lm(X, y)
        write(B, $B, format="csv")
        print("done")
        """, {"B": str(tmp_path / "B.csv")})
    assert res.stdout_lines[-1] == "done"
    _expect_matrix(tmp_path / "B.csv", _lsq(X, y, 1e-7))


# ------------------------------------------------------------- dml-semantics §5(b): named arguments do not leak

def test_named_arguments_do_not_leak_between_builtin_calls(tmp_path: Path):
    # SystemDS 3.4.0 reuses the first call's named arguments for parameters the second call leaves out.
    X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0], [2.0, -1.0]])
    y = np.array([[1.0], [2.0], [2.0], [0.5]])
    res = _run(tmp_path, """
        X = matrix("1 2 3 4 5 7 2 -1", 4, 2)
        y = matrix("1 2 2 0.5", 4, 1)
        B1 = lmDS(X=X, y=y, icpt=0, reg=100, verbose=FALSE)
        B2 = lmDS(X=X, y=y, verbose=FALSE)
        write(B1, $B1, format="csv")
        write(B2, $B2, format="csv")
        """, {"B1": str(tmp_path / "B1.csv"), "B2": str(tmp_path / "B2.csv")})
    assert res.stdout_lines == []
    _expect_matrix(tmp_path / "B1.csv", _lsq(X, y, 100.0))
    _expect_matrix(tmp_path / "B2.csv", _lsq(X, y, 1e-7))


# ------------------------------------------------------------------ dml-semantics §5(c): += in the same block

def test_accumulate_assign_in_the_defining_block(tmp_path: Path):
    # SystemDS 3.4.0: "Invalid accumulator assignment to non-existing variable z."
    res = _run(tmp_path, """
        z = 3
        z += 2
        print(z)
        M = matrix("1 2 3 4", 2, 2)
        M += M
        print(toString(M))
        s = 0.5
        s += 1
        print(s)
        """)
    M = np.array([[1.0, 2.0], [3.0, 4.0]]) * 2
    _expect_lines(res, ["5", " ".join(f"{v:.3f}" for v in M[0]), " ".join(f"{v:.3f}" for v in M[1]), "",
                        java_double(1.5)])


# ------------------------------------------------------------------ found while building the corpus

def test_while_loop_that_never_runs_keeps_the_old_value(tmp_path: Path):
    # SystemDS 3.4.0 prints x=1: constant propagation treats the body's `x = 1` as always executed.
    res = _run(tmp_path, """
        x = 0
        y = 5
        while (y < 3) {
          x = 1
        }
        print("x=" + x)
        never = 0
        while (FALSE) {
          never = 1
        }
        print("never=" + never)
        """)
    _expect_lines(res, ["x=0", "never=0"])


def test_nrow_ncol_of_a_matrix_call_in_an_assignment(tmp_path: Path):
    # SystemDS 3.4.0: "Undefined Variable (null) used in statement" for `n = nrow(matrix(0, 7, 2))`.
    res = _run(tmp_path, """
        n = nrow(matrix(0, 7, 2))
        k = ncol(matrix(1, 2, 5))
        print(n)
        print(k)
        print(n * k)
        """)
    _expect_lines(res, ["7", "5", "35"])


def test_log_with_base_of_an_integer_is_not_truncated(tmp_path: Path):
    # SystemDS 3.4.0 prints log(10, 2) as 3 (integer, truncated); the log of an INT is a DOUBLE.
    res = _run(tmp_path, """
        print(log(10, 2))
        print(log(100, 10))
        x = 8
        print(log(x, 2))
        print(log(2, 10))
        """)
    _expect_lines(res, [java_double(math.log(10) / math.log(2)), java_double(math.log(100) / math.log(10)),
                        java_double(math.log(8) / math.log(2)), java_double(math.log(2) / math.log(10))])


def test_sum_of_a_constant_matrix_prints_as_double(tmp_path: Path):
    # SystemDS 3.4.0 folds print(sum(matrix(1, 2, 2))) to the INT 4 (sum otherwise returns a DOUBLE).
    res = _run(tmp_path, """
        print(sum(matrix(1, 2, 2)))
        M = matrix(2, 3, 3)
        print(sum(M))
        print(sum(matrix(1, 100, 100)))
        """)
    _expect_lines(res, [java_double(float(np.ones((2, 2)).sum())), java_double(float((2 * np.ones((3, 3))).sum())),
                        java_double(float(np.ones((100, 100)).sum()))])


def test_tostring_calls_with_different_named_parameters(tmp_path: Path):
    # SystemDS 3.4.0: NullPointerException when two toString calls on one matrix use different parameters.
    res = _run(tmp_path, """
        X = matrix("1 2 3 4", 2, 2)
        print(toString(X, decimal=1))
        print(toString(X, sep=","))
        print(toString(X, sparse=TRUE))
        """)
    _expect_lines(res, ["1.0 2.0", "3.0 4.0", "", "1.000,2.000", "3.000,4.000", "",
                        "1 1 1.000", "1 2 2.000", "2 1 3.000", "2 2 4.000", ""])


def test_tostring_with_an_empty_separator(tmp_path: Path):
    # SystemDS 3.4.0: LopsException (ArrayIndexOutOfBounds) for sep="".
    res = _run(tmp_path, """
        X = matrix("1 2 3", 1, 3)
        print(toString(X, sep=""))
        """)
    _expect_lines(res, ["1.0002.0003.000", ""])


def test_sum_of_a_table_with_dropped_entries(tmp_path: Path):
    # SystemDS 3.4.0 rewrites sum(table(seq(1, n), ids, r, c)) to n and prints the INT 4, although the entry
    # (3, 5) falls outside the 4 x 4 table and is dropped (dml-semantics §2a: table drops out-of-range entries).
    res = _run(tmp_path, """
        ids = matrix("1 2 5 2", 4, 1)
        P = table(seq(1, 4), ids, 4, 4)
        print(sum(P))
        s = sum(P)
        print(s)
        """)
    P = np.zeros((4, 4))
    for i, j in zip(range(4), [1, 2, 5, 2]):
        if j <= 4:
            P[i, j - 1] += 1
    _expect_lines(res, [java_double(P.sum()), java_double(P.sum())])


def test_as_scalar_of_a_cell_of_a_csv_read_without_metadata(tmp_path: Path):
    # SystemDS 3.4.0: "Variable '_Var0' does not exist in the symbol table" when the dims are unknown at
    # compile time (CSV without .mtd) and a single cell is indexed and cast.
    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]])
    (tmp_path / "in.csv").write_text("1,2,3\n4,5,6.5\n")
    res = _run(tmp_path, """
        X = read($X, format="csv", header=FALSE)
        c = as.scalar(X[2, 3])
        print(c)
        print(sum(X))
        """, {"X": str(tmp_path / "in.csv")})
    _expect_lines(res, [java_double(X[1, 2]), java_double(X.sum())])


def test_standardization_after_scaling_a_read_matrix(tmp_path: Path):
    """SystemDS 3.4.0 bug: after ``X = read(...); X = X / 10``, the expression
    ``colSums(X^2)/n - means*means`` (autoencoder_2layer's z-transform) comes out wrong (0.0187 instead
    of 0.3879 for the first column of the corpus X); without the division, or on a literal matrix, it
    is right. This made autoencoder_2layer with fixed initial weights disagree from its first
    objective value on, so that script is checked here, step by step, against NumPy instead."""
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(12, 4)) * 5, 3)
    np.savetxt(tmp_path / "X.csv", X, delimiter=",", fmt="%.3f")
    res = _run(tmp_path, """
        X = read($X, format="csv")
        X = X / 10
        n = nrow(X)
        means = colSums(X) / n
        stds = sqrt((colSums(X^2)/n - means*means)*n/(n-1)) + 1e-17
        Z = (X - means) / stds
        print(toString(stds, decimal=12))
        print(sum(Z^2))
        """, {"X": str(tmp_path / "X.csv")})
    Xs = X / 10
    stds = Xs.std(axis=0, ddof=1) + 1e-17
    Z = (Xs - Xs.mean(axis=0)) / stds
    expected = [" ".join(f"{v:.12f}" for v in stds), "", java_double(float(np.sum(Z ** 2)))]
    assert res.stdout_lines[0].split() == expected[0].split()
    assert abs(float(res.stdout_lines[2]) - np.sum(Z ** 2)) <= 1e-9 * np.sum(Z ** 2)


def _tostring(M) -> list[str]:
    """toString(M) with the defaults (3 decimals, ' ' between cells), then the blank line print adds."""
    def cell(x: float) -> str:
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return f"{x:.3f}"
    return [" ".join(cell(float(x)) for x in row) for row in np.atleast_2d(np.asarray(M, dtype=float))] + [""]


def test_matrix_times_zero_keeps_nan_and_inf(tmp_path: Path):
    # SystemDS 3.4.0 simplifies X * 0 to a matrix of zeros (dense and sparse X), although NaN * 0 and
    # Inf * 0 are NaN (found by corpus script 086 / 100).
    res = _run(tmp_path, """
        A = matrix("1 2 3 4 5 6", 2, 3)
        A[1, 2] = 0 / 0
        A[2, 1] = 1 / 0
        A[2, 3] = -1 / 0
        print(toString(A * 0))
        X = table(seq(1, 5), seq(1, 5) * 3, matrix("1 2 3 4 5", 5, 1), 50, 50)
        X[2, 6] = 0 / 0
        X[4, 12] = 1 / 0
        Y = X * 0
        print(sum(isNaN(Y)))
        """)
    A = np.array([[1, np.nan, 3], [np.inf, 5, -np.inf]])
    X = np.zeros((50, 50))
    for k in range(1, 6):
        X[k - 1, 3 * k - 1] = k
    X[1, 5], X[3, 11] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        expected = _tostring(A * 0) + [java_double(float(np.isnan(X * 0).sum()))]
    _expect_lines(res, expected)


def test_sum_with_nan_or_opposite_infinities_is_nan(tmp_path: Path):
    # SystemDS 3.4.0's (Kahan) sum gives -Infinity for [1 Inf; -Inf 4] and Infinity for a sparse matrix holding
    # NaN and Inf; IEEE addition gives NaN in both cases (found by corpus scripts 087 / 100).
    res = _run(tmp_path, """
        D = matrix("1 2 3 4", 2, 2)
        D[1, 2] = 1 / 0
        D[2, 1] = -1 / 0
        print(sum(D))
        X = table(seq(1, 5), seq(1, 5) * 3, matrix("1 2 3 4 5", 5, 1), 50, 50)
        X[2, 6] = 0 / 0
        X[4, 12] = 1 / 0
        print(sum(X))
        """)
    D = np.array([[1, np.inf], [-np.inf, 4]])
    X = np.zeros((50, 50))
    for k in range(1, 6):
        X[k - 1, 3 * k - 1] = k
    X[1, 5], X[3, 11] = np.nan, np.inf
    _expect_lines(res, [java_double(float(D.sum())), java_double(float(X.sum()))])


def test_nnz_count_of_seeded_sparse_rand_is_exact(tmp_path: Path):
    # SystemDS 3.4.0 rewrites sum(X != 0) for X = rand(..., sparsity=s) into the compile-time nnz estimate
    # s * rows * cols and prints it as an INT (40 here, and 6000 for 200x100 at 0.3), although the generated
    # matrix has a different number of non-zeros (its own sum(X > 0) says 50). Counted here from the written
    # matrix (found by corpus scripts 093 / 094).
    out = tmp_path / "S.txt"
    res = _run(tmp_path, """
        S = rand(rows=2000, cols=2000, sparsity=0.00001, seed=5)
        print(sum(S != 0))
        B = S != 0
        print(sum(B))
        write(S, $S, format="text")
        """, {"S": str(out)})
    ijv = np.loadtxt(out, ndmin=2)
    nnz = float(np.count_nonzero(ijv[:, 2])) if ijv.size else 0.0
    _expect_lines(res, [java_double(nnz), java_double(nnz)])


def test_copy_taken_inside_a_loop_is_not_updated_in_place(tmp_path: Path):
    # SystemDS 3.4.0: Q2 = P inside an if in a for loop, then P[, k] = ... in the next iteration also changes
    # Q2 (update-in-place ignores the alias) when Q = P was taken before the loop (found by corpus script 095).
    res = _run(tmp_path, """
        P = matrix(seq(1, 6), 2, 3)
        Q = P
        for (k in 1:3) {
          P[, k] = P[, k] * 10
          if (k == 2) Q2 = P
        }
        print(toString(Q))
        print(toString(Q2))
        print(toString(P))
        """)
    P = np.arange(1.0, 7.0).reshape(2, 3)
    Q = P.copy()
    for k in range(3):
        P[:, k] *= 10
        if k == 1:
            Q2 = P.copy()
    _expect_lines(res, _tostring(Q) + _tostring(Q2) + _tostring(P))


def test_order_ascending_puts_nan_last(tmp_path: Path):
    # SystemDS 3.4.0: order(target=X, by=1, index.return=TRUE) on [3 NaN 4 1 5 9] returns 1 2 4 3 5 6, which is
    # not a sorting permutation at all; NaN sorts last (as largest, like the decreasing order SystemDS gives:
    # NaN 9 5 4 3 1) (found by corpus script 104).
    res = _run(tmp_path, """
        X = matrix("3 1 4 1 5 9", 6, 1)
        X[2, 1] = 0 / 0
        print(toString(t(order(target=X, by=1, index.return=TRUE))))
        print(toString(t(order(target=X, by=1))))
        """)
    x = np.array([3, np.nan, 4, 1, 5, 9])
    idx = np.argsort(x, kind="stable")
    _expect_lines(res, _tostring(idx + 1) + _tostring(x[idx]))


def test_tostring_of_a_row_picked_by_a_computed_index(tmp_path: Path):
    # SystemDS 3.4.0: NullPointerException ("cacheData" is null) in toString(v[i, ]) with
    # i = as.integer(as.scalar(v[1, 1])) in this statement block; smaller variants of the block run fine
    # (found by corpus script 099).
    res = _run(tmp_path, """
        o = matrix(4, 1, 1)
        v = matrix("3 1 2", 3, 1)
        u = t(v) %*% v
        print(as.scalar(u))
        if (as.scalar(u) == 14) print("u is 14")
        d = as.scalar(v[1, 1]) / as.scalar(v[3, 1])
        print(d)
        i = as.integer(as.scalar(v[1, 1]))
        print(i)
        print(toString(v[i, ]))
        m = matrix(0, 3, 3)
        m[2, 2] = o
        m[1, 3] = as.scalar(o) / 8
        print(toString(m))
        print(toString(removeEmpty(target=o, margin="rows")))
        print(toString(order(target=o, by=1)))
        print(toString(table(o, o)))
        print(toString(diag(o)))
        print(toString(solve(o, o * 3)))
        print(toString(inv(o)))
        print(det(o))
        print(toString(o ^ 0.5))
        print(toString(ifelse(o > 3, o, 0)))
        print(toString(sqrt(o) + o %% 3))
        """)
    o = np.array([[4.0]])
    v = np.array([[3.0], [1.0], [2.0]])
    u = v.T @ v
    i = int(v[0, 0])
    m = np.zeros((3, 3))
    m[1, 1] = o[0, 0]
    m[0, 2] = o[0, 0] / 8
    tab = np.zeros((4, 4))
    tab[3, 3] = 1
    expected = ([java_double(u[0, 0]), "u is 14", java_double(v[0, 0] / v[2, 0]), str(i)] + _tostring(v[i - 1])
                + _tostring(m) + _tostring(o) + _tostring(o) + _tostring(tab) + _tostring(o)
                + _tostring(np.linalg.solve(o, 3 * o)) + _tostring(np.linalg.inv(o)) + [java_double(np.linalg.det(o))]
                + _tostring(o ** 0.5) + _tostring(np.where(o > 3, o, 0)) + _tostring(np.sqrt(o) + o % 3))
    _expect_lines(res, expected)
