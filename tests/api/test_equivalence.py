"""Hypothesis-generated expressions, three ways: the Python API (``lf``), the same expression as a DML
script run by ``run_dml``, and NumPy with DML's semantics (2-D, broadcasting of row and column
vectors, comparisons as 0/1). Leaves: two n x n matrices, a column, a row and a scalar; NaN and Inf
in dense leaves, or sparse leaves (finite: a sparse-safe product skips the zeros a NaN would meet,
as in SystemDS, where NumPy's 0 * Inf is NaN); n = 1 makes every leaf 1 x 1."""

from __future__ import annotations

import io
import operator

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lafuse as lf
from lafuse.compiler import run_dml
from lafuse.config import Config

# shape classes: M n x n, C n x 1, R 1 x n, S scalar
_ARITH = ["+", "-", "*", "/"]
_BIN = [*_ARITH, "<", "==", "!=", ">="]  # (on scalars DML's comparisons are booleans: not mixed with arithmetic)


def exprs(shape: str, depth: int) -> st.SearchStrategy:
    leaves = {"M": st.sampled_from([("leaf", "X"), ("leaf", "Y")]), "C": st.just(("leaf", "v")),
              "R": st.just(("leaf", "w")), "S": st.sampled_from([("leaf", "s"), ("lit", 2.0), ("lit", -0.5)])}
    if depth == 0:
        return leaves[shape]
    sub = lambda s: exprs(s, depth - 1)  # noqa: E731
    options = [leaves[shape],
               st.tuples(st.just("bin"), st.sampled_from(_BIN if shape != "S" else _ARITH), sub(shape), sub(shape)),
               st.tuples(st.just("un"), st.sampled_from(["neg", "abs", "exp"]), sub(shape))]
    if shape == "M":
        options += [st.tuples(st.just("bin"), st.sampled_from(_BIN), sub("M"), sub(s)) for s in "CRS"]
        options += [st.tuples(st.just("bin"), st.sampled_from(_BIN), sub(s), sub("M")) for s in "CS"]
        options += [st.tuples(st.just("mm"), sub("M"), sub("M")), st.tuples(st.just("t"), sub("M"))]
    if shape == "C":
        options += [st.tuples(st.just("agg"), st.sampled_from(["sum", "mean", "max"]), st.just(1), sub("M")),
                    st.tuples(st.just("mm"), sub("M"), sub("C")), st.tuples(st.just("col"), sub("M"))]
    if shape == "R":
        options += [st.tuples(st.just("agg"), st.sampled_from(["sum", "min"]), st.just(0), sub("M")),
                    st.tuples(st.just("mm"), sub("R"), sub("M")), st.tuples(st.just("t"), sub("C"))]
    if shape == "S":
        options += [st.tuples(st.just("agg"), st.sampled_from(["sum", "mean", "max"]), st.none(), sub("M")),
                    st.tuples(st.just("elem"), sub("M"))]
    return st.one_of(options)


_BIN_FN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "<": operator.lt,
           "==": operator.eq, "!=": operator.ne, ">=": operator.ge}
_UN_FN = {"neg": operator.neg, "abs": np.abs, "exp": np.exp}


def _eval(e, env, lazy: bool):
    """``e`` on the Python API's lazy values (``lazy``) or on NumPy arrays with DML's semantics (0/1
    comparisons, aggregates keeping both dimensions): the same Python, NumPy's protocols between."""
    k = e[0]
    if k == "leaf":
        return env[e[1]]
    if k == "lit":
        return e[1]
    if k == "bin":
        a, b = (np.float64(x) if isinstance(x, float) else x for x in (_eval(e[2], env, lazy), _eval(e[3], env, lazy)))
        with np.errstate(all="ignore"):  # (two Python numbers: NumPy's division by zero, not Python's error)
            r = _BIN_FN[e[1]](a, b)
        return r.astype(float) if isinstance(r, np.ndarray) else (float(r) if isinstance(r, np.bool_) else r)
    if k == "un":
        return _UN_FN[e[1]](_eval(e[2], env, lazy))
    if k == "mm":
        return _eval(e[1], env, lazy) @ _eval(e[2], env, lazy)
    x = _eval(e[-1], env, lazy)
    if k == "t":
        return x.T
    if k == "agg":
        if lazy:
            return getattr(x, e[1])(axis=e[2])
        f = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[e[1]]
        return float(f(x)) if e[2] is None else f(x, axis=e[2], keepdims=True)
    if k == "col":
        return x[:, -1:]
    if k == "elem":
        return x[0, -1] if lazy else float(x[0, -1])
    raise AssertionError(e)


