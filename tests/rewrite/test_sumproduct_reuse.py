"""What keeps the sum-product rule cheap at every recompilation (paper 001 §3): the least work any plan
of a region can do (plans.least_join_size) is a true lower bound, so a region it rules out has no
plan worth building; and a region found without a candidate is known by a key of everything
translation reads (rule.region_key), in this process and, saved by ``lafuse run``, in later ones
(feedback.sumproduct)."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from lafuse.compiler import Compiler, run_dml
from lafuse.config import Config
from lafuse.feedback import observed
from lafuse.feedback import sumproduct as verdicts
from lafuse.rewrite.sumproduct import plans as P
from lafuse.rewrite.sumproduct import rule as R
from lafuse.rewrite.sumproduct.ir import Factor, Term
from tests.fusion.test_decisions import corrupt_cache

from .test_sumproduct import LEAVES, expressions


def test_the_subset_program_finds_the_least_join_size_of_every_tree():
    rng = random.Random(1)
    for _ in range(2000):
        names = [f"i{k}" for k in range(rng.randint(1, 5))]
        ext = {i: rng.choice([2, 3, 7, 50, 1000]) for i in names}
        factors = []
        for _ in range(rng.randint(2, P.MAX_TREE_FACTORS)):
            r, c = rng.choice([*names, None]), rng.choice([*names, None])
            factors.append(Factor(None, r if (r, c) != (None, None) else names[0], c))  # type: ignore[arg-type]
        term = Term((rng.choice([*names, None]), rng.choice([*names, None])), tuple(factors), 1.0, 0)
        trees = min(P.join_size(term, t, ext, reread=False) for t in P.trees(len(factors)))
        assert P.least_tree_size(term, ext) == pytest.approx(trees, rel=1e-12), (factors, term.keep, ext)


def _bounds(expr: str) -> list[tuple[float, float]]:
    """(least_join_size, work) of every plan built for the regions of ``out = sum(expr)``."""
    seen: list[tuple[float, float]] = []
    real = R._candidates

    def checked(ctx, h, regions, mark):
        for r in regions:
            for p in P.alternatives(r, ctx, mark):
                seen.append((P.least_join_size(r), p.work))
        return real(ctx, h, regions, mark)

    R._candidates = checked
    try:
        verdicts._known.clear()  # (every region translated and planned)
        Compiler(Config(codegen=False)).compile_text(f"out = sum({expr})", "<t>",
                                                     {k: np.ones(s) for k, s in LEAVES.items()}, ("out",))
    finally:
        R._candidates = real
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions())
def test_no_plan_of_a_region_does_less_work_than_its_bound(expr):
    for bound, work in _bounds(expr[0]):
        assert bound <= work * (1 + 1e-12), (expr, bound, work)


@pytest.mark.parametrize("expr", ["A %*% B", "(A %*% B) * C", "t(A) %*% (C %*% A)", "(2 * A) %*% (B + t(A))",
                                  "diag(u) %*% C", "colSums(A) %*% B"])
def test_the_bound_holds_where_plans_are_built(expr):
    seen = _bounds(expr)
    assert seen
    assert all(bound <= work * (1 + 1e-12) for bound, work in seen), seen


REGION = "out = W - 0.1 * (t(X) %*% D)"  # no plan does 5% less work than this


def _compile(script: str, shapes: dict[str, tuple[int, int]], cfg: Config | None = None) -> None:
    Compiler(cfg or Config(codegen=False)).compile_text(script, "<t>", {k: np.ones(s) for k, s in shapes.items()},
                                                        ("out",))


def _translations(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = R.translate

    def counted(h, ctx, shared=False):
        calls.append(h.op)
        return real(h, ctx, shared)

    monkeypatch.setattr(R, "translate", counted)
    return calls


def test_a_region_without_candidates_is_not_translated_again(monkeypatch):
    shapes = {"W": (40, 30), "X": (200, 40), "D": (200, 30)}
    verdicts._known.clear()
    calls = _translations(monkeypatch)
    _compile(REGION, shapes)
    assert calls
    n = len(calls)
    _compile(REGION, shapes)
    assert len(calls) == n  # the same region: known
    _compile(REGION, {**shapes, "X": (150, 40), "D": (150, 30)})
    assert len(calls) > n  # other sizes: another key, planned again


@pytest.mark.parametrize("a, b", [
    ("out = sum(X * (X != 0))", "out = sum(X * (Y != 0))"),  # the indicator's input: join elimination
    ("out = sum(W %*% H)", "P = W %*% H\nprint(sum(P))\nout = sum(P %*% t(H))"),  # a shared operator
    ("out = X[1:2, ] %*% Y", "out = X[1:3, ] %*% Y"),  # a literal bound
    ("out = X %*% Y + X", "out = X %*% Y + Y"),  # which leaf is read where
])
def test_regions_that_translate_differently_have_different_keys(a, b):
    shapes = {"X": (30, 30), "Y": (30, 30), "W": (30, 30), "H": (30, 30)}
    keys = []
    real = R.region_key
    for script in (a, b):
        got: list[str | None] = []

        def keyed(ctx, h, got=got):
            got.append(real(ctx, h))
            return got[-1]

        R.region_key = keyed  # type: ignore[assignment]
        try:
            verdicts._known.clear()
            _compile(script, shapes)
        finally:
            R.region_key = real
        keys.append(set(got))
    assert keys[0] and keys[1] and keys[0] != keys[1]


def test_values_do_not_change_when_a_verdict_is_reused():
    rng = np.random.default_rng(7)
    inputs = {"W": rng.random((40, 30)), "X": rng.random((200, 40)), "D": rng.random((200, 30))}
    verdicts._known.clear()
    first = run_dml(REGION, inputs=inputs, outputs=("out",), cfg=Config(), out=io.StringIO())["out"]
    again = run_dml(REGION, inputs=inputs, outputs=("out",), cfg=Config(), out=io.StringIO())["out"]
    off = run_dml(REGION, inputs=inputs, outputs=("out",), cfg=Config(sum_product=False), out=io.StringIO())["out"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, off, rtol=1e-12)


def _cli(script, cache, *args, reuse: str = "1") -> subprocess.CompletedProcess:
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(cache), "LAFUSE_FUSION_REUSE": reuse,
           "LAFUSE_SUM_PRODUCT": "1", "LAFUSE_BACKGROUND": "0"}
    code = ("import sys\nfrom lafuse.cli import main\nfrom lafuse.rewrite.sumproduct import rule as R\n"
            "n = [0]\nreal = R.translate\n"
            "def counted(*a, **k):\n    n[0] += 1\n    return real(*a, **k)\n"
            "R.translate = counted\nrc = main(sys.argv[1:])\nprint('translations:', n[0])\nsys.exit(rc)\n")
    return subprocess.run([sys.executable, "-c", code, "run", str(script), "--no-codegen", *args], env=env,
                          capture_output=True, text=True, timeout=300)


SCRIPT = """W = rand(rows=40, cols=30, seed=1)
X = rand(rows=200, cols=40, seed=2)
D = rand(rows=200, cols=30, seed=3)
out = W - 0.1 * (t(X) %*% D)
print(max(out))
"""


def _translated(res: subprocess.CompletedProcess) -> int:
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip().splitlines()[-1].split()[-1])


def test_lafuse_run_saves_the_verdicts_for_later_runs(tmp_path):
    script = tmp_path / "s.dml"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    first = _cli(script, cache)
    assert _translated(first) > 0
    saved = json.loads((cache / verdicts.FILE).read_text())
    assert saved["keys"] and saved["source"] == observed.source_digest()
    second = _cli(script, cache)
    assert _translated(second) == 0  # every region known from the file
    assert second.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    assert _translated(_cli(script, cache, reuse="0")) > 0  # reuse off: not read
    # another source digest: the file's keys are not used
    (cache / verdicts.FILE).write_text(json.dumps({**saved, "source": "other"}))
    assert _translated(_cli(script, cache)) > 0


@pytest.mark.parametrize("content", [b"\x00garbage", b"[1]", b'{"source": "x", "keys": [1]}'])
def test_a_corrupt_verdicts_file_is_deleted_and_rebuilt(tmp_path, content):
    script, cache = corrupt_cache(tmp_path, SCRIPT, verdicts.FILE, content)
    res = _cli(script, cache)
    assert _translated(res) > 0
    assert f"run feedback {cache / verdicts.FILE} is corrupt" in res.stderr
    assert json.loads((cache / verdicts.FILE).read_text())["keys"]  # rebuilt by the run
    assert _translated(_cli(script, cache)) == 0


BODY = """A1 = 1 / (1 + exp(-(X %*% W1)))
D = (A1 %*% W2 - Y) / nrow(X)
D1 = (D %*% t(W2)) * A1 * (1 - A1)
W1 = W1 - 0.1 * (t(X) %*% D1)
out = W2 - 0.1 * (t(A1) %*% D)
print(max(W1))
"""
BODY_SHAPES = {"X": (60, 20), "W1": (20, 8), "W2": (8, 20), "Y": (60, 20)}


def _recorded(monkeypatch, name: str) -> list[str | None]:
    """The keys ``rule.<name>`` returns from now on, in order."""
    got: list[str | None] = []
    real = getattr(R, name)

    def keyed(*args):
        got.append(real(*args))
        return got[-1]

    monkeypatch.setattr(R, name, keyed)
    return got


def test_a_dag_whose_regions_are_all_verdicts_is_one_verdict(monkeypatch):
    verdicts._known.clear()
    keys = _recorded(monkeypatch, "region_key")
    calls = _translations(monkeypatch)
    _compile(BODY, BODY_SHAPES)
    assert len(keys) >= 4 and calls  # several regions, none with a candidate
    n_keys, n_calls = len(keys), len(calls)
    _compile(BODY, BODY_SHAPES)  # the same DAG again: its one key decides, no region is keyed
    assert (len(keys), len(calls)) == (n_keys, n_calls)
    _compile(BODY, {**BODY_SHAPES, "X": (50, 20), "Y": (50, 20)})  # other sizes: regions keyed again
    assert len(keys) > n_keys


def test_a_dag_with_a_candidate_is_planned_again(monkeypatch):
    """A region whose plan was chosen by cost is no verdict: the DAG around it is decided again, and
    the rewrite fires at each compilation."""
    verdicts._known.clear()
    script = BODY + "s = sum(W1 %*% W2)\nprint(s)\n"
    before = len(R.FIRED)
    _compile(script, BODY_SHAPES)
    once = len(R.FIRED) - before
    assert once >= 1 and any("sum" in f.written for f in R.FIRED[-once:])
    _compile(script, BODY_SHAPES)
    assert len(R.FIRED) - before == 2 * once


def _dag_keys(script: str, shapes: dict[str, tuple[int, int]], monkeypatch) -> set[str]:
    with monkeypatch.context() as m:
        got = _recorded(m, "dag_key")
        verdicts._known.clear()
        _compile(script, shapes)
    assert got and None not in got
    return set(got)  # type: ignore[arg-type]


@pytest.mark.parametrize("b", [
    BODY.replace("0.1 * (t(X)", "0.2 * (t(X)"),  # a literal
    BODY.replace("(t(X) %*% D1)", "(t(X) %*% A1)"),  # an edge
    BODY.replace("(D %*% t(W2)) * A1", "A1 * (D %*% t(W2))"),  # the order of operands
])
def test_dags_that_differ_have_different_keys(b, monkeypatch):
    a_keys = _dag_keys(BODY, BODY_SHAPES, monkeypatch)
    assert a_keys == _dag_keys(BODY, BODY_SHAPES, monkeypatch)  # the same DAG again (new HOP ids): the same
    b_keys = _dag_keys(b, BODY_SHAPES, monkeypatch)
    assert a_keys.isdisjoint(b_keys)
    assert a_keys.isdisjoint(_dag_keys(BODY, {**BODY_SHAPES, "W1": (20, 9), "W2": (9, 20)}, monkeypatch))
