"""Straight-line plan code (runtime.straight) against the interpreter loop it replaces: the same output,
the same errors at the same places, the same in-place updates."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import run_dml, run_text
from lafuse.errors import DMLError
from lafuse.runtime import straight

SCRIPTS = Path(__file__).resolve().parents[1] / "conformance" / "scripts"
# the corpus scripts that need no generated inputs, arguments or output files
CORPUS = sorted(p.name for p in SCRIPTS.glob("*.dml") if "#@" not in p.read_text())


def _run(text: str, path: str, after: int) -> tuple[str, str | None]:
    """Printed output and the rendered error (None: the script finished)."""
    out = io.StringIO()
    try:
        run_text(text, path, cfg=cfgmod.get().with_(straight_line_after=after), out=out)
    except DMLError as e:
        return out.getvalue(), e.render()
    return out.getvalue(), None


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The instruction counts of the plans straight.generate built during the test."""
    built: list[int] = []
    orig = straight.generate

    def counting(plan, check, timed=False):  # type: ignore[no-untyped-def]
        built.append(len(plan.instructions))
        return orig(plan, check, timed)

    monkeypatch.setattr(straight, "generate", counting)
    return built


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 60


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_script_prints_the_same_as_straight_code(name: str, monkeypatch: pytest.MonkeyPatch,
                                                        generated: list[int]):
    """Every plan as generated code from its first run (after=0) against the loop only (after=-1)."""
    monkeypatch.chdir(SCRIPTS)
    text = (SCRIPTS / name).read_text()
    loop = _run(text, name, -1)
    assert not generated
    assert _run(text, name, 0) == loop
    assert generated, "no plan ran as straight-line code"


LOOP_ERROR = """
X = matrix(1, rows=5, cols=3)
s = 0
for (i in 1:6) {
  r = X[i, ]
  s = s + sum(r)
}
print(s)
"""


@pytest.mark.parametrize("after", [0, 2])
def test_an_error_in_generated_code_names_the_same_instruction(after: int, generated: list[int]):
    """Iteration 6 indexes out of bounds: the message and its line:col are the loop's, whichever code ran."""
    expected = _run(LOOP_ERROR, "t.dml", -1)
    assert expected[1] is not None and expected[1].startswith("t.dml:5:7: runtime error: Invalid values for "
                                                              "matrix indexing: [6:6,1:3]"), expected
    assert not generated
    assert _run(LOOP_ERROR, "t.dml", after) == expected
    assert generated


def test_an_undefined_variable_in_generated_code_is_a_runtime_error(generated: list[int]):
    text = "x = 0\nfor (i in 1:4) {\n  if (i == 4) { y = q }\n  q = i\n}\n"
    out, err = _run(text, "t.dml", 0)
    assert err is not None and "t.dml:3:" in err
    assert _run(text, "t.dml", -1) == (out, err)


def test_left_indexing_in_generated_code_updates_in_place_only_when_nothing_aliases(
        monkeypatch: pytest.MonkeyPatch):
    """The loop's reference counts hold in generated code: R is updated in place where nothing else sees
    it, while the copy B taken in the loop keeps its value."""
    from lafuse.runtime import interp

    text = """
R = matrix(0, rows=6, cols=2)
for (i in 1:6) {
  if (i == 3) { B = R }
  R[i, ] = matrix(i, rows=1, cols=2)
}
"""
    orig = interp._lix_inplace
    for after in (-1, 0):
        done: list[bool] = []

        def counting(args, done=done):  # type: ignore[no-untyped-def]
            v = orig(args)
            done.append(v is not None)
            return v

        monkeypatch.setattr(interp, "_lix_inplace", counting)
        r = run_dml(text, outputs=["R", "B"], cfg=cfgmod.get().with_(straight_line_after=after))
        np.testing.assert_array_equal(r["R"][:, 0], np.arange(1, 7))
        np.testing.assert_array_equal(r["B"][:, 0], [1, 2, 0, 0, 0, 0])
        # iteration 3 copies (B sees R); the matrix() literal's first update copies too
        assert len(done) == 6 and done.count(True) >= 4, (after, done)


