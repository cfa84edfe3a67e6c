"""The Dask backend (runtime.dask) against the local runtime: the same scripts under --exec dask with
tiny odd blocks (7x7: edge blocks everywhere) give the local results (rtol 1e-9), with the operators
the plan sends to Dask actually run there (DASK instructions with their scatter/collect moves)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from lafuse.plan import exectype
from lafuse.plan.instructions import DASK, LOCAL
from tests.on_dask.common import cfg as _cfg
from tests.on_dask.common import dense as _dense

SCRIPTS = {
    "elementwise": """
X = rand(rows=23, cols=17, seed=1, min=-1, max=1)
Y = rand(rows=23, cols=17, seed=2, sparsity=0.3)
Z = (X + Y) * 2 - exp(X) / (abs(Y) + 1)
C = (X > Y) + (X <= 0.25) * sqrt(abs(X))
s = sum(Z) + sum(C)
""",
    "aggregates": """
X = rand(rows=30, cols=8, seed=3)
r = rowSums(X * 3)
c = colSums(X - 1)
s = sum(r) * sum(c) + sum(t(X) * 2)
""",
    "products": """
A = rand(rows=23, cols=16, seed=4, min=-1, max=1)
B = rand(rows=16, cols=9, seed=5, sparsity=0.4)
C = (A %*% B) * 0.5
D = t(C) + 1
s = sum(D)
""",
    "sparse": """
X = rand(rows=40, cols=15, seed=6, sparsity=0.05)
Y = X * 4 + (X != 0)
s = sum(Y) + sum(rowSums(Y))
""",
    "loop": """
