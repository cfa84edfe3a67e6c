"""The cuboid operator of a partial plan that covers several operators (hops.mmplan, paper 004 §3-4):
GNMF's ``U * (t(V) %*% X) / (G %*% U)`` or an autoencoder layer's
``1 / (1 + exp(-(X %*% W + b)))`` as one distributed operator.

Tasks follow the main product's P x Q x R cuboids (plan.fusedstrategy chose the point; the broadcast
and replicating operators are its corners).

* A task (p, q, r) computes the L-space at A's piece (rows p, inner r) and the R-space at B's piece
  (inner r, columns q), then multiplies them. Each input's region comes from hops.mmplan.need; the
  task receives the region's blocks and pastes them itself (:func:`run_task`).
* With R > 1, the R partial products of (p, q) are added on the piece's worker (the aggregation
  step), and one more task runs the O-space on the sum. With R = 1, one task does all of it, a
  block row of the piece at a time (the product and the O-space's values are held for one block
  row, not for the piece).
* Results: an unaggregated piece comes back as its blocks, cut in the task (so it is held once);
  an aggregate's partial results are added in a fixed order (block rows, then pieces in (p, q)
  order), so a value never depends on scheduling.

Placement and the byte models are runtime.dask.fused_outer's: the tasks of one worker form a
contiguous run on the worker holding most of what they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lafuse.hops import mmplan as M
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask.fused_outer import Pieces, Task, blocks_in, cut_into, cuts, measured, place
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.dask.ops import tree
from lafuse.runtime.local import mmeval

if TYPE_CHECKING:
    from lafuse.plan.fusedstrategy import FusedChoice
    from lafuse.runtime.dask.backend import DaskBackend

Read = tuple[str, int, M.Region]  # (space, input reference, region)
Ref = tuple[str, int, "M.Region | None", "tuple[int, int] | None"]  # a task's input: (space, reference, region, grid)


def bound(be: DaskBackend, plan: M.MMPlan, choice: FusedChoice, bs: int, *args: Any) -> Any:
    """The bound instruction: the result, measured under ``--stats`` (fused_outer.measured; named
    ``cuboid`` there, ``--explain`` shows what each covers)."""
    return measured(be, "cuboid", choice, args, lambda: run(be, plan, choice, bs, args))


def reads(plan: M.MMPlan, bs: int, box: tuple[tuple[int, int], ...], stage: str) -> list[Read]:
    """The inputs' regions a task of ``stage`` at ``box`` (rows, columns, inner) takes, by space."""
    out: list[Read] = []
    if stage != "rest":
        left, right = M.cuboid_regions(plan, bs, *box)
        out += [("L", ref, reg) for ref, reg in sorted(left.items()) if ref < 0]
        out += [("R", ref, reg) for ref, reg in sorted(right.items()) if ref < 0]
    if stage != "product":
        out += [("O", ref, reg) for ref, reg in sorted(M.rest_regions(plan, bs, box[0], box[1]).items()) if ref < 0]
    return out


