"""SystemDS's own l2svm and multiLogReg drivers (``tests/conformance/algorithms/``, SystemDS's builtin
scripts from the jar, unmodified) on X 10^6 x 10: lafuse without fusion, with fusion and an empty plan
cache (cold), then twice more with the cache the earlier runs and their background compiles filled
(codegen.deferred: kernels that pay only from the disk cache are compiled after a run; each run waits
for its background compile before the next measurement), against SystemDS 3.4 with codegen off and on.

Whole-process wall time, reading the csv inputs and writing the model included, median of ``--reps``
interleaved runs. SystemDS runs with the default JIT and GC and ``-Xmx`` (the conformance tests'
start-up flags would slow it down). The written models are compared (largest element-wise relative
difference), so a fast wrong answer shows.

    .venv/bin/python benchmarks/systemds_whole.py [--rows 1000000] [--reps 3] [--only l2svm]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from conformance import algodata, compare, corpus, sds  # noqa: E402
from harness import JavaRunner, lafuse_env  # noqa: E402

DRIVERS = ("l2svm", "multiLogReg")
LAFUSE_CONFIGS = {"lafuse no fusion": ["--no-codegen"], "lafuse fusion cold": ["--codegen"],
                  "lafuse fusion 2nd run": ["--codegen"], "lafuse fusion 3rd run": ["--codegen"]}


def run_lafuse(sc: corpus.Script, args: dict[str, str], flags: list[str], cache: Path, work: Path) -> float:
    cmd = [sys.executable, "-m", "lafuse", "run", str(sc.path), "--builtins", str(sds.builtin_scripts_dir()),
           "--no-lafuse-builtins", *flags, "--nvargs", *[f"{k}={v}" for k, v in args.items()]]
    env = lafuse_env(str(cache))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"lafuse {flags} failed on {sc.name}:\n{p.stderr[-2000:]}")
    subprocess.run([sys.executable, "-m", "lafuse.background", "--wait"], env=env, check=True)
    return wall


def model(sc: corpus.Script, out: Path):
    (k, fmt), = sc.outputs.items()
    return compare.read_matrix(out / sc.output_file(k), fmt).values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--heap", default="16g", help="SystemDS -Xmx")
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    java = JavaRunner(a.heap)
    work = Path(tempfile.mkdtemp(prefix="lafuse-sds-whole-"))
    try:
        inputs = algodata.write_all(work / "inputs", a.rows)
        print(f"SystemDS's drivers, X {a.rows}x10 csv; whole-process wall seconds, median of {a.reps} "
              f"(min-max); SystemDS {sds.systemds_version()} with -Xmx{a.heap}")
        print(f"{'driver':<12} {'configuration':<22} {'wall s':>8} {'min-max':>13} {'model diff':>10}")
        for name in DRIVERS:
            if a.only and name not in a.only:
                continue
            sc = corpus.load_script(corpus.ALGORITHMS_DIR / f"{name}.dml")
            walls: dict[str, list[float]] = {}
            diffs: dict[str, float] = {}
            ref = None
            for r in range(a.reps):
                cache = work / f"cache-{name}-{r}"
                for cfg in ("SystemDS codegen off", "SystemDS codegen on", *LAFUSE_CONFIGS):
                    out = work / f"{name}-{r}-{cfg.replace(' ', '_')}"
                    out.mkdir(parents=True)
                    args = sc.arguments(inputs, out)
                    if cfg.startswith("SystemDS"):
                        run = java.run(sc.path, args, codegen=cfg.endswith("on"), workdir=out)
                        if run.error:
                            raise RuntimeError(f"{cfg} failed on {name}: {run.error}")
                        wall = run.wall
                    else:
                        wall = run_lafuse(sc, args, LAFUSE_CONFIGS[cfg], cache, out)
                    walls.setdefault(cfg, []).append(wall)
                    m = model(sc, out)
                    if ref is None:
                        ref = m
                    diffs[cfg] = max(diffs.get(cfg, 0.0), compare.max_rel_diff(ref, m, 0.0))
                shutil.rmtree(cache, ignore_errors=True)
            best_sds = min(statistics.median(walls[c]) for c in walls if c.startswith("SystemDS"))
            for cfg, ws in walls.items():
                med = statistics.median(ws)
                print(f"{name:<12} {cfg:<22} {med:>8.2f} {min(ws):>6.2f}-{max(ws):<6.2f} {diffs[cfg]:>10.1e}"
                      + (f"  (x{med / best_sds:.2f} of SystemDS's better)" if cfg.startswith("lafuse") else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
