"""Algebraic simplification rules (SystemDS RewriteAlgebraicSimplificationStatic/Dynamic).

Every rule keeps results identical up to floating-point reassociation, including NaN and Inf
propagation: rules that would turn ``0*NaN`` into ``0`` (zero propagation) are deliberately absent,
and a rule that would change a scalar's value type (``x + 0.0`` for an INT ``x`` is DOUBLE) does not
fire. Rules that drop a subexpression only fire when it is pure; rules that reorder two
subexpressions only fire when at most one of them is impure (nondeterministic or side-effecting).
"""

from __future__ import annotations

from lafuse.hops.hop import BOOLEAN, DOUBLE, INT, MATRIX, SCALAR, Hop
from lafuse.rewrite.core import NUMERIC_VT, Ctx, num_literal, rule, same_dims


def _is(h: Hop, kind: str, op: str | tuple[str, ...], n: int | None = None) -> bool:
    ops = (op,) if isinstance(op, str) else op
    return h.kind == kind and h.op in ops and (n is None or len(h.inputs) == n)


def _numeric(x: Hop) -> bool:
    return x.dt == MATRIX or (x.dt == SCALAR and x.vt in NUMERIC_VT)


# scalar HOPs whose run-time value is not cast to their compile-time value type: the runtime casts
# every other scalar instruction result to its HOP's value type (plan.build), not these (a variable
# holds whatever its writer stored, ifelse returns the taken branch's own type); replacing ``x + 0``
# by such an ``x`` could change how the value prints
_UNCAST_SCALAR_OPS = ("tread", "get", "fcall", "pread", "ifelse")


def _keeps_type(h: Hop, x: Hop) -> bool:
    """Replacing ``h`` by ``x`` keeps the data type, the value type of the run-time value and (for
    matrices) the shape."""
    if h.dt != x.dt:
        return False
    if h.dt == MATRIX:
        return not (h.dims_known and x.dims_known) or same_dims(h, x)
    return (h.dt == SCALAR and h.vt == x.vt and h.vt in NUMERIC_VT + (BOOLEAN,)
            and x.op not in _UNCAST_SCALAR_OPS)


# ------------------------------------------------------------------ neutral elements, involutions

@rule("remove_mult_by_one", kinds=("binary",))
def remove_mult_by_one(h: Hop, ctx: Ctx) -> Hop | None:
    """``X * 1``, ``1 * X`` and ``X / 1`` -> ``X`` when the result keeps X's type.

    ``Y = X * 1`` -> ``Y = X``; for an INT scalar ``i``, ``i * 1`` -> ``i`` but ``i * 1.0`` (DOUBLE) stays.
    """
    if h.kind != "binary" or h.op not in ("*", "/") or len(h.inputs) != 2:
        return None
    a, b = h.inputs
    if num_literal(b) == 1 and _numeric(a) and _keeps_type(h, a):
        return a
    if h.op == "*" and num_literal(a) == 1 and _numeric(b) and _keeps_type(h, b):
        return b
    return None


@rule("remove_add_zero", kinds=("binary",))
def remove_add_zero(h: Hop, ctx: Ctx) -> Hop | None:
    """``X + 0``, ``0 + X`` and ``X - 0`` -> ``X`` when the result keeps X's type (never for strings).

    ``Y = X + 0`` -> ``Y = X``; ``i + 0`` -> ``i`` for an INT ``i``; ``d + 0`` -> ``d`` for a DOUBLE ``d``;
    ``i + 0.0`` stays (INT + DOUBLE is DOUBLE); ``"s" + 0`` stays (string concatenation).
    """
    if h.kind != "binary" or h.op not in ("+", "-") or len(h.inputs) != 2:
        return None
    a, b = h.inputs
    if num_literal(b) == 0 and _numeric(a) and _keeps_type(h, a):
        return a
    if h.op == "+" and num_literal(a) == 0 and _numeric(b) and _keeps_type(h, b):
        return b
    return None


@rule("remove_double_transpose", kinds=("reorg",))
def remove_double_transpose(h: Hop, ctx: Ctx) -> Hop | None:
    """``t(t(X))`` -> ``X``."""
    if _is(h, "reorg", "t", 1) and _is(h.inputs[0], "reorg", "t", 1):
        x = h.inputs[0].inputs[0]
        if x.dt == MATRIX:
            return x
    return None


