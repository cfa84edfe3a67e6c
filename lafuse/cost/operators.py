"""White-box time estimates of single runtime instructions (paper 003 sec. 3.3, paper 001 sec. 4.2).

An instruction's estimate is a cost vector ``[io, compute]``:

* ``io``: reading or writing persistent data (``read``/``write``), by format: text formats by the
  parse/format rate per cell, binary (.npy) by bandwidth over its serialized size;
* ``compute``: the interpreter's per-instruction overhead plus the roofline maximum of main-memory
  time (bytes of inputs read and output written, over the measured bandwidths) and operation time
  (FLOPs over the BLAS rate for matrix products and factorizations; weighted cells over the
  element-wise or transcendental rate; non-zeros over the sparse rate for sparse inputs).

Sizes come from the instruction's HOP (dims and nnz as propagated at compile or recompile time).
A matrix whose dims are unknown is priced at ``DEFAULT_UNKNOWN_DIM`` per unknown dim and the
estimate is marked ``exact=False``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lafuse.cost import constants as K
from lafuse.cost.profile import HardwareProfile
from lafuse.formats import CSC, CSR, DENSE, NARROW_COLS, NARROW_MIN_ROWS, format_bytes, sparse_format
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.patterns import SQUARED_LOSS_BLOCK_BYTES
from lafuse.hops.sizes import slot_arg
from lafuse.lang.builtins import FULL_AGGS, LAPACK, ZERO_PRESERVING_UNARY


@dataclass(frozen=True)
class Cost:
    """Seconds of IO and of compute; ``exact`` is False when unknown sizes were guessed."""

    io: float = 0.0
    compute: float = 0.0
    exact: bool = True

    @property
    def total(self) -> float:
        return self.io + self.compute

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.io + other.io, self.compute + other.compute, self.exact and other.exact)

    def scale(self, w: float) -> Cost:
        return Cost(self.io * w, self.compute * w, self.exact)


ZERO = Cost()

TRANSCENDENTAL = {"exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "sigmoid"}
TRIG = {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh"}
DIVIDE = {"/", "%%", "%/%"}
FULL_AGG = FULL_AGGS | {"min", "max", "length", "nrow", "ncol"}
NO_DATA = {"tread", "twrite", "get", "time", "stop", "assert", "list", "lrix", "llix", "exists", "nrow", "ncol",
           "length"}


@dataclass(frozen=True)
class Meta:
    """Size facts of one operand: rows, cols, nnz (-1 unknown), matrix or not, guessed or not."""

    rows: int
    cols: int
    nnz: int
    matrix: bool
    exact: bool
    fmt: str | None = None  # a format the plan fixed (a convert instruction's result); None: the default rule

    @property
    def cells(self) -> float:
        return float(self.rows) * float(self.cols) if self.matrix else 1.0

    @property
    def sparse(self) -> bool:
        """The runtime's format choice (formats.sparse_format)."""
        if self.fmt is not None:
            return self.matrix and self.fmt in (CSR, CSC)
        return self.matrix and sparse_format(self.rows, self.cols, self.nnz)

    @property
    def nz(self) -> float:
        return float(self.nnz) if self.nnz >= 0 else self.cells

    @property
    def bytes(self) -> float:
        if not self.matrix:
            return 8.0
        fmt = self.fmt if self.fmt == CSC else CSR if self.sparse else DENSE
        return format_bytes(fmt, self.rows, self.cols, self.nz)


_memo = threading.local()


@contextmanager
def nnz_memo() -> Iterator[None]:
    """Within this block (one thread) every HOP's non-zero estimate is computed once: the fusion
    selector costs the same HOPs again and again, and each estimate recursed through all of the HOP's
    ancestors (4,654 estimates for 644 lookups on the AutoEncoder's loop body). The caller keeps the
    DAG unchanged while the block runs; keys hold the hints object, so another hints dict is another key."""
    prev = getattr(_memo, "d", None)
    _memo.d = {}
    try:
        yield
    finally:
        _memo.d = prev


