"""The ``sum_product`` rewrite rule: each maximal sum-product region of a DAG, translated into a
sum-product plan, replaced by the cheapest of its equivalent plans where that is cheaper than the
region as written (paper 001 §3.3).

Cheaper is the cost model's word, and the cost is the whole DAG's *with fusion* (``Ctx.cost``, which
the compiler injects: the fusion optimizer's plan for the DAG, costed without generating code).
A rewrite that destroys a fusion opportunity loses where the fused plan of the original is cheaper:
``sum(W %*% H)`` beside ``sum(X * log(W %*% H + eps))`` keeps the shared product only when fusing
the second with it pays. Without an injected cost (a rewrite outside the compiler) the plans' own
work estimate decides. Config ``sum_product`` (on by default; env ``LAFUSE_SUM_PRODUCT=0``) or
``disabled_rules`` switches the rule off.

The rule runs at every dynamic recompilation, and a mini-batch loop body is recompiled at each new
batch size; what keeps that cheap: a region is planned only if the least work any plan of it can do
(``plans.least_join_size``) is ``MIN_WORK_GAIN`` below the work as written, and a region found
without a candidate is known by ``region_key`` (no HOP ids) to later compilations and, saved by
``lafuse run``, to later runs (``feedback.sumproduct``); a DAG whose every region is such a verdict
is one verdict (``dag_key``). AutoEncoder 5000 x 100 spent 40 of its 55 ms a run in this rule
before, 0.7 ms after (the region keys were 2.0 ms of 3.9 before the DAG's one key).
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Callable
from dataclasses import dataclass

from lafuse.feedback import sumproduct as verdicts
from lafuse.hops.hop import Hop, walk
from lafuse.hops.program import Dag
from lafuse.rewrite.core import Ctx, is_impure, rule
from lafuse.rewrite.sumproduct.ir import Region, is_sp_op, translate
from lafuse.rewrite.sumproduct.plans import Plan, alternatives, build, least_join_size, op_work, structure

MIN_GAIN = 1e-6  # relative: a plan must be cheaper by more than this (no churn between equals)
# relative: a candidate plan of a region that joins must do this much less work than the region as
# written (a region without joins: MIN_GAIN). Regrouping that saves less is inside the work
# measure's error (a transpose here, a broadcast there) and rarely pays; and the least work any plan
# can do (plans.least_join_size) then rules out most regions of a program before a plan is built --
# the rule's main cost, paid at every recompilation of a mini-batch body (AutoEncoder: 40 of its
# 55 ms a run went to building plans, none doing less work than the region as written)
MIN_WORK_GAIN = 0.05
# cells: in a DAG whose operators touch fewer, a region is decided by its work alone; costing the DAG
# with fusion (~1-5 ms, and the fusion optimizer's import on a script that would not load it) costs
# more than it can save. (Per DAG, not per region: one measure decides every region of a DAG, as
# the regions a rewrite leaves behind are planned again.)
SMALL_WORK = 1e5


@dataclass(frozen=True)
class Fired:
    """What ``--explain`` reports of one applied sum-product rewrite."""

    line: int
    col: int
    rewrites: tuple[str, ...]
    before: float  # cost of the DAG as written (s, or work units without a cost model)
    after: float
    unit: str
    written: str
    chosen: str


# the sum-product rewrites applied in this process, newest last (explain prints them; the driver
# does not keep rule-specific records)
FIRED: list[Fired] = []
# region (canonical plans, sharing, policy, density) -> the plan chosen (its translation variant and
# recipe, the costs before and after, their unit) or None: dynamic recompilation replans a loop
# body's DAG at every size change, and most of its recompilations see sizes seen before
DECIDED: dict[tuple, tuple[int, tuple, float, float, str] | None] = {}
MAX_DECIDED = 4096


def describe(h: Hop, depth: int = 6) -> str:
    """A HOP expression as DML-like text (leaves by variable name or op), for --explain."""
    if h.is_literal:
        return repr(h.value) if not isinstance(h.value, float) else f"{h.value:g}"
    if h.op == "tread" or h.kind == "data":
        return h.name or h.op
    if depth == 0 or not h.inputs:
        return h.name or h.op
    args = [describe(i, depth - 1) for i in h.inputs]
    if h.kind == "binary" and len(args) == 2:
        return f"({args[0]} {h.op} {args[1]})"
    if h.kind == "matmult":
        return f"({args[0]} %*% {args[1]})"
    if h.kind == "unary" and h.op == "u-":
        return f"-{args[0]}"
    if h.kind == "rix":
        return f"{args[0]}[{args[1]}:{args[2]}, {args[3]}:{args[4]}]"
    if h.kind == "datagen":
        return f"{h.op}(...)"
    return f"{h.op}({', '.join(args)})"


def _swap(ctx: Ctx, dag: Dag, old: Hop, new: Hop, cost: Callable[..., float]) -> float:
    """The DAG's cost with ``new`` in place of ``old`` (then put back)."""
    ctx.replace(old, new)
    try:
        return cost(dag, ctx.hints)
    finally:
        ctx.replace(new, old)


