"""The physical plan (lafuse.plan): built and printed without compiling or loading any kernel, the
plan the cost model prices is the plan the interpreter runs, and what it decides (mmchains,
transposes read in place, predicted formats, in-place results) is what the bound plan does."""

from __future__ import annotations

import io
import re

import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.cost.program import estimate_program
from lafuse.explain import explain_program
from lafuse.hops.program import GenericBlock, iter_blocks
from lafuse.plan import build

LOOP = """
X = rand(rows=2000, cols=300, seed=1)
Y = rand(rows=2000, cols=300, seed=2)
v = rand(rows=300, cols=1, seed=3)
s = 0
for (i in 1:20) {
  s = s + sum(X * Y * i) + sum(exp(X) / (Y + 1))
  w = t(X) %*% (X %*% v)
  s = s + sum(w)
}
print(s)
"""


def _generic(prog):
    return [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)]


def _shape(plan) -> list[tuple[str, str | None]]:
    return [(i.opcode, i.cplan.canonical_key()[0] if i.cplan is not None else None) for i in plan.instructions]


def test_plans_are_built_and_printed_without_any_kernel(monkeypatch):
    import lafuse.codegen as cg

    def refuse(*args, **kw):
        raise AssertionError("a kernel was compiled or loaded while planning")

    monkeypatch.setattr(cg, "kernels", refuse)
    before = cg.cache_stats()
    cfg = cfgmod.Config(codegen=True, fusion="fuse-all")
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(LOOP, "<test>")
        plans = [comp.plan_dag(b.dag, b.weight) for b in _generic(prog)]
        text = explain_program(prog, "runtime", comp)
        estimate_program(prog, comp)
    spoofs = [i for p in plans for i in p.instructions if i.hop.kind == "spoof"]
    assert spoofs and all(i.cplan is not None and i.fn is None for i in spoofs)
    assert not any(p.bound for p in plans)
    # the fused plan each runs, printed with it
    assert re.search(r"^-*CP spoof\w+ .*\{(cell|row|magg|outer) .*\}$", text, re.M), text
    assert cg.cache_stats() == before


@pytest.mark.parametrize("fusion", ["fuse-all", "cost"])
def test_the_costed_plan_is_the_plan_that_runs(fusion, monkeypatch):
    """cost.program prices each block's plan as the interpreter builds it (fused with the block's
    expected executions): same instructions, same fused operators, in the loop body too."""
    from lafuse.runtime.interp import Interpreter

    cfg = cfgmod.Config(codegen=True, fusion=fusion, codegen_backend="reference")
    costed: dict[int, object] = {}
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(LOOP, "<test>")
        plan_dag = comp.plan_dag

        def first_plan(dag, weight=1.0, st=None, recompile=False):
            p = plan_dag(dag, weight, st, recompile)
            costed.setdefault(id(dag), p)
            return p

        monkeypatch.setattr(comp, "plan_dag", first_plan)
        estimate_program(prog, comp)
        priced = dict(costed)
        Interpreter(prog, comp, out=io.StringIO()).run({})
    ran = [b for b in _generic(prog) if b.plan is not None]
    assert len(ran) >= 2 and all(id(b.dag) in priced for b in ran)
    for b in ran:
        assert _shape(priced[id(b.dag)]) == _shape(b.plan), b.lines
    body = next(b for b in ran if b.weight > 1)
    ops = [op for op, _ in _shape(body.plan)]
    # t(X) %*% (X %*% v): a fused row operator, or unfused the one mmchain instruction
    assert ("spoofRA" in ops) == (fusion == "fuse-all") and ("mmchain" in ops) == (fusion != "fuse-all")