@rule("remove_double_negation", kinds=("unary",))
def remove_double_negation(h: Hop, ctx: Ctx) -> Hop | None:
    """``-(-X)`` -> ``X`` (matrix or numeric scalar); ``!(!b)`` -> ``b`` for a BOOLEAN scalar ``b``.

    ``!(!X)`` on a matrix or a number is a 0/1 indicator, not X, and stays.
    """
    if _is(h, "unary", "u-", 1) and _is(h.inputs[0], "unary", "u-", 1):
        x = h.inputs[0].inputs[0]
        if _numeric(x) and _keeps_type(h, x):
            return x
    if _is(h, "unary", "!", 1) and _is(h.inputs[0], "unary", "!", 1):
        x = h.inputs[0].inputs[0]
        if x.dt == SCALAR and x.vt == BOOLEAN and h.dt == SCALAR and h.vt == BOOLEAN and \
                x.op not in _UNCAST_SCALAR_OPS:
            return x
    return None


@rule("remove_unnecessary_cast", kinds=("unary",))
def remove_unnecessary_cast(h: Hop, ctx: Ctx) -> Hop | None:
    """Casts to the type a value already has: ``as.double(d)`` -> ``d`` (d DOUBLE), ``as.integer(i)`` -> ``i``,
    ``as.logical(b)`` -> ``b``, ``as.matrix(X)`` -> ``X`` for a matrix X, ``as.scalar(s)`` -> ``s`` for a scalar."""
    if h.kind != "unary" or len(h.inputs) != 1:
        return None
    x = h.inputs[0]
    want = {"as.double": (SCALAR, DOUBLE), "as.integer": (SCALAR, INT), "as.logical": (SCALAR, BOOLEAN)}
    if h.op in want and (x.dt, x.vt) == want[h.op] and (h.dt, h.vt) == want[h.op] and \
            x.op not in _UNCAST_SCALAR_OPS:
        return x
    if h.op == "as.matrix" and x.dt == MATRIX and h.dt == MATRIX:
        return x
    if h.op in ("as.scalar", "castAsScalar") and _keeps_type(h, x):
        return x
    return None


# ------------------------------------------------------------------ indexing and aggregates

def _covers(lo: Hop, hi: Hop, n: int, is_all: bool, single: bool, ctx: Ctx) -> bool:
    if is_all:
        return True
    lv = ctx.size_value(lo)
    hv = lv if single else ctx.size_value(hi)
    num = (int, float)
    if not (isinstance(lv, num) and isinstance(hv, num)) or isinstance(lv, bool) or isinstance(hv, bool):
        return False
    return lv == 1 and hv == n


@rule("remove_unnecessary_rix", phase="dynamic", kinds=("rix",))
def remove_unnecessary_rix(h: Hop, ctx: Ctx) -> Hop | None:
    """Right indexing that selects the whole matrix: ``X[1:nrow(X), 1:ncol(X)]`` -> ``X`` (dims known).

    ``X[1:10, ]`` -> ``X`` when X has 10 rows; ``X[, 1]`` -> ``X`` when X has one column.
    """
    if h.kind != "rix" or h.op != "rix" or len(h.inputs) != 5:
        return None
    x, rl, ru, cl, cu = h.inputs
    if x.dt != MATRIX or h.dt != MATRIX or not x.dims_known:
        return None
    p = h.params
    if not _covers(rl, ru, x.rows, bool(p.get("row_all")), bool(p.get("row_single")), ctx):
        return None
    if not _covers(cl, cu, x.cols, bool(p.get("col_all")), bool(p.get("col_single")), ctx):
        return None
    if not all(ctx.pure(b) for b in (rl, ru, cl, cu)):
        return None
    return x


_TRANSPOSE_INVARIANT_AGG = ("sum", "mean", "min", "max", "prod", "trace")


@rule("remove_transpose_under_agg", kinds=("agg_unary",))
def remove_transpose_under_agg(h: Hop, ctx: Ctx) -> Hop | None:
    """Full aggregates do not care about a transpose: ``sum(t(X))`` -> ``sum(X)`` (also mean, min, max,
    prod, trace)."""
    if h.kind != "agg_unary" or h.op not in _TRANSPOSE_INVARIANT_AGG or len(h.inputs) != 1:
        return None
    t = h.inputs[0]
    if not _is(t, "reorg", "t", 1) or t.inputs[0].dt != MATRIX or h.dt != SCALAR:
        return None
    return ctx.mk(h.op, h.kind, [t.inputs[0]], h.dt, h.vt, h, h.params)


