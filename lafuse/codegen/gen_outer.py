"""Outer template: the expression over the non-zeros (i, j) of the main input X with factors U, V.

Why a transposed variant: LEFT_MM (``t(W) %*% mm``) accumulates into output row j. Iterating X
by rows would make blocks race on the same output rows, so LEFT_MM iterates t(X) (the runner
passes the transposed CSR of X and of CSR side inputs): the outer loop then runs over j and every
block owns its output rows, which keeps the result independent of the thread count without
per-thread copies of the output.

Kernel arguments: ``b0, b1, mode, n, m, rpb, nb, lits, sc``, the input slots as in the cell
template (OUTER_U/OUTER_V as dense ``a{s}``), then ``mm, out, outd, parts``. ``mode`` 0 iterates
a dense X skipping zero cells, 1 the stored entries of a CSR X. Loop variables: ``r`` the outer
(iterated) row, ``cc`` the column within it; ``i``, ``j`` the cell of X.
"""

from __future__ import annotations

from lafuse.codegen.emit import HEADER, JIT, canon, indent, scalar_op
from lafuse.codegen.gen_cell import main_slot, slot_args
from lafuse.hops.cplan import (
    CELL,
    COLVEC,
    FULL_AGG,
    LEFT_MM,
    MAIN,
    NO_AGG,
    OUTER_U,
    OUTER_V,
    RIGHT_MM,
    ROWVEC,
    SCALAR,
    CPlan,
)


def generate_outer(plan: CPlan, key: str) -> str:
    c = canon(plan)
    ms = main_slot(c)
    agg = plan.agg
    if agg not in (NO_AGG, FULL_AGG, LEFT_MM, RIGHT_MM):
        raise ValueError(f"the outer template has no aggregation {agg!r}")
    if agg in (LEFT_MM, RIGHT_MM) and c.mm_slot < 0:
        raise ValueError(f"an outer {agg} plan needs its mm input")
    us = [s for s, a in c.access.items() if a == OUTER_U]
    vs = [s for s, a in c.access.items() if a == OUTER_V]
    trans = agg == LEFT_MM
    ij = ["i = cc", "j = r"] if trans else ["i = r", "j = cc"]
    top, pre, body = [], [], []
    for n in c.order:
        v = c.var(n)
        if n.op == "literal":
            top.append(f"{v} = {c.literal(n)}")
            continue
        if n.op == "uv":
            if not us or not vs:
                raise ValueError("uv needs OUTER_U and OUTER_V inputs")
            us_, vs_ = c.slot[int(n.children[0].arg)], c.slot[int(n.children[1].arg)]  # type: ignore[call-overload]
            body.append(f"{v} = dot_rows(a{us_}, i, a{vs_}, j)")
            continue
        if n.op != "input":
            body.append(f"{v} = {scalar_op(n.op, [c.var(ch) for ch in n.children])}")
            continue
        s = c.slot[int(n.arg)]  # type: ignore[call-overload]
        if n.access == MAIN:
            body.append(f"{v} = x")
        elif n.access == SCALAR:
            top.append(f"{v} = sc[{s}]")
        elif n.access == ROWVEC:
            body.append(f"{v} = a{s}[i]")
        elif n.access == COLVEC:
            body.append(f"{v} = a{s}[j]")
        elif n.access == CELL:
            pre += [f"c{s} = p{s}[r] if f{s} else 0", f"e{s} = p{s}[r + 1] if f{s} else 0"]
            body += [f"if f{s}:",
                     f"    c{s} = csr_seek(i{s}, c{s}, e{s}, cc)",
                     f"    {v} = csr_get(d{s}, i{s}, c{s}, e{s}, cc)",
                     "else:",
                     f"    {v} = a{s}[i, j]"]
        elif n.access not in (OUTER_U, OUTER_V):
            raise ValueError(f"input access {n.access!r} is not valid in an outer plan")
    w = c.var(plan.root)
    if agg == FULL_AGG:
        cons = [f"q += {w}"]  # one plain partial per row, folded into the block's compensated sum
    elif agg == RIGHT_MM:
        cons = [f"if {w} != 0.0:", f"    row_mult_add({w}, mm, j, out, i)"]
    elif agg == LEFT_MM:
        cons = [f"if {w} != 0.0:", f"    row_mult_add({w}, mm, i, out, j)"]
    else:
        cons = []
    dense_loop = (["for cc in range(ncols):"]
                  + indent([f"x = a{ms}[cc, r]" if trans else f"x = a{ms}[r, cc]", "if x == 0.0:", "    continue",
                            *ij, *body, *cons] + ([f"out[i, j] = {w}"] if agg == NO_AGG else []), 1))
    sparse_loop = ([f"for k in range(p{ms}[r], p{ms}[r + 1]):"]
                   + indent([f"cc = i{ms}[k]", f"x = d{ms}[k]", *ij, *body, *cons]
                            + ([f"outd[k] = {w}"] if agg == NO_AGG else []), 1))
    block = ["r0 = b * rpb", "r1 = imin(nrows, r0 + rpb)"]
    if agg == FULL_AGG:
        block += ["s0 = 0.0", "k0 = 0.0"]
    if agg == FULL_AGG:
        pre = pre + ["q = 0.0"]
    post = ["s0, k0 = kadd(s0, k0, q)"] if agg == FULL_AGG else []
    block += ["for r in range(r0, r1):"] + indent(pre + ["if mode == 0:"] + indent(dense_loop, 1)
                                                   + ["else:"] + indent(sparse_loop, 1) + post, 1)
    if agg == FULL_AGG:
        block += ["parts[b, 0, 0] = s0", "parts[b, 0, 1] = k0"]
    args = ["b0", "b1", "mode", "n", "m", "rpb", "nb", "lits", "sc", *slot_args(c), "mm", "out", "outd", "parts"]
    lines = [JIT, f"def kernel({', '.join(args)}):"]
    lines += indent(top + [f"nrows = {'m' if trans else 'n'}", f"ncols = {'n' if trans else 'm'}",
                           "for b in range(b0, b1):"] + indent(block, 1), 1)
    return HEADER.format(hash=key) + "\n".join(lines) + "\n"
