"""The strategy of a distributed matrix product, chosen by SystemDS's rules and cost formulas
(paper 003; SystemDS's optFindMMultMethodSpark): TSMM, MapMMChain, MapMM left/right (broadcast),
ZIPMM, CPMM, RMM. The Dask backend (runtime.dask.matmul) implements each.

The strategies differ in what moves between workers, not in what they compute: every one sums the
block products of an output block in the order of the common dimension's blocks (values equal up to
the grouping of those sums).

- TSMM: ``t(X) %*% X`` (or ``X %*% t(X)``) with one output block: a task per block of X multiplies
  it with itself, the partials are summed; X is read once and nothing else moves.
- MapMMChain: ``t(X) %*% (w * (X %*% v))`` with X one column block: v is broadcast, a task per row
  block of X does the whole chain on it (w zipped by row block), the partials are summed; one pass
  over X.
- MapMM left/right: the smaller operand, when it fits a task's broadcast budget, is sent once to
  every worker; a task per output block reads the other operand's blocks where they are.
- ZIPMM: ``t(X) %*% y`` with X and y one column block each: their row blocks zipped, a partial
  product each, summed (no transpose of X, no shuffle).
- CPMM: a task per block of the common dimension k multiplies A's column strip with B's row strip
  (the cross product of k), then the partials (each of C's size) are summed.
- RMM: a task per output block receives A's row strip and B's column strip (each input block is
  replicated to every task of its row or column of C).

``choose`` applies SystemDS's order; ``Config.mm_method`` forces one strategy (for tests and
experiments) where ``applicable`` says the runtime implements it for the product's shape, else the
rules decide (SystemDS's own forced method is unconditional, it fails where a strategy does not fit;
here a forced run of many products keeps working). Not implemented: PMM (permutation products) and
TSMM2 (two-pass tsmm over a few output blocks); those shapes fall through to the later rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lafuse import config as cfgmod
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.sizes import output_bytes
from lafuse.plan.instructions import Instruction

if TYPE_CHECKING:  # (exectype imports this module's users; no import circle at run time)
    from lafuse.plan.exectype import ClusterShape

TSMM = "tsmm"
MAPMMCHAIN = "mapmmchain"
MAPMM_L = "mapmm_l"
MAPMM_R = "mapmm_r"
ZIPMM = "zipmm"
CPMM = "cpmm"
RMM = "rmm"
METHODS = (TSMM, MAPMMCHAIN, MAPMM_L, MAPMM_R, ZIPMM, CPMM, RMM)  # (Config's CHOICES["mm_method"] lists them)

LEFT, RIGHT = "left", "right"  # a tsmm's form: t(X) %*% X, X %*% t(X)
CELL_BYTES = 8.0  # a dense cell (SystemDS's estimateSize of a dense block)

Dims = tuple[int, int, int]  # rows, cols, nnz (-1: unknown)


@dataclass(frozen=True)
class Product:
    """A distributed product as the strategies see it: the operands as multiplied (transposes read
    in place applied), and the patterns SystemDS checks. The planner builds it from the instruction
    (``of``), the runtime from the distributed operands, so both ask ``applicable`` the same thing."""

    m1: Dims  # left operand as multiplied
    m2: Dims  # right operand as multiplied
    tsmm: str | None = None  # LEFT t(X) %*% X or RIGHT X %*% t(X), one X read in place (SystemDS's MMTSJ)
    tleft: bool = False  # the left operand a transpose read in place (SystemDS's t(X) %*% y: ZIPMM)
    x: Dims | None = None  # an mmchain's X, v and w (w None: t(X) %*% (X %*% v))
    v: Dims | None = None
    w: Dims | None = None


def _dims(h: Hop) -> Dims:
    return h.rows, h.cols, h.nnz


def _known(h: Hop) -> bool:
    return h.dt == MATRIX and h.rows >= 0 and h.cols >= 0


def distributable(ins: Instruction) -> bool:
    """Whether the Dask backend has a strategy for the product ``ins`` as the plan shaped it: a
    product of two matrices of known dims, also one that reads a transpose in place (TSMM's
    ``t(X) %*% X``, ZIPMM's ``t(X) %*% y``, any ``t(A) %*% B``), and an mmchain over X, v (and w) of
    known dims (MapMMChain, or its products one after the other where that does not apply). Unknown
    dims stay local: the strategies are chosen by the shape (SystemDS's CPMM for unknowns is a plan
    this runtime does not need, since a dynamic recompilation plans again with the sizes)."""
    h = ins.hop
    if h.op != "%*%" or len(h.inputs) != 2 or not all(_known(i) for i in h.inputs):
        return False
    if ins.chain is not None:
        return ins.opcode == "mmchain" and ins.reads is not None and len(ins.reads) in (2, 3) and all(
            _known(r) for r in ins.reads)
    if ins.opcode != "%*%":
        return False
    if ins.reads is not None:
        return ins.transposed is not None and len(ins.reads) == 2 and all(_known(r) for r in ins.reads)
    return True


def of(ins: Instruction) -> Product:
    """The product ``ins`` computes, by the sizes the plan knows."""
    h = ins.hop
    m1, m2 = _dims(h.inputs[0]), _dims(h.inputs[1])
    if ins.chain is not None and ins.reads is not None:
        x, v = ins.reads[0], ins.reads[1]
        w = ins.reads[2] if len(ins.reads) > 2 else None
        return Product(m1, m2, None, True, _dims(x), _dims(v), _dims(w) if w is not None else None)
    ta, tb = ins.transposed or (False, False)
    tsmm = None
    if ins.reads is not None and len(ins.reads) == 2 and ins.reads[0] is ins.reads[1] and ta != tb:
        tsmm = LEFT if ta else RIGHT
    return Product(m1, m2, tsmm, ta)


def applicable(method: str, p: Product, bs: int) -> bool:
    """Whether the runtime implements ``method`` for ``p`` at block size ``bs`` (whatever the memory):
    TSMM the tsmm pattern with one output block; MapMMChain an mmchain whose X and v are one column
    block each (one output block) with a w of X's rows or one row; ZIPMM one output block (the zip
    over the common dimension); MapMM, CPMM and RMM every product (an mmchain by its products one
    after the other, the last by that strategy)."""
    def one(n: int) -> bool:  # a dimension of one block (known)
        return 0 <= n <= bs

    if method == TSMM:
        return p.x is None and ((p.tsmm == LEFT and one(p.m2[1])) or (p.tsmm == RIGHT and one(p.m1[0])))
    if method == MAPMMCHAIN:
        if p.x is None or p.v is None:
            return False
        w_ok = p.w is None or (one(p.w[1]) and p.w[0] in (p.x[0], 1))
        return one(p.x[1]) and one(p.v[1]) and w_ok
    if method == ZIPMM:
        return one(p.m1[0]) and one(p.m2[1])
    return method in (MAPMM_L, MAPMM_R, CPMM, RMM)


def choose(ins: Instruction, cluster: ClusterShape) -> str:
    """The strategy of the distributed product ``ins``: ``Config.mm_method`` where it is applicable,
    else SystemDS's rules (``select``)."""
    p = of(ins)
    forced = cfgmod.get().mm_method
    if forced is not None and applicable(forced, p, cluster.block_size):
        return forced
    return select(p, cluster.block_size, cluster.workers, cluster.broadcast_bytes)


