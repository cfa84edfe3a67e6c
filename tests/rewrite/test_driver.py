"""The rewrite driver's fixpoint: a rule that left the DAG as it found it is not run again before
another rule changes the DAG, and skipping it changes no rewritten DAG (rules are functions of the
DAG; the last round, which confirms the fixpoint, then runs only the rules before the last change)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lafuse.config import Config
from lafuse.hops.hop import Hop, walk
from lafuse.hops.program import Dag, copy_dag
from lafuse.rewrite import driver, rules
from lafuse.rewrite.core import Rule
from tests.rewrite.harness import EVALUATE, program_dags, raw_fixture_dags, run_capture

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rewrite"


def _structure(dag: Dag) -> list[tuple]:
    order = walk(dag.roots)
    num = {h.id: k for k, h in enumerate(order)}
    return [(h.label(), h.dt, h.rows, h.cols, h.nnz, tuple(num[i.id] for i in h.inputs)) for h in order] \
        + [tuple(num[r.id] for r in dag.roots)]


@pytest.fixture(scope="module")
def raw_dags() -> list[Dag]:
    return raw_fixture_dags(FIXTURES)


def test_skipping_clean_rules_reaches_the_same_fixpoint(raw_dags, monkeypatch):
    cfg = Config(codegen=False)
    compared = changed = 0
    for dag in raw_dags:
        got = []
        for skip in (True, False):
            monkeypatch.setattr(driver, "SKIP_CLEAN", skip)
            d = copy_dag(dag)
            driver.rewrite_dag(d, cfg, dynamic=True, evaluate=EVALUATE)
            got.append(_structure(d))
        assert got[0] == got[1]
        compared += 1
        changed += got[0] != _structure(dag)
    assert compared > 100 and changed > 50, (compared, changed)


def test_a_rule_that_changed_nothing_waits_for_a_change(monkeypatch):
    """A local rule fires once (round 1); the DAG rule after it saw that change in round 1 and is not
    run in round 2, where only the local rule is asked again."""
    calls: list[str] = []

    def drop_plus_zero(h: Hop, ctx) -> Hop | None:
        calls.append("local")
        if h.op == "+" and h.inputs[1].is_literal and h.inputs[1].value == 0:
            return h.inputs[0]
        return None

    def watch(dag: Dag, ctx) -> bool:
        calls.append("dag")
        return False

    monkeypatch.setattr(rules, "RULES", (Rule("drop_plus_zero", drop_plus_zero, "hop", "static"),
                                        Rule("watch", watch, "dag", "static")))
    for skip, dag_calls, last in ((True, 1, "local"), (False, 2, "dag")):  # without skipping: once a round
        monkeypatch.setattr(driver, "SKIP_CLEAN", skip)
        res = run_capture("X = rand(rows=3, cols=3, seed=1)\nY = X + 0\nprint(sum(Y))\n",
                          Config(rewrites=False, codegen=False))
        assert res.program is not None
        dag = next(d for d in program_dags(res.program) if any(h.op == "+" for h in d.hops()))
        calls.clear()
        driver.rewrite_dag(dag, Config(codegen=False), dynamic=True)
        assert not any(h.op == "+" for h in dag.hops())
        assert calls.count("dag") == dag_calls and calls[-1] == last, calls