def meta(h: Hop, hints: dict[str, float] | None = None) -> Meta:
    if h.dt != MATRIX:
        return Meta(1, 1, 1, False, True)
    r, c = h.rows, h.cols
    exact = r >= 0 and c >= 0
    r = r if r >= 0 else K.DEFAULT_UNKNOWN_DIM
    c = c if c >= 0 else K.DEFAULT_UNKNOWN_DIM
    nnz = float(h.nnz) if h.nnz >= 0 else _estimate(h, float(r) * float(c), hints, 0, (id(h), r, c))
    return Meta(r, c, int(nnz) if nnz >= 0 else -1, True, exact, h.params.get("format"))


def _estimate(h: Hop, cells: float, hints: dict[str, float] | None, depth: int, key: tuple) -> float:
    """estimate_nnz, once per ``key`` inside nnz_memo() (the entry holds ``h`` and ``hints``, so their
    ids, part of the key, are not reused while it lives)."""
    memo = getattr(_memo, "d", None)
    if memo is None:
        return estimate_nnz(h, cells, hints, depth)
    key = (*key, id(hints))
    got = memo.get(key)
    if got is None:
        got = memo[key] = (estimate_nnz(h, cells, hints, depth), h, hints)
    return got[0]


SPARSE_SAFE_UNARY = ZERO_PRESERVING_UNARY | {"t", "rev"}


def estimate_nnz(h: Hop, cells: float, hints: dict[str, float] | None = None, depth: int = 0) -> float:
    """Worst-case non-zeros of a HOP whose nnz is not known exactly (the compiler only tracks exact
    nnz): rand's sparsity argument, sparse-safe operations keep their input's non-zeros, ``*``
    keeps the sparser side, ``+``/``-`` add them up (capped at the cell count). ``hints`` carries the
    estimates of variables assigned in earlier blocks (by the program coster). -1 = no estimate."""
    if depth > 20 or cells <= 0:
        return -1
    ins = h.inputs
    mats = [i for i in ins if i.dt == MATRIX]

    def nz(x: Hop) -> float:
        if x.nnz >= 0:
            return float(x.nnz)
        xc = float(max(x.rows, 0)) * float(max(x.cols, 0))
        # (memoized: an input's estimate at its first depth; they differ only beyond the depth bound)
        e = _estimate(x, xc, hints, depth + 1, ("nz", id(x)))
        return e if e >= 0 else xc

    if h.op == "tread":
        return min(cells, hints.get(h.name or "", -1)) if hints else -1
    if h.op in ("rand", "Rand"):
        sp = _literal_arg(h, "sparsity")
        if isinstance(sp, (int, float)) and not isinstance(sp, bool):
            return min(cells, float(sp) * cells)
        return -1
    if not mats:
        return -1
    if h.kind == "unary" and h.op in SPARSE_SAFE_UNARY or h.op in ("t", "rev"):
        return min(cells, nz(mats[0]))
    def density(x: Hop) -> float:
        xc = float(max(x.rows, 1)) * float(max(x.cols, 1))
        return min(1.0, nz(x) / xc)

    extreme = _extreme_indicator(h)
    if extreme is not None:
        return min(cells, extreme)
    if h.kind == "binary" and h.op in ("*", "&"):  # broadcasting-aware: the sparser side's density
        return cells * min(density(m) for m in mats)
    if h.kind == "binary" and h.op in ("/", "^") and len(mats) == 1 and mats[0] is ins[0]:
        return min(cells, nz(mats[0]))  # X / s, X ^ s (s > 0 assumed)
    if h.kind == "binary" and h.op in ("+", "-", "|") and len(mats) == 2:
        return cells * min(1.0, density(mats[0]) + density(mats[1]))
    if h.kind == "matmult" and len(mats) == 2:
        a, b = mats
        k = max(a.cols, 1)
        sa = nz(a) / max(float(a.rows) * k, 1.0)
        sb = nz(b) / max(float(k) * b.cols, 1.0)
        return cells * (1.0 - (1.0 - min(sa * sb, 1.0)) ** k)
    if h.kind == "rix" and mats:
        src = mats[0]
        src_cells = float(max(src.rows, 1)) * float(max(src.cols, 1))
        return min(cells, nz(src) * cells / src_cells)
    return -1


