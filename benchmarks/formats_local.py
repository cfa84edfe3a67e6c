"""Format choice where format matters, on one machine (paper 002 §8 brought to lafuse's local
runtime): the plan stage's dynamic programming (config ``formats`` "dp") against today's threshold
rule (``formats`` "rule": every sparse value CSR) and against "tile everything at 1000 x 1000"
(``exec_type`` dask, ``block_size`` 1000: every matrix operator on the embedded Dask cluster in
1000 x 1000 blocks, as a blocked system's default would hold it).

Each row runs in this process, the configurations in turn after one untimed warm-up of each; every
timed run compiles its script (the search's time included). The tile rule is two orders of magnitude
slower at these sizes (every operator a task graph: the first workload 40 s a run against 0.1 s),
so it runs once per product workload, after the cluster was started by a small script, and not on
the slicing loops unless asked (``--tile-all``: the column-slicing loop took 415 s a run). Reported:
median seconds, each rule's time over the DP's (above 1: the DP's plan is faster), the conversions
the DP chose, and whether all results agree.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from lafuse.compiler import Compiler, run_dml
from lafuse.config import Config
from lafuse.hops.program import GenericBlock, iter_blocks
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.values import as_input_value

RULES = {"dp": Config(formats="dp"), "rule": Config(formats="rule"),
         "tile": Config(formats="rule", exec_type="dask", block_size=1000)}
REL_TOL = 1e-9


def _sparse(n: int, m: int, density: float, seed: int) -> sp.csr_array:
    return sp.random_array((n, m), density=density, format="csr", rng=seed)


def _dense(n: int, m: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, m))


Maker = Callable[[bool], dict[str, Any]]
WORKLOADS: dict[str, tuple[str, Maker]] = {
    "t(X) %*% y and X %*% v, tall sparse X": ("""
v = matrix(1, rows=ncol(X), cols=1)
out = matrix(0, rows=ncol(X), cols=1)
for (i in 1:20) {
  g = t(X) %*% y
  p = X %*% v
  out = out + g / nrow(X) + t(X) %*% p / nrow(X)
  v = v * 0.5
}""", lambda q: {"X": _sparse(200000 if q else 1000000, 100, 0.05, 1), "y": _dense(200000 if q else 1000000, 1, 2)}),
    "t(X) %*% (X %*% v) power iteration": ("""
v = matrix(1, rows=ncol(X), cols=1)
for (i in 1:20) {
  q = t(X) %*% (X %*% v)
  v = q / sqrt(sum(q^2))
}
out = v""", lambda q: {"X": _sparse(200000 if q else 1000000, 100, 0.05, 3)}),
    "mixed sparse/dense chain": ("""
out = matrix(0, rows=ncol(X), cols=ncol(X))
for (i in 1:5) {
  out = out + t(X) %*% (X %*% W) %*% H
  W = W * 0.9
}""", lambda q: {"X": _sparse(100000 if q else 400000, 200, 0.02, 4), "W": _dense(200, 20, 5),
                 "H": _dense(20, 200, 6)}),
    "column-slicing loop": ("""
out = matrix(0, rows=1, cols=ncol(X))
for (j in 1:ncol(X)) {
  c = X[, j]
  out[1, j] = sum(c) + sum(c^2)
}""", lambda q: {"X": _sparse(100000 if q else 200000, 300 if q else 1000, 0.01, 7)}),
    "row-slicing loop": ("""
out = matrix(0, rows=500, cols=1)
for (i in 1:500) {
  r = X[i, ]
  out[i, 1] = sum(r) + sum(r^2)
}""", lambda q: {"X": _sparse(100000 if q else 200000, 300 if q else 1000, 0.01, 8)}),
}


def conversions(script: str, inputs: dict[str, Any]) -> list[str]:
    """The conversions the DP's plans made (``convert`` instructions: target format, held or not)."""
    bound = {k: as_input_value(v, k) for k, v in inputs.items()}
    cfg = RULES["dp"]
    comp = Compiler(cfg)
    prog = comp.compile_text(script, "<formats>", bound, ("out",))
    Interpreter(prog, comp, out=io.StringIO()).run(dict(bound))
    got = []
    for b in iter_blocks(prog.blocks):
        if isinstance(b, GenericBlock) and b.plan is not None:
            got += [f"{i.hop.inputs[0].name or 'value'} -> {i.out_fmt}{' held' if i.held else ''}"
                    for i in b.plan.instructions if i.opcode == "convert"]
    return sorted(set(got))


