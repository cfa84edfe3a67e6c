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

    monkeypatch.setattr(cg, "compile_plan", refuse)
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

        def first_plan(dag, weight=1.0, st=None):
            p = plan_dag(dag, weight, st)
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
    from lafuse.runtime.bind import SPECIAL, bind
    from lafuse.runtime.local.kernels import KERNELS

    text = ("X = rand(rows=3000, cols=200, seed=1)\nS = rand(rows=3000, cols=200, sparsity=0.01, seed=2)\n"
            "v = rand(rows=200, cols=1, seed=3)\nw = t(X) %*% (X %*% v)\nG = t(X) %*% S\n"
            "E = exp(X * 2)\nprint(sum(w) + sum(G) + sum(E))")
    cfg = cfgmod.Config(codegen=False)
    with cfgmod.using(cfg):
        prog = Compiler(cfg).compile_text(text, "<test>")
        plan = build(_generic(prog)[0].dag)
    ops = {i.opcode: i for i in plan.instructions}
    assert ops["mmchain"].chain == (True, False) and ops["%*%"].transposed == (True, False)
    assert ops["exp"].reuse == 0  # exp takes the buffer of X * 2, which dies with it
    assert ops["pread" if "pread" in ops else "rand"].out_fmt in (None, "dense", "csr")
    assert not plan.bound and all(i.fn is None for i in plan.instructions)
    bind(plan, KERNELS)
    assert plan.bound and all((i.fn is None) == (i.opcode in SPECIAL) for i in plan.instructions)
    assert ops["exp"].reuse == 0 and getattr(ops["exp"].fn, "__name__", "") != "k_exp"  # wrapped to write in place


def test_every_operator_gets_an_execution_type(tmp_path):
    """--exec auto|local (Config.exec_type) reaches the plan: each instruction carries its execution
    type, local for both until a distributed backend exists; an unknown mode is refused."""
    from lafuse.plan import exectype
    from lafuse.plan.instructions import LOCAL
    from tests.test_cli import lafuse

    for mode in exectype.MODES:
        cfg = cfgmod.Config(codegen=False, exec_type=mode)
        with cfgmod.using(cfg):
            prog = Compiler(cfg).compile_text(LOOP, "<test>")
            plans = [build(b.dag, exec_mode=mode) for b in _generic(prog)]
        assert {i.exec_type for p in plans for i in p.instructions} == {LOCAL}
    with pytest.raises(ValueError, match="unknown execution type"):
        exectype.choose(1e9, 1e6, "spark")
    p = tmp_path / "a.dml"
    p.write_text("X = rand(rows=10, cols=10, seed=1)\nprint(sum(X %*% X))\n")
    r = lafuse("run", str(p), "--exec", "local", "--explain", "runtime")
    assert r.returncode == 0 and re.search(r"^------CP %\*% ", r.stdout, re.M), r.stderr
    r = lafuse("run", str(p), "--exec", "spark")
    assert r.returncode != 0 and "--exec" in r.stderr
