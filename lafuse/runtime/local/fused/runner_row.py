"""Calling row-template kernels: run-time vector lengths, the sparse mode decision, outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lafuse.codegen.emit import Canon
from lafuse.codegen.gen_row import RowInfo, analyze, mmchain
from lafuse.codegen.gen_row_block import BLOCK_BLAS, BLOCK_LOOPS, BLOCK_MIXED, BlockCond, block_body
from lafuse.codegen.prims import kcombine, small_mm
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COL_AGG_B1_T,
    COL_AGG_T,
    COLVEC,
    FULL_AGG,
    MAIN,
    MATRIX,
    NO_AGG,
    ROWVEC,
    SCALAR,
    colrange_bounds,
)
from lafuse.runtime.local.fused.runner import (
    E2,
    ROW_BLOCK_CELLS,
    as_mat,
    blocks,
    dense,
    launch,
    scalar,
    vector,
)


def _lens(info: RowInfo, width: dict[int, int], fit: bool = False) -> np.ndarray:
    """Length of every node (1 for scalars; for dot the length of its operands), checked; with
    ``fit``, a vecmat's MATRIX input is given the rows its row operand needs (``width`` is updated)."""
    c = info.c
    out = np.ones(len(c.order) + max(c.access, default=-1) + 1, dtype=np.int64)
    for s, w in width.items():
        if s >= 0:  # negative keys: the row counts of MATRIX inputs
            out[len(c.order) + s] = w
    for k, n in enumerate(c.order):
        kind = info.kind[id(n)]
        if n.op == "input":
            if kind == "V":
                out[k] = width[c.slot[int(n.arg)]]  # type: ignore[call-overload]
            continue
        if n.op == "vecmat":
            a, b = n.children
            B = width[c.slot[int(b.arg)]]  # type: ignore[call-overload]
            rows = width[-1 - c.slot[int(b.arg)]]  # type: ignore[call-overload]
            la = int(out[int(c.var(a)[1:])])
            if fit:
                rows = width[-1 - c.slot[int(b.arg)]] = la  # type: ignore[call-overload]
            if la != rows:
                raise ValueError(f"vecmat: a 1 x {la} row times a {rows} x {B} matrix")
            out[k] = B
            continue
        if n.op == "cbind":
            out[k] = sum(int(out[int(c.var(ch)[1:])]) for ch in n.children)
            continue
        if n.op == "colrange":
            lo, hi = colrange_bounds(n)
            la = int(out[int(c.var(n.children[0])[1:])])
            if la and not 1 <= lo <= hi <= la:
                raise ValueError(f"colrange: columns {lo}:{hi} of a row of {la}")
            out[k] = hi - lo + 1 if la else 0  # (0: the 0-row warm-up's inputs, every row empty)
            continue
        if kind == "V" or n.op == "dot":
            ls = {int(out[int(c.var(ch)[1:])]) for ch in n.children if info.kind[id(ch)] == "V"}
            big = ls - {1}
            if len(big) > 1:
                raise ValueError(f"{n.op}: row vectors of lengths {sorted(ls)} do not match")
            out[k] = big.pop() if big else 1
    return out


def fit_empty_inputs(c: Canon, vals: dict[int, Any]) -> None:
    """Shape the MATRIX inputs of the 0-row warm-up problem: ``rowSums(Q) %*% matrix(1, 1, K)``
    needs a 1 x 0 matrix where ``X %*% B`` needs 0 x 0 (multiLogReg's Hessian-vector product)."""
    info = c.memo.get("row")
    if info is None:
        info = c.memo["row"] = analyze(c.plan, c)
    width: dict[int, int] = {}
    for s, acc in c.access.items():
        if acc in (MAIN, CELL, COLVEC, MATRIX):
            width[s] = 0
        if acc == MATRIX:
            width[-1 - s] = 0
    _lens(info, width, fit=True)
    for s, acc in c.access.items():
        if acc == MATRIX:
            vals[s] = np.zeros((width[-1 - s], 0))


def dense_mode(c: Canon, info: RowInfo, ms: int, m: int, lens: Any, sparse_cells: dict[int, bool],
               shapes: dict[int, tuple[int, ...]]) -> int:
    """The mode of a dense main: 4 the ``t(X) %*% (X %*% v)`` loop (gen_row.mmchain), 3, 5 or 6 the block
    body (block_mode), 0 the per-row body. Decided here, not in the kernel, so that each mode's
    function compiles only its own body (numba_gen.specialize)."""
    forms = c.memo.get("row_forms")
    if forms is None:
        blk = block_body(info, c.plan, ms)
        forms = c.memo["row_forms"] = (mmchain(c, c.plan), blk[1] if blk is not None else None)
    chain, cond = forms
    if chain is not None and m > 0 and shapes[chain[1]][1] == 1:
        return 4
    if isinstance(cond, BlockCond) and cond.holds(m, lens, sparse_cells, shapes):
        return block_mode(cond, m, lens, shapes)
    return 0


def block_mode(cond: BlockCond, m: int, lens: Any, shapes: dict[int, tuple[int, ...]]) -> int:
    """The block body's mode (gen_row_block.BLOCK_MODES): which of its products run the loops, by
    prims.small_mm (its Python function: the same rule the mixed mode tests in the kernel) over each
    product's column count (a matrix input's, or a node's length)."""
    rule = small_mm.py_func
    small = {rule(int(shapes[i][1]) if what == "cols" else int(lens[i]), m) for what, i in cond.small}
    if small == {True}:
        return BLOCK_LOOPS
    return BLOCK_MIXED if len(small) > 1 else BLOCK_BLAS


