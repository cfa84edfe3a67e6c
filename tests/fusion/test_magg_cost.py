"""Multi-aggregates under the cost-based policy (fusion.magg, paper 000 §3): explored (bare full
aggregates of a matrix and the Cell operators of full aggregates are candidates), costed (a merge
happens only where one operator costs less than its parts; the selector prices the merges of
operators computing a HOP in common, so they decide which intermediates are written), weighed for
their compile like any fused operator (one that does not pay is split, not dissolved), and replayed
from an earlier run's decision."""

from __future__ import annotations

import pytest

from lafuse import config as cfgmod
from lafuse import fusion
from lafuse.cost.fused import fused_cost
from lafuse.cost.profile import load
from lafuse.feedback import decisions
from lafuse.fusion import magg, optimizer
from lafuse.fusion.construct import build_plan
from lafuse.fusion.memo import explore
from lafuse.fusion.select import Context, CostBased, interesting_points, partitions, plan_cost

from .test_decisions import new_process
from .test_optimizer import BIG, HINTS, fused, loop_body


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A plan cache of no kernels (whether a kernel is cached weighs in its compile decision)."""
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    fusion.DEFERRED.clear()
    yield
    fusion.DEFERRED.clear()


def _scalar_aggs(labels: list[str]) -> list[str]:
    return [lb for lb in labels if lb.startswith("ua(") and "[scalar]" in lb]


def test_bare_aggregates_of_one_matrix_become_one_pass_under_cost(fresh):
    """min(X), max(X) and sum(X) of a 100000 x 1000 X in a loop: one operator reading X once (three
    passes of 800 MB unfused), where before the cost-based policy left them to three instructions."""
    st = fusion.FusionStats()
    spoofs, labels = fused("a = min(X)\nb = max(X)\nc = sum(X)\nprint(a + b + c)", "cost", st)
    assert [s.op for s in spoofs] == ["spoofMA"] and st.maggs == 1
    plan = spoofs[0].params["cplan"]
    assert sorted(plan.agg_ops) == ["max", "min", "sum"] and [i.name for i in spoofs[0].inputs] == ["X"]
    assert not _scalar_aggs(labels), labels


def test_a_merge_that_would_cost_more_is_declined(fresh):
    """sum(S ^ 2) runs over the 0.1% non-zeros of S, sum(exp(S)) over every cell: one operator for
    both is not sparse-safe and computes S ^ 2 at every cell, which costs more than the read of S it
    saves. The cost-based policy keeps two operators (the heuristic ones merge them)."""
    text = "a = sum(S ^ 2)\nb = sum(exp(S))\nprint(a + b)"
    st = fusion.FusionStats()
    assert not any(s.op == "spoofMA" for s in fused(text, "cost", st)[0])
    assert st.magg_declined >= 1 and st.maggs == 0
    assert [s.op for s in fused(text, "fuse-all")[0]] == ["spoofMA"]
    # the verdict is the cost model's: the merged operator against the two apart
    prof = load()
    body = loop_body(text, BIG, cfgmod.Config(codegen=True, fusion="cost", sum_product=False))
    memo = explore(body.dag.roots)
    cells = magg.candidates(build_plan(memo, body.dag.roots, body.dag.hops(), frozenset()).fused)
    assert len(cells) == 2
    merged = magg.build(cells)
    assert merged.plan is not None and not merged.plan.sparse_safe
    apart = sum(fused_cost(o.plan, o.inputs, None, prof, HINTS) for o in cells if o.plan is not None)
    assert fused_cost(merged.plan, merged.inputs, None, prof, HINTS) > apart
    assert not magg.CostedMerge(prof, HINTS)([cells[0]], cells[1])


THREE = "A = X * Y\na = sum(A)\nb = sum(A * Z)\nc = sum(A ^ 2)\nprint(a + b + c)"


def test_the_selector_prices_the_merge_of_aggregates_that_share_an_intermediate(fresh):
    """A = X * Y read by three full aggregates: apart, computing A three times (reading X and Y three
    times) costs more than writing A once and reading it thrice, so a selector blind to
    multi-aggregates materializes A; merged, one pass reads X, Y and Z once and writes nothing, which
    the selector's plan cost sees, so A is never written."""
    cfg = cfgmod.Config(codegen=True, fusion="cost", sum_product=False)
    body = loop_body(THREE, BIG, cfg)
    dag = body.dag
    memo = explore(dag.roots)
    order = dag.hops()
    (part,) = partitions(memo)
    pts = interesting_points(memo, part)
    a = {g for _, g in pts if memo.hops[g].op == "*" and memo.hops[g].inputs[0].name == "X"}
    assert len(a) == 1
    cut_a = frozenset(p for p in pts if p[1] in a)
    prof = load()

    def cost(cuts, maggs=True):
        return plan_cost(build_plan(memo, dag.roots, order, cuts, part=part), part, prof, hints=HINTS, maggs=maggs)

    assert cost(cut_a, maggs=False) < cost(frozenset(), maggs=False)  # blind: write A
    assert cost(frozenset()) < cost(cut_a)  # priced: one pass
    assert CostBased().select(Context(memo, dag.roots, order, prof, hints=HINTS, weight=body.weight)) == frozenset()
    spoofs, labels = fused(THREE, "cost")
    assert [s.op for s in spoofs] == ["spoofMA"] and sorted(i.name for i in spoofs[0].inputs) == ["X", "Y", "Z"]
    assert not any(lb.startswith("b(*) [matrix]") for lb in labels), labels