FAST_PATHS = """
X = matrix(seq(1, 12), rows=4, cols=3)
X[2, 2] = 0 / 0
X[3, 1] = 1 / 0
S = rand(rows=4, cols=3, sparsity=0.2, seed=3)
v = matrix(1, rows=1, cols=3)
acc = 0
for (i in 1:3) {
  A = X * X + 2 - X / 4
  B = exp(-A) + tanh(X) * i
  C = A %*% t(X) %*% B + X
  G = t(X) %*% B
  D = X * v + S * X + S - 1
  E = X %*% S[1:3, ]
  F = t(S) %*% X
  h = i / 2
  H = X * h - h / X + X * i
  acc = acc + sum(A) + sum(B) + sum(C) + sum(G) + sum(D) + sum(E) + sum(F) + sum(H) + sum(X > 3)
  print(toString(B[1:2, ]) + " " + toString(D[3:4, ]) + " " + toString(X[3, ] * i + 1))
}
print(acc)
"""


def test_dense_fast_paths_compute_what_the_kernels_do(generated: list[int]):
    """Generated code calls NumPy directly for dense operands (same shape, a literal or a DOUBLE variable,
    a conformable product, transposed or not) and the kernel for anything else (a row vector, CSR, an INT
    variable, comparisons): both
    give the loop's output, NaN and Inf included."""
    expected = _run(FAST_PATHS, "t.dml", -1)
    assert expected[1] is None and "NaN" in expected[0] and "Infinity" in expected[0], expected
    assert _run(FAST_PATHS, "t.dml", 0) == expected
    assert max(generated) >= 20


def test_a_non_conformable_product_in_generated_code_is_the_kernels_error():
    text = "X = matrix(1, rows=3, cols=2)\nfor (i in 1:3) {\n  k = 2 + i %% 2\n  Y = X %*% matrix(1, rows=k, cols=2)\n  print(sum(Y))\n}\n"
    expected = _run(text, "t.dml", -1)
    assert expected[1] is not None and "t.dml:4:" in expected[1] and "matrix multiplication" in expected[1]
    assert _run(text, "t.dml", 0) == expected


ROW_SLICES = """
X = matrix(seq(1, 24), rows=6, cols=4)
X[2, 2] = 0 / 0
S = rand(rows=6, cols=4, sparsity=0.3, seed=5)
n = nrow(X)
acc = 0
for (i in 1:5) {
  lo = i
  hi = min(n, i + 2)
  A = X[lo:hi, ]
  B = X[lo:hi, 1:4]
  C = X[lo:hi, 2:3]
  D = S[lo:hi, ]
  E = X[1:n, ]
  F = X[lo:(hi - 0.5), ]
  G = X[i, ]
  acc = acc + sum(A) + sum(B * 2) + sum(C) + sum(D) + sum(E) + sum(F) + sum(G)
  A[1, 1] = 7
  print(toString(A) + toString(X[lo:hi, ]) + toString(F))
}
print(acc)
"""


@pytest.mark.parametrize("bad", ["X[0:2, ]", "X[i:(i + 3), ]", "X[(i + 1):i, ]", "X[i:3.5, ]", "X[i:nan, ]"])
def test_row_slices_in_generated_code_are_the_kernels(generated: list[int], bad: str):
    """``X[lo:hi, ]`` over whole rows is taken as a view in generated code; the whole matrix, column
    ranges, CSR, fractional bounds and invalid ranges go to the kernel: the loop's output and errors."""
    expected = _run(ROW_SLICES, "r.dml", -1)
    assert expected[1] is None and "NaN" in expected[0], expected
    assert _run(ROW_SLICES, "r.dml", 0) == expected
    text = f"X = matrix(seq(1, 24), rows=6, cols=4)\nnan = 0 / 0\nfor (i in 1:5) {{\n  Y = {bad}\n  print(sum(Y))\n}}\n"
    want = _run(text, "b.dml", -1)
    assert want[1] is not None, want
    assert _run(text, "b.dml", 0) == want


STATS_LOOP = """
X = matrix(seq(1, 12), rows=4, cols=3)
w = matrix(1, rows=3, cols=1)
s = 0
for (i in 1:20) {
  r = X[1 + (i %% 4), ]
  w = w - 0.01 * t(r) * (r %*% w)
  s = s + sum(w)
}
print(s)
"""


