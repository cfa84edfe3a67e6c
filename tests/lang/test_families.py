"""The operator families of the catalogue (lang.builtins) are the one place an operator's kind of
behaviour is named; these tests hold each family to what the kernels do and to the catalogue's own
entries, so a family and the operators' semantics cannot drift apart."""

from __future__ import annotations

import numpy as np
import pytest

from lafuse.lang.builtins import (
    COL_AGGS,
    CUM_AGGS,
    FULL_AGGS,
    LAPACK,
    ROUNDING,
    ROW_AGGS,
    SPECS,
    ZERO_PRESERVING_UNARY,
)
from lafuse.runtime.local.kernels import KERNELS


@pytest.mark.parametrize("op", sorted(ZERO_PRESERVING_UNARY))
def test_zero_preserving_unary_maps_zero_to_zero(op):
    """Size inference keeps a sparse input's nnz through these, and the cell template skips zeros."""
    x = np.array([[0.0, -0.0], [0.0, 0.0]])
    assert np.all(KERNELS[op](x) == 0.0)


def test_rounding_turns_non_zeros_into_zeros():
    for op in ROUNDING:
        assert op in ZERO_PRESERVING_UNARY and np.any(KERNELS[op](np.array([[0.25, -0.4]])) == 0.0), op


def test_aggregate_families_have_the_shapes_their_names_say():
    x = np.arange(1.0, 13.0).reshape(3, 4)
    for op in ROW_AGGS:
        assert np.shape(KERNELS[op](x)) == (3, 1), op
    for op in COL_AGGS:
        assert np.shape(KERNELS[op](x)) == (1, 4), op
    for op in CUM_AGGS:
        assert np.shape(KERNELS[op](x)) == (3, 4), op
    column, square = np.array([[1.0], [2.0], [4.0]]), np.eye(3) + 1.0
    for op in FULL_AGGS:  # (median and quantiles take a column vector, trace a square matrix)
        assert np.ndim(KERNELS[op](square if op == "trace" else column)) == 0, op
    assert all(SPECS[op].kind == "agg_unary" for op in ROW_AGGS | COL_AGGS | CUM_AGGS | FULL_AGGS)


def test_lapack_operations_are_the_ones_with_dense_operands():
    """The physical plan converts CSR operands of exactly these (BuiltinSpec.dense), and the cost
    model prices them as O(n^3) factorizations."""
    assert {n for n, s in SPECS.items() if s.dense} == LAPACK
