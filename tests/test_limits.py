"""Size limits of scripts: deep DML recursion, long expressions, deep nesting and long statement
chains compile and run (runtime.deepstack gives the compiler and interpreter a deep stack); beyond
the limits the error names the place and exits 1; Ctrl-C still ends a run with 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lafuse
from lafuse import cli
from lafuse.compiler import run_text
from lafuse.errors import DMLRuntimeError
from lafuse.runtime import deepstack

RECURSIVE = """f = function(Integer n) return (Integer r) {
  if (n == 0) { r = 0 } else { r = 1 + f(n - 1) }
}
print(f($n))
"""


@pytest.fixture(autouse=True)
def _no_dag_validation(monkeypatch):
    """Validating every DAG after each rewrite (tests/conftest.py) is quadratic in a DAG's size: a
    10,000-term expression would take minutes instead of seconds."""
    monkeypatch.setenv("LAFUSE_VALIDATE", "0")


def run_cli(capsys, text: str, *extra: str, path: Path | None = None) -> tuple[int, str, str]:
    if path is not None:
        path.write_text(text, encoding="utf-8")
        rc = cli.main(["run", str(path), "--no-codegen", *extra])
    else:
        rc = cli.main(["run", "-s", text, "--no-codegen", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_recursion_10000_calls_deep(capsys):
    rc, out, err = run_cli(capsys, RECURSIVE, "--nvargs", "n=10000")
    assert (rc, out, err) == (0, "10000\n", "")


def test_recursion_beyond_the_limit_is_a_located_error(capsys, monkeypatch, tmp_path):
    # the limit follows the stack: fewer frames per call level -> a small limit, reached quickly
    monkeypatch.setattr(deepstack, "FRAMES_PER_CALL", deepstack.recursion_limit() // 50)
    rc, out, err = run_cli(capsys, RECURSIVE, "--nvargs", "n=100", path=tmp_path / "rec.dml")
    assert rc == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"{tmp_path / 'rec.dml'}:2:40: runtime error: recursion deeper than 50 calls in 'f'"
    assert lines[2] == " " * 43 + "^~~~~~~~"
    assert "Traceback" not in err


def test_the_call_depth_limit_fits_the_deep_stack():
    limit = deepstack.call(deepstack.max_call_depth)
    assert limit >= 20_000
    # and the frames of that many calls fit the recursion limit the stack is sized for
    assert limit * deepstack.FRAMES_PER_CALL <= deepstack.recursion_limit()


def test_expression_of_10000_terms(capsys):
    text = "x = 1\ny = " + " + ".join(["x"] * 10_000) + "\nprint(y)\n"
    assert run_cli(capsys, text) == (0, "10000\n", "")


def test_if_nested_1000_deep_and_parentheses_10000_deep(capsys):
    text = "x = 2\n" + "if (x > 1) {\n" * 1000 + "print(x)\n" + "}\n" * 1000
    text += "y = " + "(" * 10_000 + "x" + ")" * 10_000 + "\nprint(y)\n"
    assert run_cli(capsys, text) == (0, "2\n2\n", "")


def test_chain_of_5000_matrix_statements(capsys):
    n = 5000
    text = "A = matrix(0.5, rows=2, cols=2)\nX0 = matrix(1, rows=2, cols=2)\n"
    text += "".join(f"X{i + 1} = X{i} %*% A\n" for i in range(n)) + f"print(sum(X{n}))\n"
    # (0.5 * 2)^n stays 1: every product of the all-ones 2x2 with A is again all ones
    assert run_cli(capsys, text) == (0, "4.0\n", "")


def test_chain_of_3000_cellwise_statements_through_the_fusion_constructor(capsys, tmp_path, monkeypatch):
    """fuse-all fuses the chain into fused operators of at most MAX_FUSED_OPS operators each (the
    reference backend interprets their plans, so the test compiles no kernel)."""
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"codegen_backend": "reference"}', encoding="utf-8")
    n = 3000
    text = "X0 = matrix(seq(1, 6), rows=3, cols=2)\n" + "".join(f"X{i + 1} = X{i} * 0.5 + 1\n" for i in range(n))
    text += f"print(sum(X{n}))\n"
    rc = cli.main(["run", "-s", text, "--fusion", "fuse-all", "--config", str(cfg), "--stats"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[0] == "12.0"  # x -> x/2 + 1 reaches its fixed point 2 exactly
    assert "fused operators 0" not in out


def test_nesting_beyond_the_stack_is_an_error_naming_the_script(capsys, monkeypatch, tmp_path):
    # a 16 MB stack holds 4,096 frames: a 3,000-deep nest of ifs needs more
    monkeypatch.setattr(deepstack, "_stack_bytes", 16 << 20)
    text = "x = 2\n" + "if (x > 1) {\n" * 3000 + "print(x)\n" + "}\n" * 3000
    rc, out, err = run_cli(capsys, text, path=tmp_path / "deep.dml")
    assert rc == 1 and out == ""
    assert err == (f"lafuse: {tmp_path / 'deep.dml'}: the script is nested too deeply "
                   f"(Python's limit of 4096 frames was reached)\n")


def test_the_recursion_limit_is_restored_after_a_run():
    before = sys.getrecursionlimit()
    out, _ = run_text("print(1)")
    assert out == "1\n"
    assert sys.getrecursionlimit() == before


def test_run_dml_recurses_deeply_and_raises_unchanged():
    res = lafuse.run_dml(RECURSIVE.replace("print(f($n))", "y = f(n)"), inputs={"n": 5000}, outputs=["y"])
    assert res["y"] == 5000
    with pytest.raises(DMLRuntimeError) as ei:
        lafuse.run_dml("X = matrix(1, rows=2, cols=2)\ni = $i\nif (i > 2) { print(as.scalar(X[i, 1])) }",
                       nvargs={"i": 3})
    assert ei.value.span is not None and ei.value.span.line == 3


def test_deep_calls_hand_back_results_and_exceptions_unchanged():
    err = ValueError("boom")

    def fail() -> None:
        raise err

    with pytest.raises(ValueError) as ei:
        deepstack.call(fail)
    assert ei.value is err
    with pytest.raises(KeyboardInterrupt):
        deepstack.call(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert deepstack.call(lambda a, b=1: a + b, 2, b=3) == 5
    # nested: runs on the same deep thread
    assert deepstack.call(lambda: deepstack.call(deepstack.is_deep)) is True
    assert deepstack.is_deep() is False


def test_parfor_iterations_recurse_deeply(capsys, monkeypatch, tmp_path):
    from lafuse.runtime import parfor

    ran = []
    real = deepstack.parallel_map
    monkeypatch.setattr(deepstack, "parallel_map", lambda *a: ran.append(1) or real(*a))
    text = RECURSIVE.replace("print(f($n))", "") + (
        "R = matrix(0, rows=4, cols=1)\nparfor (i in 1:4) { R[i, 1] = f(3000 + i) }\nprint(toString(t(R)))\n")
    monkeypatch.setattr(parfor, "_has_side_effects", lambda blocks: False)  # calls may print: allow them here
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"threads": 2}', encoding="utf-8")
    rc, out, err = run_cli(capsys, text, "--config", str(cfg))
    assert (rc, err) == (0, "")
    assert out.split() == ["3001.000", "3002.000", "3003.000", "3004.000"]
    assert ran, "the loop did not run in parallel"


@pytest.mark.parametrize("script", [
    "print('started')\ni = 0\nwhile (TRUE) { i = i + 1 }\n",
    # the loop runs inside a function called from parfor iterations
    "f = function(Integer n) return (Integer r) {\n  print('started')\n  r = 0\n  while (TRUE) { r = r + 1 }\n}\n"
    "R = matrix(0, rows=4, cols=1)\nparfor (i in 1:4) { R[i, 1] = f(i) }\nprint(sum(R))\n",
], ids=["while", "parfor"])
def test_ctrl_c_ends_an_endless_loop_with_130(tmp_path, script):
    path = tmp_path / "loop.dml"
    path.write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    # Ctrl-C as a terminal delivers it: a test run started in the background of a non-interactive
    # shell (`make test &`) has SIGINT ignored, which its children would inherit (and Python keeps)
    p = subprocess.Popen([sys.executable, "-u", "-m", "lafuse", "run", str(path), "--no-codegen"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=Path(lafuse.__file__).parent.parent,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stdout is not None
    first = p.stdout.readline()  # the script runs: the loop comes next
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, first, err) == (130, "started\n", "")
    assert out == ""


def test_numpy_inputs_still_bind():
    res = lafuse.run_dml("Y = t(X) %*% X", inputs={"X": np.ones((3, 2))}, outputs=["Y"])
    assert np.array_equal(res["Y"], np.full((2, 2), 3.0))


def test_interrupting_parallel_parfor_iterations_ends_the_run_with_130(capsys, monkeypatch):
    """Ctrl-C reaches parfor's worker threads too (here: iterations that never end, run in parallel)."""
    import threading

    from lafuse.runtime import parfor

    started = threading.Event()
    real = parfor.run_parallel

    def run_parallel(*a):
        started.set()
        return real(*a)

    monkeypatch.setattr(parfor, "run_parallel", run_parallel)

    def interrupt() -> None:
        started.wait(60)
        threading.Event().wait(0.3)  # let the iterations start
        deepstack.interrupt_all()

    t = threading.Thread(target=interrupt)
    t.start()
    text = ("R = matrix(0, rows=4, cols=1)\n"
            "parfor (i in 1:4) { x = 0\n  while (x >= 0) { x = x + 1 }\n  R[i, 1] = x }\nprint(sum(R))\n")
    rc, out, err = run_cli(capsys, text)
    t.join()
    assert started.is_set()
    assert (rc, out, err) == (130, "", "")


