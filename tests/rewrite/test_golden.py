"""Golden tests: each ``tests/fixtures/rewrite/<rule>[__variant].dml`` is compiled with rewrites and its
``.expected`` structural facts are checked; the script is also run with and without rewrites and the
printed outputs must agree (numbers within 1e-9 relative, INT/DOUBLE formatting identical).

A variant whose name ends in ``_neg`` shows where the rule must NOT fire. For the others, disabling
the rule (``Config.disabled_rules``) must break at least one fact: the fixture really tests its rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lafuse.config import Config
from lafuse.rewrite import RULES, RULES_BY_NAME
from tests.rewrite.harness import EVALUATE, check_facts, compare_outputs, cost, parse_expected, run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rewrite"
SCRIPTS = sorted(FIXTURES.glob("*.dml"))


def rule_of(p: Path) -> str:
    return p.stem.split("__")[0]


def load(p: Path):
    exp = p.with_suffix(".expected")
    assert exp.exists(), f"{p.name} has no {exp.name}"
    facts, nvargs = parse_expected(exp.read_text())
    assert facts, f"{exp.name} states no facts"
    return p.read_text(), facts, nvargs


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_golden(script: Path):
    text, facts, nvargs = load(script)
    on = run(text, Config(), nvargs, str(script))
    bad = check_facts(facts, on)
    assert not bad, f"{script.name}:\n  " + "\n  ".join(bad) + f"\noutput:\n{on.output}"
    off = run(text, Config(rewrites=False), nvargs, str(script))
    assert on.output.strip(), "a golden script must print something to compare"
    compare_outputs(on.output, off.output)


POSITIVE = [p for p in SCRIPTS if not p.stem.endswith("_neg")]


@pytest.mark.parametrize("script", POSITIVE, ids=lambda p: p.stem)
def test_disabling_the_rule_breaks_a_fact(script: Path):
    text, facts, nvargs = load(script)
    rule = rule_of(script)
    assert rule in RULES_BY_NAME, f"{script.name} is not named after a rule"
    res = run(text, Config(disabled_rules=(rule,)), nvargs, str(script))
    structural = [f for f in facts if f.kind != "output"]
    assert check_facts(structural, res), f"{script.name}: every fact holds with '{rule}' disabled"


def test_every_rule_has_a_golden():
    covered = {rule_of(p) for p in POSITIVE}
    missing = [r.name for r in RULES if r.name not in covered]
    assert not missing, f"rules without a golden fixture: {missing}"


def test_no_rewrites_means_no_rule_fires():
    text, facts, nvargs = load(FIXTURES / "fold_constants.dml")
    res = run(text, Config(rewrites=False), nvargs)
    assert check_facts([f for f in facts if f.kind != "output"], res)


def test_unknown_rule_name_is_an_error():
    with pytest.raises(ValueError, match="unknown rewrite rule"):
        run("print(1 + 2)", Config(disabled_rules=("no_such_rule",)))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_rewriting_is_a_fixpoint(script: Path):
    """Rewriting an already rewritten DAG again changes nothing (the driver stops at a fixpoint)."""
    from lafuse.hops.hop import walk
    from lafuse.rewrite import driver
    from lafuse.runtime.recompile import copy_dag
    from tests.rewrite.harness import program_dags

    text, _, nvargs = load(script)
    res = run(text, Config(), nvargs, str(script))
    assert res.program is not None
    for dag in program_dags(res.program) + res.recompiled:
        before = [h.label() for h in walk(dag.roots)]
        again = copy_dag(dag)
        applied = sum(driver.APPLIED.values())
        driver.rewrite_dag(again, Config(), dynamic=True, evaluate=EVALUATE, cost=cost(Config()))
        assert sum(driver.APPLIED.values()) == applied, f"a rule fired again on {before}"
        assert [h.label() for h in walk(again.roots)] == before
