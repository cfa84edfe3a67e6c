"""FuseME's partial plans as operators (fusion.fuseme, hops.mmplan, runtime.local.mmeval): what a
partial plan becomes (its spaces, inputs and result), what stays with the templates and why, the
regions a cuboid's task reads, and the operator's nodes evaluated whole equal to NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lafuse.cost import cuboid as cb
from lafuse.fusion import cfg as CFG
from lafuse.fusion import fuseme
from lafuse.hops import mmplan as M
from lafuse.hops import sizes
from lafuse.runtime.local import mmeval
from tests.fusion.test_cfg import GNMF, _dag

BS = 1000
CLUSTER = cb.Cluster(nodes=2, tasks_per_node=1, task_memory=2**30, net_bw=1e8, compute_bw=1e10)
BACKPROP = """
for (i in 1:2) {
  D3 = (D4 %*% t(W4)) * A3
  D2 = (D3 %*% t(W3)) * A2
  W1 = W1 - 0.1 * (t(X) %*% D2)
}
"""


@pytest.fixture(scope="module")
def gnmf():
    n, m, k = 3000, 2500, 20
    X = sp.random_array((n, m), density=0.01, random_state=1, format="csr")
    rng = np.random.default_rng(0)
    return _dag(GNMF, {"X": X, "V": rng.random((n, k)) + 0.5, "U": rng.random((k, m)) + 0.5}, ("U", "V"))


def _operators(dag):
    cons, roots = CFG.consumers(dag), {r.id for r in dag.roots}
    return [(p, fuseme.operator(p, cons, roots)) for p in CFG.plan(dag, BS, CLUSTER)]


def test_gnmf_update_chains_become_operators_with_their_gram_product_an_input(gnmf):
    made = [(p, got) for p, got in _operators(gnmf) if len(p.ops) > 1]
    assert len(made) == 2
    for _part, got in made:
        assert not isinstance(got, str), got
        plan, inputs, top = got
        assert plan.nodes[plan.out].op == "/" and top.op == "/"
        main = plan.nodes[plan.main]
        assert main.op == "%*%" and not plan.left and not plan.right  # both operands read from outside
        assert sorted(plan.nodes[k].op for k in plan.rest) == ["%*%", "*", "/"]  # G %*% U nested in O
        assert plan.dependents == {k for k in plan.rest if plan.nodes[k].op in ("*", "/")}
        assert len(inputs) == 4 and M.check(plan) is None  # X, t(V) or t(U), the factor, the Gram product


def test_a_product_reading_the_main_products_values_stays_with_the_templates():
    rng = np.random.default_rng(2)
    n, m, h1, h2 = 3000, 2000, 40, 30
    dag = _dag(BACKPROP, {"X": rng.random((n, m)), "D4": rng.random((n, m)), "W4": rng.random((h1, m)),
                          "W3": rng.random((h2, h1)), "A3": rng.random((n, h1)), "A2": rng.random((n, h2)),
                          "W1": rng.random((m, h2))}, ("W1",))
    reasons = [got for p, got in _operators(dag) if isinstance(got, str)]
    assert reasons == ["a product reads the main product's values (its whole inner dimension)"]


def test_a_block_that_stays_local_is_not_changed(gnmf):
    assert fuseme.apply(gnmf, "local", BS, 2, 2.0**30, 4) is gnmf
    assert fuseme.apply(gnmf, "auto", BS, 2, 2.0**30, 4, budget=2.0**40) is gnmf  # everything fits
    changed = fuseme.apply(gnmf, "dask", BS, 2, 2.0**30, 4)
    assert changed is not gnmf and sum(h.kind == "cuboid" for h in changed.hops()) == 2
    assert not any(h.kind == "cuboid" for h in gnmf.hops())  # (a copy was changed)
    # what the workers hold beside the operators' tasks: the block's distributed inputs X, V and U
    # (the cluster plans a task's memory without them; plan.fusedstrategy reads it from the HOP)
    reads = {h.name: h for h in gnmf.hops() if h.op == "tread" and h.name in ("X", "V", "U")}
    held = [h.params["resident"] for h in changed.hops() if h.kind == "cuboid"]
    assert held[0] == held[1] == pytest.approx(sum(sizes.output_bytes(h.rows, h.cols, h.nnz) for h in reads.values()))
    assert fuseme._resident(gnmf, 10**9, {}) == 0.0  # (under the minimum: stays local, not held)


def test_the_regions_a_cuboid_reads():
    """GNMF's ``U * (t(V) %*% X) / (G %*% U)`` at 2 x 3 x 4 blocks: the cuboid (rows 0:1, columns
    1:2, inner 2:4) reads t(V)'s rows 0:1 x inner, X's inner x columns; its O-space reads U's piece,
    G's rows whole (the nested product's left operand) and U's columns of the piece."""
    k, n, m = 2 * BS, 4 * BS, 3 * BS
    nodes = (M.Node("%*%", "matmult", (-1, -2), k, m), M.Node("*", "binary", (-3, 0), k, m),
             M.Node("%*%", "matmult", (-4, -3), k, m), M.Node("/", "binary", (1, 2), k, m))
    plan = M.MMPlan(nodes, 0, frozenset(), frozenset(), frozenset({1, 2, 3}), 3,
                    ((k, n, "matrix"), (n, m, "matrix"), (k, m, "matrix"), (k, k, "matrix")))
    left, right = M.cuboid_regions(plan, BS, (0, 1), (1, 2), (2, 4))
    assert left == {-1: (0, 1, 2, 4)} and right == {-2: (2, 4, 1, 2)}
    rest = M.rest_regions(plan, BS, (0, 1), (1, 2))
    assert rest[-3] == (0, 2, 1, 2)  # U: its piece (rows 0:1) and, for G %*% U, every row: the union
    assert rest[-4] == (0, 1, 0, 2) and rest[3] == (0, 1, 1, 2)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_operator_evaluated_whole_equals_numpy(gnmf, sparse):
    part, got = next((p, g) for p, g in _operators(gnmf) if len(p.ops) > 1)
    assert not isinstance(got, str)
    plan, inputs, _ = got
    rng = np.random.default_rng(3)
    vals = []
    for r, c, _dt in plan.inputs:
        a = rng.random((r, c)) + 0.5
        vals.append(sp.random_array((r, c), density=0.02, random_state=4, format="csr")
                    if sparse and (r, c) == (3000, 2500) else a)
    env = {-1 - p: v for p, v in enumerate(vals)}

    def dense(v):
        return v.toarray() if sp.issparse(v) else np.asarray(v)

    for k, n in enumerate(plan.nodes):  # NumPy, node by node
        a = [dense(env[x]) for x in n.args]
        env[k] = {"%*%": lambda a: a[0] @ a[1], "*": lambda a: a[0] * a[1], "/": lambda a: a[0] / a[1]}[n.op](a)
    want = env[plan.out]
    np.testing.assert_allclose(mmeval.whole(plan, BS, tuple(vals)), want, rtol=1e-12)
