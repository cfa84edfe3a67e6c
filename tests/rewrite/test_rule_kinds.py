"""Each local rule's declared HOP kinds (Rule.kinds; the driver tries a rule only on HOPs of its
kinds): over the un-rewritten DAGs of every golden fixture, no rule matches a HOP of another kind,
and each rule with kinds matches a HOP of one of them somewhere (its declaration is not empty talk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lafuse.config import Config
from lafuse.rewrite import RULES
from lafuse.rewrite.core import Ctx
from lafuse.rewrite.driver import by_kind
from tests.rewrite.harness import EVALUATE, raw_fixture_dags

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rewrite"
LOCAL = [r for r in RULES if r.scope == "hop"]


@pytest.fixture(scope="module")
def raw_dags() -> list:
    return raw_fixture_dags(FIXTURES)


def test_no_rule_matches_a_hop_kind_it_does_not_declare(raw_dags):
    cfg = Config()
    fired: set[str] = set()
    for dag in raw_dags:
        ctx = Ctx(cfg, True, None, dag, EVALUATE)
        for h in dag.hops():
            for r in LOCAL:
                new = r.fn(h, ctx)
                if new is None or new is h:
                    continue
                fired.add(r.name)
                assert r.kinds is None or h.kind in r.kinds, f"{r.name} matched a {h.kind} HOP: {h.label()}"
    declared = {r.name for r in LOCAL if r.kinds is not None}
    assert declared and declared <= fired | {"fold_sizes"}, sorted(declared - fired)


def test_the_dispatch_table_keeps_each_kinds_rules_in_order():
    table, other = by_kind(LOCAL)
    for kind, rules in table.items():
        assert rules == [r for r in LOCAL if r.kinds is None or kind in r.kinds], kind
    assert other == [r for r in LOCAL if r.kinds is None]
