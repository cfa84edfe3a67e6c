"""Row template: iterates the rows of the main input; nodes are scalars or row vectors.

Vector intermediates live in buffers allocated once per block (never per row). Two bodies:

* dense (mode 0: dense main, whose row is a view; mode 1: CSR main, each row densified into a
  block buffer), which handles every plan;
* sparse (mode 2, only for plans whose uses of the main row all have sparse forms): the main row
  stays the stored range [p0, p1) of the CSR, possibly scaled (``X_i * s``, ``X_i / s``), and is
  consumed by dot, vecmat, row aggregates and the output accumulation in O(nnz of the row), so
  ``t(X) %*% (X %*% v)`` costs O(nnz(X)). Matrix products (``vecmat``: ``X %*% B``, and the
  COL_AGG_T / COL_AGG_B1_T accumulation: ``t(X) %*% w``) meet only the stored entries, exactly as
  the unfused SciPy product, so NaN/Inf in the dense factor reach only the rows/columns the stored
  entries touch. Element-wise uses (``X * s``, ``rowSums(X * c)`` as ``dot``, row aggregates, the
  NO_AGG/COL_AGG/FULL_AGG outputs) skip zeros only when the scale maps 0 to 0 and the dense operand
  is finite; a row where that fails falls back to the dense body.

Kernel arguments: ``b0, b1, mode, n, m, rpb, nb, lits, sc, lens`` (the run-time length of every
node, see :func:`analyze`), the input slots (MAIN/CELL as in the cell template, ROWVEC/COLVEC
flat, MATRIX dense), then ``out`` (NO_AGG) and ``parts`` (per-block partials: nb x L for COL_AGG
and COL_AGG_T, nb x 2 for FULL_AGG, nb x L1 x L2 for COL_AGG_B1_T).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lafuse.codegen.emit import HEADER, JIT, Canon, canon, indent, scalar_op
from lafuse.codegen.gen_cell import main_slot, slot_args
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
    ROW_UNARY,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
    row_kinds,
    row_sparse,
    sparse_base,
)

ROW_AGGS = (NO_AGG, COL_AGG, FULL_AGG, COL_AGG_T, COL_AGG_B1_T)
ROW_AGG_PRIM = {"rowSums": "vsum", "rowMins": "vmin", "rowMaxs": "vmax", "rowVars": "vvar"}  # over a vector


def row_agg_of_one(op: str, x: str) -> str:
    """A row aggregate of a one-element row ``x``: the element, or rowVars' 0 (NaN for NaN), as the
    unfused kernel (kernels_agg._var_axis)."""
    return f"(np.nan if {x} != {x} else 0.0)" if op == "rowVars" else x


@dataclass
class RowInfo:
    """Static kinds ("S" scalar, "V" vector, "M" a MATRIX operand) and the sparse analysis."""

    c: Canon
    kind: dict[int, str] = field(default_factory=dict)
    sparse: set[int] = field(default_factory=set)  # nodes that are a scaled main row in mode 2
    scale_of: dict[int, CNode] = field(default_factory=dict)  # sparse node -> its scalar factor
    len1: list[CNode] = field(default_factory=list)  # vector factors mode 2 needs of length 1
    sparse_ok: bool = False
    lens_memo: dict[tuple, Any] = field(default_factory=dict)  # widths -> node lengths (runner_row)


def analyze(plan: CPlan, c: Canon | None = None) -> RowInfo:
    c = c or canon(plan)
    info = RowInfo(c)
    info.kind = row_kinds(c.order)
    rs = row_sparse(c.order, info.kind, plan.root2)
    info.sparse, info.scale_of, info.len1, info.sparse_ok = rs.sparse, rs.scale_of, rs.len1, rs.ok
    return info


class Emitter:
    def __init__(self, info: RowInfo, ms: int) -> None:
        self.info = info
        self.c = info.c
        self.ms = ms

    def v(self, n: CNode) -> str:
        return self.c.var(n)

    def idx(self, n: CNode) -> int:
        return int(self.v(n)[1:])

    def elem(self, n: CNode, q: str) -> str:
        """Element q of a node (a scalar broadcasts)."""
        if self.info.kind[id(n)] == "V":
            return f"{self.v(n)}[{q} * z{self.idx(n)}]"
        return self.v(n)

    def arr(self, n: CNode) -> tuple[list[str], str, str]:
        """(lines, array expression, stride) of a node used where an array is needed."""
        if self.info.kind[id(n)] == "V":
            return [], self.v(n), f"z{self.idx(n)}"
        return [f"w{self.idx(n)}[0] = {self.v(n)}"], f"w{self.idx(n)}", "0"

    def scalar(self, n: CNode) -> str:
        return f"{self.v(n)}[0]" if self.info.kind[id(n)] == "V" else self.v(n)

    def node(self, n: CNode, main_sparse: bool) -> list[str]:
        c, info, v, k = self.c, self.info, self.v(n), self.idx(n)
        if n.op == "literal":
            return []
        if n.op == "input":
            s = c.slot[int(n.arg)]  # type: ignore[call-overload]
            if n.access == MAIN:
                return [f"sm{k} = 1.0", f"sd{k} = 1.0"] if main_sparse else [f"{v} = xv"]
            if n.access == CELL:
                return [f"if f{s}:",
                        f"    densify_row(d{s}, i{s}, p{s}[i], p{s}[i + 1], cb{s})",
                        f"    {v} = cb{s}",
                        "else:",
                        f"    {v} = a{s}[i]"]
            if n.access == ROWVEC:
                return [f"{v} = a{s}[i]"]
            return []  # COLVEC, SCALAR, MATRIX: kernel-level values
        ch = n.children
        if main_sparse and id(n) in info.sparse:
            base = sparse_base(n, info.sparse, info.scale_of)
            b = base.op == "input" and base.access == MAIN
            kb = self.idx(base)
            sm, sd = ("1.0", "1.0") if b else (f"sm{kb}", f"sd{kb}")
            sc = self.scalar(info.scale_of[id(n)])
            if n.op == "*":
                return [f"sm{k} = {sm} * {sc}", f"sd{k} = {sd}"]
            return [f"sm{k} = {sm}", f"sd{k} = {sd} * {sc}"]
        sp = [x for x in ch if main_sparse and id(x) in info.sparse]
        if sp:
            x = sp[0]
            kx = self.idx(x)
            rng = f"d{self.ms}, i{self.ms}, lo, hi, sm{kx}, sd{kx}"
            lines = [f"if not zero_safe(sm{kx}, sd{kx}):", "    bad = True"]
            if n.op == "dot":
                o = ch[1] if ch[0] is x else ch[0]
                pre, arr, z = self.arr(o)
                lines += pre
                if info.kind[id(o)] == "S":
                    lines += [f"if not np.isfinite({self.v(o)}):", "    bad = True"]
                elif o.op == "input" and o.access == COLVEC:  # checked once per call
                    lines += [f"if not cf{self.idx(o)}:", "    bad = True"]
                else:
                    lines += [f"if not all_finite_n({arr}, L{k}):", "    bad = True"]
                return lines + [f"{v} = sp_dot({rng}, {arr}, {z})"]
            if n.op == "rowSums":
                return lines + [f"{v} = sp_sum(d{self.ms}, lo, hi, sm{kx}, sd{kx})"]
            if n.op in ("rowMins", "rowMaxs"):
                f = "sp_min" if n.op == "rowMins" else "sp_max"
                return lines + [f"{v} = {f}(d{self.ms}, lo, hi, sm{kx}, sd{kx}, m)"]
            if n.op == "vecmat":
                return lines + [f"sp_vecmat({rng}, a{self.slot(ch[1])}, t{k})", f"{v} = t{k}"]
            raise ValueError(f"{n.op} has no sparse form")  # pragma: no cover - analyze() excludes it
        if n.op in ROW_UNARY:
            if info.kind[id(ch[0])] == "S":
                return [f"{v} = {row_agg_of_one(n.op, self.v(ch[0]))}"]
            f = ROW_AGG_PRIM[n.op]
            return [f"{v} = {f}({self.v(ch[0])}, L{self.idx(ch[0])})"]
        if n.op == "dot":
            pa, aa, za = self.arr(ch[0])
            pb, ab, zb = self.arr(ch[1])
            return pa + pb + [f"{v} = dot({aa}, {za}, {ab}, {zb}, L{k})"]
        if n.op == "rowCumsum":  # in order, as the unfused cumsum of t(P)
            if info.kind[id(n)] == "S":
                return [f"{v} = {self.v(ch[0])}"]
            return ["c_ = 0.0", f"for q in range(L{k}):", f"    c_ += {self.elem(ch[0], 'q')}",
                    f"    t{k}[q] = c_", f"{v} = t{k}"]
        if n.op == "colrange":  # a view of the row vector's elements lo..hi
            lo, hi = (self.c.literal(x) for x in ch[1:])
            return [f"{v} = {self.v(ch[0])}[int({lo}) - 1:int({hi})]"]
        if n.op == "cbind":  # the operands' elements one after the other
            x0, x1 = ch
            la = f"L{self.idx(x0)}"
            return [f"for q in range({la}):", f"    t{k}[q] = {self.elem(x0, 'q')}",
                    f"for q in range(L{self.idx(x1)}):", f"    t{k}[{la} + q] = {self.elem(x1, 'q')}",
                    f"{v} = t{k}"]
        if n.op == "vecmat":
            pa, aa, za = self.arr(ch[0])
            B = f"a{self.slot(ch[1])}"
            return pa + [f"vecmat({aa}, {za}, {B}.shape[0], {B}, t{k})", f"{v} = t{k}"]
        if info.kind[id(n)] == "S":
            return [f"{v} = {scalar_op(n.op, [self.v(x) for x in ch])}"]
        expr = scalar_op(n.op, [self.elem(x, 'q') for x in ch])
        if n.op in ("*", "&") and all(info.kind[id(x)] == "V" for x in ch):
            # a structural zero of a CSR main/CELL row annihilates the product (unfused semantics)
            # (two CSR rows combine over the union of their patterns, as SciPy's multiply)
            def csr(x: CNode) -> str | None:
                if x.op == "colrange":  # (a column range of a CSR row keeps its zeros' rule)
                    x = x.children[0]
                if x.op == "input" and x.access in (MAIN, CELL):
                    return "spm" if x.access == MAIN else f"f{self.slot(x)}"
                return None

            zs = []
            for x, o in ((ch[0], ch[1]), (ch[1], ch[0])):
                sx, so = csr(x), csr(o)
                if sx is not None:
                    zs.append(f"({sx} and {self.elem(x, 'q')} == 0.0" + (f" and not {so})" if so else ")"))
            if zs:
                expr = f"0.0 if {' or '.join(zs)} else {expr}"
        return [f"for q in range(L{k}):", f"    t{k}[q] = {expr}", f"{v} = t{k}"]

    def slot(self, n: CNode) -> int:
        return self.c.slot[int(n.arg)]  # type: ignore[call-overload]


def axpy_root(e: Emitter, plan: CPlan) -> tuple[CNode, CNode, bool] | None:
    """(vector, scalar, static) operands of a root ``vector * scalar`` summed over rows (COL_AGG,
    COL_AGG_T): the dense body then accumulates ``acc += vector * scalar`` directly (a vectorized
    axpy) instead of materializing the product row. ``static`` False: the scalar is a vector node
    of run-time length 1 (``X %*% v`` with one column), so the body checks its length."""
    r = plan.root
    if plan.agg not in (COL_AGG, COL_AGG_T) or r.op != "*" or e.info.kind[id(r)] != "V":
        return None
    a, b = r.children
    kinds = (e.info.kind[id(a)], e.info.kind[id(b)])
    if kinds == ("S", "V"):
        return b, a, True
    if kinds == ("V", "S"):
        return a, b, True
    if id(r) in e.info.sparse and e.info.kind[id(e.info.scale_of[id(r)])] == "V":
        sca = e.info.scale_of[id(r)]
        return (b if a is sca else a), sca, False
    return None


def _consume_dense(e: Emitter, plan: CPlan) -> list[str]:
    r = plan.root
    k, v = e.idx(r), e.v(r)
    vec = e.info.kind[id(r)] == "V"
    if plan.agg == NO_AGG:
        return ([f"for q in range(L{k}):", f"    out[i, q] = {e.elem(r, 'q')}"] if vec else [f"out[i, 0] = {v}"])
    if plan.agg in (COL_AGG, COL_AGG_T):
        return [f"vect_mult_add({v}, z{k}, 1.0, acc, L{k})"] if vec else [f"acc[0] += {v}"]
    if plan.agg == FULL_AGG:
        return [f"s0, k0 = kadd(s0, k0, vsum({v}, L{k}))"] if vec else [f"s0, k0 = kadd(s0, k0, {v})"]
    assert plan.root2 is not None
    pa, aa, za = e.arr(r)
    pb, ab, zb = e.arr(plan.root2)
    return pa + pb + [f"outer_add({aa}, {za}, L{k}, {ab}, {zb}, L{e.idx(plan.root2)}, acc)"]


def _consume_sparse(e: Emitter, plan: CPlan) -> tuple[list[str], list[str]]:
    """(checks, accumulation) of a sparse root."""
    r = plan.root
    k = e.idx(r)
    rng = f"d{e.ms}, i{e.ms}, lo, hi, sm{k}, sd{k}"
    checks = [f"if not zero_safe(sm{k}, sd{k}):", "    bad = True"]
    if plan.agg in (COL_AGG_T, COL_AGG_B1_T):
        # t(X_i) %*% s and t(X_i) %*% W_i are matrix products: like SciPy's sparse product they
        # meet only the stored entries, so a NaN/Inf factor needs no dense fallback; only scales
        # inside the base (element-wise ops on the main row) keep their zero check
        base = r if r.op == "input" else sparse_base(r, e.info.sparse, e.info.scale_of)
        checks = [] if base.op == "input" else [f"if not zero_safe(sm{e.idx(base)}, sd{e.idx(base)}):",
                                                 "    bad = True"]
    if plan.agg == NO_AGG:
        return checks, [f"sp_scatter_row({rng}, out, i)"]
    if plan.agg in (COL_AGG, COL_AGG_T):
        return checks, [f"sp_mult_add({rng}, acc)"]
    if plan.agg == FULL_AGG:
        return checks, [f"s0, k0 = kadd(s0, k0, sp_sum(d{e.ms}, lo, hi, sm{k}, sd{k}))"]
    assert plan.root2 is not None
    pb, ab, zb = e.arr(plan.root2)
    k2 = e.idx(plan.root2)
    checks += pb
    return checks, [f"sp_outer_add({rng}, {ab}, {zb}, L{k2}, acc)"]


def skips_empty_rows(e: Emitter, plan: CPlan, checks: list[str]) -> bool:
    """The sparse body may skip an empty row of the CSR main (SystemDS's sparse-safe row template):
    its output is an aggregate the row's stored entries alone add to (a sparse root consumed over
    [lo, hi): nothing when lo == hi), and no check could send the row to the dense body, where a
    NaN scale would meet its zeros. Then a row's nodes (vecmat's buffers, dots, row aggregates) cost
    nothing for the empty rows of an ultra-sparse main."""
    if plan.agg == NO_AGG or id(plan.root) not in e.info.sparse:
        return False
    return not checks or plan.root.op == "input"


def mmchain(c: Canon, plan: CPlan) -> tuple[int, int] | None:
    """(main slot, MATRIX slot) of ``X * (X %*% v)`` summed over rows (``t(X) %*% (X %*% v)``): a
    dense main with a one-column v runs the block loop :func:`prims.rows_dot_axpy` (mode 4)."""
    r = plan.root
    if plan.agg not in (COL_AGG, COL_AGG_T) or r.op != "*" or len(r.children) != 2:
        return None
    for x, y in (r.children, r.children[::-1]):
        if (x.op == "input" and x.access == MAIN and y.op == "vecmat" and y.children[0] is x
                and y.children[1].op == "input" and y.children[1].access == MATRIX):
            return c.slot[int(x.arg)], c.slot[int(y.children[1].arg)]  # type: ignore[call-overload]
    return None


def generate_row(plan: CPlan, key: str) -> str:
    if plan.agg not in ROW_AGGS:
        raise ValueError(f"the row template has no aggregation {plan.agg!r}")
    if plan.agg == COL_AGG_B1_T and plan.root2 is None:
        raise ValueError("COL_AGG_B1_T needs root2")
    info = analyze(plan)
    c = info.c
    ms = main_slot(c)
    e = Emitter(info, ms)
    top: list[str] = ["spm = mode == 1 or mode == 2"]
    alloc = ["xb = empty1(imax(m, 1))"]
    for n in c.order:
        k = e.idx(n)
        if n.op == "literal":
            top.append(f"{e.v(n)} = {c.literal(n)}")
        elif n.op == "input" and n.access == SCALAR:
            top.append(f"{e.v(n)} = sc[{e.slot(n)}]")
        elif n.op == "input" and n.access == COLVEC:
            top.append(f"{e.v(n)} = a{e.slot(n)}")
            top.append(f"cf{k} = all_finite_n(a{e.slot(n)}, a{e.slot(n)}.shape[0])")
        elif n.op == "input" and n.access == CELL:
            alloc.append(f"cb{e.slot(n)} = empty1(imax(cw{e.slot(n)}, 1))")
        top += [f"L{k} = lens[{k}]", f"z{k} = 1 if L{k} > 1 else 0"]
        if info.kind[id(n)] == "V":
            if n.op != "input":
                alloc.append(f"t{k} = empty1(imax(L{k}, 1))")
        else:
            alloc.append(f"w{k} = empty1(1)")
    for s, acc in c.access.items():
        if acc == CELL:
            top.append(f"cw{s} = lens[{len(c.order) + s}]")
    dense_body = ["if mode == 0:", f"    xv = a{ms}[i]", "else:",
                  f"    densify_row(d{ms}, i{ms}, p{ms}[i], p{ms}[i + 1], xb)", "    xv = xb"]
    ax = axpy_root(e, plan)
    for n in c.order:
        if ax is None or n is not plan.root:
            dense_body += e.node(n, False)
    if ax is None:
        dense_body += _consume_dense(e, plan)
    else:
        vec, sca, static = ax
        kr = e.idx(plan.root)
        axpy = [f"vect_mult_add({e.v(vec)}, z{e.idx(vec)}, {e.scalar(sca)}, acc, L{kr})"]
        # dense main only: over a CSR main the product row keeps its structural-zero rule
        cond = "mode == 0" + ("" if static else f" and L{e.idx(sca)} == 1")
        dense_body += [f"if {cond}:"] + indent(axpy, 1) + ["else:"]
        dense_body += indent(e.node(plan.root, False) + _consume_dense(e, plan), 1)
    row = ["use_dense = mode != 2"]
    if info.sparse_ok:
        nodes: list[str] = []
        for n in c.order:
            nodes += e.node(n, True)
        if id(plan.root) in info.sparse:
            checks, accum = _consume_sparse(e, plan)
        else:
            checks, accum = [], _consume_dense(e, plan)
        body = nodes + checks + ["if bad:", "    use_dense = True", "else:"] + indent(accum, 1)
        sparse_body = [f"lo = p{ms}[i]", f"hi = p{ms}[i + 1]", "bad = False"]
        if skips_empty_rows(e, plan, checks):  # (sparse-safe: an empty row adds nothing)
            sparse_body += ["if lo < hi:"] + indent(body, 1)
        else:
            sparse_body += body
        row += ["if mode == 2:"] + indent(sparse_body, 1)
    row += ["if use_dense:"] + indent(dense_body, 1)
    block = ["r0 = b * rpb", "r1 = imin(n, r0 + rpb)", *alloc]
    if plan.agg in (COL_AGG, COL_AGG_T, COL_AGG_B1_T):
        block.append("acc = parts[b]")
    if plan.agg == FULL_AGG:
        block += ["s0 = 0.0", "k0 = 0.0"]
    from lafuse.codegen.gen_row_block import BLOCK_MODES, block_body  # (it builds on this module's analysis)

    inner = ["for i in range(r0, r1):"] + indent(row, 1)
    blk = block_body(info, plan, ms)
    if blk is not None:  # (runner_row.dense_mode picks the block modes and mode 4)
        cond = " or ".join(f"mode == {k}" for k in BLOCK_MODES)
        inner = [f"if {cond}:"] + indent(blk[0], 1) + ["else:"] + indent(inner, 1)
    chain = mmchain(c, plan)
    if chain is not None:
        block += ["if mode == 4:", f"    rows_dot_axpy(a{ms}, r0, r1, a{chain[1]}, acc)", "else:"]
        block += indent(inner, 1)
    else:
        block += inner
    if plan.agg == FULL_AGG:
        block += ["parts[b, 0] = s0", "parts[b, 1] = k0"]
    args = ["b0", "b1", "mode", "n", "m", "rpb", "nb", "lits", "sc", "lens", *slot_args(c), "out", "parts"]
    lines = [JIT, f"def kernel({', '.join(args)}):"]
    lines += indent(top + ["for b in range(b0, b1):"] + indent(block, 1), 1)
    return HEADER.format(hash=key) + "\n".join(lines) + "\n"
