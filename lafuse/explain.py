"""EXPLAIN output of HOP programs and runtime plans, in the shape of SystemDS's (paper 003 Fig. 1-2).

Each HOP line: ``(id) op (input ids) [rows,cols,nnz] [memory] exec-type line N``.
"""

from __future__ import annotations

from typing import Any

from lafuse import config as cfgmod
from lafuse import fusion
from lafuse.compiler import Compiler
from lafuse.cost.profile import HardwareProfile
from lafuse.cost.program import ProgramCost, estimate_program
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.program import Block, Dag, ForBlock, GenericBlock, IfBlock, Program, WhileBlock


def _mb(b: float) -> str:
    """Memory estimate, human-scaled ([76MB], [12KB], [8B]); [-] when unknown."""
    if b < 0:
        return "[-]"
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if b >= size:
            return f"[{b / size:.3g}{unit}]"
    return f"[{b:.0f}B]"


def hop_line(h: Hop) -> str:
    ins = ",".join(str(i.id) for i in h.inputs)
    ins = f" ({ins})" if ins else ""
    if h.dt == MATRIX:
        dims = f"[{h.rows},{h.cols},{h.nnz}]"
    else:
        dims = f"[{h.dt}.{h.vt}]"
    line = f" line {h.span.line}" if h.span.line else ""
    return f"({h.id}) {h.label()}{ins} {dims} {_mb(h.mem)} {h.exec_type}{line}"


def explain_dag(dag: Dag, block: Block | None = None, indent: str = "------") -> str:
    lines = []
    if block is not None:
        lines.append(f"----GENERIC ({block.lines}) [recompile={str(getattr(block, 'requires_recompile', False)).lower()}]")
    lines += [f"{indent}{hop_line(h)}" for h in dag.hops()]
    return "\n".join(lines)


def explain_plan(plan: Any, block: Block | None = None, indent: str = "------") -> str:
    lines = []
    if block is not None:
        lines.append(f"----GENERIC ({block.lines}) [recompile={str(getattr(block, 'requires_recompile', False)).lower()}]")
    for r, v in sorted(plan.constants.items()):
        lines.append(f"{indent}CP const _r{r} {v!r}")
    fmts = plan.formats()
    for ins in plan.instructions:
        lines.append(f"{indent}{ins.render(fmts)}{_cplan_note(ins.hop)}")
    for name, r in plan.writes:
        lines.append(f"{indent}CP assignvar _r{r} {name}")
    return "\n".join(lines)


def _blocks(blocks: list[Block], depth: int, mode: str, compiler: Any) -> list[str]:
    pad = "--" * depth
    out: list[str] = []
    for b in blocks:
        if isinstance(b, GenericBlock):
            out.append(f"{pad}GENERIC ({b.lines}) [recompile={str(b.requires_recompile).lower()}]")
            if mode == "hops":
                out += [f"{pad}--{hop_line(h)}" for h in b.dag.hops()]
            elif mode == "fused":
                out += [f"{pad}--{hop_line(h)}{_cplan_note(h)}" for h in _fused(b.dag, compiler, b.weight).hops()]
            elif mode == "codegen":
                plan = compiler.lower_dag(b.dag, b.weight)
                out += [f"{pad}--" + ln for ln in explain_codegen(plan).splitlines()]
            else:
                plan = b.plan if b.plan is not None else compiler.plan_dag(b.dag, b.weight)
                out += [f"{pad}--" + ln for ln in explain_plan(plan, None, "").splitlines()]
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


def _fused(dag: Dag, compiler: Any, weight: float = 1.0) -> Dag:
    if not compiler.cfg.codegen:
        return dag
    return fusion.optimize(dag, compiler.cfg, weight=weight)[0]


def _cplan_note(h: Hop) -> str:
    p = h.params.get("cplan") if h.kind == "spoof" else None
    if p is None:
        return ""
    roots = p.roots if p.template == "magg" else p.all_roots()
    aggs = ",".join(p.agg_ops) if p.template == "magg" else p.agg_op
    return f" {{{p.template} {p.agg}:{aggs} sparse_safe={p.sparse_safe}{' narrow' if p.narrow else ''} {' | '.join(map(repr, roots))}}}"


def explain_codegen(plan: Any) -> str:
    """The CPlans of the fused instructions of a lowered plan and their generated source."""
    lines = []
    for ins in plan.instructions:
        if ins.hop.kind != "spoof":
            continue
        lines.append(f"{ins.render()}{_cplan_note(ins.hop)}")
        fused = getattr(ins.fn, "fused", None)
        src = getattr(fused, "source", None)
        if src:
            lines += [f"  {i:>4}  {ln}" for i, ln in enumerate(src.splitlines(), 1)]
        else:
            lines.append("  (reference interpreter: no generated source)")
    return "\n".join(lines) if lines else "(no fused operators)"


def _pred(d: Dag, depth: int, mode: str, compiler: Any) -> list[str]:
    pad = "--" * depth
    if mode in ("hops", "fused", "codegen"):
        return [f"{pad}{hop_line(h)}" for h in d.hops()]
    return [f"{pad}" + ln for ln in explain_plan(compiler.plan_dag(d), None, "").splitlines()]


def explain_program(prog: Program, mode: str, compiler: Any) -> str:
    """``mode`` is "hops", "fused" (the HOP DAGs after fusion), "codegen" (fused operators' CPlans
    and generated source) or "runtime"."""
    lines = ["PROGRAM", "--MAIN PROGRAM"]
    lines += _blocks(prog.blocks, 2, mode, compiler)
    for key in sorted(prog.functions):
        fp = prog.functions[key]
        if not fp.compiled:
            continue
        lines.append(f"--FUNCTION {key} [recompile=true]")
        lines += _blocks(fp.blocks, 2, mode, compiler)
    return "\n".join(lines)


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
