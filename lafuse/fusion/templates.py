"""Fusion templates with the open-fuse-merge-close (OFMC) protocol (paper 000 sec. 3.2).

Each template answers four local questions about a HOP and one of its inputs; the exploration
(:mod:`lafuse.fusion.memo`) stays template-oblivious. The conditions are deliberately about shapes
and operator kinds only: whether a fused operator pays off is the plan selector's question.

* Cell: cell-wise unary/binary/ternary operators (``replace`` as an ifelse) over one iteration
  space, closed by a full, row or column aggregate (sum, min, max) or by a dot product
  ``t(x) %*% y`` of column vectors.
* Row: opened by a matrix-vector(-like) product ``X %*% B``, a ``t(P) %*% Q`` over shared rows, a
  row aggregate (rowVars too) or a ``cbind`` of row-aligned matrices; fuses cell-wise operators
  over the same rows, ``cbind`` and the row-wise cumulative sum ``t(cumsum(t(P)))``, and merges
  Cell plans; closed by column or full aggregates (colSums, sum, ``t(P) %*% Q``).
* Outer: opened by an outer-product-like ``U %*% t(V)`` (small rank); fuses cell-wise operators
  over the n x m result, merges a factor over the driver that keeps its zeros (``X != 0``), closed
  by ``sum`` or a product with a factor-sized matrix. Its validity (a sparsity-exploiting multiply
  by the sparse driver) is checked when the CPlan is built.
* A plan of one operator is pointless for a cell-wise unary or binary operator, but not for an n-ary
  min/max (one pass instead of a chain of binary ones): :func:`solo` says which may be fused alone.
  Only the heuristic policies build such plans; the cost-based one does not weigh them yet.
* MAgg combines full aggregates of Cell operators over the same iteration space that share an
  input (:mod:`lafuse.fusion.magg`): priced within a partition by the selector's plan cost, merged
  across partitions after selection, as SystemDS does.
"""

from __future__ import annotations

import math

from lafuse.hops import cplan as C
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.sizes import scalar_value

OPEN, CLOSED_VALID, CLOSED_INVALID = 0, 1, -1

CELL_UNARY = set(C.UNARY)
CELL_BINARY = set(C.BINARY) - {"min", "max"}  # min/max arrive as nary HOPs
# operands of an n-ary min/max a cell template covers: each fusable operand doubles the memo's
# candidate entries (2^6 = memo.MAX_ENTRIES_PER_GROUP); a longer one stays unfused
NARY_MAX_INPUTS = 6
# (kind, op) of aggregates and the CPlan aggregation they become
CELL_AGGS = {"sum": (C.FULL_AGG, "sum"), "min": (C.FULL_AGG, "min"), "max": (C.FULL_AGG, "max"),
             "rowSums": (C.ROW_AGG, "sum"), "rowMins": (C.ROW_AGG, "min"), "rowMaxs": (C.ROW_AGG, "max"),
             "colSums": (C.COL_AGG, "sum"), "colMins": (C.COL_AGG, "min"), "colMaxs": (C.COL_AGG, "max")}
ROW_AGGS = C.ROW_UNARY  # the row aggregates the row template computes
ROW_MAX_SIDE_CELLS = 4_000_000  # cells of a side matrix B that X %*% B reads whole per row (32 MB)
ROW_MAX_SIDE_COLS = 1024  # columns of B: the per-row result vector lives in a thread-local buffer
OUTER_MAX_RANK = 1024  # inner dimension of U %*% t(V) for a sparsity-exploiting outer product


def is_cellwise(h: Hop) -> bool:
    """A matrix-valued cell-wise operator (vector and scalar operands broadcast)."""
    if h.dt != MATRIX:
        return False
    if h.kind == "unary":
        return h.op in CELL_UNARY and len(h.inputs) == 1 and h.inputs[0].dt == MATRIX
    if h.kind == "binary":
        ok = h.op in CELL_BINARY and len(h.inputs) == 2
    elif h.kind == "nary":  # fused as the unfused kernel computes it: a left fold of binary min/max
        ok = h.op in ("min", "max") and 2 <= len(h.inputs) <= NARY_MAX_INPUTS
    elif h.kind == "ternary":
        ok = h.op == "ifelse"
    elif h.kind == "param_builtin" and h.op == "replace":  # an ifelse (construct._Builder.cell_op)
        sl = replace_slots(h)
        ok = sl is not None and h.inputs[sl[0]].dt == MATRIX \
            and all(h.inputs[k].dt == "scalar" for k in sl[1:])
    else:
        return False
    return ok and all(i.dt in (MATRIX, "scalar") for i in h.inputs) and _broadcasts(h)


