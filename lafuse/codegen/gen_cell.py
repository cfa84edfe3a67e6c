"""Cell and MAgg templates: one scalar expression per cell of the main input, then aggregated.

The kernel has up to three loop nests over the same body, picked at run time by ``mode`` so one
compiled kernel serves every input format:

* 0 = dense main and dense CELL inputs: branch-free, row views, nodes that depend only on the row
  (ROWVEC) or on nothing (literals, scalars) hoisted out of the column loop, and full/row
  aggregates unrolled into 4 independent partial accumulators per row. Why: without fastmath
  LLVM must keep the order of a reduction, so one accumulator (let alone a Neumaier step per
  cell) is bound by the latency of an addition; 4 fixed partials, folded per row into a
  compensated per-block accumulator, reach memory bandwidth and stay thread-count independent.
  Plans that read no row or column vector and produce cells or full aggregates run one flat loop
  over the block's cells instead (:func:`flat_ok`): no per-row setup on n x 1 and n x 2 inputs.
* 1 = all cells, some matrix input in CSR (the main, or only CELL inputs: ``msp`` says which):
  every full-size node carries a "structural zero" flag so the result equals the unfused
  operators on sparse data (:func:`flag_rules`): a zero of a CSR operand annihilates ``*``/``&``
  whatever the other full-size operand holds (NaN/Inf included), as in SystemDS.
* 2 = the CSR main's stored entries only (sparse-safe plans; the caller selects it only when the
  inputs of ``cplan.finite_required`` are finite), flags for CSR CELL inputs as in mode 1.

* 3 = the intersection of the stored entries of the CSR main and all (CSR) CELL inputs, when every
  sum root is zero wherever one of them has a structural zero (:func:`isect_ok`) and the runner
  has checked all of them finite: a merge over the sorted column indices, no flags.

Rows are cut into ``nb`` blocks of ``rpb`` rows, a function of the shape only, and every
aggregate is a per-block (compensated) partial combined in block order, so results do not depend
on the thread count.

Kernel arguments: ``b0, b1`` (the block range to run), ``mode, n, m, rpb, nb, lits, sc``, then per
used input slot ``s`` (canonical order): MAIN/CELL ``a{s}, d{s}, i{s}, p{s}`` (dense array and CSR
arrays, the unused format as empty dummies) plus ``f{s}`` (CELL: 1 if CSR); ROWVEC/COLVEC ``a{s}``
(flat); SCALAR values come in ``sc[s]``. Then ``out`` (NO_AGG dense n x m, ROW_AGG n), ``outd``
(NO_AGG in mode 2: one value per stored entry) and ``parts`` (nb x R x 2 for full aggregates,
nb x 2 x m for COL_AGG: sums and compensations, or min/max in row 0).
"""

from __future__ import annotations

from lafuse.codegen.emit import HEADER, JIT, Canon, canon, indent, scalar_op
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COLVEC,
    FULL_AGG,
    MAIN,
    NO_AGG,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    ZERO_UNARY,
    CNode,
    CPlan,
)

UNROLL = 4
# binary operators with f(0, 0) == 0: two sparse operands give a sparse result (pattern union)
F00 = ("+", "-", "min", "max", "!=", "<", ">", "|", "xor")
# unary operators the unfused kernels apply to a CSR's stored values only (f(0) == 0)
KEEP_UNARY = ZERO_UNARY | {"isNaN", "isInf"}


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


def levels(c: Canon) -> dict[int, int]:
    """0: kernel constant (literals, scalars), 1: per row (ROWVEC, seq), 2: per cell. Lower levels are
    computed once outside the loops that do not change them."""
    lv = c.memo.get("levels")
    if lv is None:
        lv = {}
        for n in c.order:
            if n.op == "input":
                lv[id(n)] = {SCALAR: 0, ROWVEC: 1}.get(n.access, 2)
            elif n.op == "literal":
                lv[id(n)] = 0
            elif n.op == "seq":  # (a value per row)
                lv[id(n)] = 1
            else:
                lv[id(n)] = max(lv[id(ch)] for ch in n.children)
        c.memo["levels"] = lv
    return lv