X = rand(rows=23, cols=17, seed=1, min=-1, max=1)
Y = rand(rows=17, cols=11, seed=2, sparsity=0.3)
s = 0
for (i in 1:4) {
  Z = X %*% Y
  Z = Z * i + Z / 3
  s = s + sum(Z)
  X = X * 0.9 + 0.01
}
""",
}
OUTPUTS = {"elementwise": ("s", "Z", "C"), "aggregates": ("s", "r", "c"), "products": ("s", "C", "D"),
           "sparse": ("s", "Y"), "loop": ("s", "Z")}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_dask_results_equal_local(name, dask_scheduler):
    text, outs = SCRIPTS[name], OUTPUTS[name]
    local = run_dml(text, outputs=outs, cfg=_cfg(), out=io.StringIO())
    dist = run_dml(text, outputs=outs, cfg=_cfg(dask_scheduler), out=io.StringIO())
    for k in outs:
        np.testing.assert_allclose(_dense(dist[k]), _dense(local[k]), rtol=1e-9, atol=1e-12, err_msg=k)


def test_the_plan_runs_operators_on_dask_with_explicit_moves(dask_scheduler):
    """--exec dask: the products, element-wise operators and sums are DASK instructions; a local value
    they read is scattered once, a distributed one local instructions read (the cumulative aggregates) is
    collected once, and variables keep their distributed values (no collect before the writes)."""
    cfg = _cfg(dask_scheduler)
    # A is a local operator's result (cumsum has no distributed operator; rand has one): scattered once
    text = (SCRIPTS["products"].replace("A = rand(rows=23, cols=16, seed=4, min=-1, max=1)",
                                        "A = cumsum(rand(rows=23, cols=16, seed=4, min=-1, max=1))")
            + "E = cumsum(C)\nF = cummax(C)\nprint(toString(E[1:2, 1:2]))\nprint(toString(F[2:3, 1:2]))\n")
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(text, "<test>", outputs=OUTPUTS["products"])
        plan = explain_program(prog, "runtime", comp)
    assert re.search(r"^-*DASK (rmm|cpmm|mapmm_l|mapmm_r) _r\d+ _r\d+ -> _r\d+ \[23,9,-1\] blocks\(7\)", plan, re.M), plan
    assert re.search(r"^-*DASK scatter _r\d+ -> _r\d+ \[23,16,-1\]", plan, re.M), plan
    collects = re.findall(r"^-*DASK collect (_r\d+) -> (_r\d+) \[23,9,-1\]", plan, re.M)
    assert len(collects) == 1, plan
    assert re.search(rf"^-*CP assignvar {collects[0][0]} C$", plan, re.M), plan
    scatters = re.findall(r"DASK scatter (_r\d+) ", plan)
    assert len(scatters) == len(set(scatters))
    local = run_dml(text, outputs=("C",), cfg=_cfg(), out=io.StringIO())
    buf = io.StringIO()
    dist = run_dml(text, outputs=("C",), cfg=cfg, out=buf)
    np.testing.assert_allclose(_dense(dist["C"]), _dense(local["C"]), rtol=1e-9)
    assert buf.getvalue().count("\n") >= 4


def test_moving_the_budget_flips_an_operator_between_local_and_dask():
    """auto: an operator that fits the budget runs locally, one that does not goes to Dask when Dask
    implements it; an operator Dask does not implement stays local either way."""
    assert exectype.choose(8e6, 1e9, "auto", True, 1e6) == LOCAL
    assert exectype.choose(8e6, 1e6, "auto", True, 1e6) == DASK
    assert exectype.choose(8e6, 1e6, "auto", False, 1e6) == LOCAL
    assert exectype.choose(8e6, 1e9, "dask", True, 1e6) == DASK
    assert exectype.choose(8e6, 1e6, "local", True, 1e6) == LOCAL
    text = SCRIPTS["products"]
    plans = {}
    for budget in (0.7, 1e-12):
        cfg = _cfg(memory_budget=budget)
        with cfgmod.using(cfg):
            comp = Compiler(cfg)
            prog = comp.compile_text(text, "<test>", outputs=OUTPUTS["products"])
            plans[budget] = explain_program(prog, "runtime", comp)
    assert "DASK" not in plans[0.7] and re.search(r"^-*DASK (rmm|cpmm|mapmm_l|mapmm_r) ", plans[1e-12], re.M), plans[1e-12]


def test_local_memory_sizes_the_budget_as_a_small_driver_heap(dask_scheduler, tmp_path):
    """--local-memory: the budget is memory_budget of it (SystemDS's hybrid mode on a small driver
    heap), so under auto the 2.7 MB product goes to Dask with 1MB (a distributed product, or the cuboid
    operator covering it and its max) and stays here with 64MB, and the
    printed result is the same; a size that is not one stops before the run with exit 1."""
    from tests.test_cli import lafuse

    p = tmp_path / "s.dml"
    p.write_text("A = rand(rows=300, cols=300, seed=4)\nB = rand(rows=300, cols=300, seed=5)\n"
                 "print(max(A %*% B))\n")  # (max: the sum-product rule would sum the product away)
    out = {}
    for size in ("1MB", "64MB"):
        r = lafuse("explain", str(p), "--until", "plan", "--scheduler", dask_scheduler, "--local-memory", size)
        assert r.returncode == 0, r.stderr
        out[size] = r.stdout
        run = lafuse("run", str(p), "--no-background", "--scheduler", dask_scheduler, "--local-memory", size)
        assert run.returncode == 0, run.stderr
        out[size + " printed"] = run.stdout
    assert re.search(r"^-*DASK (rmm|cpmm|mapmm_l|mapmm_r|zipmm|cuboid) ", out["1MB"], re.M), out["1MB"]
    assert "DASK" not in out["64MB"], out["64MB"]
    assert float(out["1MB printed"]) == pytest.approx(float(out["64MB printed"]), rel=1e-12)
    bad = lafuse("run", str(p), "--local-memory", "lots")
    assert bad.returncode == 1 and bad.stderr.strip() == ("lafuse: --local-memory: not a memory size: 'lots' "
                                                          "(e.g. 2GiB, 500MB)"), bad.stderr


def test_an_unreachable_scheduler_is_a_clear_error(monkeypatch):
    from lafuse.errors import DMLRuntimeError
    from lafuse.runtime.dask import cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 2.0)
    with pytest.raises(DMLRuntimeError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"):
        run_dml(SCRIPTS["aggregates"], outputs=("s",), cfg=_cfg("tcp://127.0.0.1:9"), out=io.StringIO())
    cluster.close()


def test_the_backend_implements_what_the_plan_may_send():
    from lafuse.hops.hop import Hop
    from lafuse.plan.build import Instruction
    from lafuse.runtime.dask.backend import DaskBackend

    be = DaskBackend(_cfg())
    for op in sorted(exectype.DISTRIBUTED):
        assert callable(be.bind(Instruction(op, Hop(op, "binary"), [], 0)))
    with pytest.raises(NotImplementedError):
        be.bind(Instruction("solve", Hop("solve", "binary"), [], 0))


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:E-?\d+)?|-?\d+(?:E-?\d+)?", text)]


@pytest.mark.parametrize("example", ["linreg.dml", "l2svm.dml", "naiveBayes.dml"])
def test_examples_on_dask_print_what_they_print_locally(example, dask_scheduler):
    """The command line on an existing scheduler (--exec dask --scheduler ADDR): an example of the
    algorithm library prints the local run's numbers (rtol 1e-9), its variables passing between
    blocks and functions as distributed values."""
    from pathlib import Path

    from tests.test_cli import lafuse

    path = str(Path(__file__).resolve().parents[2] / "examples" / example)
    local = lafuse("run", path, "--no-codegen", "--no-background")
    dist = lafuse("run", path, "--no-codegen", "--no-background", "--exec", "dask", "--scheduler", dask_scheduler)
    assert local.returncode == 0 and dist.returncode == 0, dist.stderr
    a, b = _numbers(local.stdout), _numbers(dist.stdout)
    assert len(a) == len(b) and a, (local.stdout, dist.stdout)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def _active_tasks(dask_scheduler) -> int:
    return sum(1 for ts in dask_scheduler.tasks.values() if ts.state != "released")


def test_the_scheduler_task_count_stays_flat_over_loop_iterations(dask_scheduler, monkeypatch):
    """Each block runs eagerly on futures, a variable's old value is released when it is reassigned and
    the client stays at most runtime.dask.backend.IN_FLIGHT tasks per worker ahead of the cluster: the
    active tasks the scheduler holds (waiting, running or holding data) peak at the same count for 10
    and for 100 iterations, and every task is gone once the run's values are. (The scheduler also keeps
    the specs of released tasks that a live value's lineage reaches, to recompute it when a worker
    dies: those grow with the iterations of a loop-carried variable until its value is released.)"""
    import gc
    import time as _time

    from lafuse.runtime.dask import cluster
    from lafuse.runtime.dask.backend import DaskBackend

    seen: list[int] = []
    submit = DaskBackend.submit

    calls = [0]

    def counting(self, fn, *args, **kw):
        fut = submit(self, fn, *args, **kw)
        calls[0] += 1
        if len(seen) < calls[0] // 8 + 1:  # every 8th submission: the count at points all over the iterations
            seen.append(self.client().run_on_scheduler(_active_tasks))
        return fut

    monkeypatch.setattr(DaskBackend, "submit", counting)
    loop = """