def select(p: Product, bs: int, tasks: int, broadcast_bytes: float) -> str:
    """SystemDS's order (optFindMMultMethodSpark, paper 003): TSMM when the tsmm pattern has one
    output block (always better than a general product: X read once, no shuffle); MapMMChain when the
    chain's X is one column block and v one column that fits the broadcast budget (one pass over X
    instead of two products); MapMM when one operand fits the broadcast budget, the smaller one
    broadcast (no shuffle of the other); ZIPMM for ``t(X) %*% y`` with one output block (the zip needs
    no transpose and no shuffle); else CPMM or RMM, whichever the cost formulas price lower. Unknown
    dims (not distributed here, see ``distributable``) would take SystemDS's robust CPMM."""
    if applicable(TSMM, p, bs):
        return TSMM
    if p.x is not None and p.v is not None and applicable(MAPMMCHAIN, p, bs) and p.v[1] == 1 \
            and CELL_BYTES * p.v[0] * p.v[1] < broadcast_bytes:
        # (SystemDS broadcasts w too and adds it to the budget; w is zipped by X's row blocks here)
        return MAPMMCHAIN
    side = mapmm_side(p.m1, p.m2, bs, broadcast_bytes)
    if side is not None:
        return side
    if min(*p.m1[:2], *p.m2[:2]) < 0:
        return CPMM
    if p.tleft and applicable(ZIPMM, p, bs):
        return ZIPMM
    (r1, c1, _), (r2, c2, _) = p.m1, p.m2
    if cpmm_cost(r1, c1, r2, c2, bs, tasks) < rmm_cost(r1, c1, r2, c2, bs, tasks):
        return CPMM
    return RMM


