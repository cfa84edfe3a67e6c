"""Distributed matrix products (runtime.dask.matmul) by each of SystemDS's strategies
(plan.mmstrategy): every strategy forced through Config.mm_method gives NumPy's result on dense and
sparse operands with edge blocks everywhere (tiny odd block sizes), the plan shows the strategy it
runs, each strategy submits the tasks its design says (a task per output block, per block of the
common dimension plus a sum, ...), a broadcast operand reaches a worker once, and the selection
follows SystemDS's order and cost formulas."""

from __future__ import annotations

import io
import re
from collections import Counter

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from lafuse.hops.hop import MATRIX, Hop
from lafuse.plan import mmstrategy as S
from lafuse.plan.exectype import ClusterShape
from lafuse.plan.instructions import Instruction
from lafuse.sparse import sp
from tests.on_dask import common
from tests.on_dask.common import dense as _dense

RNG = np.random.default_rng(3)


def _sparse(r, c, density=0.15):
    return sp.random_array((r, c), density=density, format="csr", rng=RNG, data_sampler=RNG.standard_normal)


D = {  # dense and sparse operands whose dims are no multiple of 7 or 5 (a sparse one of 1024 cells or more:
    # smaller matrices are dense by the runtime's format rule)
    "X": RNG.standard_normal((23, 6)), "Xs": _sparse(150, 7, 0.1),
    "Y": RNG.standard_normal((5, 19)), "Ys": _sparse(5, 211, 0.1),
    "v": RNG.standard_normal((6, 1)), "v2": RNG.standard_normal((6, 1)), "v3": RNG.standard_normal((6, 1)),
    "vx": RNG.standard_normal((7, 1)), "w": RNG.standard_normal((23, 1)), "wx": RNG.standard_normal((150, 1)),
    "y": RNG.standard_normal((23, 3)), "ys": _sparse(150, 7, 0.1),
    "A": RNG.standard_normal((23, 16)), "As": _sparse(67, 16, 0.1), "B": RNG.standard_normal((16, 9)),
    "Bs": _sparse(16, 67, 0.1), "C": RNG.standard_normal((23, 11)), "C2": RNG.standard_normal((67, 11)),
    "E": RNG.standard_normal((12, 16)), "Xw": RNG.standard_normal((23, 9)), "vw": RNG.standard_normal((9, 1)),
}
N = {k: _dense(v) for k, v in D.items()}

# per strategy: a script whose every product it applies to, and the NumPy value of each result
GENERAL = ("""
P1 = A %*% B
P2 = As %*% B
P3 = A %*% Bs
P4 = t(A) %*% C
P5 = t(As) %*% C2
P6 = E %*% t(A)
P7 = t(X) %*% (w * (X %*% v))
P8 = t(Xs) %*% (Xs %*% vx)
""", {"P1": lambda n: n["A"] @ n["B"], "P2": lambda n: n["As"] @ n["B"], "P3": lambda n: n["A"] @ n["Bs"],
      "P4": lambda n: n["A"].T @ n["C"], "P5": lambda n: n["As"].T @ n["C2"], "P6": lambda n: n["E"] @ n["A"].T,
      "P7": lambda n: n["X"].T @ (n["w"] * (n["X"] @ n["v"])), "P8": lambda n: n["Xs"].T @ (n["Xs"] @ n["vx"])})