@rule("remove_unnecessary_rowcol_agg", phase="dynamic", kinds=("agg_unary",))
def remove_unnecessary_rowcol_agg(h: Hop, ctx: Ctx) -> Hop | None:
    """Row aggregates of a column vector and column aggregates of a row vector are the identity:
    ``rowSums(v)`` -> ``v`` and ``rowMeans(v)`` -> ``v`` for an n x 1 ``v``; ``colSums(r)`` -> ``r`` for a 1 x m ``r``."""
    if h.kind != "agg_unary" or len(h.inputs) != 1 or h.dt != MATRIX:
        return None
    x = h.inputs[0]
    if x.dt != MATRIX or not x.dims_known:
        return None
    if h.op in ("rowSums", "rowMeans") and x.cols == 1:
        return x
    if h.op in ("colSums", "colMeans") and x.rows == 1:
        return x
    return None


@rule("pow2_to_mult", kinds=("binary",))
def pow2_to_mult(h: Hop, ctx: Ctx) -> Hop | None:
    """``X ^ 2`` -> ``X * X`` for a matrix X (a cheap element-wise multiply instead of a power)."""
    if h.kind != "binary" or h.op != "^" or len(h.inputs) != 2:
        return None
    x, e = h.inputs
    if x.dt == MATRIX and h.dt == MATRIX and num_literal(e) == 2:
        return ctx.mk("*", "binary", [x, x], MATRIX, DOUBLE, h)
    return None


@rule("transpose_matmult_vector", phase="dynamic", kinds=("matmult",))
def transpose_matmult_vector(h: Hop, ctx: Ctx) -> Hop | None:
    """``t(X) %*% y`` -> ``t(t(y) %*% X)`` for a column vector y: transposes two vectors instead of X.

    Fires when X (n x m, dims known) is larger than the two vectors (n*m > n + m) and ``t(X)`` has no
    other use (else the transpose is computed anyway).
    """
    if h.kind != "matmult" or len(h.inputs) != 2:
        return None
    tx, y = h.inputs
    if not _is(tx, "reorg", "t", 1) or not ctx.single_use(tx):
        return None
    x = tx.inputs[0]
    if x.dt != MATRIX or y.dt != MATRIX or not (x.dims_known and y.dims_known):
        return None
    if y.cols != 1 or y.rows != x.rows or x.rows * x.cols <= x.rows + x.cols:
        return None
    if not (ctx.pure(x) or ctx.pure(y)):  # y now runs before X
        return None
    inner = ctx.matmult(ctx.transpose(y, h), x, h)
    return ctx.transpose(inner, h)


_DATAGEN_FOLD_OPS = ("*", "+", "-", "/")


@rule("fold_scalar_into_datagen", kinds=("binary",))
def fold_scalar_into_datagen(h: Hop, ctx: Ctx) -> Hop | None:
    """A constant matrix combined with a scalar is a constant matrix: ``matrix(1, n, m) * λ`` ->
    ``matrix(1 * λ, n, m)`` (and ``+``, ``-``, ``/``, either side); each cell is the same ``c op λ``.

    The paper's ``diag(matrix(1, n, 1)) * λ`` becomes ``diag(matrix(λ, n, 1))`` once ``1 * λ`` folds.
    Needs the ``matrix(...)`` to have no other use.
    """
    if h.kind != "binary" or h.op not in _DATAGEN_FOLD_OPS or len(h.inputs) != 2 or h.dt != MATRIX:
        return None
    a, b = h.inputs
    for g, s, g_left in ((a, b, True), (b, a, False)):
        if g.kind != "datagen" or g.op != "matrix" or g.dt != MATRIX or not ctx.single_use(g):
            continue
        if s.dt != SCALAR or s.vt not in NUMERIC_VT:
            continue
        slots = list(g.params.get("slots") or ())
        if "data" not in slots:
            continue
        k = slots.index("data")
        c = g.inputs[k]
        if c.dt != SCALAR or c.vt not in NUMERIC_VT:
            continue
        if c.vt == INT and s.vt == INT and h.op != "/":
            # int arithmetic is exact; the cell-wise double arithmetic rounds beyond 2^53
            cv, sv = num_literal(c), num_literal(s)
            if cv is None or sv is None or max(abs(cv), abs(sv)) > 2**26:
                continue
            if h.op == "*" and cv * sv == 0 and (cv < 0 or sv < 0):
                continue  # the cells hold -0.0 (IEEE: -1 * 0.0); the INT product 0 would drop the sign
        if not (ctx.pure(s) or ctx.pure(g)):
            continue
        val = ctx.binary(h.op, c, s, h) if g_left else ctx.binary(h.op, s, c, h)
        ins = list(g.inputs)
        ins[k] = val
        return ctx.mk("matrix", "datagen", ins, MATRIX, DOUBLE, g, g.params)
    return None