def _stats_run(after: int) -> tuple[str, dict[str, int], dict[str, float]]:
    from lafuse.compiler import Compiler
    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    stats = Stats()
    cfg = cfgmod.get().with_(straight_line_after=after)
    out = io.StringIO()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        prog = comp.compile_text(STATS_LOOP, "s.dml")
        Interpreter(prog, comp, out=out, stats=stats).run({})
    return out.getvalue(), stats.op_count, stats.op_time


@pytest.mark.parametrize("after", [0, 2])
def test_stats_time_and_count_every_instruction_of_generated_code(after: int, generated: list[int]):
    """--stats runs the generated code too (timing each instruction in it): the same executions per
    opcode as the loop, each opcode timed."""
    out, counts, times = _stats_run(-1)
    assert not generated
    assert counts["rix"] == 20 and counts["%*%"] == 20
    assert _stats_run(after)[:2] == (out, counts)
    assert generated, "--stats kept the interpreter loop"
    t = _stats_run(after)[2]
    assert set(t) == set(counts) and all(t[op] > 0 for op in ("rix", "%*%", "-"))


LOOP = """
X = matrix(seq(1, 12), rows=4, cols=3)
acc = 0
for (i in 1:6) {
  A = X * i + 2 - X / 4
  B = exp(-A) + tanh(X) * i
  C = A %*% t(B)
  acc = acc + sum(C) + sum(A[2:3, ]) + nrow(B)
}
print(acc)
"""


@pytest.fixture
def code_cache(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A plan cache and key of its own; ``compiles`` counts Python's compilations of plan code."""
    from lafuse import cachedir

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(tmp_path / "key" / "cache.key"))
    monkeypatch.setattr(straight, "_codes", {})
    cachedir.forget()
    compiles: list[str] = []

    def counting(src, filename, mode):  # type: ignore[no-untyped-def]
        compiles.append(filename)
        return compile(src, filename, mode)

    monkeypatch.setattr(straight, "compile", counting, raising=False)
    yield tmp_path / "cache", compiles
    cachedir.forget()


def test_plan_code_is_compiled_once_and_then_loaded(code_cache):
    d, compiles = code_cache
    first, err = _run(LOOP, "loop.dml", 2)
    assert err is None and compiles
    files = sorted(d.glob("code_*.marshal"))
    assert files, "no plan code kept"
    compiles.clear()
    straight._codes.clear()  # the next process: nothing in memory
    again, err = _run(LOOP, "loop.dml", 2)
    assert err is None and again == first == _run(LOOP, "loop.dml", -1)[0]
    kept = [f for f in compiles if f.startswith("<lafuse plan of")]
    assert not kept, f"compiled again: {kept}"


def test_a_damaged_plan_code_file_is_compiled_again_not_loaded(code_cache):
    d, compiles = code_cache
    first, _ = _run(LOOP, "loop.dml", 2)
    for f in d.glob("code_*.marshal"):
        raw = bytearray(f.read_bytes())
        raw[-5] ^= 0xFF  # a byte of the marshal data: the tag no longer verifies
        f.write_bytes(bytes(raw))
    straight._codes.clear()
    compiles.clear()
    again, err = _run(LOOP, "loop.dml", 2)
    assert err is None and again == first
    assert any(f.startswith("<lafuse plan of") for f in compiles)


def test_plan_code_of_an_error_names_the_instruction_when_loaded(code_cache):
    """Code loaded from the cache keeps its line table: an error maps to its instruction."""
    d, compiles = code_cache
    text = ("X = matrix(1, rows=3, cols=3)\nfor (i in 1:5) {\n  A = X * i + 1\n  B = exp(A) - X / i\n"
            "  C = t(A) %*% B + i\n  Y = C[i, ] * 2\n  print(sum(Y) + sum(A) - sum(B))\n}\n")
    first = _run(text, "e.dml", 1)
    assert first[1] is not None and "e.dml:6" in first[1]
    assert any(f.startswith("<lafuse plan of") for f in compiles) and list(d.glob("code_*.marshal"))
    straight._codes.clear()
    compiles.clear()
    assert _run(text, "e.dml", 1) == first
    assert not [f for f in compiles if f.startswith("<lafuse plan of")]