CASES = {
    S.TSMM: ("""
T1 = t(X) %*% X
T2 = t(Xs) %*% Xs
T3 = Y %*% t(Y)
T4 = Ys %*% t(Ys)
""", {"T1": lambda n: n["X"].T @ n["X"], "T2": lambda n: n["Xs"].T @ n["Xs"], "T3": lambda n: n["Y"] @ n["Y"].T,
      "T4": lambda n: n["Ys"] @ n["Ys"].T}),
    S.MAPMMCHAIN: ("""
C1 = t(X) %*% (X %*% v)
C2 = t(Xs) %*% (wx * (Xs %*% vx))
C3 = t(X %*% v3) %*% X
C4 = t(X) %*% ((X %*% v2) * w)
""", {"C1": lambda n: n["X"].T @ (n["X"] @ n["v"]), "C2": lambda n: n["Xs"].T @ (n["wx"] * (n["Xs"] @ n["vx"])),
      "C3": lambda n: (n["X"] @ n["v3"]).T @ n["X"], "C4": lambda n: n["X"].T @ ((n["X"] @ n["v2"]) * n["w"])}),
    S.ZIPMM: ("""
Z1 = t(X) %*% y
Z2 = t(Xs) %*% ys
Z3 = t(y) %*% X
""", {"Z1": lambda n: n["X"].T @ n["y"], "Z2": lambda n: n["Xs"].T @ n["ys"], "Z3": lambda n: n["y"].T @ n["X"]}),
    S.MAPMM_L: GENERAL, S.MAPMM_R: GENERAL, S.CPMM: GENERAL, S.RMM: GENERAL,
}


def test_the_sparse_operands_stay_sparse():
    """(What makes the sparse cases sparse: the runtime keeps these inputs CSR, so their blocks are.)"""
    from lafuse.runtime.values import as_input_value, is_sparse

    assert all(is_sparse(as_input_value(v)) == k.endswith("s") for k, v in D.items()), \
        {k: type(as_input_value(v)).__name__ for k, v in D.items()}


def _cfg(scheduler: str, **kw) -> cfgmod.Config:
    return common.cfg(scheduler, **kw)


def _plan(text: str, cfg: cfgmod.Config, outs: tuple[str, ...]) -> str:
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(text, "<test>", dict(D), outs)
        return explain_program(prog, "runtime", comp)


def _products(plan: str) -> list[str]:
    """The strategies of the plan's DASK products (their lines name a strategy in place of the opcode)."""
    return re.findall(rf"^-*DASK ({'|'.join(S.METHODS)}) .* blocks\(\d+\)", plan, re.M)


@pytest.mark.parametrize("method,bs", [(m, 7) for m in S.METHODS] + [(S.CPMM, 5), (S.MAPMM_L, 5)])
def test_every_strategy_forced_gives_numpys_product(method, bs, dask_scheduler):
    """End to end (--exec dask, the strategy forced): each product of its script runs by that
    strategy, dense and sparse operands, transposes read in place and mmchains included, and gives
    NumPy's value (rtol 1e-9)."""
    text, expect = CASES[method]
    outs = tuple(expect)
    cfg = _cfg(dask_scheduler, mm_method=method, block_size=bs)
    plan = _plan(text, cfg, outs)
    assert _products(plan) == [method] * len(outs), plan
    got = run_dml(text, inputs=dict(D), outputs=outs, cfg=cfg, out=io.StringIO())
    for k, f in expect.items():
        np.testing.assert_allclose(_dense(got[k]), f(N), rtol=1e-9, atol=1e-12, err_msg=f"{method} {k}")


