"""Fitted cost functions (cost.fit, paper 002 §7): the weights of known costs are recovered from noisy
runs spanning orders of magnitude, never negative, and the stated quality says how good the fit is."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse.cost.fit import FEATURES, LinearCost, fit


def _runs(coef, n, noise, seed):
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(0, 4, size=(n, 1))  # sizes over four orders of magnitude
    X = scale * rng.uniform(0.5, 2.0, size=(n, len(coef))) * np.array([1e9, 1e8, 1e8, 10.0])
    y = X @ np.asarray(coef) * rng.lognormal(0.0, noise, size=n)
    return X, y


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), c=st.tuples(*[st.floats(1e-12, 1e-9)] * 3, st.floats(1e-5, 1e-3)))
def test_known_weights_are_recovered_from_noisy_runs(seed, c):
    X, y = _runs(c, 40, 0.03, seed)
    f = fit(X, y)
    assert f.samples == 40 and len(f.coef) == len(FEATURES)
    assert all(k >= 0 for k in f.coef)
    assert f.median_rel_error < 0.1 and f.r2 > 0.9
    # the fitted model predicts new runs within the noise
    Xn, yn = _runs(c, 20, 0.0, seed + 1)
    pred = np.array([f.predict(r) for r in Xn])
    assert np.median(np.abs(pred - yn) / yn) < 0.1


def test_the_fit_is_relative_small_runs_count_as_much_as_large_ones():
    X = np.array([[1e6, 0, 0, 1], [1e9, 0, 0, 1], [1e12, 0, 0, 1]])
    y = np.array([1e-3 + 1e-4, 1.0 + 1e-4, 1000.0 + 1e-4])  # 1 ns per FLOP + 0.1 ms per block
    f = fit(X, y)
    assert f.coef[0] == pytest.approx(1e-9, rel=1e-3) and f.coef[3] == pytest.approx(1e-4, rel=0.05)
    assert f.median_rel_error < 1e-3


def test_weights_are_never_negative_and_unused_features_stay_zero():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(1, 10, 30), np.zeros(30), rng.uniform(1, 10, 30), np.ones(30)])
    y = 2.0 * X[:, 0] - 0.5 * X[:, 2] + 20  # a negative true weight: the fit may not follow it
    f = fit(X, y)
    assert all(k >= 0 for k in f.coef) and f.coef[1] == 0.0


def test_noise_without_signal_shows_in_the_stated_quality():
    rng = np.random.default_rng(1)
    X = rng.uniform(1, 2, size=(50, 4))
    y = rng.uniform(0.1, 10.0, size=50)
    f = fit(X, y)
    assert f.r2 < 0.5 and f.median_rel_error > 0.3


def test_round_trip_and_bad_input():
    X, y = _runs((1e-10, 1e-10, 1e-10, 1e-4), 12, 0.01, 2)
    f = fit(X, y)
    assert LinearCost.from_dict(f.to_dict()) == f
    with pytest.raises(ValueError, match="positive"):
        fit(X, -y)
    with pytest.raises(ValueError, match="one row per measured run"):
        fit(X, y[:-1])
    with pytest.raises(ValueError, match="measure more sizes"):
        fit(X[:3], y[:3])
    with pytest.raises(ValueError, match="not negative"):
        fit(-X, y)
    with pytest.raises(ValueError, match="non-negative"):
        LinearCost.from_dict({"coef": [-1.0], "r2": 1.0, "median_rel_error": 0.0, "samples": 3})
    with pytest.raises(ValueError, match="features given"):
        f.predict([1.0])
