"""Paper 004's memory case, measured: workers whose memory cannot hold U and V whole for every task.

The outer-product loss ``sum(X * log(U %*% t(V) + 1e-15))`` at n = 30000, rank 1024 (U and V 234 MiB
each, X sparse 0.001) on two workers of 1.5 GiB: the broadcast operator (BFO) sends U and V whole to
each task (474 MiB of pieces per task), the cuboid operator (CFO) pieces of them, and the model's
task budget (cost.constants.TASK_MEMORY_FRACTION of a worker, 483 MB) holds the latter only.
Measured here the outcome varies with Dask's spilling: at 1 GiB BFO once failed (its workers
restarted for their memory) and otherwise spilled 0.95-2.3 GB a run against CFO's 1.3-1.4 GB; at
1.5 GiB both spill little once pieces are kept between runs. Goal (paper 004 §6): BFO fails or spills (more than CFO), CFO
completes with the local result. Rows: lafuse local (the reference), lafuse with BFO, CFO and the
cost-chosen operator forced on a cluster of its own (``dist_section.Cluster``), two runs each; time,
bytes moved between workers, bytes spilled, the operator and its model estimates, or the error.

Run by ``make bench`` after the distributed section (``suite.py``), or alone:
    .venv/bin/python benchmarks/fuseme_memory.py [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dist_section as D  # noqa: E402

WORKER_MEMORY = "1536MiB"
N, RANK = 30000, 1024  # lafuse's outer template takes a rank up to 1024 (fusion.templates.OUTER_MAX_RANK)
RUNS = 2
SYSTEMS = ("lafuse-local", "lafuse-bfo", "lafuse-cfo", "lafuse-cost")
TIMEOUT = 240.0  # s per process: a worker restarted for its memory fails the run in ~20 s here


def _gen(rng: np.random.Generator, n: int, m: int) -> dict[str, Any]:
    return {"X": D._sparse_counts(rng, n, m, 0.001), "U": D._dyadic(rng, 1, 17, (n, RANK)),
            "V": D._dyadic(rng, 1, 17, (m, RANK))}


WORKLOAD = D.DistWorkload("outer-log-memory", "sum(X*log(U%*%t(V)+1e-15)), U and V beyond a task's memory",
                          D.OUTER_LOG_DML, ("X", "U", "V"), _gen, D.dask_outer_log, {"memory": (N, N)},
                          D._two_dense, note=f"X sparse 0.001, rank {RANK}, workers of {WORKER_MEMORY}")


def verdict(systems: dict[str, dict[str, Any]]) -> str:
    """BFO failed, or spilled more than CFO (every run spills some: the workers' reads of the inputs);
    CFO and the cost-chosen operator completed with the local result."""
    def spilled(k: str) -> float:
        return float(((systems.get(k) or {}).get("counts") or {}).get("spilled_bytes") or 0.0)

    missed = []
    bfo = systems.get("lafuse-bfo") or {}
    if not (bfo.get("error") or spilled("lafuse-bfo") > spilled("lafuse-cfo")):
        missed.append(f"BFO completed, spilling {spilled('lafuse-bfo') / 1e6:.0f} MB a run against CFO's "
                      f"{spilled('lafuse-cfo') / 1e6:.0f} MB")
    for k in ("lafuse-cfo", "lafuse-cost"):
        e = systems.get(k) or {}
        if e.get("error") or e.get("check") != "ok":
            missed.append(f"{D.SYSTEM_LABELS[k]}: {e.get('error') or e.get('check')}")
    return "met" if not missed else "missed: " + "; ".join(missed)


def _shown(e: dict[str, Any]) -> str:
    return "failed" if e.get("error") else f"{(e.get('time') or 0.0) * 1e3:.4g} ms"


def run(progress: Callable[[str], None] = print, timeout: float = TIMEOUT) -> dict[str, Any]:
    """The row (its JSON): each system's summary, the verdict."""
    w = WORKLOAD
    progress(f"{w.key}: data")
    ds = D.dataset(w, "memory", False)
    row: dict[str, Any] = {"name": w.key, "title": w.title, "note": w.note, "worker_memory": WORKER_MEMORY,
                           "workers": D.WORKERS, "shape_str": ds.shape_str(list(w.inputs)), "runs": RUNS,
                           "input_bytes": D._inputs(ds.arrays), "systems": {}}
    with tempfile.TemporaryDirectory(prefix="lafuse-fuseme-memory-") as d:
        tmp = Path(d)
        script = tmp / f"{w.key}.dml"
        script.write_text(w.workload("memory").script(RUNS, ds))
        cluster = D.Cluster(WORKER_MEMORY, tmp)
        try:
            results = {}
            for system in SYSTEMS:
                progress(f"{w.key}: {D.SYSTEM_LABELS[system]}")
                D.settle(cluster.client)
                D.fresh_workers(cluster.client)
                before = D.counters(cluster.client)
                r = D.run_lafuse(script, ds, w, tmp, system, "" if system == "lafuse-local" else
                                 cluster.scheduler_address, "", timeout)
                if system != "lafuse-local":
                    D.settle(cluster.client)
                    r.counts = {**D.delta(before, D.counters(cluster.client)), **r.counts_extra}
                    r.counts = D._per_run(r.counts, RUNS)
                results[system] = r
        finally:
            cluster.close()
    ref = results["lafuse-local"].results
    for r in results.values():
        if r.error:
            r.check = "ERROR: " + r.error
        elif not r.results or not ref:
            r.check = "no result"
        else:
            rd = D.rel_diff(tuple(r.results), tuple(ref))
            r.check = "ok" if rd <= D.REL_TOL else f"MISMATCH rel {rd:.1e}"
        row["systems"][r.system] = r.summary()
    row["verdict"] = verdict(row["systems"])
    progress(f"{w.key}: " + ", ".join(f"{k} {_shown(e)}" for k, e in row["systems"].items()) + f" -> {row['verdict']}")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="write the row's JSON here")
    a = ap.parse_args(argv)
    D.emit(run(), a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