def _once(script: str, inputs: dict[str, Any], rule: str) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    got = run_dml(script, inputs=inputs, outputs=("out",), cfg=RULES[rule], out=io.StringIO())["out"]
    dt = time.perf_counter() - t0
    return dt, np.atleast_2d(got.toarray() if sp.issparse(got) else np.asarray(got, dtype=float))


def _agree(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=REL_TOL, atol=1e-12 * max(1.0, float(np.abs(b).max()))))


SLICING = frozenset({"column-slicing loop", "row-slicing loop"})  # (no tile rule unless tile_all)
TILE_REPS = 1  # timed runs of the tile rule (each tens of seconds)


def measure(quick: bool, reps: int, rules: tuple[str, ...] = ("dp", "rule", "tile"),
            progress: Callable[[str], None] = lambda msg: None, tile_all: bool = False,
            only: set[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    if "tile" in rules:  # (the cluster started outside the timed runs)
        run_dml("out = matrix(1, rows=2, cols=2) + 1", outputs=("out",), cfg=RULES["tile"], out=io.StringIO())
    for name, (script, make) in WORKLOADS.items():
        if only and name not in only:
            continue
        progress(name)
        inputs = make(quick)
        here = tuple(r for r in rules if r != "tile" or tile_all or name not in SLICING)
        vals: dict[str, np.ndarray] = {}
        times: dict[str, list[float]] = {r: [] for r in here}
        for r in here:
            if r == "tile":  # (its one run is the check and the time)
                t, vals[r] = _once(script, inputs, r)
                times[r].append(t)
            else:
                vals[r] = _once(script, inputs, r)[1]
        for i in range(reps):
            for r in here[i % len(here):] + here[:i % len(here)]:  # (the order turns: no config always first)
                if r != "tile" or len(times[r]) < TILE_REPS:
                    times[r].append(_once(script, inputs, r)[0])
        med = {r: statistics.median(ts) for r, ts in times.items()}
        x = inputs["X"]
        rows.append({"name": name, "script": script.strip(), "reps": reps, "tile_reps": len(times.get("tile", [])),
                     "data": f"X {x.shape[0]} x {x.shape[1]}, {x.nnz / (x.shape[0] * x.shape[1]):.2%} non-zero",
                     **{f"{r}_s": med[r] for r in here},
                     **{f"{r}_over_dp": med[r] / med["dp"] for r in here if r != "dp"},
                     "conversions": conversions(script, inputs),
                     "check": "ok" if all(_agree(vals[r], vals["dp"]) for r in here) else "MISMATCH"})
    return rows


def summary_line(r: dict[str, Any]) -> str:
    others = ", ".join(f"{k[:-8]} x{v:.2f}" for k, v in r.items() if k.endswith("_over_dp"))
    return f"formats {r['name']}: dp {r['dp_s'] * 1e3:.1f} ms; {others}; {r['check']}"


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="the full sizes and 7 runs (default: quick, 3)")
    ap.add_argument("--no-distributed", action="store_true", help="leave the tile rule out")
    ap.add_argument("--tile-all", action="store_true", help="the tile rule on the slicing loops too")
    ap.add_argument("--only", action="append", metavar="NAME", help="a workload by name (repeatable)")
    a = ap.parse_args()
    rules = ("dp", "rule") if a.no_distributed else ("dp", "rule", "tile")
    for row in measure(not a.full, 9 if a.full else 5, rules, lambda msg: print(f"... {msg}", file=sys.stderr),
                       a.tile_all, set(a.only) if a.only else None):
        print(summary_line(row))
        print(f"    {row['data']}; conversions: {', '.join(row['conversions']) or 'none'}")
