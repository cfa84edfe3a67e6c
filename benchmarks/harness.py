"""The measuring harness shared by the micro-benchmarks (``micro.py``) and the algorithms
(``algorithms.py``): data written for lafuse and SystemDS, one DML script per workload, the systems that run
it (lafuse per fusion policy, SystemDS codegen off/on, in-process NumPy, numexpr, JAX, Numba), interleaved
rounds, and the check of every result against NumPy's."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))

import fusion_kernels as fk  # noqa: E402

REL_TOL = 1e-8
# run order: fuse-all first, as it compiles every kernel it fuses, so that the cost-based run after it
# finds them on disk instead of deferring them to a background compile the next measurement waits for
FUSION_POLICIES = ("fuse-all", "cost", "fuse-no-redundancy")
# the dense NumPy path of outer-log/outer-div materializes n x n doubles: above this, run it once only
HUGE_BYTES = 1e9


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------

@dataclass
class DataSet:
    name: str
    arrays: dict[str, Any]  # variable name -> ndarray or scipy CSR
    lafuse_files: dict[str, str] = field(default_factory=dict)
    sds_files: dict[str, str] = field(default_factory=dict)  # SystemDS binary
    gen_time: float = 0.0
    sds_convert: str | None = None  # error of the SystemDS conversion, if any

    def nbytes(self, names: list[str]) -> int:
        total = 0
        for n in names:
            a = self.arrays[n]
            total += a.data.nbytes + a.indices.nbytes + a.indptr.nbytes if sp.issparse(a) else a.nbytes
        return total

    def shape_str(self, names: list[str]) -> str:
        parts = []
        for n in names:
            a = self.arrays[n]
            s = f"{n} {a.shape[0]}x{a.shape[1]}"
            if sp.issparse(a):
                s += f" sparse {a.nnz / (a.shape[0] * a.shape[1]):.0e}"
            parts.append(s)
        return ", ".join(parts)


def csr(a: Any) -> sp.csr_array:
    m = sp.csr_array(a, dtype=np.float64)
    m.sum_duplicates()
    m.sort_indices()
    return m


def _mtd(a: Any, fmt: str) -> str:
    nnz = int(np.count_nonzero(a.data) if sp.issparse(a) else np.count_nonzero(a))  # stored zeros are no non-zeros
    return json.dumps({"data_type": "matrix", "value_type": "double", "rows": a.shape[0], "cols": a.shape[1],
                       "nnz": nnz, "format": fmt}, indent=4)


def write_lafuse(ds: DataSet, d: Path) -> None:
    for n, a in ds.arrays.items():
        if sp.issparse(a):
            p = d / f"{ds.name}-{n}.npz"
            sp.save_npz(p, a, compressed=False)
        else:
            p = d / f"{ds.name}-{n}.npy"
            np.save(p, a)
        Path(str(p) + ".mtd").write_text(_mtd(a, "binary"))
        ds.lafuse_files[n] = str(p)


def _write_mm(path: Path, a: sp.csr_array) -> None:
    coo = a.tocoo()
    with open(path, "w") as f:
        f.write(f"%%MatrixMarket matrix coordinate real general\n{a.shape[0]} {a.shape[1]} {a.nnz}\n")
        np.savetxt(f, np.column_stack([coo.row + 1, coo.col + 1, coo.data]), fmt=("%d", "%d", "%.17g"))


def _write_text(path: Path, a: Any) -> None:
    if sp.issparse(a):
        _write_mm(path, a)
    else:
        np.savetxt(path, a, fmt="%.17g", delimiter=",")


def write_systemds(sets: list[DataSet], d: Path, java: JavaRunner) -> None:
    """Text files (exact: %.17g; written by two processes, formatting is the slow part), converted by one
    SystemDS run (one JVM start for all data sets) to SystemDS binary, so the timed runs do not parse text."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    lines, nv, jobs = [], {}, []
    for ds in sets:
        for n, a in ds.arrays.items():
            key = f"m{len(nv) // 2}"
            out = d / f"{ds.name}-{n}.sds"
            src = d / f"{ds.name}-{n}.{'mtx' if sp.issparse(a) else 'csv'}"
            jobs.append((src, a))
            lines.append(f'{key} = read($in{key}, format="mm")' if sp.issparse(a) else
                         f'{key} = read($in{key}, format="csv", header=FALSE, rows={a.shape[0]}, cols={a.shape[1]})')
            lines.append(f'write({key}, $out{key}, format="binary")')
            nv[f"in{key}"], nv[f"out{key}"] = str(src), str(out)
            ds.sds_files[n] = str(out)
    if not lines:
        return
    # spawned, not forked: this process already runs Numba's and JAX's threads
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_write_text, *zip(*jobs, strict=True)))
    script = d / f"convert-{sets[0].name}.dml"
    script.write_text("\n".join(lines) + "\n")
    res = java.run(script, nv, codegen=False, workdir=d)
    for ds in sets:
        if res.error:
            ds.sds_convert = res.error
        for n in ds.arrays:  # the text copies are not needed any more
            for ext in ("csv", "mtx"):
                (d / f"{ds.name}-{n}.{ext}").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------------------

