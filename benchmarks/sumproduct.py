"""Sum-product optimization on against off (paper 001 §3 and §5): PNMF, L2SVM and MLogreg, the
paper's examples, and the micro-benchmarks whose plans the rule changes.

Each row runs in this process, ``sum_product`` on and off in turn (one untimed warm-up of each first:
the kernels both plans need are compiled then), with the default cost-based fusion. A timed run
compiles its script afresh: the rule's costings are part of what it costs. Reported: the median
seconds of each, the ratio off / on (above 1: the rewrite pays), the rewrites that fired, and whether
both results agree (relative 1e-6: the regrouped sums round differently).
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from lafuse.compiler import run_dml
from lafuse.config import Config
from lafuse.rewrite.sumproduct import rule as R

REL_TOL = 1e-6


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# name -> (script computing `out`, inputs maker by quick)
Maker = Callable[[bool], dict[str, Any]]
WORKLOADS: dict[str, tuple[str, Maker]] = {
    "sum(W %*% H)": ("out = sum(W %*% H)", lambda q: {
        "W": _rng(1).random((4000 if q else 20000, 50)), "H": _rng(2).random((50, 2000 if q else 5000))}),
    "PNMF objective": ("out = sum(W %*% H) - sum(X * log(W %*% H + 1e-15))", lambda q: {
        "W": _rng(1).random((4000 if q else 20000, 20)), "H": _rng(2).random((20, 2000 if q else 5000)),
        "X": sp.random(4000 if q else 20000, 2000 if q else 5000, density=0.01, random_state=3, format="csr")}),
    "trace(X %*% Y)": ("out = trace(X %*% Y)", lambda q: {
        "X": _rng(1).random((1000 if q else 3000, 500)), "Y": _rng(2).random((500, 1000 if q else 3000))}),
    "diag(v) %*% X": ("out = diag(v) %*% X", lambda q: {
        "v": _rng(1).random((2000 if q else 5000, 1)), "X": _rng(2).random((2000 if q else 5000, 200))}),
    "(X %*% Y)[1:10, ]": ("P = X %*% Y\nout = P[1:10, ]", lambda q: {
        "X": _rng(1).random((2000 if q else 5000, 300)), "Y": _rng(2).random((300, 2000 if q else 5000))}),
    "PNMF": ("[W, H] = pnmf(X=X, rnk=20, maxi=10, verbose=TRUE, seed=7)\nout = W", lambda q: {
        "X": sp.random(4000 if q else 20000, 2000 if q else 5000, density=0.01, random_state=3, format="csr") * 5}),
    "L2SVM": ("out = l2svm(X=X, Y=Y, maxIterations=20, verbose=FALSE)", lambda q: {
        "X": _rng(1).random((20000 if q else 100000, 100)),
        "Y": np.sign(_rng(2).random((20000 if q else 100000, 1)) - 0.5)}),
    "MLogreg": ("out = multiLogReg(X=X, Y=Y, maxi=10, verbose=FALSE)", lambda q: {
        "X": _rng(1).random((20000 if q else 100000, 50)),
        "Y": np.floor(_rng(2).random((20000 if q else 100000, 1)) * 4) + 1}),
}


def _once(script: str, inputs: dict[str, Any], on: bool) -> tuple[float, np.ndarray, list[R.Fired]]:
    before = len(R.FIRED)
    t0 = time.perf_counter()
    got = run_dml(script, inputs=inputs, outputs=("out",), cfg=Config(sum_product=on), out=io.StringIO())["out"]
    dt = time.perf_counter() - t0
    val = got.toarray() if sp.issparse(got) else np.asarray(got, dtype=float)
    return dt, np.atleast_2d(val), R.FIRED[before:]


def _agree(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=REL_TOL, atol=1e-9 * max(1.0, float(np.abs(b).max()))))


def measure(quick: bool, reps: int, progress: Callable[[str], None] = lambda msg: None) -> list[dict[str, Any]]:
    rows = []
    for name, (script, make) in WORKLOADS.items():
        progress(name)
        inputs = make(quick)
        _, on_val, fired = _once(script, inputs, True)
        _, off_val, _ = _once(script, inputs, False)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(reps):
            for on in (True, False):
                times[on].append(_once(script, inputs, on)[0])
        on_s, off_s = statistics.median(times[True]), statistics.median(times[False])
        rows.append({"name": name, "script": script, "on_s": on_s, "off_s": off_s, "ratio": off_s / on_s,
                     "reps": reps, "rewrites": sorted({f"{', '.join(f.rewrites)}: {f.written} -> {f.chosen}"
                                                      for f in fired}),
                     "check": "ok" if _agree(on_val, off_val) else "MISMATCH"})
    return rows


def summary_line(r: dict[str, Any]) -> str:
    return (f"sum-product {r['name']}: on {r['on_s'] * 1e3:.1f} ms, off {r['off_s'] * 1e3:.1f} ms, "
            f"x{r['ratio']:.2f}, {len(r['rewrites'])} rewrite(s), {r['check']}")


if __name__ == "__main__":
    import sys

    for row in measure("--full" not in sys.argv, 3 if "--full" not in sys.argv else 7, print):
        print(summary_line(row))
        for rw in row["rewrites"]:
            print("   ", rw)