def _dml(e, pre: list[str]) -> str:
    """The DML text of ``e``; ``pre`` gets the statements of what it indexes (DML indexes variables)."""
    k = e[0]
    if k == "leaf":
        return e[1]
    if k == "lit":
        return f"({e[1]!r})"
    if k == "bin":
        return f"({_dml(e[2], pre)} {e[1]} {_dml(e[3], pre)})"
    if k == "un":
        return {"neg": "(-{})", "abs": "abs({})", "exp": "exp({})"}[e[1]].format(_dml(e[2], pre))
    if k == "mm":
        return f"({_dml(e[1], pre)} %*% {_dml(e[2], pre)})"
    if k == "t":
        return f"t({_dml(e[1], pre)})"
    if k == "agg":
        name = e[1] if e[2] is None else {0: "col", 1: "row"}[e[2]] + {"sum": "Sums", "mean": "Means", "max": "Maxs",
                                                                       "min": "Mins"}[e[1]]
        return f"{name}({_dml(e[3], pre)})"
    if k in ("col", "elem"):
        var = f"tmp{len(pre)}"
        pre.append(f"{var} = {_dml(e[1], pre)}")
        return f"{var}[, ncol({var})]" if k == "col" else f"as.scalar({var}[1, ncol({var})])"
    raise AssertionError(e)


def dml_script(e) -> str:
    pre: list[str] = []
    out = _dml(e, pre)
    return "\n".join([*pre, f"out = {out}"])


def _data(draw, n: int, sparse: bool, special: bool) -> dict:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = {}
    for name, shape in (("X", (n, n)), ("Y", (n, n)), ("v", (n, 1)), ("w", (1, n))):
        a = rng.uniform(-2, 2, shape).round(2)
        if sparse and name in ("X", "Y"):
            a[rng.random(shape) < 0.8] = 0.0
        if special and not sparse:
            mask = rng.random(shape)
            a[mask < 0.1] = np.nan
            a[(mask >= 0.1) & (mask < 0.15)] = np.inf
            a[(mask >= 0.15) & (mask < 0.2)] = -np.inf
        out[name] = a
    out["s"] = round(float(rng.uniform(-3, 3)), 2) if not special else draw(st.sampled_from([np.nan, np.inf, 1.5]))
    return out


def _close(got, want, what: str) -> None:
    if sp.issparse(got):
        got = got.toarray()
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=what)


@st.composite
def cases(draw):
    shape = draw(st.sampled_from("MCRS"))
    e = draw(exprs(shape, 3))
    n = draw(st.sampled_from([1, 4, 7]))
    sparse = draw(st.booleans()) and n > 1
    special = draw(st.booleans()) and not sparse
    return e, _data(draw, n, sparse, special), sparse


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_api_equals_dml_and_numpy(case):
    e, data, sparse = case
    cfg = Config(codegen=False)
    bound = {k: (sp.csr_array(v) if sparse and k in ("X", "Y") else v) for k, v in data.items()}
    env = {k: (lf.matrix(v) if not isinstance(v, float) else v) for k, v in bound.items()}
    with np.errstate(all="ignore"):
        want = _eval(e, data, False)
    with lf.config(codegen=False):
        got = lf.compute(_eval(e, env, True))[0]
    script = dml_script(e)
    dml = run_dml(script, inputs=bound, outputs=("out",), cfg=cfg, out=io.StringIO())["out"]
    _close(got, dml, f"api vs DML: {script}")
    _close(got, want, f"api vs NumPy: {script}")


@pytest.mark.parametrize("policy", ["fuse-all", "cost"])
def test_fused_api_expressions_equal_numpy(policy):
    """The same expressions with fusion on (the generated kernels)."""
    rng = np.random.default_rng(3)
    X, Y = rng.random((40, 30)), rng.random((40, 30))
    v = rng.random((40, 1))
    x, y, c = lf.matrix(X), lf.matrix(Y), lf.matrix(v)
    with lf.config(fusion=policy):
        got = lf.compute((x * y + c).sum(), np.exp(x - y).max(axis=0), ((x > 0.5) * y).sum(axis=1))
    _close(got[0], float((X * Y + v).sum()), "sum")
    _close(got[1], np.exp(X - Y).max(axis=0, keepdims=True), "colMaxs")
    _close(got[2], ((X > 0.5) * Y).sum(axis=1, keepdims=True), "rowSums")
