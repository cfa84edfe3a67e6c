"""The cost model: per-instruction estimates, program costing over control flow (paper 003 Eq. 1),
EXPLAIN with costs and the estimated-vs-measured columns of --stats. Structural checks only; the
accuracy against measured times lives in benchmarks/cost_accuracy.py."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost import constants as K
from lafuse.cost.operators import Cost, instruction_cost, mem_times
from lafuse.cost.profile import HardwareProfile
from lafuse.cost.program import ProgramCoster
from lafuse.explain import estimate_text
from lafuse.hops.hop import MATRIX, Hop

PROF = HardwareProfile()  # fixed default rates: estimates here do not depend on a calibration file
LINREG = """
X = rand(rows=2000, cols=50, seed=1)
y = rand(rows=2000, cols=1, seed=2)
lambda = 0.001
A = t(X) %*% X + diag(matrix(lambda, rows=ncol(X), cols=1))
b = t(X) %*% y
beta = solve(A, b)
print(sum(beta))
"""
COST = re.compile(r"# C=\[~?([0-9.e+-]+)s, ~?([0-9.e+-]+)s\]")


def estimate(text: str, render: bool = False, threads: int = 2, reusable: float = float("inf")):
    """Deterministic: scipy.sparse counted as loaded and (by default) no first-touch page faults."""
    comp = Compiler(cfgmod.Config(threads=threads))
    prog = comp.compile_text(text, "t.dml")
    return ProgramCoster(comp, PROF, render, threads, sparse_loaded=True, reusable_bytes=reusable).program(prog)


def _m(rows: int, cols: int, nnz: int = -1) -> Hop:
    h = Hop("tread", "data", [], MATRIX, "double")
    h.rows, h.cols, h.nnz = rows, cols, nnz
    return h


def _op(op: str, kind: str, ins: list[Hop], rows: int, cols: int, nnz: int = -1) -> Hop:
    h = Hop(op, kind, ins, MATRIX, "double")
    h.rows, h.cols, h.nnz = rows, cols, nnz
    return h


def test_dense_matmult_scales_with_flops_and_sparse_is_cheaper():
    small = instruction_cost("%*%", _op("%*%", "matmult", [_m(500, 500), _m(500, 500)], 500, 500), PROF)
    big = instruction_cost("%*%", _op("%*%", "matmult", [_m(1000, 1000), _m(1000, 1000)], 1000, 1000), PROF)
    assert big.compute / small.compute == pytest.approx(8.0, rel=0.05)
    sparse = instruction_cost("%*%", _op("%*%", "matmult", [_m(1000, 1000, 10000), _m(1000, 1000)], 1000, 1000),
                              PROF)
    assert sparse.compute < big.compute / 4
    assert big.io == 0.0 and big.exact


def test_elementwise_is_memory_bound_and_transcendentals_cost_more():
    x = _m(2000, 1000)
    add = instruction_cost("+", _op("+", "binary", [x, x], 2000, 1000), PROF)
    ex = instruction_cost("exp", _op("exp", "unary", [x], 2000, 1000), PROF)
    assert ex.compute > add.compute
    cells = 2000 * 1000
    f = PROF.cache_bytes * K.CACHE_SHARE / (3 * cells * 8)  # the share of the 48 MB working set in the cache
    mem = 2 * cells * 8 * (f / PROF.cache_bw + (1 - f) / PROF.mem_read_bw) + \
        cells * 8 * (f / PROF.cache_bw + (1 - f) / PROF.mem_write_bw)
    assert add.compute == pytest.approx(PROF.matrix_op_overhead + max(mem, cells / PROF.elementwise_rate))


def test_operands_that_fit_the_cache_move_at_the_cache_rate():
    """mem_times: a working set within the last-level cache moves at cache_bw, a far larger one at
    the main-memory rates, in between the cache holds its share (measured with NumPy: 40 GB/s of
    read + written bytes at 24 MB, 27 at 96 MB, 22 at 240 MB, L3 32 MiB; 8 MB operands inside a loop
    with other live operands 30 GB/s)."""
    prof = dataclasses.replace(PROF, mem_read_bw=20e9, mem_write_bw=22e9, cache_bw=58e9, cache_bytes=32 * 2**20)
    r, w = mem_times(prof, 8e6, 4e6)  # within the share of the cache an operator counts on
    assert r == pytest.approx(8e6 / 58e9) and w == pytest.approx(4e6 / 58e9)
    rates = []
    for ws in (24e6, 96e6, 240e6, 24e9):
        r, w = mem_times(prof, ws * 2 / 3, ws / 3)
        rates.append(ws / (r + w))
    assert rates == sorted(rates, reverse=True)
    assert 30e9 < rates[0] < 45e9 and 21e9 < rates[1] < 30e9 and 20e9 < rates[2] < 24e9
    assert rates[3] == pytest.approx(1 / ((2 / 3) / 20e9 + (1 / 3) / 22e9), rel=0.01)
    assert mem_times(prof, 0.0, 0.0) == (0.0, 0.0)


def test_narrow_broadcast_pays_one_pass_per_column():
    """kernels_elementwise._narrow_broadcast runs one strided pass per column over the whole result:
    measured A - x over 1e6 x 3 (24 MB) 5.3-5.5 ms, A * B of the same shape 2.5 ms."""
    A, x = _m(1_000_000, 3), _m(1_000_000, 1)
    same = instruction_cost("*", _op("*", "binary", [A, A], 1_000_000, 3), PROF).compute
    bcast = instruction_cost("-", _op("-", "binary", [A, x], 1_000_000, 3), PROF).compute
    assert 1.5 * same < bcast < 3.5 * same
    W, w = _m(250_000, 10), _m(250_000, 1)  # short rows, one NumPy call: a cost per row on top
    same = instruction_cost("*", _op("*", "binary", [W, W], 250_000, 10), PROF).compute
    row = instruction_cost("-", _op("-", "binary", [W, w], 250_000, 10), PROF).compute
    assert same < row < 2.5 * same


def test_read_pays_io_by_format_and_unknown_sizes_are_flagged():
    r = _op("pread", "data", [], 100000, 10)
    r.name = "/data/X.csv"
    csv = instruction_cost("pread", r, PROF)
    assert csv.io == pytest.approx(1e6 / PROF.csv_read_rate)
    r2 = _op("pread", "data", [], 100000, 10)
    r2.name = "/data/X.npy"
    assert instruction_cost("pread", r2, PROF).io < csv.io / 5
    unknown = instruction_cost("+", _op("+", "binary", [_m(-1, 10), _m(-1, 10)], -1, 10), PROF)
    assert not unknown.exact


def test_explain_cost_annotates_every_instruction_and_totals_add_up():
    est = estimate(LINREG, render=True)
    lines = est.lines
    instr = [ln for ln in lines if ln.lstrip("-").startswith("CP ")]
    assert instr and all(COST.search(ln) for ln in instr)
    # the generic block's total is the sum of its instructions
    blocks = [i for i, ln in enumerate(lines) if ln.lstrip("-").startswith("GENERIC")]
    for bi in blocks:
        depth = len(lines[bi]) - len(lines[bi].lstrip("-"))
        members = []
        for ln in lines[bi + 1:]:
            d = len(ln) - len(ln.lstrip("-"))
            if d <= depth:
                break
            members.append(ln)
        total = sum(float(a) + float(b) for a, b in (COST.search(m).groups() for m in members))
        io, comp = (float(x) for x in COST.search(lines[bi]).groups())
        assert io + comp == pytest.approx(total, rel=0.01)
    assert lines[-1].startswith("TOTAL") and est.total == pytest.approx(sum(est.by_opcode.values()), rel=1e-9)
    # the heavy hitter is the X'X product, as in paper 003's figure 4
    assert max(est.by_opcode, key=est.by_opcode.get) in ("%*%", "rand")


def test_loops_branches_and_parfor_follow_eq_1():
    body = "X = rand(rows=300, cols=300, seed=1)\n  print(sum(X))\n"
    one = estimate(body).total
    assert one > 1e-4
    loop = estimate(f"for (i in 1:10) {{\n  {body}}}").total
    assert loop == pytest.approx(10 * one, rel=0.05)
    n = estimate(f"n = 4 * 5\nfor (i in 1:n) {{\n  {body}}}").total  # bounds fold through known scalars
    assert n == pytest.approx(20 * one, rel=0.05)
    par = estimate(f"parfor (i in 1:10) {{\n  {body}}}", threads=2).total
    assert par == pytest.approx(5 * one, rel=0.05)
    wl = estimate(f"i = 0\nwhile (i < 3) {{\n  {body}  i = i + 1\n}}").total
    assert wl > K.DEFAULT_WHILE_ITERATIONS * one * 0.9
    const_if = estimate(f"if (1 > 2) {{\n  {body}}}").total
    assert const_if <= one / 10
    unknown_if = estimate(f"x = rand(rows=1, cols=1, seed=3)\nif (as.scalar(x) > 0.5) {{\n  {body}}}").total
    assert one * 0.4 < unknown_if < one * 0.7


def test_first_touch_memory_is_paid_once_beyond_the_process_peak():
    body = "X = rand(rows=1000, cols=1000, seed=1)\n  print(sum(X))\n"
    fresh = estimate(body, render=True, reusable=0.0)
    warm = estimate(body, reusable=float("inf"))
    touch = 1000 * 1000 * 8 / PROF.first_touch_bw
    assert fresh.total - warm.total == pytest.approx(touch, rel=1e-6)
    assert any(ln.startswith("FIRST-TOUCH MEMORY") for ln in fresh.lines)
    looped = estimate(f"for (i in 1:10) {{\n  {body}}}", reusable=0.0)
    assert looped.total - 10 * warm.total == pytest.approx(touch, rel=1e-3)  # once, not per iteration


def test_loop_variable_sizes_are_priced_at_the_first_iteration():
    est = estimate("X = rand(rows=2000, cols=400, seed=2)\nR = matrix(0, 8, 1)\nfor (j in 1:8) {\n"
                   "  Xj = X[, ((j - 1) * 50 + 1):(j * 50)]\n  R[j, 1] = sum(t(Xj) %*% Xj)\n}\nprint(sum(R))",
                   render=True)
    # t(Xj) is read transposed by the product (no t instruction): the product is 50 x 50
    assert any("[50,50," in ln for ln in est.lines if "%*%" in ln)


def test_function_results_and_arguments_carry_shapes_into_callees():
    text = """
    gen = function(Integer n) return (Matrix[Double] X) { X = rand(rows=n, cols=30, seed=n) }
    gram = function(Matrix[Double] A) return (Matrix[Double] G) { G = t(A) %*% A }
    X = gen(700)
    print(sum(gram(X)))
    """
    est = estimate(text, render=True)
    inside = est.lines[next(i for i, ln in enumerate(est.lines) if "FUNCTION gram" in ln):]
    assert any("%*%" in ln and "[30,30," in ln for ln in inside)
    assert any("tread A" in ln and "[700,30," in ln for ln in inside)  # A's 700 rows came from gen's body


def test_function_calls_and_recursion_terminate():
    text = """
    f = function(Integer n) return (Integer r) {
      if (n <= 1) { r = 1 } else { X = rand(rows=200, cols=200, seed=n); r = n * f(n - 1) }
    }
    print(f(5))
    """
    est = estimate(text, render=True)
    assert est.total > 0 and any("FUNCTION f" in ln for ln in est.lines)


def test_estimate_text_and_cost_arithmetic():
    est = estimate_text(LINREG)
    assert est.total > 0 and est.total_cost.io == 0.0
    c = Cost(1.0, 2.0) + Cost(0.5, 0.5, exact=False)
    assert (c.io, c.compute, c.exact, c.scale(2).total) == (1.5, 2.5, False, 8.0)


def test_cli_explain_cost_and_stats_columns(tmp_path: Path):
    p = tmp_path / "lr.dml"
    p.write_text(LINREG)
    r = subprocess.run([sys.executable, "-m", "lafuse", "explain", str(p), "--until", "cost"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PROGRAM") and "# C=[" in r.stdout and "TOTAL" in r.stdout
    r = subprocess.run([sys.executable, "-m", "lafuse", "run", str(p), "--stats"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Est/Time" in r.stdout
    m = re.search(r"Estimated execution time \(cost model, plans that ran\): ([0-9.]+) sec\. "
                  r"\(estimate/measured ([0-9.]+)\)", r.stdout)
    assert m and float(m.group(1)) > 0


def test_sparse_sparse_cellwise_ops_cost_per_input_non_zero():
    # SciPy's CSR-CSR multiply merges both inputs' indices: priced per input non-zero, not per output
    # non-zero (X*Y with 2e6 + 2e6 non-zeros has ~2e5 of them and took 24 ms here, not ~3)
    n, m = 20000, 1000
    x, y = _m(n, m, 2_000_000), _m(n, m, 2_000_000)
    c = instruction_cost("*", _op("*", "binary", [x, y], n, m, 200_000), PROF)
    assert c.compute >= 4_000_000 * K.WEIGHT_SPARSE_BINARY / PROF.sparse_rate
    small = instruction_cost("*", _op("*", "binary", [_m(n, m, 200_000), _m(n, m, 200_000)], n, m, 2_000), PROF)
    assert c.compute / small.compute == pytest.approx(10.0, rel=0.1)


def test_indicator_of_row_extremes_is_priced_sparse_with_its_conversion():
    """``D <= rowMins(D)`` (KMeans' assignment) holds one cell per row unless values tie: the runtime
    makes it CSR, so it is priced with the conversion of its dense result; other comparisons stay
    dense (no estimate)."""
    from lafuse.cost.operators import meta

    d = _m(100000, 10)
    mins = Hop("rowMins", "agg_unary", [d], MATRIX, "double")
    mins.rows, mins.cols = 100000, 1
    for op, ins in (("<=", [d, mins]), (">=", [mins, d]), ("==", [d, mins])):
        assert meta(_op(op, "binary", ins, 100000, 10)).nnz == 100000, op
    for op, ins in ((">=", [d, mins]), ("<", [d, mins]), ("<=", [mins, d])):
        assert meta(_op(op, "binary", ins, 100000, 10)).nnz == -1, op
    at = instruction_cost("<=", _op("<=", "binary", [d, mins], 100000, 10), PROF)
    ge = instruction_cost(">=", _op(">=", "binary", [d, mins], 100000, 10), PROF)
    conversion = 1e6 * K.DENSE_TO_CSR_CELL_TIME + 1e5 * K.DENSE_TO_CSR_NZ_TIME
    assert at.compute >= ge.compute + conversion * 0.9


def test_scipy_import_is_charged_once_not_per_loop_iteration():
    text = ("D = rand(rows=2000, cols=10, seed=1)\ns = 0\nfor (i in 1:10) {\n  E = D * i\n  P = E <= rowMins(E)\n"
            "  s = s + sum(P)\n}\nprint(s)\n")
    comp = Compiler(cfgmod.Config(threads=2))
    prog = comp.compile_text(text, "t.dml")
    loaded = ProgramCoster(comp, PROF, True, 2, sparse_loaded=True, reusable_bytes=float("inf")).program(prog)
    fresh = ProgramCoster(comp, PROF, True, 2, sparse_loaded=False, reusable_bytes=float("inf")).program(prog)
    assert fresh.total_cost.total - loaded.total_cost.total == pytest.approx(K.SCIPY_SPARSE_IMPORT_TIME)
    assert any(line.startswith("SCIPY SPARSE IMPORT") for line in fresh.lines)


def test_products_with_a_small_dimension_run_below_the_square_blas_rate():
    rate = K.SKINNY_GEMM_FLOPS * PROF.blas_flops / K.SKINNY_GEMM_REF_FLOPS
    a, b = _m(1000000, 10), _m(1000000, 50)
    ta = Hop("t", "reorg", [a], MATRIX, "double")
    ta.rows, ta.cols = 10, 1000000
    tmm = instruction_cost("%*%", _op("%*%", "matmult", [ta, b], 10, 50), PROF)
    assert tmm.compute >= 2.0 * 1e6 * 10 * 50 / rate
    square = instruction_cost("%*%", _op("%*%", "matmult", [_m(1000, 1000), _m(1000, 1000)], 1000, 1000), PROF)
    assert square.compute < 2.0 * 1e9 / rate  # a square product keeps the calibrated rate


def test_a_cached_product_with_a_small_dimension_is_not_priced_at_the_tall_rate():
    """A mini-batch's 256 x 100 times 100 x 50 (its operands in the cache) runs near BLAS speed, not at
    the rate of a tall product that streams from memory: 43 GFLOP/s measured against 75 calibrated."""
    small = instruction_cost("%*%", _op("%*%", "matmult", [_m(256, 100), _m(100, 50)], 256, 50), PROF)
    flops = 2.0 * 256 * 100 * 50
    assert small.compute == pytest.approx(PROF.matrix_op_overhead + flops / (PROF.blas_flops * K.CACHED_SKINNY_GEMM_SHARE))
    tall = instruction_cost("%*%", _op("%*%", "matmult", [_m(1000000, 100), _m(100, 50)], 1000000, 50), PROF)
    assert tall.compute / (flops * 1e6 / 256) > 2.0 * small.compute / flops  # per FLOP, twice the time at least
