"""Start-up: a small script's whole-process wall time against ``python -c "import numpy"``.

Each lafuse command and the yardstick run in turn (A B A B ...), after warm-up runs that fill the
bytecode and plan caches (the cached AST, kernels a script uses); the ratio is taken pair by pair so
a drift of the machine's speed during the measurement moves both sides. Bytecode is written even
where ``PYTHONDONTWRITEBYTECODE`` is set: the measurement is of warm starts, as an installed package
has them.

    .venv/bin/python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPTS = {
    "print(1)": "print(1)\n",
    "10x10 product": "X = rand(rows=10, cols=10, seed=1)\nprint(sum(X %*% t(X)))\n",
}


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {(p.stderr or p.stdout).strip()[-200:]}")
    return dt


def measure(runs: int = 15, warmup: int = 2, cache: str | None = None) -> list[dict[str, Any]]:
    """One row per script: lafuse's and the yardstick's median wall seconds and the median of the
    pairwise ratios."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["LAFUSE_BACKGROUND"] = "0"  # no background compile after the run shares the CPU with the next
    out = []
    with tempfile.TemporaryDirectory(prefix="lafuse-startup-") as d:
        if cache is None:
            env["LAFUSE_CODEGEN_CACHE"] = str(Path(d) / "cache")
        else:
            env["LAFUSE_CODEGEN_CACHE"] = cache
        base = [sys.executable, "-c", "import numpy"]
        for name, text in SCRIPTS.items():
            script = Path(d) / "s.dml"
            script.write_text(text)
            cmd = [sys.executable, "-m", "lafuse", "run", str(script)]
            for _ in range(warmup):
                _wall(cmd, env)
                _wall(base, env)
            a, b = [], []
            for _ in range(runs):
                a.append(_wall(cmd, env))
                b.append(_wall(base, env))
            out.append({"script": name, "runs": runs, "lafuse_median": statistics.median(a),
                        "numpy_import_median": statistics.median(b),
                        "ratio_median": statistics.median(x / y for x, y in zip(a, b))})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args(argv)
    for r in measure(a.runs):
        print(f"{r['script']}: lafuse {r['lafuse_median'] * 1e3:.0f} ms, python -c 'import numpy' "
              f"{r['numpy_import_median'] * 1e3:.0f} ms, ratio {r['ratio_median']:.2f} (median of {r['runs']} pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