def replace_slots(h: Hop) -> tuple[int, int, int] | None:
    """Input positions of ``replace(target=, pattern=, replacement=)``'s three arguments."""
    slots = h.params.get("slots") or ()
    if sorted(slots) != ["pattern", "replacement", "target"] or len(h.inputs) != 3:
        return None
    return slots.index("target"), slots.index("pattern"), slots.index("replacement")


def _broadcasts(h: Hop) -> bool:
    """Every pair of matrix operands of known size broadcasts one into the other, as the unfused
    kernels require (kernels_elementwise._bshape): a column vector against a row vector is an
    error there, which a fused kernel would silently compute as an outer operation."""
    dims = [(i.rows, i.cols) for i in h.inputs if i.dt == MATRIX and i.rows >= 0 and i.cols >= 0]
    return all((rb in (ra, 1) and cb in (ca, 1)) or (ra in (rb, 1) and ca in (cb, 1))
               for k, (ra, ca) in enumerate(dims) for rb, cb in dims[k + 1:])


def agg_of(h: Hop) -> tuple[str, str] | None:
    if h.kind == "agg_unary" and h.op in CELL_AGGS and len(h.inputs) == 1 and h.inputs[0].dt == MATRIX:
        return CELL_AGGS[h.op]
    return None


def is_transpose(h: Hop) -> bool:
    return h.kind == "reorg" and h.op == "t" and len(h.inputs) == 1 and h.inputs[0].dt == MATRIX


def is_matmult(h: Hop) -> bool:
    return h.kind == "matmult" and h.op == "%*%" and len(h.inputs) == 2


def is_dot(h: Hop) -> bool:
    """``t(x) %*% y`` of two column vectors over the same rows: a Cell plan's ``sum(x * y)`` (SystemDS's
    Cell template takes such products, its cellwisetmpl7: ``t(Z) %*% Z`` of a cell-wise ``Z``)."""
    if not (is_matmult(h) and is_transpose(h.inputs[0])):
        return False
    x, y = h.inputs[0].inputs[0], h.inputs[1]
    return x.dt == MATRIX and y.dt == MATRIX and x.dims_known and y.dims_known and x.cols == 1 == y.cols \
        and x.rows == y.rows > 1


def same_dims(a: Hop, b: Hop) -> bool:
    return a.dims_known and b.dims_known and a.rows == b.rows and a.cols == b.cols


def row_cumsum_of(h: Hop) -> Hop | None:
    """P of ``t(cumsum(t(P)))``, the cumulative sum along each row of P (SystemDS's Row template takes
    the chain: rowAggPattern28), else None."""
    if not (is_transpose(h) and h.inputs[0].op == "cumsum" and len(h.inputs[0].inputs) == 1):
        return None
    inner = h.inputs[0].inputs[0]
    return inner.inputs[0] if is_transpose(inner) and inner.inputs[0].dt == MATRIX else None


def fused_input(h: Hop, k: int) -> Hop:
    """The HOP a memo reference from input ``k`` of ``h`` points to: through a transpose for the
    ``t(P) %*% Q`` products of Row and Outer (the transpose is part of the fused operator), through
    the chain of a row-wise cumulative sum ``t(cumsum(t(P)))`` to P."""
    i = h.inputs[k]
    if is_matmult(h) and k == 0 and is_transpose(i):
        return i.inputs[0]
    if k == 0:
        p = row_cumsum_of(h)
        if p is not None:
            return p
    return i


class Template:
    """open(h): a fused operator may start at h; fuse(h, inp): an open plan at input inp may be
    extended to its consumer h; merge(h, inp): a plan of this template at h may absorb the (other
    template's) open plan at inp; close(h): OPEN, CLOSED_VALID or CLOSED_INVALID after h."""

    name = ""

    def open(self, h: Hop) -> bool:
        raise NotImplementedError

    def fuse(self, h: Hop, inp: Hop) -> bool:
        raise NotImplementedError

    def merge(self, h: Hop, inp: Hop) -> bool:
        return False

    def close(self, h: Hop) -> int:
        raise NotImplementedError