def _checksum(m: Any) -> tuple[float, ...]:
    if sp.issparse(m):
        m = m.toarray()
    m = np.asarray(m)
    return (float(m.sum()), float((m * m).sum()))


@dataclass
class Workload:
    """One benchmark: its DML (timed between two ``time()`` calls), the in-process implementations of the
    other systems (None: the system cannot run it, ``*_note`` says why) and how to check its results."""
    name: str
    expr: str
    data: str
    inputs: list[str]
    body: str  # DML of the timed operation (assigns r, r1..rN or R)
    result: str  # "scalar", "scalars" (r1..r<n_out>) or "matrix" (R, of shape out_shape)
    numpy: Callable[[dict], Any]
    numba: Callable[[dict], Any] | None
    numexpr: Callable[[Any, dict], Any] | None = None
    jax: Callable[[Any, dict], Callable[[], Any]] | None = None  # (jax module, arrays) -> thunk
    jax_note: str = ""
    numpy_note: str = ""
    numba_note: str = ""
    numexpr_note: str = "n/a: not an element-wise expression numexpr evaluates"
    n_out: int = 1
    out_shape: Callable[[DataSet], tuple[int, int]] | None = None
    group: str = "micro"  # or "algorithm"
    size: str = ""  # algorithms: "small" or "large"
    algorithm: str = ""
    passes: int = 1  # how often the inputs must be read at least (algorithms: outer iterations)
    single: bool = False  # one timed run per process (algorithms), no first iteration apart
    rel_tol: float = REL_TOL
    # systems whose wrong result here is a verified defect of theirs, with the evidence: reported as
    # "KNOWN MISMATCH ..." (flagged in the report), not as a failed suite run
    known_wrong: dict[str, str] = field(default_factory=dict)
    # bytes any implementation must read, if fewer than all of the inputs (an outer product over a sparse X
    # needs only the rows of U and V that X's non-zeros touch)
    needed_bytes: Callable[[dict], int] | None = None
    # the NumPy twin as a process of its own (argv before the NAME=PATH inputs), timed as lafuse is: one
    # run in a fresh process (algorithms); the in-process, warm time is reported as "numpy-warm"
    numpy_process: list[str] | None = None
    # the same algorithm written with lafuse's Python API (benchmarks/python_api.py), a process of its
    # own timed as lafuse's DML is (argv before the NAME=PATH inputs); None: no such version
    python_process: list[str] | None = None

    def script(self, inner: int, ds: DataSet) -> str:
        reads = "".join(f'{n} = read(${n}, format="binary")\n' for n in self.inputs)
        if self.result == "matrix":
            assert self.out_shape is not None
            rows, cols = self.out_shape(ds)
            init = f"R = matrix(0, rows={rows}, cols={cols})\n"
            show = 'print("R " + sum(R))\nprint("R " + sum(R^2))\n'
        elif self.result == "scalars":
            init = "".join(f"r{k} = 0\n" for k in range(1, self.n_out + 1))
            show = "".join(f'print("R " + r{k})\n' for k in range(1, self.n_out + 1))
        else:
            init, show = "r = 0\n", 'print("R " + r)\n'
        body = "".join(f"    {line}\n" for line in self.body.strip("\n").splitlines())
        loops = 1 if self.single else inner
        return (f"{reads}{init}for (i in 1:{loops}) {{\n  t0 = time()\n  if (i > 0) {{\n{body}  }}\n"
                f"  t1 = time()\n  print(\"T \" + (t1 - t0))\n" + "".join("  " + s + "\n" for s in show.splitlines())
                + "}\n")


