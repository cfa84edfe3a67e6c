"""The cuboid-based fused operator's cost model and (P, Q, R) search (lafuse.cost.cuboid, paper 004
§3.3): the pruned search equals the brute-force minimum, the paper's published optima come out,
and the formulas meet the broadcast and replication operators at their corners."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse.cost import cuboid as cb

# paper 004 §6: 8 workers, 12 tasks each, 10 GB per task, 1 Gbps, 546 GFLOPS; sizes in cells (8 bytes)
PAPER = cb.Cluster(nodes=8, tasks_per_node=12, task_memory=10e9 / 8, net_bw=1e9 / 8 / 8, compute_bw=546e9)

# paper 004 Table 3 and §6.3: X * log(U %*% t(V) + eps), X n x m at density d, U and V of rank k
TABLE3 = [
    # matrices varying two large dimensions: n x 2K x n, density 0.001
    ((100_000, 100_000, 2_000, 0.001), (8, 6, 2)),
    ((250_000, 250_000, 2_000, 0.001), (8, 6, 2)),
    ((500_000, 500_000, 2_000, 0.001), (8, 6, 2)),
    ((750_000, 750_000, 2_000, 0.001), (8, 6, 2)),
    # varying the common dimension: 100K x n x 100K, density 0.2
    ((100_000, 100_000, 2_000, 0.2), (12, 8, 1)),
    ((100_000, 100_000, 5_000, 0.2), (8, 6, 2)),
    ((100_000, 100_000, 10_000, 0.2), (6, 4, 4)),
    ((100_000, 100_000, 50_000, 0.2), (4, 3, 8)),
    # varying the density: 100K x 2K x 100K
    ((100_000, 100_000, 2_000, 0.05), (8, 6, 2)),
    ((100_000, 100_000, 2_000, 0.1), (8, 6, 2)),
    ((100_000, 100_000, 2_000, 0.5), (12, 8, 1)),
    ((100_000, 100_000, 2_000, 1.0), (12, 8, 1)),
    # §6.3: 1M x 5K x 1M
    ((1_000_000, 1_000_000, 5_000, 0.001), (5, 4, 5)),
]


@pytest.mark.parametrize("dims, published", TABLE3, ids=[f"{d[0]}x{d[2]}x{d[1]}@{d[3]}" for d, _ in TABLE3])
def test_the_papers_published_parameters_come_out(dims, published):
    n, m, k, d = dims
    model = cb.outer_loss(n, m, k, d * n * m)
    got = cb.search(model, PAPER)
    assert got.pqr == published
    assert got.memory <= PAPER.task_memory and math.isfinite(got.cost)
    assert cb.brute_force(model, PAPER).pqr == published


def _space(draw, depth: int) -> cb.Space:
    size = st.floats(0, 1e6, allow_nan=False)
    nested = _model(draw, depth - 1) if depth > 0 and draw(st.booleans()) else None
    return cb.Space(inputs=tuple(draw(st.lists(size, max_size=2))), outputs=tuple(draw(st.lists(size, max_size=1))),
                    ops=draw(size), nested=nested)


def _model(draw, depth: int) -> cb.Model:
    dim = st.integers(1, 7)
    return cb.Model(I=draw(dim), J=draw(dim), K=draw(dim), L=_space(draw, depth), R=_space(draw, depth),
                    O=_space(draw, depth), mm_ops=draw(st.floats(0, 1e8)), mm_out=draw(st.floats(0, 1e6)),
                    streamed=draw(st.sampled_from([0.0, 1e4, 1e6])))


@st.composite
def problems(draw) -> tuple[cb.Model, cb.Cluster]:
    """Random shapes (up to 7 x 7 x 7 blocks), sizes and densities (sizes from 0), nested products,
    streamed products (memory not monotone in R), clusters with and without the shuffle in the cost,
    and task memories from ample to impossible."""
    m = _model(draw, 1)
    cl = cb.Cluster(nodes=draw(st.integers(1, 4)), tasks_per_node=draw(st.integers(1, 6)),
                    task_memory=draw(st.sampled_from([0.0, 1e3, 1e4, 1e5, 1e6, math.inf])),
                    net_bw=draw(st.sampled_from([1e3, 1e6, 1e9])), compute_bw=draw(st.sampled_from([1e3, 1e6, 1e9])),
                    shuffle=draw(st.booleans()))
    return m, cl


@settings(max_examples=300, deadline=None)
@given(problems())
def test_the_pruned_search_is_the_brute_force_minimum(problem):
    m, cl = problem
    fast, full = cb.search(m, cl), cb.brute_force(m, cl)
    assert (fast.pqr, fast.cost) == (full.pqr, full.cost)
    assert fast.evaluated <= full.evaluated + 2 * (m.J * m.K + m.K)
    if math.isfinite(fast.cost) and not (m.I * m.J * m.K < cl.nodes * cl.tasks_per_node):
        P, Q, R = fast.pqr
        assert fast.memory <= cl.task_memory and P * Q * R >= cl.nodes * cl.tasks_per_node


def test_the_corners_are_the_broadcast_and_replication_operators():
    """Paper 004 Table 1: communication at (T, T, 1) is BFO's |X| + T (|U| + |V|), at (I, J, 1)
    RFO's |X| + J |U| + I |V|; memory per task follows Eq. 3 (V's term |V| / (Q R))."""
    m = cb.outer_loss(9_000, 7_000, 3_000, 2e5)
    X, U, V = 2e5, 9_000 * 3_000, 7_000 * 3_000
    T = 5
    assert cb.net_est((T, T, 1), m) == pytest.approx(X + T * (U + V))
    assert cb.net_est((m.I, m.J, 1), m) == pytest.approx(X + m.J * U + m.I * V)
    assert cb.net_est((2, 3, 2), m) == pytest.approx(2 * X + 3 * U + 2 * V)
    assert cb.mem_est((2, 3, 2), m) == pytest.approx(U / 4 + V / 6 + 2 * X / 6)
    assert cb.bfo_memory(m, T) == pytest.approx(U + V + 2 * X / T)
    assert cb.aggregation((2, 3, 1), m) == 0 and cb.aggregation((2, 3, 3), m) == pytest.approx(2 * X)


@pytest.mark.parametrize("theta", [2.5e6, 5e6, 1e7, 1e8])
def test_where_broadcast_does_not_fit_the_cuboids_do(theta):
    """BFO is infeasible exactly when its memory exceeds theta_t; the search's choice then fits."""
    m = cb.outer_loss(20_000, 20_000, 500, 4e5)
    cl = cb.Cluster(nodes=2, tasks_per_node=2, task_memory=theta, net_bw=1e8, compute_bw=1e9)
    bfo = cb.bfo_memory(m, cl.nodes * cl.tasks_per_node)
    got = cb.search(m, cl)
    assert bfo == pytest.approx(2.02e7) and (bfo > theta) == (theta < 2e7)
    assert got.memory <= theta and math.isfinite(got.cost)
    if bfo <= theta:  # BFO fits: so does its corner (T, T, 1), a point the choice costs no more than
        assert got.cost <= cb.cost((4, 4, 1), m, cl)


