"""lafuse: a declarative machine-learning system for Python in the line of Apache SystemDS.

``import lafuse as lf``: lazy matrices (``lf.matrix(X)``), NumPy's operators, every DML builtin and
library algorithm as ``lf.<name>``, ``lf.compute(...)`` (docs/python.md); ``lafuse.run_dml(script,
inputs={...}, outputs=[...])`` runs DML text; the ``lafuse`` command runs DML files (README.md).
"""

import os as _os

# OpenBLAS's idle threads spin for 2^THREAD_TIMEOUT cycles after a product before they sleep
# (default 2^28, ~0.1 s here). A fused kernel after an unfused product then shares the cores with
# NumPy's spinning BLAS thread: GNMF's W update with its row kernel (W * (X %*% t(H)) / ..., X 5e4 x
# 1000, after the unfused W %*% (H %*% t(H))) took 67-73 ms an iteration, 38-43 ms with 2^18 cycles
# (~0.1 ms), unfused 47-53 either way. Shorter hurts the other way: a mini-batch loop's small products
# pay waking the threads (AutoEncoder's 256-row batches, medians of a run: 2^16 96 ms, 2^18 79,
# default 80). Read when OpenBLAS loads, so only if NumPy is not imported yet; a value the
# user set wins.
BLAS_THREAD_TIMEOUT = "18"  # log2 of the cycles OpenBLAS's idle threads spin (OPENBLAS_THREAD_TIMEOUT)
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", BLAS_THREAD_TIMEOUT)

from typing import Any as _Any  # noqa: E402

from lafuse import config  # noqa: E402  (also a context manager: with lf.config(codegen=False): ...)
from lafuse.compiler import run_dml  # noqa: E402

_API = frozenset({"Compiled", "Matrix", "Other", "Scalar", "ScopeError", "ShapeError", "cbind", "compile",
                  "compute", "cond", "fori_loop", "full", "last_stats", "matrix", "ones", "persist", "rand",
                  "rbind", "read", "seq", "while_loop", "zeros"})

__all__ = ["config", "run_dml", *sorted(_API)]


def __getattr__(name: str) -> _Any:
    """The Python API's names, and ``lf.<builtin>``: imported on first use (``lafuse run`` does not
    load the API), then kept as the module's attributes (a later ``lf.exp`` does not come here)."""
    import importlib
    import importlib.util

    if name.startswith("__") or name == "api":
        raise AttributeError(name)
    if name in _API:
        value = getattr(importlib.import_module("lafuse.api"), name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # a subpackage not imported yet: ``from lafuse import fusion`` asks here before importing it,
        # and looking it up as a builtin would import the whole API (6 ms inside ``lafuse run``)
        raise AttributeError(name)
    else:
        try:
            value = importlib.import_module("lafuse.api.functions").lookup(name)
        except AttributeError:
            raise AttributeError(f"module 'lafuse' has no attribute '{name}' (no DML builtin or library "
                                 f"function of that name)") from None
    globals()[name] = value
    return value
