"""CPlans and their reference interpreter (the spec of generated kernels).

The interpreter must mean what the unfused operators mean: random cell-wise expression DAGs
(hypothesis, with NaN and +-Inf in the inputs) are evaluated both by the reference interpreter and
by running the same expression as plain DML with rewrites off, for every aggregation type.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse.compiler import run_dml
from lafuse.errors import DMLValidationError
from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COLVEC,
    FULL_AGG,
    MAIN,
    NO_AGG,
    ROW_AGG,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
    CPlanBuilder,
)
from lafuse.runtime.local.reference import evaluate

SHAPE = (4, 3)
NAMES = {0: "X", 1: "Y", 2: "r", 3: "c", 4: "s"}
ACC = {0: MAIN, 1: CELL, 2: ROWVEC, 3: COLVEC, 4: SCALAR}
INFIX = {"+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|"}
CALLS1 = ["abs", "exp", "log", "sqrt", "round", "floor", "ceil", "sign", "sin", "tanh", "isNaN"]
BIN = sorted(INFIX) + ["min", "max"]


def to_dml(n: CNode) -> str:
    if n.op == "input":
        return NAMES[int(n.arg)]  # type: ignore[call-overload]
    if n.op == "literal":
        v = float(n.arg)  # type: ignore[arg-type]
        return f"({v!r})" if v < 0 else repr(v)  # -2.5 ^ X is -(2.5 ^ X) in DML, as in R
    args = [to_dml(c) for c in n.children]
    if n.op in INFIX:
        return f"({args[0]} {n.op} {args[1]})"
    if n.op == "u-":
        return f"(-{args[0]})"
    if n.op == "!":
        return f"(!{args[0]})"
    return f"{n.op}({', '.join(args)})"


def exprs(b: CPlanBuilder):
    # matrices X, Y and the scalar s (vector side inputs have their own test: DML rejects some of
    # their combinations, e.g. a column vector against a row vector, or vectors inside ifelse)
    leaves = st.one_of(
        st.sampled_from([0, 1, 4]).map(lambda i: b.input(i, ACC[i])),
        st.sampled_from([0.0, 1.0, -2.5, 0.5, 3.0]).map(b.literal),
    )

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(CALLS1 + ["u-", "!"]), children).map(lambda t: b.op(t[0], t[1])),
            st.tuples(st.sampled_from(BIN), children, children).map(lambda t: b.op(t[0], t[1], t[2])),
            st.tuples(children, children, children).map(lambda t: b.op("ifelse", t[0], t[1], t[2])),
        )

    return st.recursive(leaves, extend, max_leaves=8)


special = st.sampled_from([0.0, 1.5, -2.0, 0.25, 7.0, -0.5, math.nan, math.inf, -math.inf])


def matrices(shape):
    return st.lists(special, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]).map(
        lambda v: np.array(v, dtype=np.float64).reshape(shape))


def same(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b)) |
                                              np.isclose(a, b, rtol=1e-12, atol=0.0)))


AGGS = [(NO_AGG, "sum", "R = {e}"), (FULL_AGG, "sum", "R = sum({e})"), (FULL_AGG, "min", "R = min({e})"),
        (FULL_AGG, "max", "R = max({e})"), (FULL_AGG, "sumsq", "R = sum(({e}) ^ 2)"),
        (ROW_AGG, "sum", "R = rowSums({e})"), (ROW_AGG, "max", "R = rowMaxs({e})"),
        (COL_AGG, "sum", "R = colSums({e})"), (COL_AGG, "min", "R = colMins({e})")]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reference_interpreter_equals_unfused_dml(data):
    b = CPlanBuilder()
    root = data.draw(exprs(b))
    X = b.input(0, MAIN)
    if "in0[main]" not in repr(root):  # the main input fixes the iteration space
        root = b.op("+", root, X)
    agg, agg_op, template = data.draw(st.sampled_from(AGGS))
    plan = CPlan("cell", root, agg, agg_op)
    inputs = [data.draw(matrices(SHAPE)), data.draw(matrices(SHAPE)), data.draw(matrices((SHAPE[0], 1))),
              data.draw(matrices((1, SHAPE[1]))), data.draw(special)]
    fused = evaluate(plan, inputs)
    text = template.format(e=to_dml(root))
    with cfgmod.using(rewrites=False):
        try:
            res = run_dml(text, dict(zip("XYrcs", inputs)), ["R"])["R"]
        except DMLValidationError:  # e.g. arithmetic on a scalar boolean: DML rejects it
            assume(False)
    if hasattr(res, "toarray"):
        res = res.toarray()
    if agg == NO_AGG and not isinstance(res, np.ndarray):
        res = np.full(SHAPE, res)
    assert same(fused, res), f"{text}\nfused={fused!r}\nunfused={res!r}"


def test_canonical_key_ignores_input_order_and_literal_values():
    def plan(perm: tuple[int, int], lit: float) -> CPlan:
        b = CPlanBuilder()
        x, y = b.input(perm[0], MAIN), b.input(perm[1], CELL)
        return CPlan("cell", b.op("+", b.op("*", x, y), b.literal(lit)), FULL_AGG, "sum")

    h1, order1, lits1 = plan((0, 1), 2.0).canonical_key()
    h2, order2, lits2 = plan((1, 0), -7.5).canonical_key()
    assert h1 == h2 and order1 == (0, 1) and order2 == (1, 0) and (lits1, lits2) == ((2.0,), (-7.5,))
    b = CPlanBuilder()
    x, y = b.input(0, MAIN), b.input(1, CELL)
    other = CPlan("cell", b.op("-", b.op("*", x, y), b.literal(2.0)), FULL_AGG, "sum")
    assert other.canonical_key()[0] != h1
    assert CPlan("cell", other.root, FULL_AGG, "max").canonical_key()[0] != other.canonical_key()[0]


def test_builder_shares_common_subexpressions_and_checks_arity():
    b = CPlanBuilder()
    x = b.input(0, MAIN)
    e1 = b.op("exp", b.op("*", x, b.literal(2)))
    e2 = b.op("exp", b.op("*", x, b.literal(2.0)))
    assert e1 is e2
    with pytest.raises(ValueError, match="takes 2 operands"):
        b.op("+", x)
    with pytest.raises(ValueError, match="cannot be fused"):
        b.op("solve", x, x)
    with pytest.raises(ValueError, match="unknown input access"):
        b.input(1, "diagonal")


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "min", "max", "<", "^"])
def test_vector_side_inputs_broadcast_like_dml(op):
    b = CPlanBuilder()
    x, r, c = b.input(0, MAIN), b.input(1, ROWVEC), b.input(2, COLVEC)
    plan = CPlan("cell", b.op(op, b.op(op, x, r), c), NO_AGG)
    rng = np.random.default_rng(3)
    X, R, C = rng.normal(size=SHAPE), rng.normal(size=(SHAPE[0], 1)), rng.normal(size=(1, SHAPE[1]))
    X[0, 0], R[1, 0] = math.nan, math.inf
    e = f"{op}({op}(X, r), c)" if op in ("min", "max") else f"((X {op} r) {op} c)"
    with cfgmod.using(rewrites=False):
        res = run_dml(f"R = {e}", {"X": X, "r": R, "c": C}, ["R"])["R"]
    assert same(evaluate(plan, [X, R, C]), res.toarray() if hasattr(res, "toarray") else res)


def test_sumsq_and_side_input_shapes_are_checked():
    b = CPlanBuilder()
    x, v = b.input(0, MAIN), b.input(1, ROWVEC)
    plan = CPlan("cell", b.op("-", x, v), FULL_AGG, "sumsq")
    X = np.arange(6.0).reshape(3, 2)
    r = np.array([[1.0], [2.0], [3.0]])
    assert evaluate(plan, [X, r]) == pytest.approx(float(((X - r) ** 2).sum()))
    with pytest.raises(ValueError, match="expected"):
        evaluate(plan, [X, r.T])
