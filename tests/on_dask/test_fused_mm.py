"""FuseME's partial plans with several operators around a product, run as one distributed operator
(fusion.fuseme, runtime.dask.fused_mm, paper 004 §4). GNMF's update chains (a nested product in
the O-space), an autoencoder step (transposes in the L- and R-spaces, vectors broadcast, scalars)
and products under sum, rowSums, colSums and a transpose give the local run's values (rtol 1e-9; NaN from a
square root of a negative cell and from a NaN input),
at blocks of 7 (edge blocks; rank 9: two k-blocks), for every operator and every forced (P, Q, R),
R > 1 included. The plan shows which operators the cuboid operators replaced."""

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

GNMF = """
X = rand(rows=40, cols=23, seed=7, sparsity=0.3)
W = rand(rows=40, cols=9, seed=8, min=0.5, max=1)
H = rand(rows=9, cols=23, seed=9, min=0.5, max=1)
for (i in 1:2) {
  H = H * (t(W) %*% X) / (t(W) %*% W %*% H)
  W = W * (X %*% t(H)) / (W %*% (H %*% t(H)))
}
L = sum((X - W %*% H) ^ 2)
"""
AE = """
X = rand(rows=40, cols=23, seed=1)
W1 = rand(rows=23, cols=9, seed=2, min=-0.3, max=0.3)
W2 = rand(rows=9, cols=3, seed=3, min=-0.3, max=0.3)
W3 = rand(rows=3, cols=9, seed=4, min=-0.3, max=0.3)
W4 = rand(rows=9, cols=23, seed=5, min=-0.3, max=0.3)
b1 = rand(rows=1, cols=9, seed=6)
b4 = rand(rows=1, cols=23, seed=7)
A1 = 1 / (1 + exp(-(X %*% W1 + b1)))
A2 = 1 / (1 + exp(-(A1 %*% W2)))
A3 = 1 / (1 + exp(-(A2 %*% W3)))
D4 = (A3 %*% W4 + b4 - X) / nrow(X)
D3 = (D4 %*% t(W4)) * A3 * (1 - A3)
W4 = W4 - 0.1 * (t(A3) %*% D4)
D2 = (D3 %*% t(W3)) * A2 * (1 - A2)
W3 = W3 - 0.1 * (t(A2) %*% D3)
W2 = W2 - 0.1 * (t(A1) %*% D2)
W1 = W1 - 0.1 * (t(X) %*% ((D2 %*% t(W2)) * A1))
"""
AGGS = """
X = rand(rows=40, cols=23, seed=11, sparsity=0.5)
X[2, 3] = -1
W = rand(rows=23, cols=9, seed=12)
Y = rand(rows=40, cols=9, seed=13)
Y[4, 5] = NaN
s = sum(exp(X %*% W) * Y)
r = rowSums(sqrt(X %*% (W + 1)) + 1)
c = colSums((X %*% (2 * W)) * Y)
T = t(abs(X %*% (W - 1) - 2))
"""
CASES = {"gnmf": (GNMF, ("W", "H", "L")), "ae": (AE, ("W1", "W2", "W3", "W4")), "aggs": (AGGS, ("s", "r", "c", "T"))}


def _cfg(scheduler: str | None = None, **kw) -> cfgmod.Config:
    return common.cfg(scheduler, **{"codegen": True, "fusion": "fuse-all", **kw})


@pytest.fixture(scope="module")
def local() -> dict:
    return {k: run_dml(s, outputs=o, cfg=common.cfg(), out=io.StringIO()) for k, (s, o) in CASES.items()}


def _check(case: str, got: dict, want: dict) -> None:
    for k in CASES[case][1]:
        np.testing.assert_allclose(dense(got[k]), dense(want[k]), rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=f"{case}: {k}")


def _plan(case: str, cfg: cfgmod.Config) -> str:
    text, outs = CASES[case]
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        return explain_program(comp.compile_text(text, "<test>", outputs=outs), "runtime", comp)


