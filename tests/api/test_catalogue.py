"""Every builtin of the catalogue (``lang.builtins``) and every function of the algorithm library
(``lafuse/builtins``) is callable from Python: each called as ``lf.<name>(...)`` and as the same DML
call run by ``run_dml``, the results equal. The table below must name every catalogue entry (a new
builtin fails ``test_the_table_covers_the_catalogue`` until it has a call here)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

import lafuse as lf
from lafuse.api.functions import library_names
from lafuse.compiler import run_dml
from lafuse.errors import DMLError, DMLRuntimeError
from lafuse.lang import builtins as B
from lafuse.runtime.values import Frame, ListValue

RNG = np.random.default_rng(11)
_X = RNG.uniform(0.1, 1.0, (4, 3))
_S = _X.T @ _X + np.eye(3)  # symmetric positive definite
FIXTURES = {"X": _X, "S": _S, "v": np.array([[3.0], [1.0], [2.0], [1.0]]), "b": np.ones((3, 1)),
            "G": np.array([[1.0], [2.0], [1.0], [2.0]]), "r": np.array([[1.0, -1.0, 2.0]]), "one": np.array([[4.0]]),
            "s": 0.5, "i": 2}

# name -> (positional args, keyword args); "@name" is a fixture, anything else a literal
CALLS: dict[str, tuple[tuple, dict]] = {
    **{n: (("@X",), {}) for n in ["abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "exp", "floor", "round",
                                  "sign", "sin", "sinh", "sqrt", "tan", "tanh", "isNaN", "isInf", "isNA", "log",
                                  "sum", "mean", "prod", "var", "sd", "min", "max", "nrow", "ncol",
                                  "length", "t", "rev", "cumsum", "cumprod", "cummin", "cummax", "colMaxs",
                                  "colMeans", "colMins", "colProds", "colSds", "colSums", "colVars", "rowMaxs",
                                  "rowMeans", "rowMins", "rowProds", "rowSds", "rowSums", "rowVars", "rowIndexMax",
                                  "rowIndexMin", "as.matrix"]},
    **{n: (("@S",), {}) for n in ["trace", "inv", "cholesky", "det", "eigen", "svd", "qr", "lu", "diag"]},
    "solve": (("@S", "@b"), {}),
    "cbind": (("@X", "@v"), {}), "append": (("@X", "@v"), {}), "rbind": (("@X", "@X"), {}),
    "order": (("@v",), {"by": 1, "decreasing": True, "index_return": True}),
    "removeEmpty": (("@G",), {"margin": "rows", "select": "@v"}),
    "replace": (("@G",), {"pattern": 2.0, "replacement": 7.0}),
    "table": (("@G", "@v"), {}),
    "aggregate": ((), {"target": "@v", "groups": "@G", "fn": "sum"}),
    "outer": (("@v", "@r", "*"), {}),
    "contains": ((), {"target": "@G", "pattern": 2.0}),
    "lower.tri": ((), {"target": "@S", "diag": True, "values": True}),
    "upper.tri": ((), {"target": "@S", "diag": False, "values": True}),
    "matrix": (("@X", 2, 6), {}),
    "rand": ((), {"rows": 3, "cols": 2, "min": -1.0, "max": 1.0, "seed": 7}),
    "Rand": ((), {"rows": 2, "cols": 2, "seed": 3}),
    "seq": ((1, 9, 2), {}),
    "sample": ((10, 4, False, 5), {}),
    "ifelse": (("@X", 1.0, 0.0), {}),
    "xor": ((True, False), {}),
    "bitwAnd": ((12, 10), {}),
    "as.scalar": (("@one",), {}),
    "castAsScalar": (("@one",), {}),
    "as.double": (("@i",), {}), "as.integer": ((3.7,), {}), "as.logical": ((1,), {}),
    "as.frame": (("@X",), {}), "as.list": (("@s",), {}), "list": (("@X", "@s"), {}),
    "quantile": (("@v", 0.5), {}), "median": (("@v",), {}),
    "cdf": ((), {"target": 1.2, "dist": "normal", "mean": 0.0, "sd": 1.0}),
    "icdf": ((), {"target": 0.9, "dist": "normal"}),
    "pnorm": ((0.3,), {}), "qnorm": ((0.7,), {"mean": 1.0, "sd": 2.0}), "pt": ((1.0,), {"df": 3}),
    "qt": ((0.9,), {"df": 3}), "pchisq": ((2.0,), {"df": 3}), "qchisq": ((0.5,), {"df": 3}),
    "pf": ((1.0,), {"df1": 2, "df2": 3}), "qf": ((0.5,), {"df1": 2, "df2": 3}), "pexp": ((1.0,), {"rate": 2.0}),
    "qexp": ((0.5,), {"rate": 2.0}),
    "toString": (("@v",), {}),
    "exists": (("X",), {}),
    "time": ((), {}),
    # statements and sources: their own tests below
    "print": ((), {}), "stop": ((), {}), "assert": ((), {}), "write": ((), {}), "read": ((), {}),
}
_STATEMENTS_AND_SOURCES = {"print", "stop", "assert", "write", "read", "time"}
_OWN = {"matrix": lambda a: lf.matrix(FIXTURES["X"]).reshape(2, 6),  # (lf.matrix binds NumPy; DML's matrix())
        "seq": lambda a: lf.seq(1, 9, 2), "rand": lambda a: lf.rand(3, 2, -1.0, 1.0, seed=7)}


def _py(name: str) -> str:
    return name.replace(".", "_")


def _arg(v):
    return FIXTURES[v[1:]] if isinstance(v, str) and v.startswith("@") else v


def _text(v) -> str:
    if isinstance(v, str) and v.startswith("@"):
        return v[1:]
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def _inputs() -> dict:
    return {k: v for k, v in FIXTURES.items()}


def _same(got, want, what: str) -> None:
    if isinstance(want, ListValue):
        assert isinstance(got, ListValue) and len(got.items) == len(want.items), what
        for g, w in zip(got.items, want.items):
            _same(g, w, what)
    elif isinstance(want, Frame):
        assert isinstance(got, Frame) and got.columns == want.columns, what
    elif isinstance(want, (str, bool)):
        assert got == want, what
    else:
        g = got.toarray() if sp.issparse(got) else got
        w = want.toarray() if sp.issparse(want) else want
        np.testing.assert_allclose(np.asarray(g, dtype=float), np.asarray(w, dtype=float), rtol=1e-12,
                                   equal_nan=True, err_msg=what)


def test_the_table_covers_the_catalogue():
    assert set(CALLS) == set(B.SPECS), sorted(set(B.SPECS) ^ set(CALLS))


@pytest.mark.parametrize("name", sorted(set(CALLS) - _STATEMENTS_AND_SOURCES))
def test_each_builtin_from_python_equals_dml(name):
    args, kwargs = CALLS[name]
    spec = B.lookup(name)
    assert spec is not None
    fn = getattr(lf, _py(name))
    got = _OWN[name](None) if name in _OWN else fn(*[_arg(a) for a in args],
                                                  **{k: _arg(v) for k, v in kwargs.items()})
    dml_args = ", ".join([_text(a) for a in args] + [f"{k.replace('_', '.') if k == 'index_return' else k}="
                                                     f"{_text(v)}" for k, v in kwargs.items()])
    if spec.nout > 1:
        outs = [f"o{k}" for k in range(spec.nout)]
        want = run_dml(f"[{', '.join(outs)}] = {name}({dml_args})", inputs=_inputs(), outputs=outs,
                       out=io.StringIO())
        assert isinstance(got, tuple) and len(got) == spec.nout
        values = lf.compute(*got)
        for o, v in zip(outs, values):
            _same(v, want[o], f"{name} output {o}")
        return
    try:
        want = run_dml(f"out = {name}({dml_args})", inputs=_inputs(), outputs=["out"], out=io.StringIO())["out"]
    except DMLError as e:  # (a builtin the runtime lacks: the same error from Python)
        with pytest.raises(type(e)) as err:
            got.compute()
        assert err.value.message.startswith(e.message)
        return
    _same(got.compute(), want, name)


def test_statement_and_source_builtins(tmp_path, capsys):
    lf.print("x is " + lf.matrix(FIXTURES["X"]).sum())
    assert capsys.readouterr().out == f"x is {FIXTURES['X'].sum()}\n"
    check = getattr(lf, "assert")  # (a Python keyword: getattr)
    check(lf.matrix(FIXTURES["X"]).sum() > 0)
    with pytest.raises(DMLRuntimeError):
        check(lf.matrix(FIXTURES["X"]).sum() < 0)
    path = str(tmp_path / "x.bin")
    lf.write(lf.matrix(FIXTURES["X"]), path, format="binary")
    np.testing.assert_array_equal(lf.read(path, format="binary").compute(), FIXTURES["X"])
    t = lf.time()
    assert isinstance(t, lf.Scalar) and t.compute() > 0


@pytest.mark.parametrize("name", library_names())
def test_each_library_function_is_callable(name):
    fn = getattr(lf, name)
    assert callable(fn) and name in (fn.__doc__ or "")


def test_library_functions_from_python_equal_dml():
    """A single-result and a several-result library function, with positional and named arguments."""
    X = RNG.random((30, 4))
    y = (X @ [1.0, -1.0, 0.5, 0.2] > 0.3).astype(float).reshape(-1, 1) + 1
    beta = lf.lm(X, y, reg=1e-3)
    want = run_dml("beta = lm(X=X, y=y, reg=1e-3)", inputs={"X": X, "y": y}, outputs=["beta"],
                   out=io.StringIO())["beta"]
    _same(beta.compute(), want, "lm")
    C, Y = lf.kmeans(X, k=2, runs=1, seed=3)
    wc = run_dml("[C, Y] = kmeans(X=X, k=2, runs=1, seed=3)", inputs={"X": X}, outputs=["C", "Y"],
                 out=io.StringIO())
    got = lf.compute(C, Y)
    _same(got[0], wc["C"], "kmeans C")
    _same(got[1], wc["Y"], "kmeans Y")


def test_no_lafuse_module_hides_a_builtin():
    """``lf.<name>`` reaches a builtin unless ``lafuse.<name>`` is a module (a subpackage not imported
    yet is not looked up as a builtin): no module may take a builtin's name."""
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(lf.__path__)}
    assert not modules & (set(B.SPECS) | set(library_names()))


def test_importing_a_subpackage_does_not_load_the_api():
    """``from lafuse import fusion`` (the compiler's deferred imports) asks the package's ``__getattr__``
    first; it must not import the Python API for it (``lafuse run`` does not load the API)."""
    import subprocess
    import sys

    code = ("import sys, lafuse; from lafuse import fusion, codegen; "
            "print('lafuse.api' in sys.modules, fusion.__name__, codegen.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "lafuse.fusion", "lafuse.codegen"]
