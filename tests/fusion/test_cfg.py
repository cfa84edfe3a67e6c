"""FuseME's plan generator (lafuse.fusion.cfg, paper 004 §4) on DAGs lafuse compiles: GNMF gives the
paper's plans (Fig. 10: exploration finds the two update chains; exploitation splits off the two Gram
products, each split lowering the modelled cost), and an outer-product loss is one candidate whose
model places U, V and X in the L-, R- and O-spaces."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost import cuboid as cb
from lafuse.fusion import cfg as CFG
from lafuse.hops.program import GenericBlock
from lafuse.runtime.values import as_matrix_value

BS = 1000
CLUSTER = cb.Cluster(nodes=2, tasks_per_node=1, task_memory=2**30, net_bw=1e8, compute_bw=1e10)
GNMF = """
for (i in 1:3) {
  U = U * (t(V) %*% X) / (t(V) %*% V %*% U)
  V = V * (X %*% t(U)) / (V %*% U %*% t(U))
}
"""


def _dag(text: str, bound: dict, outputs: tuple[str, ...]):
    cfg = cfgmod.Config(codegen=False, background=False)
    with cfgmod.using(cfg):
        prog = Compiler(cfg).compile_text(text, "<cfg>", {k: as_matrix_value(v) for k, v in bound.items()}, outputs)

    def blocks(bl):
        for b in bl:
            yield b
            for attr in ("body", "blocks", "then_blocks", "else_blocks"):
                yield from blocks(getattr(b, attr, None) or [])

    return next(b.dag for b in blocks(prog.blocks) if isinstance(b, GenericBlock) and set(outputs) <= b.dag.writes())


def _describe(h) -> str:
    """A product by its operands (t(V) %*% X -> 't(V)%*%X'), another operator by its op."""
    def name(x) -> str:
        if x.op == "tread":
            return x.name
        if x.kind == "reorg" and x.op == "t":
            return f"t({name(x.inputs[0])})"
        return f"[{x.rows}x{x.cols}]"

    return f"{name(h.inputs[0])}%*%{name(h.inputs[1])}" if h.kind == "matmult" else h.op


@pytest.fixture(scope="module")
def gnmf():
    n, m, k = 20000, 10000, 100
    X = sp.random_array((n, m), density=0.001, random_state=1, format="csr")
    return _dag(GNMF, {"X": X, "V": np.ones((n, k)), "U": np.ones((k, m))}, ("U", "V"))


def test_gnmf_exploration_finds_the_two_update_chains(gnmf):
    found = [sorted(_describe(h) for h in F.values()) for F in CFG.explore(gnmf, BS)]
    assert found == [sorted(["t(V)%*%X", "*", "t(V)%*%V", "[100x100]%*%U", "/"]),
                     sorted(["X%*%t([100x10000])", "*", "[100x10000]%*%t([100x10000])", "V%*%[100x100]", "/"])]


def test_gnmf_exploitation_splits_off_the_gram_products_and_each_split_costs_less(gnmf):
    plans = CFG.plan(gnmf, BS, CLUSTER)
    mains = [_describe(p.main) for p in plans]
    assert mains == ["t(V)%*%X", "t(V)%*%V", "X%*%t([100x10000])", "[100x10000]%*%t([100x10000])"]
    splits = [[_describe(v) for v, _, _ in p.splits] for p in plans]
    assert splits == [["t(V)%*%V"], [], ["[100x10000]%*%t([100x10000])"], []]
    for p in plans:
        for _, before, after in p.splits:
            assert after < before
        assert p.choice is not None and np.isfinite(p.choice.cost)
    kept = [sorted(_describe(h) for h in p.ops.values()) for p in plans]
    assert kept[0] == sorted(["t(V)%*%X", "*", "[100x100]%*%U", "/"])  # (t(V) V) U stays fused, nested in O
    assert kept[2] == sorted(["X%*%t([100x10000])", "*", "V%*%[100x100]", "/"])


def test_an_outer_product_loss_is_one_candidate_with_its_three_spaces():
    n, m, k = 30000, 20000, 50
    X = sp.random_array((n, m), density=0.001, random_state=2, format="csr")
    dag = _dag("for (i in 1:2) { L = sum(X * log(U %*% t(V) + 1e-15)) }",
               {"X": X, "U": np.ones((n, k)), "V": np.ones((m, k))}, ("L",))
    (F,) = CFG.explore(dag, BS)
    assert sorted(_describe(h) for h in F.values()) == sorted(["U%*%t(V)", "t", "+", "log", "*", "sum"])
    main = next(h for h in F.values() if h.kind == "matmult")
    model = CFG.model(F, main, BS, CFG.consumers(dag))
    assert (model.I, model.J, model.K) == (30, 20, 1)
    assert model.L.inputs == (n * k * 8.0,) and model.R.inputs == (m * k * 8.0,)
    assert model.R.ops == m * k  # the transpose, once per replica of the R-space
    assert len(model.O.inputs) == 1 and model.O.inputs[0] < n * m * 8 * 0.01  # X, sparse
    assert model.O.outputs == (8.0,)  # the sum, read outside


def test_a_squared_loss_reads_its_difference_twice_and_is_still_one_candidate():
    """``(X - W %*% H) ^ 2`` becomes ``d * d``: one operator reading d twice, not two readers (that
    made d a termination operator, and the dense difference a result of the cluster's operator)."""
    n, m, k = 14000, 7500, 10
    X = sp.random_array((n, m), density=0.01, random_state=3, format="csr")
    dag = _dag("for (i in 1:2) { L = sum((X - W %*% H) ^ 2) }",
               {"X": X, "W": np.ones((n, k)), "H": np.ones((k, m))}, ("L",))
    (F,) = CFG.explore(dag, BS)
    assert sorted(_describe(h) for h in F.values()) == sorted(["W%*%H", "-", "*", "sum"])
    d = next(h for h in F.values() if h.op == "-")
    assert not CFG.is_termination(d, CFG.consumers(dag), BS)