def _results(v: Any, kind: str) -> tuple[float, ...]:
    if kind == "matrix":
        return _checksum(v)
    if isinstance(v, tuple):
        return tuple(float(x) for x in v)
    return (float(v),)


# ---------------------------------------------------------------------------------------------
# systems
# ---------------------------------------------------------------------------------------------

@dataclass
class Run:
    """One measurement of one system: in-script (or in-process) operation times, process wall time."""
    op: list[float] = field(default_factory=list)  # seconds, warm iterations
    first: float | None = None  # first iteration of a process (or the warm-up call)
    wall: float | None = None
    results: tuple[float, ...] = ()
    top: list[str] = field(default_factory=list)  # heavy-hitter instructions
    error: str | None = None
    codegen: dict[str, float] = field(default_factory=dict)  # lafuse's --stats codegen lines, parsed


_HH = re.compile(r"^\s*\d+\s+(\S+)\s+([\d.]+)\s+(\d+)")


def parse_script_output(lines: list[str]) -> tuple[list[float], list[float]]:
    """(seconds of each "T <ns>" line, values of the "R <x>" lines of the first iteration)."""
    times, res, per_iter = [], [], 0
    for line in lines:
        if line.startswith("T "):
            times.append(int(line[2:]) / 1e9)
        elif line.startswith("R "):
            res.append(float(line[2:]))
    if times:
        per_iter = len(res) // len(times)
    return times, res[:per_iter]


def split_first(times: list[float], single: bool) -> tuple[float | None, list[float]]:
    """(first iteration, the others); a single-run script (an algorithm) has no first one apart."""
    if single:
        return None, times
    return (times[0], times[1:]) if times else (None, [])


_CODEGEN_STATS = {
    "dags": r"DAGs optimized (\d+)", "fused_ops": r"fused operators (\d+)", "cplans": r"\(CPlans (\d+)\)",
    "memo_entries": r"memo entries (\d+)", "optimizer_s": r"optimizer time ([\d.]+) sec",
    "partitions": r"partitions (\d+)", "points": r"interesting points (\d+)", "plans_total": r"plans (\d+) total",
    "plans_evaluated": r"(\d+) evaluated", "pruned_cost": r"(\d+) skipped by cost",
    "pruned_structural": r"(\d+) skipped by structure", "kernels_compiled": r"kernels: compiled (\d+)",
    "compile_s": r"kernels: compiled \d+ \(([\d.]+) sec", "disk_hits": r"disk cache hits (\d+)",
    # the first kernel line is the slowest one (lafuse.runtime.stats sorts them by time)
    "kernel_max_s": r"kernel [0-9a-f]+: cold compile ([\d.]+) sec",
    "load_s": r"disk cache hits \d+ \(([\d.]+) sec", "mem_hits": r"memory cache hits (\d+)",
    "numba_import_s": r"importing Numba ([\d.]+) sec", "deferred": r"\((\d+) kernels that would pay from the disk",
}


def codegen_stats(out: str) -> dict[str, float]:
    """Paper 000 Table 3 and Figure 12 from ``lafuse run --stats``: optimizer and compilation effort."""
    d: dict[str, float] = {}
    for key, pat in _CODEGEN_STATS.items():
        m = re.search(pat, out)
        if m:
            d[key] = float(m.group(1))
    if d:
        d.setdefault("deferred", 0)
    return d


