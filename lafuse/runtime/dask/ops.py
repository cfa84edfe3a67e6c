"""Distributed operators other than products: cell-wise (any arity, matrix-vector broadcasting),
aggregates (full, row, column) with tree reductions, transpose, right and left indexing,
rbind/cbind. Each submits its block tasks at once and returns a distributed matrix of futures; only
a scalar result (a full aggregate) is gathered, because control flow may steer on it.

Every block task runs the local kernel (runtime.local.kernels) on whole blocks, so NaN, Inf and
the sparse rules are the local ones; partial aggregates combine with the local binary kernel of
the aggregate (``+``, ``min``, ``max``, ``*``), and the run-time checks of indexing and binding
are the local kernels' own, on the client, before any task is submitted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.plan import exectype
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.local.kernels import bind_args
from lafuse.runtime.local.kernels_reorg import _checked_bounds

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend

FAN_IN = 8  # partial results one task of a tree reduction combines: its memory is FAN_IN partials, the tree adds ~1/7 of their number in tasks


def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    h, op = ins.hop, ins.opcode
    slots = h.params.get("slots")
    impl: Callable[..., Any] | None = None
    if op in exectype.FULL_AGGREGATES and h.dt != "matrix":
        impl = functools.partial(_full, be, op)
    elif op in exectype.ROWCOL_AGGREGATES:
        impl = functools.partial(_rowcol, be, op)
    elif op in exectype.CELLWISE:
        impl = functools.partial(_cellwise, be, op, slots, (h.rows, h.cols))
        return impl  # (the block tasks bind the arguments: runtime.dask.blocks.call)
    elif op == "t":
        impl = functools.partial(_t, be)
    elif op == "rix":
        impl = functools.partial(_rix, be)
    elif op == "lix":
        impl = functools.partial(_lix, be)
    elif op in ("cbind", "rbind"):
        impl = functools.partial(_bind, be, op == "cbind")
    if impl is None:
        return None
    return bind_args(op, slots, impl)


# ---------------------------------------------------------------- cell-wise


def _block_of(x: Any, i: int, j: int) -> Any:
    """What block (i, j) of a cell-wise result reads of operand ``x``: a scalar as it is, a matrix's
    block (i, j), a column vector's block i, a row vector's block j (matrix-vector broadcasting)."""
    if not isinstance(x, Blocked):
        return x
    return x.blocks[(i if x.nrb > 1 or x.rows > 1 else 0, j if x.ncb > 1 or x.cols > 1 else 0)]


def _cellwise(be: DaskBackend, op: str, slots: Any, dims: tuple[int, int], *args: Any) -> Any:
    mats = [a for a in args if isinstance(a, Blocked)]
    rows = max(a.rows for a in mats) if dims[0] < 0 else dims[0]
    cols = max(a.cols for a in mats) if dims[1] < 0 else dims[1]
    out = Blocked(rows, cols, mats[0].bs)
    for i, j in out.grid():
        out.blocks[(i, j)] = be.submit(B.call, op, slots, *[_block_of(a, i, j) for a in args])
    return out


# ---------------------------------------------------------------- aggregates


def tree(be: Any, parts: list[Any], fn: Callable[..., Any], *lead: Any) -> Any:
    """One future: ``parts`` combined by the block function ``fn(*lead, *group)`` FAN_IN at a time,
    level by level, in their order (a fixed order: the same sum every run; no task holds more than
    FAN_IN partial results). ``be``: what submits the tasks (the backend, or a fused operator's
    submissions to one worker)."""
    while len(parts) > 1:
        parts = [g[0] if len(g) == 1 else be.submit(fn, *lead, *g)
                 for g in (parts[n:n + FAN_IN] for n in range(0, len(parts), FAN_IN))]
    return parts[0]


def _tree(be: DaskBackend, combine: str, parts: list[Any]) -> Any:
    """``parts`` combined with the local binary kernel ``combine`` (runtime.dask.blocks.fold)."""
    return tree(be, parts, B.fold, combine)


_COMBINE = {"sum": "+", "prod": "*", "min": "min", "max": "max", "mean": "+", "var": "+", "sd": "+"}


def _full(be: DaskBackend, op: str, a: Any) -> float:
    n = a.rows * a.cols
    if op in ("var", "sd"):
        if n == 1:
            return 0.0
        mu = _full(be, "mean", a)
        ss = be.result(_tree(be, "+", [be.submit(B.squared_deviations, a.blocks[k], mu) for k in a.grid()]))
        v = float(ss) / (n - 1)
        return math.sqrt(v) if op == "sd" and v >= 0 else (math.nan if op == "sd" else v)
    part = "sum" if op == "mean" else op
    total = float(be.result(_tree(be, _COMBINE[op], [be.submit(B.call, part, None, a.blocks[k]) for k in a.grid()])))
    return total / n if op == "mean" else total


_ROWCOL_PART = {"rowSums": ("rowSums", "+"), "rowMeans": ("rowSums", "+"), "rowMins": ("rowMins", "min"),
                "rowMaxs": ("rowMaxs", "max"), "colSums": ("colSums", "+"), "colMeans": ("colSums", "+"),
                "colMins": ("colMins", "min"), "colMaxs": ("colMaxs", "max")}


def _rowcol(be: DaskBackend, op: str, a: Any) -> Any:
    rows = op.startswith("row")
    if op in ("rowIndexMax", "rowIndexMin"):
        out = Blocked(a.rows, 1, a.bs)
        for i in range(a.nrb):
            parts = [be.submit(B.index_minmax, a.blocks[(i, j)], op == "rowIndexMax", j * a.bs) for j in range(a.ncb)]
            out.blocks[(i, 0)] = be.submit(B.index_combine, op == "rowIndexMax", *parts)
        return out
    part, combine = _ROWCOL_PART[op]
    out = Blocked(a.rows, 1, a.bs) if rows else Blocked(1, a.cols, a.bs)
    for o in range(a.nrb if rows else a.ncb):
        keys = [(o, j) for j in range(a.ncb)] if rows else [(i, o) for i in range(a.nrb)]
        f = _tree(be, combine, [be.submit(B.call, part, None, a.blocks[k]) for k in keys])
        if op.endswith("Means"):
            f = be.submit(B.call, "/", None, f, float(a.cols if rows else a.rows))
        out.blocks[(o, 0) if rows else (0, o)] = f
    return out


# ---------------------------------------------------------------- reorganizations


def _t(be: DaskBackend, a: Any) -> Any:
    return be.like(a, {(j, i): be.submit(B.call, "t", None, f) for (i, j), f in a.blocks.items()},
                   rows=a.cols, cols=a.rows)


# a rectangle of a result: (source, source rows r0:r1, columns c0:c1 (global, 0-based, half-open),
# destination row, column): the source a distributed matrix, or a number that fills the rectangle
Rect = tuple[Any, int, int, int, int, int, int]


def _compose(be: DaskBackend, rows: int, cols: int, bs: int, rects: list[Rect]) -> Blocked:
    """A distributed matrix of ``rects`` pasted in order (later ones over earlier ones): a result
    block that is one whole source block, in place, is that block's future (no task); any other
    block is one task that pastes its pieces."""
    out = Blocked(rows, cols, bs)
    for i, j in out.grid():
        R0, R1 = i * bs, min(rows, (i + 1) * bs)
        C0, C1 = j * bs, min(cols, (j + 1) * bs)
        pieces: list[tuple[Any, ...]] = []
        whole = False  # the last piece is a whole source block, in place
        for src, r0, r1, c0, c1, dr, dc in rects:
            # the rectangle's destination intersected with block (i, j)
            a0, a1 = max(R0, dr), min(R1, dr + (r1 - r0))
            b0, b1 = max(C0, dc), min(C1, dc + (c1 - c0))
            if a0 >= a1 or b0 >= b1:
                continue
            if not isinstance(src, Blocked):
                pieces.append((float(src), 0, a1 - a0, 0, b1 - b0, a0 - R0, b0 - C0))
                continue
            s0, s1 = a0 - dr + r0, a1 - dr + r0  # source rows, global
            t0, t1 = b0 - dc + c0, b1 - dc + c0
            for si in range(s0 // src.bs, (s1 - 1) // src.bs + 1):
                for sj in range(t0 // src.bs, (t1 - 1) // src.bs + 1):
                    p0, p1 = max(s0, si * src.bs), min(s1, (si + 1) * src.bs)
                    q0, q1 = max(t0, sj * src.bs), min(t1, (sj + 1) * src.bs)
                    piece = (src.blocks[(si, sj)], p0 - si * src.bs, p1 - si * src.bs, q0 - sj * src.bs,
                             q1 - sj * src.bs, p0 - s0 + a0 - R0, q0 - t0 + b0 - C0)
                    pieces.append(piece)
                    sh, sw = min(src.bs, src.rows - si * src.bs), min(src.bs, src.cols - sj * src.bs)
                    whole = piece[1:] == (0, sh, 0, sw, 0, 0) == (0, R1 - R0, 0, C1 - C0, 0, 0)
        if len(pieces) == 1 and whole:
            out.blocks[(i, j)] = pieces[0][0]
        else:
            out.blocks[(i, j)] = be.submit(B.paste, R1 - R0, C1 - C0, *pieces)
    return out


def _rix(be: DaskBackend, x: Any, rl: Any = None, ru: Any = None, cl: Any = None, cu: Any = None) -> Any:
    r0, r1, c0, c1 = _checked_bounds(x.shape, rl, ru, cl, cu, f"[{x.rows},{x.cols}]")
    return _compose(be, r1 - r0 + 1, c1 - c0 + 1, x.bs, [(x, r0 - 1, r1, c0 - 1, c1, 0, 0)])


def _lix(be: DaskBackend, x: Any, y: Any, rl: Any = None, ru: Any = None, cl: Any = None, cu: Any = None) -> Any:
    from lafuse.errors import DMLRuntimeError  # deferred: only on the error path

    r0, r1, c0, c1 = _checked_bounds(x.shape, rl, ru, cl, cu, f"[{x.rows}x{x.cols}].")
    h, w = r1 - r0 + 1, c1 - c0 + 1
    if isinstance(y, Blocked):
        if y.shape != (h, w):
            raise DMLRuntimeError(
                f"Invalid values for matrix indexing: dimensions of the source matrix [{y.rows}x{y.cols}] "
                f"do not match the shape of the matrix specified by indices [{r0}:{r1}, {c0}:{c1}] (i.e., [{h}x{w}]).")
        top: Rect = (y, 0, h, 0, w, r0 - 1, c0 - 1)
    else:
        top = (float(y), 0, h, 0, w, r0 - 1, c0 - 1)
    return _compose(be, x.rows, x.cols, x.bs, [(x, 0, x.rows, 0, x.cols, 0, 0), top])


def _bind(be: DaskBackend, columns: bool, *args: Any) -> Any:
    from lafuse.errors import DMLRuntimeError  # deferred: only on the error path

    name = "cbind" if columns else "rbind"
    keep, what = (0, "rows") if columns else (1, "columns")
    for i, a in enumerate(args[1:], start=2):
        if a.shape[keep] != args[0].shape[keep]:
            raise DMLRuntimeError(f"inputs to {name} must have same number of {what}: input 1 {what}: "
                                  f"{args[0].shape[keep]}, input {i} {what}: {a.shape[keep]}")
    rects: list[Rect] = []
    at = 0
    for a in args:
        rects.append((a, 0, a.rows, 0, a.cols, 0 if columns else at, at if columns else 0))
        at += a.cols if columns else a.rows
    rows, cols = (args[0].rows, at) if columns else (at, args[0].cols)
    return _compose(be, rows, cols, args[0].bs, rects)
