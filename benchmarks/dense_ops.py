"""Ten plain dense operations on 5000x1000: lafuse vs the same NumPy code, side by side.

Both sides load the same input matrix from one ``.npy`` file (lafuse's rand is SystemDS's
generator, NumPy's is another, so generating the data would compare generators). Measures
(a) operation time: lafuse's instruction time (``--stats`` heavy hitters, the read excluded)
against the same ten NumPy calls, and (b) whole-process wall time of ``lafuse run`` against
``python -c <numpy script>``, both reading the file. Runs interleaved; reports medians, min-max
and ratios.

    .venv/bin/python benchmarks/dense_ops.py [--rows 5000 --cols 1000 --reps 7]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# the ten operations, once: run in-process by numpy_ops and as a script by the wall-time runner
OPS = """
Y = X * 2.0
Z = Y + X
W = Z / 3.0
V = W - 0.5
U = np.abs(V)
S = U * X
R = np.exp(S)
Q = R + Y
P = np.sqrt(Q)
s = float(P.sum())
"""
_OPS_CODE = compile(OPS, "<ops>", "exec")
NUMPY_SRC = "import numpy as np, sys\nX = np.load(sys.argv[1])\n" + OPS + "print(repr(s))\n"
DML = """
X = read($X, format="binary")
Y = X * 2.0
Z = Y + X
W = Z / 3.0
V = W - 0.5
U = abs(V)
S = U * X
R = exp(S)
Q = R + Y
P = sqrt(Q)
print(sum(P))
"""


def numpy_ops(X: np.ndarray) -> tuple[float, float]:
    ns = {"np": np, "X": X}
    t0 = time.perf_counter()
    exec(_OPS_CODE, ns)
    return time.perf_counter() - t0, ns["s"]


def lafuse_ops(script: str, path: str) -> tuple[float, float]:
    """Instruction time of the ten operations inside lafuse (the read excluded, as for NumPy)."""
    from lafuse import config as cfgmod
    from lafuse.compiler import Compiler
    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    stats = Stats()
    with cfgmod.using(cfgmod.Config(stats=True)):
        comp = Compiler(cfgmod.get(), {"X": path}, stats=stats)
        prog = comp.compile_text(DML, script)
        buf = io.StringIO()
        Interpreter(prog, comp, out=buf, stats=stats).run()
    ops = sum(t for op, t in stats.op_time.items() if op not in ("pread", "print", "tread"))
    return ops, float(buf.getvalue().strip())


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "X.npy")
        X = np.random.default_rng(7).random((a.rows, a.cols))
        np.save(path, X)
        script = os.path.join(tmp, "dense_ops.dml")
        with open(script, "w") as f:
            f.write(DML)
        lf_t, np_t, lf_w, np_w = [], [], [], []
        for _ in range(a.reps):
            t, s1 = lafuse_ops(script, path)
            lf_t.append(t)
            t, s2 = numpy_ops(X)
            np_t.append(t)
            assert abs(s1 - s2) <= 1e-9 * abs(s2), (s1, s2)
            lf_w.append(wall([sys.executable, "-m", "lafuse", "run", script, "--nvargs", f"X={path}"]))
            np_w.append(wall([sys.executable, "-c", NUMPY_SRC, path]))
    med = statistics.median
    print(f"ten dense operations on {a.rows}x{a.cols}, median of {a.reps} interleaved runs")
    print(f"  operation time: lafuse {med(lf_t) * 1e3:8.1f} ms  numpy {med(np_t) * 1e3:8.1f} ms  "
          f"ratio {med(lf_t) / med(np_t):.3f}  (min-max lafuse {min(lf_t) * 1e3:.1f}-{max(lf_t) * 1e3:.1f}, "
          f"numpy {min(np_t) * 1e3:.1f}-{max(np_t) * 1e3:.1f}); ratio of minima {min(lf_t) / min(np_t):.3f}")
    print(f"  process wall:   lafuse {med(lf_w) * 1e3:8.1f} ms  numpy {med(np_w) * 1e3:8.1f} ms  "
          f"ratio {med(lf_w) / med(np_w):.3f}  (min-max lafuse {min(lf_w) * 1e3:.1f}-{max(lf_w) * 1e3:.1f}, "
          f"numpy {min(np_w) * 1e3:.1f}-{max(np_w) * 1e3:.1f}); ratio of minima {min(lf_w) / min(np_w):.3f}")


if __name__ == "__main__":
    main()