def run(be: DaskBackend, plan: M.MMPlan, choice: FusedChoice, bs: int, args: tuple[Any, ...],
        layout: dict[Task, str | None] | None = None, pin: bool = True) -> tuple[Any, Pieces]:
    """The operator's result and its recorded tasks (``layout`` and ``pin`` as fused_outer.run)."""
    main = plan.nodes[plan.main]
    inner = plan.dims(main.args[0])[1]
    P, Q, R = choice.pqr
    rc, cc, kc = cuts(M.blocks(main.rows, bs), P), cuts(M.blocks(main.cols, bs), Q), cuts(M.blocks(inner, bs), R)
    sh = Pieces(be, pin)

    def box(p: int, q: int, r: int) -> tuple[tuple[int, int], ...]:
        return (rc[p], rc[p + 1]), (cc[q], cc[q + 1]), (kc[r], kc[r + 1])

    def operands(items: list[Read]) -> tuple[tuple[Ref, ...], list[Any]]:
        refs: list[Ref] = []
        vals: list[Any] = []
        for space, ref, reg in items:
            x = args[-1 - ref]
            if isinstance(x, Blocked):
                refs.append((space, ref, reg, (reg[1] - reg[0], reg[3] - reg[2])))
                vals += blocks_in(x, *reg)
            else:  # (a local value, whole: the task cuts its region)
                dims = plan.inputs[-1 - ref]
                refs.append((space, ref, M.whole(dims, bs) if dims[2] == M.MATRIX else None, None))
                vals.append(x)
        return tuple(refs), vals

    seen: dict[tuple[Task, str], list[Read]] = {}

    def read(t: Task, stage: str) -> list[Read]:  # (asked by the placement and by the submission)
        if (t, stage) not in seen:
            seen[(t, stage)] = reads(plan, bs, box(*t), stage)
        return seen[(t, stage)]

    def futures(t: Task) -> list[Any]:
        items = read(t, "all" if len(kc) == 2 else "product")
        if len(kc) > 2 and t[2] == 0:
            items = items + read(t, "rest")
        return [f for _, ref, reg in items for f in blocks_in(args[-1 - ref], *reg)]

    tasks = [(p, q, r) for p in range(len(rc) - 1) for q in range(len(cc) - 1) for r in range(len(kc) - 1)]
    if layout is None:
        layout = be.placed(plan, (choice.kind, choice.pqr), args, lambda: place(be, choice, None, tasks, futures, sh.sizes))

    def task(p: int, q: int) -> tuple[Any, str | None]:
        w0 = layout[(p, q, 0)]
        if len(kc) == 2:
            refs, vals = operands(read((p, q, 0), "all"))
            return sh.submit(w0, run_task, plan, bs, "all", box(p, q, 0), refs, *vals), w0
        parts = []
        for r in range(len(kc) - 1):
            w = layout[(p, q, r)]
            refs, vals = operands(read((p, q, r), "product"))
            parts.append(sh.submit(w, run_task, plan, bs, "product", box(p, q, r), refs, *vals))
        summed = tree(sh.at(w0), parts, B.fold_each, "+")  # (the aggregation step, on the piece's worker)
        refs, vals = operands(read((p, q, 0), "rest"))
        return sh.submit(w0, run_task, plan, bs, "rest", box(p, q, 0), refs, summed, *vals), w0

    res = {(p, q): task(p, q) for p in range(len(rc) - 1) for q in range(len(cc) - 1)}
    return _assemble(sh, plan, bs, res, rc, cc), sh


def _assemble(sh: Pieces, plan: M.MMPlan, bs: int, res: dict[tuple[int, int], tuple[Any, str | None]],
              rc: list[int], cc: list[int]) -> Any:
    """The result from the pieces' (each on its worker): each piece's region of the result cut into
    blocks; partial aggregates of one region added on the worker of its first piece."""
    be = sh.be
    out = plan.nodes[plan.out]
    groups: dict[M.Region, list[tuple[Any, str | None]]] = {}
    for (p, q), got in res.items():
        region = M.upward(plan, (rc[p], rc[p + 1], cc[q], cc[q + 1]))[plan.out]
        groups.setdefault(region, []).append(got)
    if plan.agg == "full":
        parts = [f for fs in groups.values() for f, _ in fs]
        return float(be.result(tree(sh.at(next(iter(res.values()))[1]), parts, B.fold_each, "+")))
    result = Blocked(out.rows, out.cols, bs)
    for (i0, i1, j0, j1), fs in groups.items():
        at = sh.at(fs[0][1])
        if plan.agg == M.NO_AGG:  # (a task's blocks, cut in it: taking one copies nothing)
            blocks = [(i, j) for i in range(i0, i1) for j in range(j0, j1)]
            for k, ij in enumerate(blocks):
                result.blocks[ij] = at.submit(B.item, fs[0][0], k)
            continue
        f = fs[0][0] if len(fs) == 1 else tree(at, [f for f, _ in fs], B.fold_each, "+")
        cut_into(be, f, result, i0, i1, j0, j1, at)
    return result


