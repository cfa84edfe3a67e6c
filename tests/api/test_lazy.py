"""The lazy Python API: inputs (zero-copy, sparse, pandas), operators and indexing, NumPy's protocols,
fusion and shared subexpressions reaching the compiler (checked from the run's statistics, as the
fusion tests do), errors at the Python line that built the expression, config, persist."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import lafuse as lf
from lafuse.errors import DMLRuntimeError, DMLStop, DMLValidationError

HERE = __file__


def _ran() -> list[str]:
    st = lf.last_stats()
    assert st is not None
    return [i.opcode for i in st.ran]


def test_dense_input_is_bound_without_a_copy():
    X = np.random.default_rng(1).random((50, 20))
    M = lf.matrix(X)
    assert np.shares_memory(M.node.value, X)
    from lafuse.api.emit import emit

    script = emit([(M * 2).node])
    (bound,) = script.bound.values()
    assert bound is M.node.value  # the compiler and runtime get the caller's array
    np.testing.assert_array_equal((M * 2).compute(), X * 2)
    assert np.shares_memory(lf.matrix(X[:, 0]).node.value, X) is False  # (a strided column: copied once)


@pytest.mark.parametrize("x, why", [
    (np.asfortranarray(np.ones((4, 3))), "F order"),
    (np.arange(12).reshape(4, 3), "integers"),
    (np.ones((4, 3), dtype=np.float32), "float32"),
    ([[1, 2, 3], [4, 5, 6]], "nested lists"),
])
def test_other_inputs_are_converted_once(x, why):
    M = lf.matrix(x)
    v = M.node.value
    assert v.dtype == np.float64 and v.flags.c_contiguous, why
    np.testing.assert_array_equal(M.compute(), np.asarray(x, dtype=float))


def test_a_vector_is_a_column_and_bad_input_is_refused():
    assert lf.matrix(np.arange(5.0)).shape == (5, 1)
    with pytest.raises(ValueError, match="complex"):
        lf.matrix(np.ones(3, dtype=complex))
    with pytest.raises(ValueError, match="3 dimensions"):
        lf.matrix(np.ones((2, 2, 2)))


def test_sparse_input_stays_sparse_through_the_plan():
    S = sp.random(300, 200, density=0.01, random_state=2, format="coo")
    M = lf.matrix(S)
    assert sp.issparse(M.node.value) and M.node.value.format == "csr"
    with lf.config(stats=True, codegen=False):
        got = (M * 3).compute()
    assert sp.issparse(got)  # the element-wise result too: no densification on the way
    np.testing.assert_allclose(got.toarray(), S.toarray() * 3)
    v = np.arange(200.0)
    np.testing.assert_allclose((M @ v).compute(), S.toarray() @ v.reshape(-1, 1))


def test_pandas_input():
    df = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]})
    np.testing.assert_allclose(lf.matrix(df).sum(axis=0).compute(), [[6.0, 4.5]])
    np.testing.assert_allclose(lf.matrix(df["b"]).compute(), [[0.5], [1.5], [2.5]])


def test_fusion_reaches_the_api():
    rng = np.random.default_rng(4)
    X, Y, Z = (lf.matrix(rng.random((200, 100))) for _ in range(3))
    with lf.config(stats=True, fusion="fuse-all"):
        got = lf.compute((X * Y * Z).sum())[0]
    ran = _ran()
    assert ran.count("spoofCell") == 1 and not {"*", "sum"} & set(ran), ran
    x, y, z = (np.asarray(m) for m in (X, Y, Z))
    assert got == pytest.approx(float((x * y * z).sum()), rel=1e-12)


def test_two_outputs_share_a_subexpression():
    rng = np.random.default_rng(5)
    A, B = lf.matrix(rng.random((60, 40))), lf.matrix(rng.random((40, 30)))
    P = A @ B
    with lf.config(stats=True, codegen=False):
        s, m = lf.compute(P.sum(), (P * 2).max())
    assert _ran().count("%*%") == 1
    p = np.asarray(A) @ np.asarray(B)
    assert s == pytest.approx(p.sum()) and m == pytest.approx((p * 2).max())


def test_operators_match_numpy():
    rng = np.random.default_rng(6)
    a, b = rng.uniform(-2, 2, (5, 4)), rng.uniform(0.5, 2, (5, 4))
    A, B = lf.matrix(a), lf.matrix(b)
    r = rng.random((1, 4))
    cases = [
        (A + B, a + b), (A - 1, a - 1), (2 * A, 2 * a), (A / B, a / b), (B ** 2, b ** 2), (2 ** A, 2 ** a),
        (-A, -a), (abs(A), np.abs(a)), (A > 0, (a > 0) * 1.0), (A <= B, (a <= b) * 1.0), (A == A, np.ones((5, 4))),
        ((A > 0) & (B > 1), ((a > 0) & (b > 1)) * 1.0), ((A > 0) | (B > 1), ((a > 0) | (b > 1)) * 1.0),
        (~(A > 0), (a <= 0) * 1.0), (A // B, a // b), (A % B, a % b), (7 // B, 7 // b), (np.floor_divide(A, B), a // b),
        (-7 % B, -7 % b), (A % -1.5, a % -1.5), (np.remainder(A, B), a % b), (A.T @ B, a.T @ b), (A + r, a + r),
        (r * A, r * a), (a + B, a + b), (A.sum(axis=0), a.sum(axis=0, keepdims=True)),
        (A.mean(axis=1), a.mean(axis=1, keepdims=True)), (A.min(), a.min()), (A.max(axis=0), a.max(0, keepdims=True)),
        (A.var(), a.var()), (A.std(axis=0), a.std(axis=0, keepdims=True)), (A.var(ddof=1), a.var(ddof=1)),
        (A.prod(), a.prod()), (A.reshape(2, 10), a.reshape(2, 10)), (A.T.shape, (4, 5)),
    ]
    for k, (got, want) in enumerate(cases):
        got = got.compute() if hasattr(got, "compute") else got
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"case {k}")


def test_indexing_is_pythons():
    a = np.arange(30.0).reshape(5, 6)
    A = lf.matrix(a)
    cases = [(A[1:3], a[1:3]), (A[:, 2:], a[:, 2:]), (A[-2:, :-1], a[-2:, :-1]), (A[1], a[1:2]),
             (A[:, -1], a[:, -1:]), (A[::1, 0:1], a[:, 0:1])]
    for k, (got, want) in enumerate(cases):
        np.testing.assert_array_equal(got.compute(), want, err_msg=f"case {k}")
    assert isinstance(A[2, 3], lf.Scalar) and A[2, 3].compute() == a[2, 3] and A[-1, -1].compute() == 29.0
    i = A[0, 2]  # a lazy scalar index (2.0): row 2
    np.testing.assert_array_equal(A[i].compute(), a[2:3])
    np.testing.assert_array_equal(A[:, i:A[0, 4]].compute(), a[:, 2:4])
    with pytest.raises(IndexError, match="out of bounds"):
        A[5]
    with pytest.raises(IndexError, match="strided"):
        A[::2]
    with pytest.raises(IndexError, match="empty"):
        A[3:3]
    with pytest.raises(IndexError, match="masks"):
        A[A > 3]
    with pytest.raises(TypeError, match="immutable"):
        A[0, 0] = 1.0
    with pytest.raises(TypeError, match="not iterable"):
        list(A)


def test_numpy_protocols():
    a = np.random.default_rng(7).uniform(0.1, 2, (6, 3))
    A = lf.matrix(a)
    e = np.exp(A)
    assert isinstance(e, lf.Matrix)  # lazy
    np.testing.assert_allclose(np.asarray(e), np.exp(a))
    for got, want in [(np.log(A), np.log(a)), (np.sqrt(A), np.sqrt(a)), (np.log2(A), np.log2(a)),
                      (np.maximum(A, 1.0), np.maximum(a, 1.0)), (np.square(A), a ** 2),
                      (np.sum(A, axis=0), a.sum(0, keepdims=True)), (np.transpose(A), a.T),
                      (np.where(A > 1, A, 0.0), np.where(a > 1, a, 0.0)), (np.hstack([A, A]), np.hstack([a, a])),
                      (np.vstack([A, a]), np.vstack([a, a])), (a.T @ A, a.T @ a), (np.dot(A.T, A), a.T @ a)]:
        assert isinstance(got, lf.Matrix)
        np.testing.assert_allclose(got.compute(), want, rtol=1e-12)
    assert isinstance(np.mean(A), lf.Scalar) and float(np.mean(A)) == pytest.approx(a.mean())
    assert np.linalg.norm(A) == pytest.approx(np.linalg.norm(a))  # no lazy form: computed, then NumPy's
    with pytest.raises(TypeError, match="np.arctan2 has no lazy"):
        np.arctan2(A, A)
    with pytest.raises(TypeError, match="np.add.reduce"):
        np.add.reduce(A)
    assert np.shape(A) == (6, 3) and np.ndim(A) == 2


def test_scalars():
    A = lf.matrix(np.full((3, 3), 2.0))
    s = A.sum()
    assert isinstance(s, lf.Scalar) and isinstance(s * 2 + 1, lf.Scalar)
    assert float(s) == 18.0 and int(s / 4) == 4 and bool(s > 10)
    np.testing.assert_allclose((A * s).compute(), np.full((3, 3), 36.0))
    assert (np.exp(s) / np.exp(s)).compute() == 1.0


def test_builtins_and_library_functions():
    rng = np.random.default_rng(8)
    a = rng.random((8, 8)) + 8 * np.eye(8)
    A = lf.matrix(a)
    vals, vecs = lf.eigen(A + A.T)
    assert isinstance(vals, lf.Matrix) and isinstance(vecs, lf.Matrix)
    np.testing.assert_allclose(np.sort(vals.compute().ravel()), np.linalg.eigvalsh(a + a.T), rtol=1e-10)
    np.testing.assert_allclose(lf.solve(A, lf.ones((8, 1))).compute(), np.linalg.solve(a, np.ones((8, 1))))
    assert lf.as_scalar(A[0:1, 0:1]).compute() == a[0, 0]
    np.testing.assert_array_equal(lf.order(lf.matrix([3.0, 1.0, 2.0]), index_return=True).compute(), [[2], [3], [1]])
    X = rng.random((40, 3))
    y = (X @ [1.0, -2.0, 0.5] > 0).astype(float) * 2 - 1
    w = lf.l2svm(X, y.reshape(-1, 1))
    assert isinstance(w, lf.Matrix)
    from lafuse.compiler import run_dml

    want = run_dml("w = l2svm(X=X, Y=y)", inputs={"X": X, "y": y.reshape(-1, 1)}, outputs=["w"])["w"]
    np.testing.assert_allclose(w.compute(), want, rtol=1e-12)
    with pytest.raises(TypeError, match="no parameter bogus"):
        lf.l2svm(X, y, bogus=1)
    with pytest.raises(AttributeError, match="no DML builtin or library function"):
        lf.no_such_function  # noqa: B018


def test_shape_errors_are_raised_where_the_expression_is_built():
    A, B = lf.matrix(np.ones((3, 4))), lf.matrix(np.ones((3, 5)))
    with pytest.raises(lf.ShapeError) as err:
        A @ B  # the line below is named  # noqa: B018
    line = sys._getframe().f_lineno - 1
    assert err.value.span.file == HERE and err.value.span.line == line
    assert f"test_lazy.py:{line}:9: matrix product of a 3x4 and a 3x5 matrix" in str(err.value)
    assert isinstance(err.value, DMLValidationError) and isinstance(err.value, ValueError)
    with pytest.raises(lf.ShapeError, match="element-wise '\\+' of a 3x4 and a 3x5"):
        A + B  # noqa: B018


def test_run_time_errors_name_the_python_line():
    singular = lf.solve(lf.zeros((3, 3)), lf.ones((3, 1)))
    line = sys._getframe().f_lineno - 1
    with pytest.raises(DMLRuntimeError) as err:
        singular.compute()
    assert err.value.span.file == HERE and err.value.span.line == line
    assert "singular" in str(err.value) and "(in solve(" in str(err.value)
    M = lf.matrix(np.ones((4, 2)))
    k = M.sum()  # 8: a lazy index out of range is found at run time
    bad = M[k]
    line = sys._getframe().f_lineno - 1
    with pytest.raises(DMLRuntimeError) as err:
        bad.compute()
    assert err.value.span.line == line


def test_config():
    with pytest.raises(TypeError, match="unknown option"):
        lf.config(codegn=False)
    with pytest.raises(ValueError, match="'fusion' must be one of"):
        lf.config(fusion="all")
    from lafuse import config as cfgmod

    class Client:  # (the shape of distributed.Client that lf.config reads)
        class scheduler:  # noqa: N801
            address = "tcp://127.0.0.1:8786"

    with lf.config(codegen=False, scheduler=Client()):
        assert not cfgmod.get().codegen and cfgmod.get().scheduler == "tcp://127.0.0.1:8786"
        with lf.config(disabled_rules=("cse",)):
            assert cfgmod.get().disabled_rules == ("cse",) and not cfgmod.get().codegen
    assert cfgmod.get().codegen and cfgmod.get().scheduler is None
    with pytest.raises(TypeError, match="distributed.Client"):
        lf.config(scheduler=3)


def test_persist_keeps_a_python_loop_short():
    rng = np.random.default_rng(9)
    x, y = rng.random((100, 5)), rng.random((100, 1))
    X, Y = lf.matrix(x), lf.matrix(y)
    w, w_np = lf.zeros((5, 1)), np.zeros((5, 1))
    for _ in range(20):
        w = (w - 0.01 * (X.T @ (X @ w - Y))).persist()
        w_np = w_np - 0.01 * (x.T @ (x @ w_np - y))
        assert w.node.op == "input"  # the history is not kept
    np.testing.assert_allclose(w.compute(), w_np, rtol=1e-12)
    s = (X.sum() * 2).persist()
    assert s.node.op == "input" and s.compute() == pytest.approx(2 * x.sum())  # (bound: scripts stay the same)


def test_a_loop_compiles_its_script_once(monkeypatch):
    from lafuse.compiler import Compiler

    compiles: list[str] = []
    real = Compiler.compile_text

    def counted(self, text, *a, **k):
        compiles.append(text)
        return real(self, text, *a, **k)

    monkeypatch.setattr(Compiler, "compile_text", counted)
    rng = np.random.default_rng(10)
    X, Y = lf.matrix(rng.random((80, 6))), lf.matrix(rng.random((80, 1)))
    w, b = lf.matrix(rng.random((6, 1))), lf.matrix(np.ones((2, 2))).sum().persist()
    compiles.clear()
    for _ in range(12):
        r = X @ w + b - Y
        w, b = lf.persist(w - 0.01 * (X.T @ r), b - 0.01 * r.sum())
    assert len(compiles) == 1  # the same script, inputs of the same sizes and non-zeros: compiled once
    lf.persist(w * 2)
    assert len(compiles) == 2


def test_statement_builtins_run_at_once(tmp_path, capsys):
    A = lf.matrix(np.arange(4.0).reshape(2, 2))
    lf.print("total: " + A.sum())
    assert capsys.readouterr().out == "total: 6.0\n"
    path = tmp_path / "a.csv"
    lf.write(A * 2, str(path), format="csv")
    np.testing.assert_array_equal(lf.read(str(path)).compute(), np.arange(4.0).reshape(2, 2) * 2)
    assert lf.read(str(path)).shape == (2, 2)  # (the .mtd file: known when built)
    with pytest.raises(DMLStop, match="no more"):
        lf.stop("no more")


def test_repr_does_not_compute():
    A = lf.matrix(np.ones((2, 3)))
    assert repr(A.T @ A + 1) == "lafuse.Matrix((t(<2x3 ndarray>) %*% <2x3 ndarray>) + 1)"


def test_floor_division_and_remainder_are_pythons_on_special_values():
    """DML's %/% and %% truncate (C's fmod); Python's // and % floor: also at 0, Inf and NaN."""
    vals = np.array([-3.0, -0.5, 0.0, 2.5, np.inf, -np.inf, np.nan])
    a, b = np.meshgrid(vals, vals)
    A, B = lf.matrix(a), lf.matrix(b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((A % B).compute(), a % b)
        np.testing.assert_array_equal((A // B).compute(), a // b)