def full_nodes(c: Canon) -> set[int]:
    """Nodes that are full-size matrices (read a MAIN or CELL input): only they carry flags."""
    fs = c.memo.get("full")
    if fs is None:
        fs = set()
        for n in c.order:
            if (n.op == "input" and n.access in (MAIN, CELL)) or any(id(ch) in fs for ch in n.children):
                fs.add(id(n))
        c.memo["full"] = fs
    return fs


def _or(xs: list[str | None]) -> str | None:
    ys = [x for x in xs if x is not None]
    return None if not ys else ys[0] if len(ys) == 1 else "(" + " or ".join(ys) + ")"


def _and(xs: list[str | None]) -> str | None:
    if any(x is None for x in xs):
        return None
    return xs[0] if len(xs) == 1 else "(" + " and ".join(x for x in xs if x is not None) + ")"


def flag_rules(c: Canon, n: CNode, v: str, args: list[str], g: dict[int, str | None],
               sk: dict[int, str | None]) -> tuple[list[str], str | None, str | None]:
    """(lines, flag, sparse) of an operator node over CSR data, emulating the unfused kernels.

    ``sparse`` says the unfused result of the node is CSR at this cell; its zeros are then
    structural (``eliminate_zeros``), so ``flag = sparse and value == 0``, and a flagged value is
    +0.0 (a structural zero, never -0.0). Rules: ``*``/``&`` of two full-size operands: a CSR
    operand's structural zero annihilates a dense one (0 whatever it holds), two CSR operands
    combine over the union of their patterns (SciPy computes ``-inf * 0`` there: NaN), sparse if
    either is; other binary ops with
    f(0, 0) == 0 between two full-size operands: sparse if both are; a full-size operand with a
    vector/scalar s: sparse if it is and f(0, s) == 0 (the unfused kernels check the whole vector;
    per cell is the same except downstream of a vector holding NaN/Inf elsewhere); unary ops with
    f(0) == 0: sparse if the operand is; everything else is dense (no flag)."""
    fs = full_nodes(c)
    ch = n.children
    expr = scalar_op(n.op, args)
    fulls = [x for x in ch if id(x) in fs]
    sparse: str | None = None
    lines: list[str] = []
    if len(ch) == 2 and len(fulls) == 2:
        if n.op in ("*", "&"):
            sparse = _or([sk[id(x)] for x in ch])
            terms: list[str | None] = []
            for x, o in ((ch[0], ch[1]), (ch[1], ch[0])):
                gx, so = g[id(x)], sk[id(o)]
                terms.append(gx if gx is None or so is None else f"({gx} and not {so})")
            ann = _or(terms)
            if ann is not None:
                expr = f"0.0 if {ann} else {expr}"
        elif n.op in F00:
            sparse = _and([sk[id(x)] for x in ch])
    elif len(ch) == 2 and len(fulls) == 1:
        left = ch[0] is fulls[0]
        zargs = ["0.0", args[1]] if left else [args[0], "0.0"]
        sparse = _and([sk[id(fulls[0])], f"{scalar_op(n.op, zargs)} == 0.0"])
    elif len(ch) == 1 and fulls and n.op in KEEP_UNARY:
        sparse = sk[id(ch[0])]
    lines.append(f"{v} = {expr}")
    if sparse is None:
        return lines, None, None
    k = v[1:]
    lines += [f"y{k} = {sparse}", f"g{k} = y{k} and {v} == 0.0", f"if g{k}:", f"    {v} = 0.0"]
    return lines, f"g{k}", f"y{k}"


def _zeros_of(c: Canon) -> dict[int, frozenset[int]]:
    """Per node: the MAIN/CELL slots whose structural zero makes the node's value zero, provided all
    of them, and the literals, are finite (``*``/``&`` of full-size operands, ``*`` with a literal,
    unary ops with f(0) == 0)."""
    fs = full_nodes(c)
    z: dict[int, frozenset[int]] = {}
    for n in c.order:
        r: frozenset[int] = frozenset()
        if n.op == "input" and n.access in (MAIN, CELL):
            r = frozenset({c.slot[int(n.arg)]})  # type: ignore[call-overload]
        elif n.op in ("*", "&") and len(n.children) == 2:
            a, b = n.children
            if id(a) in fs and id(b) in fs:
                r = z[id(a)] | z[id(b)]
            elif n.op == "*" and id(a) in fs and b.op == "literal":
                r = z[id(a)]
            elif n.op == "*" and id(b) in fs and a.op == "literal":
                r = z[id(b)]
        elif len(n.children) == 1 and n.op in ZERO_UNARY:
            r = z[id(n.children[0])]
        z[id(n)] = r
    return z


