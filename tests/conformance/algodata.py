"""Deterministic data for the algorithm drivers in ``algorithms/`` (SystemDS's own scripts run unmodified).

Every file is a function of the row count ``n`` only, so the tests use small inputs (``N_TEST``) and
``benchmarks/systemds_algorithms.py`` writes the same families at larger sizes. Values are written with
``repr`` so Java's ``Double.parseDouble`` and Python read back the identical doubles.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

N_TEST = 200
M_FEATURES = 10
AE_H1, AE_H2 = 5, 2  # autoencoder hidden layer widths used by algorithms/autoencoder_2layer.dml


def _rng(tag: int) -> np.random.Generator:
    return np.random.default_rng(20261122 + tag)


def features(n: int) -> np.ndarray:
    """n x 10 standard-normal features with one correlated pair (column 2 ~ column 1)."""
    A = _rng(1).normal(size=(n, M_FEATURES))
    A[:, 1] = 0.8 * A[:, 0] + 0.6 * A[:, 1]
    return A


def _linear(n: int) -> np.ndarray:
    beta = np.linspace(-2.0, 3.0, M_FEATURES)[:, None]
    return features(n) @ beta


def y_regression(n: int) -> np.ndarray:
    return _linear(n) + 1.5 + 0.3 * _rng(2).normal(size=(n, 1))


def y_classes(n: int) -> np.ndarray:
    """Labels 1..3 from the arg-max of three noisy linear scores."""
    W = _rng(3).normal(size=(M_FEATURES, 3))
    S = features(n) @ W + 0.5 * _rng(4).normal(size=(n, 3))
    return (np.argmax(S, axis=1) + 1.0)[:, None]


def y_binary(n: int) -> np.ndarray:
    """Labels -1/+1 from a noisy linear score."""
    return np.where(_linear(n) + 2.0 * _rng(5).normal(size=(n, 1)) > 0, 1.0, -1.0)


def y_counts(n: int) -> np.ndarray:
    """Poisson counts with log-mean linear in the features (glm, Poisson/log)."""
    eta = 0.5 + 0.1 * _linear(n)
    return _rng(6).poisson(np.exp(eta)).astype(float)


def y_bernoulli(n: int) -> np.ndarray:
    """0/1 outcomes with logit linear in the features (glm, binomial/logit)."""
    p = 1.0 / (1.0 + np.exp(-0.3 * _linear(n)))
    return (_rng(7).uniform(size=(n, 1)) < p).astype(float)


def ratings(n: int) -> np.ndarray:
    """(n/2) x 30 nonnegative low-rank (rank 3) matrix with about 40% of the cells zero (NMF, ALS)."""
    r = max(n // 2, 4)
    rng = _rng(8)
    M = rng.uniform(0.2, 1.0, size=(r, 3)) @ rng.uniform(0.2, 1.0, size=(3, 30))
    M = np.round(M * 2.0, 3)
    M[rng.uniform(size=M.shape) < 0.4] = 0.0
    return M


def counts(n: int) -> np.ndarray:
    """n x 10 nonnegative integer counts (naive Bayes)."""
    return np.floor(np.abs(features(n)) * 3.0)


def _ae(shape_of: Callable[[int], tuple[int, int]], tag: int) -> Callable[[int], np.ndarray]:
    return lambda n: _rng(tag).uniform(-1.0, 1.0, size=shape_of(n))


# file name -> generator of the matrix for n rows of features
FILES: dict[str, Callable[[int], np.ndarray]] = {
    "A.csv": features,
    "yreg.csv": y_regression,
    "ycls.csv": y_classes,
    "ybin.csv": y_binary,
    "ycnt.csv": y_counts,
    "y01.csv": y_bernoulli,
    "R.csv": ratings,
    "D.csv": counts,
    "W1r.csv": _ae(lambda n: (AE_H1, M_FEATURES), 9),
    "W2r.csv": _ae(lambda n: (AE_H2, AE_H1), 10),
    "W3r.csv": _ae(lambda n: (AE_H1, AE_H2), 11),
    "W4r.csv": _ae(lambda n: (M_FEATURES, AE_H1), 12),
    "order.csv": _ae(lambda n: (n, 1), 13),
}


def csv_text(M: np.ndarray) -> str:
    return "".join(",".join(repr(float(v)) for v in row) + "\n" for row in M)


def mtd_text(rows: int, cols: int) -> str:
    return ('{\n    "data_type": "matrix",\n    "value_type": "double",\n'
            f'    "rows": {rows},\n    "cols": {cols},\n    "format": "csv",\n'
            '    "header": false,\n    "sep": ","\n}\n')


def content(name: str, n: int = N_TEST) -> tuple[str, str]:
    M = FILES[name](n)
    return csv_text(M), mtd_text(*M.shape)


def write_all(directory: Path, n: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        text, mtd = content(name, n)
        (directory / name).write_text(text)
        (directory / (name + ".mtd")).write_text(mtd)
    return directory
