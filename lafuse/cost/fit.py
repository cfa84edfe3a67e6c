"""Cost functions fitted to measurements (paper 002 §7): an implementation's time as a non-negative
combination of analytic features — floating point operations, bytes moved over the network, bytes of
data pushed through, blocks (tuples: a fixed cost each) — with the weights fitted by least squares on
benchmark runs this machine took.

Why relative least squares: the runs span orders of magnitude (a 100 x 100 product and a 10^4 x 10^4
one), and an absolute fit would serve only the largest; each sample is weighted by 1 / its time, so
the fit minimizes relative errors. Why non-negative: a negative seconds-per-byte would make a larger
input cheaper, and a search over formats would exploit it. Quality is stated both ways: R² of the
predicted times and the median relative error. (A foundation of the hardware profile, which holds the
fitted costs: it imports nothing heavy at module level.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FEATURES = ("flops", "net_bytes", "bytes", "blocks")  # paper 002 §7's four features, in this order


@dataclass(frozen=True)
class LinearCost:
    """``seconds = sum(coef[k] * feature[k])``, fitted on ``samples`` runs."""
    coef: tuple[float, ...]
    r2: float
    median_rel_error: float
    samples: int

    def predict(self, features: Sequence[float]) -> float:
        if len(features) != len(self.coef):
            raise ValueError(f"{len(features)} features given, the fit has {len(self.coef)}")
        return float(sum(c * f for c, f in zip(self.coef, features)))

    def to_dict(self) -> dict[str, Any]:
        return {"coef": list(self.coef), "r2": self.r2, "median_rel_error": self.median_rel_error,
                "samples": self.samples}

    @staticmethod
    def from_dict(data: Any) -> LinearCost:
        if not isinstance(data, dict) or set(data) != {"coef", "r2", "median_rel_error", "samples"}:
            raise ValueError(f"not a fitted cost: {data!r}")
        coef = data["coef"]
        if not isinstance(coef, list) or not all(isinstance(c, (int, float)) and c >= 0 for c in coef):
            raise ValueError(f"a fitted cost's coefficients are non-negative numbers, not {coef!r}")
        return LinearCost(tuple(float(c) for c in coef), float(data["r2"]), float(data["median_rel_error"]),
                          int(data["samples"]))


def fit(features: Sequence[Sequence[float]], seconds: Sequence[float]) -> LinearCost:
    """The non-negative weights that minimize the relative squared error of the predicted times."""
    # deferred: NumPy and SciPy, only when fitting (lafuse calibrate); the profile imports this module
    import numpy as np
    from scipy.optimize import nnls

    X = np.asarray(features, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if X.ndim != 2 or len(X) != len(y):
        raise ValueError(f"{len(y)} times and {len(X)} feature rows: one row per measured run")
    if not np.all(np.isfinite(X)) or np.any(X < 0):
        raise ValueError("features are counts and bytes: finite and not negative")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("measured times must be positive and finite")
    used = np.any(X > 0, axis=0)
    if len(y) < int(used.sum()) + 1:
        raise ValueError(f"{len(y)} runs cannot fit {int(used.sum())} weights: measure more sizes")
    coef = np.zeros(X.shape[1])
    coef[used], _ = nnls(X[:, used] / y[:, None], np.ones(len(y)))
    pred = X @ coef
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    rel = float(np.median(np.abs(pred - y) / y))
    return LinearCost(tuple(float(c) for c in coef), r2, rel, len(y))


# The local implementations whose costs ``lafuse calibrate`` fits (the local catalogue's atomic
# implementations and transformations), with the features of one run: A is m x k (CSR: ``nnz``
# non-zeros), B is k x n; a conversion or transpose works on A alone. Bytes: what the run reads and
# writes (dense 8 per cell, CSR 12 per non-zero and 4 per row pointer).
LOCAL_IMPLS = ("mm-dense-dense", "mm-csr-dense", "mm-dense-csr", "to-csr", "to-dense", "transpose-dense",
               "transpose-csr")


def local_features(impl: str, m: float, k: float, n: float, nnz: float) -> tuple[float, float, float, float]:
    """(FLOPs, network bytes, bytes, blocks) of one run of a local implementation."""
    csr = 12.0 * nnz + 4.0 * (m + 1)
    if impl == "mm-dense-dense":
        return 2.0 * m * k * n, 0.0, 8.0 * (m * k + k * n + m * n), 1.0
    if impl == "mm-csr-dense":
        return 2.0 * nnz * n, 0.0, csr + 8.0 * (k * n + m * n), 1.0
    if impl == "mm-dense-csr":  # here nnz counts B's non-zeros
        return 2.0 * m * nnz, 0.0, 8.0 * m * k + 12.0 * nnz + 4.0 * (k + 1) + 8.0 * m * n, 1.0
    if impl in ("to-csr", "to-dense"):
        return m * k, 0.0, 8.0 * m * k + csr, 1.0
    if impl == "transpose-dense":
        return 0.0, 0.0, 16.0 * m * k, 1.0
    if impl == "transpose-csr":
        return nnz, 0.0, 2.0 * csr, 1.0
    raise ValueError(f"unknown local implementation {impl!r}; one of {', '.join(LOCAL_IMPLS)}")
