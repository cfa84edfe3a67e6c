"""Whole scripts with and without operator fusion: lafuse's l2svm, multiLogReg, pnmf and alsCG on
10^6 x 10 dense data or a 10^4 x 10^4 sparse (1%) matrix, each run as its own process.

Per algorithm and configuration it reports the algorithm's time measured inside the script
(``time()`` around the call, so reading the data is excluded), the whole-process wall time, and the
codegen lines of ``--stats`` (kernels compiled cold, disk-cache hits, compile seconds). Fusion runs
with an empty on-disk plan cache (cold: a kernel compiles only if it pays for a cold compile; those that
would pay only from the disk cache are compiled after the run in the background, codegen.deferred),
then again with that cache (2nd run), and once more after untimed runs until no run defers a kernel any
more (warm; at most WARM_UP_RUNS untimed runs). Every run waits for the background compile it started before the next
measurement. Runs are interleaved; medians over ``--reps``.

    .venv/bin/python benchmarks/fusion_algorithms.py [--rows 1000000] [--cols 10] [--sparse-n 10000] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from harness import lafuse_env

HERE = os.path.dirname(os.path.abspath(__file__))
LAFUSE = os.path.join(os.path.dirname(sys.executable), "lafuse")
WARM_UP_RUNS = 2  # untimed runs after the 2nd while a run still defers kernels (then the timed warm run)

SCRIPTS = {
    "l2svm": """X = read($X, format="binary")
y = read($y, format="binary")
t0 = time()
model = l2svm(X=X, Y=y, intercept=FALSE, epsilon=1e-9, reg=1.0, maxIterations=20, maxii=20, verbose=FALSE)
t1 = time()
print("OPTIME " + (t1 - t0) / 1e9)
print("RESULT " + sum(model))
""",
    "multiLogReg": """X = read($X, format="binary")
y = read($y3, format="binary")
t0 = time()
B = multiLogReg(X=X, Y=y, icpt=0, tol=1e-12, reg=1.0, maxi=10, maxii=10, verbose=FALSE)
t1 = time()
print("OPTIME " + (t1 - t0) / 1e9)
print("RESULT " + sum(B))
""",
    "pnmf": """X = read($S, format="text")
t0 = time()
[W, H] = pnmf(X=X, rnk=20, eps=1e-8, maxi=10, verbose=FALSE, seed=7)
t1 = time()
print("OPTIME " + (t1 - t0) / 1e9)
print("RESULT " + sum(W %*% H[, 1:10]))
""",
    "alsCG": """X = read($S, format="text")