@rule("sum_product", scope="dag", phase="dynamic")
def sum_product(dag: Dag, ctx: Ctx) -> bool:
    """Sum-product regions replaced by their cheapest equivalent plan (paper 001 §3).

    ``sum(W %*% H)`` -> ``sum(colSums(W) * t(rowSums(H)))``; ``trace(X %*% Y %*% Z)`` ->
    ``sum(Y * (t(X) %*% t(Z)))``; ``trace(X %*% Y)`` -> ``sum(X * t(Y))``; ``diag(v) %*% X`` -> ``X * v``;
    ``X * (X != 0)`` -> ``X``; ``P = X %*% Y; P[1:2, ]`` -> ``X[1:2, ] %*% Y`` (P single-use).
    """
    if ctx.cfg is not None and not getattr(ctx.cfg, "sum_product", True):
        return False
    changed = False
    persist = bool(getattr(ctx.cfg, "fusion_reuse", False))
    order = walk(dag.roots)
    # a DAG whose every region is a no-candidate verdict is one verdict: one key for the DAG instead
    # of one a region (AutoEncoder's loop body: 15 regions, ~45 us a key), and later rounds of the same
    # DAG ask only whether its HOPs and edges are the ones found clean
    shape = ("clean", tuple((h.id, h.rows, h.cols, *(i.id for i in h.inputs)) for h in order))
    if shape in dag.planned:
        return False
    dkey = dag_key(order, dag.roots)
    if dkey is not None and verdicts.known(dkey, persist):
        dag.planned.add(shape)
        return False
    clean = dkey is not None  # so far, every region of this round is a no-candidate verdict
    small: bool | None = None  # the DAG touches fewer than SMALL_WORK cells (asked once needed)
    before_cost: list[float | None] = [None]  # the DAG's cost as it is (until a rewrite changes it)
    # region roots bottom-up: a shared subexpression is planned before the regions that read it
    for h in order:
        if not ctx.reachable(h) or not is_sp_op(h) or _inner(ctx, h) or _alone(h):
            continue
        # (the cheap walk first: region_key's costs ~45 us a region of AutoEncoder's loop body, and the
        # rule meets most regions again in later rounds of the same DAG)
        sig = ("sig", h.id, _signature(h))
        if sig in dag.planned:  # (the same operators and sizes as a round before)
            clean = clean and ("none", sig) in dag.planned
            continue
        dag.planned.add(sig)
        rkey = region_key(ctx, h)
        if rkey is not None and verdicts.known(rkey, persist):
            dag.planned.add(("none", sig))
            continue  # (an earlier compilation found no plan of this region worth costing)
        clean = clean and rkey is not None
        mark = Hop("mark", "mark").id  # (HOP ids grow: a plan's own HOPs are the ones above it)
        alone = translate(h, ctx, False)
        # (absorbing the shared operators too is another region only if one was left a leaf)
        shared = translate(h, ctx, True) if alone is None or alone.shared_left else None
        regions = [r for r in (alone, shared) if r is not None]
        # (a product chain alone is optimize_mmchain's: its DP takes any length)
        regions = [r for r in regions if not all(x.kind == "matmult" or (x.kind, x.op) == ("reorg", "t")
                                                 for x in r.absorbed)]
        key = tuple(canonical(r, mark) for r in regions)
        if not regions:
            if rkey is not None:
                verdicts.record(rkey)
                dag.planned.add(("none", sig))
            continue
        # the same region (its sum-product form over the same leaf HOPs) was decided before in this DAG,
        # under another root or in an earlier round, by the same measure: cost, or work where the DAG is
        # small. A rewrite can make the DAG small: the work measure then decides its regions again, so
        # that rewriting the result once more finds nothing (the rule's fixpoint)
        if small is None:
            small = sum(op_work(x) for x in walk(dag.roots) if not x.is_literal) < SMALL_WORK
        here = (key, _leaf_ids(regions), small)
        if here in dag.planned:
            clean = False  # (decided there, maybe by cost)
            continue
        dag.planned.add(here)
        # a block recompiled with the same sizes repeats its decision (the cost is the same)
        seen = (key, tuple(ctx.n_consumers(x) for x in regions[-1].absorbed),
                getattr(ctx.cfg, "codegen", None), getattr(ctx.cfg, "fusion", None), ctx.cost is None,
                _density(ctx.hints, regions))
        if seen in DECIDED:
            clean = False  # (maybe decided by cost)
            decided = DECIDED[seen]
            if decided is None:
                continue
            variant, recipe, before, after, unit = decided
            got = build(regions[variant], ctx, mark, recipe) if variant < len(regions) else None
            if got is None:
                continue
            plan = got
        else:
            plans = _candidates(ctx, h, regions, mark)
            if not plans and rkey is not None:
                verdicts.record(rkey)
                dag.planned.add(("none", sig))
            clean = clean and not plans
            best = _choose(ctx, dag, h, plans, regions, small, before_cost)
            if len(DECIDED) >= MAX_DECIDED:
                DECIDED.clear()
            DECIDED[seen] = None if best is None else (best[0], best[1].recipe, *best[2:])
            if best is None:
                continue
            _, plan, before, after, unit = best
        ctx.replace(h, plan.hop)
        before_cost[0] = None
        FIRED.append(Fired(h.span.line, h.span.col, plan.rewrites or ("regrouping",), before, after,
                           unit, describe(h), describe(plan.hop)))
        changed = True
    if clean and not changed:
        assert dkey is not None
        verdicts.record(dkey)
        dag.planned.add(shape)
    return changed


