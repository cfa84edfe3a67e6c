"""Optimization time of the format-choice searches (paper 002 §8.4, Fig. 13), beside the paper's.

The paper's matrix-multiply chains (lafuse.plan.layout.blocked.chain_graph: Tree, DAG1, DAG2) at
scales 1-4, every input a 20,000 x 20,000 single block, 10 workers, over the three format sets of
Fig. 13 (single/tiles 10, + strips 16, all in dense and CSR blocks 32): the time of the DP the graph
needs (the tree DP for Tree, the frontier DP for DAG1 and DAG2, median of 3) and of brute force at
scale 1 (skipped where the paper's own took over 20 minutes; its "Fail" beyond scale 1). Both
searches are exact, so the costs must agree where both ran. Model output: nothing runs on a cluster.
Run alone, it also prints the plan chosen for DAG2 at scale 1 (each product's implementation, formats,
transformations, cost and runner-up).

    .venv/bin/python benchmarks/layout_search.py
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from lafuse.plan.layout import Problem, brute_force, explain, optimize, render
from lafuse.plan.layout.blocked import catalogue, chain_graph

# paper 002 Fig. 13, seconds (MM:SS), by (format set, shape, scale): (DP, brute force or None = "Fail")
PUBLISHED = {
    ("all", "dag2"): [(1, 1614), (8, None), (16, None), (23, None)],
    ("all", "dag1"): [(1, 1633), (1, None), (2, None), (3, None)],
    ("all", "tree"): [(0, 1531), (1, None), (1, None), (2, None)],
    ("strip", "dag2"): [(0, 1444), (6, None), (11, None), (15, None)],
    ("strip", "dag1"): [(0, 1437), (2, None), (2, None), (3, None)],
    ("strip", "tree"): [(0, 1154), (0, None), (1, None), (1, None)],
    ("block", "dag2"): [(0, 28), (0, None), (0, None), (2, None)],
    ("block", "dag1"): [(0, 26), (0, None), (0, None), (0, None)],
    ("block", "tree"): [(0, 20), (0, None), (0, None), (0, None)],
}
BRUTE_KINDS = ("block", "strip")  # brute force at scale 1 here (the paper's took 20-28 s and 19-24 min)


def measure(scales: tuple[int, ...] = (1, 2, 3, 4), reps: int = 3, brute: tuple[str, ...] = BRUTE_KINDS,
            progress: Any = None, kinds: tuple[str, ...] = ("all", "strip", "block")) -> list[dict[str, Any]]:
    rows = []
    for kind in kinds:
        cat = catalogue(kind)
        for shape in ("tree", "dag1", "dag2"):
            for scale in scales:
                if progress is not None:
                    progress(f"{kind} {shape} scale {scale}")
                times, cost = [], None
                for _ in range(reps):
                    t = time.perf_counter()
                    ann = optimize(Problem(chain_graph(shape, scale), cat))
                    times.append(time.perf_counter() - t)
                    cost = ann.cost
                row: dict[str, Any] = {"formats": kind, "n_formats": len(cat.formats), "shape": shape,
                                       "scale": scale, "dp_s": statistics.median(times), "cost": cost,
                                       "published_dp_s": PUBLISHED[(kind, shape)][scale - 1][0],
                                       "published_brute_s": PUBLISHED[(kind, shape)][scale - 1][1]}
                if scale == 1 and kind in brute:
                    t = time.perf_counter()
                    b = brute_force(Problem(chain_graph(shape, 1), cat))
                    row["brute_s"], row["brute_cost"] = time.perf_counter() - t, b.cost
                    row["equal"] = abs(b.cost - (cost or 0.0)) <= 1e-9 * max(1.0, b.cost)
                rows.append(row)
    return rows


def summary_line(r: dict[str, Any]) -> str:
    brute = f", brute force {r['brute_s']:.1f} s ({'same' if r['equal'] else 'DIFFERENT'} cost)" if "brute_s" in r else ""
    return (f"layout {r['formats']:5s} {r['shape']:4s} scale {r['scale']}: DP {r['dp_s'] * 1e3:.0f} ms "
            f"(paper {r['published_dp_s']} s){brute}")


if __name__ == "__main__":
    for row in measure():
        print(summary_line(row))
    pb = Problem(chain_graph("dag2", 1), catalogue("all"))
    ann = optimize(pb)
    print(f"\nthe plan of DAG2 at scale 1 over all 32 formats (cost {ann.cost:.4g} s, model):")
    print(render(explain(pb, ann)))
    sys.exit(0)
