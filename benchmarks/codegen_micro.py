"""Micro benchmark of generated kernels against the hand-written ones (benchmarks/fusion_kernels.py).

Why: the fused operators should run at memory bandwidth like the hand kernels; this times both on
the same inputs, interleaved, median of 5 after warm-up. Usage: python benchmarks/codegen_micro.py [names]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sps

sys.path.insert(0, str(Path(__file__).parent))
import fusion_kernels as hk  # noqa: E402

from lafuse.hops.cplan import (  # noqa: E402
    CELL,
    COL_AGG_T,
    FULL_AGG,
    MAIN,
    MATRIX,
    OUTER_U,
    OUTER_V,
    CPlan,
    CPlanBuilder,
)
from lafuse.runtime.local import fused  # noqa: E402


def rand_csr(n: int, m: int, density: float, seed: int):
    rng = np.random.default_rng(seed)
    k = int(n * m * density)
    X = sps.coo_matrix((rng.random(k) + 0.1, (rng.integers(0, n, k), rng.integers(0, m, k))), shape=(n, m)).tocsr()
    X.sum_duplicates()
    X.sort_indices()
    return X


def timeit(f, reps: int = 5) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def compare(name: str, cands: dict) -> None:
    for f in cands.values():
        f()
    res: dict[str, list[float]] = {k: [] for k in cands}
    for _ in range(5):
        for k, f in cands.items():
            time.sleep(0.3)  # OpenBLAS workers spin ~0.1 s after a call and would steal the next candidate's cores
            res[k].append(timeit(f, 1))
    print(f"{name:14s} " + "  ".join(f"{k}={statistics.median(v):8.2f}ms" for k, v in res.items()), flush=True)


def main(which: list[str]) -> None:
    rng = np.random.default_rng(0)
    b = CPlanBuilder()
    X, Y, Z = b.input(0, MAIN), b.input(1, CELL), b.input(2, CELL)
    cell = CPlan("cell", b.op("*", b.op("*", X, Y), Z), FULL_AGG, "sum", sparse_safe=True, ninputs=3)
    if "cell" in which:
        x, y, z = (rng.random((20000, 1000)) for _ in range(3))
        op = fused.compile_plan(cell)
        compare("cell dense", {"fused": lambda: op([x, y, z]), "hand": lambda: hk.cell3_dense(x, y, z),
                               "numpy": lambda: float(np.sum(x * y * z))})
        del x, y, z
    if "cellsp" in which:
        xs, ys, zs = (rand_csr(20000, 1000, 0.1, s) for s in range(3))
        op = fused.compile_plan(cell)
        n = xs.shape[0]
        compare("cell csr", {"fused": lambda: op([xs, ys, zs]),
                             "hand": lambda: hk.cell3_csr(n, *hk.csr_parts(xs), *hk.csr_parts(ys), *hk.csr_parts(zs)),
                             "scipy": lambda: float(xs.multiply(ys).multiply(zs).sum())})
    if "mmchain" in which:
        b2 = CPlanBuilder()
        Xm, v = b2.input(0, MAIN), b2.input(1, MATRIX)
        plan = CPlan("row", b2.op("*", Xm, b2.op("vecmat", Xm, v)), COL_AGG_T, ninputs=2)
        x = rng.random((100000, 1000))
        vv = rng.random((1000, 1))
        op = fused.compile_plan(plan)
        compare("mmchain", {"fused": lambda: op([x, vv]), "hand": lambda: hk.mmchain(x, vv[:, 0], 64),
                            "numpy": lambda: x.T @ (x @ vv)})
        del x
    if "outer" in which:
        b3 = CPlanBuilder()
        Xo, U, V = b3.input(0, MAIN), b3.input(1, OUTER_U), b3.input(2, OUTER_V)
        plan = CPlan("outer", b3.op("*", Xo, b3.op("log", b3.op("+", b3.uv(U, V), b3.literal(1e-15)))), FULL_AGG,
                     ninputs=3, sparse_safe=True)
        xo = rand_csr(20000, 20000, 1e-3, 2)
        u, w = rng.random((20000, 100)), rng.random((20000, 100))
        op = fused.compile_plan(plan)
        compare("outer", {"fused": lambda: op([xo, u, w]),
                          "hand": lambda: hk.outer_log_sum(20000, *hk.csr_parts(xo), u, w, 1e-15)})


if __name__ == "__main__":
    main(sys.argv[1:] or ["cell", "cellsp", "mmchain", "outer"])