def test_no_point_fits_and_small_spaces():
    m = cb.outer_loss(4_000, 4_000, 2_000, 1e5)
    cl = cb.Cluster(nodes=2, tasks_per_node=2, task_memory=10.0, net_bw=1e8, compute_bw=1e9)
    got = cb.search(m, cl)
    assert got.pqr == (4, 4, 2) and got.cost == cb.INFEASIBLE
    few = cb.Cluster(nodes=8, tasks_per_node=12, task_memory=1e12, net_bw=1e8, compute_bw=1e9)
    assert cb.search(m, few).pqr == (4, 4, 2)  # 32 cells < 96 tasks: every cell its own task


def test_a_nested_product_counts_once_per_replica_of_its_space():
    """A product inside the O-space (GNMF's (t(V) %*% V) %*% U): split as the O-plane, computed whole
    along its inner dimension by each of the R replicas."""
    inner = cb.Model(I=4, J=6, K=1, L=cb.Space(inputs=(100.0,)), R=cb.Space(inputs=(60.0,)),
                     O=cb.Space(outputs=(24.0,), ops=24.0), mm_ops=48.0)
    m = cb.Model(I=4, J=6, K=3, L=cb.Space(inputs=(12.0,)), R=cb.Space(inputs=(18.0,)), O=cb.Space(nested=inner),
                 mm_ops=144.0)
    c = (2, 3, 2)
    assert cb.net_est(c, m) == pytest.approx(3 * 12 + 2 * 18 + 2 * (3 * 100 + 2 * 60))
    assert cb.com_est(c, m) == pytest.approx(144 + 2 * (48 + 24))
    assert cb.mem_est(c, m) == pytest.approx(12 / 4 + 18 / 6 + (100 / 2 + 60 / 3 + 24 / 6))


def test_a_streamed_product_is_a_block_row_at_r_1_and_the_piece_beyond():
    """runtime.dask.fused_mm's R = 1 task computes its piece a block row at a time; with R > 1 the
    partial product of the whole piece is held for the aggregation."""
    m = cb.Model(I=6, J=4, K=3, L=cb.Space(inputs=(60.0,)), R=cb.Space(inputs=(48.0,)), streamed=2400.0)
    assert cb.mem_est((2, 2, 1), m) == pytest.approx(60 / 2 + 48 / 2 + 2400 / (6 * 2))
    assert cb.mem_est((2, 2, 3), m) == pytest.approx(60 / 6 + 48 / 6 + 2400 / (2 * 2))
    assert cb.mem_est((2, 2, 1), m) < cb.mem_est((2, 2, 3), m)  # (not monotone in R)


def test_the_shuffle_breaks_a_tie_the_papers_cost_leaves():
    """GNMF's ``H * (t(W) %*% X) / (t(W) %*% W %*% H)`` (W 4000 x 10, X 4000 x 2000 sparse; the
    O-space reads W again): (1, 2, 1) sends W to both column pieces, (1, 1, 2) the O-space's W to both
    partial products, the same bytes; Eq. 2 alone ties them and its tie-break (the larger R) takes the
    k-split, which moves a partial product more. The cost with the shuffle does not take it."""
    W, X, out = 4000 * 10 * 8.0, 80_000 * 12.0, 10 * 2000 * 8.0
    m = cb.Model(I=1, J=2, K=4, L=cb.Space(inputs=(W,)), R=cb.Space(inputs=(X,)),
                 O=cb.Space(inputs=(W,), outputs=(out,)), mm_ops=2 * 80_000 * 10, mm_out=out)
    paper = cb.Cluster(nodes=2, tasks_per_node=1, task_memory=2**30, net_bw=1e8, compute_bw=1e10)
    ours = cb.Cluster(**{**paper.__dict__, "shuffle": True})
    assert cb.cost((1, 1, 2), m, paper) == cb.cost((1, 2, 1), m, paper)
    assert cb.search(m, paper).pqr == (1, 1, 2)
    assert cb.cost((1, 1, 2), m, ours) > cb.cost((1, 2, 1), m, ours)
    assert cb.search(m, ours).pqr == (1, 2, 1) == cb.brute_force(m, ours).pqr
