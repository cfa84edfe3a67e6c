"""Which distributed operator runs a distributed outer-product fused operator (paper 004).

An outer plan (hops.cplan: a sparse X, factors U and V, cell-wise operators on ``U %*% t(V)`` at
X's non-zeros) is a product with operators around it, the case paper 004's operators are for:

* ``bfo``, broadcast: X in one row piece per task (a task per worker thread), U and V sent whole to
  every task (SystemDS's broadcast fused operator);
* ``rfo``, replication: each block of X with U's and V's row panels of that block (each panel goes
  to every task of its block row or column; a full aggregate's blocks run in one task per worker
  thread, as Spark's partitions do: runtime.dask.fused_outer);
* ``cfo``, cuboid: the (i, j, k) product space in P x Q x R cuboids, a task each: X's piece of P x Q,
  U's of P x R, V's of Q x R; with R > 1 the partial products of a piece are added before the
  operators around the product run (cost.cuboid: the model and the search).

``Config.dist_fused`` forces one; "cost" (the default) runs the cuboid operator at the (P, Q, R) the
model chooses under the workers' memory (the BFO and RFO corners are among its points, as
communication). The choice, its estimated bytes, memory per task and cost go on the instruction
(``Instruction.dist``) for ``--explain`` and the runtime.

The cuboid operator also carries the replication corner (I, J, 1) where its tasks fit
(``FusedChoice.corner``, with ``Config.dist_fewest_bytes``), and the runtime takes it when, where the
inputs lie, it moves fewer bytes between workers (runtime.dask.fused_outer.choose). Why: paper 004's
Eq. 4 counts bytes per task, as Spark's shuffle sends them; Dask's workers keep what they fetched
and a task runs where its block of X lies, so at the corner X never moves. On two workers with X
three times U (rank 50, 10500 x 10500), the model's (2, 1, 1), which pastes pieces of X, moved
14.3-14.9 MiB on its first run and the corner 8.0; with U larger than X (rank 200), the model's
point moves less and stays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lafuse import config as cfgmod
from lafuse.hops import cplan as C
from lafuse.hops.sizes import output_bytes, value_bytes
from lafuse.plan.instructions import Instruction

if TYPE_CHECKING:
    from lafuse.cost import cuboid
    from lafuse.plan.exectype import ClusterShape

KINDS = ("bfo", "rfo", "cfo")  # (Config's CHOICES["dist_fused"] adds "cost")


@dataclass(frozen=True)
class FusedChoice:
    """A distributed fused operator's kind and (P, Q, R), with the model's estimates: bytes the
    consolidation moves (``net``; ``shuffle``: the partial products' aggregation, R > 1), memory per
    task and cost (s; inf: no point fits a worker)."""

    kind: str
    pqr: tuple[int, int, int]
    net: float
    shuffle: float
    memory: float
    cost: float
    corner: FusedChoice | None = None  # the replication corner (I, J, 1), for the runtime (module docstring)

    def __str__(self) -> str:
        P, Q, R = self.pqr
        cost = "inf" if math.isinf(self.cost) else f"{self.cost:.3g}s"
        return (f"{self.kind}({P},{Q},{R}) net={self.net / 2**20:.3g}MiB"
                + (f"+{self.shuffle / 2**20:.3g}MiB" if self.shuffle else "")
                + f" mem={self.memory / 2**20:.3g}MiB/task cost={cost}"
                + (" or ({},{},{}) if fewer bytes on the workers".format(*self.corner.pqr) if self.corner else ""))


def model(ins: Instruction, bs: int) -> cuboid.Model | None:
    """The cuboid model of an outer plan's instruction (sizes in bytes, worst case where unknown);
    None for any other instruction or unknown dimensions."""
    from lafuse.cost import cuboid  # deferred: the cost model, only for a distributed outer plan

    if ins.hop.kind == "cuboid":  # (fusion.fuseme: the partial plan's model, from the plan generator)
        return ins.hop.params.get("model")
    plan = ins.cplan
    if plan is None or plan.template != "outer":
        return None
    inputs = ins.reads or ins.hop.inputs
    acc = {int(n.arg): n.access for n in C.postorder(plan) if n.op == "input"}  # type: ignore[call-overload]
    pos = {a: p for p, a in acc.items() if a in (C.MAIN, C.OUTER_U, C.OUTER_V)}
    if len(pos) < 3 or any(inputs[p].rows < 0 or inputs[p].cols < 0 for p in pos.values()):
        return None
    X, U, V = (inputs[pos[a]] for a in (C.MAIN, C.OUTER_U, C.OUTER_V))
    nnz = float(X.nnz if X.nnz >= 0 else X.rows * X.cols)
    left: list[float] = [value_bytes(U)]
    right: list[float] = [value_bytes(V)]
    cells: list[float] = [value_bytes(X)]
    for p, a in acc.items():
        if a in (C.CELL, C.ROWVEC, C.COLVEC):
            cells.append(value_bytes(inputs[p]))
    if plan.mm >= 0:  # RIGHT_MM reads mm's row j with X's column j, LEFT_MM its row i
        (right if plan.agg == C.RIGHT_MM else left).append(value_bytes(inputs[plan.mm]))
    out = value_bytes(ins.hop)
    ops = nnz * sum(1 for n in C.postorder(plan) if n.op not in ("input", "literal", "uv"))

    def blocks(n: int) -> int:
        return max(1, -(-n // bs))

    return cuboid.Model(I=blocks(X.rows), J=blocks(X.cols), K=blocks(U.cols),
                        L=cuboid.Space(inputs=tuple(left)),
                        R=cuboid.Space(inputs=tuple(right), ops=float(V.rows * V.cols)),
                        O=cuboid.Space(inputs=tuple(cells), outputs=(out,), ops=ops),
                        mm_ops=2.0 * nnz * U.cols, mm_out=output_bytes(X.rows, X.cols, int(nnz)))


def choose(ins: Instruction, cluster: ClusterShape) -> FusedChoice | None:
    """The operator of a distributed outer plan (module docstring); None when its shape is unknown
    (the runtime's per-block operator, ``rfo``, then runs)."""
    m = model(ins, cluster.block_size)
    if m is None:
        return None
    from lafuse.cost import cuboid  # deferred: see model
    from lafuse.cost import profile as cost_profile

    forced = cfgmod.get().dist_fused
    cl = cuboid.cluster_of(cost_profile.load(), cluster.workers, cluster.worker_bytes,
                           resident=ins.hop.params.get("resident", 0.0))  # (fusion.fuseme's cuboid HOPs)
    tasks = cl.nodes * cl.tasks_per_node
    if forced == "bfo" and ins.hop.kind == "cuboid":
        # a partial plan of several operators (fusion.fuseme): the longer of the product's result
        # dimensions split over the tasks, the other operand whole to each (SystemDS's broadcast product)
        c = (min(tasks, m.I), 1, 1) if m.I >= m.J else (1, min(tasks, m.J), 1)
        return FusedChoice("bfo", c, cuboid.net_est(c, m), 0.0, cuboid.mem_est(c, m), cuboid.cost(c, m, cl))
    if forced == "bfo":  # (its communication and operations are the model's at the corner (T, T, 1))
        corner = (tasks, tasks, 1)
        return FusedChoice("bfo", (min(tasks, m.I), 1, 1), cuboid.net_est(corner, m), 0.0,
                           cuboid.bfo_memory(m, min(tasks, m.I)), cuboid.cost(corner, m, cl))
    if forced == "rfo":
        c = (m.I, m.J, 1)
        return FusedChoice("rfo", c, cuboid.net_est(c, m), 0.0, cuboid.mem_est(c, m), cuboid.cost(c, m, cl))
    got = cuboid.search(m, cl)
    corner = (m.I, m.J, 1)
    alt = None
    if cfgmod.get().dist_fewest_bytes and got.pqr != corner and cuboid.mem_est(corner, m) <= cl.task_memory:
        alt = FusedChoice("cfo", corner, cuboid.net_est(corner, m), 0.0, cuboid.mem_est(corner, m),
                          cuboid.cost(corner, m, cl))
    return FusedChoice("cfo", got.pqr, got.net, cuboid.aggregation(got.pqr, m), got.memory, got.cost, alt)

