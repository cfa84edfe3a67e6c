"""Deferred compilation (codegen.deferred): a kernel whose savings pay for a load from the disk
cache but not for a cold compile stays unfused in this run, is compiled after it in the
background, and is fused (loaded, not compiled) by the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lafuse import cachedir, fusion
from lafuse import config as cfgmod
from lafuse.background import compile_all
from lafuse.compiler import Compiler
from lafuse.cost.profile import HardwareProfile
from lafuse.fusion import optimizer
from lafuse.hops.program import GenericBlock, iter_blocks
from lafuse.runtime import handoff
from lafuse.runtime.local import fused as local_fused

from .conftest import PROFILE
from .test_optimizer import basic_ops, fused, loop_body

# 2 x 2e6 cells of products per run of the loop body: savings of ~0.1 s over 20 runs (fixed
# profile), between a disk-cache load (0.02 s) and a cold compile (1.3 s; Numba counted as started)
LOOP = "s = sum(X * Y * Z)\nprint(s)"
SMALL = "".join(f"{v} = rand(rows=2000, cols=1000, seed={i})\n" for i, v in enumerate("XYZ"))


def test_kernels_that_pay_only_from_the_disk_cache_are_deferred(tmp_path, monkeypatch):
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    from lafuse import codegen

    # the kernel of sum(X * Y * Z), compiled by an earlier test of this process (the Python API's
    # tests compute it), would count as cached in memory and be fused at once
    codegen.clear_memory_cache()
    fusion.DEFERRED.clear()
    st = fusion.FusionStats()
    spoofs, labels = fused(LOOP, "cost", st, SMALL, codegen_defer=True)
    assert spoofs == [] and any(lb.startswith("b(*)") for lb in labels)  # unfused in this run
    assert st.deferred == 1 and len(fusion.DEFERRED) == 1
    plan, inputs = next(iter(fusion.DEFERRED.values()))
    assert plan.template == "cell" and plan.agg_op == "sum"
    assert inputs == ((2000, 1000, False),) * 3  # the sizes and formats the kernel will see
    # without deferral nothing is recorded
    fusion.DEFERRED.clear()
    fused(LOOP, "cost", fusion.FusionStats(), SMALL, codegen_defer=False)
    assert not fusion.DEFERRED
    # a kernel in the disk cache is fused instead
    from lafuse.codegen import deferred

    marker = tmp_path / "cache" / f".deferred_{os.getpid()}.json"  # a job of a live process is pending
    marker.write_text(json.dumps({"pid": os.getpid()}))
    assert deferred.pending() == [marker]
    marker.unlink()
    assert compile_all({"plans": [(plan, inputs)], "calibrate": None}) == 1 and codegen.is_cached(plan)
    spoofs, labels = fused(LOOP, "cost", fusion.FusionStats(), SMALL, codegen_defer=True)
    assert [s.op for s in spoofs] == ["spoofCell"] and not any(lb.startswith("b(*)") for lb in labels)
    assert not fusion.DEFERRED
    # the source alone (Numba's index missing, e.g. still compiling elsewhere) is not a cache hit
    codegen.clear_memory_cache()
    for nbi in (tmp_path / "cache" / "__pycache__").glob("*.nbi"):
        nbi.unlink()
    assert not codegen.is_cached(plan)


def test_cli_compiles_deferred_kernels_in_the_background_for_the_next_run(tmp_path):
    # 1000 x 1000 products 1000 times: fusing saves ~1.3 s (measured: 2.1 ms per iteration unfused,
    # 0.8 ms fused), more than a disk-cache load plus Numba's start (0.47 s) but less than a cold
    # compile plus Numba's start in a fresh process (2.9 s)
    script = tmp_path / "loop.dml"
    script.write_text("X = rand(rows=1000, cols=1000, seed=1)\nY = rand(rows=1000, cols=1000, seed=2)\n"
                      "Z = rand(rows=1000, cols=1000, seed=3)\ns = 0\n"
                      "for (i in 1:1000) {\n  s = s + sum(X * Y * Z)\n}\nprint(s)\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(cache), "LAFUSE_PROFILE": str(PROFILE),
           "LAFUSE_CODEGEN_DEFER": "1"}

    def run() -> str:
        return subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--stats", "20"], env=env,
                              capture_output=True, text=True, check=True).stdout

    first = run()
    assert "spoofCell" not in first and "(1 kernels that would pay from the disk cache" in first
    waited = subprocess.run([sys.executable, "-m", "lafuse.background", "--wait"], env=env, timeout=300)
    assert waited.returncode == 0 and not list(cache.glob(".deferred_*"))
    second = run()
    assert "spoofCell" in second and "compiled 0 " in second and "disk cache hits 1 " in second
    assert "kernels that would pay" not in second
    assert _value(first) == _value(second)


def _value(out: str) -> float:
    return float(next(ln for ln in out.splitlines() if ln and ln[0].isdigit()))


def test_a_source_without_numba_index_is_not_cached(tmp_path, monkeypatch):
    # a background compile writes the source first: until Numba's index exists, runs decide as if
    # the kernel were not there (and do not count on a warm load)
    from lafuse import codegen

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path))
    codegen.clear_memory_cache()
    fusion.DEFERRED.clear()
    fused(LOOP, "cost", fusion.FusionStats(), SMALL, codegen_defer=True)
    plan, _ = next(iter(fusion.DEFERRED.values()))
    fusion.DEFERRED.clear()
    key = plan.canonical_key()[0]
    # the file-name probe used before the code generator is loaded
    monkeypatch.delitem(sys.modules, "lafuse.codegen")
    (tmp_path / f"k_{key}_000000000000_x.py").write_text("# being compiled\n")
    assert not optimizer._kernel_cached(plan)
    (tmp_path / "__pycache__").mkdir(exist_ok=True)  # the cache made it at its check
    (tmp_path / "__pycache__" / f"k_{key}_000000000000_x.kernel-6.py311.nbi").write_bytes(b"")
    assert not optimizer._kernel_cached(plan)  # the directory is listed once per process
    cachedir.forget()  # a new process
    assert optimizer._kernel_cached(plan)


def test_deferred_wait_ignores_stale_markers(tmp_path, monkeypatch):
    # a marker older than STALE_AFTER, or whose process is gone (killed), is no pending job
    from lafuse.codegen import deferred

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path))
    old = tmp_path / f".deferred_{os.getpid()}.json"
    old.write_text(json.dumps({"pid": os.getpid()}))
    os.utime(old, (1.0, 1.0))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / f".deferred_{dead.pid}.json"
    gone.write_text(json.dumps({"pid": dead.pid}))
    assert deferred.pending() == [] and deferred.wait(timeout=1.0)
    assert Path(old).exists()


def test_a_failing_background_start_only_warns(tmp_path, monkeypatch, capsys):
    from lafuse import codegen
    from lafuse import config as cfgmod
    from lafuse.codegen import deferred

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path))
    codegen.clear_memory_cache()

    def refuse(plans, calibrate=None):
        raise PermissionError("read-only cache directory")

    monkeypatch.setattr(deferred, "spawn", refuse)
    fusion.DEFERRED.clear()
    fused(LOOP, "cost", fusion.FusionStats(), SMALL, codegen_defer=True)
    n = len(fusion.DEFERRED)
    assert n >= 1
    handoff.spawn_deferred(cfgmod.Config(codegen=True, codegen_defer=True))
    assert f"background job ({n} kernel compiles) not started" in capsys.readouterr().err
    assert not fusion.DEFERRED


def _observed_key(canonical: str) -> str:
    """The run-feedback key of the candidate with this kernel: its plan hash where it is written."""
    from lafuse.feedback import observed

    (key,) = [k for k in observed.SAVINGS if k.split("@")[0] == canonical]
    return key


def test_one_plan_at_two_places_is_observed_twice():
    """The same fused plan in two places (AutoEncoder's sigmoid(A %*% W + b) in its mini-batch loop and
    once after it) has one kernel but two entries in the run feedback: the executions of one place do
    not weigh the other."""
    from lafuse.feedback import observed

    observed.SAVINGS.clear()
    text = "for (i in 1:20) {\n  s = sum(X * Y * Z)\n  print(s)\n}\nfor (j in 1:20) {\n  t = sum(X * Y * Z)\n  print(t)\n}"
    with cfgmod.using(cfgmod.Config(codegen=True, fusion="cost", fusion_observed=True)):
        prog = Compiler(cfgmod.get()).compile_text(SMALL + text, "<test>")
        for b in iter_blocks(prog.blocks):
            if isinstance(b, GenericBlock):
                fusion.optimize(b.dag, cfgmod.get(), fusion.FusionStats(), weight=b.weight)
    keys = [k for k in observed.SAVINGS if "@" in k]
    observed.SAVINGS.clear()  # (the other tests find their candidate's key there)
    assert len(keys) == 2 and len({k.split("@")[0] for k in keys}) == 1
    assert {k.rsplit(":", 2)[1] for k in keys} == {str(SMALL.count("\n") + 2), str(SMALL.count("\n") + 6)}


def test_observed_block_executions_replace_the_loop_guess(tmp_path, monkeypatch):
    """feedback.observed: a run records how often each candidate's block ran; a later run weighs the
    candidate by that count instead of the compiler's guess (here the for loop's 20 runs, which pay
    for a load from the disk cache; observed once, they do not; observed 10000 times, they pay
    even a cold compile)."""
    from lafuse.feedback import EXECUTED, observed

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    # the per-run savings only (test_first_run_growth_counts_once adds the growth of the first run)
    monkeypatch.setattr(optimizer, "growth_saved", lambda order, ops, users, hints=None: [0.0] * len(ops))
    fusion.DEFERRED.clear()
    st = fusion.FusionStats()
    spoofs, _ = fused(LOOP, "cost", st, SMALL, codegen_defer=True, fusion_observed=True)
    assert spoofs == [] and st.deferred == 1 and st.observed == 0
    key = _observed_key(next(iter(fusion.DEFERRED)))
    fusion.DEFERRED.clear()
    # this process ran the candidate's block 20 times: saved, and read back by the next decision
    monkeypatch.setitem(EXECUTED, key, 1)
    assert observed.save() >= 1 and observed.load()[key].runs == 1.0
    saved = json.loads((tmp_path / "cache" / observed.FILE).read_text())[key]
    assert saved["runs"] == 1.0 and saved["saving"] > 0 and saved["run"]
    # a run that observes the same again leaves the file as it is (not rewritten: same inode, same bytes)
    before = (tmp_path / "cache" / observed.FILE).stat()
    assert observed.save() >= 1 and (tmp_path / "cache" / observed.FILE).stat().st_ino == before.st_ino
    st = fusion.FusionStats()
    spoofs, _ = fused(LOOP, "cost", st, SMALL, codegen_defer=True, fusion_observed=True)
    assert spoofs == [] and st.deferred == 0 and st.observed == 1  # not even worth a background compile
    monkeypatch.setitem(observed.load(), key, observed.Observation(10000.0))
    spoofs, _ = fused(LOOP, "cost", fusion.FusionStats(), SMALL, codegen_defer=True, fusion_observed=True)
    assert [s.op for s in spoofs] == ["spoofCell"]  # pays for a cold compile
    # off (the default of the test suite): the guess, whatever was observed
    st = fusion.FusionStats()
    spoofs, _ = fused(LOOP, "cost", st, SMALL, codegen_defer=True, fusion_observed=False)
    assert spoofs == [] and st.deferred == 1 and st.observed == 0
    fusion.DEFERRED.clear()


def test_first_run_growth_counts_once(tmp_path, monkeypatch):
    """The intermediates a fused operator never allocates (X*Y and Y*Z, 32 MB at once here; their
    quotient takes X*Y's buffer) would grow the process's memory in the block's first run: that
    page-fault time (first_touch_bw) is saved once, on top of the per-run savings. Observed to run once, the
    candidate pays for a load from the disk cache with it, not without it."""
    from lafuse.feedback import observed

    loop = "s = sum((X * Y) / (Y * Z))\nprint(s)"
    dag = loop_body(loop, SMALL, cfgmod.Config(codegen=True, fusion="cost")).dag
    covered = [h for h in dag.hops() if h.op in ("*", "/", "sum")]
    total = next(h for h in covered if h.op == "sum")
    # the prune's bound: every intermediate held at once (X*Y, Y*Z and their quotient)
    assert optimizer.intermediate_peak(covered, total) == 3 * 2000 * 1000 * 8
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    fusion.DEFERRED.clear()
    fused(loop, "cost", fusion.FusionStats(), SMALL, codegen_defer=True, fusion_observed=True)
    key = _observed_key(next(iter(fusion.DEFERRED)))
    monkeypatch.setitem(observed.load(), key, observed.Observation(1.0))
    for growth, deferred in ((True, 1), (False, 0)):
        if not growth:
            monkeypatch.setattr(optimizer, "growth_saved", lambda order, ops, users, hints=None: [0.0] * len(ops))
        fusion.DEFERRED.clear()
        st = fusion.FusionStats()
        spoofs, _ = fused(loop, "cost", st, SMALL, codegen_defer=True, fusion_observed=True)
        assert spoofs == [] and st.deferred == deferred and st.observed == 1, growth
    fusion.DEFERRED.clear()


def test_cli_records_observed_block_executions(tmp_path):
    """(A candidate whose partition cannot pay even a load at the guessed count is pruned before it
    has a plan, so it has no key to record: the inputs here are large enough to get one.)"""
    script = tmp_path / "loop.dml"
    script.write_text("X = rand(rows=3000, cols=1000, seed=1)\ns = 0\ni = 0\n"
                      "while (i < 7) {\n  s = s + sum(X * X * (X + i))\n  i = i + 1\n}\nprint(s)\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(cache), "LAFUSE_PROFILE": str(PROFILE),
           "LAFUSE_FUSION_OBSERVED": "1"}
    subprocess.run([sys.executable, "-m", "lafuse", "run", str(script)], env=env, capture_output=True, text=True,
                   check=True)
    counts = json.loads((cache / "observed.json").read_text())
    assert 7.0 in [v["runs"] for v in counts.values()]  # the loop body's candidate ran 7 times
    env["LAFUSE_FUSION_OBSERVED"] = "0"
    (cache / "observed.json").unlink()
    subprocess.run([sys.executable, "-m", "lafuse", "run", str(script)], env=env, capture_output=True, text=True,
                   check=True)
    assert not (cache / "observed.json").exists()


def test_kernels_of_one_run_share_numba_start(monkeypatch):
    """Numba's start is paid once per process: when the candidates a run executed save more
    together (each net of its load) than the start, none of them has to pay it alone."""
    from lafuse.feedback import observed

    obs = {"a": observed.Observation(33, 0.0135, "r1"), "b": observed.Observation(8, 0.012, "r1"),
           "c": observed.Observation(33, 0.0135, "r2"), "d": observed.Observation(5, 1.0)}
    monkeypatch.setattr(observed, "load", lambda: obs)
    assert observed.start_shared("a", 0.02, 0.45) and observed.start_shared("b", 0.02, 0.45)
    assert not observed.start_shared("c", 0.02, 0.45)  # alone in its run: 0.43 s
    assert not observed.start_shared("d", 0.02, 0.45) and not observed.start_shared("e", 0.02, 0.45)


def test_kernels_of_one_dag_share_numba_start(monkeypatch):
    """Before Numba has started, the start is weighed against the DAG's candidates together: two
    independent sums of products over 6000 x 1000 inputs save ~0.26 s each over the loop's 20 runs
    (with the first touch of the intermediates they spare), less than a load plus the start (0.41 s on
    the default start), but together more than the start (0.49 s after their loads against 0.39 s);
    one of them alone stays unfused."""
    monkeypatch.setattr(fusion, "_numba_started", lambda: False)
    monkeypatch.setattr(fusion, "_numba_imported", lambda: False)
    monkeypatch.setattr(optimizer, "_kernel_cached", lambda plan: True)
    pre = "".join(f"{v} = rand(rows=6000, cols=1000, seed={i})\n" for i, v in enumerate("ABCDEF"))
    st = fusion.FusionStats()
    spoofs, labels = fused("s = sum(A * B * C)\nt = sum(D * E * F)\nprint(s + t)", "cost", st, pre)
    assert [s.op for s in spoofs] == ["spoofCell", "spoofCell"] and st.start_shared == 2
    assert not basic_ops(labels, "*", "sum")
    st = fusion.FusionStats()
    spoofs, labels = fused("s = sum(A * B * C)\nprint(s)", "cost", st, pre)
    assert spoofs == [] and st.start_shared == 0 and basic_ops(labels, "*")
    # not in the disk cache: a cold compile each (1.3 s) is more than either saves
    monkeypatch.setattr(optimizer, "_kernel_cached", lambda plan: False)
    spoofs, _ = fused("s = sum(A * B * C)\nt = sum(D * E * F)\nprint(s + t)", "cost", fusion.FusionStats(), pre)
    assert spoofs == []
    # with Numba started, each pays for its own load
    monkeypatch.setattr(optimizer, "_kernel_cached", lambda plan: True)
    monkeypatch.setattr(fusion, "_numba_started", lambda: True)
    spoofs, _ = fused("s = sum(A * B * C)\nprint(s)", "cost", fusion.FusionStats(), pre)
    assert [s.op for s in spoofs] == ["spoofCell"]
    # imported by a background start but no kernel loaded yet: the first load's part of the start
    # remains (0.09 s), the import's does not; one sum alone (~0.26 s) now pays
    monkeypatch.setattr(fusion, "_numba_started", lambda: False)
    monkeypatch.setattr(fusion, "_numba_imported", lambda: True)
    monkeypatch.setattr(fusion, "ON_PRESTART", set())
    st = fusion.FusionStats()
    spoofs, _ = fused("s = sum(A * B * C)\nprint(s)", "cost", st, pre)
    assert [s.op for s in spoofs] == ["spoofCell"]
    # ... but only thanks to that import: it is no reason to begin the import at the next launch
    assert fusion.ON_PRESTART == {spoofs[0].params["cplan"].canonical_key()[0]}
    monkeypatch.setattr(fusion, "ON_PRESTART", set())
    spoofs, _ = fused("s = sum(A * B * C)\nt = sum(D * E * F)\nprint(s + t)", "cost", fusion.FusionStats(), pre)
    assert len(spoofs) == 2 and fusion.ON_PRESTART == set()  # together they pay the whole start


def test_a_run_on_the_default_profile_calibrates_in_the_background(tmp_path):
    # the defaults are a slow machine's rates: decisions on them overstate what fusion saves against
    # Numba's start, so the first run's background job measures this machine for the later runs
    script = tmp_path / "s.dml"
    script.write_text("X = rand(rows=300, cols=200, seed=1)\nY = rand(rows=300, cols=200, seed=2)\n"
                      "print(sum(X * Y * 2))\n")
    prof = tmp_path / "profile.json"
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(tmp_path / "cache"), "LAFUSE_PROFILE": str(prof),
           "LAFUSE_AUTO_CALIBRATE": "1"}

    def run(*flags: str, **extra: str) -> str:
        out = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--stats", *flags],
                             env={**env, **extra}, capture_output=True, text=True, check=True).stdout
        waited = subprocess.run([sys.executable, "-m", "lafuse.background", "--wait"], env=env, timeout=300)
        assert waited.returncode == 0
        return out

    note = "Codegen decisions used the built-in default hardware profile"
    assert note not in run("--no-codegen") and not prof.exists()  # no decisions, no calibration
    assert note in run(LAFUSE_AUTO_CALIBRATE="0") and not prof.exists()
    first = run()
    assert note in first and prof.is_file()
    saved = json.loads(prof.read_text())
    assert saved["source"].startswith("calibrated") and saved["mem_read_bw"] > 0
    second = run()
    assert note not in second and _value(first) == _value(second)
    assert json.loads(prof.read_text()) == saved  # calibrated once


def test_numba_starts_at_launch_when_the_scripts_last_run_used_kernels(tmp_path):
    # feedback.prestart: the second run of a script whose first run used a kernel imports Numba on a
    # background thread from launch on; a run that used none does not
    from lafuse.feedback import prestart

    script = tmp_path / "p.dml"
    script.write_text("X = rand(rows=200, cols=30, seed=4)\nY = rand(rows=200, cols=30, seed=5)\n"
                      "print(sum(X * Y * 3))\n")
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(tmp_path / "cache"), "LAFUSE_PROFILE": str(PROFILE),
           "LAFUSE_NUMBA_PRESTART": "1"}

    def run(*flags: str, **extra: str) -> str:
        return subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--stats", *flags],
                              env={**env, **extra}, capture_output=True, text=True, check=True).stdout

    note = "begun in the background before it was needed: the script's last run used kernels"
    first = run("--fusion", "fuse-all")
    assert "spoofCell" in first and note not in first
    second = run("--fusion", "fuse-all")
    assert note in second and "disk cache hits 1 " in second and _value(first) == _value(second)
    assert note not in run("--fusion", "fuse-all", LAFUSE_NUMBA_PRESTART="0")
    recorded = json.loads((tmp_path / "cache" / prestart.FILE).read_text())
    assert sorted(recorded.values()) == [0, 1]  # fuse-all's kernel; no sparse matrix
    # the record is per fusion policy: a cost-based run after fuse-all's does not start Numba (tiny
    # inputs stay unfused: it uses no kernel), and records 0 for its own policy
    third = run()
    assert "spoofCell" not in third and note not in third
    assert note not in run()
    assert sorted(json.loads((tmp_path / "cache" / prestart.FILE).read_text()).values()) == [0, 0, 1]
    assert note in run("--fusion", "fuse-all")


def test_runs_record_sparse_use_and_the_next_run_imports_scipy_sparse_at_launch(tmp_path, monkeypatch):
    # feedback.prestart: a run that made a sparse value records it (SPARSE); a dense one records 0
    from lafuse.feedback import prestart

    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(tmp_path / "cache"), "LAFUSE_PROFILE": str(PROFILE),
           "LAFUSE_NUMBA_PRESTART": "1"}
    scripts = {"sparse": "X = rand(rows=300, cols=300, sparsity=0.01, seed=3)\nprint(sum(X))\n",
               "dense": "X = rand(rows=30, cols=30, seed=3)\nprint(sum(X))\n"}
    for name, text in scripts.items():
        path = tmp_path / f"{name}.dml"
        path.write_text(text)
        subprocess.run([sys.executable, "-m", "lafuse", "run", str(path), "--no-codegen"], env=env,
                       capture_output=True, text=True, check=True)
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    assert prestart.wanted(scripts["sparse"], prestart.SPARSE)
    assert not prestart.wanted(scripts["dense"], prestart.SPARSE)


def test_a_scipy_sparse_still_being_imported_holds_no_sparse_values(monkeypatch):
    # the background import (feedback.prestart) puts a partly initialized scipy.sparse in sys.modules;
    # issparse must not touch its missing attributes (no sparse value can exist before it finishes)
    import types

    from lafuse.sparse import sp

    monkeypatch.setitem(sys.modules, "scipy.sparse", types.ModuleType("scipy.sparse"))
    assert sp.issparse(np.zeros((2, 2))) is False


KMEANS_D = ("D = -2 * (X %*% t(C)) + t(rowSums(C ^ 2))\nP = D <= rowMins(D)\nprint(sum(P))",
            "X = rand(rows=5000, cols=50, seed=1)\nC = rand(rows=10, cols=50, seed=2)\n")
OUTER = ("s = sum(X * log(U %*% t(V) + 1e-8))\nprint(s)",
         "X = rand(rows=200, cols=100, seed=1)\nU = rand(rows=200, cols=5, seed=2)\nV = rand(rows=100, cols=5, seed=3)\n")
CELL3 = ("s = sum(X * Y * Z)\nprint(s)", "".join(f"{v} = rand(rows=200, cols=100, seed={i})\n" for i, v in enumerate("XYZ")))


def _fuse_all_spoofs(text: str, preamble: str):
    from .test_optimizer import HINTS

    cfg = cfgmod.Config(codegen=True, fusion="fuse-all")
    with cfgmod.using(cfg):
        body = loop_body(text, preamble, cfg)
        dag, _ = fusion.optimize(body.dag, cfg, None, weight=body.weight, hints=HINTS)
    return [h for h in dag.hops() if h.kind == "spoof"]


def test_the_mode_predicted_from_sizes_is_the_mode_a_call_runs(tmp_path, monkeypatch):
    # a deferred compile runs before any value exists: it compiles the kernel function of the input
    # formats the recorded sizes predict (row: dense per-row 0, block products 3, CSR 1/2; cell: dense
    # 0, CSR main 2, all CSR 3; outer: dense 0, CSR 1); each prediction is checked against the function
    # a call on values of those sizes and formats loads (cache.ByMode.modes)
    import scipy.sparse as sps

    from lafuse import codegen

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path))
    rng = np.random.default_rng(7)
    seen = set()
    for text, pre in (KMEANS_D, OUTER, CELL3):
        for spoof in _fuse_all_spoofs(text, pre):
            plan = spoof.params["cplan"]
            sizes = [optimizer._size_format(h, None) for h in spoof.inputs]
            assert not any(s for _, _, s in sizes)  # the sizes of rand's dense results
            for k in (0, 1, len(sizes)):  # dense, the first input CSR, all CSR
                sz = tuple((r, c, i < k and r * c > 1) for i, (r, c, _) in enumerate(sizes))
                vals = [sps.random(r, c, density=0.05, format="csr", random_state=k) if s else rng.random((r, c))
                        for r, c, s in sz]
                codegen.clear_memory_cache()
                op = local_fused.compile_plan(plan, eager=False)
                op(vals)
                predicted = local_fused.predict_mode(plan, sz)
                assert op._kernel.modes() == {predicted}, (plan.template, sz)
                seen.add((plan.template, predicted))
    assert {("row", 3), ("row", 2), ("cell", 0), ("cell", 2), ("cell", 3), ("outer", 0), ("outer", 1)} <= seen


def test_a_deferred_compile_builds_the_mode_the_next_run_needs(tmp_path, monkeypatch):
    # KMeans' distance kernel runs its block-product mode (3) on a dense 5000 x 50 main: the deferred
    # compile must build that one, not the dense per-row mode its warm-up call would compile
    from lafuse import codegen

    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path))
    codegen.clear_memory_cache()
    row = next(s for s in _fuse_all_spoofs(*KMEANS_D) if s.params["cplan"].template == "row")
    plan = row.params["cplan"]
    sizes = tuple(optimizer._size_format(h, None) for h in row.inputs)
    assert local_fused.predict_mode(plan, sizes) == 3
    assert compile_all({"plans": [(plan, sizes)], "calibrate": None}) == 1
    codegen.clear_memory_cache()
    assert codegen.is_cached(plan, 3) and not codegen.is_cached(plan, 0)
    assert compile_all({"plans": [(plan, sizes)], "calibrate": None}) == 0  # cached: nothing to do


def _fused_ops(text: str, preamble: str) -> tuple[list, dict, list]:
    """(DAG order, consumers, fused operators) fuse-all finds in the loop body of ``text`` (as
    fusion.optimize)."""
    from lafuse.fusion import magg
    from lafuse.fusion.construct import build_plan
    from lafuse.fusion.memo import explore
    from lafuse.fusion.select import SELECTORS, Context
    from lafuse.hops.program import copy_dag

    cfg = cfgmod.Config(codegen=True, fusion="fuse-all")
    dag = copy_dag(loop_body(text, preamble, cfg).dag)
    order = dag.hops()
    optimizer._mark_read_through(dag, order)
    memo = explore(dag.roots, dominance=True)
    cuts = SELECTORS["fuse-all"]().select(Context(memo, dag.roots, order, HardwareProfile()))
    ops = magg.combine(build_plan(memo, dag.roots, order, cuts, protect_outer=True).fused)
    return order, memo.consumers, ops


def test_first_run_growth_is_the_rise_of_the_blocks_peak():
    """Freed intermediates of a block's earlier operators hold a later operator's, and an element-wise
    result takes the buffer of an operand that dies with it (runtime.reuse): unfused, A - X (16 MB)
    rises above A and its square is written into it, so fusing the sum lowers the block's peak by one
    16 MB block, not by the three intermediates it never allocates. A's own chain (X + 1, exp, * 2)
    runs in one buffer unfused too: fusing it saves no first-run growth."""
    order, users, ops = _fused_ops("A = exp(X + 1) * 2\ns = sum((A - X) ^ 2)\nprint(s + as.scalar(A[1, 1]))",
                                   "X = rand(rows=2000, cols=1000, seed=1)\n")
    chain, total = sorted(ops, key=lambda o: o.root.op == "sum")  # A's operator, the sum's (it recomputes A)
    assert (chain.root.op, total.root.op) == ("*", "sum")
    mb16 = 2000 * 1000 * 8
    # the operator's own intermediates held at once: A (which it recomputes), A - X, its square
    assert optimizer.intermediate_peak(optimizer._covered_hops(total), total.root) == 3 * mb16
    # (A[1, 1], 8 bytes, is allocated too)
    assert optimizer.growth_saved(order, [total], users) == pytest.approx([mb16], abs=8)
    assert optimizer.growth_saved(order, [chain, total], users) == pytest.approx([0, mb16], abs=8)


def test_a_kernel_calling_blas_pays_scipys_blas_import_once(monkeypatch):
    """The first kernel of a process that calls BLAS imports scipy's BLAS (Numba's np.dot uses it):
    0.15 s more than its load, nothing once it is imported; a cell kernel never pays it. Feedback
    records which candidates call BLAS, so a run's shared start includes that import."""
    from lafuse.cost import constants as K
    from lafuse.cost.fused import calls_blas, compile_penalty
    from lafuse.feedback import observed

    # (max(G), not sum(G): the sum-product rule would sum G's product away, BLAS call and all)
    _, _, ops = _fused_ops("s = sum(X * Y * Z)\nG = t(X) %*% (X * Y)\nprint(s + max(G))", SMALL)
    kinds = {o.template: calls_blas(o.plan) for o in ops}
    assert kinds == {"cell": False, "row": True}, kinds
    prof = HardwareProfile()
    monkeypatch.delitem(sys.modules, "scipy.linalg.cython_blas", raising=False)
    assert compile_penalty(True, prof, True, blas=True) == K.CODEGEN_WARM_LOAD_TIME + K.SCIPY_BLAS_IMPORT_TIME
    assert compile_penalty(True, prof, True, blas=False) == K.CODEGEN_WARM_LOAD_TIME
    import scipy.linalg.cython_blas  # noqa: F401

    assert compile_penalty(True, prof, True, blas=True) == K.CODEGEN_WARM_LOAD_TIME
    # a run whose candidates saved 0.3 s: enough for a 0.25 s start, not with a 0.1 s BLAS import
    obs = {"a": observed.Observation(10, 0.02, "r", blas=True), "b": observed.Observation(1, 0.1, "r")}
    monkeypatch.setattr(observed, "load", lambda: obs)
    assert observed.start_shared("b", 0.0, 0.25) and not observed.start_shared("b", 0.0, 0.25, 0.1)
    obs["a"] = observed.Observation(10, 0.02, "r", blas=False)
    assert observed.start_shared("b", 0.0, 0.25, 0.1)
