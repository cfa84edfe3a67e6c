"""Operator fusion, side by side: lafuse (codegen off, and each fusion policy) against NumPy/SciPy,
numexpr, JAX, hand-written Numba kernels, SystemDS 3.4 (codegen off and on) and the bandwidth limit.

Workloads (full sizes; ``--quick`` shrinks them so the whole run takes a few minutes):

* ``cell3``        ``sum(X*Y*Z)``, X, Y, Z dense 20000x1000
* ``cell3-sparse`` ``sum(X*Y*Z)``, X, Y, Z sparse (0.1) 20000x1000
* ``magg``         ``sum(X*Y)`` and ``sum(X*Z)`` together (multi-aggregate), the dense data of ``cell3``
* ``mmchain``      ``t(X) %*% (X %*% v)``, X dense 100000x1000
* ``outer-log``    ``sum(X * log(U %*% t(V) + 1e-15))``, X 20000x20000 sparse (1e-3), U, V 20000x100
* ``outer-div``    ``(X / (U %*% t(V) + 1e-15)) %*% V``, the data of ``outer-log``

Data is generated once per data set with NumPy (seeded) and written to a temporary directory: ``.npy`` /
``.npz`` (with ``.mtd``) for lafuse, and CSV (dense) or MatrixMarket (sparse) text that one SystemDS run
converts to SystemDS binary, so every system computes on the same numbers and SystemDS's timed runs do
not parse text.

Operation time: lafuse and SystemDS run one DML script per process that repeats the operation ``--inner``
times, each time between two ``time()`` calls (the operation sits in an ``if`` block of its own, so the
``time()`` calls cannot be reordered around it, and its result is printed every time); the first iteration
of each process is reported separately (JIT, kernel compilation) and the median, minimum and maximum are
taken over the other ones. In-process systems (NumPy, numexpr, JAX, Numba) are warmed up once and then
timed ``--inner`` times. Each of ``--reps`` rounds runs every system once, in turn (interleaved). The
whole-process wall time of lafuse and SystemDS (start-up, compilation, read, ``--inner`` iterations) is
reported too. The bandwidth limit is the bytes of the inputs (as NumPy/SciPy hold them, CSR for sparse)
over the read bandwidth of ``lafuse calibrate``'s hardware profile (``--profile PATH``, else
``$LAFUSE_PROFILE`` or the default location; uncalibrated defaults say so), and again over the bandwidth a
parallel Numba read pass reaches on this machine (the profile's figure can be lower than what two
threads read, so a kernel may beat the first "limit").

Why the ``if`` block: lafuse orders ``time()`` freely within a basic block (observed: ``t1 - t0`` comes
out negative around a plain statement), SystemDS does not; the block boundary orders both.

Every result is checked against NumPy's (relative 1e-8; matrix results by their sum and sum of squares).

    .venv/bin/python benchmarks/fusion.py [--quick] [--reps N] [--inner K] [--only NAME ...]
        [--no-systemds] [--with-jax] [--with-numexpr] [--profile PATH] [--json PATH] [--markdown]

JAX and numexpr are optional: missing ones are reported as "not installed" unless ``--with-jax`` /
``--with-numexpr`` let the script ``pip install`` them into the running environment.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))

import fusion_kernels as fk  # noqa: E402

EPS = 1e-15
REL_TOL = 1e-8
FUSION_POLICIES = ("cost", "fuse-all", "fuse-no-redundancy")
# the dense NumPy path of outer-log/outer-div materializes n x n doubles: above this, run it once only
HUGE_BYTES = 1e9

# data set -> (kind, full size, quick size); sizes are (rows, cols) or, for "outer", (n, rank)
DATASETS: dict[str, tuple[str, tuple[int, int], tuple[int, int]]] = {
    "dense3": ("dense3", (20000, 1000), (4000, 1000)),
    "sparse3": ("sparse3", (20000, 1000), (4000, 1000)),
    "mmchain": ("mmchain", (100000, 1000), (10000, 1000)),
    "outer": ("outer", (20000, 100), (5000, 100)),
}


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

    def shape_str(self) -> str:
        parts = []
        for n, a in self.arrays.items():
            s = f"{n} {a.shape[0]}x{a.shape[1]}"
            if sp.issparse(a):
                s += f" sparse {a.nnz / (a.shape[0] * a.shape[1]):.0e}"
            parts.append(s)
        return ", ".join(parts)


def _csr(a: Any) -> sp.csr_array:
    m = sp.csr_array(a, dtype=np.float64)
    m.sum_duplicates()
    m.sort_indices()
    return m


def generate(name: str, quick: bool) -> DataSet:
    kind, full, small = DATASETS[name]
    rows, cols = small if quick else full
    rng = np.random.default_rng({"dense3": 11, "sparse3": 12, "mmchain": 13, "outer": 14}[kind])
    t0 = time.perf_counter()
    if kind == "dense3":
        arrays = {k: rng.random((rows, cols)) for k in "XYZ"}
    elif kind == "sparse3":
        arrays = {k: _csr(sp.random_array((rows, cols), density=0.1, format="csr", rng=rng)) for k in "XYZ"}
    elif kind == "mmchain":
        arrays = {"X": rng.random((rows, cols)), "v": rng.random((cols, 1))}
    else:
        n, k = rows, cols
        arrays = {"X": _csr(sp.random_array((n, n), density=1e-3, format="csr", rng=rng)),
                  "U": rng.random((n, k)), "V": rng.random((n, k))}
    return DataSet(name, arrays, gen_time=time.perf_counter() - t0)


def _mtd(a: Any, fmt: str) -> str:
    nnz = int(a.nnz) if sp.issparse(a) else int(np.count_nonzero(a))
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


def write_systemds(ds: DataSet, d: Path, java: JavaRunner) -> None:
    """Text files (exact: %.17g), converted by one SystemDS run to SystemDS binary."""
    lines, nv = [], {}
    for n, a in ds.arrays.items():
        out = d / f"{ds.name}-{n}.sds"
        if sp.issparse(a):
            src = d / f"{ds.name}-{n}.mtx"
            _write_mm(src, a)
            lines.append(f'{n} = read($in{n}, format="mm")')
        else:
            src = d / f"{ds.name}-{n}.csv"
            np.savetxt(src, a, fmt="%.17g", delimiter=",")
            lines.append(f'{n} = read($in{n}, format="csv", header=FALSE, rows={a.shape[0]}, cols={a.shape[1]})')
        lines.append(f'write({n}, $out{n}, format="binary")')
        nv[f"in{n}"], nv[f"out{n}"] = str(src), str(out)
        ds.sds_files[n] = str(out)
    script = d / f"convert-{ds.name}.dml"
    script.write_text("\n".join(lines) + "\n")
    res = java.run(script, nv, codegen=False, workdir=d)
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
    name: str
    expr: str
    data: str
    inputs: list[str]
    body: str  # DML of the timed operation (assigns r, or r1/r2, or R)
    result: str  # "scalar", "scalar2" or "matrix"
    numpy: Callable[[dict], Any]
    numba: Callable[[dict], Any]
    numexpr: Callable[[Any, dict], Any] | None = None
    jax: Callable[[Any, dict], Callable[[], Any]] | None = None  # (jax module, arrays) -> thunk
    jax_note: str = ""
    numpy_note: str = ""

    def script(self, inner: int, ds: DataSet) -> str:
        reads = "".join(f'{n} = read(${n}, format="binary")\n' for n in self.inputs)
        if self.result == "matrix":
            rows = {"mmchain": ds.arrays["X"].shape[1], "outer-div": ds.arrays["X"].shape[0]}[self.name]
            cols = 1 if self.name == "mmchain" else ds.arrays["V"].shape[1]
            init = f"R = matrix(0, rows={rows}, cols={cols})\n"
            show = 'print("R " + sum(R))\nprint("R " + sum(R^2))\n'
        elif self.result == "scalar2":
            init, show = "r1 = 0\nr2 = 0\n", 'print("R " + r1)\nprint("R " + r2)\n'
        else:
            init, show = "r = 0\n", 'print("R " + r)\n'
        return (f"{reads}{init}for (i in 1:{inner}) {{\n  t0 = time()\n  if (i > 0) {{\n    {self.body}\n  }}\n"
                f"  t1 = time()\n  print(\"T \" + (t1 - t0))\n" + "".join("  " + s + "\n" for s in show.splitlines())
                + "}\n")


def _results(v: Any, kind: str) -> tuple[float, ...]:
    if kind == "matrix":
        return _checksum(v)
    if isinstance(v, tuple):
        return tuple(float(x) for x in v)
    return (float(v),)


def _parts(a: sp.csr_array) -> tuple:
    return fk.csr_parts(a)


def _nb_cell3_sparse(a: dict) -> float:
    X, Y, Z = a["X"], a["Y"], a["Z"]
    return fk.cell3_csr(X.shape[0], *_parts(X), *_parts(Y), *_parts(Z))


def _nb_mmchain(a: dict) -> np.ndarray:
    return fk.mmchain(a["X"], np.ascontiguousarray(a["v"][:, 0]), max(2, 4 * (os.cpu_count() or 1)))


def _nb_outer_log(a: dict) -> float:
    X = a["X"]
    return fk.outer_log_sum(X.shape[0], *_parts(X), a["U"], a["V"], EPS)


def _nb_outer_div(a: dict) -> np.ndarray:
    X = a["X"]
    return fk.outer_div_mm(X.shape[0], *_parts(X), a["U"], a["V"], EPS)


def _np_outer_log(a: dict) -> float:
    U, V, X = a["U"], a["V"], a["X"]
    return float(X.multiply(np.log(U @ V.T + EPS)).sum())


def _np_outer_div(a: dict) -> Any:
    U, V, X = a["U"], a["V"], a["X"]
    return (X / (U @ V.T + EPS)) @ V


def _jax_dense(expr: Callable) -> Callable[[Any, dict], Callable[[], Any]]:
    def build(jax: Any, a: dict) -> Callable[[], Any]:
        f = jax.jit(expr)
        args = [jax.device_put(a[k]) for k in sorted(a)]
        return lambda: jax.block_until_ready(f(*args))
    return build


def _jax_outer(div: bool) -> Callable[[Any, dict], Callable[[], Any]]:
    """Gather over the non-zeros of X (the dense n x n path does not fit JAX's habits either)."""
    def build(jax: Any, a: dict) -> Callable[[], Any]:
        jnp = jax.numpy
        coo = a["X"].tocoo()
        n = a["X"].shape[0]
        rows, cols = jax.device_put(coo.row.astype(np.int32)), jax.device_put(coo.col.astype(np.int32))
        vals, U, V = jax.device_put(coo.data), jax.device_put(a["U"]), jax.device_put(a["V"])

        def f_log(rows: Any, cols: Any, vals: Any, U: Any, V: Any) -> Any:
            return jnp.sum(vals * jnp.log(jnp.sum(U[rows] * V[cols], axis=1) + EPS))

        def f_div(rows: Any, cols: Any, vals: Any, U: Any, V: Any) -> Any:
            w = vals / (jnp.sum(U[rows] * V[cols], axis=1) + EPS)
            return jax.ops.segment_sum(w[:, None] * V[cols], rows, num_segments=n)

        f = jax.jit(f_div if div else f_log)
        return lambda: jax.block_until_ready(f(rows, cols, vals, U, V))
    return build


WORKLOADS = [
    Workload("cell3", "sum(X*Y*Z), dense", "dense3", ["X", "Y", "Z"], "r = sum(X * Y * Z)", "scalar",
             numpy=lambda a: (a["X"] * a["Y"] * a["Z"]).sum(),
             numba=lambda a: fk.cell3_dense(a["X"], a["Y"], a["Z"]),
             numexpr=lambda ne, a: ne.evaluate("sum(X*Y*Z)", local_dict=a),
             jax=_jax_dense(lambda X, Y, Z: (X * Y * Z).sum())),
    Workload("cell3-sparse", "sum(X*Y*Z), sparse 0.1", "sparse3", ["X", "Y", "Z"], "r = sum(X * Y * Z)",
             "scalar", numpy=lambda a: a["X"].multiply(a["Y"]).multiply(a["Z"]).sum(),
             numba=_nb_cell3_sparse, jax_note="n/a (sparse)"),
    Workload("magg", "sum(X*Y), sum(X*Z)", "dense3", ["X", "Y", "Z"], "r1 = sum(X * Y)\n    r2 = sum(X * Z)",
             "scalar2", numpy=lambda a: ((a["X"] * a["Y"]).sum(), (a["X"] * a["Z"]).sum()),
             numba=lambda a: fk.magg2_dense(a["X"], a["Y"], a["Z"]),
             numexpr=lambda ne, a: (ne.evaluate("sum(X*Y)", local_dict=a), ne.evaluate("sum(X*Z)", local_dict=a)),
             jax=_jax_dense(lambda X, Y, Z: ((X * Y).sum(), (X * Z).sum()))),
    Workload("mmchain", "t(X) %*% (X %*% v)", "mmchain", ["X", "v"], "R = t(X) %*% (X %*% v)", "matrix",
             numpy=lambda a: a["X"].T @ (a["X"] @ a["v"]), numba=_nb_mmchain,
             jax=_jax_dense(lambda X, v: X.T @ (X @ v))),
    Workload("outer-log", "sum(X * log(U %*% t(V) + 1e-15))", "outer", ["X", "U", "V"],
             "r = sum(X * log(U %*% t(V) + 1e-15))", "scalar", numpy=_np_outer_log, numba=_nb_outer_log,
             jax=_jax_outer(False), jax_note="gather over nnz(X)", numpy_note="dense U@V.T"),
    Workload("outer-div", "(X / (U %*% t(V) + 1e-15)) %*% V", "outer", ["X", "U", "V"],
             "R = (X / (U %*% t(V) + 1e-15)) %*% V", "matrix", numpy=_np_outer_div, numba=_nb_outer_div,
             jax=_jax_outer(True), jax_note="gather over nnz(X)", numpy_note="dense U@V.T"),
]


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

    def run(self, script: Path, nvargs: dict[str, str], codegen: bool, workdir: Path) -> Run:
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
        r.first, r.op = (times[0], times[1:]) if times else (None, [])
        return r


def run_lafuse(script: Path, nvargs: dict[str, str], cfg: Path) -> Run:
    cmd = [sys.executable, "-m", "lafuse", "run", str(script), "--config", str(cfg), "--stats", "5",
           "--nvargs", *[f"{k}={v}" for k, v in nvargs.items()]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=script.parent)
    r = Run(wall=time.perf_counter() - t0, top=heavy_hitters(proc.stdout))
    # a kernel that pays only from the disk cache compiles after the run in the background
    # (codegen.deferred): the next measurement must not share the CPU with it
    subprocess.run([sys.executable, "-m", "lafuse.codegen.deferred", "--wait"], check=False)
    if proc.returncode != 0:
        r.error = ((proc.stderr or proc.stdout).strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200]
        return r
    times, r.results = parse_script_output(proc.stdout.splitlines())
    r.first, r.op = (times[0], times[1:]) if times else (None, [])
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


# ---------------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------------

@dataclass
class SystemResult:
    name: str
    runs: list[Run] = field(default_factory=list)
    note: str = ""
    skipped: str | None = None  # reason the system did not run

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
            "top": self.runs[-1].top if self.runs else [], "error": self.error, "note": self.note,
            "skipped": self.skipped,
        }


