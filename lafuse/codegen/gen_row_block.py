"""Row template, block body: a dense main processed one block of rows at a time.

Why: the per-row body pays a fixed cost per row and vector primitive (short loops of run-time
length). On tall, narrow inputs (multiLogReg's n x 10 X with n x 2 intermediates) that made the fused
Hessian-vector product ~3x slower than the unfused BLAS operators it replaces. Here ``X %*% B`` is
one BLAS product per block (``prims.mm``, ``np.dot`` as the unfused ``%*%``), the ``t(P) %*% Q`` accumulation of
COL_AGG_B1_T another, and element-wise nodes are loops over the block, so X is still read once.

Block values, by node: row-varying vectors are R x L arrays ``B{k}``, row-varying scalars R x 1,
vectors that do not vary by row (COLVEC and expressions of it) 1 x L, and the rest plain floats.
Inputs are read in place (``a{s}[r0 + r, q]``). Element-wise nodes use the same scalar expressions
as the per-row body.

A second, transposed form stores the same values as L x R (and 1 x R, L x 1) arrays and loops over
the rows innermost. Why: with vectors of a few elements (multiLogReg's n x 2 intermediates) an inner
loop of run-time length 2 per row costs more than the arithmetic, while a loop over the block's rows
vectorizes; measured on the 1e6 x 10 Hessian-vector product as standalone kernels: 15.2 ms row-major,
11.4 ms transposed, 8.8 ms for its two BLAS products alone. It reads MAIN/CELL inputs a column at a
time, which walks every row of the block per column, so it is generated for plans whose inputs read
cell by cell were narrow when fused (``CPlan.narrow``) and runs only while they have at most NARROW_ROW_COLS
columns (a run-time condition). It also takes CSR CELL inputs, scattered into a dense block per
block of rows (multiLogReg's one-hot labels). A kernel has one block form: a second one would add
~30% to its compile time.

The per-row body stays the spec and the path for a CSR main, for CSR CELL inputs of the row-major
form (their structural zeros), for the sparse mode, for inputs too wide for the transposed form,
and for plans with a node no block form exists for (:func:`block_body` returns None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lafuse.codegen.emit import scalar_op
from lafuse.codegen.gen_row import ROW_AGG_PRIM, Emitter, RowInfo, row_agg_of_one
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COL_AGG_B1_T,
    COL_AGG_T,
    COLVEC,
    FULL_AGG,
    MAIN,
    MATRIX,
    NARROW_ROW_COLS,
    NO_AGG,
    ROW_UNARY,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
    cell_read_inputs,
)

# row nodes left to the per-row body: seq reads its row index, cbind and rowCumsum fill its row buffers,
# colrange is a view of one row
PER_ROW_ONLY = ("seq", "cbind", "rowCumsum", "colrange")

_ZQ = re.compile(r"q \* z(\d+)")

# The block body's modes (runner_row.block_mode): every product with a few columns (prims.small_mm)
# by BLAS, every one by the loops, or each decided in the kernel. Why pinned: a kernel that keeps both
# code paths of each product compiles both (the row kernel of ``t(X) %*% (X %*% V)``, V of two
# columns: 1.0 s cold, 0.7 s with the loops alone), while the choice depends only on the product's
# column count and the main's, which the runner knows before the launch. (A script whose products
# change between two columns and more compiles two modes, each once and cached, instead of one.)
BLOCK_BLAS, BLOCK_LOOPS, BLOCK_MIXED = 3, 5, 6
BLOCK_MODES = (BLOCK_BLAS, BLOCK_LOOPS, BLOCK_MIXED)


def small_branch(cols: str) -> str:
    """The condition of a product's loop path: pinned by the mode, tested in the mixed one."""
    return f"if mode == {BLOCK_LOOPS} or mode == {BLOCK_MIXED} and small_mm({cols}, m):"


def zq_versions(lines: list[str]) -> list[str]:
    """A loop nest over (r, q) twice: where every operand it broadcasts by ``q * z{k}`` has its full
    length (all those z are 1) with plain ``q``, else as written. Why: a run-time stride factor keeps
    LLVM from vectorizing the inner loop; measured on l2svm's ``t(X) %*% v`` consumer over 1e6 x 100
    (one thread, 2048-row blocks): 130-170 ms as written, 66-88 ms versioned."""
    zs = sorted({int(k) for line in lines for k in _ZQ.findall(line)})
    if not zs:
        return lines
    cond = " and ".join(f"z{k} == 1" for k in zs)
    return [f"if {cond}:", *(f"    {_ZQ.sub('q', line)}" for line in lines), "else:",
            *(f"    {line}" for line in lines)]


