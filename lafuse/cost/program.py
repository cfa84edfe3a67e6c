"""Costing a whole runtime program before it runs (paper 003 sec. 3.2).

One pass over the program in execution order. Generic blocks are lowered to their instructions
and each instruction is priced by :func:`lafuse.cost.operators.instruction_cost`; function calls
add the cost of the callee's body (a call stack stops recursion). Control flow aggregates the
children by Eq. 1 of paper 003: a for loop multiplies its body by the iteration count (known when
its bounds fold to constants, else ``DEFAULT_WHILE_ITERATIONS``), a while loop by that constant, a
parfor by ``ceil(N / k)`` for ``k`` worker threads, and an if-block weighs each branch by 1/2 unless
its predicate folds to a constant. Scalar variables whose values are known (literals, and
expressions of known scalars and sizes) are tracked across blocks so loop bounds like ``1:n`` fold.

Persistent reads are explicit ``read`` instructions in lafuse, so "the first reader pays the IO"
holds by construction: the read instruction carries the IO cost, its consumers only compute.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lafuse.cost import constants as K
from lafuse.cost.operators import ZERO, Cost, instruction_cost, meta
from lafuse.cost.profile import HardwareProfile, load
from lafuse.hops import sizes
from lafuse.hops.hop import SCALAR
from lafuse.hops.program import (
    Block,
    Dag,
    ForBlock,
    GenericBlock,
    IfBlock,
    Program,
    WhileBlock,
    copy_dag,
    iter_blocks,
    loop_iterations,
)


def fmt_cost(c: Cost) -> str:
    mark = "" if c.exact else "~"
    return f"# C=[{mark}{_s(c.io)}, {mark}{_s(c.compute)}]"


def _s(x: float) -> str:
    return f"{x:.3g}s"


@dataclass
class ProgramCost:
    """The estimate of a program: total cost, per-opcode seconds (weighted by loop iterations),
    and, when rendered, the annotated plan."""

    total_cost: Cost
    by_opcode: dict[str, float] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return self.total_cost.total


class ProgramCoster:
    def __init__(self, compiler: Any, prof: HardwareProfile | None = None, render: bool = False,
                 threads: int | None = None, sparse_loaded: bool | None = None,
                 reusable_bytes: float | None = None):
        self.compiler = compiler
        self.prof = prof or load()
        self.render = render
        self.threads = threads or compiler.cfg.threads
        self.by_opcode: dict[str, float] = {}
        self.lines: list[str] = []
        self._stack: list[str] = []
        self._weight = 1.0  # product of the enclosing loop/branch weights (for by_opcode)
        self.nnz_hints: dict[str, float] = {}  # estimated non-zeros of matrix variables (unknown exact nnz)
        # memory state of the process: bytes live now, and the high-water mark beyond which new
        # memory pays first-touch page faults (once: not multiplied by loop iterations)
        self.var_bytes: dict[str, float] = {}
        self.var_shape: dict[str, tuple[int, int]] = {}  # dims of matrix variables as costed so far
        self.call_outputs: dict[int, list[tuple[int, int]]] = {}  # fcall hop id -> its outputs' dims
        self.live = 0.0
        self.peak = _reusable_bytes() if reusable_bytes is None else reusable_bytes
        self.first_touch = 0.0
        self.sparse_import = 0.0
        # process state, like a variable's in-memory state: the first sparse value pays the import
        # (once, like the first touch: inside a loop it is not multiplied by the loop's weight)
        import sys

        self._sparse_loaded = "scipy.sparse" in sys.modules if sparse_loaded is None else sparse_loaded

    # ------------------------------------------------------------------ entry points
    def program(self, prog: Program) -> ProgramCost:
        self._emit(0, "PROGRAM")
        self._emit(1, "MAIN PROGRAM")
        total = self.blocks(prog.blocks, {}, 2)
        if self.first_touch > 0:
            self._emit(0, f"FIRST-TOUCH MEMORY (growth beyond the process's peak) # C=[0s, {_s(self.first_touch)}]")
            total = total + Cost(0.0, self.first_touch)
        if self.sparse_import > 0:
            self._emit(0, f"SCIPY SPARSE IMPORT (the first sparse value) # C=[0s, {_s(self.sparse_import)}]")
            total = total + Cost(0.0, self.sparse_import)
        self._emit(0, f"TOTAL {fmt_cost(total)} = {_s(total.total)}")
        return ProgramCost(total, dict(self.by_opcode), self.lines)

    def blocks(self, blocks: list[Block], known: dict[str, Any], depth: int) -> Cost:
        total = ZERO
        for b in blocks:
            total = total + self.block(b, known, depth)
        return total

    # ------------------------------------------------------------------ blocks
    def block(self, b: Block, known: dict[str, Any], depth: int) -> Cost:
        if isinstance(b, GenericBlock):
            return self._generic(b, known, depth)
        if isinstance(b, IfBlock):
            return self._if(b, known, depth)
        if isinstance(b, WhileBlock):
            head = len(self.lines)
            self._emit(depth, f"WHILE ({b.lines}) [iterations~{K.DEFAULT_WHILE_ITERATIONS}]")
            body = self._weighted(K.DEFAULT_WHILE_ITERATIONS, lambda: self._dag(b.pred, known, depth + 1)
                                  + self.blocks(b.body, self._forget_assigned(known, b.body), depth + 1))
            self._close(head, body)
            return body.scale(K.DEFAULT_WHILE_ITERATIONS)
        if isinstance(b, ForBlock):
            return self._for(b, known, depth)
        return ZERO

    def _generic(self, b: GenericBlock, known: dict[str, Any], depth: int) -> Cost:
        head = len(self.lines)
        self._emit(depth, f"GENERIC ({b.lines})")
        dag, plan = b.dag, b.plan
        if b.requires_recompile:
            # as dynamic recompilation will: sizes from the variables' (estimated) shapes and the
            # scalars known here (a loop body is priced at its first iteration's values)
            dag, plan = self._resize(b.dag, known), None
        elif plan is None:  # the plan the interpreter then binds and runs: a static block is fused once
            plan = b.plan = self.compiler.plan_dag(dag, b.weight)
        cost = self._dag(dag, known, depth + 1, plan=plan, weight=b.weight)
        # scalars this block assigns: their values, when they fold, are known to later blocks
        for r in dag.roots:
            if r.op == "twrite" and r.name and r.inputs and r.inputs[0].dt == "matrix":
                m = r.inputs[0]
                self.var_bytes[r.name] = meta(m, self.nnz_hints).bytes
                self.var_shape[r.name] = self._shape_of(m)
                est = meta(m, self.nnz_hints).nnz if m.nnz < 0 else m.nnz
                if est >= 0:
                    self.nnz_hints[r.name] = float(est)
                else:
                    self.nnz_hints.pop(r.name, None)
            if r.op == "twrite" and r.name and r.inputs:
                v = sizes.scalar_value(r.inputs[0], known) if r.inputs[0].dt == SCALAR else None
                if isinstance(v, (int, float, str, bool)):
                    known[r.name] = v
                else:
                    known.pop(r.name, None)
        self._close(head, cost)
        return cost

    def _dag(self, dag: Dag, known: dict[str, Any], depth: int, plan: Any = None, weight: float = 1.0) -> Cost:
        """The plan's instructions priced; the plan is the one the interpreter builds for the block
        (fused with the block's expected executions, ``weight``), unbound: nothing is compiled."""
        if plan is None:
            plan = self.compiler.plan_dag(dag, weight)
        total = ZERO
        reg_bytes: dict[int, float] = {}
        self.live = sum(self.var_bytes.values())
        for ins in plan.instructions:
            c = instruction_cost(ins.opcode, ins.hop, self.prof, ins.inplace, self.nnz_hints, ins.block,
                                 ins.reads, ins.transposed)
            if self.render:
                self._emit(depth, f"{ins.render()} {fmt_cost(c)}")
            self.by_opcode[ins.opcode] = self.by_opcode.get(ins.opcode, 0.0) + self._weight * c.total
            if not self._sparse_loaded and _makes_sparse(ins.hop):
                self._sparse_loaded = True
                self.sparse_import = K.SCIPY_SPARSE_IMPORT_TIME
                self.by_opcode[ins.opcode] += self.sparse_import
            total = total + c
            if ins.reuse >= 0 and ins.args[ins.reuse] in reg_bytes:  # written into a dying operand
                reg_bytes[ins.out] = reg_bytes.pop(ins.args[ins.reuse])
            elif ins.hop.dt == "matrix" and not ins.inplace and ins.opcode not in ("tread", "get"):
                out_bytes = meta(ins.hop, self.nnz_hints).bytes
                reg_bytes[ins.out] = out_bytes
                self.live += out_bytes
                if self.live > self.peak:
                    t = (self.live - self.peak) / self.prof.first_touch_bw
                    self.first_touch += t
                    self.by_opcode[ins.opcode] += t
                    self.peak = self.live
            for f in ins.free:
                self.live -= reg_bytes.pop(f, 0.0)
            if ins.opcode == "fcall":
                total = total + self._call(ins.hop, known, depth + 1)
        return total

    def _call(self, call: Any, known: dict[str, Any], depth: int) -> Cost:
        key = call.params["fname"]
        if key in self._stack:  # recursion: the recursive call itself is priced at its overhead only
            return ZERO
        fp = self.compiler.function(key)
        # the callee's parameters take the arguments' shapes and known scalar values, so a body
        # compiled with unknown sizes is priced as dynamic recompilation will see it
        names = call.params.get("argnames") or [None] * len(call.inputs)
        shapes: dict[str, tuple[int, int]] = {}
        args_known: dict[str, Any] = {}
        for i, (arg, name) in enumerate(zip(call.inputs, names)):
            pname = name or (fp.params[i].name if i < len(fp.params) else None)
            if pname is None:
                continue
            if arg.dt == "matrix":
                shapes[pname] = self._shape_of(arg)
            else:
                v = sizes.scalar_value(arg, known)
                if isinstance(v, (int, float, str, bool)):
                    args_known[pname] = v
        saved_shape, self.var_shape = self.var_shape, shapes
        saved_bytes, self.var_bytes = self.var_bytes, {}
        self._stack.append(key)
        try:
            head = len(self.lines)
            self._emit(depth, f"FUNCTION {key}")
            cost = self.blocks(fp.blocks, args_known, depth + 1)
            self._close(head, cost)
            # the outputs' shapes as the body left them, for the caller's later blocks
            self.call_outputs[call.id] = [self.var_shape.get(o.name, (-1, -1)) for o in fp.outputs]
        finally:
            self._stack.pop()
            self.var_shape, self.var_bytes = saved_shape, saved_bytes
        return cost

    def _if(self, b: IfBlock, known: dict[str, Any], depth: int) -> Cost:
        head = len(self.lines)
        pred = self._fold(b.pred, known)
        if isinstance(pred, (bool, int, float)) and not isinstance(pred, str):
            w_then, w_else = (1.0, 0.0) if pred else (0.0, 1.0)
        else:
            w_then = w_else = 1.0 / 2.0  # Eq. 1: 1/|c(b)| per branch
        self._emit(depth, f"IF ({b.lines}) [branch weights {w_then:g}/{w_else:g}]")
        cost = self._dag(b.pred, known, depth + 1)
        k_then, k_else = dict(known), dict(known)
        cost = cost + self._weighted(w_then, lambda: self.blocks(b.then_blocks, k_then, depth + 1)).scale(w_then)
        if b.else_blocks:
            self._emit(depth, "ELSE")
            cost = cost + self._weighted(w_else, lambda: self.blocks(b.else_blocks, k_else, depth + 1)).scale(w_else)
        # after the branch, a scalar is known only if both branches agree on it
        for name in set(known) | set(k_then) | set(k_else):
            if k_then.get(name, None) == k_else.get(name, None) and name in k_then:
                known[name] = k_then[name]
            else:
                known.pop(name, None)
        self._close(head, cost)
        return cost

    def _for(self, b: ForBlock, known: dict[str, Any], depth: int) -> Cost:
        head = len(self.lines)
        start, stop = self._fold(b.start, known), self._fold(b.stop, known)
        incr = self._fold(b.incr, known) if b.incr is not None else None
        n = loop_iterations(start, stop, incr, b.incr is None)
        guessed = n is None
        n = K.DEFAULT_WHILE_ITERATIONS if n is None else n
        w = math.ceil(n / max(self.threads, 1)) if b.parallel and self.threads > 1 else n
        kind = "PARFOR" if b.parallel else "FOR"
        self._emit(depth, f"{kind} ({b.lines}) [iterations{'~' if guessed else '='}{n}, weight {w}]")
        bounds = ZERO
        for d in (b.start, b.stop, b.incr):
            if d is not None:
                bounds = bounds + self._dag(d, known, depth + 1)
        inner = self._forget_assigned(known, b.body)
        inner.pop(b.var, None)
        if isinstance(start, (int, float)) and not isinstance(start, bool) and n > 0:
            inner = dict(inner)
            inner[b.var] = int(start)  # sizes that depend on the loop variable: its first value
        # per-opcode totals count every execution (n); the block's time runs k-way parallel (w)
        body = self._weighted(n, lambda: self.blocks(b.body, inner, depth + 1))
        total = bounds + body.scale(w)
        if guessed:
            total = Cost(total.io, total.compute, False)
        self._close(head, total)
        return total

    # ------------------------------------------------------------------ helpers
    def _shape_of(self, h: Any) -> tuple[int, int]:
        """Dims of a matrix HOP, completed from what costing learned: a variable's shape from an
        earlier block, a function result's shape from the callee's body."""
        if h.rows >= 0 and h.cols >= 0:
            return h.rows, h.cols
        if h.op == "tread":
            return self.var_shape.get(h.name or "", (h.rows, h.cols))
        if h.op == "get" and h.inputs and h.inputs[0].op == "fcall":
            outs = self.call_outputs.get(h.inputs[0].id, [])
            i = h.params.get("index", 0)
            if i < len(outs):
                return outs[i]
        return h.rows, h.cols

    def _resize(self, dag: Dag, known: dict[str, Any]) -> Dag:
        new = copy_dag(dag)
        for h in new.hops():
            if h.op == "tread" and h.dt == "matrix" and (h.rows < 0 or h.cols < 0):
                r, c = self.var_shape.get(h.name or "", (-1, -1))
                h.rows = r if h.rows < 0 else h.rows
                h.cols = c if h.cols < 0 else h.cols
            sizes.infer(h, known)
        return new

    def _weighted(self, w: float, fn: Callable[[], Cost]) -> Cost:
        saved = self._weight
        self._weight = saved * w
        try:
            return fn()
        finally:
            self._weight = saved

    def _fold(self, dag: Dag | None, known: dict[str, Any]) -> Any:
        if dag is None or not dag.roots:
            return None
        return sizes.scalar_value(dag.roots[0], known)

    @staticmethod
    def _forget_assigned(known: dict[str, Any], body: list[Block]) -> dict[str, Any]:
        """Inside a loop, a scalar the body reassigns is not a constant (its first-iteration value
        would be wrong for later iterations)."""
        assigned: set[str] = set()
        for blk in iter_blocks(body):
            if isinstance(blk, GenericBlock):
                assigned.update(r.name for r in blk.dag.roots if r.op == "twrite" and r.name)
        out = {k: v for k, v in known.items() if k not in assigned}
        known.clear()
        known.update(out)
        return known

    def _emit(self, depth: int, text: str) -> None:
        if self.render:
            self.lines.append("--" * depth + text)

    def _close(self, head: int, cost: Cost) -> None:
        """Append the block's total to its header line."""
        if self.render and head < len(self.lines):
            self.lines[head] += f" {fmt_cost(cost)}"


def _reusable_bytes() -> float:
    """Memory this process has touched before but holds no data in now (peak RSS minus current RSS):
    allocations up to that size are served without page faults."""
    try:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0  # KiB on Linux
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * float(os.sysconf("SC_PAGE_SIZE"))
        return max(peak - rss, 0.0)
    except (OSError, ValueError, ImportError, IndexError):
        return 0.0


def _makes_sparse(h: Any) -> bool:
    return meta(h).sparse  # a CSR value (formats.may_be_sparse)


def estimate_program(prog: Program, compiler: Any, prof: HardwareProfile | None = None,
                     render: bool = False) -> ProgramCost:
    return ProgramCoster(compiler, prof, render).program(prog)
