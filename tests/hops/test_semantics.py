"""End-to-end semantics of the compiler and interpreter (blocks, liveness, functions, recompile)."""

from __future__ import annotations

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_text
from lafuse.errors import DMLError, DMLRuntimeError, DMLStop, DMLValidationError
from lafuse.hops.program import GenericBlock, iter_blocks


def run(text: str, **cfg):
    out, st = run_text(text, "t.dml", cfg=cfgmod.Config(**cfg) if cfg else None)
    return out.splitlines(), st


def test_dead_code_is_not_executed_steplm_trap():
    # dml-semantics §2: a dead A[,0] must not fail; a live one must
    lines, st = run("A = matrix(1, 3, 3)\nc = 0\nb = A[, c]\nprint(\"ok\")")
    assert lines == ["ok"] and "b" not in st
    with pytest.raises(DMLError):  # live: found at compile time since c is a known constant
        run("A = matrix(1, 3, 3)\nc = 0\nb = A[, c]\nprint(sum(b))")
    with pytest.raises(DMLRuntimeError):  # live, c only known at run time
        run("A = matrix(1, 3, 3)\nc = as.integer(sum(A) - 9)\nb = A[, c]\nprint(sum(b))")


def test_dead_code_across_blocks_and_loops():
    text = """
    x = matrix(1, 2, 2)
    y = x * 2            # live: read inside the loop
    z = x * 3            # dead: overwritten before any read
    i = 0
    while (i < 3) { i = i + 1; s = sum(y) }
    z = y + 1
    print(s + sum(z))
    """
    lines, _ = run(text)
    assert lines == ["20.0"]


def test_braceless_else_then_unconditional_statement():
    # a braceless if takes one statement: `if (q==2) k=k+10; k=k+1` over q=1..2
    lines, _ = run("k = 0\nfor (q in 1:2) { if (q == 2) k = k + 10; k = k + 1 }\nprint(k)")
    assert lines == ["12"]  # 0 +1 (q=1) +10 +1 (q=2): the `k = k + 1` is outside the if


def test_ranges_count_down_and_seq_increments():
    lines, _ = run("s = \"\"\nfor (q in 3:1) s = s + q\nprint(s)\nt = 0\nfor (i in seq(1, 10, 3)) t = t + i\nprint(t)")
    assert lines == ["321", "22"]


def test_function_defaults_named_and_multiple_returns():
    text = """
    f = function(Matrix[Double] X, Double s = 2, Integer k = 1) return (Matrix[Double] Y, Double t) {
      Y = X * s + k
      t = sum(Y)
    }
    [A, a] = f(matrix(1, 2, 2))
    [B, b] = f(X=matrix(1, 2, 2), k=0)
    print(a + " " + b)
    """
    lines, _ = run(text)
    assert lines == ["12.0 8.0"]


def test_int_argument_widens_to_double_parameter():
    lines, _ = run("f = function(Double r) return (Double o) { o = r }\nx = f(1)\nprint(x)")
    assert lines == ["1.0"]


def test_recursion():
    text = """
    fib = function(Integer n) return (Integer r) {
      if (n <= 1) { r = n } else { r = fib(n - 1) + fib(n - 2) }
    }
    print(fib(10))
    """
    lines, _ = run(text)
    assert lines == ["55"]


def test_variables_and_functions_live_in_separate_namespaces():
    lines, _ = run("sum = sum(matrix(2, 2, 2))\nt = t(matrix(1, 2, 3))\nprint(sum + \" \" + nrow(t))")
    assert lines == ["8.0 3"]


def test_ipa_propagates_sizes_into_functions():
    text = """
    g = function(Matrix[Double] M) return (Double s) { s = max(M %*% t(M)) }
    x = g(matrix(1, 4, 3))
    print(x)
    """
    comp = Compiler(cfgmod.Config())
    prog = comp.compile_text(text, "t.dml")
    fblocks = prog.functions["g"].blocks
    mm = [h for b in iter_blocks(fblocks) if isinstance(b, GenericBlock) for h in b.dag.hops() if h.op == "%*%"]
    assert mm and (mm[0].rows, mm[0].cols) == (4, 4)
    lines, _ = run(text)
    assert lines == ["3.0"]


