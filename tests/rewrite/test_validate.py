"""The DAG validator accepts what the builder and the rewriter produce and rejects broken DAGs."""

from __future__ import annotations

import pytest

from lafuse.hops import sizes
from lafuse.hops.hop import DOUBLE, INT, MATRIX, SCALAR, Hop, literal
from lafuse.hops.program import Dag
from lafuse.hops.validate import validate_dag


def tread(name: str, rows: int, cols: int) -> Hop:
    h = Hop("tread", "data", [], MATRIX, DOUBLE, name=name)
    h.set_dims(rows, cols)
    return h


def mk(op: str, kind: str, ins: list[Hop], dt: str = MATRIX, vt: str = DOUBLE) -> Hop:
    h = Hop(op, kind, ins, dt, vt, params={"slots": ("target",)} if kind in ("reorg", "agg_unary") else {})
    sizes.infer(h)
    return h


def twrite(name: str, x: Hop) -> Hop:
    h = Hop("twrite", "data", [x], x.dt, x.vt, name=name)
    sizes.infer(h)
    return h


def good_dag() -> Dag:
    X, y = tread("X", 5, 3), tread("y", 5, 1)
    b = mk("%*%", "matmult", [mk("t", "reorg", [X]), y])
    s = mk("sum", "agg_unary", [mk("*", "binary", [X, X])], SCALAR, DOUBLE)
    p = Hop("print", "builtin", [s], params={"slots": ("target",), "side_effect": True})
    return Dag([p, twrite("b", b), twrite("s", s)])


def test_accepts_a_well_formed_dag():
    validate_dag(good_dag())


def test_rejects_a_cycle():
    d = good_dag()
    b = d.roots[1].inputs[0]
    tx = b.inputs[0]
    tx.inputs = [b]
    with pytest.raises(AssertionError, match="cycle"):
        validate_dag(d)


def test_rejects_self_input():
    d = good_dag()
    s = d.roots[2].inputs[0]
    s.inputs = [s]
    with pytest.raises(AssertionError, match="own input|cycle"):
        validate_dag(d)


def test_rejects_shared_ids():
    d = good_dag()
    b = d.roots[1].inputs[0]
    b.inputs[1].id = b.inputs[0].id
    with pytest.raises(AssertionError, match="share id"):
        validate_dag(d)


def test_rejects_twrite_not_root_or_consumed():
    d = good_dag()
    tw = d.roots[1]
    d.roots[2].inputs = [mk("sum", "agg_unary", [tw], SCALAR, DOUBLE)]
    with pytest.raises(AssertionError, match="TWrite"):
        validate_dag(d)


def test_rejects_side_effect_after_twrites():
    d = good_dag()
    d.roots = [d.roots[1], d.roots[0], d.roots[2]]
    with pytest.raises(AssertionError, match="side effects must come first"):
        validate_dag(d)


def test_rejects_twrite_with_two_inputs_and_duplicate_names():
    d = good_dag()
    d.roots[1].inputs.append(d.roots[1].inputs[0])
    with pytest.raises(AssertionError, match="inputs, expected 1"):
        validate_dag(d)
    d = good_dag()
    d.roots[2].name = "b"
    with pytest.raises(AssertionError, match="written twice"):
        validate_dag(d)


def test_rejects_literal_with_inputs():
    lit = literal(3)
    lit.inputs = [literal(4)]
    with pytest.raises(AssertionError, match="literal with inputs"):
        validate_dag(Dag([lit]))


def test_rejects_print_that_is_not_a_root():
    d = good_dag()
    p = d.roots.pop(0)
    d.roots.insert(0, Hop("stop", "builtin", [p], params={"side_effect": True}))
    with pytest.raises(AssertionError, match="statement HOP is not a root"):
        validate_dag(d)


def test_rejects_matmult_of_scalar_and_bad_inner_dims():
    X = tread("X", 5, 3)
    mm = Hop("%*%", "matmult", [X, literal(2)], MATRIX, DOUBLE)
    with pytest.raises(AssertionError, match="matrix multiply of a scalar"):
        validate_dag(Dag([twrite("Z", mm)]))
    mm = Hop("%*%", "matmult", [X, tread("Y", 4, 2)], MATRIX, DOUBLE)
    with pytest.raises(AssertionError, match="inner dims"):
        validate_dag(Dag([twrite("Z", mm)]))


def test_rejects_wrong_result_dims():
    X = tread("X", 5, 3)
    t = mk("t", "reorg", [X])
    t.set_dims(5, 3)
    with pytest.raises(AssertionError, match="transpose result"):
        validate_dag(Dag([twrite("Z", t)]))
    e = mk("+", "binary", [X, tread("Y", 5, 3)])
    e.set_dims(5, 4)
    with pytest.raises(AssertionError, match="result 5x4"):
        validate_dag(Dag([twrite("Z", e)]))
    r = mk("rowSums", "agg_unary", [X])
    r.set_dims(5, 3)
    with pytest.raises(AssertionError, match="contradict"):
        validate_dag(Dag([twrite("Z", r)]))


def test_rejects_incompatible_elementwise_dims_and_types():
    e = Hop("+", "binary", [tread("X", 5, 3), tread("Y", 4, 3)], MATRIX, DOUBLE)
    with pytest.raises(AssertionError, match="incompatible"):
        validate_dag(Dag([twrite("Z", e)]))
    e = Hop("+", "binary", [tread("X", 5, 3), literal(1)], SCALAR, INT)
    with pytest.raises(AssertionError, match="data type scalar"):
        validate_dag(Dag([twrite("Z", e)]))
    s = Hop("sum", "agg_unary", [tread("X", 5, 3)], MATRIX, DOUBLE)
    with pytest.raises(AssertionError, match="full aggregate"):
        validate_dag(Dag([twrite("Z", s)]))


def test_rewrite_hook_names_the_rule(monkeypatch):
    """With validation on, a rule that breaks an invariant is named in the error."""
    from lafuse.config import Config
    from lafuse.rewrite import core, driver, rules

    @core.rule("broken_rule")
    def broken(h, ctx):
        if h.kind == "reorg" and h.op == "t":
            bad = Hop("%*%", "matmult", [h.inputs[0], literal(1)], MATRIX, DOUBLE)
            return bad
        return None

    monkeypatch.setattr(rules, "RULES", (broken,))
    monkeypatch.setattr(driver, "VALIDATE", True)
    with pytest.raises(AssertionError, match="after rewrite rule 'broken_rule'.*matrix multiply of a scalar"):
        driver.rewrite_dag(good_dag(), Config(), dynamic=True)


def test_env_variable_turns_validation_on(monkeypatch):
    from lafuse.rewrite import driver

    monkeypatch.setattr(driver, "VALIDATE", False)
    monkeypatch.delenv("LAFUSE_VALIDATE", raising=False)
    assert not driver.validating()
    monkeypatch.setenv("LAFUSE_VALIDATE", "1")
    assert driver.validating()
