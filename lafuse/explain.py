"""EXPLAIN output of HOP programs and runtime plans, in the shape of SystemDS's (paper 003 Fig. 1-2):
per block, the HOP DAGs, the fused DAGs, the generated code, the physical plan or its costs (the
lines themselves: plan.render)."""

from __future__ import annotations

from typing import Any

from lafuse import config as cfgmod
from lafuse import fusion
from lafuse.compiler import Compiler
from lafuse.cost.profile import HardwareProfile
from lafuse.cost.program import ProgramCost, estimate_program
from lafuse.hops.program import Block, Dag, ForBlock, GenericBlock, IfBlock, Program, WhileBlock
from lafuse.plan.render import cplan_note, explain_plan, generic_header, hop_line
from lafuse.stages import PROGRAM_STAGES


def _blocks(blocks: list[Block], depth: int, mode: str, compiler: Any) -> list[str]:
    pad = "--" * depth
    out: list[str] = []
    for b in blocks:
        if isinstance(b, GenericBlock):
            out.append(generic_header(b, pad))
            if mode == "hops":
                out += [f"{pad}--{hop_line(h)}" for h in b.dag.hops()]
            elif mode == "fused":
                out += [f"{pad}--{hop_line(h)}{cplan_note(h)}" for h in _fused(b.dag, compiler, b.weight).hops()]
            elif mode == "codegen":
                plan = compiler.lower_dag(b.dag, b.weight)
                out += [f"{pad}--" + ln for ln in explain_codegen(plan).splitlines()]
            else:
                if b.plan is None:  # kept: the plan printed is the plan that runs (fused once)
                    b.plan = compiler.plan_dag(b.dag, b.weight)
                plan = b.plan
                text = explain_plan(plan, None, "") if mode == "runtime" else explain_formats(plan)
                out += [f"{pad}--" + ln for ln in text.splitlines()]
        elif isinstance(b, IfBlock):
            out.append(f"{pad}IF ({b.lines})")
            out += _pred(b.pred, depth + 1, mode, compiler)
            out += _blocks(b.then_blocks, depth + 1, mode, compiler)
            if b.else_blocks:
                out.append(f"{pad}ELSE")
                out += _blocks(b.else_blocks, depth + 1, mode, compiler)
        elif isinstance(b, WhileBlock):
            out.append(f"{pad}WHILE ({b.lines})")
            out += _pred(b.pred, depth + 1, mode, compiler)
            out += _blocks(b.body, depth + 1, mode, compiler)
        elif isinstance(b, ForBlock):
            kind = "PARFOR" if b.parallel else "FOR"
            out.append(f"{pad}{kind} ({b.lines}) [var={b.var}]")
            for d in (b.start, b.stop, b.incr):
                if d is not None:
                    out += _pred(d, depth + 1, mode, compiler)
            out += _blocks(b.body, depth + 1, mode, compiler)
    return out


def explain_formats(plan: Any) -> str:
    """``--explain formats``: the format choice of a plan's local operators (plan.layout.local): per
    operator the chosen implementation, the formats its inputs arrive in and their conversions, its
    output format, its estimated cost and the runner-up."""
    if plan.layout is None:
        return "(no sparse value meets an operator a format changes)"
    return str(plan.layout.render())


def _fused(dag: Dag, compiler: Any, weight: float = 1.0) -> Dag:
    if not compiler.cfg.codegen:
        return dag
    return fusion.optimize(dag, compiler.cfg, weight=weight)[0]


def explain_codegen(plan: Any) -> str:
    """The CPlans of the fused instructions of a lowered plan and their generated source."""
    lines = []
    for ins in plan.instructions:
        if ins.hop.kind != "spoof":
            continue
        lines.append(f"{ins.render()}{cplan_note(ins.hop)}")
        fused = getattr(ins.fn, "fused", None)
        src = getattr(fused, "source", None)
        if src:
            lines += [f"  {i:>4}  {ln}" for i, ln in enumerate(src.splitlines(), 1)]
        else:
            lines.append("  (reference interpreter: no generated source)")
    return "\n".join(lines) if lines else "(no fused operators)"


def _pred(d: Dag, depth: int, mode: str, compiler: Any) -> list[str]:
    pad = "--" * depth
    if mode == "formats":  # (a predicate's plan weighs no format)
        return []
    if mode in ("hops", "fused", "codegen"):
        return [f"{pad}{hop_line(h)}" for h in d.hops()]
    return [f"{pad}" + ln for ln in explain_plan(compiler.plan_dag(d), None, "").splitlines()]