class CellTemplate(Template):
    name = "cell"

    def open(self, h: Hop) -> bool:
        return is_cellwise(h) and h.dims_known

    def fuse(self, h: Hop, inp: Hop) -> bool:
        # the fused input must span the whole iteration space (a broadcast vector stays a side input)
        if is_cellwise(h):
            return inp.dt == MATRIX and same_dims(h, inp)
        if is_dot(h):
            return True
        return agg_of(h) is not None and inp.dims_known

    def merge(self, h: Hop, inp: Hop) -> bool:
        return self.fuse(h, inp)

    def close(self, h: Hop) -> int:
        return CLOSED_VALID if agg_of(h) is not None or is_dot(h) else OPEN


def column_range(h: Hop) -> tuple[int, int] | None:
    """(lo, hi) of ``X[, lo:hi]``: right indexing of every row of a matrix over a column range
    (SystemDS's Row template reads it inside the plan: rowAggPattern17/30). The row bounds and ``lo``
    are literals; ``hi`` a literal, or a scalar variable the result's width tells (``P[, 1:K]`` with K
    known at recompilation: a plan is kept per sizes, so another K is another plan)."""
    if h.kind != "rix" or h.dt != MATRIX or len(h.inputs) != 5 or not h.dims_known:
        return None
    x = h.inputs[0]
    b = [scalar_value(i) for i in h.inputs[1:]]  # (literals, or nrow/ncol of known sizes: rewrites off)
    if b[3] is None and h.inputs[4].dt != MATRIX and isinstance(b[2], int) and not isinstance(b[2], bool):
        b[3] = b[2] + h.cols - 1
    if not x.dims_known or x.rows <= 1 or any(not isinstance(v, (int, float)) or isinstance(v, bool)
                                              or not float(v).is_integer() for v in b):
        return None
    rl, ru, cl, cu = (int(v) for v in b)  # type: ignore[arg-type]
    if cu - cl + 1 != h.cols:
        return None
    if (rl, ru) != (1, x.rows) or not 1 <= cl <= cu <= x.cols or (cl, cu) == (1, x.cols):
        return None
    return cl, cu


def is_cbind(h: Hop) -> bool:
    """``cbind`` of matrices over the same rows (of known dims): a Row plan's row is their rows pasted
    (SystemDS's Row template takes it: rowAggPattern35)."""
    return h.op == "cbind" and h.kind in ("nary", "binary") and h.dims_known and h.rows > 1 \
        and len(h.inputs) >= 2 \
        and all(i.dt == MATRIX and i.dims_known and i.rows == h.rows for i in h.inputs)


def _small_side(b: Hop) -> bool:
    return b.dims_known and b.cols <= ROW_MAX_SIDE_COLS and b.rows * b.cols <= ROW_MAX_SIDE_CELLS


def _tsmm_like(h: Hop) -> bool:
    """``t(P) %*% Q`` with P and Q over the same rows: a column aggregate of row-wise outer products."""
    if not (is_matmult(h) and is_transpose(h.inputs[0])):
        return False
    p, q = h.inputs[0].inputs[0], h.inputs[1]
    return p.dims_known and q.dims_known and p.rows == q.rows and p.rows > 1 and q.cols <= ROW_MAX_SIDE_COLS \
        and p.cols <= ROW_MAX_SIDE_CELLS // max(q.cols, 1)


class RowTemplate(Template):
    name = "row"

    def open(self, h: Hop) -> bool:
        if is_matmult(h):
            a, b = h.inputs
            return _tsmm_like(h) or (not is_transpose(a) and a.dims_known and a.rows > 1 and a.cols > 1
                                     and _small_side(b) and b.cols < a.cols)
        if h.kind == "agg_unary" and h.op in ROW_AGGS:
            return h.inputs[0].dims_known and h.inputs[0].cols > 1
        return is_cbind(h) or column_range(h) is not None

    def fuse(self, h: Hop, inp: Hop) -> bool:
        if not inp.dims_known or inp.rows <= 1:
            return False
        if is_cellwise(h):
            return h.dims_known and h.rows == inp.rows and inp.dt == MATRIX
        if h.kind == "agg_unary":
            return h.op in ROW_AGGS or h.op in ("colSums", "sum")
        if is_cbind(h):
            return True
        if row_cumsum_of(h) is not None:
            return h.dims_known
        if is_matmult(h):
            if _tsmm_like(h):
                return not is_dot(h)  # (a dot product of columns is Cell's and MAgg's: multiAggPattern7)
            return h.inputs[0] is inp and _small_side(h.inputs[1])
        return False

    def merge(self, h: Hop, inp: Hop) -> bool:
        # a Cell plan over the same rows becomes row-vector operations (paper 000 sec. 3.2)
        return is_cellwise(inp) and inp.dims_known and inp.rows > 1 and self.fuse(h, inp)

    def close(self, h: Hop) -> int:
        if _tsmm_like(h) or (h.kind == "agg_unary" and h.op in ("colSums", "sum")):
            return CLOSED_VALID
        return OPEN


