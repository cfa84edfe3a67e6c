"""The benchmark suite compares systems on workloads written several times over (DML, NumPy/SciPy, a
hand-written Numba kernel): the copies must compute the same thing, or a "faster" entry in
docs/benchmarks.md could be a different computation. Small sizes here; the suite checks its own runs."""

from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import algorithms  # noqa: E402
import micro  # noqa: E402
from harness import _results, parse_script_output, rel_diff, write_lafuse  # noqa: E402

PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "profile_2core.json"


def _tiny(alg: algorithms.Algorithm) -> algorithms.Algorithm:
    n, m = (300, 300) if alg.sparse else (400, 30)
    return dataclasses.replace(alg, sizes={"quick": ((n, m), (n, m)), "full": ((n, m), (n, m))})


def _lafuse(script: Path, files: dict[str, str], *flags: str) -> tuple[float, ...]:
    env = {**os.environ, "LAFUSE_PROFILE": str(PROFILE)}
    p = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), *flags, "--nvargs",
                        *[f"{k}={v}" for k, v in files.items()]], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    times, res = parse_script_output(p.stdout.splitlines())
    assert len(times) == 1
    return tuple(res)


@pytest.mark.parametrize("alg", algorithms.ALGORITHMS, ids=lambda a: a.key)
def test_algorithm_dml_and_numpy_agree(alg: algorithms.Algorithm, tmp_path: Path) -> None:
    # unfused and with every fusion the DML computes what the NumPy/SciPy copy computes; the copies
    # are finite (a NaN in both would agree vacuously)
    alg = _tiny(alg)
    ds = algorithms.generate(alg, "small", True)
    write_lafuse(ds, tmp_path)
    w = algorithms.workload(alg, "small")
    script = tmp_path / "alg.dml"
    script.write_text(w.script(1, ds))
    ref = _results(w.numpy({k: ds.arrays[k] for k in w.inputs}), w.result)
    assert len(ref) == alg.n_out and all(np.isfinite(ref))
    files = {k: ds.lafuse_files[k] for k in w.inputs}
    for flags in (("--no-codegen",), ("--fusion", "fuse-all")):
        got = _lafuse(script, files, *flags)
        assert rel_diff(got, ref) <= 1e-9, (flags, got, ref)


@pytest.mark.parametrize("w", micro.WORKLOADS, ids=lambda w: w.name)
def test_hand_written_kernel_computes_what_numpy_computes(w, monkeypatch) -> None:
    # the "practical limit" column: each Numba kernel against NumPy/SciPy on small data of the same kind
    small = {k: ((300, 40), (300, 40)) for k in micro.DATASETS}
    monkeypatch.setattr(micro, "DATASETS", small)
    ds = micro.generate(w.data, quick=True)
    a = {k: ds.arrays[k] for k in w.inputs}
    assert rel_diff(_results(w.numba(a), w.result), _results(w.numpy(a), w.result)) <= 1e-10


def test_only_selects_by_name_algorithm_or_group() -> None:
    import suite

    def names(*only: str) -> list[str]:
        return [w.name for w, _ in suite.workloads(True, set(only))]

    assert names("cell3") == ["cell3"]  # not cell3-sparse
    assert names("l2svm") == ["l2svm-small", "l2svm-large"]
    assert names("glm-large", "wdivmm-1e-02") == ["wdivmm-1e-02", "glm-large"]
    assert names("micro") == [w.name for w in micro.WORKLOADS]


def test_rounds_per_workload_kind() -> None:
    import argparse

    import harness
    import suite

    workloads = {w.name: w for w, _ in suite.workloads(False, None)}
    a = argparse.Namespace(reps=3, micro_reps=9, small_reps=9, large_reps=5)
    got = {n: harness.rounds_of(workloads[n], a) for n in ("cell3", "l2svm-small", "l2svm-large")}
    assert got == {"cell3": 9, "l2svm-small": 9, "l2svm-large": 5}
    assert harness.rounds_of(workloads["l2svm-large"], argparse.Namespace(reps=3)) == 3  # older callers


def test_each_lafuse_configuration_takes_each_place_in_the_round_order() -> None:
    import harness

    names = ["lafuse", "lafuse-fuse-all", "lafuse-cost", "lafuse-fuse-no-redundancy", "numpy", "jax"]
    systems = {n: harness.SystemResult(n) for n in names}
    orders = [[n for n, _ in harness.rotated(systems, r)] for r in range(8)]
    assert all(sorted(o) == sorted(names) and o[4:] == ["numpy", "jax"] for o in orders)
    for k in range(4):  # every lafuse configuration runs at every place, twice in eight rounds
        assert sorted(o[k] for o in orders) == sorted(names[:4] * 2)
    assert orders[1][:2] == ["lafuse-fuse-all", "lafuse-cost"] and orders[2][0] == "lafuse-cost"


