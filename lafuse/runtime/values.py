"""Runtime value representation shared by the interpreter, the kernels, IO and printing.

Why plain NumPy/SciPy objects instead of a wrapper class: every operator call pays the wrapper's
overhead, and the acceptance bar is parity with NumPy on plain dense operations.

* MATRIX: a 2-D ``numpy.ndarray`` of float64 (dense) or a ``scipy.sparse.csr_array`` of float64
  (sparse). Shapes are always 2-D; 0x0 is legal. Dense results of dense inputs stay dense; the format
  is re-chosen by :func:`choose_format` where an operation can change sparsity substantially.
* SCALAR: Python ``bool`` (BOOLEAN), ``int`` (INT64), ``float`` (FP64) or ``str`` (STRING). Check
  ``bool`` before ``int`` because ``bool`` subclasses ``int``.
* FRAME: :class:`Frame`; LIST: :class:`ListValue`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lafuse.formats import may_be_sparse, sparse_format
from lafuse.sparse import sp

SAMPLE_CELLS = 1 << 20  # from this size, a dense block is first checked on a sample of rows
HINT_SAMPLE_CELLS = 1 << 15  # cells a cost-model nnz hint reads of a large dense block
HINT_MIN_NONZEROS = 256  # non-zeros in that sample for a ~6% estimate; fewer: the 1-in-16 sample
DENSE_SAMPLE_DENSITY = 0.6  # sample density that keeps a block dense (well above the turn point)

Matrix = Any  # np.ndarray | sp.csr_array


def is_matrix(v: object) -> bool:
    return isinstance(v, np.ndarray) or sp.issparse(v)


def is_sparse(v: object) -> bool:
    return sp.issparse(v)


def is_scalar(v: object) -> bool:
    return isinstance(v, (bool, int, float, str, np.floating, np.integer, np.bool_))


def nnz(m: Matrix) -> int:
    if sp.issparse(m):
        return int(m.count_nonzero())
    return int(np.count_nonzero(m))


def nnz_estimate(m: Matrix) -> float:
    """Non-zeros for the cost model's hints: a CSR value's stored count, and for a large dense block
    the count of an evenly strided sample of whole rows scaled up. An exact count reads every cell:
    50-70 ms for L2SVM's 800 MB X, at every dynamic recompilation of the loop body that reads it, to
    feed an estimate that needs two digits at most. The sample is at most ``HINT_SAMPLE_CELLS``
    (a 1-in-16 row sample of L2SVM's small 1e5 x 100 X cost 2.4 ms a lowering, 5% of its run); one
    with few non-zeros says too little, and the 1-in-16 sample decides then."""
    if sp.issparse(m):
        return float(m.nnz)
    sample = _row_sample(m)
    if sample is None:
        return float(np.count_nonzero(m))
    step = max(1, m.shape[0] // max(1, HINT_SAMPLE_CELLS // m.shape[1]))
    if step > 16:
        small = m[::step]
        k = np.count_nonzero(small)
        if k >= HINT_MIN_NONZEROS:
            return float(k) * m.shape[0] / small.shape[0]
    return float(np.count_nonzero(sample)) * m.shape[0] / sample.shape[0]


def _row_sample(m: Matrix) -> np.ndarray | None:
    """Every 16th row of a large dense block (None for a small one or a CSR value): what the format
    choice and the cost hints read instead of every cell."""
    if isinstance(m, np.ndarray) and m.shape[0] >= 64 and m.size >= SAMPLE_CELLS:
        return m[::16]
    return None


def to_dense(m: Matrix) -> np.ndarray:
    if sp.issparse(m):
        return np.asarray(m.toarray(), dtype=np.float64)
    return m


def to_csr(m: Matrix) -> sp.csr_array:
    # copy: eliminate_zeros() rewrites the index arrays in place, which a view would share
    if sp.issparse(m):
        c = sp.csr_array(m, dtype=np.float64, copy=True)
    else:
        c = sp.csr_array(np.asarray(m, dtype=np.float64))
    c.eliminate_zeros()
    return c


def choose_format(m: Matrix) -> Matrix:
    """Pick dense or CSR by exact sparsity, like SystemDS's examSparsity()."""
    rows, cols = m.shape
    if not may_be_sparse(rows, cols):
        return to_dense(m)
    sample = _row_sample(m)
    # a strided sample of rows (1 in 16) that is clearly dense settles it without a full pass
    if sample is not None and np.count_nonzero(sample) >= DENSE_SAMPLE_DENSITY * sample.size:
        return m
    if sparse_format(rows, cols, nnz(m)):
        return to_csr(m)
    return to_dense(m)


_REAL_KINDS = "biuf"  # bool, signed and unsigned integers, floats: exactly representable or rounded once
_KIND_NAMES = {"c": "complex", "M": "datetime", "m": "timedelta", "U": "string", "S": "bytes",
               "O": "object", "V": "structured"}


def _dtype_error(kind: str, what: str) -> ValueError:
    name = _KIND_NAMES.get(kind, f"dtype kind '{kind}'")
    hint = " (pass .real or abs() explicitly)" if kind == "c" else ""
    return ValueError(f"{what} holds {name} values; lafuse matrices hold real numbers{hint}")


def as_matrix_value(a: Any, what: str = "input") -> Matrix:
    """Normalize an external array-like (list, 1-D or 2-D array, spmatrix, DataFrame) to a runtime
    matrix. Anything that would not keep its values exactly as the user sees them is refused with a
    ValueError naming ``what``, never converted silently: complex, datetime, string and object data,
    more than two dimensions, masked arrays (their mask would be dropped)."""
    if sp.issparse(a):
        if a.dtype.kind not in _REAL_KINDS:
            raise _dtype_error(a.dtype.kind, what)
        if a.ndim != 2:
            raise ValueError(f"{what} is a {a.ndim}-D sparse array; lafuse matrices are 2-D")
        return choose_format(sp.csr_array(a, dtype=np.float64))
    if isinstance(a, np.ma.MaskedArray):
        raise ValueError(f"{what} is a masked array, whose mask lafuse would drop; fill it explicitly "
                         f"first, e.g. with .filled(np.nan)")
    try:
        arr = np.asarray(a)
    except ValueError as e:  # ragged nested lists
        raise ValueError(f"{what} is not a rectangular array: {e}") from None
    if arr.dtype.kind not in _REAL_KINDS:
        if arr.dtype.kind == "O":  # a list of Python numbers with None, Decimals, ...: exact floats only
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise _dtype_error("O", what) from None
        else:
            raise _dtype_error(arr.dtype.kind, what)
    if arr.ndim > 2:
        raise ValueError(f"{what} has {arr.ndim} dimensions {arr.shape}; lafuse matrices are 2-D "
                         f"(reshape it first)")
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    elif arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    # (in the format the compiler predicts from its non-zeros, as a value read from a file: an
    # all-zero array is CSR, whose structural zeros are the ones a product skips)
    return choose_format(arr)


def as_input_value(v: Any, what: str = "input") -> Any:
    """An external Python value bound as a DML variable: NumPy scalars (and 0-d arrays) become DML
    scalars of their kind (``np.int64(3)`` is an INT64, not a 1x1 matrix, so ``matrix(0, rows=n,
    cols=2)`` works); arrays and sparse matrices become matrices (:func:`as_matrix_value`); Python
    scalars, strings, frames and lists pass through."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and not isinstance(v, np.ma.MaskedArray):
        v = v[()]
    if isinstance(v, np.generic):
        kind = v.dtype.kind
        if kind == "b":
            return bool(v)
        if kind in "iu":
            return int(v)
        if kind == "f":
            return float(v)
        if isinstance(v, np.str_):
            return str(v)
        if isinstance(v, np.bytes_):
            return v.decode("utf-8", "replace")
        raise _dtype_error(kind, what)
    if isinstance(v, (bool, int, float, str, Frame, ListValue)):
        return v
    if hasattr(v, "shape") or isinstance(v, (list, tuple)):
        return as_matrix_value(v, what)
    raise TypeError(f"{what}: cannot pass a value of type {type(v).__name__} to DML (use a number, string, "
                    f"NumPy array, SciPy sparse matrix or pandas DataFrame)")


@dataclass
class Frame:
    """A 2-D table with one value type per column (STRING, FP64, INT64, BOOLEAN)."""

    columns: list[list[Any]]
    schema: list[str]
    names: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.columns[0]) if self.columns else 0, len(self.columns))


@dataclass
class ListValue:
    """DML list: ordered values with optional names (``list(a=1, b=X)``)."""

    items: list[Any]
    names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.items)


def cast_scalar(v: Any, to: type) -> Any:
    """Scalar results take the value type the compiler inferred (SystemDS types them statically:
    ifelse(c, 2*x, x/2) is DOUBLE even when the INT branch is taken)."""
    if to is float and isinstance(v, (int, np.integer, np.floating)) and not isinstance(v, bool):
        return float(v)
    if to is int and isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    if to is int and isinstance(v, np.integer):
        return int(v)
    return v
