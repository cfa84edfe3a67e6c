"""The distributed operators of runtime.dask.ops against the local runtime: cell-wise operators with
matrix-vector broadcasting and NaN, the full/row/column aggregates (tree reductions, the last-index
and NaN rules of rowIndexMax/Min), right and left indexing, rbind/cbind; every one is a DASK
instruction of the plan (not a local fallback) and its result equals the local one."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from lafuse.plan import exectype
from tests.on_dask.common import cfg as _cfg
from tests.on_dask.common import dense as _dense
from tests.on_dask.common import errors_both_ways

SCRIPT = """
X = rand(rows=23, cols=17, seed=1, min=-1, max=1)
Y = rand(rows=23, cols=17, seed=2, sparsity=0.3)
X[3, 4] = NaN
X[5, 1:17] = matrix(-1, 1, 17)
Y[6, 1:17] = matrix(0, 1, 17)
v = rand(rows=23, cols=1, seed=3)
w = rand(rows=1, cols=17, seed=4)
A = X * v + w / (Y + 2) - ifelse(X > 0, Y, -1)
L = log(abs(Y) + 1, 2) + (Y %% 0.25) + round(X) + !(Y != 0)
B = X[2:20, 3:16]
Q = Y[8:14, 8:14]
C = cbind(Y, v, Y)
D = rbind(Y, w)
E = Y
E[5:11, 2:15] = B[1:7, 1:14]
E[1:3, 1:3] = 7
r1 = rowMins(Y); r2 = rowMaxs(Y); r3 = rowMeans(Y); r4 = colMins(Y); r5 = colMaxs(Y); r6 = colMeans(Y)
r7 = rowIndexMax(Y); r8 = rowIndexMin(Y); r9 = rowIndexMax(X); r10 = rowMaxs(X); r11 = rowSums(Y); r12 = colSums(X)
s1 = sum(A) + mean(Y) + var(Y) + sd(Y) + min(Y) + max(Y) + prod(Y / 100 + 1)
s2 = max(X) + mean(X)
s3 = var(Q) + sd(L)
"""
OUTPUTS = ("A", "L", "B", "Q", "C", "D", "E", *(f"r{k}" for k in range(1, 13)), "s1", "s2", "s3")
ON_DASK = {"*", "/", "-", "+", "ifelse", ">", "log", "%%", "round", "!", "rix", "lix", "cbind", "rbind", "rowMins",
           "rowMaxs", "rowMeans", "colMins", "colMaxs", "colMeans", "rowIndexMax", "rowIndexMin", "rowSums",
           "colSums", "sum", "mean", "var", "sd", "min", "max", "prod"}


def test_every_operator_runs_on_dask_and_equals_local(dask_scheduler):
    cfg = _cfg(dask_scheduler)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        plan = explain_program(comp.compile_text(SCRIPT, "<test>", outputs=OUTPUTS), "runtime", comp)
    ran = set(re.findall(r"^-*DASK (\S+) ", plan, re.M))
    assert ON_DASK <= ran, sorted(ON_DASK - ran)
    local = run_dml(SCRIPT, outputs=OUTPUTS, cfg=_cfg(), out=io.StringIO())
    dist = run_dml(SCRIPT, outputs=OUTPUTS, cfg=cfg, out=io.StringIO())
    for k in OUTPUTS:
        np.testing.assert_allclose(_dense(dist[k]), _dense(local[k]), rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=k)
    assert np.isnan(local["s2"])  # (NaN in X: the aggregates propagate it, as locally)


@pytest.mark.parametrize("bs", [1, 3, 50])
def test_block_sizes_from_one_cell_to_one_block(dask_scheduler, bs):
    """Blocks of one cell, of a few cells (edge blocks everywhere) and one block for the whole matrix."""
    text = """
X = rand(rows=9, cols=7, seed=5, sparsity=0.5)
v = rand(rows=9, cols=1, seed=6)
Z = cbind(X[2:5, 3:7] - v[2:5, 1], rbind(X[1:2, 1:3], X[8:9, 5:7]) %*% matrix(1, 3, 4))
r = rowIndexMax(Z) + rowMaxs(Z)
s = sum(Z) + var(Z)
"""
    local = run_dml(text, outputs=("Z", "r", "s"), cfg=_cfg(), out=io.StringIO())
    dist = run_dml(text, outputs=("Z", "r", "s"), cfg=_cfg(dask_scheduler, block_size=bs), out=io.StringIO())
    for k in ("Z", "r", "s"):
        np.testing.assert_allclose(_dense(dist[k]), _dense(local[k]), rtol=1e-9, err_msg=k)


def test_indexing_errors_are_the_local_ones(dask_scheduler):
    from lafuse.errors import DMLRuntimeError

    text = "X = rand(rows=20, cols=20, seed=1)\nk = 25\nif (sum(X) > 0) { k = 30 }\nY = X[1:k, 1:5]\nprint(sum(Y))\n"
    msgs = errors_both_ways(text, dask_scheduler, error=DMLRuntimeError)
    assert msgs[0] == msgs[1] and "Invalid values for matrix indexing" in msgs[0]


def test_the_families_name_only_operators_the_backend_binds():
    from lafuse.hops.hop import Hop
    from lafuse.plan.instructions import Instruction
    from lafuse.runtime.dask.backend import DaskBackend

    be = DaskBackend(_cfg())
    for op in sorted(exectype.DISTRIBUTED):
        h = Hop(op, "binary")
        assert callable(be.bind(Instruction(op, h, [], 0))), op
