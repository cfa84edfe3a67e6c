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


def _blas_timeout_in_fresh_process(env_value: str | None) -> tuple[str, int]:
    """(OPENBLAS_THREAD_TIMEOUT seen after ``import lafuse``, NumPy's BLAS threads) in a new process."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    code = ("import os, lafuse\nfrom threadpoolctl import threadpool_info\n"
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], len(threadpool_info()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    value, libs = out.stdout.split()
    return value, int(libs)


def test_openblas_idle_spin_is_shortened_unless_the_user_chose():
    """lafuse sets OpenBLAS's idle-thread spin (lafuse.BLAS_THREAD_TIMEOUT) before NumPy loads it; a
    value in the environment is the user's and stays."""
    value, libs = _blas_timeout_in_fresh_process(None)
    assert value == lafuse.BLAS_THREAD_TIMEOUT and libs >= 1
    assert _blas_timeout_in_fresh_process("25")[0] == "25"