def test_a_failing_parfor_iteration_stops_the_others(capsys):
    # 10^6 iterations that all fail: the first failure ends the loop (no 10^6 errors collected)
    text = "X = matrix(1, rows=4, cols=3)\nB = matrix(0, 4, 1)\nparfor (i in 1e6:4) {\n  r = X[i, ]\n" \
           "  B[i, 1] = sum(r * r)\n}\nprint(sum(B))\n"
    rc, out, err = run_cli(capsys, text)
    assert (rc, out) == (1, "")
    assert err.splitlines()[0] == ("<inline>:4:7: runtime error: Invalid values for matrix indexing: "
                                   "[1000000:1000000,1:3] must be within matrix dimensions [4,3]")


def test_an_interrupt_landing_in_a_finalizer_is_sent_again_and_printed_nowhere(capsys):
    """Ctrl-C while a deep thread runs: the KeyboardInterrupt sent to it may land in a ``__del__``
    (a Dask future released there), where Python drops it and prints "Exception ignored in" with a
    traceback. While the run is interrupted such a one is silent, other unraisable exceptions are
    still reported, the interrupt is sent again until the thread stops, and the hook is restored.
    The deep thread spends its first 0.6 s in finalizers (the first interrupt, at 0.2 s, lands in
    one), then loops until the interrupt sent again reaches it."""
    import threading
    import time

    from lafuse.runtime import deepstack

    finalizers = {"entered": 0, "left": 0}

    class Finalized:
        def __del__(self) -> None:
            finalizers["entered"] += 1
            time.sleep(0.05)
            finalizers["left"] += 1

    class Broken:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own error")

    started = threading.Event()

    def work() -> str:
        started.set()
        t0 = time.monotonic()
        try:
            while time.monotonic() < t0 + 0.6:
                Finalized()
            while time.monotonic() < t0 + 20:
                pass
        except KeyboardInterrupt:
            Broken()
            return "unwound"
        return "never interrupted"

    seen: list[BaseException | None] = []
    before = sys.unraisablehook
    def record(u: Any) -> None:
        seen.append(u.exc_value)

    sys.unraisablehook = record
    main = threading.main_thread().ident
    assert main is not None

    def ctrl_c() -> None:
        started.wait()
        time.sleep(0.2)
        signal.pthread_kill(main, signal.SIGINT)

    # (a suite started in the background of a shell has SIGINT ignored: Python's handler is set here)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=ctrl_c, daemon=True).start()
        assert deepstack.call(work) == "unwound"
    finally:
        signal.signal(signal.SIGINT, handler)
        recorder, sys.unraisablehook = sys.unraisablehook, before
    assert recorder is record and finalizers["entered"] == finalizers["left"] + 1, finalizers
    assert [type(e).__name__ for e in seen] == ["ValueError"], seen  # the interrupt in the finalizer: silent
    assert "KeyboardInterrupt" not in capsys.readouterr().err
