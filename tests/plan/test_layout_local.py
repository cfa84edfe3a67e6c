"""The local format choice in the plan stage (plan.layout.local, paper 002 on one machine): which
conversions a plan gets (a column-slicing loop keeps a CSC form of its matrix, a row-slicing one
does not, a tall matrix's products read it as CSC), that every choice computes what the default
formats compute (NaN/Inf, all-zero, 1x1 and vector shapes, ultra-sparse), that the dynamic
programming agrees with brute force on the problems real plans pose, and what ``--explain formats``
prints."""

from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost import constants as K
from lafuse.cost import profile
from lafuse.cost.profile import HardwareProfile
from lafuse.formats import CSC as CSC_
from lafuse.hops.program import GenericBlock, iter_blocks
from lafuse.plan.layout import brute_force, local, optimize
from lafuse.plan.layout.graph import MType
from lafuse.plan.layout.local import ANY, Prices, _mm_cost, _slice_cost
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.local import backend
from lafuse.runtime.stats import Stats
from lafuse.runtime.values import as_matrix_value


@pytest.fixture(autouse=True)
def default_profile(monkeypatch):
    """The analytical costs, whatever this machine's calibration measured: the choices are fixed."""
    prof = HardwareProfile()
    monkeypatch.setattr(profile, "load", lambda *a, **k: prof)


def run(text: str, inputs: dict, formats: str = "dp", outputs: tuple[str, ...] = ("R",)):
    """(symbol table, opcode counts, the plans of the program's blocks) without codegen."""
    cfg = cfgmod.Config(codegen=False, formats=formats)
    bound = {k: as_matrix_value(v) for k, v in inputs.items()}
    stats = Stats()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        prog = comp.compile_text(text, "<layout>", bound, outputs)
        st_ = Interpreter(prog, comp, stats=stats).run(dict(bound))
    plans = [b.plan for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock) and b.plan is not None]
    return st_, stats.op_count, plans


def dense(v):
    return v.toarray() if sp.issparse(v) else np.asarray(v, dtype=float)