def test_the_rules_choose_by_shape_without_forcing(dask_scheduler):
    """No method forced, the cluster's default budget: TSMM for t(X) %*% X with one output block,
    MapMMChain for the chains, MapMM broadcasting the smaller operand (also for the outer product of
    a chain whose X is two column blocks), and the values equal NumPy's."""
    text = CASES[S.TSMM][0] + CASES[S.MAPMMCHAIN][0] + "P1 = A %*% B\nP8 = t(X) %*% A\nC5 = t(Xw) %*% (Xw %*% vw)\n"
    expect = {**CASES[S.TSMM][1], **CASES[S.MAPMMCHAIN][1], "P1": GENERAL[1]["P1"],
              "P8": lambda n: n["X"].T @ n["A"], "C5": lambda n: n["Xw"].T @ (n["Xw"] @ n["vw"])}
    outs = tuple(expect)
    cfg = _cfg(dask_scheduler)
    plan = _plan(text, cfg, outs)
    # C5: one instruction, the chain's transposed form t(t(Xw %*% vw) %*% Xw) the rewrites chose, its
    # outer product t(q) %*% Xw broadcasting the 1 x 23 t(q)
    assert _products(plan) == [S.TSMM] * 4 + [S.MAPMMCHAIN] * 4 + [S.MAPMM_R, S.MAPMM_L, S.MAPMM_L], plan
    assert re.search(r"^-*DASK mapmm_l _r\d+ _r\d+ -> _r\d+ \[1,9,", plan, re.M), plan
    got = run_dml(text, inputs=dict(D), outputs=outs, cfg=cfg, out=io.StringIO())
    for k, f in expect.items():
        np.testing.assert_allclose(_dense(got[k]), f(N), rtol=1e-9, atol=1e-12, err_msg=k)


def test_a_forced_strategy_that_does_not_apply_leaves_the_choice_to_the_rules(dask_scheduler):
    """TSMM forced on products that are no t(X) %*% X, MapMMChain on no chain, ZIPMM on a product of
    several output blocks: the rules' strategy (here MapMM)."""
    text = "P1 = A %*% B\nP8 = t(X) %*% A\n"
    for forced in (S.TSMM, S.MAPMMCHAIN, S.ZIPMM):
        assert _products(_plan(text, _cfg(dask_scheduler, mm_method=forced), ("P1", "P8"))) == [S.MAPMM_R, S.MAPMM_L]


# ---------------------------------------------------------------- the runtime's tasks


def _backend(scheduler: str, bs: int):
    from lafuse.runtime.dask.backend import DaskBackend

    return DaskBackend(_cfg(scheduler, block_size=bs))


def _counting(be, monkeypatch) -> Counter:
    """The block functions ``be`` submits, by name."""
    seen: Counter = Counter()
    submit = type(be).submit

    def counting(self, fn, *args, **kw):
        seen[fn.__name__] += 1
        return submit(self, fn, *args, **kw)

    monkeypatch.setattr(type(be), "submit", counting)
    return seen