def test_the_plan_decides_and_binding_follows():
    """Transposes read in place, the mmchain, predicted formats and in-place results are fields of
    the unbound plan; binding gives every instruction but the interpreter's own a callable and keeps
    those decisions."""
    from lafuse.plan.instructions import LOCAL
    from lafuse.runtime.bind import SPECIAL, bind
    from lafuse.runtime.local.backend import LocalBackend
    from lafuse.runtime.local.kernels import KERNELS

    text = ("X = rand(rows=3000, cols=200, seed=1)\nS = rand(rows=3000, cols=200, sparsity=0.01, seed=2)\n"
            "v = rand(rows=200, cols=1, seed=3)\nw = t(X) %*% (X %*% v)\nG = t(X) %*% S\n"
            "E = exp(X * 2)\nprint(sum(w) + sum(G) + sum(E))")
    cfg = cfgmod.Config(codegen=False, sum_product=False)  # (the products as written, not summed away)
    with cfgmod.using(cfg):
        prog = Compiler(cfg).compile_text(text, "<test>")
        plan = build(_generic(prog)[0].dag)
    ops = {i.opcode: i for i in plan.instructions}
    assert ops["mmchain"].chain == (True, False) and ops["%*%"].transposed == (True, False)
    assert ops["exp"].reuse == 0  # exp takes the buffer of X * 2, which dies with it
    assert ops["pread" if "pread" in ops else "rand"].out_fmt in (None, "dense", "csr")
    assert not plan.bound and all(i.fn is None for i in plan.instructions)
    bind(plan, {LOCAL: LocalBackend(KERNELS)})
    assert plan.bound and all((i.fn is None) == (i.opcode in SPECIAL) for i in plan.instructions)
    assert ops["exp"].reuse == 0 and getattr(ops["exp"].fn, "__name__", "") != "k_exp"  # wrapped to write in place


def test_every_operator_gets_an_execution_type(tmp_path):
    """--exec auto|local|dask (Config.exec_type) reaches the plan: each instruction carries its
    execution type; this loop fits the budget, so auto and local keep it local, and dask sends the
    operators it implements there; an unknown mode is refused."""
    from lafuse.plan import exectype
    from lafuse.plan.instructions import DASK, LOCAL
    from tests.test_cli import lafuse

    for mode in exectype.MODES:
        cfg = cfgmod.Config(codegen=False, exec_type=mode)
        with cfgmod.using(cfg):
            prog = Compiler(cfg).compile_text(LOOP, "<test>")
            plans = [build(b.dag, exec_mode=mode) for b in _generic(prog)]
        got = {i.exec_type for p in plans for i in p.instructions}
        assert got == ({LOCAL, DASK} if mode == "dask" else {LOCAL}), mode
    with pytest.raises(ValueError, match="unknown execution type"):
        exectype.choose(1e9, 1e6, "spark")
    p = tmp_path / "a.dml"
    p.write_text("X = rand(rows=10, cols=10, seed=1)\nprint(max(X %*% X))\n")  # (max: not summed away)
    r = lafuse("run", str(p), "--exec", "local", "--explain", "runtime")
    assert r.returncode == 0 and re.search(r"^------CP %\*% ", r.stdout, re.M), r.stderr
    r = lafuse("run", str(p), "--exec", "spark")
    assert r.returncode != 0 and "--exec" in r.stderr


CONVERT = """
print(sum(inv(B)))
s1 = sum(X * log(U %*% t(V) + 1e-15))
s2 = sum(X * (U %*% t(V)))
print(s1 + s2)
"""


def _convert_inputs(zero_u: bool = False):
    import numpy as np
    import scipy.sparse as sparse

    rng = np.random.default_rng(7)
    X = sparse.random_array((400, 120), density=0.05, rng=rng, format="csr")
    B = sparse.random_array((120, 120), density=0.02, rng=rng, format="csr") + sparse.eye_array(120, format="csr")
    U = sparse.random_array((400, 10), density=0.3, rng=rng, format="csr") * (0 if zero_u else 1)
    V = sparse.random_array((120, 10), density=0.3, rng=rng, format="csr")
    return {"X": X.tocsr(), "B": B.tocsr(), "U": U.tocsr(), "V": V.tocsr()}


