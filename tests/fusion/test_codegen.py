"""Generated Numba kernels against the reference interpreter.

Every template and aggregation variant runs on dense, sparse (0.1), ultra-sparse (1e-4), empty
and all-zero inputs, with NaN and +-Inf in the main and the side inputs; the kernel must equal
the reference interpreter (rtol 1e-12, NaN == NaN), and the reference must equal the unfused DML
operators. Numba compiles cost about a second each, so plans are compiled once per module and
shared by the data variants; the disk cache lives in a temporary directory.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse import codegen
from lafuse import config as cfgmod
from lafuse.codegen.emit import canon
from lafuse.codegen.gen_row import mmchain
from lafuse.codegen.gen_row_block import BLOCK_BLAS, BLOCK_LOOPS, BLOCK_MIXED, BLOCK_MODES, BlockCond
from lafuse.compiler import run_dml
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COL_AGG_B1_T,
    COL_AGG_T,
    COLVEC,
    FULL_AGG,
    LEFT_MM,
    MAIN,
    MATRIX,
    NO_AGG,
    OUTER_U,
    OUTER_V,
    RIGHT_MM,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    CPlan,
    CPlanBuilder,
    cell_read_inputs,
)
from lafuse.runtime.local import fused
from lafuse.runtime.local.fused import runner_row
from lafuse.runtime.local.reference import evaluate
from lafuse.runtime.values import as_matrix_value


@pytest.fixture(scope="module", autouse=True)
def disk_cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("codegen_cache")
    old = os.environ.get("LAFUSE_CODEGEN_CACHE")
    os.environ["LAFUSE_CODEGEN_CACHE"] = str(d)
    yield d
    if old is None:
        os.environ.pop("LAFUSE_CODEGEN_CACHE", None)
    else:
        os.environ["LAFUSE_CODEGEN_CACHE"] = old


def rand_csr(n: int, m: int, density: float, seed: int):
    """Random CSR in O(nnz) (scipy.sparse.random samples among all n*m cells: minutes at 4e8)."""
    rng = np.random.default_rng(seed)
    k = int(n * m * density)
    X = sps.coo_matrix((rng.random(k) + 0.1, (rng.integers(0, n, k), rng.integers(0, m, k))), shape=(n, m)).tocsr()
    X.sum_duplicates()
    return X


def dense(v):
    if hasattr(v, "toarray"):
        return v.toarray()
    return np.asarray(v, dtype=np.float64)


def same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    a, b = dense(a), dense(b)
    if a.shape != b.shape:
        return False
    with np.errstate(all="ignore"):
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b)) | np.isclose(a, b, rtol=1e-12, atol=0.0)))


def runtime_formats(ins: list) -> list:
    """The inputs in the formats the unfused runtime binds them with (a CSR below 1024 cells or
    over 40% dense becomes dense): sparse semantics apply to what is CSR at run time."""
    return [as_matrix_value(v) if hasattr(v, "shape") else v for v in ins]


_COMPILED: dict[str, fused.FusedOperator] = {}


def compiled(name: str, plan: CPlan, threads: int = 2) -> fused.FusedOperator:
    key = f"{name}/{threads}"
    if key not in _COMPILED:
        _COMPILED[key] = fused.compile_plan(plan, threads=threads)
    return _COMPILED[key]


def check(name: str, plan: CPlan, inputs: list) -> None:
    ref = evaluate(plan, inputs)
    got = compiled(name, plan)(inputs)
    assert same(got, ref), f"{name}: {plan.root!r}\ngot={dense(got) if not isinstance(got, tuple) else got}\nref={ref}"
    if plan.template in ("cell", "outer") and plan.agg == NO_AGG and sps.issparse(got):
        assert got.has_canonical_format and not np.any(got.data == 0)
    if isinstance(ref, float):
        assert isinstance(got, float)
    elif isinstance(ref, np.ndarray) and not sps.issparse(got):
        assert got.dtype == np.float64 and got.flags.c_contiguous and got.ndim == 2


# ------------------------------------------------------------------------------------- data

SPECIAL = (math.nan, math.inf, -math.inf)
KINDS = ["dense", "sparse", "ultra", "empty_rows", "empty_cols", "zero"]


def shape_of(kind: str) -> tuple[int, int]:
    return {"ultra": (300, 200), "empty_rows": (0, 7), "empty_cols": (9, 0)}.get(kind, (23, 17))


def matrix(rng, kind: str, shape, special: bool, as_sparse: bool):
    n, m = shape
    if kind == "zero" or n * m == 0:
        M = np.zeros(shape)
    elif kind == "dense":
        M = rng.normal(size=shape)
    else:
        M = sps.random(n, m, density=0.1 if kind == "sparse" else 1e-4, random_state=rng,
                       data_rvs=lambda k: rng.normal(size=k)).toarray()
        if kind == "ultra" and not M.any():
            M[rng.integers(n), rng.integers(m)] = 1.5
    if special and n * m:
        nz = np.argwhere(M != 0)
        for k, val in enumerate(SPECIAL):
            if len(nz) > k:  # on stored entries: the main input keeps its pattern
                M[tuple(nz[k])] = val
            M[rng.integers(n), rng.integers(m)] = val  # anywhere (also where others are zero)
    return sps.csr_matrix(M) if as_sparse else M


def cell_inputs(kind: str, special_main: bool, special_side: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = shape_of(kind)
    sparse = kind != "dense"
    X = matrix(rng, kind, shape, special_main, sparse)
    Y = matrix(rng, "dense" if kind in ("ultra", "sparse") else kind, shape, special_side, sparse and seed % 2 == 0)
    r = rng.normal(size=(shape[0], 1))
    c = rng.normal(size=(1, shape[1]))
    if special_side and shape[0] and shape[1]:
        r[0, 0], c[0, -1] = math.inf, math.nan
    return [X, Y, r, c, 0.75]


# ----------------------------------------------------------------------------------- plans

def cell_exprs():
    b = CPlanBuilder()
    X, Y, r, c, s = b.input(0, MAIN), b.input(1, CELL), b.input(2, ROWVEC), b.input(3, COLVEC), b.input(4, SCALAR)
    safe = b.op("*", b.op("*", b.op("*", X, Y), b.op("+", r, s)), c)  # X*Y*(r+s)*c: 0 where X is 0
    unsafe = b.op("%%", b.op("ifelse", b.op(">", X, b.literal(0.5)), b.op("^", Y, b.literal(2.0)),
                            b.op("max", b.op("-", X, r), c)), b.op("+", b.op("abs", Y), b.literal(0.5)))
    return b, safe, unsafe


CELL_VARIANTS = [(NO_AGG, "sum"), (FULL_AGG, "sum"), (FULL_AGG, "sumsq"), (FULL_AGG, "min"), (FULL_AGG, "max"),
                 (ROW_AGG, "sum"), (ROW_AGG, "min"), (ROW_AGG, "max"), (COL_AGG, "sum"), (COL_AGG, "sumsq"),
                 (COL_AGG, "min"), (COL_AGG, "max")]
UNSAFE_VARIANTS = [(NO_AGG, "sum"), (FULL_AGG, "sum"), (ROW_AGG, "max"), (COL_AGG, "min")]


def cell_plan(which: str, agg: str, op: str) -> CPlan:
    _, safe, unsafe = cell_exprs()
    root = safe if which == "safe" else unsafe
    return CPlan("cell", root, agg, op, sparse_safe=which == "safe", ninputs=5)


@pytest.mark.parametrize("agg,op", CELL_VARIANTS)
def test_cell_sparse_safe_plan_all_aggregations(agg, op):
    plan = cell_plan("safe", agg, op)
    for kind in KINDS:
        for sm, ss in ((False, False), (True, False), (False, True), (True, True)):
            check(f"safe-{agg}-{op}", plan, cell_inputs(kind, sm, ss, seed=len(kind)))


@pytest.mark.parametrize("agg,op", UNSAFE_VARIANTS)
def test_cell_sparse_unsafe_plan(agg, op):
    plan = cell_plan("unsafe", agg, op)
    for kind in KINDS:
        for sm, ss in ((False, False), (True, True)):
            check(f"unsafe-{agg}-{op}", plan, cell_inputs(kind, sm, ss, seed=3))


def test_sparse_safe_no_agg_keeps_the_main_pattern_and_min_sees_unseen_zeros():
    X = sps.random(50, 40, density=0.05, format="csr", random_state=4)
    X.data[:] = np.abs(X.data) + 1.0  # all stored values positive: min must still be the unseen 0
    Y = np.random.default_rng(1).random((50, 40)) + 1.0
    ins = [X, Y, np.ones((50, 1)), np.ones((1, 40)), 1.0]
    got = compiled(f"safe-{NO_AGG}-sum", cell_plan("safe", NO_AGG, "sum"))(ins)
    assert sps.issparse(got) and got.nnz == X.nnz
    assert compiled(f"safe-{FULL_AGG}-min", cell_plan("safe", FULL_AGG, "min"))(ins) == 0.0
    rows = compiled(f"safe-{ROW_AGG}-min", cell_plan("safe", ROW_AGG, "min"))(ins)
    cols = compiled(f"safe-{COL_AGG}-min", cell_plan("safe", COL_AGG, "min"))(ins)
    assert same(rows, evaluate(cell_plan("safe", ROW_AGG, "min"), ins)) and np.all(rows == 0)
    assert same(cols, evaluate(cell_plan("safe", COL_AGG, "min"), ins)) and np.all(cols == 0)
    # a CSR zero annihilates * with a full-size operand whatever it holds (SystemDS's rule) ...
    Y2 = Y.copy()
    Y2[0, 0] = math.nan
    assert X[0, 0] == 0
    plan = cell_plan("safe", FULL_AGG, "sum")
    op = compiled(f"safe-{FULL_AGG}-sum", plan)
    got = op([X, Y2, *ins[2:]])
    assert not math.isnan(got) and same(got, evaluate(plan, [X, Y2, *ins[2:]]))
    assert math.isnan(op([X.toarray(), Y2, *ins[2:]]))  # ... but not a dense zero: 0 * NaN
    # a NaN in a vector operand reaches the result (0 * NaN), also after an in-place update
    r = ins[2]
    assert not math.isnan(op(ins))
    r[3, 0] = math.nan  # in place: the memoized finiteness check must be invalidated
    codegen.invalidate(r)
    assert math.isnan(op(ins)) and math.isnan(evaluate(plan, ins))
    codegen.clear_finite_cache()


def test_cell_reference_equals_unfused_dml():
    names = "XYrcs"
    texts = {(NO_AGG, "sum"): "R = {e}", (FULL_AGG, "sum"): "R = sum({e})", (FULL_AGG, "min"): "R = min({e})",
             (ROW_AGG, "max"): "R = rowMaxs({e})", (COL_AGG, "sum"): "R = colSums({e})"}
    safe_dml = "(((X * Y) * (r + s)) * c)"
    for kind in ("dense", "sparse", "zero"):
        ins = cell_inputs(kind, True, True, seed=5)
        for (agg, op), t in texts.items():
            plan = cell_plan("safe", agg, op)
            with cfgmod.using(rewrites=False):
                res = run_dml(t.format(e=safe_dml), dict(zip(names, ins)), ["R"])["R"]
            assert same(evaluate(plan, runtime_formats(ins)), res), (kind, t)


def test_magg_several_full_aggregates_in_one_pass():
    b, safe, unsafe = cell_exprs()
    X, Y = b.input(0, MAIN), b.input(1, CELL)
    plan = CPlan("magg", safe, FULL_AGG, "sum", ninputs=5, roots=(safe, b.op("*", X, Y), unsafe),
                 agg_ops=("sum", "max", "min"))
    for kind in KINDS:
        for sm, ss in ((False, False), (True, True)):
            ins = cell_inputs(kind, sm, ss, seed=7)
            check("magg", plan, ins)
    assert isinstance(compiled("magg", plan)(cell_inputs("dense", False, False)), tuple)
    safe_plan = CPlan("magg", safe, FULL_AGG, "sum", sparse_safe=True, ninputs=5, roots=(safe, b.op("*", X, Y)),
                      agg_ops=("sum", "min"))
    for kind in KINDS:
        check("magg-safe", safe_plan, cell_inputs(kind, True, False, seed=8))
        check("magg-safe", safe_plan, cell_inputs(kind, False, False, seed=8))




@pytest.mark.parametrize("agg,op", [(NO_AGG, "sum"), (FULL_AGG, "sum"), (FULL_AGG, "sumsq"), (FULL_AGG, "min"),
                                    (FULL_AGG, "max"), ("magg", "sum")])
def test_flat_cell_loop_over_inputs_read_cell_by_cell(agg, op):
    """Plans over MAIN/CELL/SCALAR inputs only run mode 0 as one loop over the block's cells
    (gen_cell.flat_ok); with row or column vectors they keep the row loop. Tall narrow shapes (the
    n x 1 and n x 2 vectors it is for), cell counts that are not multiples of the unroll or of the
    fold interval, empty inputs, NaN/Inf on either side: equal to the reference interpreter."""
    b = CPlanBuilder()
    X, Y, s = b.input(0, MAIN), b.input(1, CELL), b.input(4, SCALAR)
    e = b.op("*", b.op("*", X, Y), b.op("+", Y, s))
    u = b.op("max", b.op("-", X, b.literal(0.5)), b.op("/", Y, s))
    if agg == "magg":
        plan = CPlan("magg", e, FULL_AGG, "sum", ninputs=5, roots=(e, u, e), agg_ops=("sum", "min", "max"))
    else:
        plan = CPlan("cell", e if op in ("sum", "sumsq") else u, agg, op, sparse_safe=False, ninputs=5)
    fop = compiled(f"flat-{agg}-{op}", plan)
    assert "x0 = flat(a0)" in fop.source and "for t0 in range(ta, tu, 4):" in fop.source or \
        agg == NO_AGG and "xo[t] = " in fop.source
    rng = np.random.default_rng(11)
    for shape in ((5001, 1), (2501, 2), (23, 17), (1, 1), (0, 7)):
        for special in (False, True):
            Xd, Yd = rng.normal(size=shape), rng.normal(size=shape)
            if special and Xd.size > 3:
                Xd.flat[[1, Xd.size // 2]] = (math.nan, math.inf)
                Yd.flat[[2, Yd.size - 1]] = (-math.inf, math.nan)
            ins = [Xd, Yd, np.zeros((shape[0], 1)), np.zeros((1, shape[1])), 0.75]
            got = fop(ins)
            assert same(got, evaluate(plan, ins)), (agg, op, shape, special)
    vec_plan = cell_plan("safe", FULL_AGG, "sum")  # reads a row and a column vector: the row loop
    assert "flat(" not in compiled("safe-full_agg-sum-rows", vec_plan).source
# -------------------------------------------------------------------------------------- row

def row_plans() -> dict[str, tuple[CPlan, str]]:
    b = CPlanBuilder()
    X, v, V, w, Y, c, s = (b.input(0, MAIN), b.input(1, MATRIX), b.input(2, MATRIX), b.input(3, ROWVEC),
                           b.input(4, CELL), b.input(5, COLVEC), b.input(6, SCALAR))
    P, O = b.input(7, CELL), b.input(8, MATRIX)
    Q = b.op("*", P, b.op("vecmat", X, V))
    return {
        "tXXv": (CPlan("row", b.op("*", X, b.op("vecmat", X, v)), COL_AGG_T, ninputs=7), "R = t(X) %*% (X %*% v)"),
        "tXwXv": (CPlan("row", b.op("*", X, b.op("*", w, b.op("vecmat", X, v))), COL_AGG_T, ninputs=7),
                  "R = t(X) %*% (w * (X %*% v))"),
        "tXXV": (CPlan("row", X, COL_AGG_B1_T, root2=b.op("vecmat", X, V), ninputs=7), "R = t(X) %*% (X %*% V)"),
        "rowSumsXY": (CPlan("row", b.op("rowSums", b.op("*", X, Y)), NO_AGG, ninputs=7), "R = rowSums(X * Y)"),
        "colSumsXrs": (CPlan("row", b.op("/", X, b.op("rowSums", X)), COL_AGG, ninputs=7),
                       "R = colSums(X / rowSums(X))"),
        "softmax": (CPlan("row", b.op("exp", b.op("-", X, b.op("rowMaxs", X))), NO_AGG, ninputs=7),
                    "R = exp(X - rowMaxs(X))"),
        "sumrow": (CPlan("row", b.op("+", b.op("*", X, c), b.op("*", s, b.op("rowMins", Y))), FULL_AGG, ninputs=7),
                   "R = sum(X * c + s * rowMins(Y))"),
        "dotcol": (CPlan("row", b.op("*", w, b.op("dot", X, c)), COL_AGG, ninputs=7),
                   "R = colSums(w * rowSums(X * c))"),
        # multiLogReg's Hessian-vector product: vecmat of a row aggregate (1 long) by a 1 x 2 matrix;
        # the 0-row warm-up call must shape that matrix 1 x 0, not 0 x 0
        "hessian": (CPlan("row", X, COL_AGG_B1_T, root2=b.op("-", Q, b.op("*", P, b.op(
            "vecmat", b.op("rowSums", Q), O))), ninputs=9),
            "Q = P * (X %*% V)\nR = t(X) %*% (Q - P * (rowSums(Q) %*% O))"),
        # column ranges of the main and of a CELL input (a CSR Y's zeros annihilate the product)
        "colrange": (CPlan("row", b.op("rowSums", b.op("*", b.op("colrange", X, b.literal(2), b.literal(6)),
                                                         b.op("colrange", Y, b.literal(3), b.literal(7)))),
                           NO_AGG, ninputs=7), "R = rowSums(X[, 2:6] * Y[, 3:7])"),
    }


def row_inputs(kind: str, special_main: bool, special_side: bool, seed: int = 0, shape=None):
    rng = np.random.default_rng(seed)
    n, m = shape or shape_of(kind)
    X = matrix(rng, kind, (n, m), special_main, kind != "dense")
    Y = matrix(rng, kind if kind != "ultra" else "sparse", (n, m), special_side, kind != "dense" and seed % 2 == 1)
    v, V = rng.normal(size=(m, 1)), rng.normal(size=(m, 2))
    w, c = rng.normal(size=(n, 1)), rng.normal(size=(1, m))
    if special_side and n and m:
        v[0, 0], V[-1, 1], c[0, 0] = math.nan, math.inf, -math.inf
    P, O = rng.uniform(0.1, 1, size=(n, 2)), np.ones((1, 2))
    if special_side and n > 1:
        P[1, 0] = math.nan
    return [X, v, V, w, Y, c, 1.25, P, O]


@pytest.mark.parametrize("name", list(row_plans()))
def test_row_template_variants(name):
    plan, _ = row_plans()[name]
    for kind in KINDS:
        for k, (sm, ss) in enumerate(((False, False), (True, False), (False, True), (True, True))):
            check(f"row-{name}", plan, row_inputs(kind, sm, ss, seed=k))


@pytest.mark.parametrize("name, skips", [("tXXv", True), ("tXwXv", True), ("tXXV", True), ("rowSumsXY", False),
                                         ("colSumsXrs", False), ("softmax", False)])
def test_a_sparse_safe_row_plan_skips_the_empty_rows_of_a_sparse_main(name, skips):
    """SystemDS's sparse-safe row template: over a CSR main, a plan whose output only the row's stored
    entries add to (a sparse root aggregated over [lo, hi), no check that could send the row to the
    dense body) skips empty rows; X / rowSums(X) does not (its empty rows are 0 / 0), nor a plan with
    one output row per input row. Values as the NumPy spec and the unfused run, with NaN/Inf in the
    dense factors (w's NaN falls on empty rows too)."""
    plan, text = row_plans()[name]
    op = compiled(f"row-skip-{name}", plan)
    assert ("if lo < hi:" in op.source) == skips
    rng = np.random.default_rng(3)
    for special in (False, True):
        ins = row_inputs("sparse", False, special, seed=2, shape=(400, 30))
        X = rand_csr(400, 30, 0.3, seed=4).tolil()
        X[rng.random(400) < 0.9, :] = 0.0  # ~90% of the rows empty
        ins[0] = sps.csr_matrix(X)
        if special:
            ins[3][::7] = math.nan
        check(f"row-skip-{name}", plan, ins)
        if skips:
            with cfgmod.using(rewrites=False):
                res = run_dml(text, dict(zip(["X", "v", "V", "w", "Y", "c", "s", "P", "O"], ins)), ["R"])["R"]
            assert same(op(ins), res), (name, special)


@pytest.mark.parametrize("name", list(row_plans()))
def test_row_reference_equals_unfused_dml(name):
    plan, text = row_plans()[name]
    for kind in ("dense", "sparse"):
        ins = row_inputs(kind, True, False, seed=1)
        with cfgmod.using(rewrites=False):
            res = run_dml(text, dict(zip(["X", "v", "V", "w", "Y", "c", "s", "P", "O"], ins)), ["R"])["R"]
        assert same(evaluate(plan, runtime_formats(ins)), res), (name, kind)


@pytest.mark.parametrize("narrow", [False, True], ids=["row-major", "transposed"])
# (not "colrange": a column range is a view of one row, the plan has the per-row body only,
# gen_row_block.PER_ROW_ONLY; test_row_template_variants runs it)
@pytest.mark.parametrize("name", [n for n in row_plans() if n != "colrange"])
def test_row_block_body_equals_the_per_row_body(name, narrow):
    """Dense inputs run the block body (BLAS per block of rows): the transposed one for a narrow
    plan while the inputs it reads cell by cell stay narrow (3 columns here; 17 runs the per-row
    body), the row-major one otherwise; the same values with the main and CELL inputs as CSR without
    zeros run the per-row body. All must agree, NaN/Inf included."""
    plan, _ = row_plans()[name]
    plan.narrow = narrow
    op = compiled(f"row-{name}-{narrow}", plan)
    # every plan here has a block form (one without keeps only the per-row body, tested above)
    block = " or ".join(f"mode == {k}" for k in BLOCK_MODES)
    assert f"if {block}:" in op.source and ("# transposed block" in op.source) == narrow, name
    # row-major loops over (r, q) come twice, plain q where every broadcast factor z is 1 (the
    # one-column shape below runs the other copy)
    assert narrow or "q * z" not in op.source or re.search(r"if z\d+ == 1", op.source), name
    for shape in ((700, 3), (23, 17), (40, 1)):
        for special in (False, True):
            ins = row_inputs("dense", special, special, seed=3, shape=shape)
            per_row = list(ins)
            for pos in (0, 4, 7):  # X, and the CELL inputs Y and P: CSR with every cell stored
                d = np.asarray(ins[pos], dtype=np.float64)
                d = np.where(d == 0.0, 0.5, d)
                ins[pos], per_row[pos] = d, sps.csr_array(d)
                assert per_row[pos].nnz == d.size
            got = op(ins)
            assert same(got, op(per_row)), (name, shape)
            assert same(got, evaluate(plan, ins)), (name, shape)
    # the runner chose the bodies (runner_row.dense_mode): the mmchain loop for t(X) %*% (X %*% v), else
    # the block body; the transposed one only while the inputs stay narrow (17 columns: per-row body)
    used, chain = op._kernel.modes(), mmchain(canon(plan), plan) is not None
    assert (4 in used) if chain else bool(used & set(BLOCK_MODES)), (name, used)
    assert 0 in used or not narrow or chain, (name, used)
    # a dense main with CSR CELL inputs (structural zeros against NaN/Inf in the other operands):
    # the transposed body densifies their blocks and keeps the annihilation rule of the per-row body
    for seed in range(3):
        ins = row_inputs("dense", True, True, seed=seed, shape=(700, 3))
        rng = np.random.default_rng(seed)
        for pos in (4, 7):
            d = np.asarray(ins[pos], dtype=np.float64) * (rng.random(ins[pos].shape) < 0.3)
            d[1, :] = math.nan
            ins[pos] = sps.csr_array(d)
        ins[0][2:5, :] = np.array([math.nan, math.inf, -math.inf])[:, None]
        assert same(op(ins), evaluate(plan, ins)), (name, seed)


@pytest.mark.parametrize("narrow", [False, True], ids=["row-major", "transposed"])
def test_block_products_by_few_columns_loop_and_by_more_call_blas(narrow):
    """X %*% V and t(X) %*% Q in the block body: loops where prims.small_mm says so (two columns of
    V, X at least 16 wide: rows_matmul_small, rows_t_matmul_small), BLAS otherwise; both agree with
    the reference, NaN/Inf in X and V included."""
    from lafuse.codegen.prims import small_mm

    assert small_mm(2, 17) and small_mm(2, 33) and not small_mm(2, 3) and not small_mm(1, 33)
    plan, _ = row_plans()["tXXV"]
    plan.narrow = narrow
    op = compiled(f"row-tXXV-cols-{narrow}", plan)
    assert "rows_matmul_small" in op.source and "rows_t_matmul_small" in op.source and "mm(" in op.source
    rng = np.random.default_rng(21)
    for cols in (1, 2, 4):
        for n, m in ((700, 3), (50, 17), (40, 33), (1, 1)):
            ins = row_inputs("dense", True, True, seed=cols, shape=(n, m))
            ins[2] = rng.normal(size=(m, cols))
            if m > 1:
                ins[2][1, -1] = math.nan
            assert same(op(ins), evaluate(plan, ins)), (cols, n, m)
    # the runner pinned the paths (runner_row.dense_mode): loops for two columns of a wide X, else BLAS
    assert {BLOCK_BLAS, BLOCK_LOOPS} <= op._kernel.modes() and BLOCK_MIXED not in op._kernel.modes()


def test_block_mode_pins_each_products_path(monkeypatch):
    """The block body's mode says which products (prims.small_mm) loop: all of them, none, or, when
    they differ, each decided in the kernel. The mixed one (forced here) computes the same values as
    the reference on every shape."""
    sites = BlockCond((), (), (), small=(("cols", 2), ("len", 3)))
    lens = np.array([1, 1, 1, 2])
    assert runner_row.block_mode(sites, 17, lens, {2: (17, 2)}) == BLOCK_LOOPS
    assert runner_row.block_mode(sites, 17, np.array([1, 1, 1, 4]), {2: (17, 2)}) == BLOCK_MIXED
    assert runner_row.block_mode(sites, 17, np.array([1, 1, 1, 4]), {2: (17, 4)}) == BLOCK_BLAS
    assert runner_row.block_mode(sites, 15, lens, {2: (15, 2)}) == BLOCK_BLAS  # X too narrow for the loops
    assert runner_row.block_mode(BlockCond((), (), ()), 17, lens, {}) == BLOCK_BLAS  # no product at all
    plan, _ = row_plans()["hessian"]
    source = compiled("row-hessian-modes", plan).source
    assert "mode == 5 or mode == 6 and small_mm(" in source
    monkeypatch.setattr(runner_row, "block_mode", lambda cond, m, lens, shapes: BLOCK_MIXED)
    codegen.clear_memory_cache()
    op = fused.compile_plan(plan, eager=False)
    rng = np.random.default_rng(5)
    for cols in (1, 2, 3):
        for n, m in ((50, 17), (40, 33), (30, 4)):
            ins = row_inputs("dense", True, True, seed=cols, shape=(n, m))
            ins[2], ins[7], ins[8] = rng.normal(size=(m, cols)), rng.uniform(size=(n, cols)), np.ones((1, cols))
            assert same(op(ins), evaluate(plan, ins)), (cols, n, m)
    assert op._kernel.modes() == {BLOCK_MIXED}
    codegen.clear_memory_cache()


def test_narrow_row_plans_are_the_fused_ones_with_narrow_cell_reads():
    """A row plan is narrow (transposed block body) when the inputs it reads cell by cell have at
    most NARROW_ROW_COLS columns; inputs only handed to BLAS (X in X %*% V) may be wide."""
    plans = row_plans()
    assert cell_read_inputs(plans["hessian"][0]) == {7}  # P; X only in vecmat and t(X) %*% (...)
    assert cell_read_inputs(plans["tXXV"][0]) == set()
    assert cell_read_inputs(plans["rowSumsXY"][0]) == {0, 4}
    narrow_key = dataclasses.replace(plans["tXXV"][0], narrow=True).canonical_key()[0]
    assert narrow_key != plans["tXXV"][0].canonical_key()[0]


def test_row_sparse_path_is_linear_in_nnz():
    """X has 2e5 rows of 1e6 columns and 2e5 non-zeros: the sparse path touches the non-zeros (a few
    ms), a path that densified each row would touch 2e11 cells (minutes), so the generous bound
    below separates the two by orders of magnitude whatever else the machine runs."""
    n, m = 200000, 1000000
    plan, _ = row_plans()["tXXv"]
    op = compiled("row-tXXv", plan)
    X = rand_csr(n, m, 1e-6, 3)
    v = np.random.default_rng(0).random((m, 1))
    ins = [X, v, np.zeros((m, 2)), np.zeros((n, 1)), np.zeros((n, 0)), np.zeros((1, m)), 0.0]
    import time

    t0 = time.perf_counter()
    got = op(ins)
    dt = time.perf_counter() - t0
    want = X.T @ (X @ v)
    assert np.allclose(got, want, rtol=1e-10)
    assert dt < 20.0


# ------------------------------------------------------------------------------------ outer

def outer_plans() -> dict[str, CPlan]:
    b = CPlanBuilder()
    X, U, V, Y = b.input(0, MAIN), b.input(1, OUTER_U), b.input(2, OUTER_V), b.input(4, CELL)
    r = b.input(5, ROWVEC)
    uv = b.uv(U, V)
    e = b.op("*", X, b.op("log", b.op("+", uv, b.literal(1e-15))))
    wdiv = b.op("/", b.op("*", X, Y), b.op("+", b.op("*", uv, r), b.literal(0.5)))
    return {
        "no_agg": CPlan("outer", e, NO_AGG, ninputs=6, sparse_safe=True),
        "full": CPlan("outer", b.op("*", Y, b.op("^", b.op("-", X, uv), b.literal(2.0))), FULL_AGG, ninputs=6,
                      sparse_safe=True),
        "right": CPlan("outer", wdiv, RIGHT_MM, ninputs=6, mm=3, sparse_safe=True),
        "left": CPlan("outer", wdiv, LEFT_MM, ninputs=6, mm=3, sparse_safe=True),
    }


def outer_inputs(kind: str, name: str, special_main: bool, special_side: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    n, m = shape_of(kind)
    k = 4
    X = matrix(rng, kind if kind != "dense" else "sparse", (n, m), special_main, kind != "dense")
    U, V = rng.random((n, k)), rng.random((m, k))
    Y = matrix(rng, "dense", (n, m), special_side, seed % 2 == 1)
    mm = rng.normal(size=(m if name == "right" else n, 3))
    r = rng.random((n, 1))
    if special_side and n and m:
        mm[0, 0], U[0, 0] = math.nan, math.inf
    return [X, U, V, mm, Y, r]


@pytest.mark.parametrize("name", ["no_agg", "full", "right", "left"])
def test_outer_template_variants(name):
    plan = outer_plans()[name]
    for kind in KINDS:
        for k, (sm, ss) in enumerate(((False, False), (True, False), (False, True), (True, True))):
            check(f"outer-{name}", plan, outer_inputs(kind, name, sm, ss, seed=k))


def test_outer_sum_log_is_proportional_to_nnz():
    b = CPlanBuilder()
    X, U, V = b.input(0, MAIN), b.input(1, OUTER_U), b.input(2, OUTER_V)
    plan = CPlan("outer", b.op("*", X, b.op("log", b.op("+", b.uv(U, V), b.literal(1e-15)))), FULL_AGG,
                 ninputs=3, sparse_safe=True)
    n, r = 1000000, 20  # 2e5 non-zeros; a dense U %*% t(V) would be 1e12 cells (hours, or out of memory)
    X = rand_csr(n, n, 2e-7, 2)
    rng = np.random.default_rng(0)
    U, V = rng.random((n, r)), rng.random((n, r))
    op = compiled("outer-sumlog", plan)
    import time

    t0 = time.perf_counter()
    got = op([X, U, V])
    dt = time.perf_counter() - t0
    rows, cols = X.nonzero()
    want = float(np.sum(X.data * np.log(np.einsum("ij,ij->i", U[rows], V[cols]) + 1e-15)))
    assert got == pytest.approx(want, rel=1e-10)
    assert dt < 20.0  # 2e5 non-zeros x 20: milliseconds; the bound only separates O(nnz) from O(n^2)


# ---------------------------------------------------------------------- random expressions

SAFE_OPS = ["abs", "round", "floor", "ceil", "sign", "sin", "tanh", "u-", "!"]


def rand_expr(b: CPlanBuilder):
    leaves = st.one_of(st.sampled_from([(0, MAIN), (1, CELL), (2, ROWVEC), (3, COLVEC), (4, SCALAR)])
                       .map(lambda t: b.input(*t)),
                       st.sampled_from([0.0, 1.0, -2.5, 0.5, 3.0]).map(b.literal))
    calls = SAFE_OPS + ["exp", "log", "sqrt", "isNaN", "isInf"]
    bins = ["+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "min", "max", "xor"]

    def extend(ch):
        return st.one_of(st.tuples(st.sampled_from(calls), ch).map(lambda t: b.op(t[0], t[1])),
                         st.tuples(st.sampled_from(bins), ch, ch).map(lambda t: b.op(t[0], t[1], t[2])),
                         st.tuples(ch, ch, ch).map(lambda t: b.op("ifelse", *t)))

    return st.recursive(leaves, extend, max_leaves=6)


def _finite_ops(n) -> bool:
    ok = {"input", "literal", "abs", "round", "floor", "ceil", "sign", "sin", "tanh", "u-", "!", "<", "<=", ">",
          ">=", "==", "!=", "&", "|", "xor", "min", "max", "ifelse", "isNaN", "isInf", "+", "-", "*"}
    return n.op in ok and all(_finite_ops(c) for c in n.children)


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_random_cell_expressions_equal_reference(data):
    b = CPlanBuilder()
    e = data.draw(rand_expr(b))
    X = b.input(0, MAIN)
    safe = _finite_ops(e)
    root = b.op("*", X, e) if safe else b.op("+", e, X)
    agg, op = data.draw(st.sampled_from(CELL_VARIANTS))
    plan = CPlan("cell", root, agg, op, sparse_safe=safe, ninputs=5)
    op_ = fused.compile_plan(plan, threads=2)
    for kind in ("dense", "sparse", "zero"):
        ins = cell_inputs(kind, data.draw(st.booleans()), data.draw(st.booleans()), seed=data.draw(st.integers(0, 3)))
        got, ref = op_(ins), evaluate(plan, ins)
        assert same(got, ref), f"{plan.root!r} {agg} {op} {kind}"


# ------------------------------------------------------------------------------- the cache

def test_plan_cache_shares_kernels_across_input_order_and_literals():
    def plan(order: tuple[int, int], lit: float) -> CPlan:
        b = CPlanBuilder()
        x, y = b.input(order[0], MAIN), b.input(order[1], CELL)
        return CPlan("cell", b.op("+", b.op("*", x, y), b.literal(lit)), ROW_AGG, "sum", ninputs=2)

    rng = np.random.default_rng(9)
    A, B = rng.normal(size=(30, 6)), rng.normal(size=(30, 6))
    p1, p2 = plan((0, 1), 2.0), plan((1, 0), -7.5)
    op1 = fused.compile_plan(p1)
    before = codegen.cache_stats()
    op2 = fused.compile_plan(p2)
    after = codegen.cache_stats()
    assert after["mem_hits"] == before["mem_hits"] + 1 and after["compiled"] == before["compiled"]
    assert op1.hash == op2.hash and op1.source == op2.source
    assert "7.5" not in op2.source and "2.0" not in op2.source  # literals are kernel arguments
    assert same(op1([A, B]), evaluate(p1, [A, B])) and same(op2([A, B]), evaluate(p2, [A, B]))
    assert same(op2([A, B]), (B * A - 7.5).sum(axis=1, keepdims=True))
    assert codegen.is_cached(p2)
    codegen.clear_memory_cache()
    op3 = fused.compile_plan(p2)  # from disk now
    assert codegen.cache_stats()["disk_hits"] == after["disk_hits"] + 1
    assert same(op3([A, B]), evaluate(p2, [A, B]))


def _lit_plan(lits: tuple[float, float], mode: str) -> CPlan:
    b = CPlanBuilder()
    x, y = b.input(0, MAIN), b.input(1, CELL)
    root = b.op("+", b.op("*", b.op("*", x, y), b.literal(lits[0])), b.literal(lits[1]))
    plan = CPlan("cell", root, ROW_AGG, "sum", ninputs=2)
    plan.const_lits = mode
    return plan


def test_literal_policies_specialize_constants_and_key_the_plan_cache_by_them():
    """Config codegen_literals (paper 001 §4.4): literals as kernel arguments share one kernel across
    values; as constants they are in the source and the canonical hash; CSLH's recompilation mode
    keeps the integer ones constant and the others arguments."""
    rng = np.random.default_rng(2)
    A, B = rng.normal(size=(30, 6)), rng.normal(size=(30, 6))
    keys = {}
    for mode in ("none", "all", "int"):
        for lits in ((2.5, 3.0), (0.5, 3.0), (2.5, 4.0)):
            plan = _lit_plan(lits, mode)
            key, _, args = plan.canonical_key()
            keys[mode, lits] = key
            assert args == {"none": lits, "all": (), "int": (lits[0],)}[mode]
            op = fused.compile_plan(plan)
            assert ("lits[" in op.source) == (mode != "all")
            assert (repr(lits[1]) in op.source) == (mode != "none")
            assert same(op([A, B]), (A * B * lits[0] + lits[1]).sum(axis=1, keepdims=True))
    assert keys["none", (2.5, 3.0)] == keys["none", (0.5, 3.0)] == keys["none", (2.5, 4.0)]
    assert len({keys["all", lits] for lits in ((2.5, 3.0), (0.5, 3.0), (2.5, 4.0))}) == 3
    assert keys["int", (2.5, 3.0)] == keys["int", (0.5, 3.0)] != keys["int", (2.5, 4.0)]
    assert keys["none", (2.5, 3.0)] != keys["all", (2.5, 3.0)] != keys["int", (2.5, 3.0)]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 2.5])
def test_a_constant_literal_keeps_the_finiteness_check_of_the_sparse_mode(value):
    """A sparse main runs the sparse-safe mode only where every literal is finite; a constant one is
    no kernel argument, and is checked as well (X * Inf is NaN at X's zeros in the dense mode)."""
    b = CPlanBuilder()
    x = b.input(0, MAIN)
    ins = [rand_csr(40, 30, 0.1, seed=1)]
    got = {}
    for mode in ("none", "all"):
        plan = CPlan("cell", b.op("*", x, b.literal(value)), FULL_AGG, "sum", sparse_safe=True, ninputs=1)
        plan.const_lits = mode
        got[mode] = compiled(f"const-{mode}-{value}", plan)(ins)
        assert same(got[mode], evaluate(plan, ins)), (mode, value)
    assert same(got["none"], got["all"])


@pytest.mark.parametrize("policy", ["args", "constants", "cslh"])
def test_literal_policies_compute_the_same_values(policy):
    """A loop body recompiled at run time (its sizes unknown before) and a block planned once, under
    each policy: equal values; under CSLH the first plan's literals are constants, the recompiled
    body's integer ones only."""
    from lafuse.fusion import const_literals

    assert const_literals(policy, False) == {"args": "none", "constants": "all", "cslh": "all"}[policy]
    assert const_literals(policy, True) == {"args": "none", "constants": "all", "cslh": "int"}[policy]
    text = """
s = 0
for (i in 1:3) {
  Xb = X[1:(10 * i), ]
  s = s + sum(Xb * 2.5 + Xb ^ 2 * i / 7)
}
R = sum(X * 0.5 - 3) + s
"""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 12))
    built: list[CPlan] = []
    real = fused.compile_plan

    def recording(plan, *a, **k):
        built.append(plan)
        return real(plan, *a, **k)

    with mock.patch.object(fused, "compile_plan", recording), \
            cfgmod.using(codegen_literals=policy, fusion="fuse-all"):
        got = run_dml(text, {"X": X}, ["R"])["R"]
    with cfgmod.using(codegen=False):
        want = run_dml(text, {"X": X}, ["R"])["R"]
    assert got == pytest.approx(want, rel=1e-12)
    modes = {p.const_lits for p in built}
    assert modes == {"args": {"none"}, "constants": {"all"}, "cslh": {"all", "int"}}[policy], modes


