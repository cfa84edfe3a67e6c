"""Measuring this machine's rates for the cost model (``lafuse calibrate``).

Every rate is a small micro-benchmark: one warm-up call, then the *best* (shortest) of a few timed
repetitions, since noise (other processes, frequency ramps, page-cache misses) only ever makes a
run slower. What each field counts, exactly:

* ``mem_read_bw`` [bytes/s]: ``x.sum()`` (``np.add.reduce``) over a 64 MiB float64 array, i.e. the
  array's bytes over the time; single-threaded NumPy, like lafuse's element-wise kernels.
* ``mem_write_bw`` [bytes/s]: the *write-only* rate of a large result, as the cost model uses it
  (``read_bytes / mem_read_bw + write_bytes / mem_write_bw`` beyond the cache, see
  :func:`lafuse.cost.operators.mem_times`). We time ``np.multiply(x, 2.0, out=z)`` on the 64 MiB
  array into a touched 64 MiB output (``lafuse run`` keeps freed memory for reuse, and the growth of
  the process is priced by ``first_touch_bw``), take away the time the read of ``x`` needs at
  ``mem_read_bw``, and divide the output's bytes by the rest. The write share is clamped to at least
  a quarter of the measured time, so a noisy read rate cannot make it absurd.
* ``cache_bw`` [bytes/s]: read plus written bytes of ``np.multiply(a, b)`` (fresh result) over
  operands and result that fill half of the last-level cache, repeated, so they stay in it.
* ``cache_bytes`` [bytes]: the last-level cache of CPU 0 as Linux's sysfs reports it.
* ``blas_flops`` [FLOP/s]: ``2 n^3`` over the time of ``A @ B`` for dense ``n x n`` float64
  (n = 1500, 1000 when quick), with as many BLAS threads as the library uses by default.
* ``elementwise_rate`` [cells/s]: ``np.add(x, y, out=z)`` on 1e5-cell arrays (2.4 MB in all, cache
  resident), repeated in a loop; output preallocated, so this is the operation alone (memory traffic
  of large operands is priced by the bandwidths).
* ``transcendental_rate`` [cells/s]: ``np.exp(x, out=z)`` on the same arrays (values in [-1, 1)).
* ``sparse_rate`` [non-zeros/s]: a 20000 x 5000 ``scipy.sparse.csr_array`` with density 1%
  (1e6 non-zeros; half that when quick): ``nnz`` over the mean time of ``A @ v`` (dense vector) and
  ``A.sum(axis=0)`` (colSums), i.e. ``2 nnz / (t_matvec + t_colsums)``.
* ``instruction_overhead`` [s/instruction]: a DML loop of scalar statements (``s = s + 1``,
  ``t = t * 0.5 + s``) compiled once and run by lafuse's interpreter (metadata checks and statistics
  off); the run time over the number of instructions executed (counted by a
  :class:`lafuse.runtime.stats.Stats` run). It includes the per-block dispatch and the trivial scalar work,
  but not compilation.
* ``csv_read_rate`` / ``csv_write_rate`` [cells/s]: lafuse's own ``read_value`` / ``write_value``
  (``lafuse.runtime.io``, ``format="csv"``, including the ``.mtd``) of a 400 x 500 matrix of random
  doubles (2e5 cells; 200 x 250 when quick) in a temporary directory; cells over the time.
* ``rand_rate``, ``transpose_rate``, ``rowagg_rate`` [cells/s]: lafuse's own kernels for dense
  ``rand`` (the SystemDS-compatible generator), ``t`` of a 2000x1000 matrix and ``rowMins`` over 10
  columns; ``transcendental_rate`` is lowered to ``log``/``exp`` on that 2e6-cell matrix if slower.
* ``matrix_op_overhead`` [s/instruction]: a DML loop of 10x10 matrix statements, time per instruction.
* ``first_touch_bw`` [bytes/s]: filling a fresh 192-384 MiB ``np.empty`` array once: memory the
  process never used pays page faults; the cost model charges it for growth beyond the process's peak.
* ``binary_read_bw`` [bytes/s]: ``np.load`` of a 50 MiB ``.npy`` just written
  to a temporary directory, so it is served from the page cache: array bytes over the time.
* ``codegen_compile_time``: kept at its measured default (a cold Numba compile per kernel; ``--stats``
  reports each kernel's actual compile time).
* ``numba_import_time``, ``numba_first_load`` [s]: Numba's start-up as a fresh ``lafuse run`` of a
  one-kernel script (``--fusion fuse-all --stats``, a private plan cache filled by one cold run first,
  no background start) reports it: "importing Numba", and the one disk-cache load less a later load's
  ``CODEGEN_WARM_LOAD_TIME``. The median of three runs, not the best: a process start is exposed to
  the page cache and the scheduler as every run's is. Not measured when quick (the defaults apply).
* ``net_bw`` [bytes/s]: a 64 MiB float64 block that one worker of a 2-worker Dask LocalCluster on
  loopback (as lafuse starts one) fetches from the other for a task: its bytes over the task's
  round trip, the best of three after a warm-up; the network bandwidth of paper 004's cuboid cost
  (lafuse.cost.cuboid). Not measured when quick (starting a cluster takes seconds).
* ``fitted``: a cost function per local implementation of the format optimizer (``cost.fit.LOCAL_IMPLS``:
  dense and CSR products, conversions, transposes), fitted (cost.fit: non-negative, relative least
  squares over FLOPs, bytes and calls; paper 002 §7) to the best of 2 (quick) or 4 timings of each at
  5 (quick) or 8 shapes, CSR at densities 1%, 5% and 20%; ``--show`` states each fit's R² and median
  relative error.
* ``threads``: the BLAS thread count (via threadpoolctl when installed), else the CPUs this process
  may run on. Only ``blas_flops`` uses several threads; the other rates are single-threaded.
"""

