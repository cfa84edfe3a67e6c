"""Distributed matrix products, one function per strategy of plan.mmstrategy (SystemDS's Spark
strategies, paper 003): what each moves between workers is in that module's docstring.

Every strategy computes the block products of an output block with the local runtime's kernels
on whole blocks (``%*%``, ``+``, ``*``) and sums them in the order of the common dimension's blocks
(a tree of consecutive groups where partials are summed apart), so all of them give the local result
up to the order of the sums. An operand read transposed in place (``ins.transposed``) is never
transposed as a distributed matrix: a task transposes the blocks it multiplies (a CSR block's
transpose is a CSC view, as locally). An mmchain (``ins.chain``) runs as MapMMChain where that
applies, else as its products one after the other, the last by the chosen strategy.

Task counts: a task per output block (RMM, MapMM, a broadcast operand of several blocks one more
that packs it into a single value), or per output block and run of MM_TASK_INPUT_BYTES along the
common dimension plus the sums of the runs' partials; per block of the common dimension plus the sums of the partials
(TSMM, ZIPMM, MapMMChain: one output block), and for CPMM one more per output block. Partials are
summed FAN_IN at a time: a single task summing every partial would hold them all at once (a TSMM over
a thousand row blocks: a thousand output blocks on one worker).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lafuse.plan import mmstrategy
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.dask.ops import tree
from lafuse.runtime.local.kernels import KERNELS

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend



def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    """The operator of a distributed product or mmchain, by the strategy the plan chose (RMM for a
    product the planner did not see, e.g. a bare instruction)."""
    if ins.chain is not None:
        w_first, transposed = ins.chain
        return functools.partial(mmchain, be, ins.method or mmstrategy.MAPMMCHAIN, w_first, transposed)
    if ins.opcode != "%*%":
        return None
    ta, tb = ins.transposed or (False, False)
    return functools.partial(product, be, ins.method or mmstrategy.RMM, ta, tb)


# ---------------------------------------------------------------- operands as multiplied


@dataclass(frozen=True)
class Operand:
    """A distributed matrix as a product reads it: itself, or its transpose read in place (block
    (i, j) of the transpose is the stored block (j, i), transposed by the task that reads it)."""

    m: Blocked
    t: bool = False

    @property
    def rows(self) -> int:
        return self.m.cols if self.t else self.m.rows

    @property
    def cols(self) -> int:
        return self.m.rows if self.t else self.m.cols

    @property
    def nrb(self) -> int:
        return self.m.ncb if self.t else self.m.nrb

    @property
    def ncb(self) -> int:
        return self.m.nrb if self.t else self.m.ncb

    def key(self, i: int, j: int) -> tuple[int, int]:
        """The stored block of block (i, j) as multiplied."""
        return (j, i) if self.t else (i, j)

    def block(self, i: int, j: int) -> Any:
        return self.m.blocks[self.key(i, j)]

    def dims(self) -> mmstrategy.Dims:
        return self.rows, self.cols, -1


def _distributed(be: DaskBackend, m: Any) -> Blocked:
    """A product's operand as a distributed matrix (the plan scatters local operands; a value from
    elsewhere, e.g. a recompiled block's, is scattered here)."""
    return m if isinstance(m, Blocked) else be.scatter(m)


def _check(a: Operand, b: Operand) -> None:
    if a.m.bs != b.m.bs:  # pragma: no cover - one block size per run
        raise ValueError("operands of a distributed product must have one block size")
    if a.cols != b.rows:
        from lafuse.errors import DMLRuntimeError  # deferred: only on the error path

        raise DMLRuntimeError(f"invalid dimensions for matrix multiplication (k1={a.cols}, k2={b.rows})")


def _result(be: DaskBackend, a: Operand, b: Operand, blocks: dict[tuple[int, int], Any]) -> Blocked:
    return be.like(a.m, blocks, rows=a.rows, cols=b.cols)


# ---------------------------------------------------------------- products


def product(be: DaskBackend, method: str, ta: bool, tb: bool, a: Any, b: Any) -> Blocked:
    """``op(a) %*% op(b)`` (op: transposed where ``ta``/``tb``) by ``method``, or by RMM where the
    operands' actual shape does not admit it (the plan chose by the sizes it knew)."""
    ma, mb = _distributed(be, a), _distributed(be, b)
    return run(be, method, Operand(ma, ta), Operand(mb, tb))


