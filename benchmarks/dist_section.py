"""The distributed section of the benchmark suite (not ``distributed.py``: that name would shadow the
``distributed`` package for every script in this directory; nor a name with "distributed" in it, which
a ``pkill -f distributed`` meant for stray workers would match): GNMF, L2SVM, ALS-CG and ``sum(X * log(U %*% t(V) +
1e-15))`` at a size that fits in the workers' memory and at one that spills (the unfused plan's working
set 2-3x the two workers' total memory limit), side by side:

- lafuse local (``lafuse run``, the default local runtime);
- lafuse on Dask (``lafuse run --scheduler ADDR --local-memory 512MiB`` on the shared cluster): the
  default ``--exec auto`` with this process's memory the size SystemDS's hybrid mode gets as its driver
  heap, so each operator runs here or on the cluster by the same rule as there (the goal's column);
- lafuse with every operator on Dask (``--exec dask``), the counterpart of SystemDS's ``-exec spark``;
- a hand-written ``dask.array`` version of the same algorithm (unfused, ``da.dot``, dense chunks:
  SciPy chunks compute ``X * dense`` as a product and fail in ``@`` and reductions, and pydata sparse's
  ``.sum()`` reaches a distributed client as 0.0), run by this file in a process of its own
  (``--dask-array``) on the same cluster;
- SystemDS 3.4 on a local Spark master (``-exec spark``, and ``-exec hybrid`` with a small heap;
  ``sds_spark.py`` sets it up).

One LocalCluster of 2 worker processes x 1 thread (``--worker-memory`` each) serves every row. Every
system starts from its inputs in its own process's memory (lafuse and dask.array scatter them to the
workers inside the timed region; SystemDS reads its binary files, lazily, inside it too). Each process
runs the algorithm ``inner`` times in a loop and prints each run's time: the first run (compilation, JIT,
Spark context) is reported apart, the others give the warm median. Measured per process, from the
workers (``client.run``): bytes moved between workers (the ``transfer_incoming_log`` of every worker:
worker-to-worker fetches only; the client's scatters and gathers are not in it), spilled bytes (each
worker's SpillBuffer ``disk-write`` bytes) and tasks executed; for SystemDS, Spark's event log (tasks,
shuffle bytes, spilled bytes). Counts are per run (the process's total over its runs). Every result is
checked against lafuse local's.

    .venv/bin/python benchmarks/dist_section.py [--quick] [--only gnmf,outer-log] [--sizes fits,spills]
        [--worker-memory 384MiB] [--no-systemds] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lafuse.runtime.dask.cluster import workers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import algorithms  # noqa: E402
from dist_dask_array import dask_alscg, dask_autoencoder, dask_gnmf, dask_l2svm, dask_outer_log  # noqa: E402
from harness import (  # noqa: E402
    DataSet,
    Workload,
    csr,
    lafuse_env,
    parse_script_output,
    rel_diff,
    wait_deferred,
    write_lafuse,
)

REL_TOL = 1e-6  # iterative algorithms amplify rounding differences (reduction order, BLAS, block sums)
WORKERS = 2
DEFAULT_WORKER_MEMORY = "384MiB"  # 256 MiB: workers killed at 95% by 8 MB blocks' unmanaged memory
TIMEOUT = 300.0  # s per process (quick: QUICK_TIMEOUT)
QUICK_TIMEOUT = 60.0  # keeps make bench's section near 10 minutes: a spilling run may take minutes
SYSTEMS = ("lafuse-local", "lafuse-hybrid", "lafuse-dask", "dask-array", "sds-spark", "sds-hybrid")
SYSTEM_LABELS = {"lafuse-local": "lafuse local", "lafuse-hybrid": "lafuse on Dask (auto)",
                 "lafuse-dask": "lafuse --exec dask", "dask-array": "dask.array",
                 "sds-spark": "SystemDS -exec spark", "sds-hybrid": "SystemDS -exec hybrid"}
# paper 004's operators for an outer-product fused plan, each forced (--exec dask --fusion fuse-all
# --dist-fused KIND), and the unfused plan on Dask (--no-codegen): on the workloads of FUSEME_KEYS
FUSEME_SYSTEMS = {"lafuse-cost": ("--fusion", "fuse-all", "--dist-fused", "cost"),
                  "lafuse-bfo": ("--fusion", "fuse-all", "--dist-fused", "bfo"),
                  "lafuse-rfo": ("--fusion", "fuse-all", "--dist-fused", "rfo"),
                  "lafuse-cfo": ("--fusion", "fuse-all", "--dist-fused", "cfo"),
                  "lafuse-unfused": ("--no-codegen",)}
FUSEME_KEYS = ("outer-log", "outer-log-wide", "gnmf", "autoencoder")
FUSEME_BASELINES = ("sds-spark-codegen",)  # SystemDS -exec spark with its own code generation on
SYSTEM_LABELS.update({"lafuse-cost": "lafuse cost-chosen", "lafuse-bfo": "lafuse BFO", "lafuse-rfo": "lafuse RFO", "lafuse-cfo": "lafuse CFO",
                      "lafuse-unfused": "lafuse unfused on Dask", "sds-spark-codegen": "SystemDS -exec spark, codegen"})
MINE = "lafuse-hybrid"  # the goal's column: lafuse on a cluster as a user runs it (--exec auto)
# --exec dask against the systems that run everything distributed too
FORCED_AGAINST = ("sds-spark", "dask-array")
DATA_VERSION = 1  # bump when a generator changes: cached data sets are keyed by it


# ---------------------------------------------------------------------------------------------
# workloads: DML (lafuse, SystemDS) and the same arithmetic in dask.array
# ---------------------------------------------------------------------------------------------

OUTER_LOG_DML = "r1 = sum(X * log(U %*% t(V) + 1e-15))\n"
# paper 004 §6.5's AutoEncoder (SystemDS's autoencoder_2layer architecture), a full batch per step:
# every product has X's rows, so each layer's operators are one FuseME partial plan
AE_FULL_DML = f"""
{algorithms.AE_INIT}for (iter in 1:ITER) {{
{algorithms.ae_step_dml("X", "  ")}}}
r1 = sum(W1)
r2 = sum(W4)
"""


@dataclass(frozen=True)
class DistWorkload:
    key: str
    title: str
    dml: str  # with 1:ITER and 1:CG
    inputs: tuple[str, ...]
    gen: Callable[[np.random.Generator, int, int], dict[str, Any]]
    dask: Callable[[Any, dict[str, Any], int, int, int], tuple[float, ...]]  # (client, arrays, bs, iters, cg)
    sizes: dict[str, tuple[int, int]]  # "fits" / "spills" -> (n, m)
    working_set: Callable[[dict[str, Any]], int]  # bytes the unfused plan holds at its peak
    iters: int = 1
    cg: int = 1
    n_out: int = 1
    bs: int = 1000  # block (chunk) size: lafuse's block_size and dask.array's chunks
    note: str = ""

    def body(self) -> str:
        return self.dml.replace("1:ITER", f"1:{self.iters}").replace("1:CG", f"1:{self.cg}")

    def workload(self, size: str) -> Workload:
        return Workload(f"{self.key}-{size}", self.title, f"dist-{self.key}-{size}", list(self.inputs),
                        self.body(), "scalars", numpy=lambda a: None, numba=None, n_out=self.n_out,
                        group="distributed", size=size, algorithm=self.title, passes=self.iters,
                        rel_tol=REL_TOL)


def _dyadic(rng: np.random.Generator, lo: int, hi: int, shape: tuple[int, int]) -> np.ndarray:
    """Values k/16: exact and short as text (SystemDS reads the same numbers lafuse reads)."""
    return rng.integers(lo, hi, size=shape).astype(np.float64) / 16


def _sparse_counts(rng: np.random.Generator, n: int, m: int, density: float) -> sp.csr_array:
    """Integer counts 1..4 at ``density``, every row and column non-empty (a factor's column driven to
    zero would give 0/0 in the dense semantics)."""
    k = max(n, m)
    cover = sp.coo_array((np.ones(k), (np.arange(k) % n, np.arange(k) % m)), shape=(n, m))
    X = csr(sp.random_array((n, m), density=density, format="csr", rng=rng) + cover)
    X.data = np.floor(1 + 4 * np.minimum(X.data, 0.999))
    return X


def _gen_gnmf(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    return {"X": _sparse_counts(rng, n, m, 0.01), "W0": _dyadic(rng, 8, 24, (n, 10)),
            "H0": _dyadic(rng, 8, 24, (10, m))}


def _gen_alscg(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    return {"X": _sparse_counts(rng, n, m, 0.01), "U0": _dyadic(rng, -8, 9, (n, 20)),
            "V0": _dyadic(rng, -8, 9, (m, 20))}


def _gen_outer(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    return {"X": _sparse_counts(rng, n, m, 0.01), "U": _dyadic(rng, 1, 17, (n, 50)),
            "V": _dyadic(rng, 1, 17, (m, 50))}


def _gen_outer_wide(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    """Paper 004's n x 2K x n query scaled to this machine: the factors far larger than X (at its n =
    100K, density 0.001, |U| is 13x |X|; here 22x at fits)."""
    return {"X": _sparse_counts(rng, n, m, 0.001), "U": _dyadic(rng, 1, 17, (n, 200)),
            "V": _dyadic(rng, 1, 17, (m, 200))}


def _gen_ae(rng: np.random.Generator, n: int, m: int, h1: int = 50, h2: int = 10) -> dict[str, Any]:
    dims = [(m, h1), (h1, h2), (h2, h1), (h1, m)]
    return {"X": _dyadic(rng, 0, 16, (n, m)), **{f"W{k + 1}0": _dyadic(rng, -4, 5, s) for k, s in enumerate(dims)}}


def _gen_l2svm(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    X = np.rint(4 * rng.normal(size=(n, m)))
    score = X @ rng.normal(size=(m, 1)) + 2 * rng.normal(size=(n, 1))
    return {"X": X, "y": np.where(score > 0, 1.0, -1.0)}


def _nbytes(a: Any) -> int:
    return int(a.data.nbytes + a.indices.nbytes + a.indptr.nbytes) if sp.issparse(a) else int(a.nbytes)


def _inputs(a: dict[str, Any]) -> int:
    return sum(_nbytes(v) for v in a.values())


def _two_dense(a: dict[str, Any]) -> int:
    """Inputs plus two dense n x m intermediates (U %*% t(V) and the element-wise result computed
    from it: the peak of an unfused plan, each consumer freeing its input)."""
    n, m = a["X"].shape
    return _inputs(a) + 2 * 8 * n * m


WORKLOADS = [
    DistWorkload("gnmf", "GNMF", algorithms.GNMF_DML, ("X", "W0", "H0"), _gen_gnmf, dask_gnmf,
                 {"fits": (4000, 2000), "spills": (14000, 7500)}, _two_dense, iters=3, n_out=3,
                 note="X sparse 0.01, rank 10"),
    DistWorkload("l2svm", "L2SVM", algorithms.L2SVM_DML, ("X", "y"), _gen_l2svm, dask_l2svm,
                 {"fits": (20000, 100), "spills": (1_850_000, 100)},
                 lambda a: _inputs(a) + 10 * 8 * a["X"].shape[0], iters=2, n_out=2, bs=10000,
                 note="X dense; blocks 10000 x 100"),
    DistWorkload("alscg", "ALS-CG", algorithms.ALSCG_DML, ("X", "U0", "V0"), _gen_alscg, dask_alscg,
                 {"fits": (2000, 2000), "spills": (10500, 10500)}, _two_dense, iters=1, cg=2, n_out=3,
                 note="X sparse 0.01, rank 20, 2 CG steps per factor"),
    DistWorkload("outer-log", "sum(X*log(U%*%t(V)+1e-15))", OUTER_LOG_DML, ("X", "U", "V"), _gen_outer,
                 dask_outer_log, {"fits": (3000, 3000), "spills": (10500, 10500)}, _two_dense,
                 note="X sparse 0.01, rank 50"),
    DistWorkload("outer-log-wide", "sum(X*log(U%*%t(V)+1e-15)), paper 004's shape", OUTER_LOG_DML,
                 ("X", "U", "V"), _gen_outer_wide, dask_outer_log,
                 {"fits": (6000, 6000), "spills": (14000, 14000)}, _two_dense,
                 note="X sparse 0.001, rank 200: |U| >> |X| as in paper 004's n x 2K x n query"),
    DistWorkload("autoencoder", "AutoEncoder (full batch)", AE_FULL_DML, ("X", "W10", "W20", "W30", "W40"),
                 _gen_ae, dask_autoencoder, {"fits": (10000, 500), "spills": (80000, 500)}, _two_dense,
                 iters=2, n_out=2, note="X dense, hidden 50 and 10, two full-batch steps"),
]
BY_KEY = {w.key: w for w in WORKLOADS}
SIZES = ("fits", "spills")


# ---------------------------------------------------------------------------------------------
# data: generated once per machine (keyed by DATA_VERSION), for lafuse and for SystemDS
# ---------------------------------------------------------------------------------------------

def data_dir() -> Path:
    from sds_spark import CACHE

    return CACHE / f"distributed-data-v{DATA_VERSION}"


def dataset(w: DistWorkload, size: str, sds: bool) -> DataSet:
    """The inputs of a row, from the cache directory if there (NumPy/SciPy files for lafuse, SystemDS
    binary if ``sds``); generated and written otherwise."""
    n, m = w.sizes[size]
    name = f"{w.key}-{n}x{m}"
    d = data_dir()
    d.mkdir(parents=True, exist_ok=True)
    ds = DataSet(name, {})
    files = {k: next((p for p in (d / f"{name}-{k}.npz", d / f"{name}-{k}.npy") if p.exists()), d / "-")
             for k in w.inputs}
    if all(p.exists() and Path(str(p) + ".mtd").exists() for p in files.values()):
        for k, p in files.items():
            ds.arrays[k] = csr(sp.load_npz(p)) if p.suffix == ".npz" else np.load(p)
            ds.lafuse_files[k] = str(p)
    else:
        rng = np.random.default_rng([sum(map(ord, w.key)), n, m, DATA_VERSION])
        ds.arrays = w.gen(rng, n, m)
        write_lafuse(ds, d)
    if sds:
        sds_files = {k: d / f"{name}-{k}.sds" for k in w.inputs}
        if not all(p.exists() for p in sds_files.values()):
            from harness import JavaRunner, write_systemds

            write_systemds([ds], d, JavaRunner("4g"))
            if ds.sds_convert:
                for p in sds_files.values():
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        ds.sds_files = {k: str(p) for k, p in sds_files.items()}
    return ds


# ---------------------------------------------------------------------------------------------
# the cluster and what its workers count
# ---------------------------------------------------------------------------------------------

class Cluster:
    """A scheduler and ``WORKERS`` worker processes x 1 thread (``memory`` each) on the loopback
    interface, no dashboard, started as ``dask scheduler`` / ``dask worker`` processes of their own:
    a LocalCluster started here would spawn workers that import this file's modules (the harness's
    Numba kernels: 130 MB of a 256 MiB worker before any data). The workers' transfer logs are made
    long enough for a run's worker-to-worker fetches. ``close`` ends both process groups."""

    def __init__(self, memory: str, tmp: Path) -> None:
        dask_cli = str(Path(sys.executable).with_name("dask"))
        env = {**os.environ, "DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH": "1000000",
               "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "warning"}
        sched_file = tmp / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self.log = open(tmp / "cluster.log", "w")  # noqa: SIM115 - closed in close()
        try:
            self.procs.append(subprocess.Popen(
                # idle timeout and death timeout: no process outlives a harness killed outright
                [dask_cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--idle-timeout", "900s",
                 "--scheduler-file", str(sched_file)], env=env, stdout=self.log, stderr=subprocess.STDOUT,
                start_new_session=True))
            end = time.time() + 60
            while not sched_file.exists() and time.time() < end:
                time.sleep(0.1)
            self.procs.append(subprocess.Popen(
                [dask_cli, "worker", "--scheduler-file", str(sched_file), "--nworkers", str(WORKERS),
                 "--nthreads", "1", "--memory-limit", memory, "--no-dashboard", "--host", "127.0.0.1",
                 "--death-timeout", "60",
                 "--local-directory", str(tmp / "workers")], env=env, stdout=self.log,
                stderr=subprocess.STDOUT, start_new_session=True))
            import cloudpickle
            from distributed import Client

            # the workers cannot import this file: client.run sends its functions by value
            cloudpickle.register_pickle_by_value(sys.modules[__name__])
            self.client = Client(scheduler_file=str(sched_file), timeout=60)
            self.client.wait_for_workers(WORKERS, timeout=120)
            self.scheduler_address = self.client.scheduler.address
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        import signal

        client = getattr(self, "client", None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing: nothing left to report to
                pass
        for p in reversed(self.procs):  # workers first, then the scheduler; each its own process group
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        self.procs = []
        self.log.close()


def _worker_counters(dask_worker: Any) -> dict[str, Any]:
    spilled = 0.0
    metrics = getattr(dask_worker.data, "cumulative_metrics", None)
    if metrics is not None:
        spilled = float(metrics.get(("disk-write", "bytes"), 0.0))
    return {"pid": os.getpid(), "incoming": float(sum(e["total"] for e in dask_worker.transfer_incoming_log)),
            "outgoing": float(dask_worker.transfer_outgoing_bytes_total),
            "executed": float(dask_worker.state.executed_count), "spilled": spilled}


def counters(client: Any) -> dict[str, dict[str, Any]]:
    return client.run(_worker_counters)


def delta(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Summed over the workers; a worker that restarted (new pid, or gone) counts from zero and is
    named in ``restarted`` (its bytes before the restart are lost)."""
    out: dict[str, Any] = {"moved_bytes": 0.0, "outgoing_bytes": 0.0, "tasks": 0.0, "spilled_bytes": 0.0,
                           "restarted": []}
    for addr, a in after.items():
        b = before.get(addr)
        if b is None or b["pid"] != a["pid"]:
            out["restarted"].append(addr)
            b = {k: 0.0 for k in a}
        out["moved_bytes"] += a["incoming"] - b["incoming"]
        out["outgoing_bytes"] += a["outgoing"] - b["outgoing"]
        out["tasks"] += a["executed"] - b["executed"]
        out["spilled_bytes"] += a["spilled"] - b["spilled"]
    out["restarted"] += [addr for addr in before if addr not in after]
    return out


def settle(client: Any, timeout: float = 30.0) -> None:
    """Until the scheduler holds no task of a finished process (its client's release may lag)."""
    end = time.time() + timeout
    while time.time() < end:
        if client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0:
            return
        time.sleep(0.1)


LEFTOVER_FRACTION = 0.3  # of a worker's memory limit held by its process with no task: restart it


def fresh_workers(client: Any, always: bool = False) -> bool:
    """Restart the workers when one holds more than LEFTOVER_FRACTION of its memory limit with nothing
    to hold (memory a spilling or failed run of another system left behind, which glibc need not
    return): a worker near its pause threshold at the start would slow the next system down, or
    stall it (a lafuse run on Dask timed out after a dask.array run that had spilled 17 GB).
    ``always``: restart them anyway (the FuseME systems, compared with each other within 10%, each
    start from the same workers). Whether it restarted them."""
    def rss(dask_worker: Any) -> tuple[float, float]:
        import psutil

        return float(psutil.Process().memory_info().rss), float(dask_worker.memory_manager.memory_limit or 0)

    held = client.run(rss)
    if not always and all(limit <= 0 or used <= LEFTOVER_FRACTION * limit for used, limit in held.values()):
        return False
    client.restart(timeout=120)
    client.wait_for_workers(WORKERS, timeout=120)
    return True


# ---------------------------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------------------------

@dataclass
class Result:
    system: str
    first: float | None = None
    warm: list[float] = field(default_factory=list)
    wall: float | None = None
    results: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)  # per run
    counts_extra: dict[str, Any] = field(default_factory=dict)  # lafuse's own --stats counters
    error_tail: str = ""  # the end of a failed process's stderr
    top: list[str] = field(default_factory=list)
    check: str = "-"

    @property
    def time(self) -> float | None:
        """The time compared: the warm median, or the only run of a process that ran once."""
        return statistics.median(self.warm) if self.warm else self.first

    def summary(self) -> dict[str, Any]:
        return {"first": self.first, "warm": self.warm, "warm_median": statistics.median(self.warm) if self.warm else None,
                "time": self.time, "wall": self.wall,
                "results": self.results, "error": self.error, "skipped": self.skipped, "counts": self.counts,
                "top": self.top, "check": self.check, "error_tail": self.error_tail}


def _from_output(r: Result, stdout: str, stderr: str, rc: int) -> Result:
    if rc != 0:
        lines = [x.strip() for x in (stderr or stdout).strip().splitlines() if x.strip()] or [f"exit {rc}"]
        # lafuse's first error line says what failed (the last one only that it is a bug; a runtime
        # error is "script:line:col: runtime error: ...", the source line and a caret after it); else
        # the exception a traceback ends with
        said = [x for x in lines if x.startswith("lafuse:") or re.search(r":\d+:\d+: runtime error: ", x)]
        raised = [x for x in lines if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b", x) or x.startswith("timeout")]
        r.error = (said[0] if said else raised[-1] if raised else lines[-1])[:240]
        r.error_tail = (stderr or stdout)[-3000:]
        return r
    times, r.results = parse_script_output(stdout.splitlines())
    if times:
        r.first, r.warm = times[0], times[1:]
    return r


def _run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = TIMEOUT) -> tuple[float, str, str, int]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(x: Any) -> str:
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        return time.perf_counter() - t0, text(e.stdout), f"timeout after {timeout:.0f} s", -9
    return time.perf_counter() - t0, p.stdout, p.stderr, p.returncode


def _dask_line(stdout: str) -> list[str]:
    from harness import heavy_hitters

    top = heavy_hitters(stdout, 5)
    top += [x.strip() for x in stdout.splitlines() if x.startswith("Dask:")]
    return top


def run_lafuse(script: Path, ds: DataSet, w: DistWorkload, tmp: Path, system: str, scheduler: str,
               local_memory: str, timeout: float, fused_bytes: bool = True) -> Result:
    """One ``lafuse run`` process (after an untimed one on the same plan cache, so the timed one is a
    script's second run, as in the local benchmarks); on Dask with ``--stats`` (its Dask line):
    ``system`` lafuse-local, lafuse-hybrid (``--exec auto`` with ``local_memory``) or lafuse-dask.
    ``fused_bytes`` False: ``--stats`` without each fused operator's bytes (Config.stats_fused_bytes:
    measuring them runs the operators one at a time), the timed run of a fused system (the bytes come
    from :func:`fused_models`'s run)."""
    cfg = tmp / f"lafuse-bs{w.bs}{'' if fused_bytes else '-fast'}.json"
    cfg.write_text(json.dumps({"block_size": w.bs, **({} if fused_bytes else {"stats_fused_bytes": False})}))
    cache = str(tmp / f"cache-{w.key}")
    env = lafuse_env(cache)
    nv = [f"{k}={ds.lafuse_files[k]}" for k in w.inputs]
    base = [sys.executable, "-m", "lafuse", "run", str(script), "--config", str(cfg)]
    on_dask = system != "lafuse-local"
    if system == "lafuse-dask" or system in FUSEME_SYSTEMS:
        base += ["--exec", "dask", *FUSEME_SYSTEMS.get(system, ())]
    elif system == "lafuse-hybrid":
        base += ["--exec", "auto", "--local-memory", local_memory]
    if on_dask:
        base += ["--scheduler", scheduler, "--stats", "5"]
    r = Result(system)
    if not on_dask:  # the untimed first run (Dask runs reuse the local run's plan cache)
        _run([*base, "--nvargs", *nv], env, script.parent, timeout)
        wait_deferred(cache, env)
    wall, out, err, rc = _run([*base, "--nvargs", *nv], env, script.parent, timeout)
    wait_deferred(cache, env)
    r.wall = wall
    r.top = _dask_line(out) if on_dask else []
    m = re.search(r"Dask: tasks submitted (\d+), scattered to the workers (\d+) blocks \(([\d.]+) MiB\), "
                  r"gathered from them (\d+) blocks \(([\d.]+) MiB\)", out)
    if m:  # what lafuse itself sent and fetched (the workers' counters see neither)
        r.counts_extra = {"submitted": float(m.group(1)), "scattered_bytes": float(m.group(3)) * 2 ** 20,
                          "gathered_bytes": float(m.group(5)) * 2 ** 20}
    r.counts_extra.update(fused_models(out))
    return _from_output(r, out, err, rc)


def fused_models(out: str) -> dict[str, Any]:
    """From a ``--stats`` output: the first fused operator's kind and (P,Q,R), every execution's
    (P,Q,R) in order, both byte models and the operators' measured bytes, summed over the executions
    (the counts are divided per run later, as the workers' bytes are). An outer plan's broadcast
    operator sends U and V whole, not the cuboid operator's pieces at its (P,Q,R): its point is
    marked ("whole(2,1,1)"), so it is never taken for the cuboid operator's plan."""
    line = re.search(r"Dask fused operators, MiB moved between workers estimated / worker model / measured: (.*)", out)
    ops = re.findall(r"(\w+) (\w+)(\(\d+,\d+,\d+\)) ([\d.e+-]+) / ([\d.e+-]+) / ([\d.e+-]+)", line.group(1)) if line else []
    if not ops:
        return {}
    points = " ".join(("whole" if kind == "bfo" and name != "cuboid" else "") + pqr for name, kind, pqr, *_ in ops)
    ops = [o[1:] for o in ops]
    return {"operator": ops[0][0] + ops[0][1], "points": points,
            "model_bytes": sum(float(o[2]) for o in ops) * 2 ** 20,
            "worker_model_bytes": sum(float(o[3]) for o in ops) * 2 ** 20,
            "fused_moved_bytes": sum(float(o[4]) for o in ops) * 2 ** 20}


def run_dask_array(w: DistWorkload, ds: DataSet, scheduler: str, inner: int, timeout: float) -> Result:
    cmd = [sys.executable, str(Path(__file__)), "--dask-array", w.key, "--scheduler", scheduler,
           "--inner", str(inner), "--bs", str(w.bs), "--iters", str(w.iters), "--cg", str(w.cg),
           *[f"{k}={ds.lafuse_files[k]}" for k in w.inputs]]
    wall, out, err, rc = _run(cmd, timeout=timeout)
    r = Result("dask-array", wall=wall)
    return _from_output(r, out, err, rc)


def dask_array_main(key: str, scheduler: str, inner: int, bs: int, iters: int, cg: int, files: list[str]) -> int:
    """The dask.array process: load the inputs, connect, run ``inner`` times, print T/R lines."""
    from distributed import Client

    w = BY_KEY[key]
    arrays: dict[str, Any] = {}
    for f in files:
        k, p = f.split("=", 1)
        arrays[k] = csr(sp.load_npz(p)) if p.endswith(".npz") else np.load(p)
    with Client(scheduler, timeout=30) as client:
        for _ in range(inner):
            t0 = time.perf_counter_ns()
            res = w.dask(client, arrays, bs, iters, cg)
            t = time.perf_counter_ns() - t0
            print(f"T {t}")
            for v in res:
                print(f"R {v!r}")
            sys.stdout.flush()
    return 0


def run_sds(runner: Any, script: Path, ds: DataSet, mode: str, heap: str, tmp: Path, timeout: float,
            codegen: bool = False) -> Result:
    r = Result(f"sds-{mode}")
    x = runner.run(script, ds.sds_files, mode, tmp, heap=heap, codegen=codegen, timeout=timeout)
    r.wall, r.error = x.wall, x.error
    if x.error:
        return r
    times, r.results = parse_script_output(x.lines)
    if times:
        r.first, r.warm = times[0], times[1:]
    from harness import heavy_hitters

    r.top = heavy_hitters(x.stdout, 5) + [line.strip() for line in x.stdout.splitlines()
                                          if line.startswith("Spark trans counts")]
    r.counts = dict(x.events)
    return r


# ---------------------------------------------------------------------------------------------
# the section
# ---------------------------------------------------------------------------------------------

def _per_run(d: dict[str, Any], runs: int) -> dict[str, Any]:
    return {k: (v / runs if isinstance(v, float) else v) for k, v in d.items()}


def verdict(row: dict[str, Any], mine: str = MINE, against: tuple[str, ...] = ("sds-spark", "sds-hybrid", "dask-array"),
            near_local: bool = True) -> str:
    """One line against the goal: ``mine`` (lafuse on Dask) faster than each of ``against`` (SystemDS on
    Spark in both modes and dask.array), and (data that fits, ``near_local``) within 2x of lafuse local;
    by each system's ``time`` (warm median, or its single run). A system that timed out counts as slower
    if ``mine`` finished sooner."""
    s = row["systems"]
    label = SYSTEM_LABELS[mine]

    def t(k: str) -> float | None:
        e = s.get(k) or {}
        return e.get("time") if e.get("check") == "ok" else None

    mine_t = t(mine)
    if mine_t is None:
        check = str((s.get(mine) or {}).get("check") or "-")
        if check.startswith("ERROR"):
            return f"missed: {label} failed (" + check.removeprefix("ERROR: ").removeprefix("lafuse: ")[:90] + ")"
        return f"missed: {label} result {check}"
    missed, unknown = [], []
    for k in against:
        other = t(k)
        check = str((s.get(k) or {}).get("check") or "")
        timed_out = re.search(r"timeout after (\d+) s", check)
        if other is None and timed_out and mine_t < float(timed_out.group(1)):
            continue  # it did not finish in the time lafuse took for all of its runs
        if other is None:
            unknown.append(SYSTEM_LABELS[k])
        elif mine_t >= other:
            missed.append(f"{mine_t / other:.2f}x {SYSTEM_LABELS[k]}")
    local = t("lafuse-local")
    if near_local and row["size"] == "fits" and local is not None and mine_t > 2 * local:
        missed.append(f"{mine_t / local:.1f}x lafuse local (goal 2x)")
    text = "met" if not missed else "missed: " + ", ".join(missed)
    if unknown:
        text += " (no valid time: " + ", ".join(unknown) + ")"
    return text


def fuseme_verdict(row: dict[str, Any]) -> str:
    """Paper 004's goals on a row: CFO's operators move fewer bytes between workers than min(BFO,
    RFO)'s where its (P,Q,R) is not theirs (an operator at one of their points is their plan: its
    bytes differ by noise alone); the cost-chosen operator is within 10% of the fastest forced one,
    each by its fastest warm run (a 20 ms run of these either meets a ~9 ms hiccup or not, and the
    median of eight flipped between the two: the cost-chosen plan and forced CFO at the same points
    differed by 15% in median; where the chosen plan is forced CFO's, either time is the plan's);
    every forced operator is faster than SystemDS -exec spark, with its code generation off and on
    (the faster of the two), except a BFO or RFO that ran out of the workers' memory where CFO
    completed: that is the outcome paper 004 §6 predicts for it (noted, not missed)."""
    sy = row.get("systems") or {}

    def counts(k: str) -> dict[str, Any]:  # (a failed run's counts count for nothing)
        got = sy.get(k) or {}
        return (got.get("counts") or {}) if got.get("time") is not None else {}

    def moved(k: str) -> float | None:  # (the fused operators' own bytes where measured)
        c = counts(k)
        return c.get("fused_moved_bytes", c.get("moved_bytes"))

    def t(k: str) -> float | None:
        return (sy.get(k) or {}).get("time")

    missed = []
    b, r, c = moved("lafuse-bfo"), moved("lafuse-rfo"), moved("lafuse-cfo")
    points = [counts(k).get("points", "").split() for k in ("lafuse-cfo", "lafuse-bfo", "lafuse-rfo")]
    corners = len(points[0]) == len(points[1]) == len(points[2]) > 0 and \
        all(p in (pb, pr) for p, pb, pr in zip(*points, strict=True))
    if b is not None and r is not None and c is not None and c >= min(b, r) and not corners:
        missed.append(f"CFO moved {c / 2**20:.3g} MiB >= min(BFO, RFO) {min(b, r) / 2**20:.3g} MiB")
    def fastest(k: str) -> float | None:
        got = sy.get(k) or {}
        return min(got.get("warm") or [], default=got.get("time"))

    forced = {k: t(k) for k in ("lafuse-bfo", "lafuse-rfo", "lafuse-cfo")}
    best = min((v for k in forced if (v := fastest(k)) is not None), default=None)
    chosen = fastest("lafuse-cost")
    plan = counts("lafuse-cost").get("points")
    if chosen is not None and plan and plan == counts("lafuse-cfo").get("points"):
        chosen = min(chosen, fastest("lafuse-cfo") or chosen)  # (one plan, timed twice)
    if best is not None and chosen is not None and chosen > 1.1 * best:
        missed.append(f"cost-chosen {chosen / best:.2f}x the fastest forced operator")
    sds = {k: t(k) for k in ("sds-spark", *FUSEME_BASELINES) if t(k) is not None}
    spark = min(sds.values(), default=None)
    cfo_ran = forced["lafuse-cfo"] is not None
    notes = ["CFO at BFO's or RFO's (P,Q,R) on every operator: no byte goal"] if corners else []
    for k, mine in forced.items():
        if mine is None and k != "lafuse-cfo" and cfo_ran and "ran out of memory" in ((sy.get(k) or {}).get("error") or ""):
            notes.append(f"{SYSTEM_LABELS[k].split()[-1]} out of memory, CFO completed: paper 004's memory case")
        elif mine is None:
            missed.append(f"{SYSTEM_LABELS[k]} failed")
        elif spark is not None and mine >= spark:
            missed.append(f"{SYSTEM_LABELS[k]} {mine / spark:.2f}x {SYSTEM_LABELS[min(sds, key=sds.__getitem__)]}")
    return ("met" if not missed else "missed: " + "; ".join(missed)) + "".join(f" ({n})" for n in notes)


SHORT_FUSED_RUN = 1.0  # s: a FuseME row whose --exec dask run is shorter runs FUSED_SHORT_RUNS times a process
FUSED_SHORT_RUNS = 9


def fused_runs(inner: int, dask: Result | None) -> int:
    """Runs a process of each forced FuseME operator: at least three (the first pays the kernel's
    compilation on the workers), nine where a run is short (the row's ``--exec dask`` run under
    SHORT_FUSED_RUN; one that failed says nothing, and three bound the row's time): the cost-chosen
    operator is held within 10% of the fastest forced one, and the median of two 40 ms runs varied
    by 15% between processes of one configuration (paper 004's query at 10500 x 10500). The spilling
    autoencoder's 10 s runs keep three."""
    t = dask.time if dask is not None else None
    return max(inner, FUSED_SHORT_RUNS if t is not None and t < SHORT_FUSED_RUN else 3)


FUSED_START = 30.0  # s: a FuseME process's start, input load and first run's compilation (the autoencoder's)


def fused_timeout(timeout: float, runs: int, dask: Result | None, spark: Result | None = None) -> float:
    """A forced FuseME operator's process limit: ``timeout``, or its ``runs`` at three times the
    row's ``--exec dask`` pace or at SystemDS on Spark's (the pace it must beat), whichever is
    slower, and FUSED_START, where that is longer. The spilling autoencoder's three 12 s runs came
    within seconds of the quick 60 s, and forced RFO ran out of 71 s where SystemDS takes 25 s a run:
    a limit it must not be judged by."""
    ours, theirs = (r.time if r is not None else None for r in (dask, spark))
    paces = ([3.0 * ours] if ours is not None else []) + ([theirs] if theirs is not None else [])
    return max(timeout, runs * max(paces) + FUSED_START) if paces else timeout


def _heap_size(heap: str) -> str:
    """A JVM heap (``512m``, ``1g``) in Dask's notation (``512MiB``): the JVM's units are binary."""
    units = {"k": "KiB", "m": "MiB", "g": "GiB"}
    return heap[:-1] + units[heap[-1].lower()] if heap[-1:].lower() in units else heap


def run_section(quick: bool = True, only: set[str] | None = None, sizes: tuple[str, ...] = SIZES,
                worker_memory: str = DEFAULT_WORKER_MEMORY, systemds: bool = True, sds_heaps: tuple[str, str] =
                ("1g", "512m"), progress: Callable[[str], None] = print, timeout: float | None = None,
                partial: Path | None = None) -> dict[str, Any]:
    """Every row (workload x size) on every system; the section's JSON."""
    from sds_spark import SparkRunner, Unavailable

    timeout = timeout or (QUICK_TIMEOUT if quick else TIMEOUT)
    todo = [(w, s) for w in WORKLOADS for s in sizes if only is None or w.key in only]
    section: dict[str, Any] = {"workers": WORKERS, "threads_per_worker": 1, "worker_memory": worker_memory,
                               "systems": list(SYSTEMS), "system_labels": SYSTEM_LABELS, "rows": [],
                               "sds_heaps": {"spark": sds_heaps[0], "hybrid": sds_heaps[1]}, "rel_tol": REL_TOL,
                               "mine": MINE, "lafuse_local_memory": _heap_size(sds_heaps[1]),
                               "timeout": timeout, "quick": quick}
    runner, sds_note = None, ""
    if not systemds:
        sds_note = "not run (--no-systemds / --no-distributed-systemds)"
    else:
        try:
            runner = SparkRunner(sds_heaps[0])
            section["systemds"] = runner.version
        except Unavailable as e:
            sds_note = f"unavailable: {e}"
    section["systemds_note"] = sds_note
    t_start = time.perf_counter()
    import signal

    def _stop(signum: int, frame: Any) -> None:  # SIGTERM/SIGHUP: close the cluster on the way out
        raise SystemExit(f"signal {signum}")

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    with tempfile.TemporaryDirectory(prefix="lafuse-dist-") as d:
        tmp = Path(d)
        cluster = Cluster(worker_memory, tmp)
        client = cluster.client
        section["memory_limit_bytes"] = int(sum(x["memory_limit"]
                                                for x in workers(client).values()))
        try:
            for w, size in todo:
                t_row = time.perf_counter()
                progress(f"{w.key} {size}: data")
                ds = dataset(w, size, runner is not None)
                t_data = time.perf_counter() - t_row
                # spilling rows once per process in quick mode: a run takes 10-100 s there
                # (fits: eight warm runs even in quick mode; lafuse's L2SVM runs in 3 ms, and the median
                # of two such runs varied 2.5-7.7 ms between processes of one configuration; with four,
                # the outer-product loss's runs 2-3 of a process took 2.3-8.2 ms, its runs 4-5 1.9-3.7)
                inner = (9 if size == "fits" else 1) if quick else (11 if size == "fits" else 3)
                wl = w.workload(size)
                script = tmp / f"{wl.name}.dml"
                script.write_text(wl.script(inner, ds))
                fuse_script = tmp / f"{wl.name}-fused.dml"
                fuse_inner = 0  # (written before the first FuseME system: fused_runs)
                n, m = w.sizes[size]
                row: dict[str, Any] = {"name": wl.name, "workload": w.key, "title": w.title, "size": size,
                                       "shape": [n, m], "data": wl.data, "note": w.note, "inner": inner,
                                       "iters": w.iters, "block_size": w.bs,
                                       "input_bytes": _inputs(ds.arrays), "working_set_bytes": w.working_set(ds.arrays),
                                       "shape_str": ds.shape_str(list(w.inputs)), "systems": {}}
                row["working_set_x_limit"] = row["working_set_bytes"] / section["memory_limit_bytes"]
                results: dict[str, Result] = {}
                for system in (*SYSTEMS, *((*FUSEME_SYSTEMS, *FUSEME_BASELINES) if w.key in FUSEME_KEYS else ())):
                    progress(f"{w.key} {size}: {SYSTEM_LABELS[system]}")
                    if system.startswith("sds") and runner is None:
                        results[system] = Result(system, skipped=sds_note)
                        continue
                    if system.startswith("sds") and ds.sds_convert:
                        results[system] = Result(system, skipped=f"conversion failed: {ds.sds_convert}")
                        continue
                    settle(client)
                    if system in ("lafuse-hybrid", "lafuse-dask", "dask-array") and fresh_workers(client):
                        progress(f"{w.key} {size}: workers restarted (memory left behind) before {SYSTEM_LABELS[system]}")
                        row.setdefault("restarted_before", []).append(system)
                    fused = system in FUSEME_SYSTEMS and system != "lafuse-unfused"
                    if fused and not fuse_inner:
                        fuse_inner = fused_runs(inner, results.get("lafuse-dask"))
                        fuse_script.write_text(wl.script(fuse_inner, ds))
                    models: dict[str, Any] = {}
                    limit = fused_timeout(timeout, fuse_inner, results.get("lafuse-dask"), results.get("sds-spark")) \
                        if fused else timeout
                    if fused:  # the operators' byte models, from an untimed run that measures each
                        models = run_lafuse(fuse_script, ds, w, tmp, system, cluster.scheduler_address,
                                            _heap_size(sds_heaps[1]), limit).counts_extra
                        settle(client)
                    if system in FUSEME_SYSTEMS:  # (each timed from fresh workers, as the others are not: no record)
                        fresh_workers(client, always=True)
                    before = counters(client)
                    if system == "lafuse-local":
                        r = run_lafuse(script, ds, w, tmp, system, "", "", timeout)
                    elif system in ("lafuse-hybrid", "lafuse-dask", *FUSEME_SYSTEMS):
                        r = run_lafuse(fuse_script if fused else script, ds, w, tmp, system,
                                       cluster.scheduler_address, _heap_size(sds_heaps[1]), limit,
                                       fused_bytes=not fused)
                        r.counts_extra.update({k: v for k, v in models.items() if k not in r.counts_extra})
                        r.counts_extra["runs"] = fuse_inner if fused else inner
                    elif system == "dask-array":
                        r = run_dask_array(w, ds, cluster.scheduler_address, inner, timeout)
                    else:
                        mode = system.split("-")[1]
                        r = run_sds(runner, script, ds, mode, sds_heaps[0 if mode == "spark" else 1], tmp, timeout,
                                    codegen=system.endswith("-codegen"))
                        r.system = system
                    if system in ("lafuse-hybrid", "lafuse-dask", "dask-array", *FUSEME_SYSTEMS):
                        settle(client)
                        r.counts = {**delta(before, counters(client)), **r.counts_extra}
                    r.counts = _per_run(r.counts, int(r.counts_extra.get("runs", inner)))
                    results[system] = r
                ref = results["lafuse-local"].results
                for r in results.values():
                    if r.skipped:
                        r.check = "-"
                    elif r.error:
                        r.check = "ERROR: " + r.error
                    elif not r.results:
                        r.check = "no result"
                    elif not ref:
                        r.check = "no reference (lafuse local failed)"
                    else:
                        rd = rel_diff(tuple(r.results), tuple(ref))
                        r.check = "ok" if rd <= REL_TOL else f"MISMATCH rel {rd:.1e}"
                    row["systems"][r.system] = r.summary()
                row["verdict"] = verdict(row)
                if w.key in FUSEME_KEYS:
                    row["verdict_fuseme"] = fuseme_verdict(row)
                row["verdict_forced"] = verdict(row, "lafuse-dask", FORCED_AGAINST, near_local=False)
                row["seconds"] = time.perf_counter() - t_row
                row["data_seconds"] = t_data
                section["rows"].append(row)
                progress(summary_line(row))
                if partial is not None:  # what a killed run leaves behind
                    partial.write_text(json.dumps(section, indent=1, default=_json_default))
        finally:
            cluster.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    section["seconds"] = time.perf_counter() - t_start
    return section


def _json_default(o: Any) -> Any:
    return o.item() if isinstance(o, np.generic) else str(o)


def emit(result: dict[str, Any], path: str | None) -> None:
    """A command's results as JSON: into ``path``, or on stdout without one."""
    text = json.dumps(result, indent=1, default=_json_default)
    if path:
        Path(path).write_text(text)
    else:
        print(text)


def summary_line(row: dict[str, Any]) -> str:
    parts = []
    for k, e in row["systems"].items():
        if e["skipped"]:
            continue
        t = e["time"]
        parts.append(f"{k} {'-' if t is None else f'{t * 1e3:.4g}'}" + ("" if e["check"] == "ok" else f" [{e['check'][:50]}]"))
    return f"{row['name']} ({row['seconds']:.0f} s) ms: " + ", ".join(parts) + f" -> {row['verdict']}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs per process (make bench)")
    ap.add_argument("--only", action="append", default=None, help="workloads: " + ", ".join(BY_KEY))
    ap.add_argument("--sizes", default="fits,spills")
    ap.add_argument("--worker-memory", default=DEFAULT_WORKER_MEMORY)
    ap.add_argument("--no-systemds", action="store_true")
    ap.add_argument("--timeout", type=float, default=None,
                    help=f"s per process (default quick {QUICK_TIMEOUT:.0f}, else {TIMEOUT:.0f})")
    ap.add_argument("--json", default=None, help="write the section's JSON here")
    ap.add_argument("--dask-array", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--scheduler", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--inner", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--bs", type=int, default=1000, help=argparse.SUPPRESS)
    ap.add_argument("--iters", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--cg", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.dask_array:
        return dask_array_main(a.dask_array, a.scheduler, a.inner, a.bs, a.iters, a.cg, a.files)
    only = {n for x in a.only for n in x.split(",")} if a.only else None
    sec = run_section(a.quick, only, tuple(a.sizes.split(",")), a.worker_memory, not a.no_systemds,
                      timeout=a.timeout or (QUICK_TIMEOUT if a.quick else TIMEOUT),
                      partial=Path(a.json + ".partial") if a.json else None)
    emit(sec, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

