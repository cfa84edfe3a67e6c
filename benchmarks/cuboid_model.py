"""FuseME's (P, Q, R) search and its communication model at the paper's cluster scale (paper 004).

Two things, both model output (nothing here moves a byte):

* how long lafuse.cost.cuboid.search takes on a 2M-cell multiplication space against the brute
  force it equals (paper 004 §6.3: "a few milliseconds ... for I x J x K = 2M");
* the communication the model gives the broadcast (BFO, T = N Tc tasks), replicating (RFO) and
  cuboid (CFO at the searched (P, Q, R)) operators for ``X * log(U %*% t(V) + eps)`` on paper 004's
  Table 3 data sets, at its cluster (8 workers x 12 tasks, 10 GB per task, 1 Gbps, 546 GFLOPS), set
  beside the optima and ratios the paper publishes. Sizes are cells (non-zeros for X) at 8 bytes.
  The paper's own byte counts do not follow its formula, so compare trends, not absolute numbers.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from lafuse.cost import cuboid as cb

BYTES = 8.0  # per cell


def paper_cluster(nodes: int = 8) -> cb.Cluster:
    return cb.Cluster(nodes=nodes, tasks_per_node=12, task_memory=10e9 / BYTES, net_bw=1e9 / 8 / BYTES,
                      compute_bw=546e9)


# (label, rows n, inner k, density, nodes, published (P*,Q*,R*), published BFO/CFO communication ratio)
DATASETS: list[tuple[str, int, int, float, int, tuple[int, int, int] | None, float | None]] = [
    ("n x 2K x n, n=100K", 100_000, 2_000, 0.001, 8, (8, 6, 2), 3.9),
    ("n x 2K x n, n=250K", 250_000, 2_000, 0.001, 8, (8, 6, 2), 17.1),
    ("n x 2K x n, n=500K", 500_000, 2_000, 0.001, 8, (8, 6, 2), 64.0),
    ("n x 2K x n, n=750K", 750_000, 2_000, 0.001, 8, (8, 6, 2), None),
    ("100K x n x 100K, n=2K", 100_000, 2_000, 0.2, 8, (12, 8, 1), None),
    ("100K x n x 100K, n=5K", 100_000, 5_000, 0.2, 8, (8, 6, 2), None),
    ("100K x n x 100K, n=10K", 100_000, 10_000, 0.2, 8, (6, 4, 4), None),
    ("100K x n x 100K, n=50K", 100_000, 50_000, 0.2, 8, (4, 3, 8), None),
    ("100K x 2K x 100K, d=0.05", 100_000, 2_000, 0.05, 8, (8, 6, 2), None),
    ("100K x 2K x 100K, d=0.1", 100_000, 2_000, 0.1, 8, (8, 6, 2), None),
    ("100K x 2K x 100K, d=0.5", 100_000, 2_000, 0.5, 8, (12, 8, 1), None),
    ("100K x 2K x 100K, d=1.0", 100_000, 2_000, 1.0, 8, (12, 8, 1), None),
    ("1M x 5K x 1M (§6.3)", 1_000_000, 5_000, 0.001, 8, (5, 4, 5), None),
    ("100K x 2K x 100K, d=0.1, 2 nodes", 100_000, 2_000, 0.1, 2, None, 294.6 / 16.7),
]


def search_timing(runs: int = 20) -> dict[str, Any]:
    """Pruned search (median of ``runs``) and one brute force over a 1000 x 400 x 5 block space."""
    m = cb.outer_loss(1_000_000, 400_000, 5_000, 0.001 * 1e6 * 4e5)
    cl = paper_cluster()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fast = cb.search(m, cl)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    full = cb.brute_force(m, cl)
    brute = time.perf_counter() - t
    return {"cells": m.I * m.J * m.K, "search_s": statistics.median(times), "brute_force_s": brute,
            "search_points": fast.evaluated, "brute_force_points": full.evaluated, "pqr": list(fast.pqr),
            "equal": fast.pqr == full.pqr and fast.cost == full.cost}


def modelled() -> list[dict[str, Any]]:
    rows = []
    for label, n, k, d, nodes, pub, pub_ratio in DATASETS:
        m = cb.outer_loss(n, n, k, d * n * n)
        cl = paper_cluster(nodes)
        got = cb.search(m, cl)
        T = cl.nodes * cl.tasks_per_node
        bfo = cb.net_est((T, T, 1), m) * BYTES
        rfo = cb.net_est((m.I, m.J, 1), m) * BYTES
        cfo = got.net * BYTES
        rows.append({"data": label, "nodes": nodes, "pqr": list(got.pqr), "published_pqr": list(pub) if pub else None,
                     "bfo_bytes": bfo, "rfo_bytes": rfo, "cfo_bytes": cfo,
                     "cfo_aggregation_bytes": cb.aggregation(got.pqr, m) * BYTES,
                     "bfo_memory_bytes": cb.bfo_memory(m, T) * BYTES, "cfo_memory_bytes": got.memory * BYTES,
                     "task_memory_bytes": cl.task_memory * BYTES, "published_bfo_ratio": pub_ratio})
    return rows


def measure() -> dict[str, Any]:
    return {"search": search_timing(), "rows": modelled()}


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=1))