def run(be: DaskBackend, method: str, a: Operand, b: Operand) -> Blocked:
    """``a %*% b`` by ``method`` where mmstrategy.applicable admits it for these operands, else RMM."""
    _check(a, b)
    tsmm = None
    if a.m is b.m and a.t != b.t:
        tsmm = mmstrategy.LEFT if a.t else mmstrategy.RIGHT
    shape = mmstrategy.Product(a.dims(), b.dims(), tsmm, a.t)
    if method not in STRATEGIES or not mmstrategy.applicable(method, shape, a.m.bs):
        method = mmstrategy.RMM
    return STRATEGIES[method](be, a, b)


# bytes of input blocks one task of RMM or MapMM may read (a dense upper bound): a product with many
# blocks along the common dimension splits its strips into runs of consecutive blocks of this size
# and sums the partials (``_sum``); a task per output block reading a whole strip would need all of it
# at once (``t(y) %*% X`` over a tall X: the whole of X in one task). A run is a task's worth of work
# but no more than about one large block, which the scheduler runs where that block is: with 64 MiB
# runs, L2SVM's products over a 1.48 GB X of 8 MB blocks moved 1077 MB between the workers, with
# 8 MiB (a task per block) 268 MB
MM_TASK_INPUT_BYTES = 8 << 20


