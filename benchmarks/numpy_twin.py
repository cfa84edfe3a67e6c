"""An algorithm's NumPy twin as one process: reads the inputs lafuse reads, runs the loop once, timed.

Why a process of its own: lafuse's algorithm time is one run in a fresh process (``time()`` around the
algorithm, after reading the data), so its memory is touched for the first time while it runs (page
faults: 0.42 GB/s on the benchmark machine). The NumPy twin timed in the harness process after a
warm-up call reuses memory its earlier runs touched: the same loop measured 1.3-1.75x faster that
way (AutoEncoder 1e5 x 100: 0.378 s warm against 0.568 s as the first run of a process). The
suite reports both; ratios are to this one, measured as lafuse is.

    python benchmarks/numpy_twin.py KEY NAME=PATH ...     (prints "T <ns>" and one "R <x>" per result)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import algorithms  # noqa: E402
import steps  # noqa: E402


def twin_main(argv: list[str], run: Callable[[algorithms.Algorithm, dict], tuple]) -> int:
    """``KEY NAME=PATH ...``: the inputs read (``.npz``: SciPy CSR, else ``.npy``), then ``run`` timed."""
    alg = next(a for a in algorithms.ALGORITHMS if a.key == argv[0])
    return steps.timed_process(argv[1:], lambda arrays: lambda: run(alg, arrays))


def main(argv: list[str]) -> int:
    return twin_main(argv, algorithms.run_numpy)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