@pytest.mark.parametrize("sparse", [False, True])
def test_each_strategy_submits_the_tasks_of_its_design(sparse, dask_scheduler, monkeypatch):
    """A = 17 x 23, B = 23 x 12 at 5 x 5 blocks (I = 4, K = 5, J = 3): RMM and MapMM a task per output
    block (MapMM one more to pack a broadcast operand of several blocks), CPMM one per k, a sum of the
    partial grids and one per output block; ZIPMM and TSMM (one output block) one per k and a sum;
    MapMMChain one per row block of X and a sum; 19 partials are summed 8 at a time (3 sums, then
    one). Every result equals NumPy's."""
    from lafuse.runtime.dask import matmul

    be = _backend(dask_scheduler, 5)
    mk = _sparse if sparse else (lambda r, c: RNG.standard_normal((r, c)))
    a, b, x, v, w = mk(17, 23), mk(23, 12), mk(23, 4), RNG.standard_normal((4, 1)), RNG.standard_normal((23, 1))
    da, db, dx, dv, dw = (be.scatter(m) for m in (a, b, x, v, w))
    na, nb, nx = _dense(a), _dense(b), _dense(x)
    seen = _counting(be, monkeypatch)
    cases = [  # (strategy, ta, tb, A, B, NumPy, tasks by block function)
        (S.RMM, False, False, da, db, na @ nb, {"mm_sum": 12}),
        (S.MAPMM_L, False, False, da, db, na @ nb, {"pack": 1, "mm_sum": 12}),
        (S.MAPMM_R, False, False, da, db, na @ nb, {"pack": 1, "mm_sum": 12}),
        (S.CPMM, False, False, da, db, na @ nb, {"cross": 5, "sum_grids": 1, "pick": 12}),
        (S.CPMM, True, False, db, dx, nb.T @ nx, {"cross": 5, "sum_grids": 1, "pick": 3}),
        (S.ZIPMM, True, False, dx, dw, nx.T @ w, {"mm_sum": 5, "sum_all": 1}),
        (S.TSMM, True, False, dx, dx, nx.T @ nx, {"self_product": 5, "sum_all": 1}),
    ]
    for method, ta, tb, ma, mb, expect, tasks in cases:
        seen.clear()
        got = be.collect(matmul.product(be, method, ta, tb, ma, mb))
        np.testing.assert_allclose(_dense(got), expect, rtol=1e-9, atol=1e-12, err_msg=method)
        assert dict(seen) == tasks, (method, dict(seen))
    xt = be.scatter(_dense(x).T.copy() if not sparse else sp.csr_array(x.T))  # 4 x 23: X %*% t(X), one block
    seen.clear()
    got = be.collect(matmul.product(be, S.TSMM, False, True, xt, xt))
    np.testing.assert_allclose(_dense(got), nx.T @ nx, rtol=1e-9, atol=1e-12)
    assert dict(seen) == {"self_product": 5, "sum_all": 1}
    seen.clear()
    got = be.collect(matmul.mmchain(be, S.MAPMMCHAIN, True, False, dx, dv, dw))
    np.testing.assert_allclose(_dense(got), nx.T @ (w * (nx @ v)), rtol=1e-9, atol=1e-12)
    assert dict(seen) == {"chain_block": 5, "sum_all": 1}
    seen.clear()  # the chain's transposed form, and RMM where a strategy does not fit the operands
    got = be.collect(matmul.mmchain(be, S.MAPMMCHAIN, False, True, dx, dv, dw))
    np.testing.assert_allclose(_dense(got), (nx @ v * w).T @ nx, rtol=1e-9, atol=1e-12)
    tall = be.scatter(mk(95, 4))  # 19 row blocks
    seen.clear()
    got = be.collect(matmul.product(be, S.TSMM, True, False, tall, tall))
    nt = _dense(be.collect(tall))
    np.testing.assert_allclose(_dense(got), nt.T @ nt, rtol=1e-9, atol=1e-12)
    assert dict(seen) == {"self_product": 19, "sum_all": 3 + 1}
    wide, v7 = mk(23, 7), RNG.standard_normal((7, 1))  # X two column blocks: no MapMMChain; X %*% v by RMM,
    dwide, dv7 = be.scatter(wide), be.scatter(v7)  # w * q, then t(X) %*% q by RMM
    seen.clear()
    got = be.collect(matmul.mmchain(be, S.MAPMMCHAIN, True, False, dwide, dv7, dw))
    np.testing.assert_allclose(_dense(got), _dense(wide).T @ (w * (_dense(wide) @ v7)), rtol=1e-9, atol=1e-12)
    assert dict(seen) == {"mm_sum": 5 + 2, "times": 5}
    seen.clear()
    got = be.collect(matmul.product(be, S.TSMM, False, False, da, db))
    np.testing.assert_allclose(_dense(got), na @ nb, rtol=1e-9, atol=1e-12)
    assert dict(seen) == {"mm_sum": 12}


