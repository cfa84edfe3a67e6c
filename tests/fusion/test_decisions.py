"""Cost-based decisions reused across runs (feedback.decisions): an earlier process's decision that a
DAG stays unfused is replayed only where everything it rests on is unchanged, replays report what
the optimizer reported, and fused or deferred outcomes are never replayed."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from lafuse import cachedir, fusion
from lafuse import config as cfgmod
from lafuse.cost.profile import load
from lafuse.feedback import decisions, observed

from .conftest import PROFILE
from .test_deferred import LOOP, SMALL
from .test_optimizer import loop_body


def new_process() -> None:
    """What the next process starts with (this one's decisions saved)."""
    decisions._loaded.clear()
    decisions._digests.clear()
    decisions._new.clear()
    observed._loaded.clear()
    cachedir.forget()


@pytest.fixture
def reuse(tmp_path, monkeypatch):
    """A fresh plan cache, Numba not started (the only state decisions are reused in), reuse on."""
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fusion, "_numba_started", lambda: False)
    new_process()
    fusion.DEFERRED.clear()
    observed.SAVINGS.clear()
    yield cfgmod.Config(codegen=True, fusion="cost", fusion_reuse=True, fusion_observed=True, codegen_defer=False)
    new_process()
    fusion.DEFERRED.clear()
    observed.SAVINGS.clear()


def _optimize(cfg: cfgmod.Config, weight: float | None = None, preamble: str = SMALL):
    body = loop_body(LOOP, preamble, cfg)
    st = fusion.FusionStats()
    with cfgmod.using(cfg):
        dag, _ = fusion.optimize(body.dag, cfg, st, weight=body.weight if weight is None else weight)
    return body, dag, st


def _labels(dag) -> list[str]:
    return [f"{h.label()} {h.rows}x{h.cols}" for h in dag.hops()]


def test_an_unfused_decision_is_replayed_by_the_next_process(reuse, monkeypatch):
    # 20 runs of sum(X * Y * Z) over 2000 x 1000 save ~0.1 s: not Numba's start (~0.4 s)
    body, first, st1 = _optimize(reuse)
    assert not any(h.kind == "spoof" for h in first.hops())
    assert st1.reused == 0 and st1.memo_entries > 0 and st1.unfused_by_compile_cost > 0
    saved = dict(observed.SAVINGS)
    assert first.candidates and all(k in saved for k in first.candidates)
    assert decisions.save() == 1
    new_process()
    observed.SAVINGS.clear()
    monkeypatch.setattr(fusion, "DECIDED_ON", set())
    body2, again, st2 = _optimize(reuse)
    assert st2.reused == 1 and st2.dags == 1 and st2.memo_entries == 0  # not explored again
    assert st2.unfused_by_compile_cost == st1.unfused_by_compile_cost and st2.observed == st1.observed
    assert again.candidates == first.candidates and _labels(again) == _labels(first)
    # a DAG of its own over the same HOPs (lowering reads them, as without codegen); the block's DAG,
    # recompiled again later, keeps no candidates of this decision
    assert again is not body2.dag and again.roots == body2.dag.roots and body2.dag.candidates == ()
    assert fusion.DECIDED_ON == {load().source}  # the profile the decision was made on
    assert {k: observed.SAVINGS[k] for k in again.candidates} == {k: saved[k] for k in first.candidates}
    assert reuse.fusion_reuse and decisions.save() == 0  # nothing new decided


def test_reuse_off_decides_again(reuse):
    _optimize(reuse)
    decisions.save()
    new_process()
    _, _, st = _optimize(dataclasses.replace(reuse, fusion_reuse=False))
    assert st.reused == 0 and st.memo_entries > 0 and not decisions._new


def test_everything_a_decision_rests_on_is_in_its_key(reuse, tmp_path, monkeypatch):
    body = loop_body(LOOP, SMALL, reuse)
    prof = load()
    order = body.dag.hops()

    def key(cfg=reuse, weight=body.weight, hints=None, prof=prof, order=order, roots=body.dag.roots):
        return decisions.key(order, roots, weight, hints, cfg, prof)

    base = key()
    assert base is not None and key() == base
    # output-only configuration does not matter
    assert key(cfg=dataclasses.replace(reuse, stats=True, explain="hops")) == base
    other = loop_body(LOOP, SMALL.replace("rows=2000", "rows=2001"), reuse)
    variants = {
        "weight": key(weight=body.weight * 2),
        "hints": key(hints={"X": 1000.0}),
        "config": key(cfg=dataclasses.replace(reuse, codegen_defer=True)),
        "profile": key(prof=dataclasses.replace(prof, first_touch_bw=prof.first_touch_bw * 2)),
        "sizes": key(order=other.dag.hops(), roots=other.dag.roots),
    }
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "scipy.linalg.cython_blas", sys.modules.get("scipy.linalg.cython_blas", sys))
        blas_in = key()
        m.delitem(sys.modules, "scipy.linalg.cython_blas")
        variants["BLAS imported"] = key() if blas_in == base else blas_in
    # the profile the optimizer loads itself is keyed by its file: another one, or the same rewritten
    variants["profile given"] = key(prof=None)
    other_profile = tmp_path / "profile.json"
    other_profile.write_bytes(PROFILE.read_bytes())
    monkeypatch.setenv("LAFUSE_PROFILE", str(other_profile))
    new_process()
    variants["profile file"] = key(prof=None)
    other_profile.write_text(other_profile.read_text().replace('"threads"', ' "threads"'))
    new_process()
    variants["profile file rewritten"] = key(prof=None)
    monkeypatch.setenv("LAFUSE_PROFILE", str(PROFILE))
    cache = tmp_path / "cache"
    observed.write_json(cache / observed.FILE, {"k@x:1:1": {"runs": 3.0}})
    new_process()
    variants["feedback"] = key()
    (cache / cachedir.PYCACHE).mkdir(exist_ok=True)
    (cache / cachedir.PYCACHE / "k_0123abcd_000000000000_x.kernel-6.py311.nbi").write_bytes(b"")
    new_process()
    variants["kernels"] = key()
    for what, k in variants.items():
        assert k is not None and k != base, what
    assert len(set(variants.values())) == len(variants)


