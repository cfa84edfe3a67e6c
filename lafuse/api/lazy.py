"""``Matrix`` and ``Scalar``: the lazy values users hold, with NumPy's operators and protocols.

Nothing runs until ``compute`` (or a protocol that needs the values: ``np.asarray``, ``float``, ``bool``
of a scalar, a NumPy function without a lazy form). ``np.exp(M)`` stays lazy (``__array_ufunc__``);
``np.sum(M)``, ``np.mean``, ``np.transpose``, ... too (``__array_function__``).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from lafuse.api import expr as E
from lafuse.api import pyops
from lafuse.api.expr import MATRIX, OTHER, SCALAR, Node
from lafuse.runtime import values


def as_node(x: Any) -> Node:
    """An operand as a node: a lazy value's own, a Python or NumPy scalar as a literal, an array-like
    (NumPy, SciPy sparse, pandas, nested lists) bound as an input matrix."""
    if isinstance(x, Expr):
        return x.node
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, (bool, int, float, str)):
        return E.literal(x)
    return matrix(x).node


def persist(*values: Any) -> tuple[Any, ...]:
    """Several lazy values computed now, in one plan, each as a new lazy value over its result (a
    scalar is bound, not written into later scripts: a loop's scripts stay the same, compiled once)."""
    from lafuse.api.run import compute

    out = []
    for v, got in zip(values, compute(*values)):
        if not isinstance(v, Expr):
            out.append(v)
        elif v.node.kind == MATRIX:
            out.append(matrix(got))
        else:
            out.append(wrap(Node("input", SCALAR if v.node.kind == SCALAR else OTHER, value=got)))
    return tuple(out)


def wrap(n: Node) -> Any:
    if n.kind == MATRIX:
        return Matrix(n)
    if n.kind == SCALAR:
        return Scalar(n)
    return Other(n)


def matrix(x: Any) -> Matrix:
    """A lazy matrix over ``x``: a NumPy array, a SciPy sparse matrix or array, a pandas DataFrame or
    Series of numbers, or nested lists; 1-D input is a column vector. Stored as the runtime stores a
    value it reads: dense unless sparse enough for CSR (``formats.sparse_format``), either way
    whatever ``x`` was. A C-contiguous float64 array that stays dense is bound without a copy; another
    dtype or memory order is converted once, here."""
    if isinstance(x, Matrix):
        return x
    if isinstance(x, Expr):
        raise TypeError(f"lf.matrix of a lazy {x.node.kind}")
    v = _bound(x)
    n = Node("input", MATRIX, shape=tuple(v.shape), value=v)  # type: ignore[arg-type]
    n.nnz = values.nnz(v)
    return Matrix(n)


def _bound(x: Any) -> Any:
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):  # pandas
        x = x.to_numpy(dtype=np.float64)
    if isinstance(x, np.ndarray) and x.ndim == 2 and not x.flags.c_contiguous and x.dtype.kind in "biuf":
        x = np.ascontiguousarray(x, dtype=np.float64)
    v = values.as_matrix_value(x, "lf.matrix input")  # (refuses complex, strings, masked arrays, ...)
    return v if not isinstance(v, np.ndarray) or v.flags.c_contiguous else np.ascontiguousarray(v)