def test_ipa_sizes_do_not_reject_a_branch_they_make_dead():
    """l2svmPredict's pattern: with call-site sizes the else branch's X %*% W conflicts, but the branch is
    dead for those sizes; the body is compiled with unknown sizes instead, as SystemDS validates it, and a
    conflict that does execute is a runtime error."""
    text = """
    f = function(Matrix[Double] X, Matrix[Double] W) return (Matrix[Double] Y) {
      if (ncol(X) != nrow(W)) { Y = X %*% W[1:ncol(X), ] + W[ncol(X) + 1, ] }
      else { Y = X %*% W }
    }
    g = function(Matrix[Double] X, Matrix[Double] W) return (Matrix[Double] Y) { Y = X %*% W }
    print(sum(f(matrix(1, 3, 2), matrix(2, 3, 1))))
    print(sum(g(matrix(1, 3, 2), matrix(2, 3, 1))))
    """
    with pytest.raises(DMLRuntimeError, match="matrix multiplication"):
        run(text)
    lines, _ = run(text.replace("print(sum(g(", "# "))
    assert lines == ["18.0"]
    # in the main script the same conflict is still a compile-time error
    with pytest.raises(DMLValidationError, match="dimension mismatch"):
        run("X = matrix(1, 3, 2) %*% matrix(2, 3, 1)\nprint(sum(X))")


def test_dynamic_recompilation_learns_sizes():
    text = """
    f = function(Matrix[Double] M) return (Matrix[Double] R) { R = t(M) %*% M }
    A = f(matrix(1, 5, 2))
    B = f(matrix(1, 3, 4))
    print(sum(A) + " " + sum(B))
    """
    lines, _ = run(text)
    assert lines == ["20.0 48.0"]


def test_row_loop_reuses_its_recompiled_plan():
    """alsDS's pattern: a loop body with X[i, ] and a data-dependent removeEmpty needs recompiling,
    but X[i, ] is one row whatever i is, so i is not part of the plan-cache key: one recompilation
    serves every iteration (the body used to be recompiled 10,000 times in alsDS)."""
    import io

    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    text = """
    X = matrix(seq(1, 60), 20, 3) * (matrix(seq(1, 60), 20, 3) %% 4 != 0)
    R = matrix(0, 20, 1)
    for (i in 1:20) {
      nz = removeEmpty(target=t(X[i, ]), margin="rows")
      R[i, 1] = sum(nz) + nrow(nz)
    }
    print(sum(R))
    """
    stats = Stats()
    comp = Compiler(cfgmod.Config(), stats=stats)
    prog = comp.compile_text(text, "t.dml")
    out = io.StringIO()
    Interpreter(prog, comp, out=out, stats=stats).run({})
    X = np.arange(1, 61, dtype=float).reshape(3, 20).T
    X = X * (X % 4 != 0)
    assert out.getvalue() == f"{X.sum() + (X != 0).sum()}\n"
    assert stats.recompiles <= 2


def test_minibatch_loop_keys_its_plan_by_batch_extent():
    """autoencoder's pattern: X[beg:end, ] with beg moving; the plan depends on end - beg + 1 only, so
    full batches share one plan and the short last batch gets a second (it used to be one per batch)."""
    import io

    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    text = """
    X = matrix(seq(1, 230), 115, 2)
    n = nrow(X)
    total = 0
    beg = 1
    while (beg <= n) {
      end = beg + 9
      if (end > n) end = n
      B = X[beg:end, ]
      total = total + sum(t(B) %*% removeEmpty(target=B, margin="rows")) + nrow(B)
      beg = end + 1
    }
    print(total)
    """
    stats = Stats()
    comp = Compiler(cfgmod.Config(), stats=stats)
    prog = comp.compile_text(text, "t.dml")
    out = io.StringIO()
    Interpreter(prog, comp, out=out, stats=stats).run({})
    X = np.arange(1, 231, dtype=float).reshape(115, 2)
    expected = sum(float((X[b:b + 10].T @ X[b:b + 10]).sum()) + len(X[b:b + 10]) for b in range(0, 115, 10))
    assert float(out.getvalue()) == pytest.approx(expected, rel=1e-12)
    assert stats.recompiles <= 4


