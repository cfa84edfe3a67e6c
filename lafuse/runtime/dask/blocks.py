"""Distributed matrices and the block functions the workers run.

A distributed matrix (runtime.dask.matrix.Blocked) is split from and assembled into a local one
here. Every block function calls the local runtime's
kernel (runtime.local.kernels) on whole blocks, so a distributed element-wise operator computes,
block by block, exactly the local values (NaN, Inf and the sparse rules included); only sums
combine partial results, in a fixed order (row blocks, then column blocks).

The workers import this module to run the functions, which registers Dask's ``sizeof`` for SciPy's
sparse arrays there (Dask counts only ``spmatrix``; a ``csr_array`` would count 56 bytes, which
breaks spilling and the bytes-moved statistics).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse.runtime.local.kernels import KERNELS, bind_args
from lafuse.runtime.local.kernels_common import errstate
from lafuse.runtime.values import choose_format, is_sparse, to_dense
from lafuse.sparse import sp


def split(m: Any, bs: int) -> dict[tuple[int, int], Any]:
    """The blocks of a local matrix (each owning its memory: a view would pin the whole matrix)."""
    rows, cols = m.shape
    out: dict[tuple[int, int], Any] = {}
    for i in range(max(1, -(-rows // bs))):
        for j in range(max(1, -(-cols // bs))):
            b = m[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs]
            out[(i, j)] = sp.csr_array(b) if is_sparse(m) else np.array(b, dtype=np.float64)
    return out


def assemble(parts: dict[tuple[int, int], Any], nrb: int, ncb: int) -> Any:
    """The local matrix of gathered blocks, in the format the local rule gives its non-zeros."""
    grid = [[parts[(i, j)] for j in range(ncb)] for i in range(nrb)]
    if any(is_sparse(b) for row in grid for b in row):
        m = sp.block_array(grid, format="csr").astype(np.float64)
    else:
        m = np.block(grid) if len(grid) > 1 or len(grid[0]) > 1 else np.array(grid[0][0])
    return choose_format(m)


# ---------------------------------------------------------------- block functions (run by workers)


@functools.lru_cache(maxsize=256)
def _bound(op: str, slots: tuple[str, ...] | None) -> Callable[..., Any]:
    return bind_args(op, slots, KERNELS[op])


def call(op: str, slots: Any, *args: Any) -> Any:
    """The local kernel of ``op`` on blocks (and scalars), its arguments in the order of the
    instruction's ``slots`` (as the local backend binds them)."""
    return _bound(op, tuple(slots) if slots is not None else None)(*args)


def apply(op: str, *args: Any) -> Any:
    """The local kernel of ``op`` on blocks (and scalars), arguments in the catalogue's order."""
    return KERNELS[op](*args)


def fold(op: str, *parts: Any) -> Any:
    """Partial results (scalars or blocks of one shape) combined with the local binary kernel ``op``
    in the order given."""
    k = KERNELS[op]
    out = parts[0]
    for p in parts[1:]:
        out = k(out, p)
    return out


def fold_each(ops: str | tuple[str, ...], *parts: Any) -> Any:
    """``fold`` of partial results, or of tuples of them with one operation per position (a multi-
    aggregate's partials)."""
    if isinstance(ops, str):
        return fold(ops, *parts)
    return tuple(fold(op, *[p[k] for p in parts]) for k, op in enumerate(ops))


def shape_of(b: Any) -> tuple[int, int]:
    return (int(b.shape[0]), int(b.shape[1])) if hasattr(b, "shape") and len(b.shape) == 2 else (1, 1)


_FUSED: dict[Any, Any] = {}  # (canonical hash, input permutation, literals) -> fused operator


def _fused(plan: Any) -> Any:
    key = plan.canonical_key()
    op = _FUSED.get(key)
    if op is None:
        from lafuse.runtime.local import fused  # deferred: code generation and Numba, only on fused tasks

        op = _FUSED[key] = fused.compile_plan(plan, threads=1, eager=False)
    return op


def run_plan(plan: Any, reference: bool, *inputs: Any) -> Any:
    """A fused operator's kernel on blocks: the generated one (compiled once per worker process and
    plan), or the CPlan reference interpreter (``reference``: Config.codegen_backend)."""
    if reference:
        from lafuse.runtime.local.reference import evaluate  # deferred: see _fused

        return evaluate(plan, list(inputs))
    return _fused(plan)(list(inputs))


def run_plan_each(plan: Any, reference: bool, n: int, *inputs: Any) -> tuple[Any, ...]:
    """``run_plan`` on each run of ``n`` consecutive inputs: the blocks of one partition
    (runtime.dask.fused_outer's replicating operator), each block's result apart."""
    return tuple(run_plan(plan, reference, *inputs[k:k + n]) for k in range(0, len(inputs), n))


def add_in_order(order: tuple[tuple[int, int], ...], *groups: Any) -> Any:
    """The partial results ``groups[g][k]`` added in the order of ``order``'s (g, k) pairs."""
    return fold("+", *[groups[g][k] for g, k in order])


