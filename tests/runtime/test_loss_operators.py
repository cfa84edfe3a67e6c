"""The loss operators over a low-rank product: the squared loss (hops.patterns.squared_losses,
kernels_linalg.k_wsloss) and the sampled sum (hops.patterns.sampled_sums, kernels_linalg.k_sampled_sum).
Which sums become one ``wsloss`` or ``sampledsum`` instruction, that it computes what the product,
the cell-wise operators and the sum compute (dense and CSR X, NaN/Inf, transposed factors, partial
last blocks, empty and one-cell shapes), and that everything else is left as it was."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.explain import explain_program
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.local import kernels_linalg as la
from lafuse.runtime.stats import Stats
from lafuse.runtime.values import as_matrix_value


def run(text: str, inputs: dict, on: bool = True, **kw) -> tuple[dict, dict[str, int], str]:
    """(symbol table, opcode counts, plan) of ``text`` without codegen, as written (the sum-product
    rule off: it would regroup sum(S * (U %*% H)) before the loss operators see it)."""
    cfg = cfgmod.Config(codegen=False, squared_loss=on, **{"sum_product": False, **kw})
    bound = {k: as_matrix_value(v) for k, v in inputs.items()}
    stats = Stats()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        prog = comp.compile_text(text, "<wsloss>", bound, ("R",))
        plan = explain_program(prog, "runtime", comp)
        st_ = Interpreter(prog, comp, stats=stats).run(dict(bound))
    return st_, stats.op_count, plan


@pytest.fixture(scope="module")
def data() -> dict:
    """X 700 x 300 (210,000 cells: above the pattern's 65,536), in a dense and a 2% CSR form with NaN
    and Inf among its values, and rank-4 factors."""
    rng = np.random.default_rng(11)
    n, m, k = 700, 300, 4
    X = rng.standard_normal((n, m))
    S = sp.random_array((n, m), density=0.02, format="csr", rng=rng) * 3.0
    S.data[:3] = [np.nan, np.inf, -np.inf]
    return {"X": X, "S": sp.csr_array(S), "U": rng.standard_normal((n, k)), "V": rng.standard_normal((m, k)),
            "H": rng.standard_normal((k, m)), "Ut": rng.standard_normal((k, n))}


LOSSES = [
    "R = sum((X - U %*% t(V)) ^ 2)",
    "R = sum((U %*% H - X) ^ 2)",
    "R = sum((X - t(Ut) %*% H) ^ 2)",
    "R = sum((S - U %*% H) ^ 2)",  # CSR X with NaN and Inf: the sum is NaN either way
    "R = sum((X[, 1:300] - U %*% t(V)) ^ 2)",
]


@pytest.mark.parametrize("text", LOSSES)
def test_a_squared_loss_runs_as_one_instruction_and_equals_the_operators(text: str, data: dict):
    st_, ops, plan = run(text, data)
    base, base_ops, base_plan = run(text, data, on=False)
    assert ops.get("wsloss") == 1 and "%*%" not in ops and "-" not in ops, ops
    assert "wsloss" not in base_ops and base_ops.get("%*%") == 1, base_ops
    assert " wsloss " in plan and " wsloss " not in base_plan
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-12)


def test_the_loss_of_a_finite_x_is_numpys_within_rounding(data: dict):
    S = data["S"].copy()
    S.data = np.nan_to_num(S.data, nan=1.0, posinf=5.0, neginf=-5.0)
    st_, _, _ = run("R = sum((S - U %*% H) ^ 2)", {**data, "S": S})
    expect = float(np.sum((S.toarray() - data["U"] @ data["H"]) ** 2))
    assert st_["R"] == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("text", [
    "D = X - U %*% H\nR = sum(D ^ 2) + sum(D)",  # the difference read elsewhere
    "P = U %*% H\nR = sum((X - P) ^ 2) + sum(P)",  # the product read elsewhere
    "R = sum((X - U %*% H) ^ 3)",  # not a square
    "R = sum((X[1:200, 1:300] - U[1:200, ] %*% H) ^ 2)",  # 60,000 cells: below the pattern's size
])
def test_everything_else_is_left_as_it_was(text: str, data: dict):
    st_, ops, _ = run(text, data)
    base, _, _ = run(text, data, on=False)
    assert "wsloss" not in ops, ops
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-12)


def test_the_cluster_gets_the_operators_under_exec_dask(data: dict):
    """--exec dask: the cluster runs the product and the rest (the operator is local only); a plan
    without a run, so no cluster is started."""
    cfg = cfgmod.Config(codegen=False, exec_type="dask")
    bound = {k: as_matrix_value(v) for k, v in data.items()}
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text("R = sum((X - U %*% H) ^ 2)", "<wsloss>", bound, ("R",))
        plan = explain_program(prog, "runtime", comp)
    assert " wsloss " not in plan and "DASK" in plan, plan


def _operands(n: int, m: int, k: int, nans: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (n x m, 40% non-zeros), U (n x k), V (k x m), each with up to ``nans`` NaN/Inf."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m)) * (rng.random((n, m)) < 0.4)
    U, V = rng.standard_normal((n, k)), rng.standard_normal((k, m))
    for a in (X, U, V):
        if a.size and nans:
            a.flat[rng.integers(0, a.size, nans)] = rng.choice([np.nan, np.inf, -np.inf], nans)
    return X, U, V


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 9), m=st.integers(0, 9), k=st.integers(0, 3), sparse=st.booleans(),
       ta=st.booleans(), tb=st.booleans(), nans=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_the_kernel_equals_numpy_over_shapes_blocks_and_non_finite_values(n, m, k, sparse, ta, tb, nans, seed):
    """Every shape from empty to 9 x 9, rank 0 to 3, blocks of one to a few rows (the block size
    scaled down), NaN/Inf in X and the factors: NumPy's ``sum((X - U @ V) ** 2)``."""
    X, U, V = _operands(n, m, k, nans, seed)
    with np.errstate(all="ignore"):
        expect = float(np.sum((X - U @ V) ** 2))
    x = sp.csr_array(X) if sparse else X
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(la, "SQUARED_LOSS_BLOCK_BYTES", 8 * max(m, 1) * (1 + seed % 3))
        got = la.k_wsloss(x, U.T.copy() if ta else U, V.T.copy() if tb else V, ta, tb)
    if np.isnan(expect):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expect, rel=1e-12, abs=1e-12)


