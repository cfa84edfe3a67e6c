"""Sum-product rewrites (paper 001 §3) executed: each elementary rewrite fires (rewrite.sumproduct.rule.FIRED
names it) and its result equals the expression as written (sum_product off) on dense, sparse, NaN and
Inf inputs; random sum-product expressions are never costlier after the rule and equal in value.

Values: the exact rewrites (selections, join elimination) equal the written plan on every input,
NaN and ±Inf included. The ones that regroup products and sums (aggregation push-down and
elimination, join ordering) equal it on finite inputs; with a NaN or Inf input, wherever both are
numbers: a NaN or Inf may meet a zero in one plan and not in the other (``Inf * 0`` formed, or a
structural zero of a sparse operand skipping it), as when SystemDS applies them
(rewrite.sumproduct.plans).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lafuse.compiler import Compiler, run_dml
from lafuse.config import Config
from lafuse.rewrite.sumproduct import rule as R

EXACT = ("selection push-down", "join elimination")

# name -> (script computing out, the rewrites it must report, inputs' shapes)
CASES = {
    "sum_wh": ("out = sum(W %*% H)", {"aggregation push-down"}, {"W": (300, 10), "H": (10, 250)}),
    "colsums_wh": ("out = colSums(W %*% H)", {"aggregation push-down"}, {"W": (300, 10), "H": (10, 250)}),
    "rowsums_wh": ("out = rowSums(W %*% H)", {"aggregation push-down"}, {"W": (300, 10), "H": (10, 250)}),
    "scaled": ("out = sum(2.5 * (W %*% H))", {"aggregation push-down"}, {"W": (300, 10), "H": (10, 250)}),
    "trace": ("out = trace(X %*% Y)", {"selection push-down"}, {"X": (200, 150), "Y": (150, 200)}),
    "diag": ("out = diag(X %*% Y)", {"selection push-down"}, {"X": (200, 150), "Y": (150, 200)}),
    "rix": ("P = X %*% Y\nout = P[3:5, 2:4]", {"selection push-down"}, {"X": (200, 150), "Y": (150, 200)}),
    "nonzeros": ("out = colSums(X * (X != 0))", {"join elimination"}, {"X": (40, 30)}),
    "ones": ("out = X * (v %*% matrix(1, rows=1, cols=30))", {"aggregation elimination"},
             {"X": (40, 30), "v": (40, 1)}),
    "diagv": ("out = diag(v) %*% X", {"aggregation elimination"}, {"X": (40, 30), "v": (40, 1)}),
    "trace3": ("out = trace(X %*% Y %*% Z)", {"join ordering"}, {"X": (40, 40), "Y": (40, 40), "Z": (40, 40)}),
}


def _inputs(shapes: dict[str, tuple[int, int]], kind: str, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    out: dict[str, object] = {}
    for k, (r, c) in shapes.items():
        a = rng.uniform(-1, 2, (r, c))
        if kind in ("sparse", "nan_sparse"):
            a[rng.random((r, c)) < 0.85] = 0.0
        if kind in ("nan", "nan_sparse"):
            a[rng.integers(r), rng.integers(c)] = np.nan
        if kind == "inf":
            a[rng.integers(r), rng.integers(c)] = np.inf
            a[rng.integers(r), rng.integers(c)] = -np.inf
        if kind == "zeros":
            a[:] = 0.0
        out[k] = sp.csr_matrix(a) if kind in ("sparse", "nan_sparse") and min(r, c) > 1 else a
    return out


def _run(script: str, inputs: dict[str, object], cfg: Config) -> tuple[np.ndarray, list[R.Fired]]:
    before = len(R.FIRED)
    got = run_dml(script, inputs=inputs, outputs=("out",), cfg=cfg, out=io.StringIO())["out"]
    val = got.toarray() if sp.issparse(got) else np.asarray(got, dtype=float)
    return np.atleast_2d(val), R.FIRED[before:]


def _agree(rewritten: np.ndarray, written: np.ndarray, exact: bool) -> None:
    assert rewritten.shape == written.shape
    nan = np.isnan(written)
    if not exact:  # where both are numbers
        nan |= np.isnan(rewritten)
    np.testing.assert_array_equal(np.isnan(rewritten) & ~nan, np.zeros_like(nan))
    np.testing.assert_allclose(rewritten[~nan], written[~nan], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["dense", "sparse", "nan", "nan_sparse", "inf", "zeros"])
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("codegen", [False, True], ids=["unfused", "fused"])
def test_each_rewrite_fires_and_keeps_the_value(name: str, kind: str, codegen: bool):
    script, names, shapes = CASES[name]
    inputs = _inputs(shapes, kind, seed=len(name))
    got, fired = _run(script, inputs, Config(codegen=codegen))
    want, none = _run(script, inputs, Config(codegen=codegen, sum_product=False))
    assert not none
    if kind == "dense":  # (the choice is the cost model's; on dense inputs of these sizes it rewrites)
        assert fired and names <= set(fired[-1].rewrites), [f.rewrites for f in fired]
    applied = {n for f in fired for n in f.rewrites}
    _agree(got, want, exact=applied <= set(EXACT) or kind in ("dense", "sparse", "zeros"))


def test_the_papers_running_example_rewrites_only_beside_the_fused_operator():
    """Paper 001 §3.3: sum(W %*% H) beside sum(X * log(W %*% H + eps)) pays only where the second is a
    fused outer-product operator (the product is not materialized at all then)."""
    script = "out = sum(W %*% H) - sum(X * log(W %*% H + 1e-15))"
    rng = np.random.default_rng(3)
    inputs = {"W": rng.random((600, 10)), "H": rng.random((10, 500)),
              "X": sp.random(600, 500, density=0.01, random_state=4, format="csr")}
    fused, fired = _run(script, inputs, Config(fusion="fuse-all"))
    assert [f.rewrites for f in fired] == [("aggregation push-down",)]
    assert fired[0].after < fired[0].before
    written, _ = _run(script, inputs, Config(fusion="fuse-all", sum_product=False))
    np.testing.assert_allclose(fused, written, rtol=1e-9)


def test_a_shared_product_stays_where_the_others_need_it():
    script = "P = X %*% Y\nout = trace(P) + sum(P[1:2, ])"
    rng = np.random.default_rng(5)
    inputs = {"X": rng.random((40, 30)), "Y": rng.random((30, 40))}
    _, fired = _run(script, inputs, Config(codegen=False))
    assert not fired


def test_a_runtime_scalar_multiplies_before_the_sum():
    """sum(s * P) with s = Inf and a 0 in P is NaN; moving s after the sum would give Inf."""
    script = "out = sum(s * (W %*% H))"
    h = np.vstack([np.tile([1.0, -1.0], 75), np.ones(150)])  # every other cell of W %*% H is 0
    inputs = {"s": float("inf"), "W": np.ones((200, 2)), "H": h}
    got, fired = _run(script, inputs, Config(codegen=False))
    assert np.isnan(got).all() and fired


# ------------------------------------------------------------------ random sum-product expressions

# (large enough that the rule costs its plans with fusion: a DAG of fewer than SMALL_WORK cells is
# decided by work, which the program cost below need not agree with)
LEAVES = {"A": (400, 300), "B": (300, 400), "C": (400, 400), "u": (400, 1), "v": (300, 1)}


@st.composite
def expressions(draw, depth: int = 3) -> tuple[str, tuple[int, int]]:
    """A random matrix expression over LEAVES (products, element-wise products and sums, transposes,
    row/column/full sums, trace, diag) with its shape."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from(sorted(LEAVES)))
        return name, LEAVES[name]
    a, sa = draw(expressions(depth=depth - 1))
    op = draw(st.sampled_from(["%*%", "*", "+", "t", "rowSums", "colSums", "diag", "scale"]))
    if op == "t":
        return f"t({a})", (sa[1], sa[0])
    if op in ("rowSums", "colSums"):
        return f"{op}({a})", (sa[0], 1) if op == "rowSums" else (1, sa[1])
    if op == "scale":
        return f"(2 * {a})", sa
    if op == "diag":
        if sa[1] == 1 and sa[0] > 1:
            return f"diag({a})", (sa[0], sa[0])
        if sa[0] == sa[1] and sa[0] > 1:
            return f"diag({a})", (sa[0], 1)
        return a, sa
    b, sb = draw(expressions(depth=depth - 1))
    if op == "%*%":
        if sa[1] == sb[0]:
            return f"({a} %*% {b})", (sa[0], sb[1])
        if sa[1] == sb[1]:
            return f"({a} %*% t({b}))", (sa[0], sb[0])
        return a, sa
    if sa == sb:
        return f"({a} {op} {b})", sa
    if (sa[1], sa[0]) == sb:
        return f"({a} {op} t({b}))", sa
    return a, sa


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions(), agg=st.sampled_from(["sum", "", "trace"]), seed=st.integers(0, 1000))
def test_random_expressions_are_never_costlier_and_equal_in_value(expr, agg, seed):
    e, shape = expr
    if agg == "trace" and shape[0] != shape[1]:
        agg = "sum"
    script = f"out = {agg}({e})" if agg else f"out = {e}"
    rng = np.random.default_rng(seed)
    inputs = {k: rng.uniform(-1, 1, s) for k, s in LEAVES.items()}
    for cfg in (Config(codegen=False), Config(fusion="fuse-all")):
        got, fired = _run(script, inputs, cfg)
        want, _ = _run(script, inputs, Config(codegen=cfg.codegen, fusion=cfg.fusion, sum_product=False))
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10, err_msg=script)
        assert all(f.after < f.before for f in fired), script
        # the whole program's cost agrees, with simplify_sum_diag off: it turns the rule's sum(diag(C))
        # into trace(C) without a cost, which the model prices above sum(colSums(diag(C))) as written
        if fired and all(f.unit == "s" for f in fired):
            comp = Compiler(cfg)
            costs = []
            off = ("simplify_sum_diag",)
            for c in (cfg.with_(disabled_rules=off),
                      Config(codegen=cfg.codegen, fusion=cfg.fusion, sum_product=False, disabled_rules=off)):
                prog = Compiler(c).compile_text(script, "<t>", dict(inputs), ("out",))
                costs.append(sum(comp.dag_cost(d) for d in _dags(prog)))
            assert costs[0] <= costs[1] * (1 + 1e-9), (script, costs)