def row_mode(c: Canon, info: RowInfo, ms: int, main_sparse: bool, m: int, width: dict[int, int],
             sparse_cells: dict[int, bool], shapes: dict[int, tuple[int, ...]]) -> tuple[int, np.ndarray]:
    """(mode, node lengths) of a call whose inputs have these widths and formats: what the values
    decide, so that a kernel compiled before any call (a deferred compile) compiles the mode its
    calls will run (``predict_mode``)."""
    # the lengths depend on the widths only: a loop calling the kernel on same-shaped inputs
    # (mini-batches) walks the plan once, not at every call
    wkey = tuple(sorted(width.items()))
    lens = info.lens_memo.get(wkey)
    if lens is None:
        lens = _lens(info, width)
        if len(info.lens_memo) < 64:
            info.lens_memo[wkey] = lens
    if main_sparse:
        mode = 1
        if info.sparse_ok and all(int(lens[int(c.var(x)[1:])]) == 1 for x in info.len1):
            mode = 2
        return mode, lens
    return dense_mode(c, info, ms, m, lens, sparse_cells, shapes), lens


def predict_mode(c: Canon, inputs: Sequence[tuple[int, int, bool]]) -> int:
    """The mode a call runs whose inputs (plan positions) have these (rows, cols, CSR or not)."""
    info = c.memo.get("row")
    if info is None:
        info = c.memo["row"] = analyze(c.plan, c)
    width: dict[int, int] = {}
    sparse_cells: dict[int, bool] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    ms, m, main_sparse = -1, 0, False
    for s, acc in c.access.items():
        rows, cols, sparse = inputs[c.perm[s]]
        if acc == MAIN:
            ms, m, main_sparse = s, cols, sparse
        if acc == CELL:
            sparse_cells[s] = sparse
        if acc == MATRIX:
            width[-1 - s] = rows
            shapes[s] = (rows, cols)
        if acc in (MAIN, CELL, COLVEC, MATRIX):
            width[s] = cols
    return row_mode(c, info, ms, main_sparse, m, width, sparse_cells, shapes)[0]


def run_row(c: Canon, kernel: Any, vals: dict[int, Any], lits: np.ndarray) -> Any:
    plan = c.plan
    info = c.memo.get("row")
    if info is None:
        info = c.memo["row"] = analyze(plan, c)
    ms = next(s for s, a in c.access.items() if a == MAIN)
    main = as_mat(vals[ms], "the main input")
    n, m = main.shape
    sc = np.zeros(max(c.access, default=-1) + 1)
    args: list[Any] = []
    width: dict[int, int] = {}
    sparse_cells: dict[int, bool] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    for s in sorted(c.access):
        acc, v = c.access[s], vals[s]
        what = f"input {c.perm[s]} ({acc})"
        if acc == MAIN:
            args += main.args()
            width[s] = m
            continue
        if acc == SCALAR:
            sc[s] = scalar(v, what)
            continue
        if acc == CELL:
            x = as_mat(v, what)
            if x.shape[0] != n:
                raise ValueError(f"{what} has {x.shape[0]} rows, expected {n}")
            args += [*x.args(), int(x.sparse)]
            width[s] = x.shape[1]
            sparse_cells[s] = x.sparse
        elif acc == ROWVEC:
            args.append(vector(v, (n, 1), what))
        elif acc == COLVEC:
            d = dense(v, what)
            if d.shape[0] != 1:
                raise ValueError(f"{what} must be a row vector, has shape {d.shape}")
            args.append(d.reshape(-1))
            width[s] = d.shape[1]
        elif acc == MATRIX:
            d = dense(v, what)
            args.append(d)
            width[s], width[-1 - s] = d.shape[1], d.shape[0]
            shapes[s] = d.shape
        else:
            raise ValueError(f"input access {acc!r} is not valid in a row plan")
    mode, lens = row_mode(c, info, ms, main.sparse, m, width, sparse_cells, shapes)
    root = int(c.var(plan.root)[1:])
    L = int(lens[root])
    out, parts = E2, np.zeros((0, 0))
    if plan.agg == NO_AGG:
        out = np.zeros((n, L))
        rpb, nb = blocks(n, m, max_cells=ROW_BLOCK_CELLS)
    elif plan.agg == FULL_AGG:
        rpb, nb = blocks(n, m, max_cells=ROW_BLOCK_CELLS)
        parts = np.zeros((nb, 2))
    elif plan.agg == COL_AGG_B1_T:
        assert plan.root2 is not None
        L2 = int(lens[int(c.var(plan.root2)[1:])])
        rpb, nb = blocks(n, m, L * L2, ROW_BLOCK_CELLS)
        parts = np.zeros((nb, L, L2))
    else:
        rpb, nb = blocks(n, m, L, ROW_BLOCK_CELLS)
        parts = np.zeros((nb, L))
    launch(kernel, nb, mode, n, m, rpb, nb, lits, sc, lens, *args, out, parts)
    if plan.agg == NO_AGG:
        return out
    if plan.agg == FULL_AGG:
        return float(kcombine(parts))
    total = np.add.reduce(parts, axis=0) if nb > 0 else np.zeros(parts.shape[1:])
    if plan.agg == COL_AGG:
        return total.reshape(1, L)
    if plan.agg == COL_AGG_T:
        return total.reshape(L, 1)
    return np.ascontiguousarray(total)
