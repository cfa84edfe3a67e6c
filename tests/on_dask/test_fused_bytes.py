"""Bytes the distributed outer-product fused operators move between workers against their models
(runtime.dask.fused_outer, paper 004 §3.2):

- one task per worker and the inputs on a worker that runs no task: the workers' own transfer
  counters equal paper 004's formula, R|X| + Q|U| + P|V| plus the aggregation of the R partial
  products, on the blocks' sizes, within 1%;
- any placement (inputs and tasks on random workers): within 5% of the worker-level model (each
  value once to each worker that reads it and does not hold it: Dask's workers keep what they
  fetched);
- tasks left to Dask's scheduler (not pinned): within 20% of the worker-level model at the
  placement the scheduler chose (its task stream: where each task ran).

Each run's result also equals the local one. The cluster is scaled to five workers for these tests
and back to two."""

from __future__ import annotations

import dataclasses
import io
import random

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import run_dml
from lafuse.plan import fusedstrategy
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask import cluster, fused_outer
from lafuse.runtime.dask.backend import DaskBackend
from lafuse.runtime.dask.matrix import Blocked
from tests.on_dask import common

SCRIPT = """
S = rand(rows=240, cols=200, seed=7, sparsity=0.05)
U = rand(rows=240, cols=80, seed=8)
V = rand(rows=200, cols=80, seed=9)
M = rand(rows=200, cols=3, seed=10)
o1 = sum(S * log(U %*% t(V) + 1e-15))
o2 = (S * (U %*% t(V))) %*% M
o4 = S * log(U %*% t(V) + 1)
"""
OUTPUTS = ("o1", "o2", "o4")
BS = 40  # 6 x 5 blocks of S, two k-blocks of U and V


def _cfg(scheduler: str | None = None, **kw) -> cfgmod.Config:
    return common.cfg(scheduler, **{"codegen": True, "fusion": "fuse-all", "block_size": BS, **kw})


@pytest.fixture(scope="module")
def five(dask_cluster):
    """The session's cluster with five workers while this module runs, its active memory manager
    stopped: these tests count what a placement moves, and the manager's ReduceReplicas drops a
    replica a worker fetched while a later task of that worker has still to read it, which then
    fetches it again (the random placement (4, 5, 2) moved 4-5 blocks over its model in 2-3 of 10
    module runs with it on)."""
    from distributed import Client

    with Client(dask_cluster.scheduler_address) as c:
        dask_cluster.scale(5)
        c.wait_for_workers(5, timeout=60)
        c.amm.stop()
        try:
            yield dask_cluster.scheduler_address
        finally:
            c.amm.start()
            dask_cluster.scale(2)
            for _ in range(600):
                if len(cluster.workers(c)) == 2:
                    break
                c.sync(lambda: __import__("asyncio").sleep(0.05))


@pytest.fixture(scope="module")
def local() -> dict:
    return run_dml(SCRIPT, outputs=OUTPUTS, cfg=_cfg(), out=io.StringIO())


def _captured(scheduler: str, monkeypatch, script: str = SCRIPT, outputs: tuple[str, ...] = OUTPUTS) -> list[tuple]:
    """Each outer operator's call (plan, reference, access, main, args, choice) in a Dask run of
    ``script``, its inputs kept alive."""
    calls: list[tuple] = []
    real = fused_outer.run

    def spy(be, plan, ref, acc, main, args, choice, **kw):
        calls.append((plan, ref, acc, main, args, choice))
        return real(be, plan, ref, acc, main, args, choice, **kw)

    monkeypatch.setattr(fused_outer, "run", spy)
    run_dml(script, outputs=outputs, cfg=_cfg(scheduler), out=io.StringIO())
    monkeypatch.setattr(fused_outer, "run", real)
    assert len(calls) == len(outputs)
    return calls


def _moved_to(client, args: tuple, where) -> tuple:
    """``args`` with every distributed input's blocks gathered and scattered again, block (i, j) of
    input ``pos`` to worker ``where(pos, i, j)`` (a scatter moves nothing between workers)."""
    out = []
    for pos, a in enumerate(args):
        if not isinstance(a, Blocked):
            out.append(a)
            continue
        keys = a.grid()
        vals = client.gather([a.blocks[k] for k in keys])
        m = Blocked(a.rows, a.cols, a.bs)
        for k, v in zip(keys, vals):
            m.blocks[k] = client.scatter(v, workers=[where(pos, *k)], hash=False)
        out.append(m)
    return tuple(out)