_FLIP = {"<=": ">=", ">=": "<=", "==": "=="}
_AT_EXTREME = {("rowMins", "<="), ("rowMins", "=="), ("colMins", "<="), ("colMins", "=="),
               ("rowMaxs", ">="), ("rowMaxs", "=="), ("colMaxs", ">="), ("colMaxs", "==")}


def _extreme_indicator(h: Hop) -> float | None:
    """Non-zeros of ``X <= rowMins(X)``, ``X == rowMaxs(X)`` and the like (either operand order; column
    extremes too): true only at each row's (column's) extreme, one cell per row unless values tie.
    Without it the indicator was priced dense: KMeans' assignment ``D <= rowMins(D)`` over 1e5 x 10 is
    10% dense and the runtime makes it CSR (SystemDS's format rule), which the cost did not see."""
    if h.kind != "binary" or len(h.inputs) != 2 or h.op not in _FLIP:
        return None
    a, b = h.inputs
    op = h.op
    if a.kind == "agg_unary":
        a, b, op = b, a, _FLIP[op]
    if b.kind != "agg_unary" or (b.op, op) not in _AT_EXTREME or not b.inputs or b.inputs[0] is not a:
        return None
    n = a.rows if b.op.startswith("row") else a.cols
    return float(n) if n >= 0 else None


def mem_times(prof: HardwareProfile, read_bytes: float, write_bytes: float) -> tuple[float, float]:
    """Seconds of reading and of writing an operation's operands: the share of its working set
    (read + written bytes) that fits the last-level cache moves at ``cache_bw``, the rest at the
    main-memory rates. Why: an interpreter of whole-matrix operations keeps reusing operands, and
    those that fit the cache stream 2-3x faster than memory. Measured here (NumPy ``x * y`` with
    fresh outputs from the reused heap, L3 32 MiB): 40 GB/s of read + written bytes at a 24 MB
    working set, 27 GB/s at 96 MB, 22 GB/s at 240 MB. Inside a script other live operands compete for
    the cache (``CACHE_SHARE``): ``X * Y`` over 8 MB operands took 0.81 ms per call in a loop of
    ``sum(X * Y * Z)``, 0.57-0.63 ms alone; this model gives 0.65 ms."""
    ws = read_bytes + write_bytes
    if ws <= 0.0:
        return 0.0, 0.0
    f = min(1.0, prof.cache_bytes * K.CACHE_SHARE / ws)
    cache = max(prof.cache_bw, prof.mem_read_bw, prof.mem_write_bw)  # (a profile of defaults only)
    return (read_bytes * (f / cache + (1.0 - f) / prof.mem_read_bw),
            write_bytes * (f / cache + (1.0 - f) / prof.mem_write_bw))


def kernel_slowdown(prof: HardwareProfile) -> float:
    """How much slower kernels run on the profiled machine than where the per-row, per-non-zero and
    FUSED_* constants were measured, judged by the element-wise rate: an uncalibrated profile's
    conservative defaults then slow fused and unfused operators alike, so neither side of a fusion
    decision is favoured."""
    return K.KERNEL_CONSTANTS_ELEMENTWISE_RATE / max(prof.elementwise_rate, 1.0)