class Expr:
    """A lazy value. Operators build expressions; ``compute()`` runs them."""

    __slots__ = ("node",)
    __hash__ = None  # type: ignore[assignment]  # (== is element-wise, as NumPy's)

    def __init__(self, node: Node) -> None:
        self.node = node

    def compute(self) -> Any:
        """The value: a NumPy array or SciPy CSR array for a matrix, a Python number for a scalar."""
        from lafuse.api.run import compute

        return compute(self)[0]

    def persist(self) -> Any:
        """This value computed now, as a new lazy value over the result: a Python loop that updates a
        model keeps its expressions short instead of re-running its whole history each compute."""
        return persist(self)[0]

    def _bin(self, op: str, other: Any, swap: bool = False) -> Any:
        try:
            o = as_node(other)
        except TypeError:
            return NotImplemented
        a, b = (o, self.node) if swap else (self.node, o)
        return wrap(E.binary(op, a, b))

    # (element-wise as NumPy's; Python reflects comparisons itself: 3 < M is M > 3)
    def __add__(self, o: Any) -> Any:
        return self._bin("+", o)

    def __radd__(self, o: Any) -> Any:
        return self._bin("+", o, swap=True)

    def __sub__(self, o: Any) -> Any:
        return self._bin("-", o)

    def __rsub__(self, o: Any) -> Any:
        return self._bin("-", o, swap=True)

    def __mul__(self, o: Any) -> Any:
        return self._bin("*", o)

    def __rmul__(self, o: Any) -> Any:
        return self._bin("*", o, swap=True)

    def __truediv__(self, o: Any) -> Any:
        return self._bin("/", o)

    def __rtruediv__(self, o: Any) -> Any:
        return self._bin("/", o, swap=True)

    def __pow__(self, o: Any) -> Any:
        return self._bin("^", o)

    def __rpow__(self, o: Any) -> Any:
        return self._bin("^", o, swap=True)

    def __matmul__(self, o: Any) -> Any:
        return self._bin("%*%", o)

    def __rmatmul__(self, o: Any) -> Any:
        return self._bin("%*%", o, swap=True)

    def __and__(self, o: Any) -> Any:
        return self._bin("&", o)

    def __rand__(self, o: Any) -> Any:
        return self._bin("&", o, swap=True)

    def __or__(self, o: Any) -> Any:
        return self._bin("|", o)

    def __ror__(self, o: Any) -> Any:
        return self._bin("|", o, swap=True)

    def __eq__(self, o: Any) -> Any:  # type: ignore[override]
        return self._bin("==", o)

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        return self._bin("!=", o)

    def __lt__(self, o: Any) -> Any:
        return self._bin("<", o)

    def __le__(self, o: Any) -> Any:
        return self._bin("<=", o)

    def __gt__(self, o: Any) -> Any:
        return self._bin(">", o)

    def __ge__(self, o: Any) -> Any:
        return self._bin(">=", o)

    def __floordiv__(self, other: Any) -> Any:
        return pyops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return pyops.floor_divide(other, self)

    def __mod__(self, other: Any) -> Any:
        return pyops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return pyops.remainder(other, self)

    def __neg__(self) -> Any:
        return wrap(E.unary("-", self.node))

    def __pos__(self) -> Any:
        return self

    def __invert__(self) -> Any:
        return wrap(E.unary("!", self.node))

    def __abs__(self) -> Any:
        return wrap(E.call("abs", [self.node], kind=self.node.kind, shape=self.node.shape))

    def visualize(self, filename: str | None = None, until: str = "plan") -> Any:
        """A picture of the plan that computing this value runs (nothing is run): its fused operators
        as clusters, each instruction's execution type, format and estimate (``until`` an earlier
        stage, e.g. "sizes": the HOP DAG). ``filename``: also written there, as its suffix says (svg,
        png, dot). In Jupyter the returned picture shows as SVG."""
        from lafuse.api.picture import picture

        pic = picture([self], until)
        if filename is not None:
            pic.save(filename)
        return pic

    def _repr_svg_(self) -> str | None:
        """Jupyter shows a lazy value as its plan (None without Graphviz: the text repr)."""
        return self.visualize()._repr_svg_()

    def __repr__(self) -> str:
        from lafuse.api.emit import describe

        return f"lafuse.{type(self).__name__}({describe(self.node)})"


class Scalar(Expr):
    """A lazy scalar (a full aggregate, ``as.scalar``, a scalar builtin). ``float(s)``, ``int(s)`` and
    ``bool(s)`` compute it."""

    __slots__ = ()

    def __float__(self) -> float:
        return float(self.compute())

    def __int__(self) -> int:
        return int(self.compute())

    def __bool__(self) -> bool:
        return bool(self.compute())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.compute(), dtype=dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from lafuse.api.numpy_protocol import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)


