"""FuseME's partial plans as operators of the DAG (paper 004 §4): where a block runs on the cluster,
each partial plan of the plan generator (fusion.cfg) that covers a distributed product and other
operators becomes one ``cuboid`` HOP. It reads the plan's inputs, computes its result, and carries
the plan as data (hops.mmplan) and the cuboid model. plan.fusedstrategy then picks its operator and
(P, Q, R), and runtime.dask.fused_mm runs it.

This runs before the template fusion (fusion.optimize) and on its own copy of the DAG. What it
leaves, the templates fuse as before, and a block that stays local is not changed at all. Why first:
once the templates cut GNMF's ``U * (t(V) %*% X) / (G %*% U)`` into a row operator beside the
product, no operator covers both any more, and the product's replication is what a cluster pays
for (paper 004 §1).

A partial plan stays to the templates when:

* it is products and transposes alone (nothing around them to fuse; a distributed product reads a
  transpose in place, and the templates may still fuse the product with its neighbours);
* it has more than one result read outside it;
* hops.mmplan cannot run it (mmplan.check says why);
* its product is an outer product masked by a matrix that may be sparse: the outer template
  exploits the sparsity, and runtime.dask.fused_outer runs it with the same three operators;
* under ``auto``, it covers a squared loss or a sampled sum that plan.build keeps here (one local
  instruction that never holds the product);
* its product would not go to the cluster (``--exec dask``: fewer cells than the minimum;
  ``auto``: it fits the local budget).
"""

from __future__ import annotations

import dataclasses

from lafuse import memory
from lafuse.cost import cuboid
from lafuse.formats import SPARSITY_TURN_POINT
from lafuse.fusion import cfg as CFG
from lafuse.fusion.templates import outer_like
from lafuse.hops import mmplan as M
from lafuse.hops import patterns, sizes
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.program import Dag, copy_dag, walk
from lafuse.hops.sizes import value_bytes

OP = "cuboid"  # the HOP's op and kind


def apply(dag: Dag, exec_mode: str, block: int, workers: int, worker_bytes: float, min_cells: int,
          budget: float | None = None) -> Dag:
    """``dag`` with a ``cuboid`` HOP for each partial plan that runs on the cluster (module docstring);
    ``dag`` itself when there is none (it is not modified either way)."""
    if exec_mode == "local" or not any(h.kind == "matmult" for h in dag.hops()):
        return dag
    from lafuse.cost import profile  # deferred: the hardware profile, only for a block with products

    new = copy_dag(dag)
    cons = CFG.consumers(new)
    roots = {r.id for r in new.roots}
    bounds: dict[int, float] = {}
    for h in new.hops():
        bounds[h.id] = sizes.nnz_bound(h, bounds)
    resident = _resident(new, min_cells, bounds)
    cl = cuboid.cluster_of(profile.load(), workers, worker_bytes, resident=resident)
    limit = memory.budget_bytes() if budget is None else budget
    local = _kept_local(new, cons, exec_mode, limit, bounds)
    repl: dict[int, Hop] = {}
    for part in CFG.plan(new, block, cl):
        if all(h.kind == "matmult" or h.op == "t" for h in part.ops.values()) or local & set(part.ops) or \
                not _distributed(part.main, exec_mode, limit, min_cells, bounds):
            continue
        got = operator(part, cons, roots)
        if isinstance(got, str):
            continue
        plan, inputs, top = got
        if outer_like(part.main) and _sparse_masked(plan, inputs):
            continue
        h = Hop(OP, OP, inputs, top.dt, top.vt, top.span,
                params={"mmplan": plan, "model": _materialized(CFG.model(part.ops, part.main, block, cons), part),
                        "covers": sorted(part.ops), "resident": resident})
        h.copy_dims(top)
        repl[top.id] = h
    if not repl:
        return dag
    for h in [*walk(new.roots), *repl.values()]:  # (an operator's input may be another one's result)
        h.inputs = [repl.get(i.id, i) for i in h.inputs]
    new.roots = [repl.get(r.id, r) for r in new.roots]
    return new


def _materialized(m: cuboid.Model, part: CFG.Partial) -> cuboid.Model:
    """The model with what a task of runtime.dask.fused_mm holds beyond paper 004's inputs and
    results: the main product's value (``streamed``: its whole piece with R > 1, a block row of it
    with R = 1), and A's and B's pieces where the L- and R-spaces compute them. Without the product,
    a dense ``W %*% H`` inside ``sum((X - W %*% H)^2)`` ran out of the workers' memory at the (P, Q, R)
    chosen for the operator's inputs alone; counted whole at R = 1 too, it sent GNMF's loss to 12
    tasks where the broadcast's 2 fit."""
    a, b = part.main.inputs
    return dataclasses.replace(
        m, streamed=m.streamed + value_bytes(part.main),
        L=dataclasses.replace(m.L, outputs=(*m.L.outputs, value_bytes(a))) if a.id in part.ops else m.L,
        R=dataclasses.replace(m.R, outputs=(*m.R.outputs, value_bytes(b))) if b.id in part.ops else m.R)