def isect_ok(c: Canon) -> bool:
    """Mode 3 applies: a sparse-safe plan with CELL inputs whose roots are all sums (or sums of
    squares) that vanish wherever the main or any CELL input has a structural zero."""
    ok = c.memo.get("isect")
    if ok is None:
        plan = c.plan
        cells = {s for s, a in c.access.items() if a in (MAIN, CELL)}
        ops = list(plan.agg_ops) if plan.template == "magg" else [plan.agg_op]
        roots = plan.roots if plan.template == "magg" else (plan.root,)
        ok = (plan.sparse_safe and len(cells) > 1 and all(o in ("sum", "sumsq") for o in ops)
              and plan.agg in (FULL_AGG, ROW_AGG, COL_AGG, NO_AGG))
        if ok:
            z = _zeros_of(c)
            ok = all(cells <= z[id(r)] for r in roots)
        c.memo["isect"] = ok
    return bool(ok)


class _Body:
    """Per-cell code of one loop nest. ``kind``: "dense" (mode 0), "flag" (mode 1), "nnz" (mode 2)."""

    def __init__(self, c: Canon, ms: int, kind: str) -> None:
        self.c, self.ms, self.kind = c, ms, kind
        self.lv = levels(c)

    def name(self, n: CNode, sfx: str) -> str:
        return self.c.var(n) + (sfx if self.lv[id(n)] == 2 else "")

    def row_prelude(self) -> list[str]:
        c, lines = self.c, []
        ms = self.ms
        if self.kind == "flag":
            lines += [f"cm = p{ms}[i] if msp else 0", f"em = p{ms}[i + 1] if msp else 0"]
        for n in c.order:
            if self.lv[id(n)] != 1:
                continue
            if n.op == "input":
                lines.append(f"{c.var(n)} = a{c.slot[int(n.arg)]}[i]")  # type: ignore[call-overload]
            else:
                lines.append(f"{c.var(n)} = {scalar_op(n.op, [c.var(x) for x in n.children])}")
        for s, acc in sorted(c.access.items()):
            if self.kind == "isect":
                continue
            if acc == CELL and self.kind != "dense":
                lines += [f"c{s} = p{s}[i] if f{s} else 0", f"e{s} = p{s}[i + 1] if f{s} else 0"]
        return lines

    def cell(self, j: str, sfx: str = "") -> list[str]:
        c, lines = self.c, []
        g: dict[int, str | None] = {}
        sk: dict[int, str | None] = {}
        flags = self.kind not in ("dense", "flat", "isect")
        for n in c.order:
            if self.lv[id(n)] != 2:
                g[id(n)] = sk[id(n)] = None
                continue
            v = self.name(n, sfx)
            g[id(n)] = sk[id(n)] = None
            if n.op == "input":
                s = c.slot[int(n.arg)]  # type: ignore[call-overload]
                if n.access == COLVEC:
                    lines.append(f"{v} = a{s}[{j}]")
                elif self.kind == "dense":  # 2-D indexing: a row view per row and input costs more
                    lines.append(f"{v} = a{s}[i, {j}]")  # than the cells of a narrow row (n x 1)
                elif self.kind == "flat":  # j is the cell's position in the row-major order
                    lines.append(f"{v} = x{s}[{j}]")
                elif self.kind == "isect":
                    lines.append(f"{v} = d{s}[k]" if n.access == MAIN else f"{v} = d{s}[c{s}]")
                elif n.access == MAIN and self.kind == "nnz":
                    lines.append(f"{v} = d{s}[k]")
                    sk[id(n)] = "True"
                else:
                    cur, end, on = (("cm", "em", "msp") if n.access == MAIN else (f"c{s}", f"e{s}", f"f{s}"))
                    lines += [f"if {on}:",
                              f"    {cur} = csr_seek(i{s}, {cur}, {end}, {j})",
                              f"    h{v[1:]} = {cur} < {end} and i{s}[{cur}] == {j}",
                              f"    {v} = d{s}[{cur}] if h{v[1:]} else 0.0",
                              f"    g{v[1:]} = not h{v[1:]}",
                              "else:",
                              f"    {v} = a{s}[i, {j}]",
                              f"    g{v[1:]} = False"]
                    g[id(n)], sk[id(n)] = f"g{v[1:]}", (f"{on} != 0" if n.access == CELL else on)
                continue
            args = [self.name(x, sfx) for x in n.children]
            if not flags:
                lines.append(f"{v} = {scalar_op(n.op, args)}")
                continue
            ln, g[id(n)], sk[id(n)] = flag_rules(c, n, v, args, g, sk)
            lines += ln
        return lines


