"""Distributed fused operators (runtime.dask.fused): the Cell, MAgg, Row and Outer templates run block
by block on the workers with the local kernels, side inputs sliced or shared as the template reads
them. Structural: the plan's fused operators are DASK spoof instructions (none falls back to a local
run); values: equal to the local run with the same fused plan (rtol 1e-9), on the generated Numba
kernels and on the CPlan reference interpreter, at blocks of 7 (edge blocks, several column blocks
for the row panels and the factors)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from tests.on_dask import common
from tests.on_dask.common import dense as _dense

SCRIPT = """
X = rand(rows=40, cols=23, seed=1, min=-1, max=1)
S = rand(rows=40, cols=23, seed=7, sparsity=0.1)
Y = rand(rows=40, cols=23, seed=2, sparsity=0.3)
X[4, 5] = NaN
v = rand(rows=40, cols=1, seed=3)
w = rand(rows=1, cols=23, seed=4)
u = rand(rows=23, cols=1, seed=5)
U = rand(rows=40, cols=9, seed=8)
V = rand(rows=23, cols=9, seed=9)
A = exp(Y * v + w) / (abs(X) + 2)
a1 = sum(Y * S * 3 + v)
a2 = rowSums(X * Y + 1)
a3 = colSums((X + 2) * Y)
a4 = min(X * 2 + Y)
a5 = max(Y + S * 2)
m1 = sum(Y * S); m2 = sum(Y * Y); m3 = sum(S * v)
r1 = t(Y) %*% (v * (Y %*% u))
r2 = rowSums(exp(Y %*% u + 1) * Y)
o1 = sum(S * log(U %*% t(V) + 1e-15))
o2 = (S * (U %*% t(V))) %*% V
o3 = t(S * (U %*% t(V))) %*% U
o4 = S * log(U %*% t(V) + 1)
"""
OUTPUTS = ("A", "a1", "a2", "a3", "a4", "a5", "m1", "m2", "m3", "r1", "r2", "o1", "o2", "o3", "o4")
TEMPLATES = {"spoofCell", "spoofMA", "spoofRA", "spoofOP"}


def _cfg(scheduler: str | None = None, **kw) -> cfgmod.Config:
    return common.cfg(scheduler, **{"codegen": True, "fusion": "fuse-all", **kw})


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_fused_operators_run_block_by_block_and_equal_local(dask_scheduler, backend):
    cfg = _cfg(dask_scheduler, codegen_backend=backend)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        plan = explain_program(comp.compile_text(SCRIPT, "<test>", outputs=OUTPUTS), "runtime", comp)
    where = set(re.findall(r"^-*(DASK|CP) (spoof\w+)", plan, re.M))
    assert {t for e, t in where if e == "DASK"} == TEMPLATES, where
    assert not {t for e, t in where if e == "CP"}, where
    local = run_dml(SCRIPT, outputs=OUTPUTS, cfg=_cfg(codegen_backend=backend), out=io.StringIO())
    dist = run_dml(SCRIPT, outputs=OUTPUTS, cfg=cfg, out=io.StringIO())
    for k in OUTPUTS:
        np.testing.assert_allclose(_dense(dist[k]), _dense(local[k]), rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=k)


def test_a_side_input_of_another_shape_keeps_the_operator_local():
    """A fused operator whose side input does not split along the main input's blocks is not sent to
    Dask (plan.exectype._fused): a 1x1 matrix read as a scalar does, a matrix of other dims does not."""
    from lafuse.hops import cplan as C
    from lafuse.hops.hop import Hop
    from lafuse.plan import exectype
    from lafuse.plan.instructions import Instruction

    def mat(r, c):
        h = Hop("tread", "data", [], "matrix")
        h.rows, h.cols = r, c
        return h

    x = C.CNode("input", (), 0, C.MAIN)
    y = C.CNode("input", (), 1, C.CELL)
    plan = C.CPlan("cell", C.CNode("*", (x, y)), ninputs=2)
    for dims, ok in (((40, 23), True), ((40, 1), False), ((1, 23), False)):
        h = Hop("spoofCell", "spoof", [mat(40, 23), mat(*dims)], "matrix", params={"cplan": plan})
        h.rows, h.cols = 40, 23
        assert exectype.distributable(Instruction("spoofCell", h, [0, 1], 2)) is ok, dims
