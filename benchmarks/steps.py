"""The algorithms' fixed inner steps and batch sizes, shared by their DML (``algorithms.py``) and their
Python-API versions (``python_api.py``), and the body of a timed process of its own, in a module
that imports nothing at its top: a Python-API process imports lafuse, NumPy and this, as a user's
script would, and no benchmark machinery (which loads SciPy and Numba, and so would change what
lafuse's optimizer counts as already started)."""

from typing import Any

CG_STEPS = 5  # inner conjugate-gradient steps per outer iteration (the DML's 1:CG)
ALSCG_CG_STEPS = 3  # per factor, ALS-CG's two solves per iteration
AE_BATCH = 256  # AutoEncoder's mini-batch rows
MLP_BATCH = 128  # the MLP's mini-batch rows


def timed_process(files: list[str], prepare: Any) -> int:
    """A timed process's body (``numpy_twin.py``, ``python_api.py``): the ``NAME=PATH`` inputs read
    (``.npz``: SciPy CSR, else ``.npy``), ``prepare(arrays)`` called outside the timed region, what it
    returns called inside it; prints "T <ns>" and one "R <x>" per result."""
    import time

    import numpy as np

    arrays = {}
    for name, path in (a.split("=", 1) for a in files):
        if path.endswith(".npz"):
            import scipy.sparse as sp  # (a sparse input: as lafuse's read of one)

            arrays[name] = sp.csr_array(sp.load_npz(path))
        else:
            arrays[name] = np.load(path)
    job = prepare(arrays)
    t0 = time.perf_counter_ns()
    res = job()
    t1 = time.perf_counter_ns()
    print(f"T {t1 - t0}")
    for v in res:
        print(f"R {float(v)!r}")
    return 0