def _top(c: Canon) -> list[str]:
    """Kernel-level values: literals, scalar inputs and the operators over only those."""
    lv = levels(c)
    lines = []
    for n in c.order:
        if lv[id(n)] != 0:
            continue
        if n.op == "literal":
            lines.append(f"{c.var(n)} = {c.literal(n)}")
        elif n.op == "input":
            lines.append(f"{c.var(n)} = sc[{c.slot[int(n.arg)]}]")  # type: ignore[call-overload]
        else:
            lines.append(f"{c.var(n)} = {scalar_op(n.op, [c.var(x) for x in n.children])}")
    return lines


def _roots(plan: CPlan) -> list[tuple[CNode, str]]:
    if plan.template == "magg":
        if len(plan.agg_ops) != len(plan.roots):
            raise ValueError("a magg plan needs one aggregation op per root")
        return list(zip(plan.roots, plan.agg_ops))
    return [(plan.root, plan.agg_op)]


FLUSH_CELLS = 1024  # cells summed plainly (over UNROLL partials) between Neumaier folds of a full aggregate


def _init(op: str) -> str:
    return "0.0" if op in ("sum", "sumsq") else ("np.inf" if op == "min" else "-np.inf")


def _add(op: str, acc: str, v: str) -> str:
    if op == "sum":
        return f"{acc} += {v}"
    if op == "sumsq":
        return f"{acc} += {v} * {v}"
    return f"{acc} = s_{op}({acc}, {v})"


def flat_ok(c: Canon, agg: str) -> bool:
    """Mode 0 runs one loop over the block's cells in row-major order: a full aggregate or a cell-wise
    result over inputs read cell by cell (no row or column vector, which would need the cell's row or
    column; nor a seq, which needs the row). Why: the row loop pays its setup per row, and on tall
    narrow inputs (n x 1 and n x 2 vectors of l2svm and multiLogReg) that cost more than the cells;
    measured sum(x*y*(z+i)) over 1e6 x 1: 1.6 ms row by row, 0.6 ms flat (2 threads)."""
    return agg in (NO_AGG, FULL_AGG) and all(
        a in (MAIN, CELL, SCALAR) for a in c.access.values()) and not any(n.op == "seq" for n in c.order)


def _flat_nest(c: Canon, ms: int, agg: str, roots: list[tuple[CNode, str]]) -> list[str]:
    """Mode 0 of a :func:`flat_ok` plan: cells t in [r0 * m, r1 * m) of the flat arrays ``x{s}``,
    ``UNROLL`` partials per root folded into the block's compensated sum every FLUSH_CELLS cells."""
    body = _Body(c, ms, "flat")
    if agg == NO_AGG:
        return ["for t in range(r0 * m, r1 * m):"] + indent(
            [*body.cell("t"), f"xo[t] = {body.name(roots[0][0], '')}"], 1)
    U = UNROLL
    qinit = [f"q{r}_{u} = {_init(op)}" for r, (_, op) in enumerate(roots) for u in range(U)]
    inner: list[str] = []
    for u in range(U):
        inner += [f"t_{u} = t0 + {u}", *body.cell(f"t_{u}", f"_{u}")]
        inner += [_add(op, f"q{r}_{u}", body.name(root, f"_{u}")) for r, (root, op) in enumerate(roots)]
    tail = [*body.cell("t", "_0")] + [_add(op, f"q{r}_0", body.name(root, "_0")) for r, (root, op) in enumerate(roots)]
    post: list[str] = []
    for r, (_, op) in enumerate(roots):
        qs = [f"q{r}_{u}" for u in range(U)]
        if op in ("sum", "sumsq"):
            post += [f"s{r}, k{r} = kadd(s{r}, k{r}, {q})" for q in qs]
        else:
            fold = qs[0]
            for q in qs[1:]:
                fold = f"s_{op}({fold}, {q})"
            post.append(f"s{r} = s_{op}(s{r}, {fold})")
    return ["ta = r0 * m", "te = r1 * m", "while ta < te:"] + indent(
        [f"tb = imin(te, ta + {FLUSH_CELLS})", f"tu = tb - (tb - ta) % {U}", *qinit,
         f"for t0 in range(ta, tu, {U}):", *indent(inner, 1), "for t in range(tu, tb):", *indent(tail, 1),
         *post, "ta = tb"], 1)