@pytest.mark.parametrize("codegen", [False, True])
def test_minibatch_for_loop_recompiles_a_bounded_number_of_times(codegen: bool):
    """The benchmark's AutoEncoder slices ``X[(bi-1)*b+1 : min(n, bi*b), ]``: expression bounds, keyed
    by their extent too. The count of recompilations must not grow with the number of batches
    (one plan for full batches, one for the short last batch, a few for the blocks around)."""
    import io

    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    text = """
    n = nrow(X)
    nb = ceil(n / 8)
    W = matrix(0.01, rows=ncol(X), cols=1)
    for (ep in 1:2) {
      for (bi in 1:nb) {
        Xb = X[((bi - 1) * 8 + 1):min(n, bi * 8), ]
        g = t(Xb) %*% (Xb %*% W - 1) / nrow(Xb)
        W = W - 0.1 * g
      }
    }
    print(sum(W))
    """
    counts = []
    for rows in (45, 203):
        X = np.random.default_rng(rows).random((rows, 3))
        W = np.full((3, 1), 0.01)
        for _ in range(2):
            for b in range(0, rows, 8):
                Xb = X[b:b + 8]
                W = W - 0.1 * (Xb.T @ (Xb @ W - 1) / len(Xb))
        stats = Stats()
        comp = Compiler(cfgmod.Config(codegen=codegen), stats=stats)
        prog = comp.compile_text(text, "t.dml", {"X": X})
        out = io.StringIO()
        Interpreter(prog, comp, out=out, stats=stats).run({"X": X})
        assert float(out.getvalue()) == pytest.approx(float(W.sum()), rel=1e-12)
        counts.append(stats.recompiles)
    assert counts[0] == counts[1] and counts[1] <= 4, counts


def test_undefined_variable_is_a_validation_error():
    with pytest.raises(DMLValidationError) as ei:
        run("x = 1\nprint(y)")
    assert ei.value.span.line == 2 and "'y'" in ei.value.message


def test_boolean_arithmetic_is_rejected():
    with pytest.raises(DMLValidationError):
        run("x = TRUE + 1")


def test_stop_raises_with_message():
    with pytest.raises(DMLStop) as ei:
        run('if (TRUE) stop("bad input")')
    assert ei.value.message == "bad input"


def test_parfor_parallel_equals_sequential():
    text = """
    R = matrix(0, 6, 4)
    parfor (i in 1:6) {
      v = seq(1, 4) * i
      R[i, ] = t(v)
    }
    print(sum(R))
    print(as.scalar(R[6, 4]))
    """
    par, _ = run(text, threads=2)
    seq_, _ = run(text, parfor_parallel=False)
    assert par == seq_ == ["210.0", "24.0"]


def test_parfor_with_dependency_runs_sequentially():
    # the dependency analysis rejects this loop (tests/lang/test_parfor_deps.py); check=0 runs it
    text = """
    R = matrix(0, 5, 1)
    parfor (i in 2:5, check=0) { R[i, 1] = as.scalar(R[i - 1, 1]) + 1 }
    print(sum(R))
    """
    lines, _ = run(text, threads=2)
    assert lines == ["10.0"]


def test_left_indexing_does_not_alias():
    lines, _ = run("A = matrix(0, 2, 2)\nB = A\nB[1, 1] = 5\nprint(sum(A) + \" \" + sum(B))")
    assert lines == ["0.0 5.0"]


def test_nan_inf_pi_constants_and_shadowing():
    lines, _ = run("print(pi)\nprint(1/0)\nprint(NaN)\nprint(-Inf)\npi = 3\nprint(pi)")
    assert lines == ["3.141592653589793", "Infinity", "NaN", "-Infinity", "3"]


def test_cmdline_args_and_ifdef():
    out, _ = run_text("print($x + ifdef($y, 10) + ifdef($z, 0.5))", "t.dml", nvargs={"x": 1, "z": 2})
    assert out.splitlines() == ["13"]