@pytest.mark.parametrize("sparse", [False, True])
def test_a_long_common_dimension_runs_in_bounded_tasks(sparse, dask_scheduler, monkeypatch):
    """RMM and MapMM over 19 blocks of the common dimension (``t(y) %*% X``, X 95 x 9 at 5 x 5 blocks)
    with a task's input bounded to 1000 bytes (MM_TASK_INPUT_BYTES, scaled down from 8 MiB as a tall
    X at 1000-blocks needs): RMM's pair of blocks (1 x 5 of t(y), 5 x 5 of X) takes 240 bytes, so runs
    of four blocks (5 runs), a task per output block and run, the runs' partials summed; MapMM's
    broadcast t(y) is not counted (it arrives whole), so runs of five X blocks (4 runs). Both give
    NumPy's result."""
    from lafuse.runtime.dask import matmul

    monkeypatch.setattr(matmul, "MM_TASK_INPUT_BYTES", 1000)
    be = _backend(dask_scheduler, 5)
    mk = _sparse if sparse else (lambda r, c: RNG.standard_normal((r, c)))
    x, y = mk(95, 9), RNG.standard_normal((95, 1))
    dx, dy = be.scatter(x), be.scatter(y)
    expect = y.T @ _dense(x)
    seen = _counting(be, monkeypatch)
    for method, tasks in ((S.RMM, {"mm_sum": 2 * 5, "sum_all": 2}),
                          (S.MAPMM_L, {"pack": 1, "mm_sum": 2 * 4, "sum_all": 2})):
        seen.clear()
        got = be.collect(matmul.product(be, method, True, False, dy, dx))
        np.testing.assert_allclose(_dense(got), expect, rtol=1e-9, atol=1e-12, err_msg=method)
        assert dict(seen) == tasks, (method, dict(seen))


def test_a_broadcast_operand_reaches_each_worker_once(dask_scheduler, monkeypatch):
    """MapMM: the broadcast operand (6 blocks packed into one value) is fetched by a worker at most
    once for all of its 15 tasks (the workers' transfer logs)."""
    from distributed import wait

    from lafuse.runtime.dask import matmul

    be = _backend(dask_scheduler, 5)
    a, b = RNG.standard_normal((25, 8)), RNG.standard_normal((8, 14))
    da, db = be.scatter(a), be.scatter(b)
    packs = []
    submit = type(be).submit

    def keeping(self, fn, *args, **kw):
        fut = submit(self, fn, *args, **kw)
        if fn is matmul.pack:
            packs.append(fut)
        return fut

    monkeypatch.setattr(type(be), "submit", keeping)
    out = matmul.mapmm_r(be, matmul.Operand(da), matmul.Operand(db))
    wait(list(out.blocks.values()))
    np.testing.assert_allclose(_dense(be.collect(out)), a @ b, rtol=1e-9)
    assert len(out.blocks) == 15 and len(packs) == 1
    key = str(packs[0].key)
    fetched = be.client().run(
        lambda dask_worker: [str(k) for t in dask_worker.transfer_incoming_log for k in t["keys"]])
    assert all(keys.count(key) <= 1 for keys in fetched.values()), (key, fetched)


# ---------------------------------------------------------------- the selection rules


def _m(r: int, c: int, nnz: int = -1) -> Hop:
    h = Hop("tread", "data", [], MATRIX)
    h.rows, h.cols, h.nnz = r, c, nnz
    return h


def _t(x: Hop) -> Hop:
    h = Hop("t", "reorg", [x], MATRIX)
    h.rows, h.cols, h.nnz = x.cols, x.rows, x.nnz
    return h


def _mm(a: Hop, b: Hop, ta: bool = False, tb: bool = False) -> Instruction:
    """The instruction of op(a) %*% op(b), a transpose read in place as the plan shapes it."""
    ia, ib = _t(a) if ta else a, _t(b) if tb else b
    h = Hop("%*%", "matmult", [ia, ib], MATRIX)
    h.rows, h.cols = ia.rows, ib.cols
    ins = Instruction("%*%", h, [0, 1], 2)
    if ta or tb:
        ins.transposed, ins.reads = (ta, tb), [a, b]
    return ins


def _chain(x: Hop, v: Hop, w: Hop | None = None) -> Instruction:
    q = Hop("%*%", "matmult", [x, v], MATRIX)
    q.rows, q.cols = x.rows, v.cols
    ins = _mm(x, q, ta=True)
    ins.opcode, ins.reads, ins.transposed = "mmchain", [x, v] + ([w] if w is not None else []), None
    ins.chain = (True, False)
    return ins


