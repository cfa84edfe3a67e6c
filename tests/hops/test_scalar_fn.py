"""``sizes.scalar_fn`` (the bound expressions of a mini-batch slice, walked once and then evaluated at
every iteration by the recompilation key) computes what ``sizes.scalar_value`` computes, over random
expression trees and symbol tables: NaN, Inf, booleans, strings, missing names, unknown dims."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from lafuse.hops import sizes
from lafuse.hops.hop import MATRIX, SCALAR, Hop, literal

NAMES = ("a", "b", "n")
NUMBERS = st.one_of(st.integers(-(2**62), 2**62), st.floats(allow_nan=True, allow_infinity=True),
                    st.booleans(), st.sampled_from([0, 1, 0.0, -0.0, 128, 0.5]))
VALUES = st.one_of(NUMBERS, st.just("x"))


def _matrix(rows: int, cols: int) -> Hop:
    h = Hop("tread", "data", [], MATRIX, name="X")
    h.rows, h.cols = rows, cols
    return h


@st.composite
def exprs(draw: st.DrawFn, depth: int = 0) -> Hop:
    leaf = depth >= 3 or draw(st.integers(0, 3)) == 0
    if leaf:
        kind = draw(st.sampled_from(["lit", "tread", "nrow", "ncol"]))
        if kind == "lit":
            return literal(draw(VALUES))
        if kind == "tread":
            return Hop("tread", "data", [], SCALAR, name=draw(st.sampled_from(NAMES)))
        return Hop(kind, "unary", [_matrix(draw(st.integers(-1, 300)), draw(st.integers(-1, 300)))], SCALAR)
    op = draw(st.sampled_from(["+", "-", "*", "/", "%/%", "%%", "min", "max", "ceil", "floor", "u-",
                               "as.integer", "as.double", "sqrt"]))
    if op in ("min", "max"):
        ins = [draw(exprs(depth + 1)) for _ in range(draw(st.integers(1, 3)))]
        return Hop(op, draw(st.sampled_from(["nary", "binary"])), ins, SCALAR)
    if op in ("ceil", "floor", "u-", "as.integer", "as.double", "sqrt"):
        return Hop(op, "unary", [draw(exprs(depth + 1))], SCALAR)
    return Hop(op, "binary", [draw(exprs(depth + 1)), draw(exprs(depth + 1))], SCALAR)


def _same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return type(x) is type(y) and x == y


@given(exprs(), st.dictionaries(st.sampled_from(NAMES), VALUES), st.booleans())
def test_scalar_fn_computes_what_scalar_value_computes(h, known, none):
    table = None if none else known
    assert _same(sizes.scalar_fn(h)(table), sizes.scalar_value(h, table))


@given(exprs(), exprs(), st.dictionaries(st.sampled_from(NAMES), VALUES))
def test_span_len_of_the_functions_is_range_len(lo, hi, known):
    n = sizes.span_len(sizes.scalar_fn(lo)(known), sizes.scalar_fn(hi)(known))
    assert n == sizes.range_len(lo, hi, None, known)


def test_a_minibatch_bound_evaluates_like_scalar_value():
    # X[((bi - 1) * 256 + 1):min(n, bi * 256), ]: the extent 256 for full batches, the rest for the last
    bi, n = (Hop("tread", "data", [], SCALAR, name=v) for v in ("bi", "n"))
    lo = Hop("+", "binary", [Hop("*", "binary", [Hop("-", "binary", [bi, literal(1)], SCALAR), literal(256)],
                                 SCALAR), literal(1)], SCALAR)
    hi = Hop("min", "nary", [n, Hop("*", "binary", [bi, literal(256)], SCALAR)], SCALAR)
    f_lo, f_hi = sizes.scalar_fn(lo), sizes.scalar_fn(hi)
    for b in (1, 2, 390, 391):
        st_ = {"bi": b, "n": 100000}
        assert sizes.span_len(f_lo(st_), f_hi(st_)) == sizes.range_len(lo, hi, None, st_)
    assert sizes.span_len(f_lo({"bi": 2, "n": 100000}), f_hi({"bi": 2, "n": 100000})) == 256
    assert sizes.span_len(f_lo({"bi": 391, "n": 100000}), f_hi({"bi": 391, "n": 100000})) == 160