def same(a, b):
    """Equal values, NaN where NaN (the format choice may not change a single value)."""
    a, b = dense(a), dense(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def conversions(plans):
    return [(i.out_fmt, i.held) for p in plans for i in p.instructions if i.opcode == "convert"]


COLS = """
R = matrix(0, rows=1, cols=ncol(X))
for (j in 1:ncol(X)) {
  R[1, j] = sum(X[, j])
}
"""
ROWS = """
R = matrix(0, rows=40, cols=1)
for (i in 1:40) {
  R[i, 1] = sum(X[i, ])
}
"""
PRODUCTS = """
v = matrix(1, rows=ncol(X), cols=1)
R = matrix(0, rows=ncol(X), cols=1)
for (i in 1:5) {
  g = t(X) %*% y
  p = X %*% v
  R = R + g + t(X) %*% p
  v = v * 0.5
}
"""


def sparse_x(n=20000, m=60, density=0.02, seed=1):
    return sp.random_array((n, m), density=density, format="csr", rng=seed)


def test_a_column_slicing_loop_keeps_a_csc_form_and_a_row_slicing_one_does_not():
    x = sparse_x()
    st_, ops, plans = run(COLS, {"X": x})
    assert (("csc", True) in conversions(plans)), conversions(plans)
    assert ops["convert"] == 60  # the held conversion's instruction runs each iteration, converts once
    ref = np.asarray(x.sum(axis=0)).reshape(1, -1)
    assert np.allclose(dense(st_["R"]), ref)
    st_rule, ops_rule, plans_rule = run(COLS, {"X": x}, formats="rule")
    assert conversions(plans_rule) == [] and same(st_["R"], st_rule["R"])
    st_rows, _, plans_rows = run(ROWS, {"X": x})
    assert conversions(plans_rows) == []
    assert np.allclose(dense(st_rows["R"]).ravel(), np.asarray(x[:40].sum(axis=1)).ravel())


def test_the_held_form_is_converted_once_per_value_and_dropped_with_it():
    x = sp.csr_array(sparse_x(200, 30))
    a = backend.held_convert(x, "csc")
    assert a.format == "csc" and backend.held_convert(x, "csc") is a
    assert np.array_equal(a.toarray(), x.toarray())
    key = id(x)
    assert key in backend._HELD
    del x, a
    gc.collect()
    assert key not in backend._HELD
    d = np.ones((3, 3))
    assert backend.held_convert(d, "csc") is d  # (a value decided dense at run time stays as it is)


def test_a_tall_matrix_read_by_products_in_a_loop_is_held_as_csc():
    rng = np.random.default_rng(3)
    x = sparse_x(40000, 30, 0.05)
    y = rng.standard_normal((40000, 1))
    st_, ops, plans = run(PRODUCTS, {"X": x, "y": y})
    assert ("csc", True) in conversions(plans)
    st_rule, _, _ = run(PRODUCTS, {"X": x, "y": y}, formats="rule")
    v = np.ones((30, 1))
    r = np.zeros((30, 1))
    xd = x.toarray()
    for _ in range(5):
        r = r + xd.T @ y + xd.T @ (xd @ v)
        v = v * 0.5
    assert np.allclose(dense(st_["R"]), r) and np.allclose(dense(st_rule["R"]), r)


def test_a_variable_the_loop_assigns_is_not_held():
    text = """
R = matrix(0, rows=1, cols=ncol(X))
for (j in 1:ncol(X)) {
  R[1, j] = sum(X[, j])
  X = X * 1
}
"""
    x = sparse_x(5000, 20)
    st_, _, plans = run(text, {"X": x})
    assert all(not held for _, held in conversions(plans))
    assert np.allclose(dense(st_["R"]), np.asarray(x.sum(axis=0)).reshape(1, -1))


def _with_specials(x: sp.csr_array) -> sp.csr_array:
    x = x.copy()
    x.data[::7] = np.nan
    x.data[3::11] = np.inf
    x.data[5::13] = -np.inf
    return x


@pytest.mark.parametrize("case", ["nan-inf", "all-zero", "ultra-sparse", "one-column", "one-row", "1x1"])
def test_formats_chosen_give_the_values_of_the_default_formats(case):
    rng = np.random.default_rng(11)
    x = {"nan-inf": _with_specials(sparse_x(3000, 40, 0.05)),
         "all-zero": sp.csr_array((3000, 40)),
         "ultra-sparse": sparse_x(3000, 40, 0.0003),
         "one-column": sparse_x(3000, 1, 0.05),
         "one-row": sparse_x(1, 3000, 0.05),
         "1x1": sp.csr_array(np.array([[np.nan]]))}[case]
    n, m = x.shape
    text = """
R = matrix(0, rows=1, cols=ncol(X))
for (j in 1:ncol(X)) {
  R[1, j] = sum(X[, j])
}
S = t(X) %*% y + t(X) %*% (X %*% v)
Q = X * 2
T = t(X) %*% X
"""
    y = rng.standard_normal((n, 1))
    y[::5] = np.nan
    v = rng.standard_normal((m, 1))
    inputs = {"X": x, "y": y, "v": v}
    outs = ("R", "S", "Q", "T")
    got, _, _ = run(text, inputs, outputs=outs)
    ref, _, _ = run(text, inputs, formats="rule", outputs=outs)
    for k in outs:
        assert same(got[k], ref[k]), k


def test_the_dp_answer_of_a_real_plan_equals_brute_force():
    """The problems the stage poses (holds, products read transposed, slices, other operators) solved
    by the DP and by brute force over the same local catalogue."""
    x = sparse_x(30000, 40, 0.03)
    y = np.random.default_rng(2).standard_normal((30000, 1))
    text = PRODUCTS + """
for (j in 1:ncol(X)) {
  R[j, 1] = R[j, 1] + sum(X[, j]) + sum(X[j, ])
}
"""
    _, _, plans = run(text, {"X": x, "y": y})
    layouts = [p.layout for p in plans if p.layout is not None]
    assert len(layouts) >= 2
    for lay in layouts:
        assert brute_force(lay.problem).cost == pytest.approx(optimize(lay.problem).cost)
        assert lay.annotation.cost <= lay.default_cost
        assert lay.problem.evaluate(lay.annotation) == pytest.approx(lay.annotation.cost)


def test_the_costs_order_the_forms_as_measured():
    """Analytical costs: a column slice is dear on CSR and cheap on CSC, a row slice the other way;
    a tall CSR matrix's product pays per row (1e6 x 100 at 5%: 7.8 ms as CSR, 4.2 as CSC, here, where
    `lafuse calibrate` measured 1.5e9 non-zeros/s; benchmarks/sparse_forms.py)."""
    price = Prices(HardwareProfile(sparse_rate=1.5e9))
    x = MType(200000, 500, 1000000)
    col, row = MType(200000, 1, -1), MType(1, 500, -1)
    assert _slice_cost(price, x, "csr", col) > 20 * _slice_cost(price, x, "csc", col)
    assert _slice_cost(price, x, "csc", row) > 20 * _slice_cost(price, x, "csr", row)
    tall, v = MType(1000000, 100, 5000000), MType(100, 1, 100)
    assert _mm_cost(price, tall, "csr", v, "dense") > 1.5 * _mm_cost(price, tall, "csc", v, "dense")
    assert _mm_cost(price, tall, ANY, v, "dense") > 0


def test_a_plan_without_sparse_values_is_left_alone():
    rng = np.random.default_rng(1)
    _, ops, plans = run("R = t(X) %*% X + 1", {"X": rng.standard_normal((50, 4))})
    assert all(p.layout is None for p in plans) and "convert" not in ops


def test_explain_formats_lists_the_choice_and_the_runner_up(tmp_path):
    script = tmp_path / "cols.dml"
    script.write_text("X = rand(rows=20000, cols=50, sparsity=0.02, seed=3)\n" + COLS + "print(sum(R))\n")
    out = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--explain", "formats"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "held-csc(csr) -> csc" in out.stdout and "runner-up as-stored" in out.stdout
    assert "rix(csc)" in out.stdout and "with every sparse value CSR" in out.stdout
    rule = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--formats", "rule",
                           "--explain", "runtime"], capture_output=True, text=True, timeout=120)
    assert rule.returncode == 0 and "held" not in rule.stdout
    assert rule.stdout.strip().splitlines()[-1] == out.stdout.strip().splitlines()[-1]  # the same sum