GIB = float(1 << 30)


def _cluster(bs: int = 1000, workers: int = 2, worker_bytes: float = GIB) -> ClusterShape:
    return ClusterShape(bs, workers, worker_bytes)


def test_tsmm_first_when_the_output_is_one_block():
    x = _m(100_000, 800)
    assert S.choose(_mm(x, x, ta=True), _cluster()) == S.TSMM
    y = _m(700, 100_000)
    assert S.choose(_mm(y, y, tb=True), _cluster()) == S.TSMM  # X %*% t(X)
    wide = _m(100_000, 1500)  # 2 x 2 output blocks: no TSMM; no broadcast fits 1 MB: by cost
    assert S.choose(_mm(wide, wide, ta=True), _cluster(worker_bytes=1e6)) in (S.CPMM, S.RMM)
    other = _m(100_000, 800)  # t(X) %*% Y is no tsmm even with Y of X's shape
    assert S.choose(_mm(x, other, ta=True), _cluster(worker_bytes=1e6)) == S.ZIPMM


def test_mapmmchain_when_x_is_one_column_block_and_v_a_broadcastable_column():
    x, v, w = _m(1_000_000, 500), _m(500, 1), _m(1_000_000, 1)
    assert S.choose(_chain(x, v), _cluster()) == S.MAPMMCHAIN
    assert S.choose(_chain(x, v, w), _cluster()) == S.MAPMMCHAIN
    assert S.choose(_chain(x, v), _cluster(bs=400)) != S.MAPMMCHAIN  # X two column blocks
    assert S.choose(_chain(x, _m(500, 2)), _cluster()) != S.MAPMMCHAIN  # v two columns (SystemDS: one)
    # v does not fit the broadcast budget (4000 B of 0.7 x 5000 B)
    assert S.choose(_chain(x, v), _cluster(worker_bytes=5000)) != S.MAPMMCHAIN
    assert S.choose(_mm(x, v), _cluster()) != S.MAPMMCHAIN  # a plain product is no chain


def test_mapmm_broadcasts_the_smaller_operand_that_fits():
    small, big = _m(10, 100_000), _m(100_000, 20_000)
    assert S.choose(_mm(small, big), _cluster()) == S.MAPMM_L
    assert S.choose(_mm(_m(20_000, 100_000), _m(100_000, 10)), _cluster()) == S.MAPMM_R
    # the smaller (8 MB) does not fit a 10 MB worker's budget with its output strip; nothing does: by cost
    assert S.choose(_mm(small, big), _cluster(worker_bytes=10e6)) in (S.CPMM, S.RMM)
    # a sparse operand counts its CSR bytes: 1e4 x 1e4 at 1e4 non-zeros fits where dense would not
    sparse, dense = _m(10_000, 10_000, 10_000), _m(10_000, 10_000)
    assert S.choose(_mm(_m(10_000, 10_000), sparse), _cluster(worker_bytes=200e6)) == S.MAPMM_R
    assert S.choose(_mm(_m(10_000, 10_000), dense), _cluster(worker_bytes=200e6)) in (S.CPMM, S.RMM)
    assert S.mapmm_footprint((10, 100, -1), (100, 3000, -1), 1000, 1) == 8 * (10 * 100 + 100 * 1000 + 10 * 1000)


def test_zipmm_for_a_transposed_left_operand_with_one_output_block():
    x, y = _m(1_000_000, 800), _m(1_000_000, 10)
    tiny = _cluster(worker_bytes=1e6)  # no broadcast fits
    assert S.choose(_mm(x, y, ta=True), tiny) == S.ZIPMM
    assert S.choose(_mm(_t(x), y), tiny) != S.ZIPMM  # a materialized t(X): SystemDS's rule needs the transpose
    assert S.choose(_mm(_m(1_000_000, 1200), y, ta=True), tiny) != S.ZIPMM  # two output blocks


