"""Lazy expressions of the Python API: a graph of ``Node``s behind ``Matrix`` and ``Scalar``.

Why a graph and not eager NumPy calls: the whole expression reaches the compiler at ``compute``, so
rewrites, sum-product optimization and fusion see all of it (``(X * Y * Z).sum()`` is one fused cell
operator, a subexpression read by two outputs is computed once). Each node remembers the Python line
that built it: a shape error is raised there at build time where shapes are known, and an error the
compiler or runtime finds later is reported at that line too (``api.run``).

Semantics are DML's, spelled the NumPy way: matrices are 2-D (a 1-D array is a column), indices are
0-based and half-open in Python and become DML's 1-based inclusive ranges, comparisons give 0/1
matrices, element-wise operators broadcast a row or column vector (or 1 x 1) against a matrix.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from lafuse.errors import DMLValidationError, Span
from lafuse.hops.sizes import broadcast_dim

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the lafuse package

MATRIX, SCALAR, OTHER = "matrix", "scalar", "other"  # a node's kind (OTHER: strings, lists, frames)


class ShapeError(DMLValidationError, ValueError):
    """Operands whose shapes cannot combine, found when the expression is built: raised at the Python
    line that built it (``span``: that file and line)."""

    kind = "shape error"

    def __init__(self, message: str, span: Span | None = None) -> None:
        super().__init__(message, line_span(span) if span is not None else None)


def line_span(s: Span) -> Span:
    """``s`` from its line's first non-blank column (where ``render``'s caret points)."""
    try:
        with open(s.file, encoding="utf-8", errors="replace") as f:
            for k, text in enumerate(f, 1):
                if k == s.line:
                    return Span(s.file, s.line, len(text) - len(text.lstrip()) + 1)
    except OSError:
        pass
    return s


def origin() -> Span:
    """The first frame outside lafuse: the user's line that is building a node."""
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_HERE):
        f = f.f_back
    if f is None:
        return Span("<unknown>", 0, 0)
    return Span(f.f_code.co_filename, f.f_lineno, 1)


class Scope:
    """A loop or branch body while its Python function is traced (``api.control``): the nodes built
    then belong to it, are emitted inside its DML block, and are not values outside it."""

    __slots__ = ("parent", "what", "span")

    def __init__(self, parent: Scope | None, what: str, span: Span) -> None:
        self.parent, self.what, self.span = parent, what, span

    def within(self, other: Scope | None) -> bool:
        """Whether this scope is ``other`` or nested in it (every scope is within None, the top)."""
        s: Scope | None = self
        while s is not None:
            if s is other:
                return True
            s = s.parent
        return other is None


SCOPES: list[Scope | None] = [None]  # the bodies being traced, innermost last


class Node:
    """One operation. ``op``: "input" (``value`` bound as is), "lit" (a Python scalar written into the
    script), "binary"/"unary" (``fn``: the DML operator), "call" (``fn``: a builtin or DML function
    name; ``kw``: named arguments; ``nout`` outputs), "out" (output ``value`` of a multi-output call),
    "index" (``args``: the matrix, then 1-based inclusive bounds, each a Node or None for the whole
    dimension); "loop"/"if" (``value``: the traced bodies, ``api.control``), "carry" (a loop's or
    branch's state inside its body), "loopvar" (a for loop's index). ``shape``: (rows, cols), -1 where unknown; ``nnz``: an input matrix's non-zeros.

    An input is not copied, and its non-zeros are counted once, when bound: like a dask array over a
    NumPy array, a lazy matrix assumes the array is not changed in place afterwards."""

    __slots__ = ("op", "fn", "args", "kw", "kind", "shape", "value", "nout", "span", "nnz", "scope")

    def __init__(self, op: str, kind: str, args: tuple[Node | None, ...] = (), fn: str = "",
                 kw: dict[str, Node] | None = None, shape: tuple[int, int] = (-1, -1), value: Any = None,
                 nout: int = 1, span: Span | None = None) -> None:
        self.op, self.kind, self.args, self.fn, self.kw = op, kind, args, fn, kw or {}
        self.shape = (1, 1) if kind == SCALAR else shape
        self.value, self.nout = value, nout
        self.span = span if span is not None else origin()
        self.nnz = -1  # an input matrix's non-zeros, counted once when bound
        self.scope = SCOPES[-1]  # the loop or branch body being traced when built (None: none)

    def inputs(self) -> list[Node]:
        return [a for a in self.args if a is not None] + list(self.kw.values())


