"""Helpers shared by the local kernel modules: scalar coercion, Java number semantics, formats.

Why a separate module: the elementwise, aggregate, reorg, linalg and datagen kernels all need the
same SystemDS conventions (Java ``(long)`` casts, ``Double.toString`` in messages, CSR hygiene),
and keeping them in one place keeps the behaviour consistent across kernels.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.formats import may_be_sparse, sparse_format
from lafuse.runtime.printing import java_double_str
from lafuse.runtime.values import Frame, ListValue
from lafuse.sparse import sp

F64 = np.float64
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
TWO63 = 9.223372036854776e18  # (double) Long.MAX_VALUE
DOUBLE_EPS = 2.0**-53  # UtilFunctions.DOUBLE_EPS

ndarray = np.ndarray
issparse = sp.issparse


class _Quiet:
    """errstate() inside ieee_thread(): the whole execution already ignores floating-point errors."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_QUIET = _Quiet()
_ieee = threading.local()


def errstate() -> Any:
    """NumPy error state for DML arithmetic: IEEE results (Inf/NaN), never warnings or exceptions.
    Entering np.errstate costs ~2 us, more than a small operand's whole operation; an execution
    runs under ieee_thread() once instead, and then this is a no-op."""
    if getattr(_ieee, "on", False):
        return _QUIET
    return np.errstate(all="ignore")


@contextmanager
def ieee_thread() -> Iterator[None]:
    """The calling thread executes DML: floating-point errors give Inf/NaN for the whole run
    (the interpreter's thread and every parfor worker enter this once)."""
    with np.errstate(all="ignore"):
        prev = getattr(_ieee, "on", False)
        _ieee.on = True
        try:
            yield
        finally:
            _ieee.on = prev


# ------------------------------------------------------------------------------------ type tests

def is_mat(v: Any) -> bool:
    return type(v) is np.ndarray or sp.issparse(v)


def norm_scalar(v: Any) -> Any:
    """Map NumPy scalar types to the Python scalar types of the runtime value contract."""
    t = type(v)
    if t is bool or t is int or t is float or t is str:
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def type_name(v: Any) -> str:
    if is_mat(v):
        return "matrix"
    if isinstance(v, Frame):
        return "frame"
    if isinstance(v, ListValue):
        return "list"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, np.integer)):
        return "integer"
    if isinstance(v, (float, np.floating)):
        return "double"
    if isinstance(v, str):
        return "string"
    return type(v).__name__


def need_matrix(v: Any, fname: str) -> Any:
    if not is_mat(v):
        raise DMLRuntimeError(f"{fname}: expected a matrix argument but got a {type_name(v)}")
    return v


def need_number(v: Any, fname: str, what: str = "argument") -> int | float:
    """A numeric scalar (bool counts as 0/1); a 1x1 matrix is accepted where SystemDS casts it."""
    v = norm_scalar(v)
    if isinstance(v, (bool, int, float)):
        return v
    if is_mat(v) and v.shape == (1, 1):
        return float(v[0, 0]) if type(v) is np.ndarray else float(v.toarray()[0, 0])
    raise DMLRuntimeError(f"{fname}: {what} must be a number, got a {type_name(v)}")


def need_float(v: Any, fname: str, what: str = "argument") -> float:
    return float(need_number(v, fname, what))


# ----------------------------------------------------------------------- Java number semantics

def java_long(x: float) -> int:
    """Java ``(long) x``: truncation, NaN -> 0, saturation at the long range."""
    if x != x:
        return 0
    if x >= TWO63:
        return LONG_MAX
    if x <= -TWO63:
        return LONG_MIN
    return int(x)


def to_long_eps(q: float) -> float:
    """SystemDS ``UtilFunctions.toLong``: truncation toward zero after adding 2^-53 to |q|."""
    return math.copysign(math.floor(abs(q) + DOUBLE_EPS), q)


def java_div(a: float, b: float) -> float:
    """IEEE division without Python's ZeroDivisionError."""
    if b == 0.0:
        if a == 0.0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def trunc_index(v: Any, fname: str = "indexing") -> int:
    """An index or dimension argument: doubles are truncated like SystemDS (1.7 -> 1)."""
    if type(v) is int:
        return v
    x = need_number(v, fname, "index")
    if isinstance(x, float):
        if x != x:
            raise DMLRuntimeError(f"{fname}: index is NaN")
        return java_long(x)
    return int(x)


def jstr(x: Any) -> str:
    """How SystemDS renders a number inside messages and string concatenation."""
    return to_dml_string(x)


def to_dml_string(v: Any) -> str:
    """DML string form of a scalar: INT plain, BOOLEAN TRUE/FALSE, DOUBLE via Java Double.toString."""
    v = norm_scalar(v)
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double_str(v)
    raise DMLRuntimeError(f"cannot convert a {type_name(v)} to a string")


