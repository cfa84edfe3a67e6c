"""The Dask client of this process: an existing scheduler (``scheduler``: ``tcp://host:port`` or a
scheduler file) or, by default, a LocalCluster of worker processes with one thread each on the
loopback interface, no dashboard. Started the first time a distributed operator runs, closed at exit
(no worker process outlives the run, Ctrl-C included: the CLI returns through its atexit functions).

Its logs stay quiet unless ``--debug``: what goes wrong on the cluster reaches the user as a located
error (runtime.dask.backend: a worker killed by its memory limit names the operator and
``--worker-memory``), and the scheduler's and nannies' log lines about the same event (a task marked
failed, a worker restarted at 95% of its memory) would only repeat it without the place."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from lafuse.config import Config
from lafuse.errors import DMLRuntimeError

CONNECT_TIMEOUT = 10.0  # s, to reach an existing scheduler
CLOSE_TIMEOUT = 20.0  # s closing may take before the local cluster's worker processes are killed

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def client(cfg: Config) -> Any:
    """The client for ``cfg`` (one per process; a new one when the scheduler setting changed)."""
    key = (cfg.scheduler, cfg.workers, cfg.worker_memory)
    with _LOCK:
        if _STATE.get("key") == key and _STATE.get("client") is not None:
            return _STATE["client"]
        close()
        import logging  # deferred: ~3 ms of every start, only for a cluster

        from distributed import Client, LocalCluster  # deferred: distributed (~0.5 s), only for Dask

        if cfg.scheduler:
            try:
                if os.path.isfile(cfg.scheduler):
                    c = Client(scheduler_file=cfg.scheduler, timeout=CONNECT_TIMEOUT)
                else:
                    c = Client(cfg.scheduler, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as e:
                raise DMLRuntimeError(f"cannot reach the Dask scheduler at '{cfg.scheduler}' within "
                                      f"{CONNECT_TIMEOUT:g} s ({type(e).__name__}: {e}); start one with "
                                      f"'dask scheduler' or leave --scheduler out for a local cluster") from None
            _STATE.update(key=key, client=c, cluster=None)
            return c
        import warnings  # deferred: see logging

        with warnings.catch_warnings():  # (no dashboard; the scheduler's HTTP routes take any free port)
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = LocalCluster(n_workers=cfg.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, memory_limit=cfg.worker_memory or "auto",
                                   silence_logs=logging.ERROR if cfg.debug else logging.CRITICAL,
                                   preload=[__name__])  # (dask_setup: the workers leave Ctrl-C to this process)
        c = Client(cluster)
        _STATE.update(key=key, client=c, cluster=cluster)
        if not _STATE.get("atexit"):
            atexit.register(close)
            _STATE["atexit"] = True
        return c


def workers(c: Any) -> dict[str, Any]:
    """The scheduler's record of every worker of ``c``'s cluster, asked for now.

    Not ``Client.scheduler_info()``: that fetches the identity and then returns the client's cached
    copy, which the client's periodic refresh (every 2 s, asking for no workers) may overwrite in
    between — a five-worker cluster then reads as none."""
    return dict(c.sync(c.scheduler.identity, n_workers=-1)["workers"])


def dask_setup(worker: Any) -> None:
    """Run by each worker process of a LocalCluster started here (a preload): it ignores SIGINT.
    Why: Ctrl-C at a terminal signals the whole process group, workers included; each would die
    printing its own KeyboardInterrupt traceback, and the nannies would restart them while this
    process stops them. This process ends the run and closes the cluster (its atexit function)."""
    import signal  # deferred: only in a worker process

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def close() -> None:
    """Close the client and the LocalCluster this process started (its worker processes end). The
    connections that closing ends log errors of their own (a closed comm): not a user's concern.
    Closing waits at most CLOSE_TIMEOUT; then the local cluster's worker processes are killed, so
    none outlives the run. Why: a run stopped by Ctrl-C is stopped by an exception raised into its
    thread at whatever bytecode it runs (runtime.deepstack), possibly inside the client's own
    bookkeeping; a client left in such a state must not keep the process from exiting."""
    c, cluster = _STATE.pop("client", None), _STATE.pop("cluster", None)
    _STATE.pop("key", None)
    if c is None and cluster is None:
        return
    import logging  # deferred: see client()

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    def shut() -> None:
        for obj in (c, cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing at exit: nothing left to report to
                    pass

    t = threading.Thread(target=shut, name="lafuse-dask-close", daemon=True)
    t.start()
    t.join(CLOSE_TIMEOUT)
    if t.is_alive() and cluster is not None:
        _kill_workers()


def _kill_workers() -> None:
    """Kill this process's Dask worker processes (the nannies' children) and wait for them."""
    import multiprocessing  # deferred: only when closing failed

    procs = [p for p in multiprocessing.active_children() if p.name.startswith("Dask Worker process")]
    for p in procs:
        p.kill()
    for p in procs:
        p.join(5)
