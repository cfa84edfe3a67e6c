"""Cell and MAgg templates: one scalar expression per cell of the main input, then aggregated.

The kernel has up to three loop nests over the same body, picked at run time by ``mode`` so one
compiled kernel serves every input format: 0 = dense main, 1 = CSR main over all cells (a cursor
per row walks its stored entries), 2 = CSR main over its non-zeros only (generated only for
sparse-safe plans; the caller selects it only when no side input holds NaN/Inf). Rows are cut into
``nb`` blocks of ``rpb`` rows, a function of the shape only, and every aggregate is a per-block
(compensated) partial combined in block order, so results do not depend on the thread count.

Kernel arguments: ``b0, b1`` (the block range to run), ``mode, n, m, rpb, nb, lits, sc``, then per used input slot ``s`` (canonical
order): MAIN/CELL ``a{s}, d{s}, i{s}, p{s}`` (dense array and CSR arrays, the unused format as
empty dummies) plus ``f{s}`` (CELL: 1 if CSR); ROWVEC/COLVEC ``a{s}`` (flat); SCALAR values come in
``sc[s]``. Then ``out`` (NO_AGG dense n x m, ROW_AGG n), ``outd`` (NO_AGG in mode 2: one value per
stored entry) and ``parts`` (nb x R x 2 for full aggregates, nb x m x 2 for COL_AGG).
"""

from __future__ import annotations

from lafuse.codegen.emit import HEADER, JIT, Canon, canon, indent, scalar_op
from lafuse.fusion.cplan import (
    CELL,
    COL_AGG,
    COLVEC,
    FULL_AGG,
    MAIN,
    NO_AGG,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
)


def slot_args(c: Canon) -> list[str]:
    args: list[str] = []
    for s in sorted(c.access):
        acc = c.access[s]
        if acc in (MAIN, CELL):
            args += [f"a{s}", f"d{s}", f"i{s}", f"p{s}"]
            if acc == CELL:
                args.append(f"f{s}")
        elif acc != SCALAR:
            args.append(f"a{s}")
    return args


def main_slot(c: Canon) -> int:
    mains = [s for s, a in c.access.items() if a == MAIN]
    if len(mains) != 1:
        raise ValueError(f"a {c.plan.template} plan needs exactly one MAIN input, has {len(mains)}")
    return mains[0]


def _top(c: Canon) -> list[str]:
    """Per-kernel values: literals and scalar inputs."""
    lines = []
    for n in c.order:
        if n.op == "literal":
            lines.append(f"{c.var(n)} = lits[{c.lit[id(n)]}]")
        elif n.op == "input" and n.access == SCALAR:
            lines.append(f"{c.var(n)} = sc[{c.slot[int(n.arg)]}]")  # type: ignore[call-overload]
    return lines


def _row_prelude(c: Canon, i: str = "i") -> list[str]:
    lines = []
    for n in c.order:
        if n.op != "input":
            continue
        s = c.slot[int(n.arg)]  # type: ignore[call-overload]
        if n.access == ROWVEC:
            lines.append(f"{c.var(n)} = a{s}[{i}]")
        elif n.access == CELL:
            lines.append(f"c{s} = p{s}[{i}] if f{s} else 0")
            lines.append(f"e{s} = p{s}[{i} + 1] if f{s} else 0")
    return lines


def cell_reads(c: Canon, i: str, j: str, main_expr: str, extra: dict[str, str] | None = None) -> list[str]:
    """Per-cell reads of the inputs (CSR CELL inputs by a row cursor) and the scalar body."""
    lines = []
    for n in c.order:
        v = c.var(n)
        if n.op == "input":
            s = c.slot[int(n.arg)]  # type: ignore[call-overload]
            if n.access == MAIN:
                lines.append(f"{v} = {main_expr}")
            elif n.access == CELL:
                lines += [f"if f{s}:",
                          f"    c{s} = csr_seek(i{s}, c{s}, e{s}, {j})",
                          f"    {v} = csr_get(d{s}, i{s}, c{s}, e{s}, {j})",
                          "else:",
                          f"    {v} = a{s}[{i}, {j}]"]
            elif n.access == COLVEC:
                lines.append(f"{v} = a{s}[{j}]")
            elif n.access in (ROWVEC, SCALAR):
                continue
            elif extra is not None and n.access in extra:
                lines.append(f"{v} = {extra[n.access].format(s=s)}")
            else:
                raise ValueError(f"input access {n.access!r} is not valid in a {c.plan.template} plan")
        elif n.op == "literal":
            continue
        elif extra is not None and n.op in extra:
            lines.append(f"{v} = {extra[n.op].format(*[c.var(ch) for ch in n.children])}")
        else:
            lines.append(f"{v} = {scalar_op(n.op, [c.var(ch) for ch in n.children])}")
    return lines