def parse_java_double(s: str, fname: str) -> float:
    """Double.parseDouble: accepts NaN/Infinity spellings Java knows, rejects Python-only ones."""
    t = s.strip()
    core = t.lstrip("+-")
    if core in ("NaN", "Infinity"):
        return float(t.replace("Infinity", "inf"))
    if "_" in t or core.lower().startswith(("inf", "nan")):
        raise DMLRuntimeError(f"{fname}: for input string: \"{s}\"")
    try:
        return float(t.rstrip("dDfF") if t[-1:] in "dDfF" and len(t) > 1 else t)
    except ValueError:
        raise DMLRuntimeError(f"{fname}: for input string: \"{s}\"") from None


# ---------------------------------------------------------------------------- matrix helpers

def to_dense(m: Any) -> np.ndarray:
    if type(m) is np.ndarray:
        return m
    if sp.issparse(m):
        return m.toarray()
    return np.asarray(m, dtype=F64)


def vec1d(m: Any) -> np.ndarray:
    """A vector (either orientation) or a scalar as a flat float array."""
    if is_mat(m):
        return to_dense(m).reshape(-1)
    return np.array([float(need_number(m, "vector"))], dtype=F64)


def as_mat(v: Any, fname: str) -> Any:
    """A matrix operand; a number becomes a 1x1 matrix."""
    if is_mat(v):
        return v
    return np.full((1, 1), float(need_number(v, fname)), dtype=F64)


def csr_rows(S: sp.csr_array) -> np.ndarray:
    """Row index of every stored entry of a CSR matrix."""
    return np.repeat(np.arange(S.shape[0], dtype=np.int64), np.diff(S.indptr))


# a CSR's row indices up to this size are kept for it by csr_rows_kept
KEPT_ROWS_MAX_BYTES = 16 << 20
_KEPT_ROWS: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(S) -> (S.indptr, rows)


def csr_rows_kept(S: sp.csr_array) -> np.ndarray:
    """:func:`csr_rows`, kept (up to KEPT_ROWS_MAX_BYTES) for the next call on the same matrix
    until it dies. Why: an operator that gathers by row and column (the sampled sum) runs once per
    loop iteration on one X, and this host maps a fresh array slowly (3000^2 at 1%: 0.22 of the
    sum's 2.4 ms went to the rows' page faults). Kept beside the matrix, not on it (an attribute
    would travel with it when pickled to a Dask worker), with the ``indptr`` it was made from:
    values change in place (in-place element-wise results), a structure never does, and a matrix
    with a new ``indptr`` recomputes. The read-only result must not be written."""
    key = id(S)
    kept = _KEPT_ROWS.get(key)
    if kept is not None and kept[0] is S.indptr and kept[1].size == S.nnz:
        return kept[1]
    rows = csr_rows(S)
    if rows.nbytes <= KEPT_ROWS_MAX_BYTES:
        rows.flags.writeable = False
        if kept is None:  # (a live id is never reused: the entry goes when S does)
            weakref.finalize(S, _KEPT_ROWS.pop, key, None)
        _KEPT_ROWS[key] = (S.indptr, rows)
    return rows


def new_csr(data: np.ndarray, S: sp.csr_array) -> sp.csr_array:
    """A CSR with ``S``'s structure and new values; the index arrays are copied, never shared,
    because scipy's in-place methods (eliminate_zeros, sort_indices) would otherwise corrupt ``S``."""
    return sp.csr_array((np.asarray(data, dtype=F64), S.indices.copy(), S.indptr.copy()), shape=S.shape)


def canon_csr(S: Any) -> sp.csr_array:
    """A canonical CSR (float64, sorted, no duplicates) owned by the caller."""
    c = sp.csr_array(S, dtype=F64, copy=True)
    c.sum_duplicates()
    return c


def fmt_owned(m: Any) -> Any:
    """Choose dense or CSR by exact sparsity (SystemDS examSparsity) for a matrix this module owns.

    Why not ``values.choose_format``: that converts CSR input in place, which is unsafe for shared
    values; here the matrix was just created, so zeros can be dropped in place.
    """
    rows, cols = m.shape
    if sp.issparse(m):
        if not isinstance(m, sp.csr_array):
            m = sp.csr_array(m, dtype=F64)
        m.eliminate_zeros()
        if not sparse_format(rows, cols, m.nnz):
            return m.toarray()
        return m
    if not may_be_sparse(rows, cols):
        return m
    if sparse_format(rows, cols, int(np.count_nonzero(m))):
        return sp.csr_array(m)
    return m


def shape_str(m: Any) -> str:
    return f"{m.shape[0]}x{m.shape[1]}"
