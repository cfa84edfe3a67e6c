"""Row template, block body: a dense main (and dense CELL inputs) processed one block of rows at a time.

Why: the per-row body pays a fixed cost per row and vector primitive (short loops of run-time
length). On tall, narrow inputs (multiLogReg's n x 10 X with n x 2 intermediates) that made the fused
Hessian-vector product ~3x slower than the unfused BLAS operators it replaces. Here ``X %*% B`` is
one BLAS product per block (``np.dot``, as the unfused ``%*%``), the ``t(P) %*% Q`` accumulation of
COL_AGG_B1_T another, and element-wise nodes are loops over the block, so X is still read once.

Block values, by node: row-varying vectors are R x L arrays ``B{k}``, row-varying scalars R x 1,
vectors that do not vary by row (COLVEC and expressions of it) 1 x L, and the rest plain floats.
Inputs are read in place (``a{s}[r0 + r, q]``). Element-wise nodes use the same scalar expressions
as the per-row body. The per-row body stays the spec and the path for CSR inputs (their structural
zeros), for the sparse mode, and for plans with a node this body has no form for
(:func:`block_body` returns None).
"""

from __future__ import annotations

from lafuse.codegen.emit import scalar_op
from lafuse.codegen.gen_row import Emitter, RowInfo
from lafuse.fusion.cplan import (
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
    CNode,
    CPlan,
)


class _Block:
    def __init__(self, info: RowInfo, ms: int) -> None:
        self.info, self.c, self.ms = info, info.c, ms
        e = Emitter(info, ms)  # node numbers and input slots as the per-row body names them
        self.k, self.slot = e.idx, e.slot
        self.rv: dict[int, bool] = {}  # varies by row
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
                return f"a{s}[r0 + r, {zq}]"
            if n.access == ROWVEC:
                return f"a{s}[r0 + r]"
            return f"a{s}[{zq}]"  # COLVEC
        if not self.rv[id(n)]:
            return f"B{k}[0, {zq}]" if self.vec(n) else f"B{k}"
        return f"B{k}[r, {zq}]" if self.vec(n) else f"B{k}[r, 0]"

    def arr(self, n: CNode) -> str | None:
        """A 2-D array expression of a node's block value (for np.dot), or None."""
        if n.op == "input":
            s = self.slot(n)
            if n.access in (MAIN, CELL):
                return f"a{s}[r0:r1]"
            if n.access == COLVEC:
                return f"a{s}.reshape((1, a{s}.shape[0]))"
            if n.access == ROWVEC:
                return f"a{s}[r0:r1].copy().reshape((R, 1))"
            return None
        if n.op == "literal" or not (self.rv[id(n)] or self.vec(n)):
            return None
        return f"B{self.k(n)}"

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
        if rv and vec:
            return ["for r in range(R):", f"    for q in range(L{k}):", f"        {body}"]
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
        shape = f"({'R' if rv else 1}, {f'L{k}' if vec else 1})"
        if n.op == "vecmat":
            a = self.arr(ch[0])
            if a is None:
                return None
            return [f"B{k} = np.dot({a}, a{self.slot(ch[1])})"]
        if n.op in ("rowSums", "rowMins", "rowMaxs", "dot"):
            if n.op == "dot":
                x, y = (self.row(c) for c in ch)
                if x is None or y is None:
                    return None
                call = f"dot({x}, z{self.k(ch[0])}, {y}, z{self.k(ch[1])}, L{k})"
            elif not self.vec(ch[0]):
                call = self.elem(ch[0])
            else:
                x = self.row(ch[0])
                if x is None:
                    return None
                f = {"rowSums": "vsum", "rowMins": "vmin", "rowMaxs": "vmax"}[n.op]
                call = f"{f}({x}, L{self.k(ch[0])})"
            if not rv:
                return ["r = 0", f"B{k} = {call}"]
            return [f"B{k} = np.empty((R, 1))", "for r in range(R):", f"    B{k}[r, 0] = {call}"]
        expr = scalar_op(n.op, [self.elem(x) for x in ch])
        if not (rv or vec):
            return ["r = 0", "q = 0", f"B{k} = {expr}"]
        return [f"B{k} = np.empty({shape})", *self.loops(n, f"B{k}[r, q] = {expr}")]

    def consume(self, plan: CPlan) -> list[str] | None:
        r = plan.root
        e = self.elem(r)
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
            return ["for r in range(R):", "    t_ = 0.0", f"    for q in range({lr}):", f"        t_ += {e}",
                    "    s0, k0 = kadd(s0, k0, t_)"]
        assert plan.agg == COL_AGG_B1_T and plan.root2 is not None
        a, b = self.arr(r), self.arr(plan.root2)
        if a is None or b is None or not (self.rv[id(r)] and self.rv[id(plan.root2)]):
            return None
        return [f"acc += np.dot({a}.T, {b})"]


def block_body(info: RowInfo, plan: CPlan, ms: int) -> tuple[list[str], str] | None:
    """(lines over the block [r0, r1), kernel-level condition for using them), or None when the
    plan has a node without a block form."""
    bk = _Block(info, ms)
    lines = ["R = r1 - r0"]
    for n in info.c.order:
        got = bk.node(n)
        if got is None:
            return None
        lines += got
    tail = bk.consume(plan)
    if tail is None:
        return None
    cond = ["mode == 0", "m > 0"]
    for s, acc in sorted(info.c.access.items()):
        if acc == CELL:
            cond.append(f"not f{s}")
        elif acc == MATRIX:  # BLAS is not called on empty operands
            cond.append(f"a{s}.shape[0] > 0 and a{s}.shape[1] > 0")
    return lines + tail, " and ".join(cond)