_ROWCOL_SWAP = {"colSums": "rowSums", "rowSums": "colSums", "colMeans": "rowMeans", "rowMeans": "colMeans",
                "colMaxs": "rowMaxs", "rowMaxs": "colMaxs", "colMins": "rowMins", "rowMins": "colMins"}


@rule("pushdown_transpose_rowcol_agg", kinds=("agg_unary",))
def pushdown_transpose_rowcol_agg(h: Hop, ctx: Ctx) -> Hop | None:
    """Aggregate first, transpose the vector: ``colSums(t(X))`` -> ``t(rowSums(X))`` and
    ``rowSums(t(X))`` -> ``t(colSums(X))`` (also means, maxs, mins). Needs ``t(X)`` to have no other use."""
    if h.kind != "agg_unary" or h.op not in _ROWCOL_SWAP or len(h.inputs) != 1 or h.dt != MATRIX:
        return None
    t = h.inputs[0]
    if not _is(t, "reorg", "t", 1) or not ctx.single_use(t) or t.inputs[0].dt != MATRIX:
        return None
    agg = ctx.mk(_ROWCOL_SWAP[h.op], "agg_unary", [t.inputs[0]], MATRIX, DOUBLE, h, h.params)
    return ctx.transpose(agg, h)


def _square(x: Hop) -> bool:
    return x.dt == MATRIX and x.dims_known and x.rows == x.cols


@rule("simplify_sum_diag", phase="dynamic", kinds=("agg_unary",))
def simplify_sum_diag(h: Hop, ctx: Ctx) -> Hop | None:
    """``sum(diag(X))`` -> ``trace(X)`` for a square X (known dims; for a column vector ``diag`` builds a
    matrix and the rule does not apply). Needs ``diag(X)`` to have no other use."""
    if not _is(h, "agg_unary", "sum", 1) or h.dt != SCALAR:
        return None
    d = h.inputs[0]
    if not _is(d, "reorg", "diag", 1) or not ctx.single_use(d):
        return None
    x = d.inputs[0]
    if not _square(x):  # (an n x 1 vector with n > 1 is not square: diag(v) builds a matrix)
        return None
    return ctx.mk("trace", "agg_unary", [x], SCALAR, DOUBLE, h, {"slots": ("target",)})


@rule("fold_transpose_into_datagen", kinds=("reorg",))
def fold_transpose_into_datagen(h: Hop, ctx: Ctx) -> Hop | None:
    """The transpose of a constant matrix is a constant matrix: ``t(matrix(c, r, k))`` -> ``matrix(c, k, r)``.
    Needs the ``matrix(...)`` to have no other use."""
    if not _is(h, "reorg", "t", 1):
        return None
    g = h.inputs[0]
    if g.kind != "datagen" or g.op != "matrix" or g.dt != MATRIX or not ctx.single_use(g):
        return None
    slots = list(g.params.get("slots") or ())
    if not {"data", "rows", "cols"} <= set(slots) or g.inputs[slots.index("data")].dt != SCALAR:
        return None
    ins = list(g.inputs)
    ri, ci = slots.index("rows"), slots.index("cols")
    ins[ri], ins[ci] = ins[ci], ins[ri]
    if not all(ctx.pure(x) for x in (ins[ri], ins[ci])):  # they now run in the other order
        return None
    return ctx.mk("matrix", "datagen", ins, MATRIX, DOUBLE, g, g.params)