def lafuse_env(cache: str | None) -> dict[str, str]:
    """Environment of a measured ``lafuse run``: its own plan cache (if given), this tree's lafuse, and
    Python's bytecode cache on as in an installed package. Why: with PYTHONDONTWRITEBYTECODE set (as in some sandboxes and CI
    images), every run compiles lafuse's sources again, and the code generator's modules, which only
    fused runs import, cost ~40 ms more per run (measured: importing the primitives 0.071 s without
    bytecode, 0.032 s with)."""
    env = dict(os.environ)
    if cache:
        env["LAFUSE_CODEGEN_CACHE"] = cache
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # the lafuse of this harness's tree: run from a second worktree (an A/B against an older commit),
    # ``python -m lafuse`` in the script's directory would import the installed (editable) checkout
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT.parent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def heavy_hitters(raw: str, k: int = 3) -> list[str]:
    out, on = [], False
    for line in raw.splitlines():
        if line.startswith("Heavy hitter instructions"):
            on = True
            continue
        m = _HH.match(line) if on else None
        if m:
            out.append(f"{m.group(1)}x{m.group(3)}")
        elif on and out:
            break
    return out[:k]


class JavaRunner:
    """SystemDS 3.4 as its own JVM, with the default JIT and GC (the conformance tests' start-up flags
    would slow the operations down)."""

    def __init__(self, heap: str):
        from conformance import sds

        self.home = sds.systemds_home()
        self.java = sds.java_executable()
        self.sds = sds
        self.heap = heap

    def command(self, script: Path, nvargs: dict[str, str], cfg: Path) -> list[str]:
        cp = f"{self.home / 'SystemDS.jar'}{os.pathsep}{self.home / 'lib'}{os.sep}*"
        return [self.java, f"-Xmx{self.heap}", "-Xms1g", "--add-modules=jdk.incubator.vector", "-cp", cp,
                "org.apache.sysds.api.DMLScript", "-f", str(script), "-exec", "singlenode", "-stats", "5",
                "-config", str(cfg), "-nvargs", *[f"{k}={v}" for k, v in nvargs.items()]]

    def run(self, script: Path, nvargs: dict[str, str], codegen: bool, workdir: Path, single: bool = False) -> Run:
        cfg = workdir / f"sds-codegen-{'on' if codegen else 'off'}.xml"
        if not cfg.exists():
            cfg.write_text(f"<root>\n  <sysds.codegen.enabled>{str(codegen).lower()}</sysds.codegen.enabled>\n"
                           "</root>\n")
        t0 = time.perf_counter()
        proc = subprocess.run(self.command(script, nvargs, cfg), cwd=workdir, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        lines, error = self.sds.parse_stdout(proc.stdout)
        r = Run(wall=wall, top=heavy_hitters(proc.stdout))
        if error or proc.returncode != 0:
            r.error = (error or proc.stderr[-500:] or f"exit {proc.returncode}").strip().splitlines()[-1][:200]
            return r
        times, r.results = parse_script_output(lines)
        r.first, r.op = split_first(times, single)
        return r


def wait_deferred(cache: str | None, env: dict[str, str], timeout: float = 600.0) -> None:
    """Until the background compile a run started is done: its marker (``.deferred_<pid>.json`` in the
    cache) is gone. Polled here, not by ``python -m lafuse.background --wait``, which costs a Python
    start per measurement; without a cache of our own, that command it is."""
    if cache is None:
        subprocess.run([sys.executable, "-m", "lafuse.background", "--wait"], check=False, env=env)
        return
    end = time.time() + timeout
    while time.time() < end:
        fresh = []
        for p in Path(cache).glob(".deferred_*.json"):
            try:
                fresh.append(time.time() - p.stat().st_mtime < timeout)
            except OSError:  # finished meanwhile
                pass
        if not any(fresh):
            return
        time.sleep(0.05)


def run_lafuse(script: Path, nvargs: dict[str, str], cfg: Path, cache: str | None = None,
               single: bool = False, stats: bool = True) -> Run:
    """One ``lafuse run`` process. ``stats``: with ``--stats`` (heavy hitters and the codegen lines),
    which times every instruction: a timed run goes without, as a user's run does (it cost a mini-batch
    MLP's loop 13-25% more, and 50% while --stats kept the interpreter loop)."""
    cmd = [sys.executable, "-m", "lafuse", "run", str(script), "--config", str(cfg),
           *(["--stats", "5"] if stats else []), "--nvargs", *[f"{k}={v}" for k, v in nvargs.items()]]
    env = lafuse_env(cache)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=script.parent, env=env)
    r = Run(wall=time.perf_counter() - t0, top=heavy_hitters(proc.stdout), codegen=codegen_stats(proc.stdout))
    # a kernel that pays only from the disk cache compiles after the run in the background
    # (codegen.deferred): the next measurement must not share the CPU with it
    wait_deferred(cache, env)
    return _timed_output(r, proc, single)


