"""Staged control flow (``lf.fori_loop``, ``lf.while_loop``, ``lf.cond``) and ``lf.compile``: each
against the same loop run eagerly in NumPy, the emitted script's blocks, fusion inside a loop body from
the run's statistics, values scoped to their body, and errors at the Python line."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import lafuse as lf
from lafuse.api.emit import emit
from lafuse.errors import DMLRuntimeError

HERE = __file__


def _script(*values):
    return emit([v.node for v in values]).text


def _gd(X, y, steps, lr=0.01):
    w = np.zeros((X.shape[1], 1))
    for _ in range(steps):
        w = w - lr * (X.T @ (X @ w - y))
    return w


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 30), m=st.integers(1, 6), steps=st.integers(0, 7), nan=st.booleans(),
       density=st.sampled_from([1.0, 0.3, 0.0]))
def test_fori_loop_equals_the_numpy_loop(n, m, steps, nan, density):
    rng = np.random.default_rng(n * 100 + m)
    Xn = rng.random((n, m)) * (rng.random((n, m)) < density)
    if nan:
        Xn[0, 0] = np.nan
    yn = rng.random((n, 1))
    X, y = lf.matrix(Xn), lf.matrix(yn)
    w = lf.fori_loop(0, steps, lambda _, w: w - 0.01 * (X.T @ (X @ w - y)), lf.zeros((m, 1)))
    np.testing.assert_allclose(w.compute(), _gd(Xn, yn, steps), rtol=1e-10, atol=1e-12)


def test_a_loop_is_one_for_block_of_the_script_and_its_index_counts_from_lower():
    X = lf.matrix(np.ones((3, 2)))
    total, M = lf.fori_loop(2, 6, lambda i, s: (s[0] + i, s[1] + X * i), (0, lf.zeros((3, 2))))
    text = _script(total, M)
    assert text.count("for (") == 1 and "in 2:5)" in text, text
    t, m = lf.compute(total, M)
    assert t == 2 + 3 + 4 + 5
    np.testing.assert_array_equal(m, np.full((3, 2), 14.0))


def test_lazy_bounds_and_no_iteration():
    X = lf.matrix(np.arange(6.0).reshape(3, 2))
    k = X.sum() / 5  # 3.0, lazy
    out = lf.fori_loop(k, X.sum() / 3, lambda i, v: v + i, 0)  # i = 3, 4
    assert out.compute() == 7
    assert lf.fori_loop(X.sum(), k, lambda i, v: v + 1, 0).compute() == 0  # upper <= lower, lazily
    same = lf.fori_loop(5, 5, lambda i, v: v * 2, X)  # Python bounds: nothing traced
    assert same.node is X.node
    with pytest.raises(TypeError, match="bounds"):
        lf.fori_loop(0, X, lambda i, v: v, X)


def test_while_loop_runs_until_its_condition_is_false():
    Xn = np.random.default_rng(2).random((8, 3))
    X = lf.matrix(Xn)

    def cond(s):
        return s[0].sum() < 1000

    M, k = lf.while_loop(cond, lambda s: (s[0] * 2, s[1] + 1), (X, 0))
    text = _script(M, k)
    assert text.count("while (") == 1
    ref, kk = Xn.copy(), 0
    while ref.sum() < 1000:
        ref, kk = ref * 2, kk + 1
    m, got_k = lf.compute(M, k)
    np.testing.assert_array_equal(m, ref)
    assert got_k == kk
    never = lf.while_loop(lambda v: v < 10, lambda v: v + 1, 20)
    assert never.compute() == 20


def test_cond_takes_one_branch_and_nests_in_a_loop():
    Xn = np.arange(12.0).reshape(4, 3) - 5
    X = lf.matrix(Xn)
    pos = lf.cond(X.sum() > 0, lambda: X * 2, lambda: X - 1)
    np.testing.assert_array_equal(pos.compute(), Xn * 2)
    neg = lf.cond(X.sum() > 1000, lambda a: a * 2, lambda a: a - 1, X)
    np.testing.assert_array_equal(neg.compute(), Xn - 1)

    def body(i, v):  # halve while large, else add one
        return lf.cond(v.sum() > 10, lambda: v / 2, lambda: v + 1)

    got = lf.fori_loop(0, 6, body, X).compute()
    ref = Xn.copy()
    for _ in range(6):
        ref = ref / 2 if ref.sum() > 10 else ref + 1
    np.testing.assert_array_equal(got, ref)


def test_nested_loops_read_the_outer_state_and_swaps_are_simultaneous():
    A0, B0 = np.ones((2, 2)), np.full((2, 2), 3.0)

    def outer(i, s):
        a, b = s
        inner = lf.fori_loop(0, 3, lambda j, c: c + a * j, b)  # reads the outer body's state
        return inner, a

    a, b = lf.fori_loop(0, 2, outer, (lf.matrix(A0), lf.matrix(B0)))
    ra, rb = A0, B0
    for _ in range(2):
        c = rb
        for j in range(3):
            c = c + ra * j
        ra, rb = c, ra
    np.testing.assert_array_equal(a.compute(), ra)
    np.testing.assert_array_equal(b.compute(), rb)
    x, y = lf.fori_loop(0, 3, lambda i, s: (s[1], s[0]), (lf.matrix(A0), lf.matrix(B0)))
    np.testing.assert_array_equal(x.compute(), B0)  # (3 swaps)
    np.testing.assert_array_equal(y.compute(), A0)


def test_state_structures_and_inputs():
    Point = collections.namedtuple("Point", "m k")
    X = np.ones((2, 3))
    got = lf.fori_loop(0, 2, lambda i, s: {"p": Point(s["p"].m + 1, s["p"].k * 2), "l": [s["l"][0] - X]},
                       {"p": Point(X, 1.5), "l": [sp.csr_array(X)]})
    assert isinstance(got["p"], Point) and isinstance(got["l"], list)
    m, k, v = lf.compute(got["p"].m, got["p"].k, got["l"][0])
    np.testing.assert_array_equal(m, X + 2)
    assert k == 6.0
    np.testing.assert_array_equal(v.toarray() if sp.issparse(v) else v, -X)


def test_fusion_reaches_a_loop_body():
    rng = np.random.default_rng(3)
    X, Y = lf.matrix(rng.random((200, 30))), lf.matrix(rng.random((200, 30)))
    total = lf.fori_loop(0, 4, lambda i, s: s + (X * Y * (X + i)).sum(), 0.0)
    with lf.config(stats=True, fusion="fuse-all"):
        total.compute()
    st = lf.last_stats()
    assert st is not None
    runs = collections.Counter()
    for ins in st.ran:
        runs[ins.opcode] += ins.runs
    assert runs["spoofCell"] == 4 and runs["*"] == 0 and runs["sum"] == 0, runs


def test_compile_ahead_then_run():
    Xn = np.random.default_rng(4).random((10, 4))
    X = lf.matrix(Xn)
    c = lf.compile(X.sum(), 3, (X @ X.T).max())
    assert isinstance(c, lf.Compiled) and "sum(" in c.dml
    a, three, b = c.compute()
    assert three == 3 and a == pytest.approx(Xn.sum()) and b == pytest.approx((Xn @ Xn.T).max())
    assert c.compute()[0] == a  # runs again


def test_compile_plans_the_leading_blocks_as_the_run_would():
    """lf.compile plans the blocks a run starts with that read only inputs (api.run.plan_ahead): the
    plan is the one the interpreter makes for that block at run time, and the run uses it."""
    from lafuse.compiler import Compiler
    from lafuse.plan.render import explain_plan
    from lafuse.runtime.interp import Interpreter

    rng = np.random.default_rng(5)
    Xn, Yn = rng.random((50, 8)), rng.random((50, 8))
    X, Y = lf.matrix(Xn), lf.matrix(Yn)
    first = (X * Y * (X + 1)).sum()  # a fused cell operator under fuse-all
    total = lf.fori_loop(0, 3, lambda i, s: s + first * (X * i).sum(), 0.0)
    with lf.config(fusion="fuse-all", stats=True):
        c = lf.compile(total)
        blocks = c._program[1].blocks
        assert blocks[0].plan is not None  # planned at compile
        assert all(b.plan is None for b in blocks[1:] if hasattr(b, "plan"))  # (reads a loop's state)
        ahead = explain_plan(blocks[0].plan)
        (got,) = c.compute()
        st = lf.last_stats()
        # the same script compiled without planning ahead: its interpreter plans the block at run time
        script = c._script
        comp = Compiler(c._program[0].cfg)
        prog = comp.compile_text(script.text, "<test>", script.bound, tuple(script.outputs),
                                 input_nnz=script.nnz)
        assert prog.blocks[0].plan is None
        Interpreter(prog, comp).run(dict(script.bound))
    assert explain_plan(prog.blocks[0].plan) == ahead
    want = (Xn * Yn * (Xn + 1)).sum() * sum((Xn * i).sum() for i in range(3))
    assert got == pytest.approx(want, rel=1e-12)
    assert st is not None and sum(i.runs for i in st.ran if i.opcode == "spoofCell") >= 1


def test_a_value_built_in_a_body_is_not_a_value_outside_it():
    X = lf.matrix(np.ones((3, 3)))
    kept = []

    def body(i, v):
        t = v * 2
        kept.append(t)
        return t

    out = lf.fori_loop(0, 2, body, X)
    with pytest.raises(lf.ScopeError, match="built inside the body of the fori_loop at .*test_control.py"):
        (kept[0] + out).compute()
    with pytest.raises(lf.ScopeError, match="built inside"):
        lf.fori_loop(0, 2, lambda i, v: v + kept[0], X)  # (a later loop reading it)


def test_nothing_is_computed_while_a_body_is_traced():
    X = lf.matrix(np.ones((3, 3)))

    def python_if(i, v):
        return v * 2 if float(v.sum()) < 100 else v

    with pytest.raises(lf.ScopeError, match="traced once.*lf.cond"):
        lf.fori_loop(0, 3, python_if, X)


def test_the_state_keeps_structure_kind_and_shape():
    X = lf.matrix(np.ones((3, 2)))
    with pytest.raises(TypeError, match="returned a tuple of 1; its state is a tuple of 2"):
        lf.fori_loop(0, 2, lambda i, s: (s[0],), (X, X))
    with pytest.raises(TypeError, match="state value 0 is a matrix and the body returned a scalar"):
        lf.fori_loop(0, 2, lambda i, v: v.sum(), X)
    with pytest.raises(lf.ShapeError, match="state value 0 is 3x2 and the body returned a 2x3") as e:
        lf.fori_loop(0, 2, lambda i, v: v.T, X)
    assert e.value.span.file == HERE
    with pytest.raises(TypeError, match="condition is a matrix"):
        lf.while_loop(lambda v: v > 0, lambda v: v, X)
    with pytest.raises(TypeError, match="false branch"):
        lf.cond(X.sum() > 0, lambda: X, lambda: X.sum())


def test_a_runtime_error_in_a_body_is_at_its_python_line():
    X = lf.matrix(np.ones((3, 3)))

    def body(i, v):
        return v + X[i + 5:i + 7]  # rows out of range from the first iteration on

    out = lf.fori_loop(0, 2, body, lf.zeros((2, 3)))
    with pytest.raises(DMLRuntimeError) as e:
        out.compute()
    assert e.value.span is not None and e.value.span.file == HERE
    assert "X[i + 5:i + 7]" in open(HERE).read().splitlines()[e.value.span.line - 1]


def test_an_input_read_inside_and_after_a_loop_is_bound_once():
    Xn = np.random.default_rng(5).random((6, 6))
    X = lf.matrix(Xn)
    W = lf.fori_loop(0, 3, lambda i, w: w @ X, lf.ones((2, 6)))
    script = emit([(W @ X).sum().node])
    assert len(script.bound) == 1 and script.text.count("lf_in0") == 2, script.text
    ref = np.ones((2, 6))
    for _ in range(3):
        ref = ref @ Xn
    assert (W @ X).sum().compute() == pytest.approx((ref @ Xn).sum())


def test_the_docs_loop_example_runs():
    """docs/python.md's "Loops and branches" example, as written there (X, y, d defined first)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    section = text[text.index("## Loops and branches"):]
    code = section[section.index("```python") + len("```python"):section.index("```\n", section.index("```python") + 9)]
    rng = np.random.default_rng(6)
    env = {"lf": lf, "X": lf.matrix(rng.random((50, 3))), "y": lf.matrix(rng.random((50, 1))), "d": 3}
    exec(compile(code, "docs/python.md", "exec"), env)
    w, k, w2 = lf.compute(env["w"], env["k"], env["w2"])
    assert w.shape == (3, 1) and 1 <= k <= 100
    np.testing.assert_array_equal(w2, w if k < 100 else np.zeros((3, 1)))