def test_a_multi_aggregate_that_does_not_pay_is_split_not_dissolved(fresh, monkeypatch):
    """Weighed for its compile, a multi-aggregate that does not pay gives its roots back to be weighed
    one by one, rather than cutting every member: here each member's kernel is cached (a load) and
    the merged one is not (a cold compile, which five runs over 2000 x 1000 inputs do not pay for),
    so the members stay fused apart."""
    monkeypatch.setattr(optimizer, "_kernel_cached", lambda plan: plan.template != "magg")
    cfg = cfgmod.Config(codegen=True, fusion="cost", sum_product=False, codegen_defer=False)
    mid = "".join(f"{v} = rand(rows=2000, cols=1000, seed={i})\n" for i, v in enumerate("XYZ"))
    text = "a = sum(X * Y)\nb = sum(X * Z)\nprint(a + b)"
    body = loop_body(text, mid, cfg)
    memo = explore(body.dag.roots)
    order = body.dag.hops()
    ops = magg.combine(build_plan(memo, body.dag.roots, order, frozenset()).fused)
    assert [o.template for o in ops] == ["magg"]
    cuts, split = optimizer._not_worth_compiling(ops, order, memo.consumers, load(), 5.0, None, fusion.FusionStats())
    assert cuts == frozenset() and split == {r.id for r in ops[0].roots}
    st = fusion.FusionStats()
    with cfgmod.using(cfg):
        dag, _ = fusion.optimize(body.dag, cfg, st, weight=5.0)
    assert [h.op for h in dag.hops() if h.kind == "spoof"] == ["spoofCell", "spoofCell"] and st.maggs == 0


@pytest.mark.parametrize("text", ["a = min(X)\nb = max(X)\nc = sum(X)\nprint(a + b + c)",
                                  "a = sum(X * Y)\nb = sum(X * Z)\nprint(a + b)"])
def test_a_multi_aggregate_decision_is_replayed(fresh, monkeypatch, text):
    """The next process rebuilds the same multi-aggregate from the recorded decision (its roots by
    position) without enumerating anything; bare aggregates too (a decision without cuts)."""
    cfg = cfgmod.Config(codegen=True, fusion="cost", sum_product=False, fusion_reuse=True, codegen_defer=False)
    monkeypatch.setattr(fusion, "_numba_started", lambda: False)  # (decisions are kept only before it starts)
    new_process()
    try:
        def run():
            body = loop_body(text, BIG, cfg)
            st = fusion.FusionStats()
            with cfgmod.using(cfg):
                dag, _ = fusion.optimize(body.dag, cfg, st, weight=1e5, hints=HINTS)  # (pays Numba's start)
            return [(h.op, h.params["cplan"].canonical_key()[0], [i.label() for i in h.inputs])
                    for h in dag.hops() if h.kind == "spoof"], st

        first, st1 = run()
        assert [op for op, _, _ in first] == ["spoofMA"] and st1.reused == 0
        [(_, d)] = decisions._new.items()
        assert len(d.maggs) == 1 and len(d.maggs[0]) == text.count("sum(") + text.count("min(") + text.count("max(")
        decisions.save()
        new_process()
        again, st2 = run()
        assert st2.reused == 1 and st2.select.plans_evaluated == 0 and again == first
    finally:
        new_process()


def test_stats_report_multi_aggregates_and_declined_merges():
    from lafuse.runtime.stats import Stats

    line = Stats(fusion=fusion.FusionStats(maggs=2, magg_declined=1))._codegen_lines()[1]
    assert "multi-aggregates 2 (1 merges of full aggregates declined" in line, line
    assert "multi-aggregates" not in Stats(fusion=fusion.FusionStats())._codegen_lines()[1]


def test_a_stale_recorded_group_is_left_apart():
    """A recorded group whose roots are not aggregates of the plan (only a stale entry could name
    them) rebuilds nothing: the operators stay apart and compute the same values."""
    cfg = cfgmod.Config(codegen=True, fusion="cost", sum_product=False)
    body = loop_body("a = sum(X * Y)\nb = sum(X * Z)\nprint(a + b)", BIG, cfg)
    memo = explore(body.dag.roots)
    order = body.dag.hops()
    ops = build_plan(memo, body.dag.roots, order, frozenset()).fused
    at = {h.id: i for i, h in enumerate(order)}
    roots = tuple(sorted(at[o.root.id] for o in ops))
    assert [o.template for o in magg.recorded(ops, [], [roots], order)] == ["magg"]
    assert magg.recorded(ops, [], [(len(order) + 1, roots[0])], order) == ops
    assert magg.recorded(ops, [], [roots, roots], order)[-1].template == "magg"  # (each operator once)