def _roots(plan: CPlan) -> list[tuple[CNode, str]]:
    if plan.template == "magg":
        if len(plan.agg_ops) != len(plan.roots):
            raise ValueError("a magg plan needs one aggregation op per root")
        return list(zip(plan.roots, plan.agg_ops))
    return [(plan.root, plan.agg_op)]


def _acc_init(op: str, r: int) -> list[str]:
    if op in ("sum", "sumsq"):
        return [f"s{r} = 0.0", f"k{r} = 0.0"]
    return [f"s{r} = {'np.inf' if op == 'min' else '-np.inf'}"]


def _acc_add(op: str, r: int, v: str) -> list[str]:
    if op == "sum":
        return [f"s{r}, k{r} = kadd(s{r}, k{r}, {v})"]
    if op == "sumsq":
        return [f"s{r}, k{r} = kadd(s{r}, k{r}, {v} * {v})"]
    return [f"s{r} = s_{op}(s{r}, {v})"]


def generate_cell(plan: CPlan, key: str) -> str:
    c = canon(plan)
    ms = main_slot(c)
    roots = _roots(plan)
    agg = FULL_AGG if plan.template == "magg" else plan.agg
    if agg not in (NO_AGG, FULL_AGG, ROW_AGG, COL_AGG):
        raise ValueError(f"the cell template has no aggregation {agg!r}")
    for _, op in roots:
        if op not in ("sum", "sumsq", "min", "max"):
            raise ValueError(f"unknown aggregation op {op!r}")
    args = ["b0", "b1", "mode", "n", "m", "rpb", "nb", "lits", "sc", *slot_args(c), "out", "outd", "parts"]
    modes = [(0, f"a{ms}[i, j]", None), (1, f"csr_get(d{ms}, i{ms}, cm, em, j)", "all")]
    if plan.sparse_safe:
        modes.append((2, f"d{ms}[k]", "nnz"))

    block: list[str] = ["r0 = b * rpb", "r1 = min(n, r0 + rpb)"]
    if agg == FULL_AGG:
        for r, (_, op) in enumerate(roots):
            block += _acc_init(op, r)
    for pos, (mode, main_expr, kind) in enumerate(modes):
        body = [("if" if pos == 0 else "elif") + f" mode == {mode}:"]
        loop = ["for i in range(r0, r1):"]
        pre = _row_prelude(c)
        if agg == ROW_AGG:
            pre += _acc_init(roots[0][1], 0)
        if kind == "all":
            pre += [f"cm = p{ms}[i]", f"em = p{ms}[i + 1]"]
        inner_head = ([f"for k in range(p{ms}[i], p{ms}[i + 1]):", f"    j = i{ms}[k]"] if kind == "nnz"
                      else ["for j in range(m):"])
        inner: list[str] = []
        if kind == "all":
            inner.append(f"cm = csr_seek(i{ms}, cm, em, j)")
        inner += cell_reads(c, "i", "j", main_expr)
        for r, (root, op) in enumerate(roots):
            v = c.var(root)
            if agg == NO_AGG:
                inner.append(f"outd[k] = {v}" if kind == "nnz" else f"out[i, j] = {v}")
            elif agg in (FULL_AGG, ROW_AGG):
                inner += _acc_add(op, r, v)
            else:  # COL_AGG
                if op in ("sum", "sumsq"):
                    x = f"{v} * {v}" if op == "sumsq" else v
                    inner.append(f"parts[b, j, 0], parts[b, j, 1] = kadd(parts[b, j, 0], parts[b, j, 1], {x})")
                else:
                    inner.append(f"parts[b, j, 0] = s_{op}(parts[b, j, 0], {v})")
        post: list[str] = []
        if agg == ROW_AGG:
            op = roots[0][1]
            if op in ("sum", "sumsq"):
                post.append("out[i] = kfin(s0, k0)")
            else:
                if kind == "nnz":
                    post.append(f"if p{ms}[i + 1] - p{ms}[i] < m:")
                    post.append(f"    s0 = s_{op}(s0, 0.0)")
                post.append("out[i] = s0")
        loop += indent(pre + inner_head + indent(inner, 1) + post, 1)
        block += body + indent(loop, 1)
    if agg == FULL_AGG:
        for r, (_, op) in enumerate(roots):
            block.append(f"parts[b, {r}, 0] = s{r}")
            if op in ("sum", "sumsq"):
                block.append(f"parts[b, {r}, 1] = k{r}")
    lines = [JIT, f"def kernel({', '.join(args)}):"]
    lines += indent(_top(c), 1)
    lines += indent(["for b in range(b0, b1):"] + indent(block, 1), 1)
    return HEADER.format(hash=key) + "\n".join(lines) + "\n"
