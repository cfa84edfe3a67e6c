"""Element-wise results written into a dying operand (runtime.reuse): which instructions do it, that
values are those of the unoptimized run in the interpreter loop and in straight-line code, and that
an array something else can see (a variable, a view, another register, a function's caller) is
never written."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lafuse import config as cfgmod
from lafuse.compiler import run_dml
from lafuse.plan.build import REUSE_MIN_CELLS
from lafuse.runtime import reuse

ROWS, COLS = 700, 60  # 336,000 bytes a matrix: above REUSE_MIN_BYTES


def _data(seed: int = 3, nan: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((ROWS, COLS))
    if nan:
        X[5, 7], X[9, 1], X[11, 2] = np.nan, np.inf, -np.inf
    return {"X": X, "W": rng.standard_normal((COLS, COLS)), "b": rng.standard_normal((1, COLS)),
            "c": rng.standard_normal((ROWS, 1))}


def run(text: str, inputs: dict, outputs: list[str], after: int = 2, on: bool = True) -> tuple[dict, int]:
    """(outputs, in-place results) of ``text`` without codegen, its operators as written (the
    sum-product rule would fold ``2.5 * (X * 1.5)`` into one multiply)."""
    before = reuse.DONE[0]
    cfg = cfgmod.get().with_(codegen=False, reuse_buffers=on, straight_line_after=after, sum_product=False)
    got = run_dml(text, inputs={k: v.copy() for k, v in inputs.items()}, outputs=outputs, cfg=cfg)
    return got, reuse.DONE[0] - before


def same(a: dict, b: dict) -> None:
    for k in b:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


MLP_TAIL = """
Z = X %*% W
H = tanh(Z + b)
P = 1 / (1 + exp(-(H * 2 - c)))
R = sum(P)
"""


@pytest.mark.parametrize("after", [-1, 0])
def test_a_chain_of_element_wise_operations_reuses_one_buffer(after: int):
    d = _data()
    got, n = run(MLP_TAIL, d, ["P", "R"], after)
    base, n0 = run(MLP_TAIL, d, ["P", "R"], after, on=False)
    assert n0 == 0
    # + b, tanh, * 2, - c, u-, exp, 1 +, 1 /: every operation but the product writes in place
    assert n == 8, n
    same(got, base)
    Z = d["X"] @ d["W"]
    np.testing.assert_allclose(got["P"], 1 / (1 + np.exp(-(np.tanh(Z + d["b"]) * 2 - d["c"]))), rtol=1e-12)


@pytest.mark.parametrize("after", [-1, 0])
def test_variables_and_shared_values_are_never_written(after: int):
    text = """
Y = X %*% W
A = Y + 1
B = A * 2
C = exp(X)
V = X[2:700, ]
D = V * 3
F = X[1:699, ] * 3
E = Y * Y
"""
    d = _data()
    names = ["X", "Y", "A", "B", "C", "D", "E", "F"]
    got, n = run(text, d, names, after)
    base, _ = run(text, d, names, after, on=False)
    same(got, base)
    np.testing.assert_array_equal(got["X"], d["X"])
    # Y and A are variables read later, X is an input, V and X[1:699, ] views of X (the latter dies
    # with its product: the run-time check finds its base), Y * Y reads one register twice
    assert n == 0, n


def test_a_function_argument_of_the_caller_is_not_written():
    text = """
f = function(matrix[double] M) return (matrix[double] R) {
  R = M * 2
}
Z = X %*% W
R = f(Z)
S = Z + 0.5
"""
    d = _data()
    got, _ = run(text, d, ["R", "S"])
    Z = d["X"] @ d["W"]
    np.testing.assert_array_equal(got["R"], Z * 2)
    np.testing.assert_array_equal(got["S"], Z + 0.5)


def test_a_loop_body_reuses_at_every_iteration_and_keeps_values():
    text = """
acc = matrix(0, rows=nrow(X), cols=ncol(X))
for (i in 1:5) {
  acc = acc + exp(-(X %*% W) * i)
}
"""
    d = _data(nan=False)
    got, n = run(text, d, ["acc"])
    base, _ = run(text, d, ["acc"], on=False)
    same(got, base)
    # u-, * i, exp, acc + (acc is dead after the update: its old value is the variable's, so no)
    assert n >= 5 * 3, n


def test_small_results_are_left_alone():
    text = "Y = X %*% W\nR = exp(Y + 1)\n"
    d = {k: v[:10] if k in ("X", "c") else v for k, v in _data().items()}
    _, n = run(text, d, ["R"])
    assert n == 0


def test_kernel_reference_counts_match_the_interpreter():
    """The two calling conventions the wrappers count references for, measured here independently:
    a dying array passes, one more reference (a variable) blocks it."""
    kern = __import__("lafuse.runtime.local.kernels", fromlist=["KERNELS"]).KERNELS["exp"]
    loop = reuse.into(kern, 0, reuse.LOOP_REFS)
    regs = [np.zeros((REUSE_MIN_CELLS, 1))]
    args = [regs[0]]
    r = loop(*args)
    assert r is regs[0]
    keep = regs[0]  # noqa: F841 (a second holder)
    args = [regs[0]]
    assert loop(*args) is not regs[0]
    straight = reuse.into(kern, 0, reuse.STRAIGHT_REFS)
    x = np.zeros((REUSE_MIN_CELLS, 1))
    assert straight(x) is x
    y = x
    assert straight(x) is not y


@pytest.mark.parametrize("after", [-1, 0])
def test_one_dying_register_read_twice_is_squared_in_place(after: int):
    """``(X %*% W - c) ^ 2`` becomes ``D * D`` (rewrites): the difference dies with the product, which
    reads it twice; NaN and Inf cells square like the unoptimized run's."""
    text = "D = X %*% W - c\nE = D ^ 2\nR = sum((X %*% W - 1) ^ 2)\n"
    d = _data()
    got, n = run(text, d, ["E", "R"], after)
    base, _ = run(text, d, ["E", "R"], after, on=False)
    same(got, base)
    # D's square; - 1 and its square (X %*% W is one register for both statements, still live at - c)
    assert n == 3, n
    Z = d["X"] @ d["W"]
    np.testing.assert_array_equal(got["E"], (Z - d["c"]) ** 2)


