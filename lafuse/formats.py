"""Physical formats of a matrix block, their sizes in bytes, and the one rule that picks between them.

A block is dense (row-major float64) or sparse: CSR, or CSC where the format optimizer (plan.layout)
chose it for the kernels that read it (a column slice, a transposed product); CSC holds the same
non-zeros as CSR, so the choice between them changes speed, not values. Size propagation (hops.sizes), the cost model
(cost.operators) and the runtime's kernels all read the rule here, so the format a plan predicts for a
block is the one the kernels produce; a format optimizer (paper 002 §4) decides formats per operator
on top of this default. A foundation module: it imports nothing of lafuse.
"""

from __future__ import annotations

DENSE = "dense"
CSR = "csr"
CSC = "csc"
FORMATS = (DENSE, CSR, CSC)

SPARSITY_TURN_POINT = 0.4  # SystemDS MatrixBlock.SPARSITY_TURN_POINT: sparse below this fraction
MIN_SPARSE_CELLS = 1024  # tiny matrices stay dense; format changes cost more than they save
DENSE_CELL_BYTES = 8.0  # bytes, float64 per cell
SPARSE_NNZ_BYTES = 12.0  # bytes, CSR: 8-byte value + 4-byte column index per non-zero
SPARSE_ROW_BYTES = 4.0  # bytes, CSR row pointer per row (and one more)

# A narrow dense block (tall, of a few columns) is worked a column at a time by the kernels, which the
# cost model prices: NumPy runs such a matrix one short row at a time in axis reductions and in
# broadcasts; measured up to 4 columns, working a column at a time is 1.5-4x faster
NARROW_COLS = 4
NARROW_MIN_ROWS = 4096  # rows; below this the per-column calls cost more than the short rows


def may_be_sparse(rows: int, cols: int) -> bool:
    """Whether the shape lets the rule pick CSR at all: tiny matrices and column vectors stay dense
    (a kernel checks this before it counts non-zeros)."""
    return cols > 1 and rows * cols >= MIN_SPARSE_CELLS


def sparse_format(rows: int, cols: int, nnz: int) -> bool:
    """The default rule (SystemDS MatrixBlock.evalSparseFormatInMemory): CSR below the sparsity turn
    point, except where the shape keeps a block dense (may_be_sparse); an unknown ``nnz`` (-1) is
    dense. A structural zero of a CSR operand annihilates NaN/Inf in ``*``, so the rule is semantics,
    not only speed."""
    return may_be_sparse(rows, cols) and 0 <= nnz < SPARSITY_TURN_POINT * rows * cols


def default_format(rows: int, cols: int, nnz: int) -> str:
    return CSR if sparse_format(rows, cols, nnz) else DENSE


def format_bytes(fmt: str, rows: float, cols: float, nnz: float) -> float:
    """Bytes of a rows x cols block with ``nnz`` non-zeros stored in ``fmt``."""
    if fmt == CSR:
        return SPARSE_NNZ_BYTES * nnz + SPARSE_ROW_BYTES * (rows + 1)
    if fmt == CSC:
        return SPARSE_NNZ_BYTES * nnz + SPARSE_ROW_BYTES * (cols + 1)
    return DENSE_CELL_BYTES * rows * cols