def _runs(a: Operand, b: Operand, broadcast: Operand | None = None) -> list[range]:
    """The common dimension's blocks in runs of consecutive ones whose pairs of blocks (the broadcast
    operand's not counted: it arrives whole) stay within MM_TASK_INPUT_BYTES."""
    bs = a.m.bs
    pair = 8.0 * (0 if broadcast is a else min(bs, a.rows) * min(bs, a.cols)) \
        + 8.0 * (0 if broadcast is b else min(bs, b.rows) * min(bs, b.cols))
    step = max(1, int(MM_TASK_INPUT_BYTES // max(pair, 1.0)))
    return [range(k, min(k + step, a.ncb)) for k in range(0, a.ncb, step)]


def rmm(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    """C[i, j] = sum over k of A[i, k] %*% B[k, j], one task per output block (SystemDS's RMM: each
    input block goes to every task of its row or column of C), or per output block and run of the
    common dimension (``_runs``) with the partials summed in order."""
    out = {}
    runs = _runs(a, b)
    for i in range(a.nrb):
        for j in range(b.ncb):
            parts = [be.submit(mm_sum, a.t, b.t, None, *[f for k in ks for f in (a.block(i, k), b.block(k, j))])
                     for ks in runs]
            out[(i, j)] = _sum(be, parts)
    return _result(be, a, b, out)


def _broadcast(be: DaskBackend, x: Operand) -> tuple[Any, bool]:
    """A broadcast operand as one value on the cluster: the future of its only block, or of a dict of
    its stored blocks packed by one task (Dask then sends it once to each worker that runs a task
    reading it, not once per task); and whether it is packed (its blocks are then named by key)."""
    m = x.m
    if len(m.blocks) == 1:
        return next(iter(m.blocks.values())), False
    keys = m.grid()
    return be.submit(pack, keys, *[m.blocks[k] for k in keys]), True


def mapmm(be: DaskBackend, a: Operand, b: Operand, left: bool) -> Blocked:
    """SystemDS's MapMM: the broadcast operand (``left``: A, else B) sent whole to the workers once,
    a task per output block C[i, j] reading the other operand's strip (B[:, j] or A[i, :]) where it
    is and the blocks it needs of the broadcast one; a long strip in runs (``_runs``) whose partials
    are summed in order, as SystemDS aggregates MapMM's partial blocks."""
    bc, packed = _broadcast(be, a if left else b)
    runs = _runs(a, b, a if left else b)
    out = {}
    for i in range(a.nrb):
        for j in range(b.ncb):
            partials = []
            for ks in runs:
                parts: list[Any] = []
                for k in ks:
                    if left:
                        parts += [a.key(i, k) if packed else bc, b.block(k, j)]
                    else:
                        parts += [a.block(i, k), b.key(k, j) if packed else bc]
                partials.append(be.submit(mm_sum, a.t, b.t, bc if packed else None, *parts))
            out[(i, j)] = _sum(be, partials)
    return _result(be, a, b, out)


def mapmm_l(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    return mapmm(be, a, b, True)


def mapmm_r(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    return mapmm(be, a, b, False)


def cpmm(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    """SystemDS's CPMM: a task per block k of the common dimension multiplies A[:, k] with B[k, :]
    (the cross product: every partial C_k[i, j] = A[i, k] %*% B[k, j]), the partials (each C's size,
    SystemDS's n1 partial results) are summed block by block FAN_IN at a time in k order, and a task
    per output block takes its block of the sum."""
    partials = []
    for k in range(a.ncb):
        col = [a.block(i, k) for i in range(a.nrb)]
        row = [b.block(k, j) for j in range(b.ncb)]
        partials.append(be.submit(cross, a.t, b.t, a.nrb, *col, *row))
    total = _sum(be, partials, sum_grids)
    out = {(i, j): be.submit(pick, (i, j), total) for i in range(a.nrb) for j in range(b.ncb)}
    return _result(be, a, b, out)


def zipmm(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    """SystemDS's ZIPMM (``t(X) %*% y``, one output block): A's and B's blocks along the common
    dimension zipped, a task per pair multiplies them where they are (X's transpose only per block),
    the partials summed in order (``_sum``)."""
    parts = [be.submit(mm_sum, a.t, b.t, None, a.block(0, k), b.block(k, 0)) for k in range(a.ncb)]
    return _result(be, a, b, {(0, 0): _sum(be, parts)})


def tsmm(be: DaskBackend, a: Operand, b: Operand) -> Blocked:
    """SystemDS's TSMM (``t(X) %*% X`` or ``X %*% t(X)``, one output block): a task per block of X
    multiplies it with its own transpose (one block read, where it is), the partials are
    summed in order (``_sum``)."""
    left = a.t  # t(X) %*% X: over X's row blocks; X %*% t(X): over its column blocks
    x = a.m
    keys = [(k, 0) for k in range(x.nrb)] if left else [(0, k) for k in range(x.ncb)]
    parts = [be.submit(self_product, left, x.blocks[key]) for key in keys]
    return _result(be, a, b, {(0, 0): _sum(be, parts)})


def _sum(be: DaskBackend, parts: list[Any], fn: Callable[..., Any] | None = None) -> Any:
    """The future of the sum of ``parts`` (blocks, or with ``fn`` = sum_grids CPMM's partial grids),
    in the common dimension's order (runtime.dask.ops.tree)."""
    return tree(be, parts, fn or sum_all)


# ---------------------------------------------------------------- mmchain


def mmchain(be: DaskBackend, method: str, w_first: bool, transposed: bool, x: Any, v: Any,
            w: Any = None) -> Blocked:
    """``t(X) %*% (w * (X %*% v))`` (w None: ``t(X) %*% (X %*% v)``; ``transposed``: its transpose,
    ``t(w * (X %*% v)) %*% X``; ``w_first``: w the left operand of *), as the local mmchain kernel.
    MapMMChain where it applies to the actual operands, else the products one after the other: the
    inner by RMM, the outer by ``method`` (RMM where that does not apply)."""
    mx, mv = _distributed(be, x), _distributed(be, v)
    mw = _distributed(be, w) if w is not None else None
    ox, ov = Operand(mx), Operand(mv)
    _check(ox, ov)
    if method == mmstrategy.MAPMMCHAIN:
        shape = mmstrategy.Product((mx.cols, mx.rows, -1), (mx.rows, mv.cols, -1), None, True, ox.dims(), ov.dims(),
                                   (mw.rows, mw.cols, -1) if mw is not None else None)
        if mmstrategy.applicable(method, shape, mx.bs):
            return mapmmchain(be, w_first, transposed, mx, mv, mw)
        method = mmstrategy.RMM
    q = rmm(be, ox, ov)
    if mw is not None:
        q = _times(be, w_first, mw, q)
    if transposed:
        return run(be, method, Operand(q, True), ox)
    return run(be, method, Operand(mx, True), Operand(q))


def _times(be: DaskBackend, w_first: bool, w: Blocked, q: Blocked) -> Blocked:
    """``w * q`` (or ``q * w``) block by block, w of q's shape or a vector broadcast along it."""
    out = {}
    for i, j in q.grid():
        wk = (i if w.rows == q.rows else 0, j if w.cols == q.cols else 0)
        out[(i, j)] = be.submit(times, w_first, w.blocks[wk], q.blocks[(i, j)])
    return be.like(q, out)


def mapmmchain(be: DaskBackend, w_first: bool, transposed: bool, x: Blocked, v: Blocked,
               w: Blocked | None) -> Blocked:
    """SystemDS's MapMMChain (X one column block, v one block): v broadcast (its one future, sent once
    to each worker), a task per row block of X computes the whole chain on it (w's matching row block
    zipped with it, or w's only block where w is one row), the partials summed in order (``_sum``)."""
    vf = v.blocks[(0, 0)]
    parts = []
    for i in range(x.nrb):
        wf = None if w is None else w.blocks[(i, 0) if w.rows == x.rows else (0, 0)]
        parts.append(be.submit(chain_block, w_first, transposed, x.blocks[(i, 0)], vf, wf))
    rows, cols = (v.cols, x.cols) if transposed else (x.cols, v.cols)
    return be.like(x, {(0, 0): _sum(be, parts)}, rows=rows, cols=cols)


STRATEGIES: dict[str, Callable[[DaskBackend, Operand, Operand], Blocked]] = {
    mmstrategy.TSMM: tsmm,
    mmstrategy.MAPMM_L: mapmm_l,
    mmstrategy.MAPMM_R: mapmm_r,
    mmstrategy.ZIPMM: zipmm,
    mmstrategy.CPMM: cpmm,
    mmstrategy.RMM: rmm,
}  # (MapMMChain is the mmchain's own: mapmmchain)


# ---------------------------------------------------------------- block functions (run by workers)


def _op(b: Any, t: bool) -> Any:
    return b.T if t else b


def mm_sum(ta: bool, tb: bool, bc: dict[tuple[int, int], Any] | None, *parts: Any) -> Any:
    """sum over k of op(A[i, k]) %*% op(B[k, j]) in k order, ``parts`` = A[i, 0], B[0, j], A[i, 1], ...;
    a part that is a (row, column) key is that block of the packed broadcast operand ``bc``."""
    mm, add = KERNELS["%*%"], KERNELS["+"]
    out = None
    for k in range(0, len(parts), 2):
        p, q = parts[k], parts[k + 1]
        if isinstance(p, tuple):
            p = bc[p]  # type: ignore[index]
        if isinstance(q, tuple):
            q = bc[q]  # type: ignore[index]
        r = mm(_op(p, ta), _op(q, tb))
        out = r if out is None else add(out, r)
    return out


def pack(keys: list[tuple[int, int]], *blocks: Any) -> dict[tuple[int, int], Any]:
    """A broadcast operand's blocks as one value."""
    return dict(zip(((k[0], k[1]) for k in keys), blocks))  # (as tuples, however the keys travelled)


def cross(ta: bool, tb: bool, nrb: int, *parts: Any) -> dict[tuple[int, int], Any]:
    """CPMM's partial products of one k: ``parts`` = A[0, k] .. A[nrb-1, k], then B[k, 0], B[k, 1], ...;
    {(i, j): op(A[i, k]) %*% op(B[k, j])}."""
    mm = KERNELS["%*%"]
    col, row = parts[:nrb], parts[nrb:]
    return {(i, j): mm(_op(a, ta), _op(b, tb)) for i, a in enumerate(col) for j, b in enumerate(row)}


def sum_grids(*grids: dict[tuple[int, int], Any]) -> dict[tuple[int, int], Any]:
    """CPMM's partial grids summed block by block, in the order given."""
    return {key: sum_all(*[g[key] for g in grids]) for key in grids[0]}


def pick(key: tuple[int, int], grid: dict[tuple[int, int], Any]) -> Any:
    """Block ``key`` of a grid of blocks."""
    return grid[(key[0], key[1])]


def sum_all(*parts: Any) -> Any:
    """The sum of partial results in the order given (blocks of one shape)."""
    add = KERNELS["+"]
    out = parts[0]
    for p in parts[1:]:
        out = add(out, p)
    return out


def self_product(left: bool, x: Any) -> Any:
    """t(x) %*% x (``left``) or x %*% t(x) of one block."""
    mm = KERNELS["%*%"]
    return mm(x.T, x) if left else mm(x, x.T)


def times(w_first: bool, w: Any, q: Any) -> Any:
    """The chain's ``w * q`` (``q * w`` unless ``w_first``), the local kernel's broadcasting."""
    mul = KERNELS["*"]
    return mul(w, q) if w_first else mul(q, w)


def chain_block(w_first: bool, transposed: bool, x: Any, v: Any, w: Any) -> Any:
    """One row block's part of the mmchain: q = x %*% v (times w), then t(x) %*% q, or t(q) %*% x
    (``transposed``, as the local kernel computes that form)."""
    mm = KERNELS["%*%"]
    q = mm(x, v)
    if w is not None:
        q = times(w_first, w, q)
    return mm(q.T, x) if transposed else mm(x.T, q)