def csc_free(mp: pytest.MonkeyPatch) -> None:
    """Costs under which CSC is free and CSR dear wherever a kernel takes either (products, slices),
    the conversion to CSC costs nothing and any saving is taken: the DP converts wherever it may."""
    mp.setattr(local, "_mm_cost", lambda price, a, fa, b, fb: 0.0 if CSC_ in (fa, fb) else 1.0)
    mp.setattr(local, "_slice_cost", lambda price, x, fmt, out: 0.0 if fmt == CSC_ else 1.0)
    real = Prices.__call__
    mp.setattr(Prices, "__call__", lambda self, name, *a: 0.0 if name == "to-csc" else real(self, name, *a))
    mp.setattr(K, "LAYOUT_MIN_SAVING", 0.0)


FORCED = """
R = matrix(0, rows=1, cols=ncol(X))
for (j in 1:ncol(X)) {
  R[1, j] = sum(X[, j]) + sum(X[1:min(3, nrow(X)), j])
}
S = t(X) %*% y + t(X) %*% (X %*% v) + t(X) %*% X %*% v
Q = (X * 2) %*% v
"""


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 120), m=st.integers(1, 30), density=st.sampled_from([0.0, 0.002, 0.05, 0.3]),
       specials=st.booleans(), seed=st.integers(0, 10**6))
def test_forced_csc_choices_give_the_values_of_the_default_formats(n, m, density, specials, seed):
    """With CSC made free (csc_free), the DP converts wherever a kernel takes CSC: values must stay
    those of the default formats, NaN/Inf, empty and vector shapes included."""
    rng = np.random.default_rng(seed)
    x = sp.random_array((n, m), density=density, format="csr", rng=seed)
    if specials and x.nnz:
        x.data[rng.integers(0, x.nnz, size=max(1, x.nnz // 4))] = rng.choice([np.nan, np.inf, -np.inf])
    y = rng.standard_normal((n, 1))
    v = rng.standard_normal((m, 1))
    inputs = {"X": x, "y": y, "v": v}
    outs = ("R", "S", "Q")
    with pytest.MonkeyPatch.context() as mp:
        csc_free(mp)
        got, _, plans = run(FORCED, inputs, outputs=outs)
    ref, _, _ = run(FORCED, inputs, formats="rule", outputs=outs)
    for k in outs:
        assert same(got[k], ref[k]), k


def test_with_csc_free_the_plans_do_convert():
    """The property test's premise: making CSC free does make the DP convert (a 200 x 30 X at 5%)."""
    x = sparse_x(200, 30, 0.05)
    rng = np.random.default_rng(5)
    inputs = {"X": x, "y": rng.standard_normal((200, 1)), "v": rng.standard_normal((30, 1))}
    with pytest.MonkeyPatch.context() as mp:
        csc_free(mp)
        got, _, plans = run(FORCED, inputs, outputs=("R", "S"))
    assert any(f == "csc" for f, _ in conversions(plans))
    ref, _, _ = run(FORCED, inputs, formats="rule", outputs=("R", "S"))
    assert same(got["R"], ref["R"]) and np.allclose(dense(got["S"]), dense(ref["S"]))


def test_a_saving_within_the_models_error_keeps_the_default_formats(monkeypatch):
    """A saving below cost.constants.LAYOUT_MIN_SAVING an execution (here raised to a second) keeps
    the default formats, and ``--explain formats`` says so; the same plan converts at the real one."""
    x = sparse_x()
    _, _, plans = run(COLS, {"X": x})
    assert ("csc", True) in conversions(plans)
    monkeypatch.setattr(K, "LAYOUT_MIN_SAVING", 1.0)
    _, _, plans = run(COLS, {"X": x})
    assert conversions(plans) == []
    lays = [p.layout for p in plans if p.layout is not None]
    assert lays and not any(lay.applied for lay in lays)
    assert any("not taken" in lay.render(runner_up=False) for lay in lays)
