"""Bit-exact emulation of SystemDS 3.4's ``rand()`` random streams (uniform and normal pdf).

How SystemDS generates ``rand(rows, cols, min, max, sparsity, pdf, seed)`` in CP
(facts read from the 3.4.0 jar's bytecode and checked against its output):

* The matrix is cut into blocks of ``blen`` x ``blen`` cells (``blen`` = 1000 by default); blocks are
  visited row-block by row-block, column blocks inside.
* Block seeds: ``java.util.Random(seed)`` draws 32 ``nextInt()`` values that seed a commons-math
  ``Well1024a``; each block (in the visiting order) takes the next ``Well1024a.nextLong()``.
* Each block seeds its value generator (``java.util.Random``) with its block seed. The first value drawn
  (a uniform, or for ``normal`` the first normal) ``v`` seeds a second ``java.util.Random`` with
  ``(long)(v * Long.MAX_VALUE)`` that decides which cells are non-zero. That first value is consumed even
  when the block is fully dense.
* Uniform cells are ``min + (max - min) * nextDouble()``. Normal cells come from a Box-Muller pair over
  two ``nextDouble()`` values ``u1, u2``: ``sqrt(-2 log u1) * cos(2 pi u2)`` then ``... * sin(2 pi u2)``.
* ``sparsity == 1``: every cell of the block gets the next value, row-major inside the block.
* ``sparsity < 1`` and the block counts as sparse in memory (``MatrixBlock.evalSparseFormatInMemory``
  on the block's size and ``(long)(sparsity * rows * cols)``): the positions are chosen with geometric
  skips ``idx += ceil(log(u) / log(1 - sparsity))`` (``u`` from the non-zero generator) over the cells
  numbered 1..rows*cols of the block in row-major order; every chosen cell gets the next value.
* Otherwise (the block is dense): every cell draws ``u`` from the non-zero generator, and gets the next
  value if ``u <= sparsity``.
* Uniform with ``min == max == 0`` or ``sparsity == 0`` is all zeros; uniform with ``sparsity == 1`` and
  ``min == max`` is a constant fill.

``java.util.Random`` is a 48-bit LCG, so the ``k``-th state after a seed is ``A_k * s + C_k`` (mod 2^48);
the ``A_k, C_k`` tables are built once with NumPy and make a block of 10^6 cells a few vector operations.
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np

from lafuse.formats import SPARSITY_TURN_POINT
from lafuse.runtime.local.kernels_common import TWO63, java_long

_MULT = 0x5DEECE66D
_ADD = 0xB
_MASK48 = (1 << 48) - 1
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_DOUBLE_UNIT = 1.0 / (1 << 53)

DEFAULT_BLOCKSIZE = 1000


def _s32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def _s64(x: int) -> int:
    x &= _M64
    return x - (1 << 64) if x & (1 << 63) else x


class JavaRandom:
    """``java.util.Random`` (scalar, exact)."""

    def __init__(self, seed: int) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        self._seed = (seed ^ _MULT) & _MASK48
        self._next_gaussian: float | None = None

    def next_bits(self, bits: int) -> int:
        self._seed = (self._seed * _MULT + _ADD) & _MASK48
        return _s32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        if bound is None:
            return self.next_bits(32)
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:
            return _s32((bound * r) >> 31)
        u = r
        while True:
            r = u % bound
            if _s32(u - r + m) >= 0:
                return r
            u = self.next_bits(31)

    def next_long(self) -> int:
        return _s64((self.next_bits(32) << 32) + self.next_bits(32))

    def next_double(self) -> float:
        return (((self.next_bits(26) & 0x3FFFFFF) << 27) + (self.next_bits(27) & 0x7FFFFFF)) * _DOUBLE_UNIT

    def next_gaussian(self) -> float:
        """Polar method (StrictMath.log/sqrt; Python's math.log agrees except in rare last-bit cases)."""
        if self._next_gaussian is not None:
            g, self._next_gaussian = self._next_gaussian, None
            return g
        while True:
            v1 = 2 * self.next_double() - 1
            v2 = 2 * self.next_double() - 1
            s = v1 * v1 + v2 * v2
            if 0 < s < 1:
                break
        mul = math.sqrt(-2 * math.log(s) / s)
        self._next_gaussian = v2 * mul
        return v1 * mul


class Well1024a:
    """commons-math3 ``Well1024a`` (k=1024, m1=3, m2=24, m3=10), seeded with an int[32]."""

    R = 32

    def __init__(self, seed_ints: list[int]) -> None:
        if len(seed_ints) != self.R:
            raise ValueError("Well1024a emulation expects exactly 32 seed ints")
        self.v = [x & _M32 for x in seed_ints]
        self.index = 0

    def next32(self) -> int:
        v, idx, r = self.v, self.index, self.R
        irm1 = (idx + r - 1) % r
        v0 = v[idx]
        vm1 = v[(idx + 3) % r]
        vm2 = v[(idx + 24) % r]
        vm3 = v[(idx + 10) % r]
        z0 = v[irm1]
        z1 = v0 ^ (vm1 ^ (vm1 >> 8))
        z2 = ((vm2 ^ (vm2 << 19)) ^ (vm3 ^ (vm3 << 14))) & _M32
        z3 = z1 ^ z2
        z4 = ((z0 ^ (z0 << 11)) ^ (z1 ^ (z1 << 7)) ^ (z2 ^ (z2 << 13))) & _M32
        v[idx] = z3
        v[irm1] = z4
        self.index = irm1
        return z4

    def next_long(self) -> int:
        hi = self.next32()
        lo = self.next32()
        return _s64((hi << 32) | lo)


def setup_seeds_for_rand(seed: int) -> Well1024a:
    """LibMatrixDatagen.setupSeedsForRand for an explicit seed."""
    jr = JavaRandom(seed)
    return Well1024a([jr.next_int() for _ in range(32)])


def block_seeds(seed: int, count: int) -> list[int]:
    well = setup_seeds_for_rand(seed)
    return [well.next_long() for _ in range(count)]


# --------------------------------------------------------------------------------------------------
# vectorized java.util.Random streams
# --------------------------------------------------------------------------------------------------

_M48 = np.uint64(_MASK48)
_B = 2048  # state k = jump(q * _B) applied to state r + 1, with k - 1 = q * _B + r


def _jump(steps: int) -> tuple[int, int]:
    """(A, C) with state_{k+steps} = A * state_k + C (mod 2^48)."""
    a, c = 1, 0
    ma, mc = _MULT, _ADD
    while steps:
        if steps & 1:
            a, c = (a * ma) & _MASK48, (c * ma + mc) & _MASK48
        ma, mc = (ma * ma) & _MASK48, (mc * ma + mc) & _MASK48
        steps >>= 1
    return a, c


def _small_table() -> tuple[np.ndarray, np.ndarray]:
    a = np.empty(_B, dtype=np.uint64)
    c = np.empty(_B, dtype=np.uint64)
    x, y = _MULT, _ADD
    for r in range(_B):  # jumps by 1 .. _B
        a[r], c[r] = x, y
        x, y = (x * _MULT) & _MASK48, (y * _MULT + _ADD) & _MASK48
    return a, c


_SMALL_A, _SMALL_C = _small_table()
_tab_lock = threading.Lock()
_big: list[tuple[int, int]] = [(1, 0)]  # jumps by q * _B


def _big_table(q: int) -> tuple[np.ndarray, np.ndarray]:
    with _tab_lock:
        if len(_big) < q:
            step = _jump(_B)
            a, c = _big[-1]
            while len(_big) < q:
                a, c = (a * step[0]) & _MASK48, (c * step[0] + step[1]) & _MASK48
                _big.append((a, c))
        tab = _big[:q]
    return (np.array([t[0] for t in tab], dtype=np.uint64)[:, None],
            np.array([t[1] for t in tab], dtype=np.uint64)[:, None])


def _states(seed: int, start: int, n: int) -> np.ndarray:
    """LCG states number start+1 .. start+n after ``setSeed(seed)`` (uint64)."""
    s = (seed ^ _MULT) & _MASK48
    if start:
        ja, jc = _jump(start)
        s = (ja * s + jc) & _MASK48
    s0 = np.uint64(s)
    m = min(n, _B)
    with np.errstate(over="ignore"):
        base = (_SMALL_A[:m] * s0 + _SMALL_C[:m]) & _M48
        if n <= _B:
            return base
        qa, qc = _big_table(-(-n // _B))
        return ((qa * base[None, :] + qc) & _M48).reshape(-1)[:n]


def java_doubles(seed: int, n: int, skip: int = 0) -> np.ndarray:
    """``new Random(seed)``: the ``n`` ``nextDouble()`` values after skipping ``skip`` of them."""
    if n <= 0:
        return np.zeros(0, dtype=np.float64)
    st = _states(seed, 2 * skip, 2 * n).reshape(n, 2)
    hi = st[:, 0] >> np.uint64(22)
    lo = st[:, 1] >> np.uint64(21)
    return ((hi << np.uint64(27)) + lo).astype(np.float64) * _DOUBLE_UNIT


def _box_muller(u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
    """Interleaved N1, N2 of SystemDS' RandNPair for each (u1, u2) pair."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(-2.0 * _log(u1))
        t = 6.283185307179586 * u2
        out = np.empty(2 * len(u1), dtype=np.float64)
        out[0::2] = r * _cos(t)
        out[1::2] = r * _sin(t)
    return out


# Java's Math.log/cos/sin (HotSpot intrinsics) are not correctly rounded, so no libm matches them
# bit for bit. Evaluating in extended precision and rounding once comes closest (about 1 cell in 1000
# differs in the last bit for normal rand) and, unlike NumPy's SIMD float64 loops, does not depend on
# the CPU's vector extensions.
_EXT = np.longdouble if np.finfo(np.longdouble).nmant > 52 else None


def _log(x: np.ndarray) -> np.ndarray:
    return np.log(x) if _EXT is None else np.log(x.astype(_EXT)).astype(np.float64)


def _cos(x: np.ndarray) -> np.ndarray:
    return np.cos(x) if _EXT is None else np.cos(x.astype(_EXT)).astype(np.float64)


def _sin(x: np.ndarray) -> np.ndarray:
    return np.sin(x) if _EXT is None else np.sin(x.astype(_EXT)).astype(np.float64)


def _value_stream(seed: int, n: int, normal: bool) -> np.ndarray:
    """First ``n`` values of SystemDS' value PRNG (UniformPRNGenerator/NormalPRNGenerator) after setSeed."""
    if not normal:
        return java_doubles(seed, n)
    pairs = (n + 1) // 2
    u = java_doubles(seed, 2 * pairs)
    return _box_muller(u[0::2], u[1::2])[:n]


# --------------------------------------------------------------------------------------------------
# MatrixBlock.evalSparseFormatInMemory (MCSR default sparse block vs FP64 dense block)
# --------------------------------------------------------------------------------------------------

def _mcsr_size(nrows: int, ncols: int, sparsity: float) -> float:
    """SparseBlockMCSR.estimateSizeInMemory (without the MatrixBlock header, which both sides share)."""
    nnz = math.ceil(sparsity * nrows * ncols)
    rlen = min(float(nrows), float(nnz))
    cnnz = max(4.0, nnz / rlen)  # rlen > 0: callers pass sparsity > 0
    size = 16.0 + (32.0 + 8.0 * nrows)  # object header + array of row references
    row_size = 24 + 32 + 32  # SparseRowVector header + empty int[] + empty double[]
    row_size = java_long(row_size + 12.0 * max(1.0, cnnz))
    size += rlen * row_size
    return float(java_long(min(size, TWO63)))


def eval_sparse_format_in_memory(nrows: int, ncols: int, nnz: int) -> bool:
    """MatrixBlock.evalSparseFormatInMemory(nrows, ncols, nnz) with the default MCSR sparse block."""
    lsp = nnz / nrows / ncols
    lsparse = lsp < SPARSITY_TURN_POINT and ncols > 1
    size_sparse = 0.0 if lsp == 0 else _mcsr_size(nrows, ncols, lsp)
    size_dense = 96.0 + 8.0 * nrows * ncols
    return lsparse and size_sparse < size_dense


# --------------------------------------------------------------------------------------------------
# rand
# --------------------------------------------------------------------------------------------------

def _geometric_positions(nnz_seed: int, sparsity: float, cells: int) -> np.ndarray:
    """0-based cell numbers chosen by LibMatrixDatagen's geometric-skip loop."""
    log1mp = math.log(1.0 - sparsity)
    if log1mp == 0.0 or cells == 0:
        return np.zeros(0, dtype=np.int64)
    n = int(sparsity * cells * 1.05) + 64
    while True:
        u = java_doubles(nnz_seed, n)
        with np.errstate(divide="ignore"):
            q = np.ceil(_log(u) / log1mp)
        q = np.minimum(q, float(cells + 1))  # anything larger ends the loop anyway (+inf for u == 0)
        idx = np.cumsum(q.astype(np.int64))
        if idx[-1] > cells:
            return idx[: int(np.searchsorted(idx, cells, side="right"))] - 1
        n *= 2


def sds_rand(rows: int, cols: int, min_v: float, max_v: float, sparsity: float, pdf: str, seed: int,
             blen: int = DEFAULT_BLOCKSIZE) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SystemDS' ``rand(rows, cols, min_v, max_v, sparsity, pdf, seed)`` for an explicit seed (not -1).

    Returns a dense ``float64`` array when ``sparsity == 1``, otherwise a triple ``(row_idx, col_idx,
    values)`` of the generated cells (no cell twice; block by block, row-major inside a block). A value
    can be 0.0 only if the drawn value itself is zero.
    """
    pdf = pdf.lower()
    if pdf not in ("uniform", "normal"):
        raise ValueError(f"sds_rand: unsupported pdf {pdf}")
    normal = pdf == "normal"
    lo, hi = (0.0, 1.0) if normal else (float(min_v), float(max_v))
    if not normal:
        if (lo == 0.0 and hi == 0.0) or sparsity == 0:
            return np.zeros((rows, cols), dtype=np.float64) if sparsity == 1.0 else _empty_triple()
        if sparsity == 1.0 and (lo == hi or (math.isnan(lo) and math.isnan(hi))):
            return np.full((rows, cols), lo, dtype=np.float64)
    rng = hi - lo
    nrb = -(-rows // blen)
    ncb = -(-cols // blen)
    seeds = block_seeds(seed, nrb * ncb)
    dense = sparsity == 1.0
    out = np.empty((rows, cols) if dense else (0, 0), dtype=np.float64)
    ri: list[np.ndarray] = []
    ci: list[np.ndarray] = []
    vv: list[np.ndarray] = []
    k = 0
    for rb in range(nrb):
        br = min(blen, rows - rb * blen)
        for cb in range(ncb):
            bc = min(blen, cols - cb * blen)
            res = rand_block(seeds[k], br, bc, lo, rng, sparsity, normal)
            k += 1
            if isinstance(res, np.ndarray):
                out[rb * blen:rb * blen + br, cb * blen:cb * blen + bc] = res
                continue
            pos, vals = res
            ri.append(pos // bc + rb * blen)
            ci.append(pos % bc + cb * blen)
            vv.append(vals)
    if dense:
        return out
    if not vv:
        return _empty_triple()
    return np.concatenate(ri), np.concatenate(ci), np.concatenate(vv)


def rand_block(bseed: int, br: int, bc: int, lo: float, rng: float, sparsity: float, normal: bool
               ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """One ``br`` x ``bc`` block of ``sds_rand`` from its block seed (``block_seeds``), cells
    ``lo + rng * value``: a dense array when ``sparsity == 1``, else (0-based row-major cell numbers
    inside the block, their values). A block depends on nothing but its seed, so a distributed rand
    (runtime.dask.io) generates each on a worker with this same code and gets the local values."""
    cells = br * bc
    if sparsity == 1.0:
        vals = _value_stream(bseed, cells + 1, normal)[1:]
        return lo + rng * vals.reshape(br, bc)
    first = _value_stream(bseed, 1, normal)[0]
    nnz_seed = java_long(float(first) * TWO63)
    local_sparse = sparsity < 1 and eval_sparse_format_in_memory(br, bc, java_long(sparsity * br * bc))
    if local_sparse:
        pos = _geometric_positions(nnz_seed, sparsity, cells)
    else:
        u = java_doubles(nnz_seed, cells)
        pos = np.flatnonzero(u <= sparsity)
    vals = _value_stream(bseed, len(pos) + 1, normal)[1:]
    return pos, lo + rng * vals


def _empty_triple() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = np.zeros(0, dtype=np.int64)
    return z, z.copy(), np.zeros(0, dtype=np.float64)


def random_seed() -> int:
    """A fresh seed for ``seed = -1`` (SystemDS picks one itself)."""
    return _s64(int.from_bytes(os.urandom(8), "little"))
