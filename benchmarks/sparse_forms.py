"""SciPy's sparse kernels on CSR against CSC, the facts the local format choice rests on
(plan.layout.local, cost.fit.random_bytes, cost.constants.SPARSE_SEGMENT_TIME): products with a vector
and with a many-column dense operand, each operand read as stored and transposed, slices along and
across the compressed axis, and the conversion between the two.

    .venv/bin/python benchmarks/sparse_forms.py      # medians of 21 calls, ms
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

CASES = ((200000, 1000, 0.01, 1), (1000000, 100, 0.05, 1), (200000, 100, 0.05, 5), (100000, 200, 0.02, 20),
         (20000, 5000, 0.01, 1))


def _ms(f: Callable[[], object], reps: int = 21) -> float:
    f()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _row(x: sp.csr_array, v: np.ndarray, y: np.ndarray) -> list[str]:
    """One matrix's kernels as CSR and as CSC."""
    c = x.tocsc()
    return [f"X %*% V {_ms(lambda: x @ v):.2f} / {_ms(lambda: c @ v):.2f}",
            f"t(X) %*% Y {_ms(lambda: x.T @ y):.2f} / {_ms(lambda: c.T @ y):.2f}",
            f"X[, j] {_ms(lambda: x[:, [5]]):.3f} / {_ms(lambda: c[:, [5]]):.3f}",
            f"X[i, ] {_ms(lambda: x[[5], :]):.3f} / {_ms(lambda: c[[5], :]):.3f}",
            f"CSR -> CSC {_ms(x.tocsc, 5):.2f}"]


def main() -> None:
    rng = np.random.default_rng(0)
    print("X rows x cols at density, k columns of the dense operand; ms, CSR / CSC")
    for n, m, d, k in CASES:
        x = sp.random_array((n, m), density=d, format="csr", rng=0)
        row = _row(x, rng.random((m, k)), rng.random((n, k)))
        print("  ".join([f"X {n} x {m} at {d:.0%}, k={k}:", *row]))


if __name__ == "__main__":
    main()
