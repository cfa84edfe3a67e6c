"""The distributed section (benchmarks/dist_section.py) compares lafuse's DML with a hand-written
dask.array version of each workload: at a tiny size the two must compute the same numbers, or a faster
dask.array row in docs/benchmarks.md could be another computation. dask.array runs on dask's
single-process scheduler here (no cluster); no timing is asserted."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import dist_section as db  # noqa: E402
import fuseme_memory  # noqa: E402
from dist_dask_array import SyncClient  # noqa: E402
from harness import DataSet, parse_script_output, rel_diff, write_lafuse  # noqa: E402

PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "profile_2core.json"
TINY = {"gnmf": (60, 40), "l2svm": (300, 12), "alscg": (50, 40), "outer-log": (50, 40), "outer-log-wide": (60, 50),
        "autoencoder": (70, 40),
        "outer-log-memory": (40, 30)}


@pytest.mark.parametrize("w", [*db.WORKLOADS, fuseme_memory.WORKLOAD], ids=lambda w: w.key)
def test_dml_and_dask_array_agree(w: db.DistWorkload, tmp_path: Path) -> None:
    n, m = TINY[w.key]
    w = dataclasses.replace(w, sizes={"fits": (n, m), "spills": (n, m)}, bs=16)  # several blocks each way
    ds = DataSet("tiny", w.gen(np.random.default_rng(7), n, m))
    write_lafuse(ds, tmp_path)
    script = tmp_path / "w.dml"
    script.write_text(w.workload("fits").script(1, ds))
    env = {**os.environ, "LAFUSE_PROFILE": str(PROFILE)}
    p = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--nvargs",
                        *[f"{k}={ds.lafuse_files[k]}" for k in w.inputs]], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    times, dml = parse_script_output(p.stdout.splitlines())
    assert len(times) == 1 and len(dml) == w.n_out
    got = w.dask(SyncClient(), ds.arrays, w.bs, w.iters, w.cg)
    assert all(np.isfinite(got)), got  # NaN in both would agree vacuously
    assert rel_diff(tuple(got), tuple(dml)) <= 1e-9, (got, dml)


def test_data_is_exact_as_text() -> None:
    # SystemDS reads the inputs from text written with %.17g: short dyadic values survive exactly
    for w in db.WORKLOADS:
        for name, a in w.gen(np.random.default_rng(1), 40, 30).items():
            vals = a.data if hasattr(a, "data") and not isinstance(a, np.ndarray) else a.ravel()
            assert np.array_equal(vals * 16, np.rint(vals * 16)), (w.key, name)


def test_verdict_names_each_missed_goal() -> None:
    def e(t: float | None, check: str = "ok") -> dict:
        return {"time": t, "check": check}

    row = {"size": "fits", "systems": {"lafuse-local": e(1.0), "lafuse-hybrid": e(3.0), "lafuse-dask": e(6.0),
                                       "dask-array": e(4.0), "sds-spark": e(2.0), "sds-hybrid": e(5.0)}}
    v = db.verdict(row)
    assert v.startswith("missed") and "SystemDS -exec spark" in v and "lafuse local" in v
    assert "dask.array" not in v
    # --exec dask against the systems that run everything distributed, never against lafuse local
    forced = db.verdict(row, "lafuse-dask", db.FORCED_AGAINST, near_local=False)
    assert forced == "missed: 3.00x SystemDS -exec spark, 1.50x dask.array", forced
    row["size"] = "spills"
    row["systems"]["sds-spark"] = e(9.0)
    assert db.verdict(row) == "met"
    row["systems"]["dask-array"] = e(None, "ERROR: timeout after 150 s")
    assert db.verdict(row) == "met"  # it did not finish in 150 s, lafuse on Dask took 3
    row["systems"]["lafuse-hybrid"] = e(None, "ERROR: x")
    assert db.verdict(row).startswith("missed: lafuse on Dask (auto) failed")


def test_fuseme_verdict_names_each_missed_goal() -> None:
    def row(**systems):
        return {"systems": {k: {"time": t, "counts": {"moved_bytes": b}} for k, (t, b) in systems.items()}}

    ok = row(**{"lafuse-cost": (1.05, 5), "lafuse-bfo": (1.0, 9), "lafuse-rfo": (2.0, 7), "lafuse-cfo": (1.2, 5),
                "sds-spark": (3.0, None)})
    assert db.fuseme_verdict(ok) == "met"
    bad = row(**{"lafuse-cost": (1.5, 5), "lafuse-bfo": (1.0, 9), "lafuse-rfo": (4.0, 2 * 2**20),
                 "lafuse-cfo": (1.2, 3 * 2**20), "sds-spark": (3.0, None)})
    got = db.fuseme_verdict(bad)
    assert got.startswith("missed: ")
    assert "CFO moved 3 MiB >= min(BFO, RFO) 8.58e-06 MiB" in got and "cost-chosen 1.50x the fastest forced operator" in got
    assert "lafuse RFO 1.33x SystemDS -exec spark" in got
    bad["systems"]["lafuse-bfo"]["time"] = None
    assert "lafuse BFO failed" in db.fuseme_verdict(bad)
    # out of memory where CFO completed: paper 004's memory case, a note; CFO failing too is a miss
    bad["systems"]["lafuse-bfo"]["error"] = "x.dml:3:4: runtime error: the distributed operator 'cuboid' ran out of memory"
    got = db.fuseme_verdict(bad)
    assert "BFO failed" not in got and got.endswith(" (BFO out of memory, CFO completed: paper 004's memory case)")
    bad["systems"]["lafuse-cfo"]["time"] = None
    got = db.fuseme_verdict(bad)
    assert "lafuse BFO failed" in got and "lafuse CFO failed" in got and "memory case" not in got
    # the fused operators' own bytes count where measured; CFO at BFO's or RFO's point of each
    # operator is their plan (no byte goal), at a point of its own it must move less
    ops = row(**{"lafuse-cost": (1.0, 9), "lafuse-bfo": (1.0, 9), "lafuse-rfo": (1.0, 9), "lafuse-cfo": (1.0, 1),
                 "sds-spark": (3.0, None)})
    for k, (fused, points) in {"lafuse-bfo": (4, "(2,1,1) (1,2,1)"), "lafuse-rfo": (4, "(8,1,1) (1,8,1)"),
                               "lafuse-cfo": (5, "(2,1,1) (1,8,1)")}.items():
        ops["systems"][k]["counts"].update(fused_moved_bytes=fused * 2**20, points=points)
    assert db.fuseme_verdict(ops) == "met (CFO at BFO's or RFO's (P,Q,R) on every operator: no byte goal)"
    ops["systems"]["lafuse-cfo"]["counts"]["points"] = "(2,1,1) (1,4,1)"
    assert db.fuseme_verdict(ops) == "missed: CFO moved 5 MiB >= min(BFO, RFO) 4 MiB"


def test_memory_case_verdict() -> None:
    """BFO must fail or spill more than CFO; CFO and the cost-chosen operator complete with the local
    result."""
    def e(spilled: float = 0.0, error: str | None = None, check: str = "ok") -> dict:
        return {"error": error, "check": check, "counts": {"spilled_bytes": spilled}}

    ok = {"lafuse-cfo": e(spilled=1e8), "lafuse-cost": e()}
    assert fuseme_memory.verdict({"lafuse-bfo": e(spilled=1e9), **ok}) == "met"
    assert fuseme_memory.verdict({"lafuse-bfo": e(error="ran out of memory"), **ok}) == "met"
    assert fuseme_memory.verdict({"lafuse-bfo": e(spilled=1e8), **ok}) == (
        "missed: BFO completed, spilling 100 MB a run against CFO's 100 MB")
    got = fuseme_memory.verdict({"lafuse-bfo": e(error="x"), "lafuse-cfo": e(check="MISMATCH rel 1e-3"),
                                 "lafuse-cost": e()})
    assert got == "missed: lafuse CFO: MISMATCH rel 1e-3", got


def test_fused_models_reads_every_operators_point_and_bytes() -> None:
    out = ("x\nDask fused operators, MiB moved between workers estimated / worker model / measured: "
           "cuboid cfo(1,2,1) 15.5 / 8.95 / 8.5, cuboid cfo(12,1,1) 20.2 / 0.305 / 0.25\n")
    got = db.fused_models(out)
    assert got["operator"] == "cfo(1,2,1)" and got["points"] == "(1,2,1) (12,1,1)"
    assert got["model_bytes"] == pytest.approx(35.7 * 2**20)
    assert got["worker_model_bytes"] == pytest.approx(9.255 * 2**20)
    assert got["fused_moved_bytes"] == pytest.approx(8.75 * 2**20)
    assert db.fused_models("no stats") == {}
    # an outer plan's broadcast sends U and V whole: not the cuboid operator's plan at its point
    outer = db.fused_models(out.replace("cuboid cfo", "full_agg bfo"))
    assert outer["operator"] == "bfo(1,2,1)" and outer["points"] == "whole(1,2,1) whole(12,1,1)"


def test_short_fused_rows_run_nine_times_a_process() -> None:
    def dask(warm: list[float]) -> db.Result:
        return db.Result("lafuse-dask", first=warm[0] * 3 if warm else None, warm=warm)

    assert db.fused_runs(1, dask([0.04, 0.05])) == 9  # (paper 004's query at spills)
    assert db.fused_runs(1, dask([8.6, 9.0])) == 3  # (the spilling autoencoder)
    assert db.fused_runs(9, dask([2.0])) == 9 and db.fused_runs(1, None) == 3
    assert db.fused_runs(1, db.Result("lafuse-dask", error="timeout")) == 3  # (no time: three bound the row)


def test_the_cost_chosen_goal_compares_fastest_runs_and_pools_one_plan() -> None:
    """Runs of ~20 ms meet a ~9 ms hiccup or not: each system's fastest warm run is compared, and
    where the cost-chosen operator ran forced CFO's points, both processes timed the one plan."""
    def s(warm, points, moved=1):
        return {"time": sorted(warm)[len(warm) // 2], "warm": warm, "counts": {"moved_bytes": moved, "points": points}}

    row = {"systems": {"lafuse-cost": s([26.0, 16.4, 24.5, 25.0], "(2,1,1)"),
                       "lafuse-bfo": s([16.1, 25.0, 24.0], "whole(2,1,1)", 2),
                       "lafuse-rfo": s([15.7, 22.3, 25.4], "(3,3,1)", 2),
                       "lafuse-cfo": s([18.0, 25.6, 15.3], "(2,1,1)"), "sds-spark": s([40.0], "")}}
    assert db.fuseme_verdict(row) == "met"  # (medians: 24.5 against 22.3 at best)
    row["systems"]["lafuse-cfo"]["counts"]["points"] = "(1,2,1)"  # (another plan: no pooling)
    assert db.fuseme_verdict(row) == "met"  # (16.4 within 10% of CFO's 15.3)
    row["systems"]["lafuse-cost"]["warm"] = [26.0, 18.4, 24.5]
    assert db.fuseme_verdict(row) == "missed: cost-chosen 1.20x the fastest forced operator"  # (CFO 15.3)


def test_a_slow_rows_fused_processes_get_time_for_their_runs() -> None:
    dask = db.Result("lafuse-dask", first=30.0, warm=[7.9])
    spark = db.Result("sds-spark", first=30.0, warm=[24.7])
    assert db.fused_timeout(60.0, 3, dask) == pytest.approx(3 * 3 * 7.9 + db.FUSED_START)
    assert db.fused_timeout(60.0, 3, dask, spark) == pytest.approx(3 * 24.7 + db.FUSED_START)  # (its pace to beat)
    assert db.fused_timeout(60.0, 9, db.Result("lafuse-dask", first=1.0, warm=[0.3])) == 60.0
    assert db.fused_timeout(60.0, 3, None, db.Result("sds-spark", error="x")) == 60.0