class Other(Expr):
    """A lazy string, list or frame (a builtin's result): computed, or passed to another builtin."""

    __slots__ = ()


class Matrix(Expr):
    """A lazy 2-D matrix of float64."""

    __slots__ = ()
    ndim = 2
    dtype = np.dtype(np.float64)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols): known when built, else from the compiler's size propagation, else computed."""
        if min(self.node.shape) < 0:
            from lafuse.api.run import shape_of

            self.node.shape = shape_of(self.node)
        return self.node.shape

    @property
    def size(self) -> int:
        r, c = self.shape
        return r * c

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError("a lazy lafuse matrix is not iterable: compute it first (np.asarray(M))")

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a lafuse matrix is ambiguous: use (M != 0).sum() > 0 or "
                        "M.min() > 0")

    @property
    def T(self) -> Matrix:
        r, c = self.node.shape
        return Matrix(E.call("t", [self.node], shape=(c, r)))

    def transpose(self) -> Matrix:
        return self.T

    def reshape(self, rows: int, cols: int) -> Matrix:
        """Row-major, as NumPy's default (DML's ``matrix(X, rows, cols)``)."""
        r, c = self.node.shape
        if r >= 0 and c >= 0 and rows * cols != r * c:
            raise E.ShapeError(f"cannot reshape a {r}x{c} matrix into {rows}x{cols}", E.origin())
        return Matrix(E.call("matrix", [self.node, E.literal(int(rows)), E.literal(int(cols))],
                             shape=(int(rows), int(cols))))

    def _agg(self, axis: Any, full: str, col: str, row: str) -> Any:
        r, c = self.node.shape
        if axis is None:
            return Scalar(E.call(full, [self.node], kind=SCALAR))
        ax = operator.index(axis)
        if ax in (0, -2):
            return Matrix(E.call(col, [self.node], shape=(1, c)))
        if ax in (1, -1):
            return Matrix(E.call(row, [self.node], shape=(r, 1)))
        raise ValueError(f"axis {axis} is out of bounds for a 2-D matrix")

    def sum(self, axis: Any = None) -> Any:
        """``axis=None``: a scalar; 0: the column sums (1 x n); 1: the row sums (m x 1)."""
        return self._agg(axis, "sum", "colSums", "rowSums")

    def mean(self, axis: Any = None) -> Any:
        return self._agg(axis, "mean", "colMeans", "rowMeans")

    def min(self, axis: Any = None) -> Any:
        return self._agg(axis, "min", "colMins", "rowMins")

    def max(self, axis: Any = None) -> Any:
        return self._agg(axis, "max", "colMaxs", "rowMaxs")

    def prod(self, axis: Any = None) -> Any:
        return self._agg(axis, "prod", "colProds", "rowProds")

    def var(self, axis: Any = None, ddof: int = 0) -> Any:
        """NumPy's default is the population variance (``ddof=0``); DML's ``var`` the sample's (1)."""
        v = self._agg(axis, "var", "colVars", "rowVars")
        if ddof == 1:
            return v
        n = self.size if axis is None else self.shape[0 if operator.index(axis) in (0, -2) else 1]
        return v * ((n - 1) / (n - ddof)) if n > ddof else v * float("nan")

    def std(self, axis: Any = None, ddof: int = 0) -> Any:
        v = self.var(axis, ddof)
        return wrap(E.call("sqrt", [v.node], kind=v.node.kind, shape=v.node.shape))

    def __getitem__(self, key: Any) -> Any:
        from lafuse.api.indexing import index

        return index(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("lafuse matrices are immutable: build a new one (e.g. lf.cbind, lf.rbind, "
                        "lf.ifelse) instead of assigning into one")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        v = self.compute()
        dense = v.toarray() if hasattr(v, "toarray") else v
        return np.asarray(dense, dtype=dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from lafuse.api.numpy_protocol import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from lafuse.api.numpy_protocol import array_function

        return array_function(func, args, kwargs)