@pytest.mark.parametrize("zero_u", [False, True])
def test_convert_instructions_where_a_consumer_needs_dense(zero_u):
    """Operands the default rule predicts CSR that a consumer reads only as dense arrays (LAPACK's
    inv, an outer-product fused operator's factors) get an explicit convert instruction, shared by
    both fused operators that read U and V; the results equal NumPy's and the unfused plan's (an
    all-zero U, nnz 0, included)."""
    import numpy as np

    from lafuse.compiler import run_dml

    vals = _convert_inputs(zero_u)
    # (the outer products as written: the sum-product rule would join X with V first in s2)
    cfg = cfgmod.Config(codegen=True, fusion="fuse-all", sum_product=False)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(CONVERT, "<test>", vals, ("s1", "s2"))
        plan = comp.plan_dag(_generic(prog)[0].dag)
        text = explain_program(prog, "runtime", comp)
    ins = plan.instructions
    conv = [i for i in ins if i.opcode == "convert"]
    assert [i.hop.inputs[0].name for i in conv] == ["B", "U", "V"], text
    assert all(i.out_fmt == "dense" for i in conv)
    readers = {c.out: [i.opcode for i in ins if c.out in i.args] for c in conv}
    assert sorted(map(tuple, readers.values())) == [("inv",), ("spoofOP", "spoofOP"), ("spoofOP", "spoofOP")]
    assert re.search(r"^-*CP convert _r\d+ -> _r\d+ \[400,10,\d+\] fmt\(csr->dense\)$", text, re.M), text
    assert re.search(r"CP inv _r\d+ -> .* fmt\(dense->", text), text
    got = {}
    for c in (cfg, cfgmod.Config(codegen=False, sum_product=False)):
        got[c.codegen] = run_dml(CONVERT, vals, ("s1", "s2"), cfg=c, out=io.StringIO())
    X, U, V = (vals[k].toarray() for k in "XUV")
    with np.errstate(divide="ignore", invalid="ignore"):
        s1 = np.sum(np.where(X != 0, X * np.log(U @ V.T + 1e-15), 0.0))
    for r in got.values():
        np.testing.assert_allclose(r["s1"], s1, rtol=1e-10)
        np.testing.assert_allclose(r["s2"], np.sum(X * (U @ V.T)), rtol=1e-10, atol=1e-12)
    assert got[True]["s1"] == pytest.approx(got[False]["s1"], rel=1e-12)


def test_convert_is_priced_and_a_no_op_on_the_asked_format():
    """The cost model prices a convert by the bytes it reads and writes (the dense result, not the
    CSR operand), and the local backend hands back a value already in the asked format."""
    import numpy as np
    import scipy.sparse as sparse

    from lafuse.cost.operators import instruction_cost, meta
    from lafuse.cost.profile import HardwareProfile
    from lafuse.runtime.local.backend import LocalBackend
    from lafuse.runtime.local.kernels import KERNELS

    vals = _convert_inputs()
    # (the outer products as written: the sum-product rule would join X with V first in s2)
    cfg = cfgmod.Config(codegen=True, fusion="fuse-all", sum_product=False)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(CONVERT, "<test>", vals, ("s1", "s2"))
        plan = comp.plan_dag(_generic(prog)[0].dag)
    c = next(i for i in plan.instructions if i.opcode == "convert" and i.hop.rows == 400)
    assert meta(c.hop).bytes == 400 * 10 * 8 and meta(c.hop.inputs[0]).bytes < 400 * 10 * 8
    assert instruction_cost("convert", c.hop, HardwareProfile()).total > 0
    be = LocalBackend(KERNELS)
    d = np.ones((3, 3))
    assert be.convert(d, "dense") is d
    s = sparse.csr_array(np.eye(40))
    assert be.convert(s, "csr") is s
    np.testing.assert_array_equal(be.convert(s, "dense"), np.eye(40))
    assert sparse.issparse(be.convert(np.eye(40), "csr"))


@pytest.mark.parametrize("flags", [["--stats"], ["--explain", "cost"], ["--explain", "runtime"]])
def test_a_static_block_is_fused_once_per_run(flags, tmp_path, monkeypatch, capsys):
    """--stats prices the plans that ran, and --explain runtime/cost print the plans that then run:
    the optimizer fuses each static block's DAG once per run, not once for the estimate and again
    for the interpreter."""
    import collections

    import lafuse.fusion as fusion
    from lafuse import cli

    seen: collections.Counter[int] = collections.Counter()
    optimize = fusion.optimize

    def counting(dag, *a, **kw):
        seen[id(dag)] += 1
        return optimize(dag, *a, **kw)

    monkeypatch.setattr(fusion, "optimize", counting)
    p = tmp_path / "loop.dml"
    p.write_text(LOOP)
    rc = cli.main(["run", str(p), "--fusion", "fuse-all", "--no-background", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and seen and max(seen.values()) == 1, (seen, out)
    if flags == ["--stats"]:
        assert "Estimated execution time (cost model, plans that ran)" in out and "spoof" in out