def _run(be: DaskBackend, call: tuple, args: tuple, choice, layout, pin: bool = True):
    plan, ref, acc, main, _, _ = call
    main = args[next(p for p, a in acc.items() if a == "main")]
    got = fused_outer.measured(be, plan, choice, args,
                               lambda: fused_outer.run(be, plan, ref, acc, main, args, choice, layout, pin))
    _, _, model, moved = be.counters.fused[-1]
    return got, model, moved


def _value(be: DaskBackend, got) -> np.ndarray:
    return common.dense(be.collect(got)) if isinstance(got, Blocked) else np.asarray(got)


@pytest.mark.parametrize("pqr", [(2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (2, 1, 2)])
def test_one_task_per_worker_moves_the_papers_bytes(five, local, monkeypatch, pqr):
    cfg = _cfg(five, stats=True)
    be = DaskBackend(cfg)
    client = be.client()
    workers = sorted(cluster.workers(client))
    holder, others = workers[0], workers[1:]
    call = _captured(five, monkeypatch)[0]  # o1: sum(S * log(U %*% t(V) + 1e-15))
    plan, _, acc, main, args, _ = call
    args = _moved_to(client, args, lambda pos, i, j: holder)
    pos = {a: p for p, a in acc.items()}
    X, U, V = (args[pos[a]] for a in ("main", "outer_u", "outer_v"))
    choice = fusedstrategy.FusedChoice("cfo", pqr, 0.0, 0.0, 0.0, 0.0)
    P, Q, R = (min(n, g) for n, g in zip(pqr, (X.nrb, X.ncb, U.ncb)))
    tasks = [(p, q, r) for p in range(P) for q in range(Q) for r in range(R)]
    layout = dict(zip(tasks, others))
    got, _, moved = _run(be, call, args, choice, layout)

    def size(m: Blocked) -> float:
        return float(sum(client.nbytes([f.key for f in m.blocks.values()], summary=False).values()))

    rc, cc = fused_outer.cuts(X.nrb, P), fused_outer.cuts(X.ncb, Q)
    xs = dict(zip(X.grid(), client.gather([X.blocks[k] for k in X.grid()])))
    from dask.sizeof import sizeof

    # the aggregation: per piece, R - 1 partial products (X's pattern) move to the piece's first task
    partial = sum(sizeof(B.grid(rc[p + 1] - rc[p], cc[q + 1] - cc[q],
                                *[xs[(i, j)] for i in range(rc[p], rc[p + 1]) for j in range(cc[q], cc[q + 1])]))
                  for p in range(P) for q in range(Q))
    paper = R * size(X) + Q * size(U) + P * size(V) + (R - 1) * partial
    assert moved == pytest.approx(paper, rel=0.01), (moved, paper)
    assert float(got) == pytest.approx(float(local["o1"]), rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_any_placement_moves_the_worker_level_models_bytes(five, local, monkeypatch, seed):
    rng = random.Random(seed)
    cfg = _cfg(five, stats=True)
    be = DaskBackend(cfg)
    client = be.client()
    workers = sorted(cluster.workers(client))
    calls = _captured(five, monkeypatch)
    name, call = rng.choice(list(zip(OUTPUTS, calls)))
    plan, _, acc, main, args, _ = call
    args = _moved_to(client, args, lambda pos, i, j: rng.choice(workers))
    U = args[next(p for p, a in acc.items() if a == "outer_u")]
    pqr = (rng.randint(1, main.nrb), rng.randint(1, main.ncb), rng.randint(1, U.ncb))
    choice = fusedstrategy.FusedChoice("cfo", pqr, 0.0, 0.0, 0.0, 0.0)
    P, Q, R = (min(n, g) for n, g in zip(pqr, (main.nrb, main.ncb, U.ncb)))
    layout = {(p, q, r): rng.choice(workers) for p in range(P) for q in range(Q) for r in range(R)}
    got, model, moved = _run(be, call, args, choice, layout)
    assert moved == pytest.approx(model, rel=0.05), (name, pqr, moved, model)
    assert moved > 0, (name, pqr)
    np.testing.assert_allclose(_value(be, got), common.dense(local[name]), rtol=1e-9, equal_nan=True)


@pytest.mark.parametrize("kind,pqr", [("cfo", (2, 1, 1)), ("cfo", (3, 1, 2)), ("rfo", (6, 5, 1)), ("bfo", (2, 1, 1))])
def test_unpinned_tasks_stay_near_the_planned_placements_model(dask_scheduler, local, monkeypatch, kind, pqr):
    """The inputs where the run computed them. Unpinned, a worker may fetch a value twice (a task
    stolen after its inputs were fetched; distributed's memory manager dropping a replica between two
    readers), which no placement explains: the closest of two fresh runs counts (seen once in
    about ten module runs: 26% over the model)."""
    tries = []
    for _ in range(2):
        be = DaskBackend(_cfg(dask_scheduler, stats=True))
        call = _captured(dask_scheduler, monkeypatch)[0]
        plan, _, acc, main, args, _ = call
        choice = fusedstrategy.FusedChoice(kind, pqr, 0.0, 0.0, 0.0, 0.0)
        got, model, moved = _run(be, call, args, choice, None, pin=False)
        assert float(got) == pytest.approx(float(local["o1"]), rel=1e-9)
        tries.append((abs(moved - model) / max(model, 2048.0), moved, model))
        if tries[-1][0] <= 0.20:
            break
    assert min(tries)[0] <= 0.20, (kind, pqr, tries)


# X of 0.3 non-zeros and U, V of 3 columns: X is 15x U, pieces of X cost more than panels of U and V
NARROW = """
S = rand(rows=240, cols=200, seed=7, sparsity=0.3)
U = rand(rows=240, cols=3, seed=8)
V = rand(rows=200, cols=3, seed=9)
o1 = sum(S * log(U %*% t(V) + 1e-15))
"""


@pytest.mark.parametrize("script,wins", [(SCRIPT, "point"), (NARROW, "corner")])
def test_the_point_or_corner_that_moves_fewer_bytes_runs(five, monkeypatch, script, wins):
    """The cuboid operator's point (2, 1, 1) against its replication corner (I, J, 1), X's blocks
    spread over the workers, U and V on one: each alone on fresh copies of the inputs moves what
    fused_outer.moved predicted before it ran (within 5%); given both (``FusedChoice.corner``), the
    one that moves less runs, with U wider than X (SCRIPT) the point, with X the larger (NARROW) the
    corner, and the result is the same."""
    be = DaskBackend(_cfg(five, stats=True))
    client = be.client()
    workers = sorted(cluster.workers(client))
    call = _captured(five, monkeypatch, script, ("o1",))[0]
    plan, ref, acc, main, args, _ = call
    pos = {a: p for p, a in acc.items()}

    def fresh() -> tuple:
        return _moved_to(client, args, lambda p, i, j: workers[(3 * i + j) % len(workers)] if p == pos["main"]
                         else workers[0])

    corner = fusedstrategy.FusedChoice("cfo", (main.nrb, main.ncb, 1), 0.0, 0.0, 0.0, 0.0)
    point = fusedstrategy.FusedChoice("cfo", (2, 1, 1), 0.0, 0.0, 0.0, 0.0)
    alone: dict[str, float] = {}
    values = []
    for name, c in (("point", point), ("corner", corner)):
        xs = fresh()
        grid = fused_outer.Grid(plan, acc, xs[pos["main"]], xs, c)
        read = {t: {f.key for f in grid.reads(t)} for t in grid.tasks}
        ws, known = fused_outer.held(be, set().union(*read.values()))
        layout = fused_outer.assign(grid.replicating, ws, known, grid.anchor, grid.tasks, read)
        got, model, moved = _run(be, call, xs, c, layout)
        assert moved == pytest.approx(fused_outer.moved(layout, read, known), rel=0.05), (name, moved)
        alone[name] = moved
        values.append(float(got))
    assert min(alone, key=alone.__getitem__) == wins and alone["point"] != pytest.approx(alone["corner"], rel=0.2)
    xs = fresh()
    both = dataclasses.replace(point, corner=corner)
    got, sh = fused_outer.run(be, plan, ref, acc, xs[pos["main"]], xs, both)
    assert sh.choice is not None and sh.choice.pqr == (point if wins == "point" else corner).pqr
    values.append(float(got))
    assert values == pytest.approx([values[0]] * 3, rel=1e-12)
    if wins == "corner":  # (at the corner each task runs where its block of X lies)
        holder = {f.key: client.who_has([f])[f.key][0] for f in xs[pos["main"]].blocks.values()}
        assert all(w == holder[k] for _, w, reads in sh.calls for k in reads if k in holder)


def test_default_placement_follows_the_operator(five, monkeypatch):
    """rfo: each block of X read on the worker holding it, a full aggregate's blocks in one task per
    worker thread (a partition, as Spark runs it); cfo: one contiguous run of cuboids per worker,
    distinct workers, the first run on a worker holding the most of what it reads."""
    rng = random.Random(3)
    be = DaskBackend(_cfg(five))
    client = be.client()
    workers = sorted(cluster.workers(client))
    plan, ref, acc, main, args, _ = _captured(five, monkeypatch)[0]
    args = _moved_to(client, args, lambda pos, i, j: rng.choice(workers))
    main = args[next(p for p, a in acc.items() if a == "main")]
    holder = {f.key: w[0] for f in main.blocks.values() for w in [client.who_has([f])[f.key]]}
    rfo = fusedstrategy.FusedChoice("rfo", (main.nrb, main.ncb, 1), 0.0, 0.0, 0.0, 0.0)
    got, sh = fused_outer.run(be, plan, ref, acc, main, args, rfo)
    elsewhere = _moved_to(client, args, lambda pos, i, j: workers[(i * 7 + j) % len(workers)])
    again, _ = fused_outer.run(be, plan, ref, acc, elsewhere[next(p for p, a in acc.items() if a == "main")],
                               elsewhere, rfo)
    assert got == again  # (the blocks' results added in their order, wherever the blocks were)
    tasks = [(w, [k for k in reads if k in holder]) for _, w, reads in sh.calls]
    tasks = [(w, xs) for w, xs in tasks if xs]
    assert sorted(k for _, xs in tasks for k in xs) == sorted(holder)  # (each block once)
    assert all(w == holder[k] for w, xs in tasks for k in xs), tasks
    assert sorted(w for w, _ in tasks) == sorted(set(holder.values()))  # (a thread per worker here)
    cfo = fusedstrategy.FusedChoice("cfo", (3, 2, 1), 0.0, 0.0, 0.0, 0.0)
    _, sh = fused_outer.run(be, plan, ref, acc, main, args, cfo)
    pasted = {key for key, _, reads in sh.calls if set(reads) & set(holder)}  # (X's pieces, pasted)
    seq = [w for _, w, reads in sh.calls if set(reads) & pasted]  # the cuboids' tasks, in (p, q, r) order
    runs = [w for n, w in enumerate(seq) if n == 0 or w != seq[n - 1]]
    assert len(seq) == 6 and len(runs) == len(set(runs)) == min(len(workers), 6), seq


def test_a_loop_pastes_its_pieces_once(five, local, monkeypatch):
    """The second run of an operator on the same matrices reads the pieces the first one pasted
    (DaskBackend.keep_piece); once a matrix is gone, so are its pieces."""
    import gc

    be = DaskBackend(_cfg(five, stats=True))
    client = be.client()
    workers = sorted(cluster.workers(client))
    call = _captured(five, monkeypatch)[0]
    plan, ref, acc, main, args, _ = call
    args = _moved_to(client, args, lambda pos, i, j: workers[(i + j) % len(workers)])
    choice = fusedstrategy.FusedChoice("cfo", (2, 1, 2), 0.0, 0.0, 0.0, 0.0)
    firsts = [_run(be, call, args, choice, None) for _ in range(2)]
    assert [float(g) for g, _, _ in firsts] == pytest.approx([float(local["o1"])] * 2, rel=1e-9)
    # the second run moves only the partial products to their piece's worker (the aggregation)
    assert firsts[1][2] == pytest.approx(firsts[1][1], rel=0.05) and firsts[1][2] < firsts[0][2] / 5, firsts
    raw = {f.key for a in args if isinstance(a, Blocked) for f in a.blocks.values()}
    main = args[next(p for p, a in acc.items() if a == "main")]
    _, sh = fused_outer.run(be, plan, ref, acc, main, args, choice)
    assert sh.calls and not any(set(reads) & raw for _, _, reads in sh.calls)  # (only pieces read)
    kept = {id(a) for a in args if isinstance(a, Blocked)} & set(be._pieces)
    assert kept
    del args, main, sh
    gc.collect()
    assert not kept & set(be._pieces)