def test_shape_mismatch_raises_value_error():
    op = compiled(f"safe-{FULL_AGG}-sum", cell_plan("safe", FULL_AGG, "sum"))
    ins = cell_inputs("dense", False, False)
    with pytest.raises(ValueError, match="shape"):
        op([ins[0], ins[1][:, :-1], *ins[2:]])
    with pytest.raises(ValueError, match="expected"):
        op([ins[0], ins[1], ins[2].T, *ins[3:]])
    with pytest.raises(ValueError, match="inputs"):
        op(ins[:2])


_SCRIPT = """
import json, sys
from lafuse import codegen
from lafuse.runtime.local import fused
from lafuse.hops.cplan import CPlanBuilder, CPlan, MAIN, CELL, FULL_AGG
import numpy as np
b = CPlanBuilder()
x, y = b.input(0, MAIN), b.input(1, CELL)
op = fused.compile_plan(CPlan("cell", b.op("-", b.op("*", x, y), b.literal(3.0)), FULL_AGG, "max", ninputs=2))
r = op([np.ones((4, 4)), np.full((4, 4), 5.0)])
print(json.dumps({**{k: v for k, v in codegen.cache_stats().items() if k != "per_kernel"}, "r": r}))
"""


def test_disk_cache_across_processes(disk_cache):
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(disk_cache / "procs")}
    outs = [json.loads(subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                                      check=True).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert outs[0]["compiled"] == 1 and outs[0]["disk_hits"] == 0 and outs[0]["r"] == 2.0
    assert outs[1]["compiled"] == 0 and outs[1]["disk_hits"] == 1 and outs[1]["r"] == 2.0
    assert outs[1]["compile_time_cold"] == 0.0 and outs[1]["compile_time_warm"] > 0.0
    assert any(p.suffix == ".py" for p in (disk_cache / "procs").iterdir())


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(11)
    X = rand_csr(3000, 400, 0.05, 5)
    ins = [X, rng.normal(size=(3000, 400)), rng.normal(size=(3000, 1)), rng.normal(size=(1, 400)), 0.3]
    for agg, op in ((FULL_AGG, "sum"), (COL_AGG, "sum")):
        plan = cell_plan("safe", agg, op)
        one = compiled(f"safe-{agg}-{op}", plan, threads=1)(ins)
        two = compiled(f"safe-{agg}-{op}", plan, threads=2)(ins)
        assert np.array_equal(dense(one), dense(two))
    plan, _ = row_plans()["tXXV"]
    rins = [X, rng.normal(size=(400, 1)), rng.normal(size=(400, 2)), rng.normal(size=(3000, 1)),
            np.zeros((3000, 400)), rng.normal(size=(1, 400)), 1.0]
    assert np.array_equal(compiled("row-tXXV", plan, threads=1)(rins), compiled("row-tXXV", plan, threads=2)(rins))
    oplan = outer_plans()["left"]
    oins = [X, rng.random((3000, 3)), rng.random((400, 3)), rng.normal(size=(3000, 2)), rng.random((3000, 400)),
            rng.random((3000, 1))]
    assert np.array_equal(compiled("outer-left", oplan, threads=1)(oins), compiled("outer-left", oplan, threads=2)(oins))


@pytest.mark.parametrize("agg,op", [(NO_AGG, "sum"), (FULL_AGG, "sum"), (FULL_AGG, "sumsq"), (FULL_AGG, "min"),
                                    (ROW_AGG, "sum"), (ROW_AGG, "max"), (COL_AGG, "sum"), (COL_AGG, "sumsq")])
def test_cell_all_csr_product_merge_intersects(agg, op):
    """sum(X * abs(Y) * Z * 2) over CSR X, Y, Z: mode 3 (merge over the column indices, no flags) when
    all are finite; NaN/Inf in any of them or a dense side input falls back to the flagged loops."""
    b = CPlanBuilder()
    X, Y, Z = b.input(0, MAIN), b.input(1, CELL), b.input(2, CELL)
    root = b.op("*", b.op("*", b.op("*", X, b.op("abs", Y)), Z), b.literal(2.0))
    plan = CPlan("cell", root, agg, op, sparse_safe=True, ninputs=3)
    f = compiled(f"isect-{agg}-{op}", plan)
    assert ("mode == 3" in f.source) == (op in ("sum", "sumsq"))
    for kind in ("sparse", "ultra", "empty_rows", "empty_cols", "zero"):
        for sm, ss in ((False, False), (True, False), (False, True)):
            rng = np.random.default_rng(len(kind))
            shape = shape_of(kind)
            ins = [matrix(rng, kind if kind != "ultra" else "sparse", shape, sm, True),
                   matrix(rng, "sparse", shape, ss, True), matrix(rng, "sparse", shape, False, True)]
            check(f"isect-{agg}-{op}", plan, ins)
            check(f"isect-{agg}-{op}", plan, [ins[0], ins[1], dense(ins[2])])


def _blas_counts() -> dict[str, int]:
    from threadpoolctl import threadpool_info

    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_kernel_pool_threads_run_blas_on_one_thread():
    """Every pool thread calls BLAS (np.dot per block) at once: none may spread its products over all
    cores too, so every loaded BLAS runs at one thread while such a kernel runs (threads.blas_single)."""
    from lafuse import threads
    from lafuse.runtime.local.fused import runner

    assert threads.blas_setters(), "no BLAS with a settable thread count is loaded"
    seen: list[dict[str, int]] = []

    def kernel(b0: int, b1: int, mode: int, n: int, m: int) -> None:  # a Python kernel: assumed to call BLAS
        seen.append(_blas_counts())

    runner.set_threads(2)
    try:
        runner.launch(kernel, 4, 0, 10 * runner.PARALLEL_CELLS, 2)
    finally:
        runner.set_threads(None)
    assert seen and all(set(c.values()) == {1} for c in seen), seen


def test_a_blas_kernel_leaves_the_callers_blas_threads_as_they_were():
    """OpenBLAS's pthreads build has one thread count per library, whichever thread sets it: a row
    kernel with products (pool threads, then the calling thread alone) must hand NumPy's unfused
    ``%*%`` back the count it had. Before, it stayed at one thread after the first such kernel."""
    from lafuse.runtime.local.fused import runner

    plan, _ = row_plans()["tXXV"]
    rng = np.random.default_rng(3)
    rins = [rng.normal(size=(3000, 400)), rng.normal(size=(400, 1)), rng.normal(size=(400, 2)),
            rng.normal(size=(3000, 1)), np.zeros((3000, 400)), rng.normal(size=(1, 400)), 1.0]
    before = _blas_counts()
    for t in (2, 1):
        op = compiled(f"row-tXXV-{t}", plan, threads=t)
        assert runner._uses_blas(op._kernel)
        op(rins)
        assert _blas_counts() == before, t


def test_cell_kernels_do_not_call_blas():
    from lafuse.runtime.local.fused import runner

    b = CPlanBuilder()
    plan = CPlan("cell", b.op("*", b.input(0, MAIN), b.input(1, CELL)), FULL_AGG, "sum", ninputs=2)
    assert not runner._uses_blas(compiled("cell-no-blas", plan)._kernel)


_LOAD_IN_FRESH_PROCESS = """
import pickle, sys
import numpy as np
from numba.core import base
refreshes = []
orig = base.BaseContext.refresh
base.BaseContext.refresh = lambda self: (refreshes.append(1), orig(self))[1]
from lafuse import codegen
from lafuse.runtime.local import fused
plan, ins = pickle.load(open(sys.argv[1], "rb"))
got = fused.compile_plan(plan, threads=2)(ins)
st = codegen.cache_stats()
print(repr((float(got), st["disk_hits"], st["compiled"], len(refreshes))))
"""


def test_a_cached_kernel_loads_without_numbas_registry_refresh(disk_cache, tmp_path):
    """codegen.cache.load_without_registries: a fresh process loads a kernel of the disk cache
    without refreshing Numba's target context (0.2 s of its first load), and computes the same."""
    import pickle

    b = CPlanBuilder()
    x, y = b.input(0, MAIN), b.input(1, CELL)
    plan = CPlan("cell", b.op("*", b.op("+", x, b.literal(0.5)), y), FULL_AGG, "sum", ninputs=2)
    rng = np.random.default_rng(11)
    ins = [rng.normal(size=(300, 7)), rng.normal(size=(300, 7))]
    want = compiled("cell-fresh-load", plan)(ins)  # compiled into the disk cache
    assert same(want, evaluate(plan, ins))
    pkl = tmp_path / "plan.pkl"
    pkl.write_bytes(pickle.dumps((plan, ins)))
    out = subprocess.run([sys.executable, "-c", _LOAD_IN_FRESH_PROCESS, str(pkl)], capture_output=True,
                         text=True, check=True, env=os.environ.copy()).stdout
    got, disk_hits, compiled_cold, refreshes = eval(out.strip().splitlines()[-1])
    assert (disk_hits, compiled_cold, refreshes) == (1, 0, 0)
    assert got == want


def test_stats_report_cold_and_warm_compile_time_per_kernel(disk_cache, tmp_path):
    script = tmp_path / "k.dml"
    script.write_text("X = rand(rows=50, cols=40, seed=1)\nY = rand(rows=50, cols=40, seed=2)\n"
                      "print(sum(X * Y * 2))\n")
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(disk_cache / "stats")}
    lines = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--fusion", "fuse-all", "--stats"],
                           env=env, capture_output=True, text=True, check=True)
        lines.append([ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith("kernel ")])
    cold = [float(ln.split("cold compile ")[1].split()[0]) for ln in lines[0]]
    warm = [float(ln.split("disk-cache load ")[1].split()[0]) for ln in lines[1]]
    assert len(lines[0]) == len(lines[1]) == 1
    assert cold[0] > 0.0 and "disk-cache load 0.000" in lines[0][0]
    assert warm[0] > 0.0 and "cold compile 0.000" in lines[1][0]


