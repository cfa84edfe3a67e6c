"""Blocked distributed formats with analytical costs, and the benchmark graphs of paper 002 §8.4.

Formats (paper 002 §3's physical matrix implementations for a cluster): ``single`` (the matrix as one
block on one worker), ``rows:h`` (row strips of height h), ``cols:w`` (column strips), ``tile:b``
(square b x b tiles), each of dense blocks or, with a ``/csr`` suffix, CSR blocks. The three
catalogue sizes follow the paper's Fig. 13: single and tiles (10 formats), single, strips and tiles
(16), and all of them in both block formats (32).

Implementations of a matrix product (``matmul``), each a distributed method with its own input
layouts (the methods of paper 004 §3 and SystemDS's): one worker (single x single); broadcasting the
right or the left operand to the strips of the other; a tile join (the tiles of A and B replicated
to the products that need them, partial products aggregated); an outer product of row and column
strips into tiles; an inner product of column and row strips aggregated into one block. ``add`` and
``relu`` run block-wise on operands of one layout. Transformations: re-blocking into any layout (a
shuffle of the matrix over the network) and switching the blocks between dense and CSR (local).

Costs are analytical, in seconds, from a hardware profile (cost.profile: BLAS FLOP/s, network
bandwidth, element-wise and sparse rates) and the cluster's workers: the work spread over the
workers, the bytes each moves, a fixed time per task. They are the searches' test bed and the
paper's benchmark, not yet a fitted model of lafuse's own kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from lafuse.cost import constants as K
from lafuse.cost.profile import HardwareProfile
from lafuse.plan.layout.graph import Catalogue, Graph, Impl, MType, Transform

TILES = (250, 500, 1000, 1250, 2000, 2500, 4000, 5000, 10000)  # block sides of the tile formats
STRIPS = (1000, 2000, 5000)  # strip heights / widths
KINDS = {"block": "single and tiles", "strip": "single, strips and tiles", "all": "all, dense and CSR blocks"}


@dataclass(frozen=True)
class Layout:
    kind: str  # "single", "rows", "cols", "tile"
    size: int  # strip height/width or tile side (0 for single)
    csr: bool

    @staticmethod
    def parse(fmt: str) -> Layout:
        base, _, blocks = fmt.partition("/")
        kind, _, size = base.partition(":")
        return Layout(kind, int(size or 0), blocks == "csr")

    def name(self) -> str:
        base = self.kind if self.kind == "single" else f"{self.kind}:{self.size}"
        return base + ("/csr" if self.csr else "")

    def blocks(self, m: MType) -> int:
        """How many blocks hold a matrix of type ``m``."""
        if self.kind == "single":
            return 1
        if self.kind == "rows":
            return -(-m.rows // self.size)
        if self.kind == "cols":
            return -(-m.cols // self.size)
        return -(-m.rows // self.size) * -(-m.cols // self.size)


def formats(kind: str = "all") -> tuple[str, ...]:
    if kind not in KINDS:
        raise ValueError(f"unknown format set {kind!r}; one of {sorted(KINDS)}")
    dense = ["single"] + [f"tile:{b}" for b in TILES]
    if kind != "block":
        dense += [f"rows:{h}" for h in STRIPS] + [f"cols:{w}" for w in STRIPS]
    return tuple(dense + ([f + "/csr" for f in dense] if kind == "all" else []))


@dataclass(frozen=True)
class Cluster:
    """The machines the costs assume (paper 002 §8.4: 10 workers)."""
    workers: int = 10
    worker_bytes: float = 16e9  # bytes one worker holds
    prof: HardwareProfile = HardwareProfile()


def _bytes(m: MType, csr: bool) -> float:
    if csr:
        nnz = m.cells if m.nnz < 0 else m.nnz
        return 12.0 * nnz + 4.0 * (m.rows + 1)
    return 8.0 * m.cells


def catalogue(kind: str = "all", cluster: Cluster = Cluster()) -> Catalogue:
    """The blocked catalogue over ``formats(kind)``."""
    fmts = formats(kind)
    cl, prof = cluster, cluster.prof
    W = cl.workers

    def holds(m: MType, fmt: str) -> bool:
        lay = Layout.parse(fmt)
        if lay.kind == "single":
            return _bytes(m, lay.csr) <= cl.worker_bytes
        return lay.size <= max(m.rows, m.cols)

    def tasks(n: float) -> float:  # n tasks over the workers, each paying the task time
        return K.DASK_TASK_TIME * max(1.0, n / W)

    def work(ms: tuple[MType, ...], lays: tuple[Layout, ...]) -> float:
        """Seconds of arithmetic on one worker: dense at BLAS speed; with a CSR operand, each of its
        non-zeros meets a row or column of the other operand, at the sparse rate."""
        a, b = ms
        if lays[0].csr:
            return (a.nnz if a.nnz >= 0 else a.cells) * b.cols / prof.sparse_rate
        if lays[1].csr:
            return (b.nnz if b.nnz >= 0 else b.cells) * a.rows / prof.sparse_rate
        return 2.0 * a.rows * a.cols * b.cols / prof.blas_flops

    def mm(name: str, want: tuple[str, str], out_kind: str, spread: bool, net: str) -> Impl:
        def layouts(names: tuple[str, ...]) -> tuple[Layout, ...]:
            return tuple(Layout.parse(f) for f in names)

        def out(ms: tuple[MType, ...], names: tuple[str, ...], m: MType) -> str | None:
            la, lb = layouts(names)
            if (la.kind, lb.kind) != want or ms[0].cols != ms[1].rows:
                return None
            if "single" not in want and la.size != lb.size:  # (two blocked operands: their blocks meet)
                return None
            size = {"single": 0, "rows": la.size, "cols": lb.size, "tile": la.size or lb.size}[out_kind]
            return Layout(out_kind, size, False).name()

        def cost(ms: tuple[MType, ...], names: tuple[str, ...], m: MType) -> float:
            la, lb = layouts(names)
            a, b = ms
            ba, bb, bc = _bytes(a, la.csr), _bytes(b, lb.csr), _bytes(m, False)
            secs = work(ms, (la, lb))
            if net == "gather":  # both operands to one worker
                moved = (ba + bb) / prof.net_bw
            elif net == "right":  # B to every worker
                moved = bb / prof.net_bw
            elif net == "left":
                moved = ba / prof.net_bw
            elif net == "tiles":  # A's tiles to each column of tiles of C, B's to each row, partials summed
                nb = max(1, -(-b.cols // la.size))
                na = max(1, -(-a.rows // la.size))
                nk = max(1, -(-a.cols // la.size))
                moved = (ba * nb + bb * na + bc * nk) / (W * prof.net_bw)
            elif net == "outer":  # each row strip meets each column strip
                moved = (ba * lb.blocks(b) + bb * la.blocks(a)) / (W * prof.net_bw)
            else:  # "inner": each strip pair yields a whole partial C, summed into one block
                moved = la.blocks(a) * bc / prof.net_bw
            nblocks = la.blocks(a) * lb.blocks(b) if net in ("tiles", "outer") else max(la.blocks(a), lb.blocks(b))
            return (secs / W if spread else secs) + moved + tasks(nblocks)

        return Impl(name, "matmul", 2, out, cost)

    impls = [
        mm("mm-one-worker", ("single", "single"), "single", False, "gather"),
        mm("mm-broadcast-right", ("rows", "single"), "rows", True, "right"),
        mm("mm-broadcast-left", ("single", "cols"), "cols", True, "left"),
        mm("mm-tile-join", ("tile", "tile"), "tile", True, "tiles"),
        mm("mm-outer-strips", ("rows", "cols"), "tile", True, "outer"),
        mm("mm-inner-strips", ("cols", "rows"), "single", True, "inner"),
    ]

    def cellwise(op: str, arity: int, rate: float) -> Impl:
        def out(ms: tuple[MType, ...], names: tuple[str, ...], m: MType) -> str | None:
            lays = [Layout.parse(f) for f in names]
            if any((x.kind, x.size) != (lays[0].kind, lays[0].size) for x in lays):
                return None
            return Layout(lays[0].kind, lays[0].size, False).name()

        def cost(ms: tuple[MType, ...], names: tuple[str, ...], m: MType) -> float:
            lay = Layout.parse(names[0])
            spread = W if lay.kind != "single" else 1
            return m.cells * arity / (rate * spread) + tasks(lay.blocks(m))

        return Impl(f"{op}-blockwise", op, arity, out, cost)

    impls += [cellwise("add", 2, prof.elementwise_rate), cellwise("relu", 1, prof.elementwise_rate)]

    def reblock(target: str) -> Transform:
        lay_t = Layout.parse(target)

        def out(m: MType, fmt: str) -> str | None:
            lay = Layout.parse(fmt)
            if (lay.kind, lay.size) == (lay_t.kind, lay_t.size):
                return None
            return Layout(lay_t.kind, lay_t.size, lay.csr).name()

        def cost(m: MType, fmt: str) -> float:
            lay = Layout.parse(fmt)
            nbytes = _bytes(m, lay.csr)
            spread = 1 if lay_t.kind == "single" or lay.kind == "single" else W
            return nbytes / (spread * prof.net_bw) + tasks(lay.blocks(m) + lay_t.blocks(m))

        return Transform(f"reblock-{target}", out, cost)

    def switch(to_csr: bool) -> Transform:
        def out(m: MType, fmt: str) -> str | None:
            lay = Layout.parse(fmt)
            return None if lay.csr == to_csr else Layout(lay.kind, lay.size, to_csr).name()

        def cost(m: MType, fmt: str) -> float:
            lay = Layout.parse(fmt)
            spread = 1 if lay.kind == "single" else W
            return m.cells / (prof.elementwise_rate * spread) + tasks(lay.blocks(m))

        return Transform("to-csr" if to_csr else "to-dense", out, cost)

    targets = sorted({Layout(x.kind, x.size, False).name() for x in map(Layout.parse, fmts)})
    transforms = [reblock(t) for t in targets]
    if kind == "all":
        transforms += [switch(True), switch(False)]
    return Catalogue(fmts, tuple(impls), tuple(transforms), holds)


# ---------------------------------------------------------------- the benchmark graphs (§8.4)
def chain_graph(shape: str, scale: int, n: int = 20000, fmt: str = "single") -> Graph:
    """Paper 002 §8.4's matrix-multiply chains at ``scale``, every input an n x n matrix stored as
    ``fmt`` (the paper: single tuples of 20,000 x 20,000). Per scale, T1 = A B, T2 = C D,
    T3 = T1 T2, O1 = T3 E, and then ``tree``: O2 = O1 F, the next scale's A is O2; ``dag1``:
    O2 = T3 O1, the next A is O2; ``dag2``: O2 = T3 O1, the next A is O2 and the next C is O1."""
    if shape not in ("tree", "dag1", "dag2"):
        raise ValueError(f"unknown chain {shape!r}; one of tree, dag1, dag2")
    g = Graph()
    m = MType(n, n)
    A = C = None
    for s in range(1, scale + 1):
        a = A if A is not None else g.source(m, fmt, f"A{s}")
        b = g.source(m, fmt, f"B{s}")
        c = C if C is not None else g.source(m, fmt, f"C{s}")
        d = g.source(m, fmt, f"D{s}")
        t1 = g.add("matmul", m, a, b, name=f"T1_{s}")
        t2 = g.add("matmul", m, c, d, name=f"T2_{s}")
        t3 = g.add("matmul", m, t1, t2, name=f"T3_{s}")
        e = g.source(m, fmt, f"E{s}")
        o1 = g.add("matmul", m, t3, e, name=f"O1_{s}")
        if shape == "tree":
            f = g.source(m, fmt, f"F{s}")
            o2 = g.add("matmul", m, o1, f, name=f"O2_{s}")
        else:
            o2 = g.add("matmul", m, t3, o1, name=f"O2_{s}")
        A = o2
        C = o1 if shape == "dag2" else None
    return g