def literal(v: Any) -> Node:
    """A Python scalar as a node: written into the script (so the compiler folds and specializes it),
    except a non-finite float, which DML has no literal for, and is bound instead."""
    if isinstance(v, bool) or isinstance(v, str):
        return Node("lit", SCALAR if isinstance(v, bool) else OTHER, value=v)
    if isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            raise OverflowError(f"integer {v} does not fit DML's 64-bit integers")
        return Node("lit", SCALAR, value=v)
    if isinstance(v, float):
        return Node("lit" if math.isfinite(v) else "input", SCALAR, value=v)
    raise TypeError(f"not a scalar: {type(v).__name__}")


def _check_elementwise(op: str, a: Node, b: Node, span: Span) -> tuple[int, int]:
    """The result shape of ``a op b`` (DML's broadcasting: per dimension equal, or one side 1)."""
    if a.kind != MATRIX:
        return b.shape if b.kind == MATRIX else (1, 1)
    if b.kind != MATRIX:
        return a.shape
    (ar, ac), (br, bc) = a.shape, b.shape
    if not (_fits(ar, br) and _fits(ac, bc)):
        raise ShapeError(f"element-wise '{op}' of a {ar}x{ac} and a {br}x{bc} matrix: each dimension must "
                         f"agree or be 1", span)
    return (-1 if ar < 0 or br < 0 else broadcast_dim(ar, br), -1 if ac < 0 or bc < 0 else broadcast_dim(ac, bc))


def _fits(a: int, b: int) -> bool:
    return a < 0 or b < 0 or a == b or a == 1 or b == 1


def binary(op: str, a: Node, b: Node) -> Node:
    span = origin()
    if op == "%*%":
        if a.kind != MATRIX or b.kind != MATRIX:
            raise TypeError("@ needs two matrices (use * to scale by a scalar)")
        (ar, ac), (br, bc) = a.shape, b.shape
        if ac >= 0 and br >= 0 and ac != br:
            raise ShapeError(f"matrix product of a {ar}x{ac} and a {br}x{bc} matrix: inner dimensions "
                             f"{ac} and {br} differ", span)
        return Node("binary", MATRIX, (a, b), op, shape=(ar, bc), span=span)
    if OTHER in (a.kind, b.kind):  # strings: DML concatenates with + (a number is written out)
        if op == "+" and MATRIX not in (a.kind, b.kind):
            return Node("binary", OTHER, (a, b), op, span=span)
        if not (a.kind == b.kind == OTHER and op in ("==", "!=")):
            raise TypeError(f"operator '{op}' of a {a.kind} and a {b.kind}")
        return Node("binary", SCALAR, (a, b), op, span=span)
    kind = MATRIX if MATRIX in (a.kind, b.kind) else a.kind
    return Node("binary", kind, (a, b), op, shape=_check_elementwise(op, a, b, span), span=span)


def unary(op: str, a: Node) -> Node:
    return Node("unary", a.kind, (a,), op, shape=a.shape)


def call(fn: str, args: list[Node], kw: dict[str, Node] | None = None, kind: str = MATRIX,
         shape: tuple[int, int] = (-1, -1), nout: int = 1) -> Node:
    return Node("call", kind, tuple(args), fn, kw, shape, nout=nout)


def output(c: Node, k: int, kind: str, shape: tuple[int, int] = (-1, -1)) -> Node:
    return Node("out", kind, (c,), value=k, shape=shape, span=c.span)