_ROW_AGG_FOLD = {"rowSums": ("0.0", "{a} + {e}"), "dot": ("0.0", "{a} + {e}"),
                 "rowMins": ("np.inf", "s_min({a}, {e})"), "rowMaxs": ("-np.inf", "s_max({a}, {e})")}


class _Block:
    def __init__(self, info: RowInfo, ms: int, tr: bool = False) -> None:
        self.info, self.c, self.ms, self.tr = info, info.c, ms, tr
        e = Emitter(info, ms)  # node numbers and input slots as the per-row body names them
        self.k, self.slot = e.idx, e.slot
        self.rv: dict[int, bool] = {}  # varies by row
        # the column counts of the products small_mm decides: ("cols", matrix slot) or ("len", node)
        self.small: list[tuple[str, int]] = []
        for n in self.c.order:
            if n.op == "input":
                self.rv[id(n)] = n.access in (MAIN, CELL, ROWVEC)
            else:
                self.rv[id(n)] = any(self.rv[id(ch)] for ch in n.children)

    def vec(self, n: CNode) -> bool:
        return self.info.kind[id(n)] == "V"

    def elem(self, n: CNode) -> str:
        """Element (r, q) of a node's block value (r: row in the block, q: vector position)."""
        k = self.k(n)
        zq = f"q * z{k}"
        if n.op == "literal" or n.op == "input" and n.access == SCALAR:
            return self.c.var(n)
        if n.op == "input":
            s = self.slot(n)
            if n.access in (MAIN, CELL):
                if n.access == CELL and self.tr:
                    return f"C{s}[r, {zq}]"  # the block of rows, densified if CSR (cell_blocks)
                return f"a{s}[r0 + r, {zq}]"
            if n.access == ROWVEC:
                return f"a{s}[r0 + r]"
            return f"a{s}[{zq}]"  # COLVEC
        if not self.rv[id(n)]:
            if not self.vec(n):
                return f"B{k}"
            return f"B{k}[{zq}, 0]" if self.tr else f"B{k}[0, {zq}]"
        if self.tr:
            return f"B{k}[{zq}, r]" if self.vec(n) else f"B{k}[0, r]"
        return f"B{k}[r, {zq}]" if self.vec(n) else f"B{k}[r, 0]"

    def arr(self, n: CNode) -> str | None:
        """A 2-D array expression of a node's block value (for prims.mm), or None."""
        if n.op == "input":
            s = self.slot(n)
            if n.access in (MAIN, CELL):
                return f"C{s}" if n.access == CELL and self.tr else f"a{s}[r0:r1]"
            if n.access == COLVEC:
                return f"a{s}.reshape((1, a{s}.shape[0]))"
            if n.access == ROWVEC:
                return f"a{s}[r0:r1].copy().reshape((R, 1))"
            return None
        if n.op == "literal" or not (self.rv[id(n)] or self.vec(n)):
            return None
        return f"B{self.k(n)}.T" if self.tr else f"B{self.k(n)}"

    def arr_t(self, n: CNode) -> str | None:
        """The transpose of :meth:`arr` (a stored array in the transposed form)."""
        a = self.arr(n)
        if a is None:
            return None
        return a[:-2] if a.endswith(".T") else f"{a}.T"

    def row(self, n: CNode) -> str | None:
        """A 1-D view of row r of a vector node (for the row-aggregate prims), or None."""
        if n.op == "input":
            s = self.slot(n)
            return {MAIN: f"a{s}[r0 + r]", CELL: f"a{s}[r0 + r]", COLVEC: f"a{s}"}.get(n.access)
        if not self.vec(n):
            return None
        return f"B{self.k(n)}[r]" if self.rv[id(n)] else f"B{self.k(n)}[0]"

    def loops(self, n: CNode, body: str) -> list[str]:
        """``body`` (which assigns element (r, q)) over the node's block shape."""
        rv, vec, k = self.rv[id(n)], self.vec(n), self.k(n)
        if rv and vec and self.tr:
            return [f"for q in range(L{k}):", "    for r in range(R):", f"        {body}"]
        if rv and vec:
            return zq_versions(["for r in range(R):", f"    for q in range(L{k}):", f"        {body}"])
        if rv:
            return ["q = 0", "for r in range(R):", f"    {body}"]
        if vec:
            return ["r = 0", f"for q in range(L{k}):", f"    {body}"]
        return ["r = 0", "q = 0", body]

    def node(self, n: CNode) -> list[str] | None:
        if n.op in ("input", "literal"):
            return []
        k, ch = self.k(n), n.children
        rv, vec = self.rv[id(n)], self.vec(n)
        dims = ["R" if rv else "1", f"L{k}" if vec else "1"]
        shape = f"({', '.join(dims[::-1] if self.tr else dims)})"
        if n.op == "vecmat":
            m = f"a{self.slot(ch[1])}"
            if self.tr:  # (A M)' = M' A'
                a = self.arr_t(ch[0])
                blas = None if a is None else f"B{k} = mm({m}.T, {a})"
            else:
                a = self.arr(ch[0])
                blas = None if a is None else f"B{k} = mm({a}, {m})"
            if blas is None or not self.main(ch[0]):
                return None if blas is None else [blas]
            self.small.append(("cols", self.slot(ch[1])))
            return [small_branch(f"{m}.shape[1]"), f"    B{k} = empty2{shape}",
                    f"    rows_matmul_small(a{self.slot(ch[0])}, r0, r1, {m}, B{k}, {self.tr})",
                    "else:", f"    {blas}"]
        if n.op in PER_ROW_ONLY:
            return None
        if n.op in _ROW_AGG_FOLD and self.tr:
            return self.row_agg_folded(n)
        if n.op in ROW_UNARY or n.op == "dot":
            if n.op == "dot":
                x, y = (self.row(c) for c in ch)
                if x is None or y is None:
                    return None
                call = f"dot({x}, z{self.k(ch[0])}, {y}, z{self.k(ch[1])}, L{k})"
            elif not self.vec(ch[0]):
                call = row_agg_of_one(n.op, self.elem(ch[0]))
            else:
                x = self.row(ch[0])
                if x is None:
                    return None
                f = ROW_AGG_PRIM[n.op]
                call = f"{f}({x}, L{self.k(ch[0])})"
            if not rv:
                return ["r = 0", f"B{k} = {call}"]
            return [f"B{k} = empty2(R, 1)", "for r in range(R):", f"    B{k}[r, 0] = {call}"]
        expr = self.expr(n)
        if not (rv or vec):
            return ["r = 0", "q = 0", f"B{k} = {expr}"]
        at = "q, r" if self.tr else "r, q"
        return [f"B{k} = empty2{shape}", *self.loops(n, f"B{k}[{at}] = {expr}")]

    def expr(self, n: CNode) -> str:
        """Element (r, q) of an element-wise node, computed from its children's elements."""
        ch = n.children
        expr = scalar_op(n.op, [self.elem(x) for x in ch])
        if self.tr and n.op in ("*", "&") and all(self.vec(x) for x in ch):
            # a structural zero of a CSR CELL row annihilates the product, as in the per-row body
            # (gen_row.Emitter.node; the main is dense here)
            zs = [f"(f{self.slot(x)} and {self.elem(x)} == 0.0" +
                  (f" and not f{self.slot(o)})" if o.op == "input" and o.access == CELL else ")")
                  for x, o in ((ch[0], ch[1]), (ch[1], ch[0])) if x.op == "input" and x.access == CELL]
            if zs:
                expr = f"0.0 if {' or '.join(zs)} else {expr}"
        return expr

    def cell_blocks(self) -> list[str]:
        """The transposed body's view ``C{s}`` of each CELL input's block of rows: the rows
        themselves, or a CSR input's rows scattered into a dense block (narrow: a few columns)."""
        out = []
        for s, acc in sorted(self.c.access.items()):
            if acc == CELL:
                out += [f"if f{s}:", f"    C{s} = zeros2(R, cw{s})", "    for r in range(R):",
                        f"        for j_ in range(p{s}[r0 + r], p{s}[r0 + r + 1]):",
                        f"            C{s}[r, i{s}[j_]] = d{s}[j_]", "else:", f"    C{s} = a{s}[r0:r1]"]
        return out

    def row_agg_folded(self, n: CNode) -> list[str]:
        """A row aggregate (or dot) of the transposed form: a fold over the vector positions, each
        step over all rows of the block (the row-major form calls vsum/vmin/vmax/dot per row)."""
        k, ch = self.k(n), n.children
        init, step = _ROW_AGG_FOLD[n.op]
        e = f"{self.elem(ch[0])} * {self.elem(ch[1])}" if n.op == "dot" else self.elem(ch[0])
        length = f"L{k}" if n.op == "dot" else (f"L{self.k(ch[0])}" if self.vec(ch[0]) else "1")
        if not self.rv[id(n)]:
            return ["r = 0", f"t_ = {init}", f"for q in range({length}):",
                    f"    t_ = {step.format(a='t_', e=e)}", f"B{k} = t_"]
        acc = f"B{k}[0, r]"
        return [f"B{k} = full2(1, R, {init})", f"for q in range({length}):", "    for r in range(R):",
                f"        {acc} = {step.format(a=acc, e=e)}"]

    def inlined(self, plan: CPlan) -> bool:
        """The root is element-wise and consumed element by element: the consumer computes it in
        place instead of reading a block array of it. Why: the array costs a write and a second pass
        over R x L values per block; measured on l2svm's ``t(X) %*% (w * (X %*% v))`` over 1e6 x 10
        (2 threads, median of 19 calls inside the script): 10.1 ms with the root's block array, 7.9 ms
        inlined (a hand-written Numba loop: 4.5 ms; NumPy's three operators: 13.8 ms)."""
        r = plan.root
        return (plan.agg in (NO_AGG, COL_AGG, COL_AGG_T, FULL_AGG) and self.rv[id(r)]
                and r.op not in ("input", "literal", "vecmat", *PER_ROW_ONLY, *_ROW_AGG_FOLD, *ROW_UNARY))

    def consume(self, plan: CPlan) -> list[str] | None:
        r = plan.root
        if plan.agg == COL_AGG_B1_T:
            e = ""  # (that one reads whole blocks only)
        else:
            e = self.expr(r) if self.inlined(plan) else self.elem(r)
        if plan.agg == NO_AGG:
            return self.loops(r, f"out[r0 + r, q] = {e}") if self.rv[id(r)] else None
        if plan.agg in (COL_AGG, COL_AGG_T):
            if not self.rv[id(r)]:
                return None
            return self.loops(r, f"acc[q] += {e}")
        if plan.agg == FULL_AGG:
            if not self.rv[id(r)]:
                return None
            lr = f"L{self.k(r)}" if self.vec(r) else "1"
            return zq_versions(["for r in range(R):", "    t_ = 0.0", f"    for q in range({lr}):",
                                f"        t_ += {e}", "    s0, k0 = kadd(s0, k0, t_)"])
        assert plan.agg == COL_AGG_B1_T and plan.root2 is not None
        a, b = self.arr_t(r), self.arr(plan.root2)
        if a is None or b is None or not (self.rv[id(r)] and self.rv[id(plan.root2)]):
            return None
        q = plan.root2
        if not (self.main(r) and q.op not in ("input", "literal")):
            return [f"acc += mm({a}, {b})"]
        self.small.append(("len", self.k(q)))
        return [small_branch(f"L{self.k(q)}"),
                f"    rows_t_matmul_small(a{self.slot(r)}, r0, r1, B{self.k(q)}, {self.tr}, acc)",
                "else:", f"    acc += mm({a}, {b})"]

    def main(self, n: CNode) -> bool:
        """The node is the (dense) main input, read in place: a{slot}[r0:r1]."""
        return n.op == "input" and n.access == MAIN