def gemm_rate(prof: HardwareProfile, small_dim: float, ws_bytes: float = float("inf"),
              mid_dim: float = 0.0) -> float:
    """FLOP/s of a dense BLAS product whose smallest dimension is ``small_dim`` and whose operands and
    result take ``ws_bytes``: the calibrated rate, or far less for a product with a small dimension
    (constants.SKINNY_GEMM_FLOPS, measured over 1e6 rows). That cap is the memory traffic of a tall
    product; one whose working set fits the cache's share runs at CACHED_SKINNY_GEMM_SHARE of the
    calibrated rate. Why: a mini-batch's 256 x 100 times 100 x 50 (2.6 MFLOP, cached) was priced at
    the cap, 233 us, and takes 60 us (NumPy, 2 threads); AutoEncoder's unfused products were
    estimated at 2.3x their time, and its fused row kernels, which do the same products per block,
    looked cheap. Not a mix weighted by the cached share: X 1e5 x 50 times 50 x 10 (40 MB) runs near
    the cap (8-11 GFLOP/s measured), a mix priced it at 18, and the cost policy stopped fusing
    KMeans' distance kernels. The cap rises with the product's middle dimension ``mid_dim`` (the
    second smallest of its three) beyond SKINNY_GEMM_MID_REF, as the square root of their ratio: with
    one small dimension only, OpenBLAS blocks the other two. Why: GNMF's X %*% t(H) and t(W) %*% X
    (5e4 x 1000, rank 10) were priced at 71 ms, ran 33-57, and the cost policy fused the first
    into a row kernel no faster than it (constants.SKINNY_GEMM_MID_REF)."""
    if 1 < small_dim <= K.SKINNY_GEMM_DIM:
        scale = prof.blas_flops / K.SKINNY_GEMM_REF_FLOPS
        cached = ws_bytes <= prof.cache_bytes * K.CACHE_SHARE
        wide = max(1.0, mid_dim / K.SKINNY_GEMM_MID_REF) ** 0.5
        cap = prof.blas_flops * K.CACHED_SKINNY_GEMM_SHARE if cached else K.SKINNY_GEMM_FLOPS * scale * wide
        return min(cap, small_dim * K.SKINNY_GEMM_FLOPS_PER_DIM * scale)
    return prof.blas_flops


def _roofline(prof: HardwareProfile, read_bytes: float, write_bytes: float, op_time: float) -> float:
    return max(sum(mem_times(prof, read_bytes, write_bytes)), op_time)


def _literal_arg(h: Hop, name: str) -> Any:
    a = slot_arg(h, name)
    return a.value if a is not None and a.is_literal else h.params.get(name)


def _io_read(h: Hop, out: Meta, prof: HardwareProfile) -> float:
    fmt = str(_literal_arg(h, "format") or "")
    name = (h.name or "").lower()
    if fmt == "binary" or name.endswith(".npy"):
        return format_bytes(DENSE, out.rows, out.cols, out.nz) / prof.binary_read_bw
    return (out.nz if fmt in ("text", "mm") else out.cells) / prof.csv_read_rate


def _matmult_flops(a: Meta, b: Meta) -> tuple[float, bool]:
    """(FLOPs, through BLAS?) of A %*% B: dense products run at the BLAS rate; with a sparse
    operand every non-zero meets each column of the other side (2 FLOPs each) in a scalar loop."""
    if a.sparse and b.sparse:  # each non-zero A[i,k] meets the non-zeros of row k of B
        return 2.0 * a.nz * b.nz / max(float(a.cols), 1.0), False
    if a.sparse or b.sparse:
        if a.sparse:
            return 2.0 * a.nz * b.cols, False
        return 2.0 * b.nz * a.rows, False
    return 2.0 * a.rows * a.cols * b.cols, True


def distributed_cost(opcode: str, h: Hop, prof: HardwareProfile, inplace: bool, hints: dict[str, float] | None,
                     block: int) -> Cost:
    """A Dask instruction: a move (``scatter``, ``collect``) costs its bytes at the cluster's transfer rate
    and a task per block; an operator costs its local estimate (one worker's compute: a conservative
    bound, the workers share it) and a task per block of its largest matrix. Why no more: the
    per-task overhead is what decides small operators (keep them local) and the moves are what
    a hybrid plan trades against local memory."""
    out = meta(h, hints)
    mats = [m for m in (out, *(meta(i, hints) for i in h.inputs)) if m.matrix]
    exact = all(m.exact for m in mats)
    tasks = max((math.ceil(max(m.rows, 1.0) / block) * math.ceil(max(m.cols, 1.0) / block) for m in mats),
                default=1.0)
    if opcode in ("scatter", "collect"):
        return Cost(out.bytes / K.DASK_TRANSFER_BW, tasks * K.DASK_TASK_TIME, exact)
    local = instruction_cost(opcode, h, prof, inplace, hints)
    return Cost(local.io, local.compute + tasks * K.DASK_TASK_TIME, local.exact and exact)


