"""The conformance corpus, SystemDS's core scripts and the algorithm library under ``--exec dask``: every
script runs through the command line twice, locally and on the shared LocalCluster with tiny odd blocks
(every matrix of more than 4 cells has its operators on Dask, with edge blocks: blocks of 5 for the corpus,
37 for the algorithm drivers, whose 200 x 10 data would otherwise make every operator 80 tasks), and the two runs print
the same lines (numbers to rtol 1e-9: a distributed sum adds its blocks' partial sums in another order),
exit with the same code and write the same matrices (rtol 1e-9).

Why against the local run rather than SystemDS: the local run equals SystemDS already
(tests/conformance), and comparing the two lafuse runs pins every difference on the distributed runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conformance import compare, corpus
from tests.conformance.test_algorithms import TRACE_RTOL, ZERO_BELOW

RTOL = 1e-9
BLOCK = {"corpus": 5, "algorithms": 37, "large": 331, "loops": 37}
# the algorithm drivers' vectors and row-by-row work stay local below 1000 cells (alsDS updates one row
# of its 100 x 3 factors per parfor iteration: on Dask that was a task and a gather per row, 94 s for the
# driver); the data matrices (100 x 30, 200 x 10 and larger) and their products still run on Dask
MIN_CELLS = {"corpus": 4, "algorithms": 1000, "large": 4, "loops": 4}
# corpus scripts that loop over 200 x 10 to 1000 x 1000 matrices: 27-34 s each at blocks of 5
LOOPS = {"070_builtin_classifiers.dml", "077_logreg_gradient_descent.dml", "082_sparse_large.dml"}
# corpus scripts with 1000 x 1000 to 2000 x 2000 matrices: blocks of 5 would make one operator 40,000 to
# 160,000 tasks; blocks of 331 still leave edge blocks (1000 = 3 x 331 + 7)
LARGE = {"090_all_zero_matrices.dml", "092_ultra_sparse_table.dml", "093_seeded_rand_values.dml",
         "094_ultra_sparse_rand.dml", "102_sparse_tostring_slices.dml"}
SCRIPTS = [p.name for p in corpus.all_scripts()]
ALGORITHMS = sorted(p.name for p in corpus.ALGORITHMS_DIR.glob("*.dml"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return corpus.generate_inputs(tmp_path_factory.mktemp("dask_corpus_inputs"))


@pytest.fixture(scope="module")
def dask_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("dask_corpus_cfg")
    out = {}
    for k, bs in BLOCK.items():
        out[k] = d / f"{k}.json"
        out[k].write_text(json.dumps({"block_size": bs, "dask_min_cells": MIN_CELLS[k]}))
    return out


def _start(sc: corpus.Script, inputs: Path, out: Path, extra: list[str]) -> tuple[subprocess.Popen, list[str], Path]:
    out.mkdir(parents=True, exist_ok=True)
    cmd = corpus.lafuse_command(sc.path, sc.arguments(inputs, out)) + extra
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(corpus.REPO_ROOT), env.get("PYTHONPATH", "")) if x)
    p = subprocess.Popen(cmd, cwd=sc.path.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return p, cmd, out


def _finish(sc: corpus.Script, run: tuple[subprocess.Popen, list[str], Path]) -> corpus.LafuseResult:
    p, cmd, out = run
    try:
        stdout, stderr = p.communicate(timeout=corpus.LAFUSE_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    lines = stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return corpus.LafuseResult(lines, p.returncode, stderr, {k: out / sc.output_file(k) for k in sc.outputs}, cmd)


def _compare(sc: corpus.Script, local: corpus.LafuseResult, dist: corpus.LafuseResult) -> list[str]:
    problems = []
    if dist.returncode != local.returncode:
        problems.append(f"exit code {dist.returncode} on Dask, {local.returncode} locally:\n{dist.stderr[-3000:]}")
    a, b = local.stdout_lines, dist.stdout_lines
    if sc.name in TRACE_RTOL and len(a) == len(b):
        prefix, loose = TRACE_RTOL[sc.name]  # (an ill-conditioned trace: see tests/conformance/test_algorithms)
        traced = {i for i, ln in enumerate(a) if ln.startswith(prefix)}
        problems += [f"stdout line {i + 1}: {r}" for i in sorted(traced) if (r := compare.compare_line(a[i], b[i], loose))]
        a = [ln for i, ln in enumerate(a) if i not in traced]
        b = [ln for i, ln in enumerate(b) if i not in traced]
    diff = compare.compare_lines(a, b, expected_name="local", actual_name="dask", rtol=RTOL)
    if diff:
        problems.append(diff)
    for k, fmt in sc.outputs.items():
        if not local.outputs[k].exists():
            continue
        e = compare.read_matrix(local.outputs[k], fmt).values
        d = compare.read_matrix(dist.outputs[k], fmt).values
        rel = compare.max_rel_diff(e, d, ZERO_BELOW.get(sc.name, 0.0)) if e.shape == d.shape else float("inf")
        if rel > RTOL:
            problems.append(f"output ${k}: relative difference {rel:.3g} (shapes {e.shape}, {d.shape})")
    return problems


def _check(directory: Path, name: str, inputs: Path, cfg: Path, scheduler: str, tmp_path: Path) -> None:
    sc = corpus.load_script(directory / name)
    # both at once: the local run is light and would otherwise add its time to the Dask run's
    runs = [_start(sc, inputs, tmp_path / "local", []),
            _start(sc, inputs, tmp_path / "dask", ["--exec", "dask", "--scheduler", scheduler, "--config", str(cfg)])]
    local, dist = (_finish(sc, r) for r in runs)
    problems = _compare(sc, local, dist)
    assert not problems, "\n\n".join(problems) + f"\ncommand: {' '.join(dist.command)}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_corpus_script_on_dask_equals_local(name, inputs, dask_config, dask_scheduler, tmp_path):
    kind = "large" if name in LARGE else "loops" if name in LOOPS else "corpus"
    _check(corpus.SCRIPTS_DIR, name, inputs, dask_config[kind], dask_scheduler, tmp_path)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_algorithm_on_dask_equals_local(name, inputs, dask_config, dask_scheduler, tmp_path):
    _check(corpus.ALGORITHMS_DIR, name, inputs, dask_config["algorithms"], dask_scheduler, tmp_path)