def test_cpmm_or_rmm_by_the_cost_formulas():
    """SystemDS's formulas (sizes in cells, parallelism min(blocks, tasks)) by hand; the same
    product flips from CPMM to RMM when more tasks run at once; a long common dimension with one
    output block takes CPMM, many output blocks over a short one RMM."""
    # A 1000 x 100000, B 100000 x 1000, two tasks: RMM (4e8 + 1e6) / 1; CPMM (4e8 + 2e6) / 2 + 5e6 / 1
    assert S.rmm_cost(1000, 100_000, 100_000, 1000, 1000, 2) == 4.01e8
    assert S.cpmm_cost(1000, 100_000, 100_000, 1000, 1000, 2) == 2.06e8
    none = 1.0  # no broadcast budget
    assert S.select(S.Product((1000, 100_000, -1), (100_000, 1000, -1)), 1000, 2, none) == S.CPMM
    assert S.select(S.Product((10_000, 1000, -1), (1000, 10_000, -1)), 1000, 2, none) == S.RMM
    sq = S.Product((5000, 5000, -1), (5000, 5000, -1))
    assert S.cpmm_cost(5000, 5000, 5000, 5000, 1000, 2) < S.rmm_cost(5000, 5000, 5000, 5000, 1000, 2)
    assert S.select(sq, 1000, 2, none) == S.CPMM
    assert S.select(sq, 1000, 8, none) == S.RMM
    assert S.select(S.Product((-1, 5000, -1), (5000, 5000, -1)), 1000, 8, GIB) == S.CPMM  # unknown dims
    assert S.select(S.Product((-1, 5000, -1), (5000, 10, -1), tleft=True), 1000, 8, 1.0) == S.CPMM  # (no ZIPMM)
    assert S.select(S.Product((5000, 100, -1), (100, -1, -1), tsmm=S.LEFT), 1000, 8, 1.0) == S.CPMM  # (no TSMM)


def test_forcing_applies_only_where_the_strategy_fits():
    x, a, b = _m(30, 6), _m(23, 16), _m(16, 9)
    with cfgmod.using(cfgmod.Config(mm_method=S.CPMM)):
        assert S.choose(_mm(a, b), _cluster(bs=7)) == S.CPMM
        assert S.choose(_chain(x, _m(6, 1)), _cluster(bs=7)) == S.CPMM
    with cfgmod.using(cfgmod.Config(mm_method=S.TSMM)):
        assert S.choose(_mm(x, x, ta=True), _cluster(bs=7)) == S.TSMM
        assert S.choose(_mm(a, b), _cluster(bs=7)) == S.MAPMM_R
        assert S.choose(_mm(_m(30, 9), _m(30, 9), ta=True), _cluster(bs=7)) != S.TSMM  # 2 x 2 output blocks
    with cfgmod.using(cfgmod.Config(mm_method=S.MAPMMCHAIN)):
        assert S.choose(_chain(_m(30, 9), _m(9, 1)), _cluster(bs=7)) != S.MAPMMCHAIN  # X two column blocks
    assert set(cfgmod.CHOICES["mm_method"]) == {None, *S.METHODS}
    assert cfgmod.check_value("mm_method", "zipmm") == "zipmm"
    with pytest.raises(ValueError, match="'mm_method' must be one of"):
        cfgmod.check_value("mm_method", "pmm")


def test_what_the_planner_may_distribute():
    x, v = _m(30, 6), _m(6, 1)
    assert S.distributable(_mm(x, v)) and S.distributable(_mm(x, x, ta=True)) and S.distributable(_chain(x, v))
    assert S.distributable(_mm(_m(6, 30), x, tb=True))
    assert not S.distributable(_mm(_m(-1, 6), v))  # unknown dims stay local
    assert not S.distributable(_chain(x, _m(6, -1)))
