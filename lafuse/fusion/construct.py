"""From selected memo entries to fused operators: expansion, CPlan construction, DAG rewriting.

A plan assignment is a set of *cuts*: data dependencies ``(consumer id, input id)`` that must read
a materialized intermediate. Given the cuts, :func:`build_plan` walks the DAG from its roots
(consumers before inputs), opens a fused operator at every needed HOP that has a valid memo entry,
follows references to collect the HOPs it covers, and builds its CPlan. Whatever a fused operator
reads from outside becomes needed in turn; HOPs covered by one operator but needed elsewhere are
computed again there (the redundancy fuse-all accepts and fuse-no-redundancy avoids).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lafuse.fusion.memo import MemoEntry, MemoTable
from lafuse.fusion.templates import (
    agg_of,
    column_range,
    fused_input,
    is_cbind,
    is_cellwise,
    is_dot,
    is_matmult,
    is_transpose,
    outer_like,
    replace_slots,
    row_cumsum_of,
    solo,
)
from lafuse.hops import cplan as C
from lafuse.hops import sizes
from lafuse.hops.hop import MATRIX, SCALAR, Hop

Cuts = frozenset[tuple[int, int]]
# template preference when several entries are valid at a root: sparsity-exploiting, then cell-wise
# (its row/column aggregates are cheaper than row-vector code), then row-wise
PREFERENCE = {"outer": 0, "cell": 1, "row": 2}
OPCODES = {"cell": "spoofCell", "row": "spoofRA", "magg": "spoofMA", "outer": "spoofOP"}

@dataclass
class FusedOp:
    template: str
    root: Hop
    entries: dict[int, MemoEntry]  # covered HOP id -> the entry it is fused with
    plan: C.CPlan | None = None
    inputs: list[Hop] = field(default_factory=list)  # materialized inputs, CPlan positions
    roots: list[Hop] = field(default_factory=list)  # magg: the aggregates it computes
    transpose_out: bool = False  # the root is the transpose of the operator's result (t(F) %*% W)

    @property
    def opcode(self) -> str:
        return OPCODES[self.template]


@dataclass
class FusionPlan:
    fused: list[FusedOp]
    basic: list[Hop]  # HOPs computed by their own instruction


def valid_entries(memo: MemoTable, h: Hop, templates: tuple[str, ...], cuts: Cuts,
                  open_only: bool = False) -> list[MemoEntry]:
    key = (h.id, templates, open_only)
    ranked = memo.ranked.get(key)
    if ranked is None:  # the order does not depend on the cuts: sort once per group
        ranked = memo.ranked[key] = sorted(
            (e for e in memo.entries(h.id) if e.template in templates and not (open_only and e.closed)),
            key=lambda e: (PREFERENCE[e.template], -e.nrefs, e.refs))
    if not cuts:
        return ranked
    hid = h.id
    return [e for e in ranked if not any(r >= 0 and (hid, r) in cuts for r in e.refs)]


def expand(memo: MemoTable, root: Hop, entry: MemoEntry, cuts: Cuts,
           protect_outer: bool = False) -> dict[int, MemoEntry]:
    """The HOPs a fused operator opened at ``root`` with ``entry`` covers: referenced groups are
    fused with their best open entry of the same template (Row and Outer also absorb Cell plans); a
    reference whose group has no valid entry left under the cuts is read materialized.
    ``protect_outer`` (the heuristics) never lets another template swallow a group that can be a
    sparsity-exploiting Outer operator (paper 000 sec. 4.2: template switches)."""
    # Row absorbs Cell plans, Outer a product's cell-wise factor (templates.OuterTemplate.merge)
    allowed = (entry.template, "cell") if entry.template in ("row", "outer") else (entry.template,)
    # the result depends on the cuts only through the references of the groups the expansion can
    # reach: remembered under those (an enumeration changes one point at a time; AutoEncoder's greedy
    # search expanded ~28 operators for each of its 33 plans)
    seen = memo.expanded.get((root.id, entry, protect_outer))
    if seen is None:
        seen = memo.expanded[(root.id, entry, protect_outer)] = (_reachable_refs(memo, root.id, entry, allowed), {})
    reach: frozenset[tuple[int, int]] = seen[0]
    results: dict[frozenset[tuple[int, int]], dict[int, MemoEntry]] = seen[1]
    key = cuts & reach if cuts else frozenset()
    hit = results.get(key)
    if hit is not None:
        return dict(hit)
    chosen: dict[int, MemoEntry] = {root.id: entry}
    stack = [root]
    while stack:
        h = stack.pop()
        e = chosen[h.id]
        refs = list(e.refs)
        for k, r in enumerate(refs):
            if r < 0 or r in chosen:
                continue
            g = memo.hops[r]
            cands = sorted(valid_entries(memo, g, allowed, cuts, open_only=True),
                           key=lambda c: (c.template != entry.template, -c.nrefs))
            if protect_outer and entry.template != "outer" and "outer" in memo.templates_of(r):
                cands = []
            if not cands:
                refs[k] = -1
                continue
            chosen[r] = cands[0]
            stack.append(g)
        if refs != list(e.refs):
            chosen[h.id] = MemoEntry(e.template, tuple(refs), e.closed)
    if len(results) < 256:
        results[key] = dict(chosen)
    return chosen


def _reachable_refs(memo: MemoTable, root: int, entry: MemoEntry,
                    allowed: tuple[str, ...]) -> frozenset[tuple[int, int]]:
    """Every (group, reference) pair whose cut ``expand`` may consult from ``root``: the references of
    the open entries of the allowed templates of every group it can reach."""
    out: set[tuple[int, int]] = set()
    seen = {root}
    stack = [r for r in entry.refs if r >= 0]
    while stack:
        g = stack.pop()
        if g in seen:
            continue
        seen.add(g)
        for e in memo.entries(g):
            if e.template in allowed and not e.closed:
                for r in e.refs:
                    if r >= 0:
                        out.add((g, r))
                        stack.append(r)
    return frozenset(out)


def build_plan(memo: MemoTable, roots: list[Hop], order: list[Hop], cuts: Cuts,
               protect_outer: bool = False, cache: dict | None = None,
               part: set[int] | None = None, single: bool = False) -> FusionPlan:
    """``order``: the DAG's HOPs in topological order; ``cache`` memoizes CPlan construction per
    fused operator across the many assignments an enumeration evaluates. ``part``: only the operators
    of this partition (the plan's fused operators rooted in it and its basic HOPs, the same as in the
    whole plan): the cost-based enumeration prices one partition per assignment, and built all of them
    for each (with expand's memo: the optimizer's calls of an AutoEncoder 1e5 x 100 run, replayed,
    98 -> 75 ms; multiLogReg 39 -> 32 ms). ``single``: an operator no other joins is fused alone where
    its template's plan of it is worth having (``templates.solo``; the heuristic policies)."""
    need = {r.id for r in roots}
    bridges: dict[int, int] = {}
    if part is not None:
        need, bridges = _part_needs(memo, part, need)
    fused: list[FusedOp] = []
    basic: list[Hop] = []
    for h in reversed(order):
        if h.id not in need:
            continue
        if part is not None and h.id not in part:
            if h.id in bridges:  # read materialized by an operator of the partition: so is its input
                need.add(bridges[h.id])
            continue
        # the valid entry whose fused operator covers the most operators (ties: PREFERENCE)
        op = None
        for e in valid_entries(memo, h, ("outer", "row", "cell"), cuts):
            alone = single and solo(e.template, h)
            if e.nrefs == 0 and not alone:
                continue
            cand = FusedOp(e.template, h, expand(memo, h, e, cuts, protect_outer))
            if (len(cand.entries) >= 2 or alone) and (op is None or len(cand.entries) > len(op.entries)) \
                    and _make_cached(cand, cache):
                op = cand
        if op is not None:
            fused.append(op)
            need.update(i.id for i in op.inputs)
        else:
            basic.append(h)
            need.update(i.id for i in h.inputs)
    return FusionPlan(fused, basic)