def _bytes(d: Dims) -> float:
    """An operand's bytes in the format the runtime gives it (the worst case for unknown non-zeros)."""
    return output_bytes(d[0], d[1], d[2])


def mapmm_footprint(m1: Dims, m2: Dims, bs: int, cached: int) -> float:
    """A MapMM task's memory (SystemDS's getMapmmMemEstimate): the broadcast operand whole, one block
    of the other, and the output that block produces (a column strip of C for a broadcast left
    operand, a row strip for a broadcast right one); ``cached``: 1 the left operand broadcast, 2 the
    right."""
    (r1, c1, _), (r2, c2, _) = m1, m2
    if cached == 1:
        return _bytes(m1) + CELL_BYTES * min(r2, bs) * min(c2, bs) + CELL_BYTES * r1 * min(c2, bs)
    return CELL_BYTES * min(r1, bs) * min(c1, bs) + _bytes(m2) + CELL_BYTES * min(r1, bs) * c2


def mapmm_side(m1: Dims, m2: Dims, bs: int, broadcast_bytes: float) -> str | None:
    """MAPMM_L or MAPMM_R when an operand's task footprint fits ``broadcast_bytes``, the smaller one
    broadcast (SystemDS: if either fits, the smaller; a tie broadcasts the right one), else None. The
    broadcast is assembled on a worker, not in this process, so SystemDS's second condition (the
    operand fits the driver's memory twice) does not apply."""
    if min(*m1[:2], *m2[:2]) < 0:
        return None
    fits1 = mapmm_footprint(m1, m2, bs, 1) < broadcast_bytes
    fits2 = mapmm_footprint(m1, m2, bs, 2) < broadcast_bytes
    if not (fits1 or fits2):
        return None
    if fits1 and (_bytes(m1) < _bytes(m2) or not fits2):
        return MAPMM_L
    return MAPMM_R if fits2 else None


def _nblocks(n: int, bs: int) -> int:
    return max(1, -(-n // bs))


def rmm_cost(r1: int, c1: int, r2: int, c2: int, bs: int, tasks: int) -> float:
    """SystemDS's RMM cost (sizes in cells, weighted by parallelism): every block of A goes to the
    ncb(B) tasks of its row of C, every block of B to the nrb(A) tasks of its column, plus reading
    the inputs and writing C, over min(output blocks, tasks) tasks at once:
    (ncb(B)*|A| + nrb(A)*|B| + |A| + |B| + |C|) / min(nrb(A)*ncb(B), tasks)."""
    a, b, c = float(r1) * c1, float(r2) * c2, float(r1) * c2
    nrb, ncb = _nblocks(r1, bs), _nblocks(c2, bs)
    return (ncb * a + nrb * b + a + b + c) / min(nrb * ncb, max(1, tasks))


def cpmm_cost(r1: int, c1: int, r2: int, c2: int, bs: int, tasks: int) -> float:
    """SystemDS's CPMM cost (sizes in cells): phase 1 shuffles A and B once by the common dimension
    and writes n1 partial results of C's size, n1 = min(ncb(A), tasks) at once; phase 2 shuffles and
    sums the partials over n2 = min(output blocks, tasks):
    (|A| + |B| + |A| + |B| + n1*|C|) / n1 + (n1*|C| + n1*|C| + |C|) / n2."""
    a, b, c = float(r1) * c1, float(r2) * c2, float(r1) * c2
    n1 = min(_nblocks(c1, bs), max(1, tasks))
    n2 = min(_nblocks(r1, bs) * _nblocks(c2, bs), max(1, tasks))
    return (a + b + a + b + n1 * c) / n1 + (n1 * c + n1 * c + c) / n2