def _nest(c: Canon, ms: int, kind: str, agg: str, roots: list[tuple[CNode, str]]) -> list[str]:
    """The row loop of one mode. Full and row aggregates keep partials q{r}_{u} (``UNROLL``
    of them in the dense nest), folded by Neumaier steps into the row's output per row, or into the
    block's (s, k) every FLUSH_CELLS cells; min/max fold directly."""
    body = _Body(c, ms, kind)
    pre = body.row_prelude()
    red = agg in (FULL_AGG, ROW_AGG)
    U = UNROLL if kind == "dense" and red else 1
    qinit = [f"q{r}_{u} = {_init(op)}" for r, (_, op) in enumerate(roots) for u in range(U)] if red else []
    if agg == ROW_AGG:
        pre += qinit
    if agg == NO_AGG and kind not in ("nnz", "isect"):
        pre.append("orow = out[i]")

    def consume(sfx: str, j: str, u: int) -> list[str]:
        lines = []
        for r, (root, op) in enumerate(roots):
            v = body.name(root, sfx)
            if agg == NO_AGG:
                lines.append("outd[k] = " + v if kind in ("nnz", "isect") else f"orow[{j}] = {v}")
            elif red:
                lines.append(_add(op, f"q{r}_{u}", v))
            elif op in ("sum", "sumsq"):
                x = f"{v} * {v}" if op == "sumsq" else v
                lines.append(f"cs[{j}], ck[{j}] = kadd(cs[{j}], ck[{j}], {x})")
            else:
                lines.append(f"cs[{j}] = s_{op}(cs[{j}], {v})")
        return lines

    if kind == "isect":
        cs_ = sorted(s for s, a in c.access.items() if a == CELL)
        loop = [f"k = p{ms}[i]", f"ek = p{ms}[i + 1]"]
        for s in cs_:
            loop += [f"c{s} = p{s}[i]", f"e{s} = p{s}[i + 1]"]
        cond = " and ".join(["k < ek"] + [f"c{s} < e{s}" for s in cs_])
        eq = " and ".join(f"j == j{s}" for s in cs_)
        hi = "j"
        for s in cs_:
            hi = f"imax({hi}, j{s})"
        step = ["hi = " + hi, "if j < hi:", "    k += 1"]
        for s in cs_:
            step += [f"if j{s} < hi:", f"    c{s} += 1"]
        loop += [f"while {cond}:"] + indent(
            [f"j = i{ms}[k]", *[f"j{s} = i{s}[c{s}]" for s in cs_], f"if {eq}:"]
            + indent([*body.cell("j"), *consume("", "j", 0), "k += 1", *[f"c{s} += 1" for s in cs_]], 1)
            + ["else:"] + indent(step, 1), 1)
    elif kind == "nnz":
        loop = [f"for k in range(p{ms}[i], p{ms}[i + 1]):"] + indent([f"j = i{ms}[k]", *body.cell("j"),
                                                                       *consume("", "j", 0)], 1)
    elif U > 1:
        inner: list[str] = []
        for u in range(U):
            inner += [f"j_{u} = j0 + {u}", *body.cell(f"j_{u}", f"_{u}"), *consume(f"_{u}", f"j_{u}", u)]
        loop = ["mu = m - m % " + str(U), f"for j0 in range(0, mu, {U}):"] + indent(inner, 1)
        loop += ["for j in range(mu, m):"] + indent([*body.cell("j", "_0"), *consume("_0", "j", 0)], 1)
    else:
        loop = ["for j in range(m):"] + indent([*body.cell("j"), *consume("", "j", 0)], 1)
    post: list[str] = []
    for r, (_, op) in enumerate(roots):
        if not red:
            break
        qs = [f"q{r}_{u}" for u in range(U)]
        if agg == ROW_AGG and op in ("min", "max") and kind == "nnz":
            post += [f"if p{ms}[i + 1] - p{ms}[i] < m:", f"    q{r}_0 = s_{op}(q{r}_0, 0.0)"]
        if op in ("sum", "sumsq"):
            if agg == FULL_AGG:
                post += [f"s{r}, k{r} = kadd(s{r}, k{r}, {q})" for q in qs]
            else:
                post += ["t0 = 0.0", "t1 = 0.0"] + [f"t0, t1 = kadd(t0, t1, {q})" for q in qs]
                post.append("out[i] = kfin(t0, t1)")
        else:
            fold = qs[0]
            for q in qs[1:]:
                fold = f"s_{op}({fold}, {q})"
            post.append(f"s{r} = s_{op}(s{r}, {fold})" if agg == FULL_AGG else f"out[i] = {fold}")
    if agg != FULL_AGG:
        return ["for i in range(r0, r1):"] + indent(pre + loop + post, 1)
    # full aggregates keep their partials across rows and fold them every FLUSH_CELLS cells: a fold per
    # row cost more than the row itself on tall narrow inputs (l2svm's line search over n x 1 vectors)
    flush = [f"if cnt >= {FLUSH_CELLS}:"] + indent(post + qinit + ["cnt = 0"], 1)
    return qinit + ["cnt = 0", "for i in range(r0, r1):"] + indent(pre + loop + ["cnt += m"] + flush, 1) + post


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
    for n in c.order:
        if n.op == "input" and n.access not in (MAIN, CELL, ROWVEC, COLVEC, SCALAR):
            raise ValueError(f"input access {n.access!r} is not valid in a {plan.template} plan")
    args = ["b0", "b1", "mode", "n", "m", "rpb", "nb", "lits", "sc", *slot_args(c), "out", "outd", "parts"]
    kinds = [(0, "dense"), (1, "flag")] + ([(2, "nnz")] if plan.sparse_safe else [])
    if isect_ok(c):
        kinds.append((3, "isect"))
    block: list[str] = ["r0 = b * rpb", "r1 = imin(n, r0 + rpb)"]
    if agg == FULL_AGG:
        for r, (_, op) in enumerate(roots):
            block += [f"s{r} = {_init(op)}", f"k{r} = 0.0"]
    if agg == COL_AGG:
        block += ["cs = parts[b, 0]", "ck = parts[b, 1]"]
    flat = flat_ok(c, agg)
    for pos, (mode, kind) in enumerate(kinds):
        block += [("if" if pos == 0 else "elif") + f" mode == {mode}:"]
        nest = _flat_nest(c, ms, agg, roots) if flat and kind == "dense" else _nest(c, ms, kind, agg, roots)
        block += indent(nest, 1)
    if agg == FULL_AGG:
        for r, _ in enumerate(roots):
            block += [f"parts[b, {r}, 0] = s{r}", f"parts[b, {r}, 1] = k{r}"]
    lines = [JIT, f"def kernel({', '.join(args)}):"]
    top = _top(c) + [f"msp = mode == 1 and p{ms}.shape[0] > 0"]
    if flat:  # flat views of the dense arrays (C-contiguous: runner.kernel_array), empty in modes 1-3
        top += [f"x{s} = flat(a{s})" for s in sorted(c.access) if c.access[s] in (MAIN, CELL)]
        top += ["xo = flat(out)"] if agg == NO_AGG else []
    lines += indent(top, 1)
    lines += indent(["for b in range(b0, b1):"] + indent(block, 1), 1)
    return HEADER.format(hash=key) + "\n".join(lines) + "\n"