def rel_diff(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    if len(a) != len(b) or not a:
        return math.inf
    return max(abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a, b, strict=True))


def bench_workload(w: Workload, ds: DataSet, a: argparse.Namespace, tmp: Path, java: JavaRunner | None,
                   java_note: str, mods: dict[str, tuple[Any, str]], progress: Callable[[str], None]
                   ) -> tuple[list[SystemResult], dict[str, Any]]:
    arrays = {k: ds.arrays[k] for k in w.inputs}
    script = tmp / f"{w.name}.dml"
    script.write_text(w.script(a.inner, ds))
    cfgs = {}
    for label, cfg in [("lafuse", {"codegen": False})] + [
            (f"lafuse-{p}", {"codegen": True, "fusion": p}) for p in FUSION_POLICIES]:
        path = tmp / f"{label}.json"
        path.write_text(json.dumps(cfg))
        cfgs[label] = path
    systems: dict[str, SystemResult] = {n: SystemResult(n) for n in cfgs}
    huge = w.numpy_note and ds.arrays["X"].shape[0] ** 2 * 8 > HUGE_BYTES
    systems["numpy"] = SystemResult("numpy", note=w.numpy_note + ("; run once" if huge else ""))
    ne, ne_note = mods["numexpr"]
    systems["numexpr"] = SystemResult("numexpr", skipped=None if w.numexpr and ne else (ne_note or "n/a"))
    jx, jx_note = mods["jax"]
    systems["jax"] = SystemResult("jax", note=w.jax_note,
                                  skipped=None if w.jax and jx else (jx_note if w.jax else w.jax_note or "n/a"))
    systems["numba"] = SystemResult("numba")
    for cg in ("off", "on"):
        skip = java_note or (f"conversion failed: {ds.sds_convert}" if ds.sds_convert else None)
        systems[f"systemds-codegen-{cg}"] = SystemResult(f"systemds-codegen-{cg}", skipped=skip)
    inproc: dict[str, Callable[[], Any]] = {
        "numpy": lambda: w.numpy(arrays), "numba": lambda: w.numba(arrays)}
    if systems["numexpr"].skipped is None:
        inproc["numexpr"] = lambda: w.numexpr(ne, arrays)  # type: ignore[misc]
    if systems["jax"].skipped is None:
        try:
            inproc["jax"] = w.jax(jx, arrays)  # type: ignore[misc]
        except Exception as e:
            systems["jax"].skipped = f"{type(e).__name__}: {e}"[:150]
    for rnd in range(a.reps):
        for name, s in systems.items():
            if s.skipped:
                continue
            progress(f"{w.name}: {name} (round {rnd + 1}/{a.reps})")
            if name.startswith("lafuse"):
                s.runs.append(run_lafuse(script, ds.lafuse_files, cfgs[name]))
            elif name.startswith("systemds"):
                assert java is not None
                s.runs.append(java.run(script, {k: ds.sds_files[k] for k in w.inputs},
                                       codegen=name.endswith("on"), workdir=tmp))
            elif name == "numpy" and huge:
                if rnd == 0:
                    s.runs.append(run_inprocess(inproc[name], w.result, 1, warm=False))
            else:
                s.runs.append(run_inprocess(inproc[name], w.result, a.inner, warm=rnd == 0))
    prof = _profile()
    nbytes = ds.nbytes(w.inputs)
    extra = {"bytes_read_once": nbytes, "read_bw": prof[0], "profile": prof[1],
             "bandwidth_limit": nbytes / prof[0] if prof[0] else None, "data": ds.shape_str(),
             "measured_read_bw": a.measured_bw, "bandwidth_limit_measured": nbytes / a.measured_bw}
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