def _spoofs(dag) -> list[tuple[str, str, list[str]]]:
    return [(h.op, h.params["cplan"].canonical_key()[0], [i.label() for i in h.inputs])
            for h in dag.hops() if h.kind == "spoof"]


def test_a_fused_decision_is_replayed_by_its_cuts(reuse):
    # run often enough to pay Numba's start and a load: fused
    _, first, st1 = _optimize(reuse, weight=1e5)
    assert [op for op, _, _ in _spoofs(first)] == ["spoofCell"] and st1.fused_ops == 1
    [(k, d)] = decisions._new.items()
    assert d.cuts is not None
    decisions.save()
    new_process()
    _, again, st2 = _optimize(reuse, weight=1e5)
    assert st2.reused == 1 and st2.fused_ops == 1 and st2.select.plans_evaluated == 0  # nothing enumerated
    assert _spoofs(again) == _spoofs(first) and _labels(again) == _labels(first)
    assert again.candidates == first.candidates


def test_deferred_outcomes_are_not_recorded(reuse):
    # paying for a load but not a cold compile: left to a background compile, decided again next run
    _, dag, st = _optimize(dataclasses.replace(reuse, codegen_defer=True), weight=200)
    assert not any(h.kind == "spoof" for h in dag.hops()) and st.deferred == 1
    assert not decisions._new


SCRIPT = ("X = rand(rows=400, cols=300, seed=3)\nY = rand(rows=400, cols=300, seed=4)\ns = 0\n"
          "for (i in 1:30) {\n  s = s + sum((X * Y + i) ^ 2)\n}\nprint(s)\n")


def _run(script, cache, *args, reuse="1"):
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(cache), "LAFUSE_PROFILE": str(PROFILE),
           "LAFUSE_FUSION_OBSERVED": "1", "LAFUSE_FUSION_REUSE": reuse}
    code = ("import sys\nfrom lafuse.cli import main\nrc = main(sys.argv[1:])\n"
            "print('optimizer loaded:', 'lafuse.fusion.optimizer' in sys.modules)\n"
            "print('profile loaded:', 'lafuse.cost.profile' in sys.modules)\n")
    return subprocess.run([sys.executable, "-c", code, "run", str(script), *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_reuses_decisions_without_loading_the_optimizer(tmp_path):
    script = tmp_path / "loop.dml"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"
    plain = _run(script, cache, "--no-codegen")
    first = _run(script, cache, "--stats")
    assert first.returncode == 0, first.stderr
    assert "optimizer loaded: True" in first.stdout and "as an earlier run decided" not in first.stdout
    assert json.loads((cache / decisions.FILE).read_text())
    second = _run(script, cache, "--stats")
    assert second.returncode == 0, second.stderr
    assert "optimizer loaded: False" in second.stdout
    assert "as an earlier run decided them, not enumerated again" in second.stdout
    value = plain.stdout.splitlines()[0]
    assert first.stdout.splitlines()[0] == value and second.stdout.splitlines()[0] == value
    # nor the hardware profile (keyed by its file), where nothing else costs (no --stats estimate)
    quiet = _run(script, cache)
    assert "optimizer loaded: False" in quiet.stdout and "profile loaded: False" in quiet.stdout
    assert quiet.stdout.splitlines()[0] == value
    off = _run(script, cache, "--stats", reuse="0")
    assert "optimizer loaded: True" in off.stdout and off.stdout.splitlines()[0] == value


def corrupt_cache(tmp_path, text: str, name: str, content: bytes):
    """(a script of ``text``, a private plan cache whose feedback file ``name`` holds ``content``)."""
    script = tmp_path / "s.dml"
    script.write_text(text)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / name).write_bytes(content)
    return script, cache


@pytest.mark.parametrize("content", [b"\x00\xffgarbage", b"[1, 2]", b'{"k": "x"}',
                                     b'{"k": {"candidates": [], "savings": {}, "blas": [], "unfused": -1, '
                                     b'"observed": 0}}'])
def test_a_corrupt_decisions_file_is_deleted_and_rebuilt(tmp_path, content):
    script, cache = corrupt_cache(tmp_path, SCRIPT, decisions.FILE, content)
    res = _run(script, cache)
    assert res.returncode == 0 and "optimizer loaded: True" in res.stdout
    assert f"run feedback {cache / decisions.FILE} is corrupt" in res.stderr
    assert isinstance(json.loads((cache / decisions.FILE).read_text()), dict)  # rebuilt by the run
    again = _run(script, cache)
    assert again.stderr == "" and "optimizer loaded: False" in again.stdout
