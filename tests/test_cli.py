"""The CLI as a user sees it: run, -s, --nvargs/--args, --stats, --explain, --config, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINREG = """\
X = sin(seq(1, 200) %*% t(seq(1, 5)) * 0.37)
y = X %*% seq(1, 5)
lambda = 0.001
A = t(X) %*% X + diag(matrix(lambda, rows=ncol(X), cols=1))
b = t(X) %*% y
beta = solve(A, b)
if (sum(beta) > 0) {
  print("sum(beta) = " + sum(beta))
}
"""
HOP_LINE = re.compile(
    r"^-+\((\d+)\) (\S.*?)(?: \(([\d,]+)\))? (\[-?\d+,-?\d+,-?\d+\]|\[\w+\.\w+\]) \[(?:-|[\d.]+[KMG]?B)\] CP(?: line (\d+))?$")


def lafuse(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lafuse", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, input=stdin, timeout=120)


@pytest.fixture()
def linreg(tmp_path: Path) -> Path:
    p = tmp_path / "linreg.dml"
    p.write_text(LINREG)
    return p


def test_run_prints_and_exits_zero(linreg: Path):
    r = lafuse("run", str(linreg))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sum(beta) = 14.99")


def test_explain_hops_lists_every_hop_with_sizes_memory_and_line(linreg: Path):
    r = lafuse("run", str(linreg), "--explain", "hops")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["PROGRAM", "--MAIN PROGRAM"]
    blocks = [ln for ln in lines if re.match(r"^-+(GENERIC|IF|WHILE|FOR)", ln)]
    assert blocks and blocks[0].startswith("----GENERIC (lines 1-")
    hops = [HOP_LINE.match(ln) for ln in lines if re.match(r"^-+\(\d+\)", ln)]
    assert hops and all(hops), [ln for ln in lines if re.match(r"^-+\(\d+\)", ln) and not HOP_LINE.match(ln)]
    ids = {int(m.group(1)) for m in hops}
    for m in hops:  # inputs refer to HOPs printed in the same listing
        for i in (m.group(3) or "").split(","):
            if i:
                assert int(i) in ids
    mm = [m for m in hops if m.group(2) == "ba(%*%)"]
    assert any(m.group(4) == "[5,5,-1]" for m in mm)  # t(X) %*% X with known sizes
    assert any(m.group(4) == "[5,1,-1]" for m in mm)
    assert all(m.group(5) for m in hops if m.group(2) != "LiteralOp")
    assert "sum(beta) = " in r.stdout  # the program still runs after the listing


def test_explain_runtime_and_explain_subcommand(linreg: Path):
    r = lafuse("run", str(linreg), "--explain", "runtime")
    assert r.returncode == 0, r.stderr
    # (the predicted formats of the operands and the result: dense, csr or ? for decided at run time)
    assert re.search(r"^------CP %\*% _r\d+ _r\d+ -> _r\d+ \[5,5,-1\] fmt\([a-z?]+,[a-z?]+->[a-z?]+\)$", r.stdout, re.M)
    assert re.search(r"^------CP assignvar _r\d+ beta$", r.stdout, re.M)
    r = lafuse("explain", str(linreg), "--until", "hops")
    assert r.returncode == 0 and "sum(beta) = 14" not in r.stdout and "ba(%*%)" in r.stdout
    # before rewrites the DAG still has the ncol(X) HOP; after them it is folded to a literal
    assert "u(ncol)" in r.stdout
    r = lafuse("explain", str(linreg), "--until", "rewritten")
    assert r.returncode == 0 and "u(ncol)" not in r.stdout and "ba(%*%)" in r.stdout


def test_explain_until_stops_after_each_stage(tmp_path: Path):
    """The compiler is one list of named stages (lafuse.stages.STAGES); explain --until prints the
    result of each: the AST, the DAG as built (dead Z = X * 2 still written), after liveness (the
    writes no later block reads gone), after rewrites (ncol folded), fused, the physical plan, the
    plan bound to code (a fused operator's generated source)."""
    from lafuse.stages import STAGES

    p = tmp_path / "s.dml"
    p.write_text("X = rand(rows=100, cols=ncol(matrix(0, 1, 10)), seed=1)\nZ = X * 2\nZ = X + 1\n"
                 "s = sum(X * X * 3)\nprint(s + sum(Z))\n")
    out = {}
    for stage in STAGES:
        r = lafuse("explain", str(p), "--until", stage, "--fusion", "fuse-all")
        assert r.returncode == 0, (stage, r.stderr)
        out[stage] = r.stdout
    assert out["parse"].startswith("Assign(") and "PROGRAM" not in out["parse"]
    assert "TWrite Z" in out["build"] and "u(ncol)" in out["build"]
    assert "TWrite Z" not in out["liveness"] and "u(ncol)" in out["liveness"]
    assert "u(ncol)" not in out["rewrite"] and "[100,10,-1]" in out["sizes"]
    assert "spoof(spoofMA)" in out["fuse"] and "spoof" not in out["sizes"]
    assert re.search(r"^------CP spoofMA _r\d+ -> _r\d+ .*fmt\(", out["plan"], re.M)
    assert "@njit" in out["lower"] and "CP rand" not in out["lower"]
    r = lafuse("explain", str(p), "--until", "nonsense")
    assert r.returncode != 0 and "--until" in r.stderr


def test_explain_recompile_hops_shows_learned_sizes(tmp_path: Path):
    p = tmp_path / "f.dml"
    # (max: the sum-product rule would sum the product away, and its sizes with it)
    p.write_text("f = function(Matrix[Double] M) return (Double s) { s = max(t(M) %*% M) }\n"
                 "a = f(matrix(1, 4, 3))\nb = f(matrix(1, 2, 6))\nprint(a + b)\n")
    r = lafuse("run", str(p), "--explain", "recompile_hops")
    assert r.returncode == 0, r.stderr
    assert "[3,3,-1]" in r.stdout and "[6,6,-1]" in r.stdout
    assert r.stdout.rstrip().endswith("6.0")  # a 3x3 of 4s, a 6x6 of 2s


def test_stats_reports_times_and_heavy_hitters(linreg: Path):
    r = lafuse("run", str(linreg), "--stats", "3")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for key in ("Total elapsed time:", "Total compilation time:", "Total execution time:",
                "Heavy hitter instructions (top 3):"):
        assert key in out
    table = out.split("Heavy hitter instructions (top 3):")[1].strip().splitlines()
    assert table[0].split() == ["#", "Instruction", "Time(s)", "Count", "Est(s)", "Est/Time"]
    rows = [ln.split() for ln in table[1:4]]
    assert len(rows) == 3 and [r[0] for r in rows] == ["1", "2", "3"]
    times = [float(r[-4]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert all(int(r[-3]) >= 1 for r in rows)
    assert all(r[-2] == "-" or float(r[-2]) >= 0 for r in rows)  # the cost model's estimate per opcode
    assert "Estimated execution time (cost model, plans that ran):" in table[4]


def test_inline_script_nvargs_and_positional_args():
    r = lafuse("run", "-s", "print($a + ifdef($b, 10) + $1)", "--nvargs", "a=1", "--args", "100")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "111\n"
    r = lafuse("run", "-s", "print($s + \"!\")", "--nvargs", "s=hi")
    assert r.stdout == "hi!\n"


def test_config_file_switches_rewrites_off(tmp_path: Path, linreg: Path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"rewrites": False}))
    r = lafuse("run", str(linreg), "--config", str(cfg), "--explain", "hops")
    assert r.returncode == 0, r.stderr
    cfg.write_text(json.dumps({"no_such_knob": 1}))
    r = lafuse("run", str(linreg), "--config", str(cfg))
    assert r.returncode == 1 and "no_such_knob" in r.stderr


def test_builtins_dir_resolves_script_functions(tmp_path: Path):
    d = tmp_path / "bi"
    d.mkdir()
    (d / "twice.dml").write_text("m_twice = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X * 2 }\n"
                                 "s_twice = function(Double x) return (Double y) { y = x * 2 }\n")
    r = lafuse("run", "-s", "print(sum(twice(matrix(1, 2, 2))) + \" \" + twice(3))", "--builtins", str(d))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "8.0 6.0\n"


def test_lafuse_builtins_come_first_unless_switched_off(tmp_path: Path):
    """Search path: lafuse/builtins, then --builtins dirs; --no-lafuse-builtins drops lafuse's own
    library (how SystemDS's scripts/builtin is run unmodified)."""
    d = tmp_path / "bi"
    d.mkdir()
    (d / "sigmoid.dml").write_text("m_sigmoid = function(Matrix[Double] X) return (Matrix[Double] Y) { Y = X * 0 + 42 }\n")
    script = "print(as.scalar(sigmoid(matrix(0, 1, 1))))"
    r = lafuse("run", "-s", script, "--builtins", str(d))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0.5\n"  # lafuse/builtins/sigmoid.dml wins
    r = lafuse("run", "-s", script, "--builtins", str(d), "--no-lafuse-builtins")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42.0\n"


def test_errors_are_one_line_with_caret_and_exit_one(tmp_path: Path):
    p = tmp_path / "bad.dml"
    p.write_text("x = 1\ny = x + z\n")
    r = lafuse("run", str(p))
    assert r.returncode == 1
    first, src, caret = r.stderr.splitlines()[:3]
    assert first == f"{p}:2:9: validation error: undefined variable 'z'"
    assert src.strip() == "y = x + z" and caret.strip() == "^"
    assert "Traceback" not in r.stderr


def test_missing_script_file():
    r = lafuse("run", "/no/such/file.dml")
    assert r.returncode == 1 and "cannot read script" in r.stderr


def test_tune_malloc_keeps_large_blocks_for_reuse(monkeypatch):
    # lafuse run sets glibc's mmap and trim thresholds so freed intermediates are reused instead of
    # page-faulted in again; LAFUSE_MALLOC_TUNE=0 leaves malloc alone
    import platform

    from lafuse.memory import tune_malloc

    monkeypatch.setenv("LAFUSE_MALLOC_TUNE", "0")
    assert tune_malloc() is False
    monkeypatch.setenv("LAFUSE_MALLOC_TUNE", "1")
    assert tune_malloc() is (platform.libc_ver()[0] == "glibc")


def test_the_command_ends_without_teardown_but_does_what_an_exit_must(tmp_path: Path):
    """``lafuse`` ends with os._exit (cli.entry): piped output still arrives whole, a written file is
    complete, the exit code is the run's, and atexit functions still run (the private plan cache a
    process makes when the configured one is unusable is removed)."""
    out = tmp_path / "X.csv"
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    env = {**os.environ, "TMPDIR": str(tmp_path), "LAFUSE_CODEGEN_CACHE": str(blocked),
           "LAFUSE_BACKGROUND": "0"}
    script = f"X = matrix(seq(1, 20000), rows=10000, cols=2); write(X, '{out}', format='csv')\n" + \
        "for (i in 1:3000) { print(i) }\n"
    r = subprocess.run([sys.executable, "-m", "lafuse", "run", "-s", script], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(i) for i in range(1, 3001)]
    assert "private temporary directory" in r.stderr
    assert not list(tmp_path.glob("lafuse-codegen-*")), "the private plan cache outlived the process"
    rows = out.read_text().splitlines()
    assert len(rows) == 10000 and rows[-1] == "19999.0,20000.0", rows[-1]
    bad = subprocess.run([sys.executable, "-m", "lafuse", "run", "-s", "print(1)\nx = y + 1"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and "y" in bad.stderr and bad.stdout == ""
