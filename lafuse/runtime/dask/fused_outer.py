"""The broadcast and cuboid operators of a distributed outer plan (plan.fusedstrategy, paper 004
§3.2): the same generated kernel as every other distributed fused operator, run on pieces of X.

A piece (p, q) is X's block rows of group p and block columns of group q, pasted into one matrix
(sparse stays sparse); its task reads U's rows of group p and V's rows of group q (the cuboid
operator: only the columns of its k-group r; the broadcast operator: U and V whole, each task
taking its rows), the cell-aligned inputs' piece, the vectors' rows or columns. With R > 1 the
piece's R tasks compute the product alone at X's non-zeros over their k-group
(hops.cplan.split_outer), their partial products are added (the aggregation step), and one more
task runs the rest of the plan on the sum. Results: a block of X's grid cut from its piece, partial
sums added in a fixed order (pieces, then k-groups), so a value never depends on scheduling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lafuse.hops import cplan as C
from lafuse.runtime.dask import blocks as B
from lafuse.runtime.dask import monitor
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.dask.ops import tree

if TYPE_CHECKING:
    from lafuse.plan.fusedstrategy import FusedChoice
    from lafuse.runtime.dask.backend import DaskBackend


def cuts(n: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` near-equal groups of ``n`` blocks (at most ``n`` groups)."""
    parts = max(1, min(parts, n))
    return [n * p // parts for p in range(parts + 1)]


class Pieces:
    """Pasted pieces of distributed matrices (a cuboid's, a row panel, a whole side input), each
    assembled by one task and shared by the tasks that read it; sparse blocks stay sparse."""

    def __init__(self, be: DaskBackend) -> None:
        self.be = be
        self.memo: dict[tuple[int, int, int, int, int], Any] = {}

    def get(self, x: Any, i0: int, i1: int, j0: int, j1: int) -> Any:
        """Block rows i0:i1 and columns j0:j1 of ``x`` (not distributed: ``x`` itself)."""
        if not isinstance(x, Blocked):
            return x
        if i1 - i0 == 1 and j1 - j0 == 1:
            return x.blocks[(i0, j0)]
        key = (id(x), i0, i1, j0, j1)
        if key not in self.memo:
            grid = [x.blocks[(i, j)] for i in range(i0, i1) for j in range(j0, j1)]
            self.memo[key] = self.be.submit(B.grid, i1 - i0, j1 - j0, *grid)
        return self.memo[key]

    def rows(self, x: Any, i0: int, i1: int) -> Any:
        return self.get(x, i0, i1, 0, x.ncb) if isinstance(x, Blocked) else x

    def whole(self, x: Any) -> Any:
        return self.get(x, 0, x.nrb, 0, x.ncb) if isinstance(x, Blocked) else x


def run(be: DaskBackend, plan: C.CPlan, ref: bool, acc: dict[int, str], main: Blocked, args: tuple[Any, ...],
        choice: FusedChoice) -> Any:
    P, Q, R = choice.pqr
    broadcast = choice.kind == "bfo"
    upos = next(p for p, a in acc.items() if a == C.OUTER_U)
    vpos = next(p for p, a in acc.items() if a == C.OUTER_V)
    U = args[upos]
    K = U.ncb if isinstance(U, Blocked) else 1
    rc, cc = cuts(main.nrb, P), cuts(main.ncb, Q)
    kc = [0, K] if broadcast else cuts(K, R)
    sh = Pieces(be)
    halves = C.split_outer(plan) if len(kc) > 2 else None

    def operands(p: int, q: int, r: int) -> list[Any]:
        i0, i1, j0, j1 = rc[p], rc[p + 1], cc[q], cc[q + 1]
        out: list[Any] = []
        for pos, a in enumerate(args):
            access = acc.get(pos, C.SCALAR)
            if pos in (upos, vpos):
                g0, g1 = (i0, i1) if pos == upos else (j0, j1)
                out.append(sh.whole(a) if broadcast else sh.get(a, g0, g1, kc[r], kc[r + 1]))
            elif pos == plan.mm:
                out.append(sh.rows(a, j0, j1) if plan.agg == C.RIGHT_MM else sh.rows(a, i0, i1))
            elif access in (C.MAIN, C.CELL):
                out.append(sh.get(a, i0, i1, j0, j1))
            elif access == C.ROWVEC:
                out.append(sh.get(a, i0, i1, 0, 1))
            elif access == C.COLVEC:
                out.append(sh.get(a, 0, 1, j0, j1))
            else:
                out.append(a.blocks[(0, 0)] if isinstance(a, Blocked) else a)
        return out

    def task(p: int, q: int) -> Any:
        if broadcast:  # each task takes its rows of the whole U (and V: Q is 1, every row)
            r0, r1 = rc[p] * main.bs, min(main.rows, rc[p + 1] * main.bs)
            return be.submit(B.run_plan_rows, plan, ref, ((upos, r0, r1),), *operands(p, q, 0))
        if halves is None:
            return be.submit(B.run_plan, plan, ref, *operands(p, q, 0))
        product, rest = halves
        parts = [be.submit(B.run_plan, product, ref, *operands(p, q, r)) for r in range(len(kc) - 1)]
        summed = tree(be, parts, B.fold_each, "+")
        ops = operands(p, q, 0)
        ops[upos] = ops[vpos] = 0.0  # (the rest reads the summed product, not the factors)
        return be.submit(B.run_plan, rest, ref, *ops, summed)

    res = {(p, q): task(p, q) for p in range(len(rc) - 1) for q in range(len(cc) - 1)}
    return _assemble(be, plan, main, res, rc, cc, int(args[plan.mm].cols) if plan.mm >= 0 else 0)


def measured(be: DaskBackend, plan: C.CPlan, choice: FusedChoice | None, compute: Callable[[], Any]) -> Any:
    """``compute()``, and under ``--stats`` the bytes the workers moved between them while it ran
    beside the model's estimate (``DaskCounters.fused``): the operator is waited for, so nothing
    else runs on the cluster meanwhile."""
    if not be.cfg.stats or choice is None:
        return compute()
    c = be.client()
    before = monitor.safe(lambda: c.run(monitor.worker_counters), {})
    out = compute()
    be.wait_all(list(out.blocks.values()) if isinstance(out, Blocked) else [])
    after = monitor.safe(lambda: c.run(monitor.worker_counters), {})
    moved = monitor.between(before, after, monitor.safe(lambda: c.scheduler.address, None), 0).moved_bytes
    be.counters.fused.append((f"{plan.agg} {choice}".split(" net=")[0], choice.net + choice.shuffle, moved))
    return out


def _assemble(be: DaskBackend, plan: C.CPlan, main: Blocked, res: dict[tuple[int, int], Any], rc: list[int],
              cc: list[int], k: int) -> Any:
    bs = main.bs
    if plan.agg == C.FULL_AGG:
        return float(be.result(tree(be, list(res.values()), B.fold_each, "+")))
    if plan.agg == C.NO_AGG:
        out = Blocked(main.rows, main.cols, bs)
        for (p, q), f in res.items():
            cut_into(be, f, out, rc[p], rc[p + 1], cc[q], cc[q + 1])
        return out
    left = plan.agg == C.LEFT_MM
    groups, other = (cc, rc) if left else (rc, cc)
    rows = main.cols if left else main.rows
    out = Blocked(rows, k, bs)
    for g in range(len(groups) - 1):
        parts = [res[(o, g) if left else (g, o)] for o in range(len(other) - 1)]
        cut_into(be, tree(be, parts, B.fold_each, "+"), out, groups[g], groups[g + 1], 0, out.ncb)
    return out


def cut_into(be: DaskBackend, piece: Any, out: Blocked, i0: int, i1: int, j0: int, j1: int) -> None:
    """Put a piece holding ``out``'s block rows i0:i1 and columns j0:j1 into its blocks: the future as
    it is when it is one block, else one cut task per block."""
    if i1 - i0 == 1 and j1 - j0 == 1:
        out.blocks[(i0, j0)] = piece
        return
    bs = out.bs
    for i in range(i0, i1):
        for j in range(j0, j1):
            r0, c0 = (i - i0) * bs, (j - j0) * bs
            out.blocks[(i, j)] = be.submit(B.cut, piece, r0, r0 + min(bs, out.rows - i * bs),
                                           c0, c0 + min(bs, out.cols - j * bs))
