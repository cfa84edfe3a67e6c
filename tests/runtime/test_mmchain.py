"""The unfused chain operator (hops.patterns.mmchains, kernels_linalg.k_mmchain): which products become
one ``mmchain`` instruction, that it computes what the two products compute (dense, CSR, NaN/Inf,
partial last blocks, broadcasting ``w``), and that everything else is left as it was."""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost import profile
from lafuse.cost.operators import instruction_cost
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.local import kernels_linalg as la
from lafuse.runtime.stats import Stats
from lafuse.runtime.values import as_matrix_value


def run(text: str, inputs: dict, mmchain: bool = True) -> tuple[dict, dict[str, int]]:
    """(symbol table, opcode counts) of ``text`` without codegen."""
    cfg = cfgmod.Config(codegen=False, mmchain=mmchain)
    bound = {k: as_matrix_value(v) for k, v in inputs.items()}
    stats = Stats()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        prog = comp.compile_text(text, "<mmchain>", bound, ("R", "S"))
        st_ = Interpreter(prog, comp, stats=stats).run(dict(bound))
    return st_, stats.op_count


@pytest.fixture(scope="module")
def big() -> dict:
    """X above MMCHAIN_MIN_BYTES (8400 x 256 doubles, 17 MB), so the blocked pass runs, with a
    partial last block."""
    rng = np.random.default_rng(7)
    n, m = 8400, 256
    assert n * m * 8 >= la.MMCHAIN_MIN_BYTES and n % (la.MMCHAIN_BLOCK_BYTES // (8 * m)) != 0
    return {"X": rng.standard_normal((n, m)), "v": rng.standard_normal((m, 1)), "V": rng.standard_normal((m, 3)),
            "w": rng.random((n, 1)), "W": rng.random((n, 3))}


CHAINS = [
    "R = t(X) %*% (X %*% v)",
    "R = t(X) %*% (w * (X %*% v))",
    "R = t(X) %*% ((X %*% v) * w)",
    "R = t(X) %*% (X %*% V)",
    "R = t(X) %*% (w * (X %*% V))",  # a column w against 3 columns
    "R = t(X) %*% (W * (X %*% V))",  # w of the product's shape
]


@pytest.mark.parametrize("text", CHAINS)
def test_a_chain_runs_as_one_instruction_and_equals_the_two_products(text: str, big: dict):
    st_, ops = run(text, big)
    base, base_ops = run(text, big, mmchain=False)
    assert ops.get("mmchain") == 1 and "%*%" not in ops and "*" not in ops, ops
    assert base_ops.get("%*%") == 2 and "mmchain" not in base_ops
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("text", [
    "R = t(X) %*% (X %*% v)\nS = X %*% v",  # the inner product is read again
    "R = t(X) %*% (w * (X %*% v))\nS = w * (X %*% v)",  # so is the *
    "R = t(X) %*% (X %*% v + w)",  # not a chain
    "R = t(X) %*% (X %*% t(X))",  # the inner product's right side is a transpose read through
])
def test_other_products_are_left_as_they_were(text: str, big: dict):
    ins = {k: big[k] for k in ("X", "v", "w")}
    if "t(X))" in text:
        ins["X"] = big["X"][:300, :50]
    st_, ops = run(text, ins)
    base, _ = run(text, ins, mmchain=False)
    assert "mmchain" not in ops and ops.get("%*%", 0) >= 2, ops
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-12)


@pytest.mark.parametrize("text", [
    "R = t(t(A) %*% u) %*% t(A)",  # X a transpose that only products read
    "Z = t(A)\nR = t(Z) %*% (Z %*% u)",
    "R = t(X %*% v) %*% X",  # the t(q) %*% X form written by hand
    "R = t(w * (X %*% v)) %*% X",
])
def test_chains_over_transposes_and_the_transposed_form(text: str, big: dict):
    ins = {"X": big["X"], "v": big["v"], "w": big["w"], "A": np.ascontiguousarray(big["X"][:, :200].T),
           "u": big["V"][:200, :1].copy()}
    st_, ops = run(text, ins)
    base, _ = run(text, ins, mmchain=False)
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-10, atol=1e-9)
    if "X" in text:
        assert ops.get("mmchain") == 1 and "%*%" not in ops, ops


def test_a_sparse_x_runs_the_two_products_inside_the_instruction(big: dict):
    """A CSR X (its format known only at run time) takes the chain's own operators: same values."""
    rng = np.random.default_rng(3)
    X = sp.random(9000, 400, density=0.01, format="csr", random_state=4) * 3.0
    ins = {"X": X, "v": rng.standard_normal((400, 1)), "w": rng.random((9000, 1))}
    text = "R = t(X) %*% (w * (X %*% v))"
    st_, ops = run(text, ins)
    base, _ = run(text, ins, mmchain=False)
    assert ops.get("mmchain") == 1
    np.testing.assert_allclose(np.asarray(st_["R"]), np.asarray(base["R"]), rtol=1e-12)


def _reference(x, v, w, w_first):
    q = x @ v
    if w is not None:
        q = w * q if w_first else q * w
    return x.T @ q


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 70), m=st.integers(1, 9), k=st.integers(1, 4), form=st.sampled_from(["none", "col", "full"]),
       block=st.integers(1, 3), special=st.booleans(), seed=st.integers(0, 2**16))
