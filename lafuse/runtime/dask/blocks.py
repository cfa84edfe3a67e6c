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

from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse.runtime.local.kernels import KERNELS
from lafuse.runtime.values import choose_format, is_sparse
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


def apply(op: str, *args: Any) -> Any:
    """The local kernel of ``op`` on blocks (and scalars)."""
    return KERNELS[op](*args)


def add_all(*parts: Any) -> Any:
    """The sum of partial results in the order given (scalars or blocks of one shape)."""
    out = parts[0]
    for p in parts[1:]:
        out = KERNELS["+"](out, p)
    return out


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