def _part_needs(memo: MemoTable, part: set[int], roots: set[int]) -> tuple[set[int], dict[int, int]]:
    """The HOPs of ``part`` its operators are needed for whatever the partition's own cuts, and the
    transposes outside it that only it consumes (their id -> their input's, in the partition).
    Why this holds: every HOP of a DAG is computed by its own instruction or inside a fused
    operator, and either way reads its inputs materialized unless a fusion reference covers them;
    references stay inside one partition, so a consumer outside it reads its input, except a
    transpose that Row and Outer look through (``templates.fused_input``: t(P) %*% X covers P):
    whether such a transpose is read, when only the partition consumes it, depends on its cuts."""
    bridges = {}
    for h in part:
        for c in memo.consumers.get(h, []):
            if c.id not in part and is_transpose(c) and all(u.id in part for u in memo.consumers.get(c.id, [])):
                bridges[c.id] = h
    need = {h for h in part if h in roots or not memo.consumers.get(h)
            or any(c.id not in part and c.id not in bridges for c in memo.consumers.get(h, []))}
    return need, bridges


# ----------------------------------------------------------------------------------- CPlans

class _Unsupported(Exception):
    pass


def _make_cached(op: FusedOp, cache: dict | None) -> bool:
    if cache is None:
        return make_cplan(op)
    key = (op.template, op.root.id, tuple(sorted(op.entries.items(), key=lambda kv: kv[0])))
    hit = cache.get(key)
    if hit is None:
        ok = make_cplan(op)
        hit = cache[key] = (ok, op.plan, op.inputs, op.transpose_out)
    ok, op.plan, op.inputs, op.transpose_out = hit
    return ok