def test_results_are_numpy():
    _, st = run("X = matrix(seq(1, 6), 2, 3)\nY = t(X) %*% X\nwhile (FALSE) { print(sum(Y)) }")
    ref = np.arange(1, 7, dtype=float).reshape(2, 3)
    assert np.allclose(st["Y"], ref.T @ ref)


def test_out_of_range_index_in_a_branch_known_sizes_make_dead():
    """glm's pattern: code for 1- or 2-column inputs. With Y known to have 1 column the else branch is
    removed as dead before index bounds are judged (main script and IPA-specialised function alike);
    a live out-of-range index is still a compile-time error."""
    lines, _ = run("""
    Y = matrix(1, rows=3, cols=1)
    if (ncol(Y) == 1) { s = sum(Y) } else { s = sum(Y[, 2]) }
    print(s)
    f = function(Matrix[Double] Y) return (Double s) { if (ncol(Y) == 1) { s = sum(Y) } else { s = sum(Y[, 2]) } }
    print(f(Y))
    """)
    assert lines == ["3.0", "3.0"]
    with pytest.raises(DMLValidationError, match="column index 2 is out of bounds"):
        run("Y = matrix(1, rows=3, cols=1)\nprint(sum(Y[, 2]))")


def test_scalar_cast_dispatches_the_scalar_builtin_variant():
    lines, _ = run("X = matrix(2, 2, 2)\nprint(sigmoid(as.scalar(X[1, 1])))")
    assert lines == ["0.8807970779778823"]


def test_distribution_functions_against_scipy_and_their_errors():
    from scipy import stats

    lines, _ = run('print(pt(target=-1.2, df=7, lower.tail=FALSE))\nprint(qexp(target=0.9, rate=3))\n'
                   'print(icdf(target=0.2, dist="f", df1=4, df2=9, lower.tail=FALSE))')
    assert [float(x) for x in lines] == pytest.approx(
        [stats.t.sf(-1.2, 7), stats.expon.ppf(0.9, scale=1 / 3), stats.f.isf(0.2, 4, 9)], rel=1e-12)
    with pytest.raises(DMLRuntimeError, match="unknown distribution 'gamma'"):
        run('print(cdf(target=1, dist="gamma"))')
    with pytest.raises(DMLRuntimeError, match="needs the parameter 'df'"):
        run('print(cdf(target=1, dist="chisq"))')
    with pytest.raises(DMLRuntimeError, match="outside"):
        run('print(qnorm(target=1.5))')


def test_nary_min_broadcasts_and_rounding_may_drop_nonzeros():
    """Found by the CPlan reference tests with metadata checks on: min(X, column vector) has X's dims,
    and round/floor/ceil keep zeros at zero but may turn non-zeros into zeros (nnz not exact)."""
    lines, _ = run("X = matrix(\"1 5 3 2 0.25 4\", 2, 3)\nr = matrix(\"2 1\", 2, 1)\nM = min(X, r)\n"
                   "print(nrow(M) + \"x\" + ncol(M) + \" \" + sum(M))\nR = round(X * 0.1)\n"
                   "print(sum(R != 0) + \" \" + sum(floor(matrix(0.5, 2, 2)) != 0))")
    assert lines == ["2x3 7.25", "1.0 0.0"]  # round(0.5) = 1 (Java half-up); the other five round to 0


def test_time_keeps_statement_order():
    # a DAG has no order: time() gets a block of its own, so the timed work runs between the calls
    out, st = run("X = rand(rows=300, cols=300, seed=1)\nt0 = time()\nr = sum(X %*% t(X))\nt1 = time()\n"
                  "print(t1 - t0 > 0)\nprint(r)")
    assert out[0] == "TRUE"
    prog = Compiler(cfgmod.get()).compile_text("t0 = time()\nx = 1 + 2\nt1 = time()\nprint(t1 - t0 + x)")
    assert sum(isinstance(b, GenericBlock) for b in iter_blocks(prog.blocks)) >= 3