def _leaf_ids(regions: list[Region]) -> tuple[int, ...]:
    """The HOPs the regions read without absorbing them, by id."""
    inside = {x.id for r in regions for x in r.absorbed}
    return tuple(sorted({i.id for r in regions for x in r.absorbed for i in x.inputs if i.id not in inside}))


def _alone(h: Hop) -> bool:
    """A region of one operator over leaves: nothing to reorder, push down or select; unless a leaf
    is ``X != 0`` (join elimination) or a constant matrix (aggregation elimination)."""
    for x in h.inputs:
        if is_sp_op(x) or (x.kind == "binary" and x.op == "!=") or (x.kind == "datagen" and x.op == "matrix"):
            return False
    return True


def _inner(ctx: Ctx, h: Hop) -> bool:
    """``h`` is part of the region of its only consumer (not a region root)."""
    if not ctx.single_use(h):
        return False
    p = ctx.parents(h)[0]
    return is_sp_op(p) and not is_impure(p)


def _signature(h: Hop) -> tuple:
    """The sum-product operators under ``h`` (ids and sizes) and the leaves they read."""
    out: list[tuple] = []
    seen: set[int] = set()
    stack = [h]
    while stack:
        x = stack.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        out.append((x.id, x.rows, x.cols))
        if is_sp_op(x):
            stack.extend(x.inputs)
    return tuple(out)


def dag_key(order: list[Hop], roots: list[Hop]) -> str | None:
    """What every region key of a DAG reads, for the DAG at once: each HOP's operator, types, sizes,
    value and parameters, its inputs by position in ``order``, and the roots (consumers, sharing and
    purity follow from these). None: a parameter without a stable text."""
    num = {h.id: k for k, h in enumerate(order)}
    parts: list[object] = ["dag"]
    for x in order:
        parts.append((x.kind, x.op, x.dt, x.vt, x.rows, x.cols, x.value,
                      sorted(x.params.items()) if x.params else None, [num[i.id] for i in x.inputs]))
    parts.append([num[r.id] for r in roots])
    return _digest(parts)


def _digest(parts: list[object]) -> str | None:
    """A key's bytes hashed: marshal format 0 (values only, no references nor interning: the same
    bytes in every process; faster than repr here), else the text, unless a value shows by address."""
    try:
        data = marshal.dumps(parts, 0)
    except ValueError:
        text = repr(parts)
        if " at 0x" in text:
            return None
        data = text.encode()
    return hashlib.sha256(data).hexdigest()[:32]


def region_key(ctx: Ctx, h: Hop) -> str | None:
    """What translation and candidate building read of the region rooted at ``h``, without HOP ids:
    every sum-product operator it may absorb (kind, operator, types, sizes, parameters, whether it is
    shared, a root, or read by a write/print), every leaf (the same, and its inputs by position: the
    indicator ``X != 0``, a constant matrix, a literal bound), each HOP numbered by first appearance
    (a leaf read twice is one relation). None: a parameter without a stable text."""
    num: dict[int, int] = {}
    shallow: set[int] = set()  # numbered, but described without inputs (a leaf's input)
    parts: list[object] = [ctx.pure(h)]
    stack: list[tuple[Hop, bool]] = [(h, True)]
    while stack:
        x, deep = stack.pop()
        if x.id in num and not (deep and x.id in shallow):
            parts.append(num[x.id])
            continue
        if x.id in num:  # (met as a leaf's input first, now as an operand: described in full)
            shallow.discard(x.id)
            parts.append(-num[x.id] - 1)
        else:
            num[x.id] = len(num)
            if not deep:
                shallow.add(x.id)
        parts.append((x.kind, x.op, x.dt, x.vt, x.rows, x.cols, x.value,
                      sorted(x.params.items()) if x.params else None))
        if not deep:
            continue
        inner = is_sp_op(x) and not is_impure(x)
        if inner:
            ps, root, single = ctx.uses(x)
            parts.append((len(ps), single, root, any(p.kind in ("data", "builtin") or ctx.is_root(p) for p in ps)))
        parts.append(len(x.inputs))
        stack.extend((i, inner) for i in reversed(x.inputs))
    return _digest(parts)