def make_cplan(op: FusedOp) -> bool:
    """Build ``op.plan`` and ``op.inputs``; False if the covered HOPs do not form a valid operator
    of the template (no main input, no sparsity-exploiting driver for Outer, ...)."""
    try:
        if op.template == "cell":
            _cell_cplan(op)
        elif op.template == "row":
            _row_cplan(op)
        else:
            _outer_cplan(op)
    except _Unsupported:
        op.plan = None
        return False
    return True


def seq_leaf(h: Hop) -> tuple[float, float] | None:
    """(from, incr) of ``seq(from, to[, incr])`` with integer from, to and incr known at compile time
    (whose values the kernel's from + i * incr computes exactly, as the unfused cumulative sum), else
    None. The increment defaults as the unfused seq's: -1 where from > to."""
    if h.op != "seq" or h.kind != "datagen" or not h.dims_known:
        return None

    def exact(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() \
            and abs(v) < 2.0 ** 52

    fv, tv, iv = (sizes.scalar_value(sizes.slot_arg(h, k)) for k in ("from", "to", "incr"))
    if not (exact(fv) and exact(tv) and (exact(iv) or iv is None and sizes.slot_arg(h, "incr") is None)):
        return None
    if iv is None or (iv == 1 and fv > tv):
        iv = 1 if fv <= tv else -1
    return (float(fv), float(iv)) if iv != 0 else None


class _Builder:
    """Shared CNode construction: covered HOPs become operators, materialized inputs become input
    nodes whose access the template decides by shape (``access(hop)``)."""

    def __init__(self, op: FusedOp, access: Any):
        self.op = op
        self.b = C.CPlanBuilder()
        self.access = access
        self.pos: dict[int, int] = {}
        self.inputs: list[Hop] = []
        # a HOP read with a second access has a slot of its own: one slot, one access (codegen's
        # canonical form), e.g. U as both factors of the outer template's U %*% t(U)
        self.other: dict[tuple[int, str], int] = {}
        self.first: dict[int, str] = {}  # slot -> the access it was made for

    def reset(self) -> None:
        """Start a new plan: no inputs, a fresh CNode builder."""
        self.pos.clear()
        self.inputs.clear()
        self.other.clear()
        self.first.clear()
        self.b = C.CPlanBuilder()

    def input(self, h: Hop, access: str | None = None) -> C.CNode:
        if h.is_literal:
            v = h.value
            if isinstance(v, bool) or isinstance(v, (int, float)):
                return self.b.literal(float(v))
            raise _Unsupported
        if h.dt == SCALAR and h.vt == "string":
            raise _Unsupported
        acc = access or self.access(h)
        if acc == C.ROWVEC and self.op.template in ("cell", "row"):
            s = seq_leaf(h)
            if s is not None:  # generated in the kernel, not read (SystemDS's merge of a literal seq)
                return self.b.op(C.SEQ, self.b.literal(s[0]), self.b.literal(s[1]))
        if h.id not in self.pos:
            self.pos[h.id] = len(self.inputs)
            self.inputs.append(h)
        at = self.pos[h.id]
        if self.first.setdefault(at, acc) != acc:
            if (h.id, acc) not in self.other:
                self.other[h.id, acc] = len(self.inputs)
                self.inputs.append(h)
            at = self.other[h.id, acc]
        return self.b.input(at, acc)

    def cell_op(self, h: Hop, children: list[C.CNode]) -> C.CNode:
        if h.kind == "unary":
            return self.b.op(h.op, children[0])
        if h.kind == "binary":
            return self.b.op(h.op, children[0], children[1])
        if h.kind == "nary":  # min(X, Y, Z) = min(min(X, Y), Z), as kernels_agg folds it unfused
            out = children[0]
            for c in children[1:]:
                out = self.b.op(h.op, out, c)
            return out
        if h.op == "ifelse":
            return self.b.op("ifelse", *children)
        if h.op == "replace":  # replace(t, p, r) = ifelse(t == p, r, t), NaN matching NaN
            sl = replace_slots(h)
            assert sl is not None  # (templates.is_cellwise)
            t, p, r = (children[k] for k in sl)
            pat = h.inputs[sl[1]]
            b = self.b
            if pat.is_literal:
                hit = b.op("isNaN", t) if float(pat.value) != float(pat.value) else b.op("==", t, p)
            else:
                hit = b.op("|", b.op("==", t, p), b.op("&", b.op("isNaN", t), b.op("isNaN", p)))
            return b.op("ifelse", hit, r, t)
        raise _Unsupported


def covered_set(op: FusedOp) -> dict[int, Hop]:
    """The HOPs an operator computes, found by following its entries' references from its root(s)."""
    hops: dict[int, Hop] = {}
    stack = list(op.roots) if op.roots else [op.root]
    while stack:
        h = stack.pop()
        if h.id in hops:
            continue
        hops[h.id] = h
        e = op.entries[h.id]
        for k, r in enumerate(e.refs):
            if r >= 0:
                stack.append(fused_input(h, k))
    return hops


def _main_first(bld: _Builder, main: Hop) -> None:
    """Make ``main`` input position 0 (the reference interpreter's convention)."""
    if main.id not in bld.pos:
        bld.pos[main.id] = len(bld.inputs)
        bld.inputs.append(main)


def _cell_access(n: int, m: int) -> Any:
    """How a materialized input is read per cell (i, j) of an n x m iteration space."""

    def access(h: Hop) -> str:
        if h.dt != MATRIX:
            return C.SCALAR
        if h.rows == n and h.cols == m:
            return C.CELL
        if h.rows == 1 and h.cols == 1:
            return C.SCALAR
        if h.rows == n and h.cols == 1:
            return C.ROWVEC
        if h.rows == 1 and h.cols == m:
            return C.COLVEC
        raise _Unsupported

    return access


def _cell_cplan(op: FusedOp) -> None:
    hops = covered_set(op)
    root = op.root
    agg = agg_of(root)
    operands = []  # a dot product's x and y of t(x) %*% y: sum(x * y)
    if is_dot(root):
        agg, operands = (C.FULL_AGG, "sum"), [root.inputs[0].inputs[0], root.inputs[1]]
    expr_root = operands[0] if operands else root.inputs[0] if agg is not None else root
    if not expr_root.dims_known:
        raise _Unsupported
    n, m = expr_root.rows, expr_root.cols

    access = _cell_access(n, m)
    bld = _Builder(op, access)
    full = [h for h in _mat_inputs(op, hops) if h.dims_known and h.rows == n and h.cols == m]
    if not full:
        raise _Unsupported
    # the main input: one that makes the expression sparse-safe, the sparsest such; else the first
    memo_nodes: dict[int, C.CNode] = {}

    def node(h: Hop, main: Hop) -> C.CNode:
        if h.id in memo_nodes:
            return memo_nodes[h.id]
        if h.id in hops and not (h is root and agg is not None):
            e = op.entries[h.id]
            ch = [node(h.inputs[k], main) if r >= 0 else
                  bld.input(h.inputs[k], C.MAIN if h.inputs[k] is main else None) for k, r in enumerate(e.refs)]
            out = bld.cell_op(h, ch)
        else:
            out = bld.input(h, C.MAIN if h is main else None)
        memo_nodes[h.id] = out
        return out

    best = None
    for cand in sorted(full, key=lambda h: h.nnz if h.nnz >= 0 else n * m):
        memo_nodes.clear()
        bld.reset()
        _main_first(bld, cand)
        if operands:
            refs = op.entries[root.id].refs
            x, y = (node(o, cand) if refs[k] >= 0 else bld.input(o, C.MAIN if o is cand else None)
                    for k, o in enumerate(operands))
            expr = bld.b.op("*", x, y)
        elif agg is not None:
            r = op.entries[root.id].refs[0]
            expr = node(expr_root, cand) if r >= 0 else bld.input(expr_root, C.MAIN)
        else:
            expr = node(root, cand)
        safe = C.zero_safe(expr, outer=False)
        if best is None or safe:
            best = (expr, list(bld.inputs), safe)
        if safe:
            break
    assert best is not None
    expr, inputs, safe = best
    ag, agg_op = agg if agg is not None else (C.NO_AGG, "sum")
    op.plan = C.CPlan("cell", expr, ag, agg_op, sparse_safe=safe, ninputs=len(inputs))
    op.inputs = inputs


def _mat_inputs(op: FusedOp, hops: dict[int, Hop]) -> list[Hop]:
    out: list[Hop] = []
    for h in hops.values():
        e = op.entries[h.id]
        for k, r in enumerate(e.refs):
            i = fused_input(h, k)
            if r < 0 and i.dt == MATRIX and i not in out:
                out.append(i)
    return out


def _row_cplan(op: FusedOp) -> None:
    hops = covered_set(op)
    root = op.root
    nrows = (root.inputs[0].inputs[0].rows if is_matmult(root) and is_transpose(root.inputs[0])
             else root.inputs[0].rows if root.kind == "agg_unary" and root.op in ("colSums", "sum") else root.rows)
    mats = [h for h in _mat_inputs(op, hops) if h.dims_known and h.rows == nrows]
    # vecmat's right operands are read whole, never as rows
    sides = {fused_input(h, 1).id for h in hops.values() if is_matmult(h) and not is_transpose(h.inputs[0])}
    cands = [h for h in mats if h.id not in sides]
    if not cands or nrows <= 1:
        raise _Unsupported
    main = max(cands, key=lambda h: (h.cols, -cands.index(h)))

    def access(h: Hop) -> str:
        if h.dt != MATRIX:
            return C.SCALAR
        if h.rows == 1 and h.cols == 1:
            return C.SCALAR
        if h.rows == nrows:
            return C.ROWVEC if h.cols == 1 else C.CELL
        if h.rows == 1:
            return C.COLVEC
        raise _Unsupported

    bld = _Builder(op, access)
    _main_first(bld, main)
    memo_nodes: dict[int, C.CNode] = {}

    def leaf(h: Hop) -> C.CNode:
        if h is main:
            return bld.input(h, C.MAIN)
        return bld.input(h)

    def node(h: Hop) -> C.CNode:
        if h.id in memo_nodes:
            return memo_nodes[h.id]
        if h.id not in hops:
            return leaf(h)
        e = op.entries[h.id]
        ch = [node(fused_input(h, k)) if r >= 0 else None for k, r in enumerate(e.refs)]
        if is_cellwise(h):
            out = bld.cell_op(h, [c if c is not None else leaf(h.inputs[k]) for k, c in enumerate(ch)])
        elif h.kind == "agg_unary" and h.op in C.ROW_UNARY:
            out = bld.b.op(h.op, ch[0] if ch[0] is not None else leaf(h.inputs[0]))
        elif (src := row_cumsum_of(h)) is not None:
            out = bld.b.op("rowCumsum", ch[0] if ch[0] is not None else leaf(src))
        elif (cols := column_range(h)) is not None:
            x = ch[0] if ch[0] is not None else leaf(h.inputs[0])
            out = bld.b.op(C.COLRANGE, x, bld.b.literal(cols[0]), bld.b.literal(cols[1]))
        elif is_cbind(h):
            parts = [c if c is not None else leaf(h.inputs[k]) for k, c in enumerate(ch)]
            out = parts[0]
            for p in parts[1:]:
                out = bld.b.op("cbind", out, p)
        elif is_matmult(h) and not is_transpose(h.inputs[0]):
            left = ch[0] if ch[0] is not None else leaf(h.inputs[0])
            out = bld.b.op("vecmat", left, bld.input(h.inputs[1], C.MATRIX))
        else:
            raise _Unsupported
        memo_nodes[h.id] = out
        return out

    agg, root2 = C.NO_AGG, None
    if is_matmult(root) and is_transpose(root.inputs[0]):
        p, q = root.inputs[0].inputs[0], root.inputs[1]
        pn, qn = node(p), node(q)
        if p.cols == 1:
            agg, expr = C.COL_AGG, bld.b.op("*", pn, qn)
        elif q.cols == 1:
            agg, expr = C.COL_AGG_T, bld.b.op("*", pn, qn)
        elif _reads_main(qn) and not _reads_main(pn):
            # t(P) %*% X over the main X: computed as t(t(X) %*% P), so the accumulation walks the
            # main's rows (over a CSR X its stored entries only, as SciPy's product: a NaN of P never
            # meets X's zeros) and the operator's result is transposed back
            agg, expr, root2 = C.COL_AGG_B1_T, qn, pn
            op.transpose_out = True
        else:
            agg, expr, root2 = C.COL_AGG_B1_T, pn, qn
    elif root.kind == "agg_unary" and root.op in ("colSums", "sum"):
        agg, expr = (C.COL_AGG if root.op == "colSums" else C.FULL_AGG), node(root.inputs[0])
    else:
        expr = node(root)
    inputs = bld.inputs
    op.plan = C.CPlan("row", expr, agg, "sum", sparse_safe=False, ninputs=len(inputs), root2=root2)
    op.plan.narrow = all(0 <= inputs[pos].cols <= C.NARROW_ROW_COLS for pos in C.cell_read_inputs(op.plan))
    op.inputs = inputs


def _reads_main(n: C.CNode) -> bool:
    """The row plan node ``n`` reads the main input."""
    return any(x.op == "input" and x.access == C.MAIN for x in C.nodes_below([n]))


def _outer_cplan(op: FusedOp) -> None:
    hops = covered_set(op)
    root = op.root
    outers = [h for h in hops.values() if outer_like(h)]
    if len(outers) != 1:
        raise _Unsupported
    uvh = outers[0]
    n, m = uvh.rows, uvh.cols
    u_hop, b_hop = uvh.inputs
    if is_transpose(b_hop):
        v_hop = b_hop.inputs[0]
    else:  # U %*% H: the kernel reads rows of t(H), a small transpose computed beforehand
        v_hop = Hop("t", "reorg", [b_hop], MATRIX, b_hop.vt, span=b_hop.span)
        v_hop.set_dims(b_hop.cols, b_hop.rows, b_hop.nnz)
        sizes.infer(v_hop)

    access = _cell_access(n, m)
    agg, mm_hop = C.NO_AGG, None
    refs = op.entries[root.id].refs
    if root.kind == "agg_unary":
        agg, expr_root = C.FULL_AGG, root.inputs[0]
    elif is_matmult(root) and root is not uvh:
        if refs[0] >= 0 and is_transpose(root.inputs[0]):  # t(W) %*% mm
            agg, expr_root, mm_hop = C.LEFT_MM, root.inputs[0].inputs[0], root.inputs[1]
        elif refs[0] >= 0:  # W %*% mm
            agg, expr_root, mm_hop = C.RIGHT_MM, root.inputs[0], root.inputs[1]
        else:  # t(F) %*% W: the transpose of LEFT_MM with mm = F
            agg, expr_root, mm_hop = C.LEFT_MM, root.inputs[1], root.inputs[0].inputs[0]
            op.transpose_out = True
    else:
        expr_root = root
    full = [h for h in _mat_inputs(op, hops) if h.dims_known and h.rows == n and h.cols == m
            and h is not mm_hop]
    if not full:
        raise _Unsupported
    bld = _Builder(op, access)
    best = None
    for cand in sorted(full, key=lambda h: h.nnz if h.nnz >= 0 else n * m):
        bld.reset()
        _main_first(bld, cand)
        memo_nodes: dict[int, C.CNode] = {}

        def node(h: Hop, cand: Hop = cand, memo_nodes: dict[int, C.CNode] = memo_nodes) -> C.CNode:
            if h.id in memo_nodes:
                return memo_nodes[h.id]
            if h is uvh:
                out = bld.b.uv(bld.input(u_hop, C.OUTER_U), bld.input(v_hop, C.OUTER_V))
            elif h.id in hops and is_cellwise(h):
                e = op.entries[h.id]
                out = bld.cell_op(h, [node(h.inputs[k]) if r >= 0 else
                                      bld.input(h.inputs[k], C.MAIN if h.inputs[k] is cand else None)
                                      for k, r in enumerate(e.refs)])
            else:
                out = bld.input(h, C.MAIN if h is cand else None)
            memo_nodes[h.id] = out
            return out

        expr = node(expr_root)
        if C.zero_safe(expr, outer=True):
            mm = -1
            if mm_hop is not None:
                if mm_hop.id not in bld.pos:
                    bld.pos[mm_hop.id] = len(bld.inputs)
                    bld.inputs.append(mm_hop)
                mm = bld.pos[mm_hop.id]
            best = (expr, list(bld.inputs), mm)
            break
    if best is None:
        raise _Unsupported
    expr, inputs, mm = best
    op.plan = C.CPlan("outer", expr, agg, "sum", sparse_safe=True, ninputs=len(inputs), mm=mm)
    op.inputs = inputs