def explain_program(prog: Program, mode: str, compiler: Any) -> str:
    """``mode`` is "hops", "fused" (the HOP DAGs after fusion), "codegen" (fused operators' CPlans
    and generated source), "runtime" or "formats" (the format choice of each block's plan)."""
    lines = ["PROGRAM", "--MAIN PROGRAM"]
    lines += _blocks(prog.blocks, 2, mode, compiler)
    for key in sorted(prog.functions):
        fp = prog.functions[key]
        if not fp.compiled:
            continue
        lines.append(f"--FUNCTION {key} [recompile=true]")
        lines += _blocks(fp.blocks, 2, mode, compiler)
    return "\n".join(lines + sum_product_report())


def _generic(blocks: list[Block], where: str) -> list[tuple[GenericBlock, str]]:
    """The straight-line blocks under ``blocks`` with a title each (where they are, their lines)."""
    out: list[tuple[GenericBlock, str]] = []
    for b in blocks:
        if isinstance(b, GenericBlock):
            out.append((b, f"{where}, {b.lines}"))
        elif isinstance(b, IfBlock):
            out += _generic(b.then_blocks, f"{where} if") + _generic(b.else_blocks, f"{where} else")
        elif isinstance(b, (WhileBlock, ForBlock)):
            out += _generic(b.body, f"{where} loop")
    return out


def instruction_costs(plan: Any) -> dict[int, float]:
    """Each instruction's cost-model estimate in seconds, by ``id(instruction)`` (plan pictures)."""
    from lafuse.cost import operators, profile

    prof = profile.load()
    out: dict[int, float] = {}
    for ins in plan.instructions:
        if ins.opcode in ("fcall", "tread"):
            continue
        try:
            out[id(ins)] = operators.instruction_cost(ins.opcode, ins.hop, prof, ins.inplace, None, ins.block,
                                                      ins.reads, ins.transposed).total
        except (KeyError, ValueError):  # (an opcode without a cost formula: drawn without one)
            continue
    return out


def program_graph(prog: Program, until: str, compiler: Any, title: str = "") -> str:
    """The program as a picture (DOT): up to ``sizes`` its HOP DAGs, from ``fuse`` on its physical plans
    (instructions with execution type, format and estimate; fused operators as clusters)."""
    from lafuse.plan.dot import Graph

    g = Graph(title)
    blocks = _generic(prog.blocks, "main")
    for key in sorted(prog.functions):
        fp = prog.functions[key]
        if fp.compiled:
            blocks += _generic(fp.blocks, f"function {key}")
    for b, name in blocks:
        if until in PROGRAM_STAGES:
            g.dag(b.dag, name)
        else:
            if b.plan is None:
                b.plan = compiler.plan_dag(b.dag, b.weight)
            g.plan(b.plan, name, instruction_costs(b.plan))
    return g.source()


def sum_product_report() -> list[str]:
    """The sum-product rewrites the compile applied (rewrite.sumproduct.rule.FIRED), each with the
    elementary rewrites it took and the DAG's cost before and after (with fusion, in seconds)."""
    from lafuse.rewrite.sumproduct.rule import FIRED  # deferred: EXPLAIN only

    out, seen = [], set()
    for f in FIRED:
        key = (f.line, f.col, f.written, f.chosen)
        if key in seen:
            continue
        seen.add(key)
        unit = " s" if f.unit == "s" else f" {f.unit}"
        out.append(f"--line {f.line}:{f.col} {', '.join(f.rewrites)}: {f.written} -> {f.chosen}; "
                   f"cost {f.before:.4g}{unit} -> {f.after:.4g}{unit}")
    return ["SUM-PRODUCT REWRITES (paper 001 §3)", *out] if out else []


def estimate_text(text: str, path: str = "<string>", nvargs: dict[str, Any] | None = None,
                  prof: HardwareProfile | None = None, render: bool = False) -> ProgramCost:
    """Compile ``text`` (without running it) and estimate its execution time on this machine."""
    comp = Compiler(cfgmod.get(), nvargs)
    prog = comp.compile_text(text, path)
    return estimate_program(prog, comp, prof, render)


def estimate_file(path: str, nvargs: dict[str, Any] | None = None, prof: HardwareProfile | None = None,
                  render: bool = False) -> ProgramCost:
    with open(path, encoding="utf-8") as f:
        return estimate_text(f.read(), path, nvargs, prof, render)