def test_a_kernel_compiles_only_the_modes_its_inputs_use(disk_cache):
    """cache.ByMode: compile_plan compiles the dense mode; a CSR main compiles its own mode on first
    use, once; each mode's source pins ``mode`` and agrees with the reference."""
    from lafuse.codegen.numba_gen import specialize

    plan = cell_plan("safe", FULL_AGG, "sum")
    codegen.clear_memory_cache()  # (other tests compiled this plan: a fresh ByMode, loaded from disk)
    fop = fused.compile_plan(plan, threads=1)
    kernels = fop._kernel
    assert sorted(kernels._fns) == [0]
    dense_in = cell_inputs("dense", False, False, seed=3)
    assert same(fop(dense_in), evaluate(plan, dense_in))
    assert sorted(kernels._fns) == [0]
    sparse_in = cell_inputs("sparse", False, False, seed=4)
    assert same(fop(sparse_in), evaluate(plan, sparse_in))
    modes = sorted(kernels._fns)
    assert len(modes) == 2 and modes[0] == 0
    assert same(fop(sparse_in), evaluate(plan, sparse_in)) and sorted(kernels._fns) == modes  # no recompile
    # as the runtime compiles (eager=False): nothing until the first call, then only that call's mode
    codegen.clear_memory_cache()
    lazy = fused.compile_plan(plan, threads=1, eager=False)
    assert lazy._kernel._fns == {} and codegen.is_cached(plan)  # (on disk from above)
    assert same(lazy(sparse_in), evaluate(plan, sparse_in)) and sorted(lazy._kernel._fns) == [modes[1]]
    src = specialize(fop.source, modes[1])
    assert f"    mode = {modes[1]}  # pinned" in src and "def kernel(b0, b1, mode_, " in src
    with pytest.raises(ValueError, match="signature"):
        specialize("def f(x):\n    return x\n", 0)