def outer_like(h: Hop) -> bool:
    """``U %*% t(V)`` or ``U %*% H`` (H = t(V), r x m) with a small inner dimension r."""
    if not is_matmult(h) or is_transpose(h.inputs[0]):
        return False
    u, b = h.inputs
    m = b.inputs[0].rows if is_transpose(b) else b.cols
    return u.dims_known and b.dims_known and u.cols == b.rows and u.cols <= OUTER_MAX_RANK \
        and u.rows > 1 and m > 1 and u.cols < min(u.rows, m)


def _keeps_zeros(h: Hop) -> bool:
    """A binary operator of a matrix and a literal that maps the matrix's zeros to zero (``X != 0``,
    ``X > 0.5``, ``X * 2``): merged into an Outer plan, its matrix stays the sparse driver
    (SystemDS's ``isBinarySparseSafe``)."""
    if h.kind != "binary" or len(h.inputs) != 2:
        return False
    a, b = h.inputs
    lit, left = (b, False) if b.is_literal else (a, True) if a.is_literal else (None, False)
    if lit is None or not isinstance(lit.value, (int, float)) or isinstance(lit.value, bool):
        return False
    v = float(lit.value)
    if h.op == "*":
        return math.isfinite(v)
    f = C.COMPARE.get(h.op)
    return f is not None and not (f(v, 0.0) if left else f(0.0, v))


class OuterTemplate(Template):
    name = "outer"

    def open(self, h: Hop) -> bool:
        return outer_like(h)

    def fuse(self, h: Hop, inp: Hop) -> bool:
        if is_cellwise(h):
            return same_dims(h, inp)
        if h.kind == "agg_unary":
            return h.op == "sum"
        if is_matmult(h) and not outer_like(h):
            a, b = h.inputs
            if a is inp:  # W %*% mm  (right mm)
                return b.dims_known and b.rows == inp.cols and b.cols <= OUTER_MAX_RANK
            if is_transpose(a) and a.inputs[0] is inp:  # t(W) %*% mm  (left mm)
                return b.dims_known and b.rows == inp.rows and b.cols <= OUTER_MAX_RANK
            if b is inp and is_transpose(a):  # t(F) %*% W = t(t(W) %*% F)  (left mm, transposed)
                f = a.inputs[0]
                return f.dims_known and f.rows == inp.rows and f.cols <= OUTER_MAX_RANK
        return False

    def merge(self, h: Hop, inp: Hop) -> bool:
        # the other factor of a product with the outer product, a cell-wise operator over the driver such
        # as X != 0 (SystemDS's Outer merge of sparse-safe binary inputs: wdivmmNeq); whether the plan is
        # still sparsity-exploiting, construct checks on its CPlan
        return h.kind == "binary" and h.op == "*" and is_cellwise(inp) and same_dims(h, inp) \
            and not outer_like(inp) and _keeps_zeros(inp)

    def close(self, h: Hop) -> int:
        if h.kind == "agg_unary" or is_matmult(h) and not outer_like(h):
            return CLOSED_VALID
        return OPEN


def solo(template: str, h: Hop) -> bool:
    """Whether a plan of ``template`` covering ``h`` alone is a fused operator worth having (SystemDS's
    ``TemplateUtils.hasSingleOperation`` keeps n-ary operators): a lone n-ary min/max as Cell, a lone
    ``t(P) %*% Q`` of two matrices as Row (SystemDS's rowAggPattern26: one pass over the rows of both;
    the wider of P and Q is the main input, walked over its stored entries when CSR,
    construct._row_cplan), not a Gram product ``t(W) %*% W`` (a tsmm: BLAS's syrk, and on Dask the
    product paper 004 splits off)."""
    if template == "row":
        return _tsmm_like(h) and not is_dot(h) and h.inputs[0].inputs[0] is not h.inputs[1]
    return template == "cell" and h.kind == "nary" and h.op in ("min", "max") and len(h.inputs) >= 3 \
        and is_cellwise(h) and h.dims_known


# exploration order is the preference order of the heuristics: sparsity-exploiting first
TEMPLATES: tuple[Template, ...] = (OuterTemplate(), RowTemplate(), CellTemplate())
BY_NAME = {t.name: t for t in TEMPLATES}
