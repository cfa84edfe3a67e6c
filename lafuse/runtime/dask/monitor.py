"""What a run's distributed operators cost the cluster, read from the cluster's own counters, and the
progress line a terminal shows while the run waits on the cluster.

Why the workers' counters: this process sees only what it sends (tasks, scattered blocks) and what it
gathers; the bytes workers fetch from each other for a task's inputs and the bytes they spill to disk
happen out of its sight. Each worker counts them (distributed's ``Worker.transfer_outgoing_*`` and
``digests_total``), so :class:`Monitor` reads them once before the run's first distributed operator
and once when ``--stats`` reports, and reports the difference:

- bytes moved between workers: the outgoing transfers of the run (``transfer_outgoing_log``, who asked
  for the data) minus those to this process (a gather has no worker address) or the scheduler; when
  more transfers happened than the log keeps, the outgoing total minus the bytes gathered here;
- spilled bytes: the ``('disk-write', 'bytes')`` metrics, whatever spilled them (the memory monitor
  at 70% of the limit, or a task's result over the 60% target);
- worker time per operator: the scheduler sums each task's compute time by key prefix
  (``TaskPrefix.all_durations``), and every task key of a lafuse instruction starts with
  ``lafuse.<n>.<operator>`` (:func:`key_prefix`).

A worker that died during the run takes its counters with it: the numbers are then a lower bound.
The functions that run on the workers or the scheduler live at module level here (pickled by name),
so this module imports nothing heavy at import time.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

KEY_HEAD = "lafuse"
SHOW_AFTER = 1.0  # s a wait lasts before a terminal shows the progress line
_NAMES = {"%*%": "matmul", "+": "plus", "-": "minus", "*": "times", "/": "div", "^": "pow", "%%": "mod",
          "%/%": "intdiv", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne", "&": "and",
          "|": "or", "!": "not", "u-": "neg"}


def key_prefix(n: int, label: str) -> str:
    """The key prefix of the tasks of the ``n``-th bound instruction (its operator ``label``). Only
    letters, digits, ``_`` and ``.``: Dask's ``key_split`` (which names a task's prefix) then keeps
    the whole of it, whatever the operator's symbol (``n`` < 0: a task outside any instruction)."""
    name = _NAMES.get(label) or "".join(c if c.isalnum() or c == "_" else f"x{ord(c):x}" for c in label)
    return f"{KEY_HEAD}.{n if n >= 0 else 'none'}.{name}"


def instruction_of(key: Any) -> int | None:
    """The instruction number a task key names (None: not a lafuse key)."""
    head = str(key[0] if isinstance(key, tuple) else key).split("-", 1)[0].split(".")
    if len(head) >= 3 and head[0] == KEY_HEAD and head[1].isdigit():
        return int(head[1])
    return None


# ---------------------------------------------------------------- run on the workers / the scheduler


def worker_counters(dask_worker: Any) -> dict[str, Any]:
    """A worker's cumulative counters, with its outgoing transfer log as (who asked, bytes)."""
    spilled = unspilled = 0.0
    for k, v in dask_worker.digests_total.items():
        if isinstance(k, tuple) and k[-1:] == ("bytes",):
            if k[-2:-1] == ("disk-write",):
                spilled += v
            elif k[-2:-1] == ("disk-read",):
                unspilled += v
    return {"out_bytes": int(dask_worker.transfer_outgoing_bytes_total),
            "out_count": int(dask_worker.transfer_outgoing_count_total),
            "log": [(e["who"], int(e["total"])) for e in dask_worker.transfer_outgoing_log],
            "spilled": int(spilled), "unspilled": int(unspilled)}


def prefix_times(dask_scheduler: Any) -> dict[str, float]:
    """Compute seconds the scheduler recorded per lafuse task prefix (cumulative)."""
    return {name: p.all_durations.get("compute", 0.0) for name, p in dask_scheduler.task_prefixes.items()
            if name.startswith(KEY_HEAD + ".")}


def held(dask_scheduler: Any, keys: list[Any]) -> tuple[list[str], dict[Any, tuple[int, list[str]]]]:
    """The running workers, and the size and holders of each of ``keys`` the scheduler knows (a key
    it forgot: left out): what placing a fused operator's tasks asks, in one call."""
    out = {}
    for k in keys:
        ts = dask_scheduler.tasks.get(k)
        if ts is not None:
            out[k] = (int(ts.nbytes), sorted(ws.address for ws in ts.who_has or ()))
    return sorted(ws.address for ws in dask_scheduler.running), out


def cluster_state(dask_scheduler: Any) -> dict[str, Any]:
    """For the progress line and the stall check: lafuse's tasks by state, workers by status."""
    states: dict[str, int] = {}
    finished = 0
    for name, p in dask_scheduler.task_prefixes.items():
        if name.startswith(KEY_HEAD + "."):
            finished += p.state_counts.get("memory", 0)
            for s, c in p.states.items():
                if c:
                    states[s] = states.get(s, 0) + c
    status = [ws.status.name for ws in dask_scheduler.workers.values()]
    spilled = sum(ws.memory.spilled for ws in dask_scheduler.workers.values())
    return {"states": states, "workers": len(status), "running": status.count("running"),
            "paused": status.count("paused"), "spilled": spilled, "moving": (finished, spilled)}