def instruction_cost(opcode: str, h: Hop, prof: HardwareProfile, inplace: bool = False,
                     hints: dict[str, float] | None = None, block: int = 0,
                     reads: list[Hop] | None = None, transposed: tuple[bool, bool] | None = None) -> Cost:
    """Estimate one instruction that computes HOP ``h`` with opcode ``opcode`` (``fcall`` bodies are
    costed by the program coster, not here); ``block`` > 0: it runs on Dask with blocks of that size
    (``distributed_cost``). ``reads``/``transposed``: the instruction's own operands where they are
    not ``h``'s inputs (a loss operator's X, U and V, the factors read transposed in place or not)."""
    if block > 0:
        return distributed_cost(opcode, h, prof, inplace, hints, block)
    ins = [meta(i, hints) for i in h.inputs]
    out = meta(h, hints)
    exact = out.exact and all(m.exact for m in ins)
    mats = [m for m in ins if m.matrix]
    overhead = prof.matrix_op_overhead if mats or out.matrix else prof.instruction_overhead
    read = sum(m.bytes for m in mats)
    write = out.bytes if out.matrix else 0.0
    io = 0.0
    op_time = 0.0
    on_top = 0.0  # s beyond the roofline of memory traffic and operations
    kind = h.kind

    if opcode in NO_DATA or opcode == "fcall":
        return Cost(0.0, overhead, exact)
    if kind == "spoof":  # a fused operator: Eq. 4 of paper 000 over its CPlan
        # deferred: cost.fused imports this module (a cycle inside cost/)
        from lafuse.cost.fused import fused_cost

        out_hop = h if h.dt == MATRIX else None
        return Cost(0.0, fused_cost(h.params["cplan"], h.inputs, out_hop, prof, hints), exact)
    if kind == "cuboid":  # a partial plan of several operators (fusion.fuseme): its model's operations
        m = h.params["model"]
        flops = m.mm_ops + sum(s.ops for s in (m.L, m.R, m.O))
        return Cost(0.0, overhead + flops / prof.blas_flops + (read + write) / prof.mem_read_bw, exact)
    if opcode == "pread":
        io = _io_read(h, out, prof)
        return Cost(io, overhead + write / prof.mem_write_bw, exact)
    if opcode == "write":
        tgt = ins[0] if ins else out
        fmt = _literal_arg(h, "format") or "text"
        rate_cells = tgt.nz if fmt in ("text", "mm") else tgt.cells
        io = rate_cells / prof.csv_write_rate if fmt != "binary" else tgt.bytes / prof.binary_read_bw
        return Cost(io, overhead, exact)
    if opcode == "convert":  # a plan's format change: one pass over the non-zeros, the result written whole
        t_read, t_write = mem_times(prof, read, write)
        once = t_read + t_write + sum(m.nz for m in mats) / prof.sparse_rate
        # (a conversion kept with a variable's value, plan.layout.local: made once for the loop's executions)
        return Cost(0.0, overhead + once / float(h.params.get("held", 1.0)), exact)
    if opcode in ("print", "toString"):
        # toString formats at most rows x cols cells (100 x 100 by default)
        cells = min(max((m.cells for m in mats), default=1.0), 100.0 * 100.0)
        return Cost(0.0, overhead + cells / prof.csv_write_rate, exact)
    if opcode == "%*%" and len(mats) == 2:
        flops, blas = _matmult_flops(mats[0], mats[1])
        if blas:
            op_time = flops / prof.blas_flops + mem_times(prof, 0.0, write * K.BLAS_RESULT_PASSES)[1]
            dims = sorted((mats[0].rows, mats[0].cols, mats[1].cols))
            op_time = max(op_time, flops / gemm_rate(prof, dims[0], read + write, dims[1]))
            if min(out.rows, out.cols) <= K.SKINNY_MM_COLS:  # matrix-vector-like: BLAS per row of the tall side
                tall = max(mats[0].rows, mats[0].cols, mats[1].rows, mats[1].cols)
                by_columns = h.inputs[0].kind == "reorg" and h.inputs[0].op == "t" and out.rows < out.cols or \
                    out.rows <= K.SKINNY_MM_COLS and mats[0].cols > mats[0].rows
                row = K.SKINNY_TMM_ROW_TIME if by_columns else K.SKINNY_MM_ROW_TIME
                op_time = max(op_time, tall * row * kernel_slowdown(prof))
        else:  # traversal of the non-zeros, or the multiply-adds at element-wise speed, whichever dominates
            nz = sum(m.nz for m in mats if m.sparse)
            op_time = max(nz / prof.sparse_rate, flops / (2.0 * prof.elementwise_rate))
            if mats[1].sparse and not mats[0].sparse:
                op_time *= K.WEIGHT_DENSE_SPARSE_MM
    elif opcode == "mmchain" and len(mats) == 2:
        # t(X) %*% (w * (X %*% v)) lowered as one instruction (hops.patterns.mmchains): HOP h is the
        # outer product. A dense X is scanned once in cache-sized row blocks, both products per block
        # (two products read it twice: GLM's 1e5 x 100 chain 9.8 ms, blocked 6.1 ms); a CSR X runs
        # the two products.
        # (the form t(q) %*% X too: X is the larger operand, q the n x k side or its transpose)
        x, q = mats if mats[0].cells >= mats[1].cells else (mats[1], mats[0])
        if x.sparse:
            c = instruction_cost("%*%", h, prof, inplace, hints)
            return Cost(c.io, 2.0 * c.compute, c.exact)
        k, n = sorted((max(q.rows, 1.0), max(q.cols, 1.0)))
        read = x.bytes + 2.0 * q.bytes  # X, and v and w (of q's size at most)
        op_time = 4.0 * x.cells * k / gemm_rate(prof, k, read + write, n)
        if k <= K.SKINNY_MM_COLS:
            op_time = max(op_time, n * (K.SKINNY_MM_ROW_TIME + K.SKINNY_TMM_ROW_TIME) * kernel_slowdown(prof))
    elif opcode in LAPACK and mats:
        n = mats[0].rows
        rhs = mats[1].cols if len(mats) > 1 else n
        flops = {"solve": 2.0 / 3.0 * n ** 3 + 2.0 * n * n * rhs, "cholesky": n ** 3 / 3.0,
                 "det": 2.0 / 3.0 * n ** 3}.get(opcode, 10.0 * n ** 3 if opcode in ("eigen", "svd") else 2.0 * n ** 3)
        op_time = flops / prof.blas_flops
    elif kind in ("binary", "unary", "ternary") or opcode in TRANSCENDENTAL:
        cells = out.cells if out.matrix else max((m.cells for m in mats), default=1.0)
        if any(m.sparse for m in mats) and out.sparse:
            cells = out.nz
        rate = prof.transcendental_rate if opcode in TRANSCENDENTAL else prof.elementwise_rate
        weight = K.WEIGHT_DIVIDE if opcode in DIVIDE else K.WEIGHT_POW if opcode == "^" else \
            K.WEIGHT_SQRT if opcode == "sqrt" else K.WEIGHT_TRIG if opcode in TRIG else K.WEIGHT_SIMPLE
        op_time = cells * weight / rate if mats else 0.0
        broadcast = len(mats) == 2 and out.matrix and not any(m.sparse for m in mats) and \
            any(m.cells < out.cells for m in mats)
        if broadcast and 1 < out.cols <= NARROW_COLS and out.rows >= NARROW_MIN_ROWS:
            # kernels_elementwise._narrow_broadcast: one strided pass per column, each touching all
            # of the operands' and the result's cache lines
            read, write = read * out.cols, write * out.cols
        elif broadcast and out.cols < K.SHORT_ROW_COLS:
            vec = K.BROADCAST_COL_ROW_TIME if any(m.cols == 1 for m in mats) else K.BROADCAST_ROW_ROW_TIME
            # (on top of the memory time: NumPy's inner loop restarts per row, the hardware does not overlap it)
            on_top = out.rows * vec * kernel_slowdown(prof)
        csr = [m for m in mats if m.sparse]
        if len(mats) == 2 and len(csr) == 1 and (opcode in ("*", "&") or out.sparse):
            # a CSR operand against a dense one (same shape or a vector; kernels_elementwise
            # _sparse_matrix): the row of every non-zero, a gather of the dense side there, the
            # result's zeros dropped
            op_time = max(op_time, (csr[0].rows * K.CSR_DENSE_ROW_TIME + csr[0].nz * K.CSR_DENSE_NZ_TIME)
                          * kernel_slowdown(prof))
        if len(mats) == 2 and all(m.sparse for m in mats) and mats[0].rows == mats[1].rows \
                and mats[0].cols == mats[1].cols:
            # SciPy's CSR-CSR binary ops merge sorted indices in two passes and allocate the result
            op_time = max(op_time, (mats[0].nz + mats[1].nz) * K.WEIGHT_SPARSE_BINARY / prof.sparse_rate)
        if not mats and opcode in DIVIDE:
            overhead += K.SCALAR_DIVIDE_OVERHEAD
        if out.matrix and out.sparse and mats and not csr:
            # computed dense, then made CSR by its sparsity (kernels_common.fmt_owned): SciPy's
            # conversion finds the non-zeros (a pass over the cells) and builds the arrays per non-zero
            on_top += (out.cells * K.DENSE_TO_CSR_CELL_TIME + out.nz * K.DENSE_TO_CSR_NZ_TIME) * \
                kernel_slowdown(prof)
    elif opcode in ("wsloss", "sampledsum"):
        # (h is the sum; the plan found the pattern: hops.patterns.squared_losses / sampled_sums)
        assert reads is not None and len(reads) == 3, f"{opcode} is costed from its operands X, U, V"
        x_hop, u, v = reads
        ta = (transposed or (False, False))[0]
        x = meta(x_hop, hints)
        k = float(max(u.rows if ta else u.cols, 1))
        read = x.bytes + meta(u, hints).bytes + meta(v, hints).bytes
        if opcode == "wsloss":
            # the product a block of rows at a time into a cached buffer, the difference, square and
            # sum there; memory traffic is X and the factors only
            cells = float(max(x_hop.rows, 0)) * max(x_hop.cols, 0)
            op_time = 2.0 * cells * k / gemm_rate(prof, k, float(SQUARED_LOSS_BLOCK_BYTES), float(x_hop.cols)) \
                + 3.0 * cells / prof.elementwise_rate + (x.nz / prof.sparse_rate if x.sparse else 0.0)
        else:  # a gathered row of U and of V and their dot product per non-zero of X, g over those
            op_time = x.nz * (2.0 * k + K.SAMPLED_NZ_CELLS) / prof.elementwise_rate + x.nz / prof.sparse_rate
    elif kind == "agg_unary" and mats:
        x = mats[0]
        cells = x.nz if x.sparse else x.cells
        if x.sparse:
            op_time = cells / prof.sparse_rate
        elif opcode in ("rowSums", "rowMaxs", "rowMins") and 0 < x.cols <= NARROW_COLS < x.rows:
            op_time = cells / prof.elementwise_rate  # column-at-a-time (kernels_agg)
        elif opcode.startswith("row") and x.cols < 64 or opcode.startswith("cum"):
            op_time = cells / prof.rowagg_rate  # short inner reductions / sequential scans
        else:
            op_time = cells / prof.elementwise_rate
    elif opcode in ("rand", "Rand", "sample"):
        # lafuse's rand reproduces SystemDS's Java generator (calibrated rate per generated value)
        op_time = (out.nz * K.WEIGHT_SPARSE_RAND if out.sparse else out.cells) / prof.rand_rate
    elif opcode in ("order", "sort"):
        n = mats[0].rows if mats else 1
        op_time = n * max(math.log2(max(n, 2)), 1.0) * 4.0 / prof.elementwise_rate
    elif opcode in ("table", "aggregate", "removeEmpty", "replace", "contains"):
        cells = sum(m.nz if m.sparse else m.cells for m in mats)
        op_time = cells * 4.0 / prof.elementwise_rate
    elif opcode == "t":
        # a strided copy: every cell read and written out of order
        x = mats[0] if mats else out
        op_time = (x.nz / prof.sparse_rate) if x.sparse else x.cells / prof.transpose_rate
    elif opcode in ("rix",):
        read = write  # only the selected cells are touched
    elif opcode == "lix":
        if inplace or (len(mats) > 1 and mats[0].cells > 10 * mats[1].cells):
            read, write = mats[-1].bytes, mats[-1].bytes
    compute = overhead + _roofline(prof, read, write, op_time) + on_top
    return Cost(io, compute, exact)