def _ms(t: float | None) -> str:
    return "-" if t is None else (f"{t * 1e3:.1f}" if t < 10 else f"{t * 1e3:.0f}")


def rows_of(systems: list[SystemResult], extra: dict[str, Any], ref: tuple[float, ...]) -> list[dict[str, str]]:
    by = {s.name: s.summary() for s in systems}
    nb = by.get("numba", {}).get("op_median")
    lc = by.get("lafuse-cost", {}).get("op_median")
    rows = []
    for s in systems:
        d = by[s.name]
        med = d["op_median"]
        if s.skipped:
            check = "-"
        elif d["error"]:
            check = "ERROR: " + d["error"]
        elif not d["results"]:
            check = "no result"
        else:
            rd = rel_diff(tuple(d["results"]), ref)
            check = "ok" if rd <= REL_TOL else f"MISMATCH rel {rd:.1e}"
        d["check"] = check
        rng = "-" if med is None else f"{_ms(d['op_min'])}-{_ms(d['op_max'])}"
        rows.append({
            "system": s.name, "op ms": _ms(med) if not s.skipped else "-", "min-max": rng,
            "first ms": _ms(min(d["first"])) if d["first"] else "-",
            "wall s": "-" if d["wall_median"] is None else f"{d['wall_median']:.2f}",
            "x numba": f"{med / nb:.2f}" if med and nb else "-",
            "x lafuse-cost": f"{med / lc:.2f}" if med and lc else "-",
            "check": check, "notes": s.skipped or "; ".join(x for x in (d["note"], " ".join(d["top"])) if x)})
    bl = extra["bandwidth_limit"]
    rows.append({"system": "bandwidth limit", "op ms": _ms(bl), "min-max": "-", "first ms": "-", "wall s": "-",
                 "x numba": f"{bl / nb:.2f}" if bl and nb else "-",
                 "x lafuse-cost": f"{bl / lc:.2f}" if bl and lc else "-", "check": "-",
                 "notes": f"{extra['bytes_read_once'] / 1e6:.0f} MB at {extra['read_bw'] / 1e9:.1f} GB/s "
                          f"(hardware profile: {extra['profile']})"})
    bm = extra["bandwidth_limit_measured"]
    rows.append({"system": "bandwidth (measured)", "op ms": _ms(bm), "min-max": "-", "first ms": "-", "wall s": "-",
                 "x numba": f"{bm / nb:.2f}" if nb else "-", "x lafuse-cost": f"{bm / lc:.2f}" if lc else "-",
                 "check": "-", "notes": f"at {extra['measured_read_bw'] / 1e9:.1f} GB/s, a parallel Numba read "
                                        f"pass over 400 MB on this machine"})
    return rows