@pytest.mark.parametrize("kind", ["cost", "bfo", "rfo", "cfo"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_operator_equals_the_local_run(dask_scheduler, local, case, kind):
    cfg = _cfg(dask_scheduler, dist_fused=kind)
    lines = re.findall(r"^-*DASK cuboid.*$", _plan(case, cfg), re.M)
    shown = "cfo" if kind == "cost" else kind
    assert lines and all(re.search(rf" {shown}\(\d+,\d+,\d+\) net=\S+MiB.* mem=\S+MiB/task cost=.*\{{.*%\*%.*;", ln)
                         for ln in lines), lines
    _check(case, run_dml(CASES[case][0], outputs=CASES[case][1], cfg=cfg, out=io.StringIO()), local[case])


def test_gnmf_runs_the_papers_plans(dask_scheduler):
    """Paper 004 Fig. 10: each update chain one operator, its Gram product split off (a product of
    its own); no cell-wise operator of the chains is left on the cluster."""
    plan = _plan("gnmf", _cfg(dask_scheduler))
    body = plan[plan.index("WHILE") if "WHILE" in plan else plan.index("FOR"):]
    cuboids = re.findall(r"DASK cuboid [^\[]*\[\d+,\d+,.*\{(.*)\}", body)  # (a matrix result: not the loss)
    assert len(cuboids) == 2, body
    assert all(c.count("%*%") == 2 and "*" in c.split(";")[1] and "/" in c for c in cuboids), cuboids
    assert not re.search(r"DASK (\*|/) ", body), body
    assert len(re.findall(r"DASK (ba\+\*|%\*%|tsmm|mapmm\w*|cpmm|rmm)\b", body)) == 2, body
    # the loss: one operator from the product to the sum (the dense W %*% H is never a value)
    assert re.search(r"DASK cuboid .*-> \S+ \[scalar\.double\] .*\{in0%\*%in1; -, \*, sum\}", plan), plan


@pytest.mark.parametrize("pqr", [(1, 1, 1), (2, 1, 2), (1, 3, 2), (6, 4, 1), (3, 2, 2), (9, 9, 9)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_forced_cuboid_split_equals_the_local_run(dask_scheduler, local, case, pqr, monkeypatch):
    """(P, Q, R) beyond a product's grid clamp to it."""
    from lafuse.runtime.dask import fused_mm

    real_choose = fusedstrategy.choose

    def forced(ins, cluster):
        got = real_choose(ins, cluster)
        return fusedstrategy.FusedChoice("cfo", pqr, 0.0, 0.0, 0.0, 0.0) if ins.hop.kind == "cuboid" else got

    ran, real = [], fused_mm.run

    def spy(be, plan, choice, bs, args, **kw):
        ran.append(choice.pqr)
        return real(be, plan, choice, bs, args, **kw)

    monkeypatch.setattr(fusedstrategy, "choose", forced)
    monkeypatch.setattr(fused_mm, "run", spy)
    text, outs = CASES[case]
    _check(case, run_dml(text, outputs=outs, cfg=_cfg(dask_scheduler), out=io.StringIO()), local[case])
    assert ran and set(ran) == {pqr}


def test_a_local_run_keeps_the_templates_plans():
    """Without a cluster no partial plan becomes an operator: the templates fuse as before."""
    plan = _plan("gnmf", _cfg())
    assert "cuboid" not in plan and "spoof" in plan


def test_an_autoencoder_step_runs_every_product_once_in_a_cuboid_operator(dask_scheduler):
    """Each layer's product with its operators is one operator (a result read by the next layer
    included: no operator is computed again by a template), one of them with a nested product
    (``t(X) %*% ((D2 %*% t(W2)) * A1)``); no product runs outside them. What the plan generator
    leaves outside (an operator an earlier candidate looked at, paper 004 Alg. 2) runs on its own."""
    plan = _plan("ae", _cfg(dask_scheduler))
    notes = re.findall(r"DASK cuboid .*\{(.*)\}", plan)
    assert sum(n.count("%*%") for n in notes) == 11 and len(notes) == 10, plan
    assert not re.search(r"DASK (ba\+\*|%\*%|tsmm|mapmm\w*|cpmm|rmm) ", plan), plan
    assert not re.search(r"DASK spoof.*(vecmat|uv\()", plan), plan


def test_stats_show_each_operators_estimated_and_measured_bytes(dask_scheduler, tmp_path, capsys):
    from lafuse.cli import main

    (tmp_path / "s.dml").write_text(GNMF + "print(sum(W) + sum(H))\n")
    (tmp_path / "c.json").write_text('{"block_size": 7, "background": false}')
    rc = main(["run", str(tmp_path / "s.dml"), "--config", str(tmp_path / "c.json"), "--exec", "dask",
               "--scheduler", dask_scheduler, "--stats"])
    out = capsys.readouterr().out
    assert rc == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith("Dask fused operators"))
    entries = re.findall(r"cuboid cfo\((\d+),(\d+),(\d+)\) ([\d.e+-]+) / ([\d.e+-]+) / ([\d.e+-]+)", line)
    assert len(entries) == 4, line  # two update chains, two iterations
    assert all(float(e[3]) > 0 and float(e[4]) >= 0 and float(e[5]) >= 0 for e in entries), line