def _leaf_key(h: Hop, mark: int) -> object:
    """A factor's HOP by id; a slice the translation made (ids above ``mark``) by its input and bounds."""
    if h.id > mark and h.kind == "rix":
        return ("rix", _leaf_key(h.inputs[0], mark), tuple(x.value for x in h.inputs[1:]))
    return h.id


def canonical(region: Region, mark: int) -> tuple:
    """The region's sum-product plan with its indices named by first appearance and their extents:
    two regions with equal keys are the same sum-product expression over the same inputs (whatever
    HOPs express it: a local rule's equivalent form of a plan this rule chose is not planned again)."""
    out = []
    for sign, t in region.plan.terms:
        fs = sorted(t.factors, key=lambda f: repr(_leaf_key(f.hop, mark)))
        names: dict[str, str] = {}
        for i in [*t.keep, *(x for f in fs for x in (f.row, f.col))]:
            if i is not None and i not in names:
                names[i] = f"{len(names)}:{region.extents[i]}"
        n: dict[str | None, str | None] = {None: None}
        n.update(names)
        out.append((sign, t.coef, tuple(n[i] for i in t.keep),
                    tuple((repr(_leaf_key(f.hop, mark)), n[f.row], n[f.col]) for f in fs)))
    return (region.root.dt, tuple(out))


def _density(hints: dict[str, float] | None, regions: list[Region]) -> tuple:
    """The density of each variable the regions read, in tenths, by the hints: part of a decision's
    key (a fused operator over a sparse X costs its non-zeros)."""
    if not hints:
        return ()
    out = set()
    for r in regions:
        for _, t in r.plan.terms:
            for f in t.factors:
                h = f.hop
                if h.op == "tread" and h.name in hints and h.dims_known and h.rows * h.cols > 0:
                    out.add((h.name, round(10 * hints[h.name] / (h.rows * h.cols))))
    return tuple(sorted(out))


def _candidates(ctx: Ctx, h: Hop, regions: list[Region], mark: int) -> list[tuple[int, Plan]]:
    """The plans worth costing, with the variant they come from. Not: a plan doing no less work than
    the region of single-use operators as written (fusion makes a plan cheaper than its work says,
    never cheaper than the written region fused the same way; a shared operator a plan absorbs is
    still computed for its other readers unless fusion removes it), nor the written region, rebuilt."""
    same = {structure(h, mark, frozenset(x.id for x in r.absorbed)) for r in regions}
    found: dict[object, tuple[int, Plan]] = {}
    written = sum(op_work(x) for x in regions[0].absorbed)
    for v, r in enumerate(regions):
        # (a region without joins -- nested aggregations, a literal factor -- is planned whatever it
        # saves: its one plan per term costs nothing to build and its work is exact)
        below = written * (1 - (MIN_WORK_GAIN if _joins(r) else MIN_GAIN))
        if least_join_size(r) >= below:
            continue  # (no plan of it can do enough less work: none is built)
        for p in alternatives(r, ctx, mark):
            k = structure(p.hop, mark)
            if p.work < below and k not in same:
                found.setdefault(k, (v, p))
    return list(found.values())


def _joins(region: Region) -> bool:
    """Some term of the region joins two relations."""
    return any(sum(1 for f in t.factors if f.indices) > 1 for _, t in region.plan.terms)


def _choose(ctx: Ctx, dag: Dag, h: Hop, plans: list[tuple[int, Plan]], regions: list[Region], small: bool,
            before_cost: list[float | None]) -> tuple[int, Plan, float, float, str] | None:
    """The cheapest plan, if cheaper than the DAG as written: (variant, plan, cost before, after, unit)."""
    if not plans:
        return None
    cost = getattr(ctx, "cost", None)
    written = sum(op_work(x) for x in regions[0].absorbed)
    if cost is None or small:
        v, best = min(plans, key=lambda p: p[1].work)
        return (v, best, written, best.work, "cells") if best.work < written * (1 - MIN_GAIN) else None
    before = before_cost[0]
    if before is None:
        before = before_cost[0] = cost(dag, ctx.hints)
    scored = [(_swap(ctx, dag, h, p.hop, cost), k) for k, (_, p) in enumerate(plans)]
    after, k = min(scored)
    v, best = plans[k]
    return (v, best, before, after, "s") if after < before * (1 - MIN_GAIN) else None
