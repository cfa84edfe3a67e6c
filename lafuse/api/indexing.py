"""Python indexing (0-based, half-open, negative from the end) as DML's right indexing (1-based,
inclusive): ``M[2:5, 1]`` is ``M[3:5, 2:2]``. The result keeps both dimensions (a row or column is a
1 x n or m x 1 matrix), except an element ``M[i, j]``, which is a scalar (``as.scalar``).

Bounds that are Python integers are checked here where the matrix's shape is known (an IndexError at
the line that indexes); a lazy scalar index (``M[k]`` with ``k`` a ``Scalar``) is checked at run time
by DML. Steps, boolean masks and index arrays have no DML right-indexing form and are refused.
"""

from __future__ import annotations

import operator
from typing import Any

from lafuse.api import expr as E
from lafuse.api.expr import MATRIX, SCALAR, Node


def _bounds(k: Any, n: int, axis: str) -> tuple[Node | None, Node | None, int, bool]:
    """(lower, upper) 1-based inclusive bounds of one index (None, None: the whole dimension), the
    extent (-1 unknown), and whether it is a single position."""
    from lafuse.api.lazy import Scalar

    if isinstance(k, slice):
        if k.step not in (None, 1):
            raise IndexError("lafuse matrices have no strided indexing (a slice step other than 1)")
        if k.start is None and k.stop is None:
            return None, None, n, False
        if isinstance(k.start, Scalar) or isinstance(k.stop, Scalar):
            lo = _lazy_plus(k.start, 1) if k.start is not None else E.literal(1)
            hi = _lazy_plus(k.stop, 0) if k.stop is not None else _extent_node(n, axis)
            return lo, hi, -1, False
        start, stop, _ = slice(k.start, k.stop).indices(n) if n >= 0 else _open(k, axis)
        if stop <= start:
            raise IndexError(f"empty {axis} selection {k.start}:{k.stop} of {n} {axis}s (lafuse matrices "
                             f"have no empty ranges)")
        return E.literal(start + 1), E.literal(stop), stop - start, False
    if isinstance(k, Scalar):
        p = _lazy_plus(k, 1)
        return p, p, 1, True
    try:
        i = operator.index(k)
    except TypeError:
        raise IndexError(f"a lafuse matrix is indexed by integers, slices or lazy scalars, not "
                         f"{type(k).__name__} (no masks or index arrays)") from None
    if n >= 0 and not -n <= i < n:
        raise IndexError(f"{axis} index {i} is out of bounds for {n} {axis}s")
    if i < 0:
        if n < 0:
            raise IndexError(f"a negative {axis} index needs the number of {axis}s, unknown here")
        i += n
    lit = E.literal(i + 1)
    return lit, lit, 1, True


def _open(k: slice, axis: str) -> tuple[int, int, int]:
    """A slice of a dimension of unknown extent: non-negative bounds only, and an upper one."""
    if (k.start is not None and k.start < 0) or k.stop is None or k.stop < 0:
        raise IndexError(f"slicing {k.start}:{k.stop} needs the number of {axis}s, unknown here")
    return k.start or 0, k.stop, 1


def _lazy_plus(k: Any, d: int) -> Node:
    from lafuse.api.lazy import as_node

    n = as_node(k)
    return E.binary("+", n, E.literal(d)) if d else n


def _extent_node(n: int, axis: str) -> Node:
    if n >= 0:
        return E.literal(n)
    raise IndexError(f"an open-ended lazy slice needs the number of {axis}s, unknown here")


def index(m: Any, key: Any) -> Any:
    from lafuse.api.lazy import Matrix, Scalar

    if not isinstance(key, tuple):
        key = (key, slice(None))
    if len(key) != 2:
        raise IndexError(f"a lafuse matrix takes 2 indices, not {len(key)}")
    r, c = m.node.shape
    rl, ru, nr, r1 = _bounds(key[0], r, "row")
    cl, cu, nc, c1 = _bounds(key[1], c, "column")
    x = E.Node("index", MATRIX, (m.node, rl, ru, cl, cu), shape=(nr, nc))
    if r1 and c1:
        return Scalar(E.call("as.scalar", [x], kind=SCALAR))
    return Matrix(x)