def test_the_same_operand_wrapper_counts_its_second_reference():
    """``f(r, r)`` in both calling conventions: a dying array is squared in place, one more holder
    blocks it, and two distinct arrays go to the kernel."""
    kern = __import__("lafuse.runtime.local.kernels", fromlist=["KERNELS"]).KERNELS["*"]
    loop = reuse.into(kern, 0, reuse.LOOP_REFS_SAME, same=True)
    regs = [np.full((REUSE_MIN_CELLS, 1), 3.0)]
    args = [regs[0], regs[0]]
    r = loop(*args)
    assert r is regs[0] and r[0, 0] == 9.0
    keep = regs[0]
    args = [regs[0], regs[0]]
    r = loop(*args)
    assert r is not keep and r[0, 0] == 81.0 and keep[0, 0] == 9.0
    straight = reuse.into(kern, 0, reuse.STRAIGHT_REFS_SAME, same=True)
    x = np.full((REUSE_MIN_CELLS, 1), 2.0)
    assert straight(x, x) is x and x[0, 0] == 4.0
    y = x
    assert straight(x, x) is not y and y[0, 0] == 4.0
    z = np.full((REUSE_MIN_CELLS, 1), 5.0)
    assert straight(x, z) is not x and x[0, 0] == 4.0


OPS = ["+", "-", "*", "/"]


@settings(max_examples=30, deadline=None)
@given(op=st.sampled_from(OPS), shape=st.sampled_from(["same", "row", "col", "scalar", "cell"]),
       left=st.booleans(), nans=st.integers(0, 5), seed=st.integers(0, 2**16))
def test_in_place_equals_new_results(op: str, shape: str, left: bool, nans: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((ROWS, COLS))
    X.flat[rng.integers(0, X.size, nans)] = rng.choice([np.nan, np.inf, -np.inf, 0.0], nans)
    other = {"same": rng.standard_normal((ROWS, COLS)), "row": rng.standard_normal((1, COLS)),
             "col": rng.standard_normal((ROWS, 1)), "cell": rng.standard_normal((1, 1))}.get(shape)
    d = {"X": X} if other is None else {"X": X, "O": other}
    o = "2.5" if other is None else "O"
    text = f"R = (X * 1.5) {op} {o}\n" if left else f"R = {o} {op} (X * 1.5)\n"
    got, n = run(text, d, ["R"], after=-1)
    base, _ = run(text, d, ["R"], after=-1, on=False)
    same(got, base)
    np.testing.assert_array_equal(got["X"] if "X" in got else X, X)
    # a 1x1 matrix operand is the kernel's general path (not one ufunc call): computed anew
    assert n == (shape != "cell"), n


def test_the_memory_model_knows_which_results_take_an_operand():
    """hops.patterns.REUSES_OPERAND (what fusion's first-run growth model assumes writes in place) is
    exactly the set of kernels whose dense operation is a float64 ufunc (what reuse.into needs)."""
    from lafuse.hops.patterns import REUSES_OPERAND
    from lafuse.runtime.local.kernels import KERNELS

    assert REUSES_OPERAND == {op for op, k in KERNELS.items() if reuse.dense_ufunc(k) is not None}


@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(["+", "-"]), left=st.booleans(), density=st.sampled_from([0.0, 0.01, 0.3]),
       nans=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_a_sparse_operand_adds_into_a_dying_dense_one(op: str, left: bool, density: float, nans: int, seed: int):
    """``S - (X %*% W)`` and the like (GNMF's ``X - W %*% H``): the dying dense product takes the
    result, negated for ``S - D``, with S's non-zeros (NaN and Inf among them) added or subtracted
    at their cells: the values of the kernel's new result, bit for bit, and no new array."""
    from lafuse.sparse import sp

    rng = np.random.default_rng(seed)
    S = sp.random_array((ROWS, COLS), density=density, format="csr", rng=rng) * 4.0
    if S.nnz:
        S.data[rng.integers(0, S.nnz, nans)] = rng.choice([np.nan, np.inf, -np.inf], nans)
    d = {"S": sp.csr_array(S), "X": rng.standard_normal((ROWS, COLS)), "W": rng.standard_normal((COLS, COLS))}
    text = f"R = S {op} (X %*% W)\n" if left else f"R = (X %*% W) {op} S\n"
    got, n = run(text, d, ["R"], after=-1)
    base, _ = run(text, d, ["R"], after=-1, on=False)
    same(got, base)
    assert n == 1, n
