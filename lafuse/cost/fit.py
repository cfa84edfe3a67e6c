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

from lafuse.formats import CSC, CSR, format_bytes

FEATURES = ("flops", "net_bytes", "bytes", "blocks")  # paper 002 §7's four features, in this order
# what a fit's features mean (local_features): a fit of other definitions is stale, and the cost model
# uses the analytical costs instead until `lafuse calibrate` measures again. 2: rows per CSR/columns per
# CSC as blocks, a sparse product's random bytes
FEATURES_VERSION = 2


@dataclass(frozen=True)
class LinearCost:
    """``seconds = sum(coef[k] * feature[k])``, fitted on ``samples`` runs."""
    coef: tuple[float, ...]
    r2: float
    median_rel_error: float
    samples: int
    version: int = FEATURES_VERSION  # the feature definitions it was fitted over

    @property
    def current(self) -> bool:
        return self.version == FEATURES_VERSION

    def predict(self, features: Sequence[float]) -> float:
        if len(features) != len(self.coef):
            raise ValueError(f"{len(features)} features given, the fit has {len(self.coef)}")
        return float(sum(c * f for c, f in zip(self.coef, features)))

    def to_dict(self) -> dict[str, Any]:
        return {"coef": list(self.coef), "r2": self.r2, "median_rel_error": self.median_rel_error,
                "samples": self.samples, "features": self.version}

    @staticmethod
    def from_dict(data: Any) -> LinearCost:
        keys = {"coef", "r2", "median_rel_error", "samples"}
        if not isinstance(data, dict) or not keys <= set(data) <= keys | {"features"}:
            raise ValueError(f"not a fitted cost: {data!r}")
        version = data.get("features", 1)  # (version 1 did not record it)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(f"a fitted cost's feature version is a positive integer, not {version!r}")
        coef = data["coef"]
        if not isinstance(coef, list) or not all(isinstance(c, (int, float)) and c >= 0 for c in coef):
            raise ValueError(f"a fitted cost's coefficients are non-negative numbers, not {coef!r}")
        return LinearCost(tuple(float(c) for c in coef), float(data["r2"]), float(data["median_rel_error"]),
                          int(data["samples"]), version)


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
# implementations and transformations, plan.layout.local), with the features of one run: A is m x k
# (sparse: ``nnz`` non-zeros), B is k x n; a conversion, transpose or slice works on A alone (a
# slice takes n of its rows or columns). Bytes: what the run reads and writes (dense 8 per cell,
# CSR/CSC 12 per non-zero and 4 per pointer of the compressed axis). Blocks: the units the kernel
# loops over at a fixed cost each, plus the call: the rows of a CSR operand, the columns of a CSC one
# (a tall CSR matrix of short rows pays per row, which bytes alone do not tell); a slice's is its call.
# A sparse product's bytes count the rows of a large dense operand it reads or writes at random
# (random_bytes).
LOCAL_IMPLS = ("mm-dense-dense", "mm-csr-dense", "mm-csc-dense", "mm-dense-csr", "mm-dense-csc", "to-csr",
               "to-dense", "to-csc", "transpose-dense", "transpose-csr", "slice-major", "slice-minor")


RANDOM_ACCESS_MIN_BYTES = 1 << 20  # bytes: a dense operand beyond this (a core's L2) is missed per gathered row


def random_bytes(impl: str, m: float, k: float, n: float, nnz: float) -> float:
    """Bytes a sparse product gathers at random: a CSR-type kernel (a CSR operand, or a CSC one read
    transposed) reads, per non-zero, a row of the dense operand; where that operand is larger than
    RANDOM_ACCESS_MIN_BYTES and its rows hold several columns, each is a miss. Scattering (CSC-type)
    writes the output's rows in each column's sorted order and was not slower here. Measured
    (benchmarks/sparse_forms.py): t(X) %*% Y with Y of 5 columns (X 2e5 x 100 at 5%) 2.6 ms through a
    CSR X (CSC-type: it scatters), 3.4 through a CSC one (it gathers Y's rows); with one column
    (X %*% v, t(X) %*% y on a 1e6 x 100 X at 5%) CSC was the faster form, 4.2-4.7 against 7.8-8.3 ms,
    so single columns count no random bytes."""
    if impl == "mm-csr-dense":  # gathers rows of B (k x n)
        big, cols = 8.0 * k * n, n
    elif impl == "mm-dense-csc":  # (B^T A^T)^T: B^T is CSR-type, gathering rows of A^T (k x m)
        big, cols = 8.0 * k * m, m
    else:
        return 0.0
    return nnz * 8.0 * cols if big > RANDOM_ACCESS_MIN_BYTES and cols >= 2 else 0.0


def local_features(impl: str, m: float, k: float, n: float, nnz: float) -> tuple[float, float, float, float]:
    """(FLOPs, network bytes, bytes, blocks) of one run of a local implementation. ``slice-major``
    takes n rows of a CSR A (or n columns of a CSC one, with m and k swapped): only their non-zeros
    are read; ``slice-minor`` takes n columns of a CSR A (rows of a CSC one): every row is searched."""
    csr = format_bytes(CSR, m, k, nnz)
    csc = format_bytes(CSC, m, k, nnz)
    if impl == "mm-dense-dense":
        return 2.0 * m * k * n, 0.0, 8.0 * (m * k + k * n + m * n), 1.0
    rand = random_bytes(impl, m, k, n, nnz)
    if impl == "mm-csr-dense":
        return 2.0 * nnz * n, 0.0, csr + 8.0 * (k * n + m * n) + rand, 1.0 + m
    if impl == "mm-csc-dense":
        return 2.0 * nnz * n, 0.0, csc + 8.0 * (k * n + m * n) + rand, 1.0 + k
    if impl in ("mm-dense-csr", "mm-dense-csc"):  # here nnz counts B's non-zeros
        segments = k if impl == "mm-dense-csr" else n
        return (2.0 * m * nnz, 0.0, 8.0 * m * k + 12.0 * nnz + 4.0 * (segments + 1) + 8.0 * m * n + rand,
                1.0 + segments)
    if impl in ("to-csr", "to-dense"):
        return m * k, 0.0, 8.0 * m * k + csr, 1.0
    if impl == "to-csc":  # from CSR
        return nnz, 0.0, csr + csc, 1.0 + m + k
    if impl == "transpose-dense":
        return 0.0, 0.0, 16.0 * m * k, 1.0
    if impl == "transpose-csr":
        return nnz, 0.0, 2.0 * csr, 1.0
    if impl == "slice-major":  # (the pointers of the n rows among the bytes: the call is the fixed cost)
        return 0.0, 0.0, 12.0 * nnz * n / max(m, 1.0) + 8.0 * n, 1.0
    if impl == "slice-minor":  # every row's indices searched
        return 0.0, 0.0, 4.0 * nnz + 4.0 * (m + 1) + 12.0 * nnz * n / max(k, 1.0), 1.0
    raise ValueError(f"unknown local implementation {impl!r}; one of {', '.join(LOCAL_IMPLS)}")