X = rand(rows=21, cols=14, seed=1)
Y = rand(rows=14, cols=14, seed=2) / 14
for (i in 1:N) {
  X = (X %*% Y) * 0.5 + X * 0.5
}
s = sum(X)
"""
    peaks = {}
    for n in (10, 100):
        seen.clear()
        calls[0] = 0
        run_dml(loop.replace("N", str(n)), outputs=("s",), cfg=_cfg(dask_scheduler), out=io.StringIO())
        peaks[n] = max(seen)
    # (the peaks vary by a few dozen with timing; a leak of one task an iteration would add 90)
    assert seen and peaks[100] <= peaks[10] + 60, peaks
    c = cluster.client(_cfg(dask_scheduler))
    gc.collect()  # (the run's compiler and plans form reference cycles that may still hold the last values)
    deadline = _time.monotonic() + 10
    while c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and _time.monotonic() < deadline:
        _time.sleep(0.05)
    assert c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0


def test_stats_report_what_the_run_asked_of_the_cluster(dask_scheduler, tmp_path):
    from tests.test_cli import lafuse

    p = tmp_path / "s.dml"
    p.write_text(SCRIPTS["products"].replace("A = rand(", "A = cumsum(rand(").replace("max=1)\nB", "max=1))\nB")
                 + "print(s)\n")  # (cumsum runs locally: its result is scattered)
    r = lafuse("run", str(p), "--no-codegen", "--no-background", "--exec", "dask", "--scheduler", dask_scheduler,
               "--stats")
    assert r.returncode == 0, r.stderr
    m = re.search(r"^Dask: tasks submitted (\d+), scattered to the workers (\d+) blocks \(([\d.]+) MiB\), "
                  r"gathered from them (\d+) blocks", r.stdout, re.M)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, r.stdout
    assert re.search(r"^\s+\d+\s+scatter\s", r.stdout, re.M), r.stdout
    local = lafuse("run", str(p), "--no-codegen", "--no-background", "--stats")
    assert "Dask:" not in local.stdout


def test_unknown_sizes_are_decided_at_recompilation(dask_scheduler, tmp_path):
    """X's rows are known only once the branch ran: the static plan keeps its operators here (a
    distributed operator needs its block grid), the dynamic recompilation, with the sizes known,
    sends them to Dask; the result equals the local run."""
    from tests.test_cli import lafuse

    p = tmp_path / "r.dml"
    p.write_text("n = 30\nif (sum(rand(rows=2, cols=2, seed=9)) > 0) { n = 31 }\n"
                 "X = rand(rows=n, cols=7, seed=3)\nY = X * 2 + 1\nprint(sum(Y))\n")
    flags = ["--no-codegen", "--no-background", "--exec", "dask", "--scheduler", dask_scheduler]
    static = lafuse("run", str(p), *flags, "--explain", "runtime")
    again = lafuse("run", str(p), *flags, "--explain", "recompile_runtime")
    assert static.returncode == 0 and again.returncode == 0, again.stderr
    for op in ("rand", r"\*", r"\+", "sum"):
        assert re.search(rf"^-*CP {op} .*\[-1,7,-1\]|^-*CP sum _r\d+ -> ", static.stdout, re.M), (op, static.stdout)
        assert re.search(rf"^-*DASK {op} ", again.stdout, re.M), (op, again.stdout)
    local = lafuse("run", str(p), "--no-codegen", "--no-background")
    want = _numbers(local.stdout.splitlines()[-1])
    for r in (static, again):
        np.testing.assert_allclose(_numbers(r.stdout.splitlines()[-1]), want, rtol=1e-9)


def test_moves_are_costed_by_their_bytes_and_tasks():
    """A scatter or collect costs its bytes at the transfer rate and a task per block (cost.constants
    DASK_*); a distributed operator its local estimate plus a task per block."""
    from lafuse.cost import constants as K
    from lafuse.cost import profile
    from lafuse.cost.operators import instruction_cost
    from lafuse.hops.hop import Hop

    h = Hop("scatter", "data", [], "matrix")
    h.rows, h.cols, h.nnz = 2500, 2000, 2500 * 2000
    prof = profile.load()
    c = instruction_cost("scatter", h, prof, block=1000)
    assert c.io == pytest.approx(2500 * 2000 * 8 / K.DASK_TRANSFER_BW, rel=0.01)
    assert c.compute == pytest.approx(6 * K.DASK_TASK_TIME)  # 3 x 2 blocks
    x = Hop("tread", "data", [], "matrix")
    x.rows, x.cols, x.nnz = 2500, 2000, 2500 * 2000
    e = Hop("exp", "unary", [x], "matrix")
    e.rows, e.cols, e.nnz = x.rows, x.cols, x.nnz
    local = instruction_cost("exp", e, prof)
    dist = instruction_cost("exp", e, prof, block=500)
    assert dist.total == pytest.approx(local.total + 20 * K.DASK_TASK_TIME)


def test_a_product_follows_its_distributed_operand_transitively(monkeypatch):
    """auto: X * X does not fit the budget and runs on Dask; the product reading it fits, but X * X
    has no other reader, so the product runs there too (SystemDS's transitive rule) instead of
    collecting it; a product whose distributed operand has a second reader stays here."""
    from lafuse import memory
    from lafuse.hops.hop import Hop
    from lafuse.hops.program import Dag
    from lafuse.plan.build import build

    def mat(op, kind, ins, r, c, name=None):
        h = Hop(op, kind, ins, "matrix")
        h.rows, h.cols, h.nnz, h.name = r, c, r * c, name
        return h

    # bytes: X * X holds 24 MB (X and the result), the product 8 MB + 16 KB
    monkeypatch.setattr(memory, "budget_bytes", lambda: 1.2e7)
    for second, where in ((False, DASK), (True, LOCAL)):
        x, v = mat("tread", "data", [], 1000, 1000, "X"), mat("tread", "data", [], 1000, 1, "v")
        y = mat("*", "binary", [x, x], 1000, 1000)
        outs = [mat("%*%", "matmult", [y, v], 1000, 1)] + ([Hop("sum", "agg_unary", [y], "scalar")] if second else [])
        writes = []
        for n, r in enumerate(outs):
            w = Hop("twrite", "data", [r], r.dt)
            w.name = f"o{n}"
            writes.append(w)
        types = {i.hop.op: i.exec_type for i in build(Dag(writes), exec_mode="auto").instructions}
        assert types["*"] == DASK and types["%*%"] == where, (second, types)


def test_a_small_collected_value_is_gathered_once_and_handed_out_as_copies(dask_scheduler):
    from lafuse.runtime.dask.backend import DaskBackend

    be = DaskBackend(_cfg(dask_scheduler, block_size=3))
    m = np.arange(35, dtype=float).reshape(7, 5)
    x = be.scatter(m)
    a = be.collect(x)
    gathered = be.counters.gathered_blocks
    b = be.collect(x)
    assert be.counters.gathered_blocks == gathered == 6  # (3 x 2 blocks, once)
    a[0, 0] = -1.0  # a local operator may write into its operand: the kept value stays as gathered
    np.testing.assert_array_equal(b, m)
    np.testing.assert_array_equal(be.collect(x), m)


def test_auto_keeps_a_variable_distributed_when_collecting_it_would_not_fit(dask_scheduler):
    """auto with a budget below every matrix here: X's new value is not collected before it is written
    (it would not fit), the loop's operators read it where it is, and only the outputs come back."""
    text = """
X = rand(rows=60, cols=40, seed=1)
for (i in 1:3) {
  X = X * 0.5 + 1
}
s = sum(X)
"""
    cfg = _cfg(dask_scheduler, exec_type="auto", memory_budget=1e-12)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        plan = explain_program(comp.compile_text(text, "<test>", outputs=("X", "s")), "runtime", comp)
    assert re.search(r"^-*DASK \+ .* -> (_r\d+) .*\n-*CP assignvar \1 X$", plan, re.M), plan
    assert "collect" not in plan, plan
    local = run_dml(text, outputs=("X", "s"), cfg=_cfg(), out=io.StringIO())
    dist = run_dml(text, outputs=("X", "s"), cfg=cfg, out=io.StringIO())
    np.testing.assert_allclose(_dense(dist["X"]), _dense(local["X"]), rtol=1e-12)
    assert dist["s"] == pytest.approx(local["s"], rel=1e-12)


def test_an_existing_clusters_worker_memory_sizes_the_broadcast_budget(dask_scheduler):
    """With --scheduler the planner asks the cluster: two workers of 1 GiB (the shared fixture), not
    the machine's memory, so a broadcast product never sends an operand beyond a worker's memory."""
    cfg = _cfg(dask_scheduler)
    shape = Compiler(cfg).cluster_shape
    assert (shape.workers, shape.worker_bytes) == (2, float(1 << 30))
    assert shape.broadcast_bytes == pytest.approx(0.7 * (1 << 30))
