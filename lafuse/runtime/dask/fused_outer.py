"""The broadcast, replicating and cuboid operators of a distributed outer plan (plan.fusedstrategy,
paper 004 §3.2): the same generated kernel as every other distributed fused operator, run on pieces
of X. The replicating operator's pieces are X's blocks; a full aggregate runs them in one task per
worker thread over the blocks the worker holds (:func:`_partitions`, as Spark's partitions do).

A piece (p, q) is X's block rows of group p and block columns of group q, pasted into one matrix
(sparse stays sparse); its task reads U's rows of group p and V's rows of group q (the cuboid
operator: only the columns of its k-group r; the broadcast operator: U and V whole, each task
taking its rows), the cell-aligned inputs' piece, the vectors' rows or columns. With R > 1 the
piece's R tasks compute the product alone at X's non-zeros over their k-group
(hops.cplan.split_outer), their partial products are added (the aggregation step), and one more
task runs the rest of the plan on the sum. Results: a block of X's grid cut from its piece, partial
sums added in a fixed order (pieces, then k-groups), so a value never depends on scheduling.

Placement (:func:`place`) decides the bytes: Dask's workers keep what they fetched, so a value moves
once to each worker that reads it, not once per task as on Spark, where paper 004 counts. The tasks
are pinned to the workers the operator chose, the pieces pasted where they are read, the partial
products added on their piece's worker; what moves is then the worker-level model
(:meth:`Pieces.model`), and with one task per worker and inputs elsewhere the paper's formula.
``--stats`` prints both estimates beside the bytes the workers counted.

That model also decides between the cuboid operator's point and its replication corner (I, J, 1),
which the plan carries (``FusedChoice.corner``): before the first run on its inputs, both are placed
where the inputs lie now and the one that moves fewer bytes runs (:func:`choose`). At the corner a
task runs where its block of X lies, so X never moves; paper 004's per-task count cannot see that.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.hops import cplan as C
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask import monitor
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.dask.ops import tree

if TYPE_CHECKING:
    from lafuse.plan.fusedstrategy import FusedChoice
    from lafuse.runtime.dask.backend import DaskBackend


def cuts(n: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` near-equal groups of ``n`` blocks (at most ``n`` groups)."""
    parts = max(1, min(parts, n))
    return [n * p // parts for p in range(parts + 1)]


Task = tuple[int, int, int]  # (p, q, r): a cuboid of the (i, j, k) product space


def blocks_in(x: Any, i0: int, i1: int, j0: int, j1: int) -> list[Any]:
    """The futures of ``x``'s block rows i0:i1 and columns j0:j1, row by row (none: not distributed)."""
    return [x.blocks[(i, j)] for i in range(i0, i1) for j in range(j0, j1)] if isinstance(x, Blocked) else []


class Pieces:
    """Pasted pieces of distributed matrices (a cuboid's, a row panel, a whole side input), each
    assembled by one task and shared by the tasks that read it; a small one kept while the matrix
    lives (``DaskBackend.keep_piece``: a loop pastes it once); sparse blocks stay sparse.

    With ``pin``, a piece is pasted on the worker of the task that reads it and every task goes to the
    worker it is given (a loose restriction: another worker if that one is gone), so the bytes that
    move are the ones the placement implies. Each submission is recorded (its key, the worker it is
    meant for, the keys it reads): the worker-level model's data (:meth:`model`)."""

    def __init__(self, be: DaskBackend, pin: bool = False) -> None:
        self.be = be
        self.pin = pin
        self.calls: list[tuple[Any, str | None, tuple[Any, ...]]] = []
        self.memo: dict[tuple[int, Any], Any] = {}  # pieces not kept (DaskBackend.keep_piece): this run's
        self.sizes: dict[Any, float] = {}  # bytes of blocks, where the scheduler said (place)
        self.choice: FusedChoice | None = None  # the operator and point that ran (fused_outer.choose)

    def submit(self, worker: str | None, fn: Callable[..., Any], *args: Any) -> Any:
        kw: dict[str, Any] = {"workers": [worker], "allow_other_workers": True} if self.pin and worker else {}
        f = self.be.submit(fn, *args, **kw)
        self.calls.append((f.key, worker, tuple(a.key for a in args if hasattr(a, "key"))))
        return f

    def at(self, worker: str | None) -> _At:
        return _At(self, worker)

    def get(self, x: Any, i0: int, i1: int, j0: int, j1: int, worker: str | None = None) -> Any:
        """Block rows i0:i1 and columns j0:j1 of ``x`` (not distributed: ``x`` itself)."""
        if not isinstance(x, Blocked):
            return x
        if i1 - i0 == 1 and j1 - j0 == 1:
            return x.blocks[(i0, j0)]
        key = (i0, i1, j0, j1, worker if self.pin else None)
        got = self.be.kept_piece(x, key)
        if got is not None:
            return got
        if (id(x), key) not in self.memo:
            grid = blocks_in(x, i0, i1, j0, j1)
            f = self.submit(worker, B.grid, i1 - i0, j1 - j0, *grid)
            if all(b.key in self.sizes for b in grid):
                nbytes = sum(self.sizes[b.key] for b in grid)
            else:  # (dense: an upper bound)
                nbytes = 8.0 * (min(x.rows, i1 * x.bs) - i0 * x.bs) * (min(x.cols, j1 * x.bs) - j0 * x.bs)
            if self.be.keep_piece(x, key, f, worker, nbytes):
                return f
            self.memo[(id(x), key)] = f
        return self.memo[(id(x), key)]

    def rows(self, x: Any, i0: int, i1: int, worker: str | None = None) -> Any:
        return self.get(x, i0, i1, 0, x.ncb, worker) if isinstance(x, Blocked) else x

    def whole(self, x: Any, worker: str | None = None) -> Any:
        return self.get(x, 0, x.nrb, 0, x.ncb, worker) if isinstance(x, Blocked) else x

    def model(self, holders: dict[Any, set[str]], sizes: dict[Any, float], ran: dict[Any, str] | None = None) -> float:
        """Bytes the workers move for the recorded tasks: each value once to every worker that reads
        it and does not hold it (Dask's workers keep what they fetched; paper 004's formula counts per
        task, which is this when each task has a worker of its own). ``holders``: the workers holding
        each input before the operator ran; ``sizes``: every value's bytes (a piece an earlier run
        pasted on the worker that reads it again has none: it moves nothing); ``ran``: the worker each
        task ran on (default: the one it was meant for)."""
        ran = ran or {}
        where = {key: ran.get(key, w) for key, w, _ in self.calls}
        need: dict[Any, set[str]] = {}
        for key, _, reads in self.calls:
            w = where[key]
            if w is not None:
                for k in reads:
                    need.setdefault(k, set()).add(w)
        total = 0.0
        for k, readers in need.items():
            w = where.get(k)
            total += sizes.get(k, 0.0) * len(readers - ({w} if w is not None else holders.get(k, set())))
        return total


class _At:
    """Submissions to one worker (for ``ops.tree``)."""

    def __init__(self, pieces: Pieces, worker: str | None) -> None:
        self.pieces, self.worker = pieces, worker

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.pieces.submit(self.worker, fn, *args)


def place(be: DaskBackend, choice: FusedChoice, anchor: Callable[[Task], Any] | None, tasks: list[Task],
          reads: Callable[[Task], list[Any]], sizes: dict[Any, float] | None = None) -> dict[Task, str | None]:
    """The worker of each task (:func:`assign`), the workers and what they hold asked of the
    scheduler. ``sizes`` receives the bytes of each block the scheduler knows (what a piece pasted
    from them holds)."""
    read = {t: {f.key for f in reads(t)} for t in tasks}
    workers, known = held(be, set().union(*read.values()), sizes)
    return assign(choice.kind == "rfo", workers, known, anchor, tasks, read)


def held(be: DaskBackend, keys: set[Any], sizes: dict[Any, float] | None = None
         ) -> tuple[list[str], dict[Any, tuple[int, list[str]]]]:
    """The running workers and the size and holders of each of ``keys`` (none: a cluster that does not
    answer); the known sizes into ``sizes``."""
    c = be.client()
    workers, known = monitor.safe(lambda: c.run_on_scheduler(monitor.held, keys=list(keys)), ([], {}))
    if sizes is not None:
        sizes.update({k: float(n) for k, (n, _) in known.items() if n >= 0})  # (-1: not computed yet)
    return workers, known


def assign(replicating: bool, workers: list[str], known: dict[Any, tuple[int, list[str]]],
           anchor: Callable[[Task], Any] | None, tasks: list[Task], read: dict[Task, set[Any]]
           ) -> dict[Task, str | None]:
    """The worker of each task (paper 004 §3: a task per cuboid, the plan placing them):

    * ``replicating`` (``rfo``, and the cuboid operator at its corner (I, J, 1)): each task on a
      worker holding its block of X (``anchor``: the block; Spark's locality for the partitions of
      the main input), so its U and V panels replicate to the workers of their tasks;
    * else (``bfo`` and ``cfo``): the tasks in (p, q, r) order cut into one contiguous run per worker
      (a run shares its U and V pieces), each run on the worker already holding most bytes of what it
      reads.

    ``known``: the size and holders of each block (:func:`held`); ``read``: the keys each task reads.
    No worker known: None, Dask places the task."""
    if not workers:
        return dict.fromkeys(tasks)
    n = len(workers)
    runs: list[list[Task]] = [[] for _ in range(min(n, len(tasks)))]
    for t, task in enumerate(tasks):
        runs[t * len(runs) // len(tasks)].append(task)
    gain = [{w: 0.0 for w in workers} for _ in runs]
    for g, run_ in enumerate(runs):
        for key in set().union(*(read[t] for t in run_)):
            size, holders = known.get(key, (0, []))
            for w in holders:
                if w in gain[g]:
                    gain[g][w] += size + 1.0
    out: dict[Task, str | None] = {}
    free = list(workers)
    for g in sorted(range(len(runs)), key=lambda g: -max(gain[g].values())):
        w = max(free, key=lambda w: gain[g][w])
        free.remove(w)
        out.update(dict.fromkeys(runs[g], w))
    if replicating and anchor is not None:  # (a block of X not computed yet: its task stays in its run)
        for task in tasks:
            holders = known.get(anchor(task).key, (0, []))[1]
            if holders:
                out[task] = holders[0]
    return out


def moved(layout: dict[Task, str | None], read: dict[Task, set[Any]], known: dict[Any, tuple[int, list[str]]],
          partial: float = 0.0) -> float:
    """Bytes the workers will move for ``layout``, before it runs: each block once to every worker that
    reads it and does not hold it (the worker-level model, :meth:`Pieces.model`), and with R > 1 each
    partial product (``partial`` bytes) on another worker than its piece's first task."""
    need = {(k, w) for t, w in layout.items() if w is not None for k in read[t]}
    total = 0.0
    for k, w in need:
        size, holders = known.get(k, (0, []))
        if size > 0 and w not in holders:
            total += size
    return total + partial * sum(1 for (p, q, r), w in layout.items() if r > 0 and w != layout[(p, q, 0)])


class Grid:
    """An outer operator's tasks at one point: X's row and column groups (``rc``, ``cc``), U's and
    V's k-groups (``kc``; the broadcast operator: one), and the block range of each distributed
    input a task (p, q, r) reads."""

    def __init__(self, plan: C.CPlan, acc: dict[int, str], main: Blocked, args: tuple[Any, ...],
                 choice: FusedChoice) -> None:
        self.plan, self.acc, self.main, self.args, self.choice = plan, acc, main, args, choice
        self.broadcast = choice.kind == "bfo"
        self.upos = next(p for p, a in acc.items() if a == C.OUTER_U)
        self.vpos = next(p for p, a in acc.items() if a == C.OUTER_V)
        U = args[self.upos]
        K = U.ncb if isinstance(U, Blocked) else 1
        P, Q, R = choice.pqr
        self.rc, self.cc = cuts(main.nrb, P), cuts(main.ncb, Q)
        self.kc = [0, K] if self.broadcast else cuts(K, R)
        self.tasks = [(p, q, r) for p in range(len(self.rc) - 1) for q in range(len(self.cc) - 1)
                      for r in range(len(self.kc) - 1)]
        # the replication corner: each task one block of X, k whole (paper 004 Table 1: what RFO does)
        self.replicating = choice.kind == "rfo" or (not self.broadcast and len(self.kc) == 2 and
                                                    len(self.tasks) == main.nrb * main.ncb)

    def bounds(self, p: int, q: int, r: int) -> dict[int, tuple[int, int, int, int]]:
        """The block range each distributed input's piece of task (p, q, r) covers."""
        plan, rc, cc, kc = self.plan, self.rc, self.cc, self.kc
        i0, i1, j0, j1 = rc[p], rc[p + 1], cc[q], cc[q + 1]
        out: dict[int, tuple[int, int, int, int]] = {}
        for pos, a in enumerate(self.args):
            if not isinstance(a, Blocked):
                continue
            access = self.acc.get(pos, C.SCALAR)
            if pos in (self.upos, self.vpos):
                g0, g1 = (i0, i1) if pos == self.upos else (j0, j1)
                out[pos] = (0, a.nrb, 0, a.ncb) if self.broadcast else (g0, g1, kc[r], kc[r + 1])
            elif pos == plan.mm:
                o0, o1 = (j0, j1) if plan.agg == C.RIGHT_MM else (i0, i1)
                out[pos] = (o0, o1, 0, a.ncb)
            elif access in (C.MAIN, C.CELL):
                out[pos] = (i0, i1, j0, j1)
            elif access == C.ROWVEC:
                out[pos] = (i0, i1, 0, 1)
            elif access == C.COLVEC:
                out[pos] = (0, 1, j0, j1)
            else:
                out[pos] = (0, 1, 0, 1)
        return out

    def reads(self, t: Task) -> list[Any]:
        """The futures of the blocks task ``t`` reads."""
        return [f for pos, bd in self.bounds(*t).items() for f in blocks_in(self.args[pos], *bd)]

    def anchor(self, t: Task) -> Any:
        return self.main.blocks[(t[0], t[1])]

    def partial(self) -> float:
        """Bytes of one partial product of a piece (the plan's aggregation estimate shared out)."""
        P, Q, R = len(self.rc) - 1, len(self.cc) - 1, len(self.kc) - 1
        return self.choice.shuffle / ((R - 1) * P * Q) if R > 1 else 0.0


def choose(be: DaskBackend, grids: list[Grid], sizes: dict[Any, float] | None = None
           ) -> tuple[FusedChoice, dict[Task, str | None]]:
    """The point of ``grids`` (the model's, then the corner: ``FusedChoice.corner``) whose placement
    moves the fewest bytes between workers where the inputs lie now (:func:`moved`; a tie keeps the
    first), and its placement (kept by DaskBackend.placed while the inputs live: not the grid, which
    holds them)."""
    reads = [{t: {f.key for f in g.reads(t)} for t in g.tasks} for g in grids]
    workers, known = held(be, set().union(*(k for r in reads for k in r.values())), sizes)
    best: tuple[float, Grid, dict[Task, str | None]] | None = None  # (cost, grid, layout)
    for g, read in zip(grids, reads, strict=True):
        layout = assign(g.replicating, workers, known, g.anchor, g.tasks, read)
        cost = moved(layout, read, known, g.partial()) if len(grids) > 1 else 0.0
        if best is None or cost < best[0]:
            best = (cost, g, layout)
    assert best is not None
    return best[1].choice, best[2]


def run(be: DaskBackend, plan: C.CPlan, ref: bool, acc: dict[int, str], main: Blocked, args: tuple[Any, ...],
        choice: FusedChoice, layout: dict[Task, str | None] | None = None, pin: bool = True) -> tuple[Any, Pieces]:
    """The operator's result and its recorded tasks. ``layout``: each task's worker (default:
    :func:`choose` between the choice's point and its corner, once while the inputs live); ``pin``
    False leaves placement to Dask (the model still assumes ``layout``)."""
    sh = Pieces(be, pin)
    g = Grid(plan, acc, main, args, choice)
    if layout is None:
        grids = [g] + ([Grid(plan, acc, main, args, choice.corner)] if choice.corner is not None else [])
        chosen, layout = be.placed(plan, choice, args, lambda: choose(be, grids, sh.sizes))
        g = next(x for x in grids if x.choice == chosen)
    sh.choice = g.choice
    broadcast, upos, vpos, rc, cc, kc = g.broadcast, g.upos, g.vpos, g.rc, g.cc, g.kc
    halves = C.split_outer(plan) if len(kc) > 2 else None

    def operands(p: int, q: int, r: int, w: str | None) -> list[Any]:
        b = g.bounds(p, q, r)
        return [sh.get(a, *b[pos], w) if pos in b else a for pos, a in enumerate(args)]

    if g.replicating and plan.agg == C.FULL_AGG:
        return _partitions(sh, plan, ref, g.tasks, layout, len(args), operands), sh

    def task(p: int, q: int) -> tuple[Any, str | None]:
        w0 = layout[(p, q, 0)]
        if broadcast:  # each task takes its rows of the whole U (and V: Q is 1, every row)
            r0, r1 = rc[p] * main.bs, min(main.rows, rc[p + 1] * main.bs)
            return sh.submit(w0, B.run_plan_rows, plan, ref, ((upos, r0, r1),), *operands(p, q, 0, w0)), w0
        if halves is None:
            return sh.submit(w0, B.run_plan, plan, ref, *operands(p, q, 0, w0)), w0
        product, rest = halves
        parts = [sh.submit(layout[(p, q, r)], B.run_plan, product, ref, *operands(p, q, r, layout[(p, q, r)]))
                 for r in range(len(kc) - 1)]
        summed = tree(sh.at(w0), parts, B.fold_each, "+")  # (the aggregation step, on the piece's worker)
        ops = operands(p, q, 0, w0)
        ops[upos] = ops[vpos] = 0.0  # (the rest reads the summed product, not the factors)
        return sh.submit(w0, B.run_plan, rest, ref, *ops, summed), w0

    res = {(p, q): task(p, q) for p in range(len(rc) - 1) for q in range(len(cc) - 1)}
    return _assemble(sh, plan, main, res, rc, cc, int(args[plan.mm].cols) if plan.mm >= 0 else 0), sh


def _partitions(sh: Pieces, plan: C.CPlan, ref: bool, tasks: list[Task], layout: dict[Task, str | None], n: int,
                operands: Callable[[int, int, int, str | None], list[Any]]) -> float:
    """A replicating operator's full aggregate as Spark runs SystemDS's: the blocks of X on a
    worker are one task per thread of it (a partition), each block with its own U and V panels, so
    a panel still goes to every worker with a block that reads it. The blocks' partial results are
    added in the blocks' order, wherever the blocks were. A task per block is scheduling, not work:
    paper 004's query at 6000 x 6000 ran its 36 blocks in 86 ms, the cuboid operator in 34."""
    threads = sh.be.threads() if any(w is not None for w in layout.values()) else {}
    on: dict[str | None, list[Task]] = {}
    for t in tasks:
        on.setdefault(layout[t], []).append(t)
    parts: list[Any] = []
    where: dict[Task, tuple[int, int]] = {}
    for w, mine in on.items():
        cut = cuts(len(mine), threads.get(w, 1) if w is not None else 1)
        for a, b in itertools.pairwise(cut):
            group = mine[a:b]
            where.update({t: (len(parts), k) for k, t in enumerate(group)})
            parts.append(sh.submit(w, B.run_plan_each, plan, ref, n, *[x for t in group for x in operands(*t, w)]))
    first = layout[tasks[0]]
    return float(sh.be.result(sh.submit(first, B.add_in_order, tuple(where[t] for t in tasks), *parts)))


def measured(be: DaskBackend, label: str, choice: FusedChoice | None, inputs: tuple[Any, ...],
             compute: Callable[[], tuple[Any, Pieces]]) -> Any:
    """``compute()``'s result, and under ``--stats`` (``label``: the operator's name there) the bytes the workers moved between them while
    it ran beside the paper's estimate (plan.fusedstrategy) and the worker-level model of its
    placement (:meth:`Pieces.model`), in ``DaskCounters.fused``: the inputs are waited for first and
    the operator after, so nothing else runs on the cluster meanwhile."""
    if not (be.cfg.stats and be.cfg.stats_fused_bytes) or choice is None:
        return compute()[0]
    from distributed import get_task_stream  # deferred: distributed, only for a run on Dask

    c = be.client()
    ins = [f for a in inputs if isinstance(a, Blocked) for f in a.blocks.values()]
    be.wait_all(ins)
    _, known = monitor.safe(lambda: c.run_on_scheduler(monitor.held, keys=[f.key for f in ins]), ([], {}))
    before = monitor.safe(lambda: c.run(monitor.worker_counters), {})
    with get_task_stream(client=c) as stream:
        out, sh = compute()
        choice = sh.choice or choice
        be.wait_all(list(out.blocks.values()) if isinstance(out, Blocked) else [])
    after = monitor.safe(lambda: c.run(monitor.worker_counters), {})
    moved = monitor.between(before, after, monitor.safe(lambda: c.scheduler.address, None), 0).moved_bytes
    ran = {d["key"]: d["worker"] for d in stream.data if "worker" in d}
    sizes = {k: float(n) for k, (n, _) in known.items() if n >= 0}  # (-1: not computed yet)
    sizes.update({d["key"]: float(d.get("nbytes", 0)) for d in stream.data})
    model = sh.model({k: set(w) for k, (_, w) in known.items()}, sizes, ran)
    be.counters.fused.append((f"{label} {choice}".split(" net=")[0], choice.net + choice.shuffle, model, moved))
    return out


def _assemble(sh: Pieces, plan: C.CPlan, main: Blocked, res: dict[tuple[int, int], tuple[Any, str | None]],
              rc: list[int], cc: list[int], k: int) -> Any:
    """The operator's result from its pieces' (each on its worker): scalars added, blocks cut where
    their piece is, partial products of ``W %*% mm`` added on the worker of their group's first piece."""
    be, bs = sh.be, main.bs
    if plan.agg == C.FULL_AGG:
        first = next(iter(res.values()))[1]
        return float(be.result(tree(sh.at(first), [f for f, _ in res.values()], B.fold_each, "+")))
    if plan.agg == C.NO_AGG:
        out = Blocked(main.rows, main.cols, bs)
        for (p, q), (f, w) in res.items():
            cut_into(be, f, out, rc[p], rc[p + 1], cc[q], cc[q + 1], sh.at(w))
        return out
    left = plan.agg == C.LEFT_MM
    groups, other = (cc, rc) if left else (rc, cc)
    rows = main.cols if left else main.rows
    out = Blocked(rows, k, bs)
    for g in range(len(groups) - 1):
        parts = [res[(o, g) if left else (g, o)] for o in range(len(other) - 1)]
        at = sh.at(parts[0][1])
        cut_into(be, tree(at, [f for f, _ in parts], B.fold_each, "+"), out, groups[g], groups[g + 1], 0, out.ncb, at)
    return out


def cut_into(be: DaskBackend, piece: Any, out: Blocked, i0: int, i1: int, j0: int, j1: int, at: Any = None) -> None:
    """Put a piece holding ``out``'s block rows i0:i1 and columns j0:j1 into its blocks: the future as
    it is when it is one block, else one cut task per block (``at``: submitted through it, where the
    piece is)."""
    if i1 - i0 == 1 and j1 - j0 == 1:
        out.blocks[(i0, j0)] = piece
        return
    bs = out.bs
    for i in range(i0, i1):
        for j in range(j0, j1):
            r0, c0 = (i - i0) * bs, (j - j0) * bs
            out.blocks[(i, j)] = (at or be).submit(B.cut, piece, r0, r0 + min(bs, out.rows - i * bs),
                                           c0, c0 + min(bs, out.cols - j * bs))