COLUMNS = ["system", "op ms", "min-max", "first ms", "wall s", "x numba", "x lafuse-cost", "check", "notes"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes in all; make bench)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved rounds (default 3, quick 2)")
    ap.add_argument("--inner", type=int, default=None,
                    help="timed iterations per process / round (default 4, quick 3); the first of a process is "
                         "reported apart")
    ap.add_argument("--only", action="append", default=None, metavar="NAME",
                    help=f"workload(s) to run: {', '.join(w.name for w in WORKLOADS)} (repeatable, or comma list)")
    ap.add_argument("--no-systemds", action="store_true", help="leave SystemDS out")
    ap.add_argument("--with-jax", action="store_true", help="pip install jax into this environment if missing")
    ap.add_argument("--with-numexpr", action="store_true", help="pip install numexpr if missing")
    ap.add_argument("--sds-heap", default=None, help="SystemDS JVM -Xmx (default 4g, full sizes 12g)")
    ap.add_argument("--profile", default=None, help="hardware profile JSON of lafuse calibrate (sets "
                                                    "LAFUSE_PROFILE for this run and its lafuse processes)")
    ap.add_argument("--json", default=None, help="where to write the results "
                                                 "(default benchmarks/results/fusion-<timestamp>.json)")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    a = ap.parse_args(argv)
    a.reps = a.reps or (2 if a.quick else 3)
    a.inner = max(2, a.inner or (3 if a.quick else 4))
    only = {n for x in a.only for n in x.split(",")} if a.only else None
    workloads = [w for w in WORKLOADS if only is None or w.name in only]
    if only and len(workloads) != len(only):
        ap.error(f"unknown workload(s) {sorted(only - {w.name for w in WORKLOADS})}")

    if a.profile:
        os.environ["LAFUSE_PROFILE"] = str(Path(a.profile).resolve())
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    with console.status("read bandwidth"):
        a.measured_bw = measured_read_bw()
    mods = {"numexpr": optional_module("numexpr", a.with_numexpr), "jax": optional_module("jax", a.with_jax)}
    if mods["jax"][0] is not None:
        mods["jax"][0].config.update("jax_enable_x64", True)
        mods["jax"][0].config.update("jax_platforms", "cpu")
    java, java_note = None, ""
    if a.no_systemds:
        java_note = "--no-systemds"
    else:
        try:
            java = JavaRunner(a.sds_heap or ("4g" if a.quick else "12g"))
        except Exception as e:
            java_note = f"unavailable: {e}"
    out_json = Path(a.json) if a.json else ROOT / "results" / f"fusion-{datetime.now():%Y%m%d-%H%M%S}.json"
    report: dict[str, Any] = {
        "quick": a.quick, "reps": a.reps, "inner": a.inner, "started": datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                    "numba": fk.nb.__version__, "platform": platform.platform()},
        "measured_read_bw": a.measured_bw, "profile": _profile(), "workloads": {},
    }
    t_start = time.perf_counter()
    md: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lafuse-fusion-") as d:
        tmp = Path(d)
        datasets: dict[str, DataSet] = {}
        for w in workloads:
            with console.status(f"{w.name}: data") as status:
                if w.data not in datasets:
                    ds = generate(w.data, a.quick)
                    write_lafuse(ds, tmp)
                    if java is not None:
                        status.update(f"{w.name}: data for SystemDS (text, converted to binary)")
                        write_systemds(ds, tmp, java)
                    datasets[w.data] = ds
                ds = datasets[w.data]
                systems, extra = bench_workload(w, ds, a, tmp, java, java_note, mods, status.update)
            np_runs = [r for s in systems if s.name == "numpy" for r in s.runs if r.results]
            ref = np_runs[0].results if np_runs else ()
            rows = rows_of(systems, extra, ref)
            report["workloads"][w.name] = {
                "expr": w.expr, **extra, "reference": list(ref),
                "systems": {s.name: s.summary() for s in systems}, "table": rows}
            title = (f"{w.name}: {w.expr} -- {extra['data']}; op time median of {a.reps} rounds x "
                     f"{a.inner - 1} warm iterations (in-process: x {a.inner})")
            table = Table(title=title, title_justify="left")
            for c in COLUMNS:
                table.add_column(c, justify="left" if c in ("system", "check", "notes") else "right",
                                 overflow="fold")
            for r in rows:
                style = "bold red" if r["check"].startswith(("MISMATCH", "ERROR", "no result")) else None
                table.add_row(*[r[c] for c in COLUMNS], style=style)
            console.print(table)
            md += [f"\n**{title}**\n", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
            md += ["| " + " | ".join(r[c].replace("|", "/") for c in COLUMNS) + " |" for r in rows]
    report["total_seconds"] = time.perf_counter() - t_start
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(report, indent=1))
    if a.markdown:
        print("\n".join(md))
    bad = [(w, r["system"]) for w, v in report["workloads"].items() for r in v["table"]
           if r["check"].startswith(("MISMATCH", "no result"))]
    console.print(f"total {report['total_seconds']:.0f} s; results in {out_json}")
    if bad:
        console.print(f"[bold red]RESULT MISMATCH: {bad}[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