from __future__ import annotations

import io
import math
import operator
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from functools import partial
from typing import Any

import numpy as np

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost import constants as K
from lafuse.cost.fit import LOCAL_IMPLS, LinearCost, fit, local_features
from lafuse.cost.profile import HardwareProfile
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.io import read_value, write_value
from lafuse.runtime.local.kernels import KERNELS
from lafuse.runtime.stats import Stats

Progress = Callable[[str, int, int], None]  # (step about to run, steps done, steps in all)

_MEM_CELLS = 8 * 2**20  # 64 MiB of float64
_CACHE_CELLS = 100_000  # 3 arrays of 800 KB: cache resident


def _best(fn: Callable[[], Any], reps: int, inner: int = 1) -> float:
    """Seconds of one call of ``fn``: a warm-up, then the best of ``reps`` timings of ``inner`` calls."""
    fn()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return max(best, 1e-9)


def _threads() -> int:
    try:
        from threadpoolctl import threadpool_info  # deferred: threadpoolctl, only to read BLAS's threads

        counts = [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]
        if counts:
            return max(counts)
    except Exception:  # threadpoolctl is optional; any trouble there falls back to the CPU count
        pass
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cache_size() -> float:
    """Bytes of the last-level cache, as Linux's sysfs reports it for CPU 0 (in a VM: the guest's
    share; ``getconf`` may report the host's whole cache), else the default."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = (0, 0.0)
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            with open(os.path.join(base, d, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(base, d, "size")) as f:
                size = f.read().strip().upper()
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
            nbytes = float(size.rstrip("KMG")) * mult
            best = max(best, (level, nbytes))
    except (OSError, ValueError):
        pass
    return best[1] if best[1] > 0 else float(K.DEFAULT_CACHE_BYTES)


def _memory(quick: bool) -> tuple[float, float, float, float]:
    x = np.random.default_rng(0).random(_MEM_CELLS)
    z = np.zeros_like(x)  # touched: the write rate excludes page faults (first_touch_bw prices them)
    nbytes = float(x.nbytes)
    reps = 3 if quick else 10
    t_read = _best(x.sum, reps)
    read_bw = nbytes / t_read
    t_rw = _best(lambda: np.multiply(x, 2.0, out=z), reps)
    t_write = max(t_rw - nbytes / read_bw, 0.25 * t_rw)
    llc = cache_size()
    n = max(int(llc / 2 / 3 / 8), 1024)  # x * y over operands and result filling half the cache
    a, b = x[:n].copy(), x[n:2 * n].copy()
    t_cache = _best(lambda: np.multiply(a, b), reps * 3, 10)
    return read_bw, nbytes / t_write, 3.0 * n * 8 / t_cache, llc


def _blas(quick: bool) -> float:
    n = 1000 if quick else 1500
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n)), rng.random((n, n))
    t = _best(lambda: a @ b, 2 if quick else 5)
    return 2.0 * n**3 / t


def _elementwise(quick: bool) -> tuple[float, float]:
    rng = np.random.default_rng(2)
    x = rng.random(_CACHE_CELLS) * 2.0 - 1.0
    y = rng.random(_CACHE_CELLS)
    z = np.empty_like(x)
    reps, inner = (3, 30) if quick else (15, 100)
    t_add = _best(lambda: np.add(x, y, out=z), reps, inner)
    t_exp = _best(lambda: np.exp(x, out=z), reps, inner)
    return _CACHE_CELLS / t_add, _CACHE_CELLS / t_exp


def _sparse(quick: bool) -> float:
    import scipy.sparse as sp  # deferred: SciPy, only for the sparse measurements

    rows, cols, per_row = (10_000 if quick else 20_000), 5000, 50  # density 1%
    rng = np.random.default_rng(3)
    nnz = rows * per_row
    indptr = np.arange(0, nnz + 1, per_row, dtype=np.int32)
    # one column in each of ``per_row`` bands of 100 columns: sorted, distinct (canonical CSR)
    band = cols // per_row
    indices = (np.arange(per_row, dtype=np.int32) * band
               + rng.integers(0, band, size=(rows, per_row), dtype=np.int32)).ravel()
    a = sp.csr_array((rng.random(nnz), indices, indptr), shape=(rows, cols))
    v = np.ones(cols)
    reps = 3 if quick else 7
    t_mv = _best(lambda: a @ v, reps)
    t_cs = _best(lambda: a.sum(axis=0), reps)
    return 2.0 * nnz / (t_mv + t_cs)


def _format_costs(quick: bool) -> tuple[tuple[str, LinearCost], ...]:
    """Runs of each local implementation at several shapes and densities, and the cost function fitted
    to them (cost.fit, paper 002 §7: its features are FLOPs, bytes and the units a kernel loops over),
    for the format optimizer (plan.layout.local) to price dense, CSR and CSC forms against each other."""
    import scipy.sparse as sp  # deferred: SciPy, only for the sparse measurements

    rng = np.random.default_rng(7)
    from lafuse.runtime.local.kernels_reorg import k_rix  # deferred: slices are timed through lafuse's kernel

    shapes = [(200, 200, 200), (600, 300, 40), (1500, 500, 20), (300, 1200, 300), (2000, 200, 100), (20000, 100, 10), (50000, 100, 8)]
    if not quick:
        shapes += [(1000, 1000, 200), (4000, 400, 50), (500, 2000, 500), (100000, 50, 4)]
    densities = (0.01, 0.05, 0.2)
    runs: dict[str, list[tuple[tuple[float, ...], float]]] = {name: [] for name in LOCAL_IMPLS}
    reps = 2 if quick else 4
    for m, k, n in shapes:
        a, b = rng.random((m, k)), rng.random((k, n))
        runs["mm-dense-dense"].append((local_features("mm-dense-dense", m, k, n, 0),
                                       _best(partial(operator.matmul, a, b), reps)))
        runs["transpose-dense"].append((local_features("transpose-dense", m, k, 0, 0),
                                        _best(partial(np.ascontiguousarray, a.T), reps)))
        for d in densities:
            s_a = sp.random_array((m, k), density=d, format="csr", rng=rng)
            s_b = sp.random_array((k, n), density=d, format="csr", rng=rng)
            c_a, c_b = s_a.tocsc(), s_b.tocsc()
            nnz_a, nnz_b = float(s_a.nnz), float(s_b.nnz)
            few = max(1, min(n, m, k) // 4)  # rows or columns a slice takes (and one)
            timed = (("mm-csr-dense", partial(operator.matmul, s_a, b), nnz_a, (m, k, n)),
                     ("mm-csc-dense", partial(operator.matmul, c_a, b), nnz_a, (m, k, n)),
                     ("mm-dense-csr", partial(operator.matmul, a, s_b), nnz_b, (m, k, n)),
                     ("mm-dense-csc", partial(operator.matmul, a, c_b), nnz_b, (m, k, n)),
                     ("to-csr", partial(sp.csr_array, s_a.toarray()), nnz_a, (m, k, n)),
                     ("to-dense", s_a.toarray, nnz_a, (m, k, n)),
                     ("to-csc", s_a.tocsc, nnz_a, (m, k, n)),
                     ("transpose-csr", s_a.T.tocsr, nnz_a, (m, k, n)),  # (.T: a CSC view; tocsr does the work)
                     ("slice-major", partial(k_rix, s_a, 1, few, 1, k), nnz_a, (m, k, few)),
                     ("slice-major", partial(k_rix, c_a, 1, m, 1, 1), nnz_a, (k, m, 1)),
                     ("slice-minor", partial(k_rix, s_a, 1, m, 1, few), nnz_a, (m, k, few)),
                     ("slice-minor", partial(k_rix, c_a, 1, 1, 1, k), nnz_a, (k, m, 1)))
            for name, fn, nz, (mm, kk, nn) in timed:
                runs[name].append((local_features(name, mm, kk, nn, nz), _best(fn, reps)))
    return tuple((name, fit([f for f, _ in rs], [t for _, t in rs])) for name, rs in sorted(runs.items()))


def _seconds_per_instruction(text: str, reps: int) -> float:
    """Run a DML program through lafuse's interpreter: one instrumented run counts the instructions
    it executes (and warms up), timed runs without Stats give the time; compilation is excluded."""

    cfg = cfgmod.get().with_(check_metadata=False, stats=False, explain=None, debug=False)
    sink = io.StringIO()
    with cfgmod.using(cfg):
        stats = Stats()
        comp = Compiler(cfg, {}, [], stats)
        prog = comp.compile_text(text, "<calibrate>")
        Interpreter(prog, comp, out=sink, stats=stats).run()
        count = sum(stats.op_count.values())
        t = _best(lambda: Interpreter(prog, comp, out=sink).run(), reps)
    return t / max(count, 1)


def _instruction_overhead(quick: bool) -> float:
    iters = 1000 if quick else 3000
    text = (f"s = 0\nt = 1\nfor (i in 1:{iters}) {{\n  s = s + 1\n  t = t * 0.5 + s\n}}\n"
            f"print(s + t)\n")
    return _seconds_per_instruction(text, 3 if quick else 7)


def _kernels(quick: bool) -> dict[str, float]:
    """Rates of lafuse's own kernels where they are far from the roofline: the SystemDS-compatible
    rand generator, transpose, row aggregates over few columns, transcendental functions on data
    larger than the caches, and the per-instruction overhead of a small-matrix operation."""

    reps = 3 if quick else 5
    n = 500_000 if quick else 2_000_000
    x = np.random.default_rng(6).random((n // 1000, 1000))
    tall = np.random.default_rng(7).random((n // 10, 10))
    out = {
        "rand_rate": n / _best(lambda: KERNELS["rand"](n // 100, 100, 0.0, 1.0, 1.0, "uniform", 7, 1.0), reps),
        "transpose_rate": n / _best(lambda: np.ascontiguousarray(KERNELS["t"](x)), reps),
        "rowagg_rate": n / _best(lambda: KERNELS["rowMins"](tall), reps),
        "transcendental_big": n / max(_best(lambda: KERNELS["log"](x), reps), _best(lambda: KERNELS["exp"](x), reps)),
    }
    iters = 500 if quick else 2000
    text = (f"A = matrix(0.5, 10, 10)\nB = matrix(0.25, 10, 10)\nfor (i in 1:{iters}) {{\n"
            f"  A = A * 0.5 + B\n  A = A - colMeans(A)\n}}\nprint(sum(A))\n")
    out["matrix_op_overhead"] = _seconds_per_instruction(text, reps)
    return out


def _first_touch(quick: bool) -> float:
    """Bytes/s of filling memory the process never had before (page faults of a fresh mapping): an
    allocation larger than any earlier one in this process, filled once."""
    cells = (3 if quick else 6) * _MEM_CELLS  # beyond the 64 MiB arrays of the other steps
    x = np.empty(cells)
    t0 = time.perf_counter()
    x.fill(1.0)
    t = time.perf_counter() - t0
    return x.nbytes / max(t, 1e-9)


def _csv(quick: bool, tmp: str) -> tuple[float, float]:

    shape = (200, 250) if quick else (400, 500)
    m = np.random.default_rng(4).random(shape)
    path = os.path.join(tmp, "calibrate.csv")
    reps = 3 if quick else 5
    t_write = _best(lambda: write_value(m, path, {"format": "csv"}), reps)
    t_read = _best(lambda: read_value(path, {"format": "csv"}), reps)
    return m.size / t_read, m.size / t_write


def _binary(quick: bool, tmp: str) -> float:
    cells = 50 * 2**20 // 8
    x = np.random.default_rng(5).random(cells)
    path = os.path.join(tmp, "calibrate.npy")
    np.save(path, x, allow_pickle=False)
    nbytes = float(x.nbytes)
    del x
    t = _best(lambda: np.load(path, allow_pickle=False), 3 if quick else 5)
    return nbytes / t


_START_SCRIPT = "X = rand(rows=300, cols=20, seed=1)\nprint(sum((X + 1) * X - 2))\n"
_START_STATS = re.compile(r"disk cache hits (\d+) \(([0-9.]+) sec\.\).*importing Numba ([0-9.]+) sec\.")


def _numba_start(tmp: str, runs: int = 3) -> tuple[float, float] | None:
    """(import, first load beyond a later one) of Numba's start in fresh ``lafuse run`` processes,
    medians of ``runs``; None (with a warning) if a run fails or reports no single disk-cache load."""
    script = os.path.join(tmp, "start.dml")
    with open(script, "w") as f:
        f.write(_START_SCRIPT)
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": os.path.join(tmp, "codegen"), "LAFUSE_NUMBA_PRESTART": "0",
           "LAFUSE_BACKGROUND": "0"}
    cmd = [sys.executable, "-m", "lafuse", "run", script, "--fusion", "fuse-all", "--stats"]
    imports, loads = [], []
    for i in range(runs + 1):  # the first run compiles the kernel into the private cache
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        m = _START_STATS.search(r.stdout)
        if r.returncode != 0 or m is None or (i > 0 and m.group(1) != "1"):
            print(f"lafuse: warning: could not measure Numba's start-up (exit {r.returncode}): "
                  f"{(r.stderr or r.stdout).strip()[-300:]}; the defaults apply", file=sys.stderr)
            return None
        if i > 0:
            loads.append(float(m.group(2)))
            imports.append(float(m.group(3)))
    first = statistics.median(loads) - K.CODEGEN_WARM_LOAD_TIME
    return statistics.median(imports), max(first, 1e-3)


def _block_bytes(block: Any) -> int:
    return int(block.nbytes)


def worker_transfer(client: Any, runs: int = 3, mib: int = 64) -> float:
    """Bytes/s of a ``mib`` MiB block that one worker of ``client``'s cluster fetches from another for
    a task (the best of ``runs`` after a warm-up; the task's round trip through the scheduler
    included, ~2 ms beside ~50 ms of transfer here)."""
    from distributed import wait  # deferred: distributed, only when measuring a cluster

    from lafuse.runtime.dask import cluster  # deferred: see distributed

    workers = sorted(cluster.workers(client))
    if len(workers) < 2:
        raise ValueError(f"measuring a transfer between workers needs two, the cluster has {len(workers)}")
    a, b = workers[:2]
    best, nbytes = math.inf, 0
    for i in range(runs + 1):
        block = client.submit(np.full, (mib * 2**17,), float(i), workers=[a], pure=False)
        wait([block])
        t = time.perf_counter()
        nbytes = client.submit(_block_bytes, block, workers=[b], allow_other_workers=False, pure=False).result()
        dt = time.perf_counter() - t
        del block
        if i:
            best = min(best, dt)
    return nbytes / best


def _local_worker_transfer() -> float | None:
    """``worker_transfer`` on a LocalCluster of two single-thread worker processes on loopback, started
    and closed here; None (the default stays) if it cannot start."""
    import logging  # deferred: only for the cluster

    try:
        from distributed import Client, LocalCluster  # deferred: distributed (~0.5 s)

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, Client(cluster) as c:
            return worker_transfer(c)
    except Exception as e:  # noqa: BLE001 - a rate we could not measure keeps its default
        print(f"lafuse: warning: could not measure the Dask workers' transfer rate ({type(e).__name__}: {e}); "
              "the default applies", file=sys.stderr)
        return None


def calibrate(quick: bool = False, progress: Progress | None = None) -> HardwareProfile:
    """Measure this machine (a few seconds; ``quick`` trades accuracy for well under 3 s)."""
    steps = ["memory bandwidth", "BLAS matrix multiply", "element-wise and exp", "sparse traversal",
             "interpreter overhead", "lafuse kernels", "csv read/write", "binary read", "format implementations"]
    if not quick:
        steps += ["Numba start-up", "Dask worker-to-worker transfer"]
    done = 0

    def step(name: str) -> None:
        nonlocal done
        if progress is not None:
            progress(name, done, len(steps))
        done += 1

    r: dict[str, Any] = {}
    step(steps[0])
    r["mem_read_bw"], r["mem_write_bw"], r["cache_bw"], r["cache_bytes"] = _memory(quick)
    step(steps[1])
    r["blas_flops"] = _blas(quick)
    step(steps[2])
    r["elementwise_rate"], r["transcendental_rate"] = _elementwise(quick)
    step(steps[3])
    r["sparse_rate"] = _sparse(quick)
    step(steps[4])
    r["instruction_overhead"] = _instruction_overhead(quick)
    step(steps[5])
    r["first_touch_bw"] = _first_touch(quick)
    kern = _kernels(quick)
    # exp/log on data beyond the caches, if slower than the cache-resident rate
    r["transcendental_rate"] = min(r["transcendental_rate"], kern.pop("transcendental_big"))
    r.update(kern)
    with tempfile.TemporaryDirectory(prefix="lafuse-calibrate-") as tmp:
        step(steps[6])
        r["csv_read_rate"], r["csv_write_rate"] = _csv(quick, tmp)
        step(steps[7])
        r["binary_read_bw"] = _binary(quick, tmp)
        step(steps[8])
        fitted = _format_costs(quick)
        if not quick:
            step(steps[9])
            start = _numba_start(tmp)
            if start is not None:
                r["numba_import_time"], r["numba_first_load"] = start
    if not quick:
        step(steps[10])
        net = _local_worker_transfer()
        if net is not None:
            r["net_bw"] = net
    if progress is not None:
        progress("done", len(steps), len(steps))
    return HardwareProfile(
        **{k: float(v) for k, v in r.items()},
        codegen_compile_time=K.DEFAULT_CODEGEN_COMPILE_TIME,  # measuring would cost a cold Numba compile
        threads=_threads(),
        source=f"calibrated {date.today().isoformat()}",
        fitted=fitted,
    )