def _dags(prog) -> list:
    from lafuse.hops.program import GenericBlock, iter_blocks

    return [b.dag for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)]


def test_explain_names_each_rewrite_with_its_costs():
    from lafuse.explain import explain_program

    text = (Path(__file__).parents[1] / "fixtures" / "rewrite" / "sum_product__selection_pushdown.dml").read_text()
    R.FIRED.clear()
    comp = Compiler(Config())
    lines = explain_program(comp.compile_text(text, "sp.dml"), "hops", comp).splitlines()
    at = lines.index("SUM-PRODUCT REWRITES (paper 001 §3)")
    report = lines[at + 1:]
    assert [ln.split(": ")[0] for ln in report] == ["--line 10:9 selection push-down", "--line 11:7 selection push-down",
                                                    "--line 14:7 selection push-down"]
    assert "trace((X %*% Y)) -> sum((X * t(Y)))" in report[0]
    for ln in report:
        before, after = (float(x.split()[0]) for x in ln.split("; cost ")[1].split(" -> "))
        assert after < before


@pytest.mark.parametrize("expr", ["sum(diag(u) + C)", "sum(C - diag(u))", "trace(diag(u) + C)",
                                  "sum(diag(u) + diag(2 * u))", "sum((diag(u) + C) %*% C)"])
def test_a_diagonal_added_to_a_matrix_keeps_the_whole_matrix(expr):
    """diag(u) keeps (i, i); renaming C's (j, k) onto it would add only C's diagonal (a wrong answer a
    hypothesis run found: sum(diag(u) + C) as sum(u) + sum(diag(C)))."""
    rng = np.random.default_rng(3)
    inputs = {"u": rng.uniform(-1, 1, (6, 1)), "C": rng.uniform(-1, 1, (6, 6))}
    for cfg in (Config(codegen=False), Config(fusion="fuse-all")):
        got = run_dml(f"out = {expr}", inputs=inputs, outputs=["out"], cfg=cfg, out=io.StringIO())["out"]
        off = run_dml(f"out = {expr}", inputs=inputs, outputs=["out"], cfg=cfg.with_(sum_product=False),
                      out=io.StringIO())["out"]
        np.testing.assert_allclose(got, off, rtol=1e-12, err_msg=expr)
