"""The algorithms' fixed inner steps and batch sizes, shared by their DML (``algorithms.py``) and their
Python-API versions (``python_api.py``), in a module that imports nothing: a Python-API process
imports lafuse, NumPy and this, as a user's script would, and no benchmark machinery (which loads
SciPy and Numba, and so would change what lafuse's optimizer counts as already started)."""

CG_STEPS = 5  # inner conjugate-gradient steps per outer iteration (the DML's 1:CG)
ALSCG_CG_STEPS = 3  # per factor, ALS-CG's two solves per iteration
AE_BATCH = 256  # AutoEncoder's mini-batch rows
MLP_BATCH = 128  # the MLP's mini-batch rows