def test_the_blocked_pass_equals_the_two_products(n, m, k, form, block, special, seed):
    """Any shape, block size (partial last blocks), w form, and NaN/+-Inf cells in X, v and w."""
    rng = np.random.default_rng(seed)
    x, v = rng.standard_normal((n, m)), rng.standard_normal((m, k))
    w = None if form == "none" else rng.standard_normal((n, 1 if form == "col" else k))
    if special:
        for a in (x, v) + ((w,) if w is not None else ()):
            idx = rng.integers(0, a.size, size=max(1, a.size // 10))
            a.flat[idx] = rng.choice([np.nan, np.inf, -np.inf], size=idx.size)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(la, "MMCHAIN_MIN_BYTES", 0)
        mp.setattr(la, "MMCHAIN_BLOCK_BYTES", 8 * m * block)
        for first in (True, False):
            got = la.mmchain_blocked(x, v, w, first)
            assert got is not None
            with np.errstate(all="ignore"):
                ref = _reference(x, v, w, first)
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10, equal_nan=True)


def test_the_blocked_pass_declines_what_it_does_not_cover(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(la, "MMCHAIN_MIN_BYTES", 0)
    x, v = np.ones((10, 4)), np.ones((4, 1))
    assert la.mmchain_blocked(x, v) is not None
    assert la.mmchain_blocked(np.asfortranarray(x), v) is None  # row blocks would be strided
    assert la.mmchain_blocked(sp.csr_array(x), v) is None
    assert la.mmchain_blocked(x, np.ones((4, la.MMCHAIN_MAX_COLS + 1))) is None
    assert la.mmchain_blocked(x, np.ones((4, 0))) is None
    assert la.mmchain_blocked(x, v, np.ones((1, 1))) is None  # a 1x1 w broadcasts: the * kernel's case
    assert la.mmchain_blocked(np.ones((0, 4)), v) is not None  # no rows: zeros
    monkeypatch.setattr(la, "MMCHAIN_MIN_BYTES", 1 << 20)
    assert la.mmchain_blocked(x, v) is None  # small: the second product reads X from cache anyway
    # the instruction's fallback keeps the operators' semantics, errors included
    np.testing.assert_allclose(la.k_mmchain(x, v, np.full((1, 1), 2.0)), _reference(x, v, 2.0, True))
    with pytest.raises(Exception, match="invalid dimensions"):
        la.k_mmchain(x, np.ones((5, 1)))


def test_the_cost_model_prices_one_scan_of_a_dense_x(big: dict):
    """The chain instruction's estimate: below the two products', not below one of them."""
    text = "R = t(X) %*% (w * (X %*% v))"
    cfg = cfgmod.Config(codegen=False)
    bound = {k: as_matrix_value(big[k]) for k in ("X", "v", "w")}
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=Stats())
        prog = comp.compile_text(text, "<mmchain>", bound, ("R",))
        plan = comp.lower_dag(prog.blocks[0].dag)
    prof = profile.load()
    ins = [i for i in plan.instructions if i.opcode == "mmchain"]
    assert len(ins) == 1
    chain = instruction_cost("mmchain", ins[0].hop, prof).compute
    outer = instruction_cost("%*%", ins[0].hop, prof).compute
    assert outer <= chain < 2.0 * outer


def test_the_fusion_optimizer_prices_an_unfused_chain_as_the_instruction(big: dict):
    """What the cost-based policy weighs fusion against: the chain left unfused costs what the mmchain
    instruction costs, not two scans of X (with config mmchain off, the two products)."""
    from lafuse.cost.fused import basic_cost, chain_saving
    from lafuse.fusion import optimizer
    from lafuse.fusion.select import unfused_cost
    from lafuse.hops.program import copy_dag

    cfg = cfgmod.Config(codegen=False)
    bound = {k: as_matrix_value(big[k]) for k in ("X", "v", "w")}
    with cfgmod.using(cfg):
        prog = Compiler(cfg, stats=Stats()).compile_text("R = t(X) %*% (w * (X %*% v))", "<mmchain>", bound, ("R",))
    prof = profile.load()
    for chains in (True, False):
        dag = copy_dag(prog.blocks[0].dag)
        order = dag.hops()
        optimizer._mark_read_through(dag, order, chains)
        outer = [h for h in order if h.params.get("chain_parts")]
        if not chains:
            assert not outer
            continue
        assert len(outer) == 1
        parts = [h for h in order if h.id in outer[0].params["chain_parts"]]
        assert sorted(h.op for h in parts) == ["%*%", "*"]
        hops = outer + parts
        saving = chain_saving(outer[0], parts, prof)
        assert saving > 0
        assert unfused_cost(hops, prof, None) == pytest.approx(sum(basic_cost(h, prof) for h in hops) - saving)
        assert unfused_cost(hops, prof, None) == pytest.approx(
            instruction_cost("mmchain", outer[0], prof).compute)
        assert unfused_cost(hops[:2], prof, None) == pytest.approx(sum(basic_cost(h, prof) for h in hops[:2]))


def test_the_blocked_pass_splits_rows_by_the_thread_budget_and_restores_blas(monkeypatch: pytest.MonkeyPatch):
    """One row range per thread of the run's budget (lafuse.threads), BLAS at one thread inside the
    ranges and back to its count after; one thread runs the ranges in the calling thread."""
    from threadpoolctl import threadpool_info

    from lafuse import threads

    monkeypatch.setattr(la, "MMCHAIN_MIN_BYTES", 0)
    monkeypatch.setattr(la, "MMCHAIN_BLOCK_BYTES", 8 * 6 * 5)
    rng = np.random.default_rng(7)
    x, v, w = rng.standard_normal((203, 6)), rng.standard_normal((6, 2)), rng.standard_normal((203, 1))
    ref = _reference(x, v, w, True)
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    for budget in (1, 2, 3):
        with threads.blas_limited(budget):
            assert threads.budget() == min(budget, os.cpu_count() or 1)
            got = la.mmchain_blocked(x, v, w, True)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
    assert threads.budget() == (os.cpu_count() or 1)