t0 = time()
[U, V] = alsCG(X=X, rank=20, reg=0.01, maxi=10, check=FALSE, thr=0.0, seed=7, verbose=FALSE)
t1 = time()
print("OPTIME " + (t1 - t0) / 1e9)
print("RESULT " + sum(U %*% V[, 1:10]))
""",
}


def make_data(d: str, rows: int, n_sparse: int, cols: int = 10) -> dict[str, str]:
    rng = np.random.default_rng(42)
    X = rng.normal(size=(rows, cols))
    w = rng.normal(size=(cols, 1))
    score = X @ w
    y = np.where(score > 0, 1.0, -1.0)
    y3 = 1.0 + np.digitize(score[:, 0], np.quantile(score, [1 / 3, 2 / 3])).reshape(-1, 1)
    paths = {}
    for name, arr in (("X", X), ("y", y), ("y3", y3)):
        paths[name] = os.path.join(d, f"{name}.npy")
        np.save(paths[name], arr)
    S = sp.random(n_sparse, n_sparse, density=0.01, format="coo", random_state=7, data_rvs=lambda k: rng.uniform(1, 5, k))
    paths["S"] = os.path.join(d, "S.mtx")
    with open(paths["S"], "w") as f:  # ijv text, 1-based
        for i, j, v in zip(S.row, S.col, S.data):
            f.write(f"{i + 1} {j + 1} {float(v)!r}\n")
    with open(paths["S"] + ".mtd", "w") as f:
        f.write(f'{{"data_type": "matrix", "value_type": "double", "rows": {n_sparse}, "cols": {n_sparse}, '
                f'"nnz": {S.nnz}, "format": "text"}}')
    return paths


def run_once(script: str, data: dict[str, str], flags: list[str], cache: str) -> dict[str, object]:
    env = lafuse_env(cache)
    nv = [f"{k}={v}" for k, v in data.items()]
    t0 = time.perf_counter()
    p = subprocess.run([LAFUSE, "run", script, "--stats", "3", *flags, "--nvargs", *nv], capture_output=True,
                       text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{script} {flags} failed:\n{p.stdout}\n{p.stderr}")
    op = float(re.search(r"OPTIME (\S+)", p.stdout).group(1))  # type: ignore[union-attr]
    res = float(re.search(r"RESULT (\S+)", p.stdout).group(1))  # type: ignore[union-attr]
    kern = re.search(r"Codegen kernels: compiled (\d+) \(([\d.]+) sec\.\), disk cache hits (\d+) \(([\d.]+) sec\.\)",
                     p.stdout)
    deferred = re.search(r"\((\d+) kernels that would pay from the disk cache", p.stdout)
    subprocess.run([sys.executable, "-m", "lafuse.background", "--wait"], env=env, check=True)
    return {"op": op, "wall": wall, "result": res, "deferred": int(deferred.group(1)) if deferred else 0,
            "compiled": int(kern.group(1)) if kern else 0, "cold_s": float(kern.group(2)) if kern else 0.0,
            "disk_hits": int(kern.group(3)) if kern else 0, "warm_s": float(kern.group(4)) if kern else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cols", type=int, default=10, help="columns of the dense X (l2svm, multiLogReg)")
    ap.add_argument("--sparse-n", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lafuse-fusion-alg-")
    try:
        data = make_data(work, args.rows, args.sparse_n, args.cols)
        print(f"data: X {args.rows}x{args.cols} dense, S {args.sparse_n}x{args.sparse_n} sparse 1%  ({work})")
        print(f"{'script':<12} {'config':<16} {'op s (median)':>14} {'min-max':>15} {'wall s':>8} "
              f"{'kernels cold':>12} {'compile s':>9} {'disk hits':>9} {'load s':>7} {'deferred':>8}  result")
        for name, text in SCRIPTS.items():
            if args.only and name != args.only:
                continue
            path = os.path.join(work, f"{name}.dml")
            with open(path, "w") as f:
                f.write(text)
            rows: dict[str, list[dict[str, object]]] = {"no fusion": [], "fusion cold": [], "fusion 2nd run": [],
                                                        "fusion warm": []}
            for _ in range(args.reps):
                cache = tempfile.mkdtemp(prefix="cache-", dir=work)
                rows["no fusion"].append(run_once(path, data, ["--no-codegen"], cache))
                rows["fusion cold"].append(run_once(path, data, ["--codegen"], cache))
                second = run_once(path, data, ["--codegen"], cache)
                rows["fusion 2nd run"].append(second)
                last = second
                for _ in range(WARM_UP_RUNS):
                    if not last["deferred"]:
                        break
                    last = run_once(path, data, ["--codegen"], cache)
                rows["fusion warm"].append(run_once(path, data, ["--codegen"], cache))
                shutil.rmtree(cache, ignore_errors=True)
            base = statistics.median(float(r["op"]) for r in rows["no fusion"])  # type: ignore[arg-type]
            for cfg, rs in rows.items():
                ops = [float(r["op"]) for r in rs]  # type: ignore[arg-type]
                med = statistics.median(ops)
                last = rs[-1]
                print(f"{name:<12} {cfg:<16} {med:>14.3f} {min(ops):>7.3f}-{max(ops):<7.3f} "
                      f"{statistics.median(float(r['wall']) for r in rs):>8.2f} {last['compiled']:>12} "  # type: ignore[arg-type]
                      f"{last['cold_s']:>9.3f} {last['disk_hits']:>9} {last['warm_s']:>7.3f} {last['deferred']:>8}  "
                      f"{last['result']:.10g}"
                      + (f"  (x{med / base:.2f} of no fusion)" if cfg != "no fusion" else ""))
            res = {float(r["result"]) for rs in rows.values() for r in rs}  # type: ignore[arg-type]
            spread = (max(res) - min(res)) / max(abs(min(res)), 1e-300)
            print(f"{name:<12} results agree to {spread:.1e} relative")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
