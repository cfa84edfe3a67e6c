"""The Python entry point: run_dml binds NumPy/SciPy/Python inputs and returns named outputs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lafuse
from lafuse.errors import DMLRuntimeError, DMLValidationError


def test_inputs_and_outputs_round_trip():
    X = np.arange(6, dtype=float).reshape(3, 2)
    r = lafuse.run_dml("Y = t(X) %*% X + s\nn = nrow(X)", inputs={"X": X, "s": 1.5}, outputs=["Y", "n"])
    np.testing.assert_allclose(r["Y"], X.T @ X + 1.5)
    assert r["n"] == 3 and isinstance(r["n"], int)


def test_sparse_and_vector_inputs():
    S = sp.random(50, 40, density=0.05, random_state=3, format="csr")
    v = np.arange(40.0)
    r = lafuse.run_dml("y = S %*% v\ntot = sum(S)", inputs={"S": S, "v": v}, outputs=["y", "tot"])
    np.testing.assert_allclose(np.asarray(r["y"]).ravel(), S @ v)
    assert r["tot"] == pytest.approx(S.sum())


def test_outputs_survive_dead_code_removal_and_sizes_are_known():
    # Z is never read by the script: it must still be computed because it is an output
    r = lafuse.run_dml("Z = X * 2\nw = ncol(X)", inputs={"X": np.ones((2, 5))}, outputs=["Z", "w"])
    assert r["Z"].shape == (2, 5) and r["w"] == 5


def test_errors():
    with pytest.raises(DMLValidationError):
        lafuse.run_dml("y = x + 1", outputs=["y"])  # x is not bound
    with pytest.raises(DMLRuntimeError):
        lafuse.run_dml("if (FALSE) { y = 1 }", outputs=["y"])