SAMPLED = [
    "R = sum(S * log(U %*% t(V) + 1e-15))",
    "R = sum(log(abs(U %*% H) + 1) * S)",
    "R = sum(S * (2 - exp(t(Ut) %*% H / 4)))",
    "R = sum(S * (U %*% H))",  # g the identity
]


@pytest.mark.parametrize("text", SAMPLED)
def test_a_sampled_sum_runs_as_one_instruction_and_equals_the_operators(text: str, data: dict):
    """S's NaN and Inf make the sum NaN both ways; the same sums over a finite S agree to 1e-12
    (the product's dot products add in another order than BLAS's); log of a negative product where
    S is zero is NaN that neither reads."""
    finite = data["S"].copy()
    finite.data = np.nan_to_num(finite.data, nan=1.0, posinf=5.0, neginf=-5.0)
    for s in (data["S"], finite):
        st_, ops, plan = run(text, {**data, "S": s})
        base, base_ops, _ = run(text, {**data, "S": s}, on=False)
        assert ops.get("sampledsum") == 1 and "%*%" not in ops and "*" not in ops, ops
        assert "sampledsum" not in base_ops and base_ops.get("%*%") == 1, base_ops
        if np.isnan(base["R"]):
            assert np.isnan(st_["R"])
        else:
            np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-12)


@pytest.mark.parametrize("text", [
    "R = sum(X * log(abs(U %*% H) + 1))",  # a dense X: every cell counts (0 * NaN is NaN there)
    "G = log(abs(U %*% H) + 1)\nR = sum(S * G) + sum(G)",  # g read elsewhere
    "R = sum(S * (U %*% H) * S)",  # not one product with X
    "R = sum(S * log(U %*% H, 2))",  # log with a base: not in g's operators
])
def test_sums_that_are_not_sampled_sums_are_left_alone(text: str, data: dict):
    st_, ops, _ = run(text, data)
    base, _, _ = run(text, data, on=False)
    assert "sampledsum" not in ops, ops
    np.testing.assert_allclose(st_["R"], base["R"], rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 9), m=st.integers(0, 9), k=st.integers(0, 3), sparse=st.booleans(), x_left=st.booleans(),
       ta=st.booleans(), nans=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_the_sampled_kernel_equals_the_operators(n, m, k, sparse, x_left, ta, nans, seed):
    """Every shape from empty to 9 x 9, rank 0 to 3, gathers of one to a few non-zeros, on one thread or several, NaN/Inf in X
    and the factors, g = sqrt(abs(P) * 2) - 1: the unfused kernels' ``sum(X * g(U @ V))``."""
    from lafuse.runtime.local.kernels import KERNELS

    X, U, V = _operands(n, m, k, nans, seed)
    chain = (("abs", None, False), ("*", 2.0, False), ("sqrt", None, False), ("-", 1.0, False))
    x = sp.csr_array(X) if sparse else X
    with np.errstate(all="ignore"):  # as a run's thread executes (kernels_common.ieee_thread)
        g = KERNELS["-"](KERNELS["sqrt"](KERNELS["*"](KERNELS["abs"](U @ V), 2.0)), 1.0)
        expect = KERNELS["sum"](KERNELS["*"](x, g) if x_left else KERNELS["*"](g, x))
    with pytest.MonkeyPatch.context() as mp, np.errstate(all="ignore"):
        mp.setattr(la, "SAMPLED_GATHER_BYTES", 8 * max(1, k) * (1 + seed % 3))  # gathers of 1-3 non-zeros
        mp.setattr(la, "SAMPLED_TASK_NNZ", 1 + seed % 5)  # ranges of one or more gathers, taken by the threads
        got = la.k_sampled_sum(x, U.T.copy() if ta else U, V, ta, False, x_left, chain)
    if np.isnan(expect):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expect, rel=1e-12, abs=1e-12)
