"""The distributed outer-product fused operators (plan.fusedstrategy, runtime.dask.fused_outer,
paper 004): broadcast (BFO), replication (RFO) and cuboid (CFO) give the local run's values (rtol
1e-9) for every aggregation of the outer template, on the generated kernels and the reference
interpreter, at blocks of 7 (edge blocks; U and V of 9 columns: two k-blocks), and at every
(P, Q, R) forced, R > 1 included (the partial products added before the operators around them).
--explain shows the operator with its (P, Q, R) and estimates."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from lafuse.plan import fusedstrategy
from tests.on_dask import common
from tests.on_dask.common import dense

SCRIPT = """
S = rand(rows=40, cols=23, seed=7, sparsity=0.1)
S[3, 4] = NaN
U = rand(rows=40, cols=9, seed=8)
V = rand(rows=23, cols=9, seed=9)
V[2, 1] = Inf
M = rand(rows=23, cols=4, seed=10)
N = rand(rows=40, cols=4, seed=11)
o1 = sum(S * log(U %*% t(V) + 1e-15))
o2 = (S * (U %*% t(V))) %*% M
o3 = t(S * (U %*% t(V))) %*% N
o4 = S * log(U %*% t(V) + 1)
"""
OUTPUTS = ("o1", "o2", "o3", "o4")


def _cfg(scheduler: str | None = None, **kw) -> cfgmod.Config:
    return common.cfg(scheduler, **{"codegen": True, "fusion": "fuse-all", **kw})


@pytest.fixture(scope="module")
def local() -> dict:
    return {b: run_dml(SCRIPT, outputs=OUTPUTS, cfg=_cfg(codegen_backend=b), out=io.StringIO())
            for b in ("reference", "numba")}


def _check(got: dict, want: dict) -> None:
    for k in OUTPUTS:
        np.testing.assert_allclose(dense(got[k]), dense(want[k]), rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=k)


@pytest.mark.parametrize("kind", ["cost", "bfo", "rfo", "cfo"])
@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_each_operator_equals_the_local_run(dask_scheduler, local, kind, backend):
    cfg = _cfg(dask_scheduler, codegen_backend=backend, dist_fused=kind)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        plan = explain_program(comp.compile_text(SCRIPT, "<test>", outputs=OUTPUTS), "runtime", comp)
    lines = re.findall(r"^-*DASK spoofOP.*$", plan, re.M)
    shown = "cfo" if kind == "cost" else kind
    assert len(lines) == 4 and all(re.search(rf" {shown}\(\d+,\d+,\d+\) net=\S+MiB.* mem=\S+MiB/task cost=", ln)
                                   for ln in lines), lines
    _check(run_dml(SCRIPT, outputs=OUTPUTS, cfg=cfg, out=io.StringIO()), local[backend])


@pytest.mark.parametrize("pqr", [(1, 1, 1), (2, 1, 2), (1, 3, 2), (6, 4, 1), (3, 2, 2), (6, 4, 2), (9, 9, 9)])
def test_every_forced_cuboid_split_equals_the_local_run(dask_scheduler, local, pqr, monkeypatch):
    """(P, Q, R) beyond the grid (9 > 6 block rows, 4 block columns, 2 k-blocks) clamp to it."""
    from lafuse.runtime.dask import fused_outer

    def forced(ins, cluster):
        return fusedstrategy.FusedChoice("cfo", pqr, 0.0, 0.0, 0.0, 0.0)

    ran, real = [], fused_outer.run

    def spy(be, plan, ref, acc, main, args, choice, **kw):
        ran.append(choice.pqr)
        return real(be, plan, ref, acc, main, args, choice, **kw)

    monkeypatch.setattr(fusedstrategy, "choose", forced)
    monkeypatch.setattr(fused_outer, "run", spy)
    cfg = _cfg(dask_scheduler)
    _check(run_dml(SCRIPT, outputs=OUTPUTS, cfg=cfg, out=io.StringIO()), local["numba"])
    assert ran == [pqr] * 4


def test_stats_show_each_operators_estimated_and_measured_bytes(dask_scheduler, tmp_path, capsys):
    from lafuse.cli import main

    # (single cells printed: a sum of o2 would make its product and the sum one cuboid operator of
    # FuseME's plan generator, fusion.fuseme, and o2's outer operator would cover less)
    (tmp_path / "s.dml").write_text(SCRIPT + "print(o1)\nprint(as.scalar(o2[1, 1]) + as.scalar(o3[2, 2]))\nprint(as.scalar(o4[3, 4]))\n")
    (tmp_path / "c.json").write_text('{"block_size": 7, "background": false}')
    rc = main(["run", str(tmp_path / "s.dml"), "--config", str(tmp_path / "c.json"), "--exec", "dask",
               "--scheduler", dask_scheduler, "--fusion", "fuse-all", "--stats"])
    out = capsys.readouterr().out
    assert rc == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith("Dask fused operators"))
    entries = re.findall(r"(\w+) cfo\((\d+),(\d+),(\d+)\) ([\d.e+-]+) / ([\d.e+-]+) / ([\d.e+-]+)", line)
    assert sorted(e[0] for e in entries) == ["full_agg", "left_mm", "no_agg", "right_mm"], line
    assert all(float(e[4]) > 0 and float(e[5]) >= 0 and float(e[6]) >= 0 for e in entries), line


def test_the_plan_offers_the_replication_corner_unless_configured_off(dask_scheduler):
    """The cuboid operator carries its corner (I, J, 1) = (6, 4, 1) for the runtime to take where it
    moves fewer bytes (runtime.dask.fused_outer.choose); ``dist_fewest_bytes`` False: the model's point
    alone. The forced broadcast and replicating operators carry none."""
    shown = {}
    for kind, on in (("cost", True), ("cost", False), ("cfo", True), ("rfo", True), ("bfo", True)):
        cfg = _cfg(dask_scheduler, dist_fused=kind, dist_fewest_bytes=on)
        with cfgmod.using(cfg):
            comp = Compiler(cfg)
            plan = explain_program(comp.compile_text(SCRIPT, "<test>", outputs=OUTPUTS), "runtime", comp)
        lines = re.findall(r"^-*DASK spoofOP.*$", plan, re.M)
        assert len(lines) == 4, lines
        shown[(kind, on)] = [(*re.search(r" (\w+)\((\d+,\d+,\d+)\) net=", ln).groups(),  # type: ignore[union-attr]
                              *(m.groups() if (m := re.search(r" or \((\d+,\d+,\d+)\) if fewer bytes", ln)) else (None,)))
                             for ln in lines]
    for key, got in shown.items():
        corners = {c for _, p, c in got if c is not None}
        if key in (("cost", True), ("cfo", True)):
            assert corners == {"6,4,1"} and all(c is None or p != c for _, p, c in got), (key, got)
        else:
            assert not corners, (key, got)