def run_numpy_process(w: Workload, ds: DataSet) -> Run:
    """One run of the NumPy twin in a process of its own (benchmarks/numpy_twin.py)."""
    assert w.numpy_process is not None
    cmd = [*w.numpy_process, *[f"{k}={ds.lafuse_files[k]}" for k in w.inputs]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return _timed_output(Run(wall=time.perf_counter() - t0), proc, True)


def run_python_process(w: Workload, ds: DataSet, cache: str | None) -> Run:
    """One run of the Python-API version in a process of its own, on lafuse's plan cache of the workload
    (the lafuse of this tree: ``lafuse_env``)."""
    assert w.python_process is not None
    cmd = [*w.python_process, *[f"{k}={ds.lafuse_files[k]}" for k in w.inputs]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=lafuse_env(cache))
    return _timed_output(Run(wall=time.perf_counter() - t0), proc, True)


def _timed_output(r: Run, proc: subprocess.CompletedProcess, single: bool) -> Run:
    """``r`` with the times and results a process printed ("T <ns>", "R <x>"), or its error: the last
    line of what it wrote, when it failed."""
    if proc.returncode != 0:
        r.error = ((proc.stderr or proc.stdout).strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200]
        return r
    times, r.results = parse_script_output(proc.stdout.splitlines())
    r.first, r.op = split_first(times, single)
    return r


def run_inprocess(fn: Callable[[], Any], kind: str, inner: int, warm: bool) -> Run:
    r = Run()
    try:
        if warm:
            t0 = time.perf_counter()
            fn()
            r.first = time.perf_counter() - t0
        for _ in range(inner):
            t0 = time.perf_counter()
            v = fn()
            r.op.append(time.perf_counter() - t0)
        r.results = _results(v, kind)
    except Exception as e:  # a failing system is reported, not fatal
        r.error = f"{type(e).__name__}: {e}"[:200]
    return r


def optional_module(name: str, install: bool) -> tuple[Any, str]:
    """(module or None, note). Installs with pip into this interpreter's environment only if asked."""
    try:
        return importlib.import_module(name), ""
    except ImportError:
        if not install:
            return None, f"not installed (--with-{name})"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", name], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"pip install {name} failed: {proc.stderr.strip()[-150:]}"
    importlib.invalidate_caches()
    try:
        return importlib.import_module(name), ""
    except ImportError as e:
        return None, f"import {name} failed after install: {e}"


def comparison_modules(install_numexpr: bool = False, install_jax: bool = False) -> dict[str, tuple[Any, str]]:
    """numexpr and JAX as (module or None, note); JAX set to float64 on the CPU, the terms of the comparison."""
    mods = {"numexpr": optional_module("numexpr", install_numexpr), "jax": optional_module("jax", install_jax)}
    jax = mods["jax"][0]
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
    return mods


def systemds_runner(skip: bool, heap: str) -> tuple[JavaRunner | None, str]:
    """(runner, note): the note says why SystemDS does not run (left out, or no Java/SystemDS here)."""
    if skip:
        return None, "not run (--no-systemds)"
    try:
        return JavaRunner(heap), ""
    except Exception as e:
        return None, f"unavailable: {e}"


def machine(mods: dict[str, tuple[Any, str]], java: JavaRunner | None) -> dict[str, Any]:
    def version(mod: Any) -> str | None:
        return getattr(mod, "__version__", None) if mod is not None else None

    return {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "numba": fk.nb.__version__, "platform": platform.platform(), "jax": version(mods["jax"][0]),
            "numexpr": version(mods["numexpr"][0]), "systemds": java.sds.systemds_version() if java else None}


# ---------------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------------

@dataclass
class SystemResult:
    name: str
    runs: list[Run] = field(default_factory=list)
    note: str = ""
    skipped: str | None = None  # reason the system did not run
    top: list[str] = field(default_factory=list)  # heavy hitters of an untimed --stats run (lafuse)

    @property
    def ops(self) -> list[float]:
        return [t for r in self.runs for t in r.op]

    @property
    def error(self) -> str | None:
        return next((r.error for r in self.runs if r.error), None)

    def summary(self) -> dict[str, Any]:
        ops = self.ops
        walls = [r.wall for r in self.runs if r.wall is not None]
        firsts = [r.first for r in self.runs if r.first is not None]
        return {
            "op_median": statistics.median(ops) if ops else None, "op_min": min(ops) if ops else None,
            "op_max": max(ops) if ops else None, "op_samples": ops, "first": firsts,
            "wall_median": statistics.median(walls) if walls else None, "walls": walls,
            "results": list(self.runs[0].results) if self.runs and self.runs[0].results else [],
            "top": self.top or (self.runs[-1].top if self.runs else []), "error": self.error, "note": self.note,
            "skipped": self.skipped,
        }


def rel_diff(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    if len(a) != len(b) or not a:
        return math.inf
    return max(abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a, b, strict=True))


def _lafuse_configs(tmp: Path) -> dict[str, Path]:
    cfgs = {}
    for label, cfg in [("lafuse", {"codegen": False})] + [
            (f"lafuse-{p}", {"codegen": True, "fusion": p}) for p in FUSION_POLICIES]:
        path = tmp / f"{label}.json"
        path.write_text(json.dumps(cfg))
        cfgs[label] = path
    return cfgs


def _compile_row(w: Workload, system: str, cache: str, r: Run) -> dict[str, Any]:
    return {"benchmark": w.name, "system": system, "cache": cache, **r.codegen, "wall_s": r.wall, "error": r.error}


def _plain(o: Any) -> Any:
    """JSON for NumPy scalars (a count or a size computed with NumPy): a lost results file costs a run."""
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def result_check(summary: dict[str, Any], ref: tuple[float, ...], tol: float) -> str:
    """"ok", or why a system's result cannot be trusted next to its time."""
    if summary["skipped"]:
        return "-"
    if summary["error"]:
        return "ERROR: " + summary["error"]
    if not summary["results"]:
        return "no result"
    rd = rel_diff(tuple(summary["results"]), ref)
    return "ok" if rd <= tol else f"MISMATCH rel {rd:.1e}"


def cache_of(w: Workload, tmp: Path) -> str:
    """lafuse's plan and kernel cache for a workload: its own, and an algorithm's two sizes share one (the
    small size's untimed runs warm it for the large one)."""
    return str(tmp / f"cache-{w.algorithm or w.name}")


def write_script(w: Workload, ds: DataSet, inner: int, tmp: Path) -> Path:
    script = tmp / f"{w.name}.dml"
    script.write_text(w.script(inner, ds))
    return script


def first_runs(w: Workload, ds: DataSet, script: Path, tmp: Path,
               progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Each fusion policy runs the workload once, untimed, with its cache empty at the start; returns the
    cold compile-overhead row (fuse-all's run: it compiles every kernel it fuses)."""
    cfgs, cache = _lafuse_configs(tmp), cache_of(w, tmp)
    row: dict[str, Any] = {}
    for p in FUSION_POLICIES:
        progress(f"{w.name}: lafuse-{p} (untimed first run)")
        r = run_lafuse(script, ds.lafuse_files, cfgs[f"lafuse-{p}"], cache, single=w.single)
        if p == "fuse-all":
            row = _compile_row(w, "lafuse-fuse-all", "cold", r)
    return row


def rotated(systems: dict[str, SystemResult], rnd: int) -> list[tuple[str, SystemResult]]:
    """A round's run order: lafuse's configurations rotated by the round, then the others. Why: in a
    fixed order the cost-based run always followed fuse-all's, and a row's ratio between the two took
    whatever that neighbour left behind (outer-log at 1.28x in one report, same kernel and 1.06x when
    that row ran alone); rotated, each configuration runs first, second... equally often."""
    ours = [(n, s) for n, s in systems.items() if n.startswith("lafuse")]
    k = rnd % len(ours) if ours else 0
    return ours[k:] + ours[:k] + [(n, s) for n, s in systems.items() if not n.startswith("lafuse")]


def rounds_of(w: Workload, a: argparse.Namespace) -> int:
    """Interleaved rounds of a workload: ``a.large_reps`` for an algorithm's large size, ``a.small_reps``
    for its small size, ``a.micro_reps`` for a micro-benchmark; SystemDS's JVM runs (5-25 s each) stop
    at ``a.reps`` rounds everywhere."""
    if not w.single:
        return getattr(a, "micro_reps", a.reps)
    return getattr(a, "small_reps", a.reps) if w.size == "small" else getattr(a, "large_reps", a.reps)


def bench_workload(w: Workload, ds: DataSet, a: argparse.Namespace, tmp: Path, java: JavaRunner | None,
                   java_note: str, mods: dict[str, tuple[Any, str]], progress: Callable[[str], None],
                   first: list[dict[str, Any]] | None = None) -> tuple[list[SystemResult], dict[str, Any]]:
    """Every system on one workload, :func:`rounds_of` interleaved rounds (lafuse's configurations in the
    order :func:`rotated` gives each round). lafuse's runs share a plan and kernel
    cache of this workload's own (an algorithm's two sizes share one), empty at the start: each fusion
    policy first runs the workload once untimed (``first_runs``), so the timed runs measure the warm state
    a user sees from the second run of a script on (a micro-benchmark also leaves each process's first
    iteration out). Each lafuse system's timed runs go without ``--stats``; in the first round an untimed
    run with it comes first (heavy hitters). Compile-overhead rows (paper 000 Table 3, Figure 12): fuse-all's
    untimed first run (cold: it compiles every kernel it fuses), then the untimed ``--stats`` runs of
    fuse-all and the cost-based policy (warm). ``first``: the cold rows of ``first_runs`` done ahead (suite.py runs them ahead of the timed rounds),
    else they run here (for every workload: an algorithm's large size after its small one, on the
    cache the small one warmed, is a script of its own)."""
    arrays = {k: ds.arrays[k] for k in w.inputs}
    script = write_script(w, ds, a.inner, tmp)
    cfgs = _lafuse_configs(tmp)
    cache = cache_of(w, tmp)
    if first is None:  # not run ahead: here (a cold compile row only if the cache started empty)
        empty = not Path(cache).exists()
        row = first_runs(w, ds, script, tmp, progress)
        first = [row] if empty else []
    compile_rows: list[dict[str, Any]] = list(first)
    cold = bool(first)  # this workload's cache started empty: its first --stats runs are the warm rows
    systems: dict[str, SystemResult] = {n: SystemResult(n) for n in cfgs}
    huge = bool(w.numpy_note) and "X" in ds.arrays and ds.arrays["X"].shape[0] ** 2 * 8 > HUGE_BYTES
    systems["numpy"] = SystemResult("numpy", note=w.numpy_note + ("; run once" if huge else ""))
    systems["numpy-warm"] = SystemResult("numpy-warm", note=w.numpy_note, skipped=None if w.numpy_process else
                                         "the NumPy/SciPy column is in-process and warm already")
    systems["lafuse-python"] = SystemResult("lafuse-python", note="Python API, cost-based fusion",
                                            skipped=None if w.python_process else "n/a: no Python-API version")
    ne, ne_note = mods["numexpr"]
    systems["numexpr"] = SystemResult("numexpr", skipped=None if w.numexpr and ne else
                                      (ne_note if w.numexpr else w.numexpr_note))
    jx, jx_note = mods["jax"]
    systems["jax"] = SystemResult("jax", note=w.jax_note,
                                  skipped=None if w.jax and jx else (jx_note if w.jax else w.jax_note or "n/a"))
    systems["numba"] = SystemResult("numba", skipped=None if w.numba else w.numba_note or "n/a")
    for cg in ("off", "on"):
        skip = java_note or (f"conversion failed: {ds.sds_convert}" if ds.sds_convert else None)
        systems[f"systemds-codegen-{cg}"] = SystemResult(f"systemds-codegen-{cg}", skipped=skip)
    inproc: dict[str, Callable[[], Any]] = {"numpy-warm" if w.numpy_process else "numpy": lambda: w.numpy(arrays)}
    if w.numba is not None:
        inproc["numba"] = lambda: w.numba(arrays)  # type: ignore[misc]
    if systems["numexpr"].skipped is None:
        inproc["numexpr"] = lambda: w.numexpr(ne, arrays)  # type: ignore[misc]
    if systems["jax"].skipped is None:
        try:
            inproc["jax"] = w.jax(jx, arrays)  # type: ignore[misc]
        except Exception as e:
            systems["jax"].skipped = f"{type(e).__name__}: {e}"[:150]
    inner = 1 if w.single else a.inner
    reps = rounds_of(w, a)
    for rnd in range(reps):
        for name, s in rotated(systems, rnd):
            if s.skipped or (name.startswith("systemds") and rnd >= a.reps):
                continue
            progress(f"{w.name}: {name} (round {rnd + 1}/{reps})")
            if name in cfgs:
                if rnd == 0:  # untimed, with --stats: the heavy hitters and the warm compile row
                    r = run_lafuse(script, ds.lafuse_files, cfgs[name], cache, single=w.single)
                    s.top = r.top
                    if name in ("lafuse-fuse-all", "lafuse-cost") and cold:
                        compile_rows.append(_compile_row(w, name, "warm", r))
                s.runs.append(run_lafuse(script, ds.lafuse_files, cfgs[name], cache, single=w.single, stats=False))
            elif name.startswith("systemds"):
                assert java is not None
                s.runs.append(java.run(script, {k: ds.sds_files[k] for k in w.inputs},
                                       codegen=name.endswith("on"), workdir=tmp, single=w.single))
            elif name == "numpy" and w.numpy_process:
                s.runs.append(run_numpy_process(w, ds))
            elif name == "lafuse-python":
                if rnd == 0:  # untimed: the kernels it compiles land in the cache, as lafuse's first runs
                    first_run = run_python_process(w, ds, cache)
                    if first_run.error:
                        s.runs.append(first_run)
                        continue
                s.runs.append(run_python_process(w, ds, cache))
            elif name == "numpy" and huge:
                if rnd == 0:
                    s.runs.append(run_inprocess(inproc[name], w.result, 1, warm=False))
            else:
                s.runs.append(run_inprocess(inproc[name], w.result, inner, warm=rnd == 0))
    if not w.single:
        shutil.rmtree(cache, ignore_errors=True)
    prof = _profile()
    once = w.needed_bytes(ds.arrays) if w.needed_bytes else ds.nbytes(w.inputs)
    nbytes = once * w.passes
    extra = {"bytes_read_once": once, "passes": w.passes, "read_bw": prof[0], "profile": prof[1],
             "bandwidth_limit": nbytes / prof[0] if prof[0] else None, "data": ds.shape_str(w.inputs),
             "measured_read_bw": a.measured_bw, "bandwidth_limit_measured": nbytes / a.measured_bw,
             "compile": compile_rows}
    return list(systems.values()), extra


def measured_read_bw(nbytes: int = 400_000_000) -> float:
    """Bytes/s of a parallel Numba pass over a 400 MB array (best of 5), next to the profile's figure."""
    x = np.random.default_rng(0).random(nbytes // 8)
    chunks = 4 * (os.cpu_count() or 1)
    fk.stream_sum(x, chunks)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        fk.stream_sum(x, chunks)
        best = min(best, time.perf_counter() - t0)
    return x.nbytes / best


def _profile() -> tuple[float, str]:
    try:
        from lafuse.cost import profile

        p = profile.load()
        return p.mem_read_bw, p.source
    except Exception as e:  # pragma: no cover
        return 0.0, f"unavailable: {e}"


