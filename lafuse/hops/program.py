"""Programs of statement blocks. A generic block holds one HOP DAG; control-flow blocks hold
predicate DAGs and child blocks; functions hold their own block lists.

Why blocks: the optimizer rewrites and sizes one DAG at a time, the runtime recompiles one block
at a time when sizes become known, and liveness (dead code) is computed over blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lafuse.errors import NO_SPAN, Span
from lafuse.hops.hop import Hop, walk


@dataclass
class Dag:
    """A HOP DAG with ordered roots. Roots are side effects (print, write, stop, function calls
    as statements) in statement order, followed by the TWrites of the block's assigned variables."""

    roots: list[Hop] = field(default_factory=list)
    # canonical hashes of the fusion candidates the optimizer weighed for it (feedback.observed)
    candidates: tuple[str, ...] = ()
    # the sum-product regions planned on this DAG (rewrite.sumproduct.rule.canonical): a later round,
    # or rewrite, does not cost them again
    planned: set[tuple] = field(default_factory=set, compare=False, repr=False)
    # variables it reads in loops that do not assign them, and the executions (the loops' iterations)
    # over which a conversion of their value, kept with it, is amortized (plan.layout.local)
    held: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def hops(self) -> list[Hop]:
        return walk(self.roots)

    def reads(self) -> set[str]:
        return {h.name for h in self.hops() if h.op == "tread" and h.name}

    def writes(self) -> set[str]:
        return {h.name for h in self.roots if h.op == "twrite" and h.name}


@dataclass
class Block:
    span: Span = field(default=NO_SPAN, kw_only=True)
    live_out: set[str] = field(default_factory=set, kw_only=True)

    @property
    def lines(self) -> str:
        if self.span.end_line and self.span.end_line != self.span.line:
            return f"lines {self.span.line}-{self.span.end_line}"
        return f"lines {self.span.line}-{self.span.line}"


@dataclass
class GenericBlock(Block):
    dag: Dag = field(default_factory=Dag)
    requires_recompile: bool = False
    plan: Any = None  # its physical plan (plan.Plan), built and bound lazily
    recompiled: Any = None  # cache: input signature -> Plan
    size_scalars: set[str] | None = None  # scalar variables that determine output sizes (recompile key)
    # the plan-cache key of the symbol table, a generated function (runtime.recompile.signature)
    signature_fn: Callable[[dict[str, Any]], tuple] | None = None
    weight: float = 1.0  # expected executions per program run (loop nesting), amortizes kernel compiles


@dataclass
class IfBlock(Block):
    pred: Dag = field(default_factory=Dag)
    then_blocks: list[Block] = field(default_factory=list)
    else_blocks: list[Block] = field(default_factory=list)


@dataclass
class WhileBlock(Block):
    pred: Dag = field(default_factory=Dag)
    body: list[Block] = field(default_factory=list)


@dataclass
class ForBlock(Block):
    var: str = ""
    start: Dag = field(default_factory=Dag)
    stop: Dag = field(default_factory=Dag)
    incr: Dag | None = None
    body: list[Block] = field(default_factory=list)
    parallel: bool = False
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class FunctionProgram:
    name: str
    params: list[Any]  # lang.ast.Param
    outputs: list[Any]
    blocks: list[Block]
    file: str
    span: Span = NO_SPAN
    namespace: str = ""
    compiled: bool = False


@dataclass
class Program:
    blocks: list[Block]
    functions: dict[str, FunctionProgram]  # key: "ns::name" or "name"
    path: str = ""
    sources: dict[str, str] = field(default_factory=dict)


def iter_blocks(blocks: list[Block]):
    """Every block, depth-first, in program order. An explicit stack, not nested generators: each
    item would pass through every level of ``yield from``, quadratic in the nesting depth (a 5,000
    deep ``if`` nest took 20 s here)."""
    stack = [iter(blocks)]
    while stack:
        b = next(stack[-1], None)
        if b is None:
            stack.pop()
            continue
        yield b
        if isinstance(b, IfBlock):
            stack += [iter(b.else_blocks), iter(b.then_blocks)]
        elif isinstance(b, (WhileBlock, ForBlock)):
            stack.append(iter(b.body))


def block_dags(b: Block) -> list[Dag]:
    if isinstance(b, GenericBlock):
        return [b.dag]
    if isinstance(b, (IfBlock, WhileBlock)):
        return [b.pred]
    if isinstance(b, ForBlock):
        return [d for d in (b.start, b.stop, b.incr) if d is not None]
    return []


def copy_dag(dag: Dag) -> Dag:
    """Deep copy with the same HOP ids (EXPLAIN of a recompiled block names the original HOPs)."""
    m: dict[int, Hop] = {}
    for h in dag.hops():
        c = Hop.__new__(Hop)
        for s in Hop.__slots__:
            setattr(c, s, getattr(h, s))
        c.inputs = [m[i.id] for i in h.inputs]
        c.params = dict(h.params)
        m[h.id] = c
    new = Dag([m[r.id] for r in dag.roots])
    new.held = dag.held
    return new


def loop_iterations(start: Any, stop: Any, incr: Any, default_incr: bool) -> int | None:
    """Iterations of ``for (i in start:stop)`` (``by incr`` unless ``default_incr``) with these bound
    values; None when a bound is not a finite number."""
    nums = (start, stop) if default_incr else (start, stop, incr)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums):
        return None  # (NaN / Inf bounds: the run reports them, the estimate does not know)
    a, b = int(start), int(stop)
    step = (1 if b >= a else -1) if default_incr else int(incr)
    if step == 0 or (b - a) * step < 0:
        return 0
    return (b - a) // step + 1
