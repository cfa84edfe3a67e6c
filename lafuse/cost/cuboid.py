"""The cuboid-based fused operator's cost model and its (P, Q, R) search (paper 004 §3.3).

A distributed fused operator around a matrix multiplication ``v_mm`` of I x J x K blocks splits its
3-D multiplication space into P x Q x R cuboids, one task each. The operators that feed the product's
left input live in the L-space (the ik-plane, split P x R and replicated to the Q tasks along j),
those that feed its right input in the R-space (jk-plane, split Q x R, replicated P times), those
that consume its output in the O-space (ij-plane, split P x Q, replicated R times, once per partial
product along k). The corners are the operators SystemDS has: (T, T, 1) communicates what the
broadcast one (BFO) does, (I, J, 1) what the replicating one (RFO) does (paper 004 Table 1).

* ``mem_est``: per task, the materialized matrices of each space divided by the space's split
  (Eq. 3, Alg. 1; so V's term is |V| / (Q R), where Table 1 prints R |V| / T), and what the runtime
  computes in the O-space (``Model.streamed``: a block row of the piece at R = 1, all of it at R > 1).
* ``net_est``: the inputs each space reads, times its replication (Eq. 4). Outputs are not sent in
  the consolidation step; the shuffle of the R partial products before the O-space's operators is
  not in the paper's formula and is :func:`aggregation` here.
* ``com_est``: each space's operations times its replication, the product once (Eq. 5).
* ``cost``: max(net / (N Bn), com / (N Bc)) (Eq. 2): communication and computation overlap. With
  ``Cluster.shuffle`` (lafuse's runtime: ``Config.dist_shuffle_cost``) net includes the shuffle;
  without it Eq. 2 chooses a k-split that ties a point moving the same inputs (GNMF's ``t(W) %*% X``
  at (1, 1, 2) against (1, 2, 1)) and then moves R - 1 partial products more.

A space may itself hold a matrix multiplication (Alg. 1 line 3-5): its own model, whose output is
the space's plane (beside the space's other operators and inputs, which count as well). Our reading of the recursion's c': the nested product's output is split as the
plane is (L: P x R, R: Q x R, O: P x Q) and its inner dimension stays whole in a task, so the nested
model runs at (a, b, 1); every replica of the space (Q, P or R of them) reads and computes it again,
so its bytes and operations count once per replica (the per-task memory does not).

The search (:func:`search`) is exact: it returns what :func:`brute_force` returns, the minimum cost
under ``MemEst <= theta_t`` over 1 <= P <= I, 1 <= Q <= J, 1 <= R <= K with P Q R >= N Tc (every
core busy; all of (I, J, K) when the space has fewer cells), ties broken by the smallest P Q R, then
the largest R, then the largest P (the order that reproduces paper 004 Table 3). It prunes as
§3.3 does, by monotonicity: every term of net and com (the shuffle too) grows with P, Q and R, so
once (P, Q, R) costs more than the best feasible point, so does every point beyond it along P; once
(1, Q, R) does, every point with a larger Q; once (1, 1, R) does, every larger R. For each (Q, R)
the first feasible P is the only one that can win: a larger P costs no less and ties lose to the
smaller P Q R. None of this needs memory to be monotone (the streamed term is not, in R).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lafuse import config
from lafuse.cost.constants import TASK_MEMORY_FRACTION, WORKER_BASELINE_BYTES

if TYPE_CHECKING:
    from lafuse.cost.profile import HardwareProfile

INFEASIBLE = math.inf


@dataclass(frozen=True)
class Space:
    """One of the L-, R- or O-spaces of a fused operator: the matrices it reads from outside
    (``inputs``, sizes), the other matrices it materializes in a task (``outputs``, sizes: the fused
    operator's result in the O-space), the floating point operations of its operators (``ops``), and
    a matrix multiplication of its own (``nested``: its model, whose output is the space's plane).
    Alg. 1 has a space hold either a product or plain operators; a plan generator's space may hold
    both (the O-space of GNMF's ``U * (t(V) %*% X) / (G %*% U)`` reads U beside the product
    ``G %*% U``), so both count."""

    inputs: tuple[float, ...] = ()
    outputs: tuple[float, ...] = ()
    ops: float = 0.0
    nested: Model | None = None


@dataclass(frozen=True)
class Model:
    """A fused operator around its main product ``v_mm`` of ``I x J x K`` blocks (sizes in any one
    unit: bytes, or cells as paper 004's Table 3 counts them, non-zeros for a sparse matrix).
    ``mm_ops``: the product's operations; ``mm_out``: the size of one partial product over the whole
    ij-plane (a sparsity-exploiting product: X's non-zeros), moved R - 1 times by :func:`aggregation`.
    ``streamed``: the sizes, over the whole ij-plane, of what a task computes there beyond paper 004's
    materialized matrices (the main product's value, which Alg. 1 does not count): a task with R = 1
    holds one block row of its piece at a time (runtime.dask.fused_mm), one with R > 1 the whole piece
    (its partial product is summed before the O-space runs). 0 in the paper's models."""

    I: int  # noqa: E741 - the paper's name
    J: int
    K: int
    L: Space = field(default_factory=Space)
    R: Space = field(default_factory=Space)
    O: Space = field(default_factory=Space)  # noqa: E741 - the paper's name
    mm_ops: float = 0.0
    mm_out: float = 0.0
    streamed: float = 0.0


@dataclass(frozen=True)
class Cluster:
    """What the search needs of the cluster: ``nodes`` (N), ``tasks_per_node`` (Tc), the memory of one
    task (theta_t, in the model's size unit), the network and compute bandwidth of one node (Bn in
    size units/s, Bc in operations/s). ``shuffle``: the cost counts the R partial products' shuffle
    (:func:`aggregation`) with the consolidation's bytes; off, it is paper 004's Eq. 2 exactly."""

    nodes: int
    tasks_per_node: int
    task_memory: float
    net_bw: float
    compute_bw: float
    shuffle: bool = False


def cluster_of(prof: HardwareProfile, workers: int, worker_bytes: float, threads: int = 1,
               resident: float = 0.0) -> Cluster:
    """The cluster a search plans for, in bytes: ``workers`` nodes of ``threads`` tasks sharing
    TASK_MEMORY_FRACTION of a worker's memory beyond its process's own (WORKER_BASELINE_BYTES) and
    its share of ``resident``, the data the cluster holds meanwhile (at least a quarter of the limit
    is left: beyond that the worker spills), the profile's worker-to-worker bandwidth (``lafuse
    calibrate``) and its BLAS rate per core times the threads; the partial products' shuffle counted
    as ``Config.dist_shuffle_cost`` says (:class:`Cluster`)."""
    per_core = prof.blas_flops / max(1, prof.threads)
    usable = max(worker_bytes - WORKER_BASELINE_BYTES - resident / max(1, workers), worker_bytes / 4)
    return Cluster(nodes=max(1, workers), tasks_per_node=max(1, threads),
                   task_memory=TASK_MEMORY_FRACTION * usable / max(1, threads),
                   net_bw=prof.net_bw, compute_bw=per_core * max(1, threads),
                   shuffle=config.get().dist_shuffle_cost)


@dataclass(frozen=True)
class Choice:
    """The chosen (P, Q, R), its cost (s; ``INFEASIBLE`` when no point fits the task memory), its
    memory per task and communication, and how many points the search costed."""

    pqr: tuple[int, int, int]
    cost: float
    memory: float
    net: float
    evaluated: int


Cuboid = tuple[int, int, int]


def _spaces(c: Cuboid, m: Model) -> Iterator[tuple[Space, tuple[int, int], int]]:
    """Each space with its split (rows, columns of its plane) and its replication."""
    P, Q, R = c
    yield m.L, (P, R), Q
    yield m.R, (Q, R), P
    yield m.O, (P, Q), R


def mem_est(c: Cuboid, m: Model) -> float:
    """Memory of one task (Alg. 1, Eq. 3), and what it computes in the O-space (``Model.streamed``)."""
    P, Q, R = c
    total = m.streamed / ((m.I if R == 1 else P) * Q)
    for s, (a, b), _rep in _spaces(c, m):
        if s.nested is not None:
            total += mem_est((a, b, 1), s.nested)
        total += (sum(s.inputs) + sum(s.outputs)) / (a * b)
    return total


def net_est(c: Cuboid, m: Model) -> float:
    """Bytes (size units) the consolidation step moves (Eq. 4)."""
    total = 0.0
    for s, (a, b), rep in _spaces(c, m):
        if s.nested is not None:
            total += rep * net_est((a, b, 1), s.nested)
        total += rep * sum(s.inputs)
    return total


def com_est(c: Cuboid, m: Model) -> float:
    """Operations of all tasks together (Eq. 5)."""
    total = m.mm_ops
    for s, (a, b), rep in _spaces(c, m):
        total += rep * ((com_est((a, b, 1), s.nested) if s.nested is not None else 0.0) + s.ops)
    return total


def cost(c: Cuboid, m: Model, cl: Cluster) -> float:
    """Eq. 2: the larger of communication and computation time over the cluster (s); with
    ``cl.shuffle`` the communication includes the partial products' shuffle."""
    net = net_est(c, m) + (aggregation(c, m) if cl.shuffle else 0.0)
    return max(net / (cl.nodes * cl.net_bw), com_est(c, m) / (cl.nodes * cl.compute_bw))


def aggregation(c: Cuboid, m: Model) -> float:
    """The R partial products of each output piece meet in one task before the O-space's operators:
    R - 1 of them move (not in the paper's NetEst; add it when comparing with measured bytes)."""
    return (c[2] - 1) * m.mm_out


def _key(cst: float, c: Cuboid) -> tuple[float, int, int, int]:
    P, Q, R = c
    return (cst, P * Q * R, -R, -P)


def _whole(m: Model, cl: Cluster, evaluated: int) -> Choice:
    c = (m.I, m.J, m.K)
    mem = mem_est(c, m)
    return Choice(c, cost(c, m, cl) if mem <= cl.task_memory else INFEASIBLE, mem, net_est(c, m), evaluated)


def _few_cells(m: Model, cl: Cluster) -> bool:
    return m.I * m.J * m.K < cl.nodes * cl.tasks_per_node


def brute_force(m: Model, cl: Cluster) -> Choice:
    """Every (P, Q, R): the definition :func:`search` must meet (tests, benchmarks)."""
    if _few_cells(m, cl):
        return _whole(m, cl, 1)
    need = cl.nodes * cl.tasks_per_node
    best: tuple[tuple[float, int, int, int], Cuboid] | None = None
    n = 0
    for R in range(1, m.K + 1):
        for Q in range(1, m.J + 1):
            for P in range(1, m.I + 1):
                if P * Q * R < need:
                    continue
                n += 1
                c = (P, Q, R)
                if mem_est(c, m) > cl.task_memory:
                    continue
                k = _key(cost(c, m, cl), c)
                if best is None or k < best[0]:
                    best = (k, c)
    return _chosen(best, m, cl, n)


def _chosen(best: tuple[tuple[float, int, int, int], Cuboid] | None, m: Model, cl: Cluster, n: int) -> Choice:
    if best is None:
        return _whole(m, cl, n)
    c = best[1]
    return Choice(c, best[0][0], mem_est(c, m), net_est(c, m), n)


def search(m: Model, cl: Cluster) -> Choice:
    """The cheapest (P, Q, R) whose tasks fit ``cl.task_memory``, pruned (module docstring); with no
    such point, (I, J, K) at ``INFEASIBLE`` cost."""
    if _few_cells(m, cl):
        return _whole(m, cl, 1)
    need = cl.nodes * cl.tasks_per_node
    best: tuple[tuple[float, int, int, int], Cuboid] | None = None
    n = 0

    def over(c: Cuboid) -> bool:  # costs more than the best feasible point: so does all beyond it
        nonlocal n
        n += 1
        return best is not None and cost(c, m, cl) > best[0][0]

    for R in range(1, m.K + 1):
        if over((1, 1, R)):
            break
        for Q in range(1, m.J + 1):
            if over((1, Q, R)):
                break
            for P in range(max(1, -(-need // (Q * R))), m.I + 1):
                c = (P, Q, R)
                n += 1
                cst = cost(c, m, cl)
                if best is not None and cst > best[0][0]:
                    break
                if mem_est(c, m) <= cl.task_memory:  # the first that fits: a larger P costs no less
                    k = _key(cst, c)
                    if best is None or k < best[0]:
                        best = (k, c)
                    break
    return _chosen(best, m, cl, n)


def bfo_memory(m: Model, tasks: int) -> float:
    """Memory of one task of the broadcast operator: all of the L- and R-spaces' matrices, the
    O-space's share (paper 004 Table 1: |X| / T + |U| + |V| + |O| / T)."""
    def share(s: Space, parts: int) -> float:
        nested = mem_est((parts, 1, 1), s.nested) if s.nested is not None else 0.0
        return nested + (sum(s.inputs) + sum(s.outputs)) / parts

    return share(m.L, 1) + share(m.R, 1) + share(m.O, tasks)


def outer_loss(rows: int, cols: int, rank: int, nnz: float, block: int = 1000) -> Model:
    """``X * log(U %*% t(V) + eps)`` (paper 004 §6.2), X ``rows x cols`` with ``nnz`` non-zeros, U and V
    dense of ``rank`` columns, sizes in cells (non-zeros for X and the result, as Table 3 counts):
    U in the L-space, V (and its transpose) in the R-space, X, the cell-wise operators and the
    result in the O-space; the product sampled at X's non-zeros."""
    def blocks(n: int) -> int:
        return max(1, -(-n // block))

    return Model(I=blocks(rows), J=blocks(cols), K=blocks(rank),
                 L=Space(inputs=(float(rows * rank),)),
                 R=Space(inputs=(float(cols * rank),), ops=float(cols * rank)),
                 O=Space(inputs=(float(nnz),), outputs=(float(nnz),), ops=3.0 * nnz),
                 mm_ops=2.0 * nnz * rank, mm_out=float(nnz))