# ---------------------------------------------------------------- this process


@dataclass
class WorkerReport:
    """The difference of the cluster's counters over a run (see the module's docstring)."""

    moved_bytes: int = 0
    transfers: int = 0
    exact: bool = True  # False: more transfers than the workers' logs keep (moved_bytes from totals)
    spilled_bytes: int = 0
    unspilled_bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # compute seconds per task prefix


class Monitor:
    """The cluster's counters before a run; :meth:`report` takes them again and subtracts."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.before = safe(lambda: client.run(worker_counters), {})
        self.times = safe(lambda: client.run_on_scheduler(prefix_times), {})
        self.scheduler = safe(lambda: client.scheduler.address, None)

    def report(self, gathered_sizeof: int) -> WorkerReport:
        """The run's share of the counters; ``gathered_sizeof``: what this process gathered, as
        the workers size it (for a log that overflowed)."""
        after = safe(lambda: self.client.run(worker_counters), {})
        times = safe(lambda: self.client.run_on_scheduler(prefix_times), {})
        r = between(self.before, after, self.scheduler, gathered_sizeof)
        r.seconds = {k: v - self.times.get(k, 0.0) for k, v in times.items() if v - self.times.get(k, 0.0) > 0}
        return r


def between(before: dict[str, Any], after: dict[str, Any], scheduler: Any, gathered_sizeof: int) -> WorkerReport:
    """The workers' counters ``after`` less ``before`` (worker_counters of each): bytes one worker
    sent another, spilled and read-back bytes."""
    r = WorkerReport()
    out_bytes = 0
    for addr, a in after.items():
        b = before.get(addr, {"out_bytes": 0, "out_count": 0, "spilled": 0, "unspilled": 0})
        n = a["out_count"] - b["out_count"]
        out_bytes += a["out_bytes"] - b["out_bytes"]
        r.spilled_bytes += a["spilled"] - b["spilled"]
        r.unspilled_bytes += a["unspilled"] - b["unspilled"]
        if n > len(a["log"]):
            r.exact = False
        run = a["log"][len(a["log"]) - n:] if n > 0 else []
        for who, nbytes in run:
            if who is not None and who != scheduler:  # (a gather of this process: no address)
                r.moved_bytes += nbytes
                r.transfers += 1
    if not r.exact:
        r.moved_bytes = max(0, out_bytes - gathered_sizeof)
    return r


def safe(fn: Any, default: Any) -> Any:
    """Statistics never fail a run: a cluster that cannot answer (closed, a worker gone) gives none."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 - see the docstring
        return default


class Progress:
    """A transient status line on a terminal (stderr), shown while a wait on the cluster lasts longer
    than SHOW_AFTER: the run's tasks done, running and waiting, the workers and their spill. Nothing
    when stdout or stderr is not a terminal (captured output, pipes, files)."""

    def __init__(self) -> None:
        self.live: Any = None
        self.task: Any = None

    @staticmethod
    def wanted() -> bool:
        try:
            return sys.stderr.isatty() and sys.stdout.isatty()
        except (AttributeError, ValueError):  # a replaced or closed stream
            return False

    def show(self, what: str, state: dict[str, Any]) -> None:
        s = state.get("states", {})
        done = s.get("memory", 0) + s.get("released", 0) + s.get("forgotten", 0)
        busy = s.get("processing", 0)
        waiting = s.get("waiting", 0) + s.get("queued", 0) + s.get("no-worker", 0)
        paused = f", {state['paused']} paused" if state.get("paused") else ""
        text = (f"Dask {what}: tasks {busy} running, {waiting} waiting, {done} done; workers "
                f"{state.get('running', 0)}/{state.get('workers', 0)}{paused}"
                + (f"; {state['spilled'] / 2**20:.0f} MiB on disk" if state.get("spilled") else ""))
        from lafuse.runtime.progress import ACTIVE

        if ACTIVE:  # (the run's progress line is on screen: the tasks join it)
            ACTIVE[-1].tasks = text
            return
        if self.live is None:
            from rich.console import Console  # deferred: rich, only on a terminal and a long wait
            from rich.progress import Progress as Bar
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

            self.live = Bar(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True, redirect_stdout=False,
                            redirect_stderr=False)
            self.live.start()
            self.task = self.live.add_task(text, total=None)
        self.live.update(self.task, description=text)

    def close(self) -> None:
        from lafuse.runtime.progress import ACTIVE

        for p in ACTIVE:
            p.tasks = ""
        if self.live is not None:
            self.live.stop()
            self.live = None