def test_a_documented_defect_of_another_system_is_flagged_not_fatal() -> None:
    """Workload.known_wrong: SystemDS 3.4's codegen computes other values for the mini-batch MLP (codegen
    off, NumPy, JAX and lafuse agree); the suite marks that system's mismatch KNOWN, with the evidence,
    and keeps failing on any other system's wrong result."""
    import suite

    alg = next(a for a in algorithms.ALGORITHMS if a.key == "mlp")
    w = algorithms.workload(alg, "small")
    assert "systemds-codegen-on" in w.known_wrong

    class R:
        def __init__(self, name: str, res: list[float]):
            self.name, self.res = name, res

        def summary(self) -> dict:
            return {"skipped": False, "error": "", "results": self.res}

    extra = {"data": "", "bandwidth_limit": None, "bandwidth_limit_measured": None, "bytes_read_once": 0,
             "passes": 1}
    e = suite.entry(w, [R("numpy", [1.0, 2.0, 3.0]), R("systemds-codegen-on", [0.5, 2.0, 3.0]),
                        R("systemds-codegen-off", [1.0, 2.0, 3.0]), R("jax", [9.0, 2.0, 3.0])], extra)
    checks = {k: s["check"] for k, s in e["systems"].items()}
    assert checks["systemds-codegen-off"] == "ok"
    assert checks["systemds-codegen-on"].startswith("KNOWN MISMATCH rel") and "codegen off" in checks["systemds-codegen-on"]
    assert checks["jax"].startswith("MISMATCH")  # not documented: still a wrong result


@pytest.mark.parametrize("key", ["glm", "pnmf"])
def test_the_numpy_twin_process_computes_what_the_in_process_twin_computes(key: str, tmp_path: Path) -> None:
    """The NumPy/SciPy column of an algorithm is a process of its own reading lafuse's input files
    (numpy_twin.py, dense and sparse): the same results as the in-process twin, one timed run."""
    from harness import run_numpy_process

    alg = next(a for a in algorithms.ALGORITHMS if a.key == key)
    ds = algorithms.generate(alg, "small", True)
    write_lafuse(ds, tmp_path)
    w = algorithms.workload(alg, "small")
    ref = _results(w.numpy({k: ds.arrays[k] for k in w.inputs}), w.result)
    r = run_numpy_process(w, ds)
    assert r.error is None and len(r.op) == 1 and r.op[0] > 0 and r.wall is not None and r.wall > r.op[0]
    assert rel_diff(tuple(r.results), ref) <= 1e-12, (r.results, ref)


def _matrix_runs(stats: Any) -> collections.Counter:
    """Executions per matrix-valued instruction kind of a run (a transient read names a value, no work)."""
    runs: collections.Counter = collections.Counter()
    for ins in stats.ran:
        if ins.hop.is_matrix and ins.opcode != "tread":
            runs[ins.opcode] += ins.runs
    return runs


@pytest.mark.parametrize("alg", algorithms.ALGORITHMS, ids=lambda a: a.key)
def test_the_python_api_version_computes_what_numpy_computes_with_the_dml_plans(alg: algorithms.Algorithm) -> None:
    """benchmarks/python_api.py (the suite's lafuse-python column): each algorithm written with the
    Python API computes what the NumPy/SciPy copy computes, and runs the plans of its DML: the same
    fused operators and products, as many times, and no more of any other matrix operator (a Python
    constant folds where the DML's variable does not: L2SVM's ``reg * w``)."""
    import python_api

    import lafuse as lf
    from lafuse.api.emit import Script
    from lafuse.api.run import _run

    alg = _tiny(alg)
    ds = algorithms.generate(alg, "small", True)
    w = algorithms.workload(alg, "small")
    arrays = {k: ds.arrays[k] for k in w.inputs}
    ref = _results(w.numpy(arrays), w.result)
    with lf.config(stats=True):
        got = tuple(float(v) for v in python_api.compiled(alg.key, arrays, alg.iters)())
        py = _matrix_runs(lf.last_stats())
        outs = [f"r{k + 1}" for k in range(alg.n_out)]
        dml_got = _run(Script(w.body, dict(arrays), {}, outs))
        dml = _matrix_runs(lf.last_stats())
    assert rel_diff(got, ref) <= 1e-9, (got, ref)
    assert rel_diff(got, tuple(float(dml_got[o]) for o in outs)) <= 1e-12
    kernels = {op for op in dml if op.startswith("spoof") or op in ("%*%", "tsmm", "mmchain", "wsloss", "sampledsum")}
    assert kernels and {op: py[op] for op in kernels} == {op: dml[op] for op in kernels}, (py, dml)
    assert all(py[op] <= dml[op] for op in py), (py, dml)


def test_the_python_api_column_runs_as_a_process(tmp_path: Path) -> None:
    from harness import run_python_process

    alg = _tiny(next(a for a in algorithms.ALGORITHMS if a.key == "gnmf"))
    ds = algorithms.generate(alg, "small", True)
    write_lafuse(ds, tmp_path)
    w = algorithms.workload(alg, "small")
    ref = _results(w.numpy({k: ds.arrays[k] for k in w.inputs}), w.result)
    r = run_python_process(w, ds, str(tmp_path / "cache"))
    assert r.error is None and len(r.op) == 1 and r.op[0] > 0 and r.wall is not None and r.wall > r.op[0]
    assert rel_diff(tuple(r.results), ref) <= 1e-9, (r.results, ref)
