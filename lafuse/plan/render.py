"""Text of HOP DAGs and physical plans, in the shape of SystemDS's EXPLAIN (paper 003 Fig. 1-2).

Each HOP line: ``(id) op (input ids) [rows,cols,nnz] [memory] exec-type line N``; each instruction
line: Instruction.render with the formats, and the plan a fused operator runs. Here, below the
runtime, so a dynamic recompilation prints what it built (``--explain recompile_*``) without the
runtime importing the explain tool.
"""

from __future__ import annotations

from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.program import Block, Dag
from lafuse.plan.instructions import Plan


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


def generic_header(block: Block, pad: str = "----") -> str:
    return f"{pad}GENERIC ({block.lines}) [recompile={str(getattr(block, 'requires_recompile', False)).lower()}]"


def explain_dag(dag: Dag, block: Block | None = None, indent: str = "------") -> str:
    lines = []
    if block is not None:
        lines.append(generic_header(block))
    lines += [f"{indent}{hop_line(h)}" for h in dag.hops()]
    return "\n".join(lines)


def explain_plan(plan: Plan, block: Block | None = None, indent: str = "------") -> str:
    lines = []
    if block is not None:
        lines.append(generic_header(block))
    for r, v in sorted(plan.constants.items()):
        lines.append(f"{indent}CP const _r{r} {v!r}")
    fmts = plan.formats()
    for ins in plan.instructions:
        lines.append(f"{indent}{ins.render(fmts)}{cplan_note(ins.hop)}")
    for name, r in plan.writes:
        lines.append(f"{indent}CP assignvar _r{r} {name}")
    return "\n".join(lines)


def cplan_note(h: Hop) -> str:
    if h.kind == "cuboid":  # (fusion.fuseme: the main product and the operators it covers)
        return f" {h.params['mmplan'].describe()}"
    p = h.params.get("cplan") if h.kind == "spoof" else None
    if p is None:
        return ""
    roots = p.roots if p.template == "magg" else p.all_roots()
    aggs = ",".join(p.agg_ops) if p.template == "magg" else p.agg_op
    return f" {{{p.template} {p.agg}:{aggs} sparse_safe={p.sparse_safe}{' narrow' if p.narrow else ''} {' | '.join(map(repr, roots))}}}"
