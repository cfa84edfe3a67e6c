"""Fused execution equals unfused execution: every template variant over dense, sparse (0.1),
ultra-sparse (1e-4), empty and all-zero inputs, with NaN and +-Inf in the main and side inputs,
and random expression DAGs (hypothesis). Each run also asserts which fused operator ran and that
the operators it replaces did not (heavy hitters), so a test cannot pass by not fusing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse import formats
from lafuse.compiler import Compiler
from lafuse.errors import DMLRuntimeError, DMLValidationError
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.stats import Stats
from lafuse.runtime.values import as_matrix_value

N, M, K = 40, 30, 3


def run(text: str, inputs: dict, codegen: bool, fusion: str = "fuse-all", threads: int = 2,
        backend: str = "numba"):
    """(value of R, heavy-hitter counts) of ``text`` with the inputs bound. The templates see the
    expression as written: the sum-product rule, which may regroup it first (``sum(S * (U %*% t(U)))``
    as ``sum((S %*% U) * U)``), is off; tests/rewrite/test_sumproduct.py runs it with fusion."""
    cfg = cfgmod.Config(codegen=codegen, fusion=fusion, threads=threads, sum_product=False,
                        codegen_backend=backend)
    bound = {k: (as_matrix_value(v) if hasattr(v, "shape") else v) for k, v in inputs.items()}
    stats = Stats()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        prog = comp.compile_text(text, "<fused>", bound, ("R",))
        st_ = Interpreter(prog, comp, stats=stats).run(dict(bound))
    return st_["R"], stats.op_count


def dense(v):
    if hasattr(v, "toarray"):
        return v.toarray()
    return np.asarray(v, dtype=np.float64)


def same(a, b) -> bool:
    a, b = dense(a), dense(b)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    close = np.isclose(a, b, rtol=1e-9, atol=1e-12) | (a == b)
    return bool(np.all(both_nan | close))


def data(kind: str, shape: tuple[int, int], rng: np.random.Generator, special: bool) -> object:
    """A matrix of the given kind; ``special`` puts NaN, +Inf and -Inf into non-zero cells."""
    if kind == "empty":
        return np.zeros((0, shape[1]))
    if kind == "zero":
        return sp.csr_matrix(shape)
    density = {"dense": 1.0, "sparse": 0.1, "ultra": 1e-3}[kind]
    x = rng.uniform(0.5, 2.0, size=shape)
    mask = rng.random(shape) < density
    if kind == "ultra" and not mask.any():
        mask[0, 0] = True
    x = np.where(mask, x, 0.0)
    if special:
        nz = np.argwhere(x != 0)
        for val, k in zip((math.nan, math.inf, -math.inf), range(len(nz))):
            x[tuple(nz[(k * 7) % len(nz)])] = val
    return sp.csr_matrix(x) if density < 0.4 else x


# (name, script, expected fused opcode, basic opcodes it replaces, which inputs may hold NaN/Inf)
CASES = [
    ("cell_noagg", "R = X * Y + 2 * abs(X - Y)", "spoofCell", ("*", "+", "abs"), "XY"),
    ("cell_sum", "R = sum(X * Y * Z)", "spoofCell", ("*", "sum"), "XYZ"),
    ("cell_sumsq", "R = sum((X - Y) * (X - Y))", "spoofCell", ("-", "sum"), "XY"),
    ("cell_min", "R = min(X * Y)", "spoofCell", ("*", "min"), "XY"),
    ("cell_max", "R = max(X * Y - 1)", "spoofCell", ("*", "max"), "XY"),
    ("cell_rowsums", "R = rowSums(X * Y)", "spoofCell", ("*", "rowSums"), "XY"),
    ("cell_rowmaxs", "R = rowMaxs(X * Y)", "spoofCell", ("*", "rowMaxs"), "XY"),
    ("cell_colsums", "R = colSums(X * Z)", "spoofCell", ("*", "colSums"), "XZ"),
    ("cell_colmins", "R = colMins(X * Y)", "spoofCell", ("*", "colMins"), "XY"),
    ("cell_vectors", "R = sum((X - r) * c + s)", "spoofCell", ("-", "*", "sum"), "Xrc"),
    ("magg", "R = sum(X * Y) + sum(X * Z)", "spoofMA", ("*", "sum"), "XYZ"),
    # aggregates of no cell-wise operation join a multi-aggregate over their input (multiAggPattern6)
    ("magg_bare", "R = min(X) + max(X) + sum(X)", "spoofMA", ("min", "max", "sum"), "X"),
    ("magg_bare_and_fused", "R = sum(X * Y) + max(X)", "spoofMA", ("*", "sum", "max"), "XY"),
    # dot products of column vectors, as sum(x * y) (multiAggPattern7)
    ("magg_dot", "R = as.scalar(t(r) %*% r + t(r) %*% w + t(w) %*% w)", "spoofMA", ("%*%",), "rw"),
    # n-ary min/max (SystemDS's cellwisetmpl23/24): a left fold of the binary operator
    ("cell_nary_min", "R = sum(min(X, Y, Z))", "spoofCell", ("min", "sum"), "XYZ"),
    ("cell_nary_max", "R = max(X, Y, Z, 0.7, s) * 2", "spoofCell", ("max", "*"), "XYZ"),
    # replace as an ifelse (cellwisetmpl11): NaN matches NaN; the named arguments in any order
    ("cell_replace_nan", "R = replace(target=X / Y, pattern=0/0, replacement=7) + 1", "spoofCell",
     ("replace", "/", "+"), "XY"),
    ("cell_replace_zero", "R = replace(pattern=0, replacement=s, target=X * Y) * 2", "spoofCell",
     ("replace", "*"), "XY"),
    ("cell_replace_var", "R = replace(target=X * 2, pattern=s, replacement=-1) - Y", "spoofCell",
     ("replace", "*", "-"), "XY"),
    # a dot product of cell-wise column vectors (cellwisetmpl7)
    ("cell_dot", "z = r * 2 + abs(w)\nR = as.scalar(t(z) %*% z)", "spoofCell", ("%*%", "*", "+", "abs"), "rw"),
    # a one-operator plan the heuristic policies keep (cellwisetmpl24)
    ("cell_nary_alone", "R = min(X, Y, Z, 0.3, s)", "spoofCell", ("min",), "XYZ"),
    # rowVars as a Row aggregate (rowAggPattern47/48): two passes over the row, as np.var(ddof=1)
    ("row_rowvars", "R = sum(X + rowVars(X))", "spoofRA", ("rowVars", "+", "sum"), "X"),
    ("row_rowvars_noagg", "R = rowVars(X * 2) * 3 + rowSums(Y)", "spoofRA", ("rowVars", "*"), "XY"),
    # cbind of row-aligned matrices as a Row plan's row (rowAggPattern35, rowAggPattern18)
    ("row_cbind", "R = cbind(X / rowSums(X), Y, r)", "spoofRA", ("cbind", "/", "rowSums"), "XYr"),
    ("row_cbind_sum", "R = sum(cbind(X * 2, Y) + 1)", "spoofRA", ("cbind", "*", "+", "sum"), "XY"),
    ("row_cbind_mv", "R = cbind(X %*% v, matrix(0, nrow(X), 1))", "spoofRA", ("cbind", "%*%"), "X"),
    # a row-wise cumulative sum t(cumsum(t(P))) of a Row plan's P (rowAggPattern28)
    ("row_cumsum", "D = X %*% V2\nR = rowSums(t(cumsum(t(D <= rowMins(D)))) == 0) + 1", "spoofRA",
     ("cumsum", "t", "rowMins", "<="), "X"),
    ("row_mmchain", "R = t(X) %*% (X %*% v)", "spoofRA", ("%*%",), "X"),
    ("row_weighted", "R = t(X) %*% (w * (X %*% v))", "spoofRA", ("%*%",), "Xw"),
    ("row_b1", "R = t(X) %*% (X %*% V2)", "spoofRA", ("%*%",), "X"),
    # a lone t(P) %*% Q (rowAggPattern26)
    ("row_tmm_alone", "R = t(P) %*% X", "spoofRA", ("%*%",), "PX"),
    ("row_tmm_alone_x", "R = t(X) %*% P", "spoofRA", ("%*%",), "PX"),
    # multiLogReg's Hessian-vector product: a vecmat whose row operand is a row aggregate
    ("row_hessian", "Q = P * (X %*% V2)\nR = t(X) %*% (Q - P * (rowSums(Q) %*% matrix(1, 1, 2)))", "spoofRA",
     ("rowSums",), "XP"),
    ("outer_sum", "R = sum(X * log(U %*% t(V) + 1e-15))", "spoofOP", ("%*%", "log", "sum"), "X"),
    ("outer_right", "R = (X / (U %*% t(V) + 1e-15)) %*% V", "spoofOP", ("%*%", "/"), "X"),
    ("outer_left", "R = t(X / (U %*% t(V) + 1e-15)) %*% U", "spoofOP", ("/",), "X"),
    ("outer_noagg", "R = X * (U %*% t(V))", "spoofOP", ("%*%",), "X"),
    # a cell-wise factor over the driver that keeps its zeros merges into the Outer plan (wdivmmNeq)
    ("outer_neq", "R = ((X != 0) * (U %*% t(V) + 0.1)) %*% V", "spoofOP", ("!=", "%*%", "+"), "X"),
    ("outer_gt_sum", "R = sum((X > 0.25) * log(U %*% t(V) + 1))", "spoofOP", (">", "log", "sum"), "X"),
    # a comparison that sends zero to false is sparse-safe
    ("cell_cmp_sum", "R = sum((X > 0.25) * Y + (X < -0.5))", "spoofCell", (">", "*", "sum"), "XY"),
]
KINDS = ["dense", "sparse", "ultra", "empty", "zero"]
# column ranges of row-aligned inputs read inside a Row plan (rowAggPattern30, multiLogReg's P[, 1:K]);
# not over 0 rows, where indexing row 1 is an error fused or not
COLRANGE_CASES = [
    ("row_colrange", "Q = P[, 1:1] * (X %*% V2)\nR = t(X) %*% (Q - P[, 1:1] * rowSums(Q))", "spoofRA",
     ("rix", "rowSums"), "XP"),
    ("row_colrange_cell", "R = t(X) %*% (Y[, 3:7] * (X %*% v))", "spoofRA", ("rix", "*"), "XY"),
    ("row_colrange_main", "R = rowSums(X[, 2:5] * 2) + rowMaxs(X)", "spoofRA", ("rix", "rowSums"), "X"),
    ("row_colrange_sum", "R = sum(Y[, 2:29] * rowSums(X) + X[, 1:28])", "spoofRA", ("rix", "*", "sum"), "XY"),
]


def inputs_for(kind: str, special: str, rng: np.random.Generator) -> dict:
    n = N
    out = {}
    for name in "XYZ":
        out[name] = data(kind if name == "X" else ("dense" if kind != "empty" else "empty"), (n, M), rng,
                         name in special)
    rows = out["X"].shape[0]
    out["r"] = rng.uniform(-1, 1, size=(rows, 1))
    out["c"] = rng.uniform(-1, 1, size=(1, M))
    out["w"] = rng.uniform(0.5, 1, size=(rows, 1))
    out["s"] = 0.5
    out["v"] = rng.uniform(-1, 1, size=(M, 1))
    out["V2"] = rng.uniform(-1, 1, size=(M, 2))
    out["P"] = rng.uniform(0.1, 1, size=(rows, 2))
    if "P" in special and rows > 3:
        out["P"][3, 1] = math.nan
    out["U"] = rng.uniform(0.1, 1, size=(rows, K))
    out["V"] = rng.uniform(0.1, 1, size=(M, K))
    if "r" in special and rows > 1:
        out["r"][1, 0], out["c"][0, 2] = math.nan, math.inf
    if "w" in special and rows > 2:
        out["w"][2, 0] = -math.inf
    return out


@contextmanager
def _all_dense() -> Iterator[None]:
    """No value is stored sparse: the one rule (formats.may_be_sparse) reads the threshold."""
    with mock.patch.object(formats, "MIN_SPARSE_CELLS", 1 << 62):
        yield


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name,text,fused_op,replaced,special", CASES, ids=[c[0] for c in CASES])
def test_fused_equals_unfused(name, text, fused_op, replaced, special, kind):
    check_fused(name, text, fused_op, replaced, special, kind)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "empty"])
@pytest.mark.parametrize("name,text,fused_op,replaced,special", COLRANGE_CASES, ids=[c[0] for c in COLRANGE_CASES])
def test_column_ranges_read_inside_row_plans(name, text, fused_op, replaced, special, kind):
    check_fused(name, text, fused_op, replaced, special, kind)


# a seq of integer from and incr is generated in the kernel from the row index (cellwisetmpl22,
# rowAggPattern41); not over an empty X, where seq(1, nrow(X)) counts down to 0
SEQ_CASES = [
    ("cell_seq", "R = X * seq(1, nrow(X)) + seq(nrow(X), 1)", "spoofCell", ("seq", "*", "+"), "X"),
    ("cell_seq_sum", "R = sum(X - seq(10, 10 + 3 * (nrow(X) - 1), 3))", "spoofCell", ("seq", "-", "sum"), "X"),
    ("row_seq", "R = X * rowSums(X / seq(1, nrow(X)) + seq(nrow(X), 1))", "spoofRA", ("seq", "rowSums"), "X"),
]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "empty"])
@pytest.mark.parametrize("name,text,fused_op,replaced,special", SEQ_CASES, ids=[c[0] for c in SEQ_CASES])
def test_seq_generated_in_kernel(name, text, fused_op, replaced, special, kind):
    check_fused(name, text, fused_op, replaced, special, kind)
    ins = inputs_for(kind, special, np.random.default_rng(7))  # the spec: the CPlan's NumPy interpreter
    spec, counts = run(text, ins, codegen=True, backend="reference")
    assert same(run(text, ins, codegen=True)[0], spec) and counts.get(fused_op, 0) >= 1


def check_fused(name, text, fused_op, replaced, special, kind):
    """Fused equals unfused with and without NaN/Inf in the ``special`` inputs; ``fused_op`` ran and
    the ``replaced`` operators did not (over a non-empty X)."""
    rng = np.random.default_rng(abs(hash((name, kind))) % 2**32)
    for with_special in (False, True):
        ins = inputs_for(kind, special if with_special else "", rng)
        base, _ = run(text, ins, codegen=False)
        got, counts = run(text, ins, codegen=True)
        assert same(got, base), f"{name} {kind} special={with_special}\nfused={dense(got)}\nunfused={dense(base)}"
        if kind != "empty" and dense(ins["X"]).size:
            assert counts.get(fused_op, 0) >= 1, f"{fused_op} did not run: {counts}"
            for op in replaced:
                assert counts.get(op, 0) == 0, f"{op} ran unfused next to {fused_op}: {counts}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", ["R = sum(S * (U %*% t(U)))", "R = (S / (U %*% t(U) + 1e-15)) %*% U",
                                  "R = sum(S * log(U %*% t(U) + 1e-15)) + sum(S * (U %*% t(W)))"])
def test_one_matrix_as_both_factors_of_an_outer_product(kind, text):
    """U as both U[i, :] and V[j, :] of the outer template: two input slots of one matrix, one
    access each (this crashed codegen: "input 1 is read with two accesses (outer_u, outer_v)")."""
    rng = np.random.default_rng(abs(hash((text, kind))) % 2**32)
    for special in (False, True):
        n = 0 if kind == "empty" else N
        ins = {"S": np.zeros((0, 0)) if n == 0 else data(kind, (n, n), rng, special),
               "U": rng.uniform(0.1, 1, size=(n, K)), "W": rng.uniform(0.1, 1, size=(n, K))}
        base, _ = run(text, ins, codegen=False)
        got, counts = run(text, ins, codegen=True)
        assert same(got, base), f"{text} {kind} special={special}\nfused={dense(got)}\nunfused={dense(base)}"
        if kind != "empty" and dense(ins["S"]).size:
            assert counts.get("spoofOP", 0) >= 1, f"spoofOP did not run: {counts}"
            assert counts.get("%*%", 0) == 0, f"%*% ran unfused next to spoofOP: {counts}"


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "empty"])
def test_dot_products_of_sparse_columns_join_a_multi_aggregate(kind):
    """Columns of a sparse X (NaN and +-Inf among their non-zeros), in a multi-aggregate of dot
    products: the values of the unfused products, one spoofMA, no %*%."""
    text = "a = X[, 1]\nb = X[, 2]\nR = as.scalar(t(a) %*% a + t(b) %*% a + t(b) %*% b)"
    rng = np.random.default_rng(11)
    for special in (False, True):
        X = data(kind, (N, M), rng, special)
        base, _ = run(text, {"X": X}, codegen=False)
        got, counts = run(text, {"X": X}, codegen=True)
        assert same(got, base), (kind, special, got, base)
        assert counts.get("spoofMA", 0) == 1 and counts.get("%*%", 0) == 0, counts


def test_a_lone_bare_aggregate_stays_unfused():
    """sum(X) alone has nothing to share its pass over X with: no fused operator for it (the
    heuristic policies; the cost-based one never takes bare aggregates in)."""
    ins = inputs_for("dense", "", np.random.default_rng(3))
    for fusion in ("fuse-all", "fuse-no-redundancy", "cost"):
        got, counts = run("R = sum(X) * 2 + max(Y)", ins, codegen=True, fusion=fusion)
        assert got == pytest.approx(2 * dense(ins["X"]).sum() + dense(ins["Y"]).max(), rel=1e-12)
        assert not any(k.startswith("spoof") for k in counts), (fusion, counts)
        assert counts.get("sum") == 1 and counts.get("max") == 1, (fusion, counts)


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(7)
    ins = inputs_for("dense", "", rng)
    for _, text, *_ in CASES:
        one, _ = run(text, ins, codegen=True, threads=1)
        two, _ = run(text, ins, codegen=True, threads=2)
        assert np.array_equal(dense(one), dense(two), equal_nan=True), text


def test_plan_cache_hits_with_changed_literals_and_permuted_inputs():
    from lafuse import codegen

    rng = np.random.default_rng(3)
    ins = inputs_for("dense", "", rng)
    first, _ = run("R = sum(X * Y + 2.5)", ins, codegen=True)
    before = codegen.cache_stats()
    for text in ("R = sum(X * Y + 7.0)", "R = sum(Y * X + 2.5)", "R = sum(Z * X + -1.0)"):
        got, _ = run(text, ins, codegen=True)
        base, _ = run(text, ins, codegen=False)
        assert same(got, base), text
    after = codegen.cache_stats()
    assert after["compiled"] == before["compiled"]
    assert after["mem_hits"] >= before["mem_hits"] + 3


# ------------------------------------------------------------------ random expression DAGs

LEAVES = ["X", "Y", "Z", "r", "c", "s", "0.5", "2"]
UNARY = ["abs", "exp", "sqrt", "round", "sign", "-"]
BINARY = ["+", "-", "*", "/", "min", "max", ">", "!=", "^"]
AGGS = ["R = sum({e})", "R = rowSums({e})", "R = colMaxs({e})", "R = {e}", "R = min({e})"]


@st.composite
def expressions(draw, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(LEAVES))
    if draw(st.booleans()):
        u = draw(st.sampled_from(UNARY))
        a = draw(expressions(depth - 1))
        return f"(-{a})" if u == "-" else f"{u}({a})"
    b = draw(st.sampled_from(BINARY))
    a, c = draw(expressions(depth - 1)), draw(expressions(depth - 1))
    return f"{b}({a}, {c})" if b in ("min", "max") else f"({a} {b} {c})"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expr=expressions(), agg=st.sampled_from(AGGS), kind=st.sampled_from(["dense", "sparse", "zero"]),
       special=st.booleans(), seed=st.integers(0, 1000))
def test_random_dags_fused_equal_unfused(expr, agg, kind, special, seed):
    assume("X" in expr)
    text = agg.format(e=f"X * ({expr})")
    rng = np.random.default_rng(seed)
    ins = inputs_for(kind, "XYr" if special else "", rng)
    # over dense inputs the unfused intermediates stay dense too: one that happens to be mostly zero
    # (X > X) would otherwise be stored sparse, and a structural zero annihilates NaN/Inf in a product
    # (SystemDS's sparse-safe rule) where the fused kernel, which never stores it, computes NaN * 0
    keep_dense = _all_dense() if kind == "dense" else nullcontext()
    try:
        with keep_dense:
            base, _ = run(text, ins, codegen=False)
    except DMLValidationError:
        assume(False)
    except DMLRuntimeError as e:  # e.g. min(r, c) of a column and a row vector: fused, the same error
        for strategy in ("fuse-all", "fuse-no-redundancy"):
            with pytest.raises(DMLRuntimeError) as got_err:
                run(text, ins, codegen=True, fusion=strategy)
            assert str(got_err.value) == str(e)
        return
    for strategy in ("fuse-all", "fuse-no-redundancy"):
        got, _ = run(text, ins, codegen=True, fusion=strategy)
        assert same(got, base), f"{text} [{strategy}]\nfused={dense(got)}\nunfused={dense(base)}"


def test_column_against_row_vector_is_not_fused_into_an_outer_operation():
    """min(r, c) of a 40 x 1 and a 1 x 30 vector is an error unfused; fused into a cell kernel over
    X it would have been computed as an outer minimum (found by the random-DAG test)."""
    ins = inputs_for("dense", "", np.random.default_rng(0))
    text = "R = sum(X * (X + min(r, c)))"
    with pytest.raises(DMLRuntimeError, match="Block sizes are not matched") as unfused:
        run(text, ins, codegen=False)
    with pytest.raises(DMLRuntimeError) as fused:
        run(text, ins, codegen=True, fusion="fuse-all")
    assert str(fused.value) == str(unfused.value)


def test_read_only_inputs_reuse_the_compiled_kernel():
    # Numba types read-only arrays apart: passed as they are, a cached kernel would compile a second
    # specialization (~3 s) on its first call with, e.g., a csv column pandas hands out read-only
    from lafuse import codegen

    rng = np.random.default_rng(8)
    ins = inputs_for("dense", "", rng)
    sp_x = data("sparse", (N, M), rng, False)
    text = "R = sum(X * Y * 2) + sum(rowSums(X * Z) * r)"
    base, _ = run(text, ins, codegen=True)
    sigs = {k: len(v.kernel.signatures) for k, v in codegen._CACHE._mem.items()}
    ro = dict(ins)
    for k in ("X", "Y", "Z", "r"):
        ro[k] = ins[k].copy()
        ro[k].flags.writeable = False
    got, counts = run(text, ro, codegen=True)
    assert same(got, base) and counts.get("spoofMA", 0) + counts.get("spoofCell", 0) >= 1
    assert {k: len(v.kernel.signatures) for k, v in codegen._CACHE._mem.items() if k in sigs} == sigs
    assert not any(ro[k].flags.writeable for k in ("X", "Y", "Z", "r"))  # the caller's arrays stay read-only
    x_ro = sp_x.copy()
    x_ro.data.flags.writeable = False
    ro["X"] = x_ro
    sp_ins = dict(ins, X=sp_x)
    base_sp, _ = run(text, sp_ins, codegen=True)
    sigs = {k: len(v.kernel.signatures) for k, v in codegen._CACHE._mem.items()}
    got_sp, _ = run(text, dict(sp_ins, X=x_ro), codegen=True)
    assert same(got_sp, base_sp)
    assert {k: len(v.kernel.signatures) for k, v in codegen._CACHE._mem.items() if k in sigs} == sigs