def _resident(dag: Dag, min_cells: int, bounds: dict[int, float]) -> float:
    """Bytes of the block's distributed inputs (matrices read from outside it, of at least
    ``min_cells`` cells): what the workers hold while its operators run, beside their tasks. An
    autoencoder's 320 MB X on two 384 MiB workers left a task a quarter of what the limit alone
    suggests; tasks planned against the limit alone kept the workers pausing and restarting."""
    return float(sum(sizes.bounded_bytes(h, bounds)
                     for h in dag.hops() if not h.inputs and h.dt == MATRIX and h.rows >= 0 and h.cols >= 0
                     and float(h.rows) * h.cols >= min_cells))


def _kept_local(dag: Dag, users: dict[int, list[Hop]], exec_mode: str, budget: float, bounds: dict[int, float]
                ) -> set[int]:
    """The operators of the squared losses and sampled sums plan.build keeps here under ``auto``
    (their operands fit the budget): one local instruction each, which never holds the product
    whole; a cuboid operator would send it to the cluster and compute the product."""
    if exec_mode != "auto":
        return set()
    order = dag.hops()
    folded = patterns.foldable_transposes(order, users, dag)
    out: set[int] = set()
    for found in (patterns.squared_losses(order, users, dag, folded), patterns.sampled_sums(order, users, dag, folded)):
        for key, p in found.items():
            operands = {h.id: h for h in (p.x, p.u, p.v)}.values()
            if sum(sizes.bounded_bytes(h, bounds) for h in operands) <= budget:
                out |= {key, *p.absorbed}
    return out


def _distributed(main: Hop, exec_mode: str, budget: float, min_cells: int, bounds: dict[int, float]) -> bool:
    """Whether the product would run on the cluster (plan.exectype's rule for it)."""
    mats = [main, *main.inputs]
    if any(h.rows < 0 or h.cols < 0 for h in mats):
        return False
    if exec_mode == "dask":
        return max(float(h.rows) * h.cols for h in mats) >= min_cells
    need = sum(sizes.bounded_bytes(h, bounds) for h in mats)
    return need > budget


def operator(part: CFG.Partial, cons: dict[int, list[Hop]], roots: set[int]
             ) -> tuple[M.MMPlan, list[Hop], Hop] | str:
    """The plan of a partial plan, its inputs and the HOP whose value it computes; or why none."""
    ops = part.ops
    results = [h for h in ops.values()
               if h.id in roots or any(c.id not in ops for c in cons.get(h.id, ()))]
    if len(results) != 1:
        return f"{len(results)} results"
    top = results[0]
    order = [h for h in walk([top]) if h.id in ops]
    if len(order) != len(ops):
        return "an operator that does not feed the result"
    index = {h.id: k for k, h in enumerate(order)}
    inputs: list[Hop] = []
    where: dict[int, int] = {}

    def ref(h: Hop) -> int:
        if h.id in index:
            return index[h.id]
        if h.id not in where:
            where[h.id] = len(inputs)
            inputs.append(h)
        return -1 - where[h.id]

    nodes = tuple(M.Node(h.op, h.kind, tuple(ref(i) for i in h.inputs), h.rows, h.cols, h.dt,
                         tuple(h.params["slots"]) if h.params.get("slots") else None) for h in order)
    left = {index[k] for k in CFG._feeding(part.main.inputs[0], ops)}
    right = {index[k] for k in CFG._feeding(part.main.inputs[1], ops)}
    main = index[part.main.id]
    rest = frozenset(range(len(order))) - left - right - {main}
    plan = M.MMPlan(nodes, main, frozenset(left), frozenset(right), rest, index[top.id],
                    tuple((h.rows, h.cols, h.dt) for h in inputs))
    if top.op in M.AGGREGATES and index[top.id] in plan.dependents:
        plan = dataclasses.replace(plan, agg=M.AGGREGATES[top.op])
    why = M.check(plan)
    return why if why is not None else (plan, inputs, top)


def _sparse_masked(plan: M.MMPlan, inputs: list[Hop]) -> bool:
    """A cell-wise product of the main product's values with an input of its shape that may be
    sparse (the outer template's driver, whose zeros it skips)."""
    m = plan.nodes[plan.main]
    dep = plan.dependents | {plan.main}
    for k in dep:
        n = plan.nodes[k]
        if n.op == "*" and any(a < 0 and plan.dims(a)[:2] == (m.rows, m.cols) and _may_be_sparse(inputs[-1 - a])
                               for a in n.args):
            return True
    return False


def _may_be_sparse(h: Hop) -> bool:
    """Known sparse; or of unknown non-zeros and not computed cell-wise or by a product (data read or
    generated, an indexing result): a sigmoid's or a product's result is dense."""
    if h.nnz >= 0:
        return h.nnz < SPARSITY_TURN_POINT * max(1.0, float(h.rows) * h.cols)
    return h.kind not in ("binary", "unary", "ternary", "nary", "matmult", "spoof", OP)