@dataclass(frozen=True)
class BlockCond:
    """When a dense main runs the block body (mode 3) rather than the per-row one (mode 0). The runner
    decides before the launch, so the function of each mode compiles one body: both in one function
    cost ~0.7 s more to compile (measured on ``t(X) %*% (X %*% v)``: 2.0 s, 1.36 s with the block body
    alone)."""

    narrow: tuple[int, ...]  # node lengths (indices into lens) that must be at most NARROW_ROW_COLS
    dense_cells: tuple[int, ...]  # CELL slots that must be dense (the row-major form reads them in place)
    nonempty: tuple[int, ...]  # MATRIX slots: BLAS is not called on empty operands
    small: tuple[tuple[str, int], ...] = ()  # the products' column counts (_Block.small; runner_row.block_mode)

    def holds(self, m: int, lens: Any, sparse_cells: dict[int, bool], shapes: dict[int, tuple[int, ...]]) -> bool:
        return m > 0 and all(int(lens[k]) <= NARROW_ROW_COLS for k in self.narrow) \
            and not any(sparse_cells[s] for s in self.dense_cells) \
            and all(shapes[s][0] > 0 and shapes[s][1] > 0 for s in self.nonempty)


def block_body(info: RowInfo, plan: CPlan, ms: int) -> tuple[list[str], BlockCond] | None:
    """(lines over the block [r0, r1), when to use them), or None when the plan has a node without a
    block form; the transposed form for a narrow plan."""
    tr = plan.narrow
    bk = _Block(info, ms, tr)
    lines = ["R = r1 - r0", *(["# transposed block: L x R values", *bk.cell_blocks()] if tr else [])]
    for n in info.c.order:
        if n is plan.root and bk.inlined(plan):
            continue
        got = bk.node(n)
        if got is None:
            return None
        lines += got
    tail = bk.consume(plan)
    if tail is None:
        return None
    read = cell_read_inputs(plan) if tr else set()
    access = sorted(info.c.access.items())
    cond = BlockCond(tuple(bk.k(n) for n in info.c.order if n.op == "input" and n.arg in read),
                     tuple(s for s, acc in access if acc == CELL and not tr),
                     tuple(s for s, acc in access if acc == MATRIX), tuple(bk.small))
    return lines + tail, cond