def stack(vertical: bool, *parts: Any) -> Any:
    """Pieces joined top to bottom (or left to right), in the format the local rule gives the result."""
    if any(is_sparse(p) for p in parts):
        return choose_format((sp.vstack if vertical else sp.hstack)(parts, format="csr"))
    return choose_format((np.vstack if vertical else np.hstack)([to_dense(p) for p in parts]))


def item(parts: tuple[Any, ...], k: int) -> Any:
    """Part ``k`` of a task's tuple of results (the object itself: nothing is copied)."""
    return parts[k]


def add_all(*parts: Any) -> Any:
    """The sum of partial results in the order given (scalars or blocks of one shape)."""
    return fold("+", *parts)


def squared_deviations(b: Any, mu: float) -> float:
    """sum((b - mu)^2) over every cell of block ``b`` (a CSR block's zeros included, as the local
    ``var`` counts them)."""
    with errstate():
        if is_sparse(b):
            n = b.shape[0] * b.shape[1]
            return float(np.sum((b.data - mu) ** 2)) + (n - b.nnz) * mu * mu
        return float(np.sum((np.asarray(b) - mu) ** 2))


def index_minmax(b: Any, is_max: bool, offset: int) -> np.ndarray:
    """Per row of block ``b``: its best value and the global 1-based column of its last occurrence
    (the local ``rowIndexMax``/``rowIndexMin`` rule: NaN cells ignored), or column 0 when the row has
    no candidate (all NaN)."""
    a = to_dense(b)
    with errstate():
        nan = np.isnan(a)
        best = (np.max(np.where(nan, -np.inf, a), axis=1) if is_max else np.min(np.where(nan, np.inf, a), axis=1))
        hit = a == best[:, None]
    n = a.shape[1]
    last = n - 1 - np.argmax(hit[:, ::-1], axis=1) + 1 + offset
    found = hit.any(axis=1)
    return np.column_stack([best, np.where(found, last, 0)]).astype(np.float64)


def index_combine(is_max: bool, *parts: np.ndarray) -> np.ndarray:
    """The row index of the best value over the column blocks' ``index_minmax`` results: a later
    block wins ties (the last occurrence), a row with no candidate anywhere gives 1."""
    best = parts[0][:, 0].copy()
    idx = parts[0][:, 1].copy()
    for p in parts[1:]:
        better = p[:, 1] > 0
        better &= (idx == 0) | ((p[:, 0] >= best) if is_max else (p[:, 0] <= best))
        best = np.where(better, p[:, 0], best)
        idx = np.where(better, p[:, 1], idx)
    idx[idx == 0] = 1
    return idx.reshape(-1, 1)


def paste(h: int, w: int, *pieces: tuple[Any, ...]) -> Any:
    """An h x w block of pieces pasted in order: (source block or fill number, source rows r0:r1,
    columns c0:c1, destination row, column); in the format the local rule gives its non-zeros."""
    out = np.zeros((h, w))
    for src, r0, r1, c0, c1, dr, dc in pieces:
        if isinstance(src, float):
            out[dr:dr + r1 - r0, dc:dc + c1 - c0] = src
        else:
            out[dr:dr + r1 - r0, dc:dc + c1 - c0] = to_dense(src[r0:r1, c0:c1])
    return choose_format(out)


def grid(nrb: int, ncb: int, *blocks: Any) -> Any:
    """One matrix of ``nrb x ncb`` blocks given row by row (a cuboid operator's piece), sparse where
    the local rule says (``assemble``)."""
    return assemble({(i, j): blocks[i * ncb + j] for i in range(nrb) for j in range(ncb)}, nrb, ncb)


def cut(x: Any, r0: int, r1: int, c0: int, c1: int) -> Any:
    """Rows r0:r1 and columns c0:c1 of ``x`` as a block of its own (sparse stays sparse)."""
    b = x[r0:r1, c0:c1]
    return choose_format(sp.csr_array(b) if is_sparse(x) else np.array(b, dtype=np.float64))


def run_plan_rows(plan: Any, reference: bool, rows: tuple[tuple[int, int, int], ...], *inputs: Any) -> Any:
    """``run_plan`` after taking rows r0:r1 of the inputs at the positions ``rows`` lists as (position,
    r0, r1): a broadcast operator's task receives U and V whole and reads its own rows."""
    args = list(inputs)
    for pos, r0, r1 in rows:
        args[pos] = args[pos][r0:r1]
    return run_plan(plan, reference, *args)


def mm_sum(*pairs: Any) -> Any:
    """sum over k of A[i, k] %*% B[k, j], for ``pairs`` = A[i, 0], B[0, j], A[i, 1], B[1, j], ..."""
    mm: Callable[[Any, Any], Any] = KERNELS["%*%"]
    out = mm(pairs[0], pairs[1])
    for k in range(2, len(pairs), 2):
        out = KERNELS["+"](out, mm(pairs[k], pairs[k + 1]))
    return out


def _register_sizeof() -> None:
    try:
        from dask.sizeof import sizeof  # deferred: dask; the local runtime imports this module's users
    except ImportError:  # pragma: no cover - dask is a dependency
        return

    @sizeof.register(sp.csr_array)  # type: ignore[misc]
    def _csr(x: Any) -> int:
        return int(x.data.nbytes + x.indices.nbytes + x.indptr.nbytes)


_register_sizeof()
