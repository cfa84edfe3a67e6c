"""The lazy Python API: ``import lafuse as lf``; ``lf.matrix(X) @ lf.matrix(Y)`` builds, ``.compute()``
runs the whole expression through the compiler (docs/python.md).

The pipeline's front end beside ``lang/``: expressions (``expr``, ``lazy``, ``indexing``) and staged
loops and branches (``control``) are emitted as one DML script (``emit``) and run by the same
compiler and runtime (``run``).
"""

from __future__ import annotations

from lafuse.api.control import ScopeError, cond, fori_loop, while_loop
from lafuse.api.expr import ShapeError
from lafuse.api.functions import cbind, full, ones, rand, rbind, read, seq, zeros
from lafuse.api.lazy import Matrix, Other, Scalar, matrix, persist
from lafuse.api.run import Compiled, compile, compute, last_stats

__all__ = ["Compiled", "Matrix", "Other", "Scalar", "ScopeError", "ShapeError", "cbind", "compile", "compute",
           "cond", "fori_loop", "full", "last_stats", "matrix", "ones", "persist", "rand", "rbind", "read",
           "seq", "while_loop", "zeros"]