def run_task(plan: M.MMPlan, bs: int, stage: str, box: tuple[tuple[int, int], ...], refs: tuple[Ref, ...],
             *values: Any) -> Any:
    """One task of the operator at ``box`` (block ranges of rows, columns and, for a product, the
    inner dimension): ``stage`` "product" returns A's piece times B's, "rest" the result at the main
    product's piece (the first value), "all" both in one. ``refs``: for each input, its space (L, R,
    O), reference, held region and its blocks' grid (pasted here, in the task: a piece held by the
    cluster would double a worker's memory for the length of the operator; none: one value)."""
    by: dict[str, dict[int, mmeval.Held]] = {"L": {}, "R": {}, "O": {}}
    vals = list(values)
    if stage == "rest":
        by["O"][plan.main] = (vals.pop(0), (*box[0], *box[1]))
    at = 0
    for space, ref, have, grid in refs:
        n = grid[0] * grid[1] if grid else 1
        by[space][ref] = (B.grid(*grid, *vals[at:at + n]) if grid and n > 1 else vals[at], have)
        at += n
    if stage == "product":
        return _product(plan, bs, box, by)
    if stage == "rest":
        return _result(plan, bs, mmeval.evaluate(plan, bs, plan.rest, M.rest_regions(plan, bs, box[0], box[1]),
                                                 by["O"], plan.out))
    # "all": a block row of the piece at a time, so the product and the O-space's values are held for
    # one block row, not the piece (paper 004's memory estimate counts a task's inputs, not these)
    rows = [((i, i + 1), box[1], box[2]) for i in range(*box[0])]
    first = M.upward(plan, (*rows[0][0], *box[1]))[plan.out]
    # an unaggregated result by block rows: each row's blocks cut as it comes (row-major, as
    # _result's), so the piece is never held twice (its rows, then the rows stacked and cut)
    cut = len(rows) > 1 and plan.agg == M.NO_AGG and first[:2] == rows[0][0]
    parts = []
    for sub in rows:
        env = {s: dict(v) for s, v in by.items()}
        env["O"][plan.main] = (_product(plan, bs, sub, env), (*sub[0], *sub[1]))
        got = mmeval.evaluate(plan, bs, plan.rest, M.rest_regions(plan, bs, sub[0], sub[1]), env["O"], plan.out)
        parts.append(_result(plan, bs, got) if cut else got)
    if cut:
        return tuple(b for row in parts for b in row)
    if len(parts) == 1:
        return _result(plan, bs, parts[0])
    if first[:2] == rows[0][0] and plan.agg == "row":
        return _result(plan, bs, B.stack(True, *parts))
    if first[2:] == rows[0][0] and plan.agg in (M.NO_AGG, "col"):  # (a transposed result)
        return _result(plan, bs, B.stack(False, *parts))
    return B.add_all(*parts)  # (an aggregate over the rows: partial results added in row order)


def _result(plan: M.MMPlan, bs: int, piece: Any) -> Any:
    """A task's result: an unaggregated piece as its blocks, row by row (the task's result is held
    once: cut afterwards, the piece and its blocks were held together), else the partial aggregate."""
    return tuple(B.split(piece, bs).values()) if plan.agg == M.NO_AGG else piece


def _product(plan: M.MMPlan, bs: int, box: tuple[tuple[int, int], ...], by: dict[str, dict[int, mmeval.Held]]) -> Any:
    """A's piece at ``box`` times B's, each computed by its space from the values ``by`` holds."""
    a, b = plan.nodes[plan.main].args
    lreg, rreg = M.cuboid_regions(plan, bs, box[0], box[1], box[2])
    return B.apply("%*%", mmeval.evaluate(plan, bs, plan.left, lreg, by["L"], a),
                   mmeval.evaluate(plan, bs, plan.right, rreg, by["R"], b))
