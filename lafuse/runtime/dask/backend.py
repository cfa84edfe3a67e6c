"""The Dask backend (runtime.bind.Backend): binds the plan's ``dask`` instructions to distributed
operators over distributed matrices (runtime.dask.matrix.Blocked), scatters local matrices and
collects distributed ones. Each call submits its block tasks at once and returns futures; only a
scalar result (a full sum) is gathered, because control flow may steer on it.

Every task's key names the instruction that submitted it (``lafuse.<n>.<operator>-<uuid>``,
monitor.key_prefix): a new key per execution (a loop never gets a stale result), worker time per
operator for ``--stats``, and a failure on the cluster reported at the DML operator that caused it.
Every wait on the cluster goes through :meth:`DaskBackend.gather`: Ctrl-C reaches a waiting run
within a poll, a terminal shows progress, and a worker killed by its memory limit (KilledWorker) or a
cluster that cannot run anything becomes a located DMLRuntimeError naming ``--worker-memory``."""

from __future__ import annotations

import functools
import threading
import time
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lafuse.config import Config
from lafuse.errors import DMLRuntimeError, Span
from lafuse.plan.exectype import ClusterShape
from lafuse.plan.instructions import DASK, Instruction
from lafuse.runtime.dask import cluster, monitor
from lafuse.runtime.dask.matrix import Blocked

POLL = 0.25  # s between checks while waiting on the cluster (Ctrl-C lands within one)
CHECK_EVERY = 1.0  # s between looks at the cluster's state while a wait lasts
STALL_SECONDS = 15.0  # s with no worker able to run a task, and no progress, before a wait gives up
KEEP_COLLECTED = 16 << 20  # bytes: a collected value this small stays with its distributed one (collect)
IN_FLIGHT = 16  # tasks per worker submitted ahead of the cluster before a submission waits (_throttle)
KEEP_PIECES_FRACTION = 0.1  # of a worker's memory the pasted pieces kept there may take (keep_piece)


@dataclass
class DaskCounters:
    """What this process asked of the cluster (``--stats``): tasks submitted (per operator), blocks
    and bytes scattered to the workers and gathered from them; with a monitor (``--stats`` on), what
    the workers did for it (monitor.WorkerReport), read when first asked for."""

    tasks: int = 0
    scattered_blocks: int = 0
    scattered_bytes: int = 0
    gathered_blocks: int = 0
    gathered_bytes: int = 0
    gathered_sizeof: int = 0  # everything gathered (scalars too), as the workers size it
    by_op: dict[str, int] = field(default_factory=dict)  # tasks per operator label (scatter included)
    labels: dict[str, str] = field(default_factory=dict)  # task-key prefix -> operator label
    monitor: Any = field(default=None, repr=False)
    _report: Any = field(default=None, repr=False)
    # distributed outer fused operators (--stats): (operator and its choice, bytes paper 004's model
    # estimates incl. the partial products' shuffle, bytes the worker-level model of its placement
    # gives on the values' sizes, bytes the workers measured moving between them)
    fused: list[tuple[str, float, float, int]] = field(default_factory=list)

    def workers(self) -> monitor.WorkerReport | None:
        """The workers' side of the run (once: later calls return the same numbers)."""
        if self._report is None and self.monitor is not None:
            self._report = self.monitor.report(self.gathered_sizeof)
        return self._report

    def lines(self) -> list[str]:
        """The ``--stats`` lines (none when nothing ran on the cluster)."""
        if not (self.tasks or self.scattered_blocks or self.gathered_blocks):
            return []
        out = [f"Dask: tasks submitted {self.tasks}, scattered to the workers {self.scattered_blocks} blocks "
               f"({self.scattered_bytes / 2**20:.2f} MiB), gathered from them {self.gathered_blocks} blocks "
               f"({self.gathered_bytes / 2**20:.2f} MiB)"]
        w = self.workers()
        if w is None:
            return out
        approx = "" if w.exact else " (from the workers' totals: more transfers than their logs keep)"
        out.append(f"Dask workers: moved between them {w.moved_bytes / 2**20:.2f} MiB in {w.transfers} transfers"
                   f"{approx}, spilled to disk {w.spilled_bytes / 2**20:.2f} MiB (read back "
                   f"{w.unspilled_bytes / 2**20:.2f} MiB)")
        secs: dict[str, float] = {}
        for prefix, s in w.seconds.items():
            label = self.labels.get(prefix)
            if label is not None:
                secs[label] = secs.get(label, 0.0) + s
        if secs or self.by_op:
            ops = sorted(set(secs) | set(self.by_op), key=lambda op: (-secs.get(op, 0.0), op))
            out.append("Dask worker time by operator: " + ", ".join(
                f"{op} {secs.get(op, 0.0):.3f} sec. ({self.by_op.get(op, 0)} tasks)" for op in ops))
        if self.fused:
            out.append("Dask fused operators, MiB moved between workers estimated / worker model / measured: "
                       + ", ".join(f"{what} {est / 2**20:.3g} / {mod / 2**20:.3g} / {got / 2**20:.3g}"
                                   for what, est, mod, got in self.fused))
        return out


class DaskBackend:
    name = DASK

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.counters = DaskCounters()
        self._ops: list[tuple[str, str | None, Span | None]] = []  # bound instruction n: opcode, method, span
        self._current = threading.local()  # the key prefix of the instruction running on this thread
        self._client: Any = None
        self._started = time.time()
        self._inflight: deque[Any] = deque()  # the tasks submitted, oldest first (_throttle)
        # id of a distributed matrix -> its kept pieces: block range and worker -> (future, worker, bytes)
        self._pieces: dict[int, dict[Any, tuple[Any, str | None, float]]] = {}
        self._kept_bytes: dict[str | None, float] = {}  # worker -> bytes of the pieces kept there
        # (ids of a fused operator's distributed inputs, its point) -> (its plan, its tasks' workers)
        self._layouts: dict[Any, tuple[Any, Any]] = {}

    @functools.cached_property
    def blocks(self) -> Any:
        from lafuse.runtime.dask import blocks  # deferred: dask's sizeof, SciPy; only once a Dask op runs

        return blocks

    def client(self) -> Any:
        c = cluster.client(self.cfg)
        if c is not self._client:  # the run's first look at the cluster (or a new one): counters from here
            self._client = c
            if self.cfg.stats:
                self.counters.monitor = monitor.Monitor(c)
        return c

    @functools.cached_property
    def operators(self) -> tuple[Any, ...]:
        """The modules of distributed operators, each with ``bind(backend, ins)`` -> callable or None
        (not its operator): products, fused operators, data generation and IO, the rest."""
        from lafuse.runtime.dask import fused, io, matmul, ops  # deferred: SciPy, kernels: a Dask op ran

        return (matmul, fused, io, ops)

    # ------------------------------------------------------------------ protocol
    def bind(self, ins: Instruction) -> Callable[..., Any] | None:
        """The operator's callable, wrapped so that the tasks it submits carry the instruction's key
        prefix (its number, its operator) while it runs."""
        op = ins.opcode
        fn: Callable[..., Any] | None = None
        if op == "scatter":
            fn = self.scatter
        elif op == "collect":
            fn = self.collect
        else:
            for mod in self.operators:
                fn = mod.bind(self, ins)
                if fn is not None:
                    break
        if fn is None:
            raise NotImplementedError(f"no distributed operator for '{op}'")
        n = len(self._ops)
        label = ins.method or op
        self._ops.append((op, ins.method, getattr(ins.hop, "span", None)))
        prefix = monitor.key_prefix(n, label)
        self.counters.labels[prefix] = label
        return functools.partial(self._run, fn, prefix)

    def _run(self, fn: Callable[..., Any], prefix: str, *args: Any) -> Any:
        cur = self._current
        prev = getattr(cur, "prefix", None)
        cur.prefix = prefix
        try:
            return fn(*args)
        finally:
            cur.prefix = prev

    def convert(self, value: Any, fmt: str) -> Any:
        return value  # each block keeps the format its kernel chose (the local rule, per block)

    def scatter(self, m: Any) -> Any:
        """A local matrix as a distributed one (a distributed one as it is: a variable may hold either).
        Each block travels inside a task that returns it, not by ``client.scatter``: the scheduler
        keeps the task, so a worker that dies with the block loses nothing (scattered data is lost with
        its worker, and every task that reads it fails). The price: the scheduler holds each block while
        a live value's lineage reaches it (in this process for a local cluster: a loop-carried value
        keeps every iteration's scattered blocks); measured here with 8 MB blocks (64 of them, 2
        workers), about as fast as ``client.scatter`` (0.36 against 0.30-0.34 s; under load 0.78-0.89
        against 0.69-0.98 s); 200 blocks of 80 KB, 0.33 against 0.05 s (a task's overhead each)."""
        if isinstance(m, Blocked):
            return m
        b = self.blocks
        parts = b.split(m, self.cfg.block_size)
        with warnings.catch_warnings():  # a block is a "large graph" to distributed: meant here
            warnings.filterwarnings("ignore", message="Sending large graph")
            futures = {k: self.submit(hold, Parcel(p), count=False) for k, p in parts.items()}
        self.counters.scattered_blocks += len(parts)
        self.counters.scattered_bytes += sum(_nbytes(p) for p in parts.values())
        return Blocked(m.shape[0], m.shape[1], self.cfg.block_size, futures)

    def collect(self, x: Any) -> Any:
        """A distributed matrix gathered into this process (a local value as it is). A value of at most
        KEEP_COLLECTED bytes is kept with the distributed one and each later collect gets a copy (its
        blocks never change; a copy, because local operators may write into their operands): a loop
        that reads rows of a distributed matrix in local operators gathers it once, not per row
        (alsDS's parfor: 6,004 gathers, 52 of its 57 s, at 200 x 10)."""
        if not isinstance(x, Blocked):
            return x
        if x.local is not None:
            return x.local.copy()
        keys = x.grid()
        got = self.gather([x.blocks[k] for k in keys])
        self.counters.gathered_blocks += len(keys)
        self.counters.gathered_bytes += sum(_nbytes(p) for p in got)
        m = self.blocks.assemble(dict(zip(keys, got)), x.nrb, x.ncb)
        if _nbytes(m) <= KEEP_COLLECTED:
            x.local = m
            return m.copy()
        return m

    # ------------------------------------------------------------------ for the operator modules
    def submit(self, fn: Callable[..., Any], *args: Any, count: bool = True, **kw: Any) -> Any:
        """One task on the cluster, its key named after the instruction running (a new key per call),
        counted (``count``: as an operator's task; a scattered block is counted as a block)."""
        prefix = getattr(self._current, "prefix", None) or monitor.key_prefix(-1, "task")
        kw.setdefault("key", f"{prefix}-{uuid.uuid4().hex}")
        label = self.counters.labels.get(prefix, "task")
        self.counters.by_op[label] = self.counters.by_op.get(label, 0) + 1
        if count:
            self.counters.tasks += 1
        fut = self.client().submit(fn, *args, **kw)
        self._throttle(fut)
        return fut

    def _throttle(self, fut: Any) -> None:
        """Keep at most IN_FLIGHT tasks per worker submitted ahead of the cluster: a loop whose blocks
        only submit (nothing steers on a result) would otherwise run ahead of it, and the graph the
        scheduler holds would grow with the iterations. Past the limit, a submission waits for the
        oldest half (as results are waited for: Ctrl-C and failures reach the wait). The queue holds
        its futures (an intermediate released at once must still be waited for), so up to that many
        results stay on the workers a little longer."""
        q = self._inflight
        q.append(fut)
        limit = IN_FLIGHT * max(1, self.cfg.workers)
        if len(q) > limit:
            oldest = [q.popleft() for _ in range(len(q) - limit // 2)]
            self._wait(self.client(), oldest)

    def kept_piece(self, x: Blocked, key: Any) -> Any:
        """A pasted piece of ``x`` (block range and worker) a fused operator kept (:meth:`keep_piece`),
        or None: ``x``'s blocks never change, so a loop's operator pastes such a piece once, not per
        iteration (SystemDS keeps a broadcast for the same reason)."""
        got = self._pieces.get(id(x), {}).get(key)
        return None if got is None else got[0]

    def keep_piece(self, x: Blocked, key: Any, piece: Any, worker: str | None, nbytes: float) -> bool:
        """Keep ``piece`` (at most ``nbytes``, on ``worker``) while ``x`` lives, if the pieces kept on
        that worker stay within KEEP_PIECES_FRACTION of its memory (a kept piece sits beside the blocks
        it was pasted from; a large one would push the worker into spilling)."""
        if self._kept_bytes.get(worker, 0.0) + nbytes > self._keep_budget:
            return False
        self._kept_bytes[worker] = self._kept_bytes.get(worker, 0.0) + nbytes
        if id(x) not in self._pieces:
            self._pieces[id(x)] = {}
            weakref.finalize(x, self._drop_pieces, id(x))
        self._pieces[id(x)][key] = (piece, worker, nbytes)
        return True

    @functools.cached_property
    def _keep_budget(self) -> float:
        return KEEP_PIECES_FRACTION * ClusterShape.of(self.cfg).worker_bytes

    def placed(self, plan: Any, point: Any, inputs: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """The workers of a fused operator's tasks (``make()``: runtime.dask.fused_outer.place) over
        ``inputs``, made once while they all live. Placed again, a loop's second run saw the replicas
        its first run's fetches left, placed a piece on the other worker, and pasted it again beside
        the one it kept (:meth:`keep_piece`'s pieces are per worker)."""
        xs = tuple(x for x in inputs if isinstance(x, Blocked))
        key = (tuple(id(x) for x in xs), id(plan), point)
        got = self._layouts.get(key)
        if got is not None and got[0] is plan:
            return got[1]
        layout = make()
        self._layouts[key] = (plan, layout)
        for x in xs:
            weakref.finalize(x, self._layouts.pop, key, None)
        return layout

    def _drop_pieces(self, xid: int) -> None:
        for _, worker, nbytes in self._pieces.pop(xid, {}).values():
            self._kept_bytes[worker] -= nbytes

    def _workers(self) -> dict[str, Any]:
        return cluster.workers(self.client())

    def workers_memory(self) -> tuple[int, float]:
        """The cluster's workers and the smallest memory limit among them in bytes (0: unlimited)."""
        limits = [float(w.get("memory_limit") or 0) for w in self._workers().values()]
        return len(limits), min((x for x in limits if x > 0), default=0.0)

    def threads(self) -> dict[str, int]:
        """Each worker's threads (its task slots), by address."""
        return {a: max(1, int(w.get("nthreads") or 1)) for a, w in self._workers().items()}

    def settle(self) -> None:
        """The run is over: the paced tasks (_throttle) are no longer held here."""
        self._inflight.clear()

    def result(self, future: Any) -> Any:
        """A future's value in this process (a scalar control flow may steer on), waited on as
        :meth:`gather` waits."""
        return self.gather([future])[0]

    def wait_all(self, futures: list[Any]) -> None:
        """Wait until ``futures`` finished, as :meth:`gather` waits, without fetching them."""
        self._settle(futures, fetch=False)

    def gather(self, futures: list[Any]) -> list[Any]:
        """The values of ``futures`` in this process. Waits in polls (Ctrl-C, the progress line, a
        stalled cluster); a failure on the cluster becomes a DMLRuntimeError at its operator."""
        from dask.sizeof import sizeof  # deferred: dask, only once a Dask op runs

        got = self._settle(futures, fetch=True)
        self.counters.gathered_sizeof += sum(int(sizeof(v)) for v in got)
        return list(got)

    def _settle(self, futures: list[Any], fetch: bool) -> Any:
        c = self.client()
        try:
            self._wait(c, futures)
            return c.gather(futures) if fetch else None
        except Exception as e:  # noqa: BLE001 - translated where it is the cluster's, else as it is
            err = self._failure(c, e)
            if err is None:
                raise
            raise err from None

    def like(self, x: Any, blocks: dict[tuple[int, int], Any], rows: int | None = None,
             cols: int | None = None) -> Any:
        """A distributed matrix of ``blocks`` with ``x``'s block size (and dims unless given)."""
        return Blocked(x.rows if rows is None else rows, x.cols if cols is None else cols, x.bs, blocks)

    # ------------------------------------------------------------------ waiting and failures
    def _wait(self, c: Any, futures: list[Any]) -> None:
        pending = [f for f in futures if f.status != "finished"]
        if not pending:
            return
        from distributed.client import _wait  # deferred: distributed, only once a Dask op runs

        t0 = last = time.monotonic()
        stuck_since: float | None = None
        moving: Any = None
        progress = monitor.Progress()
        try:
            while True:
                try:
                    c.sync(_wait, pending, timeout=POLL)  # (on this client's loop: not the default client's)
                    return
                except TimeoutError:
                    pass
                now = time.monotonic()
                if now - last < CHECK_EVERY:
                    continue
                last = now
                state = monitor.safe(lambda: c.run_on_scheduler(monitor.cluster_state), {})
                # stuck: no worker may run a task (all paused at their memory limit, or none up) and
                # nothing finishes or spills meanwhile (a paused worker that spills may resume)
                if state and state.get("running", 0) == 0 and state.get("moving") == moving:
                    stuck_since = stuck_since or now
                    if now - stuck_since >= STALL_SECONDS:
                        raise self._stalled(c, pending, state)
                else:
                    stuck_since = None
                moving = state.get("moving")
                if now - t0 >= monitor.SHOW_AFTER and progress.wanted():
                    progress.show(self._label(pending[0].key), state)
        finally:
            progress.close()

    def _op_of(self, key: Any) -> tuple[str, Span | None]:
        """How an error names the instruction that submitted the task ``key``: its operator (with the
        product strategy) and its DML span."""
        n = monitor.instruction_of(key)
        if n is None or not 0 <= n < len(self._ops):
            return "a distributed operator", None
        op, method, span = self._ops[n]
        return f"the distributed operator '{op}'" + (f" ({method})" if method else ""), span

    def _label(self, key: Any) -> str:
        n = monitor.instruction_of(key)
        return self._ops[n][1] or self._ops[n][0] if n is not None and 0 <= n < len(self._ops) else "waiting"

    def _memory_setting(self, c: Any) -> str:
        """What the user raises, and where it stands."""
        limits = {w.get("memory_limit") for w in monitor.safe(lambda: cluster.workers(c), {}).values()}
        each = _size(next(iter(limits))) if len(limits) == 1 and None not in limits else ""
        if self.cfg.scheduler:
            return ("start the workers with a larger memory limit (dask worker --memory-limit"
                    + (f"; now {each} each" if each else "") + "); --worker-memory sizes only a local cluster")
        now = self.cfg.worker_memory or "auto"
        return f"raise --worker-memory (now {now}" + (f": {each} per worker" if each and each != now else "") + ")"

    def _memory_restarts(self, c: Any) -> int:
        events = monitor.safe(lambda: c.get_events("worker-restart-memory"), ())
        return sum(1 for t, _ in events if t >= self._started)

    def _failure(self, c: Any, e: BaseException) -> DMLRuntimeError | None:
        """The DMLRuntimeError of a failure on the cluster (None: not the cluster's, e.g. a kernel's
        own error, which the interpreter reports like a local one)."""
        from distributed import KilledWorker  # deferred: distributed, only once a Dask op runs
        from distributed.client import FutureCancelledError

        if isinstance(e, KilledWorker):
            what, span = self._op_of(e.task)
            tries = e.allowed_failures + 1
            if self._memory_restarts(c):
                return DMLRuntimeError(
                    f"{what} ran out of memory on the Dask workers: its task was tried on {tries} workers "
                    f"and each was restarted for passing its memory limit; {self._memory_setting(c)}, or "
                    f"use smaller blocks (block_size, now {self.cfg.block_size})", span)
            return DMLRuntimeError(f"{what} failed on the Dask workers: the {tries} workers that ran its "
                                   f"task died (not by their memory limit; see their logs)", span)
        if isinstance(e, FutureCancelledError):
            what, span = self._op_of(getattr(e, "key", ""))
            return DMLRuntimeError(f"{what} was cancelled on the Dask cluster ({e})", span)
        return None

    def _stalled(self, c: Any, pending: list[Any], state: dict[str, Any]) -> DMLRuntimeError:
        what, span = self._op_of(pending[0].key)
        restarts = self._memory_restarts(c)
        if restarts:
            why = f"its workers were restarted {restarts} times for passing their memory limit"
        elif state.get("paused"):
            why = f"all {state['paused']} workers are paused at their memory limit's pause threshold"
        else:
            why = "no worker is running"
        advice = self._memory_setting(c) if restarts or state.get("paused") else "check the cluster's workers"
        return DMLRuntimeError(f"{what} cannot run on the Dask cluster: {why} (for {STALL_SECONDS:g} s); "
                               f"{advice}", span)


class Parcel:
    """A scattered block on its way to a worker inside a task (DaskBackend.scatter)."""

    __slots__ = ("block",)

    def __init__(self, block: Any) -> None:
        self.block = block


def hold(p: Parcel) -> Any:
    """A scattered block, as the result of the task that carries it. The worker keeps a task's
    arguments after running it; taking the block out of its parcel leaves the result the only
    reference, so the worker can spill it (measured: with the block as a plain argument, every spill
    left the process's memory as it was and the workers paused). The scheduler's copy of the task
    is not touched: a rerun gets the block again."""
    b, p.block = p.block, None
    if b is None:  # pragma: no cover - a worker runs a task's copy once
        raise RuntimeError("a scattered block's task ran twice on one copy")
    return b


def _size(n: Any) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.0f} MiB"


def _nbytes(b: Any) -> int:
    """Bytes of a block as it travels (the arrays of a CSR block)."""
    if hasattr(b, "indptr"):
        return int(b.data.nbytes + b.indices.nbytes + b.indptr.nbytes)
    return int(getattr(b, "nbytes", 8))
