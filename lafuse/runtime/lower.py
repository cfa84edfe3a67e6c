"""Lowering of a HOP DAG to a linear list of instructions over registers, with liveness.

Each non-literal HOP becomes one instruction that reads registers and writes one register.
Literals are preloaded constants. After an instruction, the registers whose last reader it was
are cleared, so intermediates are freed as soon as nothing needs them.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lafuse import memory
from lafuse.hops import sizes
from lafuse.hops.hop import DOUBLE, INT, Hop
from lafuse.hops.patterns import foldable_transposes, mmchains
from lafuse.hops.program import Dag
from lafuse.lang.builtins import REQUIRED, SPECS
from lafuse.runtime import reuse
from lafuse.runtime.local.kernels_common import norm_scalar

# opcodes the interpreter executes itself (they touch the symbol table, IO, or control)
SPECIAL = {"tread", "twrite", "fcall", "print", "stop", "assert", "write", "pread", "time", "list",
           "toString", "get", "lrix", "llix", "setwd", "as.frame", "as.list", "exists"}


@dataclass
class Instruction:
    opcode: str
    hop: Hop
    args: list[int]
    out: int
    fn: Callable[..., Any] | None = None  # kernel, with argument normalization bound in
    free: list[int] = field(default_factory=list)
    cast: type | None = None  # Python type a scalar result is coerced to (its inferred value type)
    inplace: bool = False  # lix that may update its target in place (see interp._lix_inplace)
    reuse: int = -1  # argument whose buffer an element-wise result may take (runtime.reuse)
    reads: list[Hop] | None = None  # the HOPs of ``args`` where they are not ``hop.inputs`` (read-through, mmchain)
    est: float | None = None  # cost-model estimate in seconds (computed on first use by --stats)
    # --stats: the run's statistics this instruction's counters belong to, its time and executions
    stats_of: Any = None
    t_sum: float = 0.0
    runs: int = 0

    def render(self) -> str:
        ins = " ".join(f"_r{a}" for a in self.args)
        h = self.hop
        size = f"[{h.rows},{h.cols},{h.nnz}]" if h.dt == "matrix" else f"[{h.dt}.{h.vt}]"
        extra = f" {h.name}" if h.name else ""
        return f"CP {self.opcode}{extra} {ins} -> _r{self.out} {size}"


@dataclass
class Plan:
    instructions: list[Instruction]
    nregs: int
    constants: dict[int, Any]
    writes: list[tuple[str, int]]  # (variable, register) committed after the block
    result: int = -1  # register of the single root of a predicate DAG
    candidates: tuple[str, ...] = ()  # canonical hashes of the fusion candidates of its DAG
    # runtime.straight: executions by the interpreter loop, then the generated code (function, its
    # code object, instruction per line, (whether it checks metadata, whether it times instructions))
    runs: int = 0
    code: tuple[Callable[..., Any], Any, list[int], tuple[bool, bool]] | None = None


def bind_args(op: str, slots: tuple[str, ...] | None, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``kernel`` so it receives arguments in the catalogue's positional order with defaults."""
    spec = SPECS.get(op)
    if spec is None or slots is None or spec.varargs or op == "list":
        return kernel
    pnames = spec.param_names
    if tuple(slots) == pnames:
        return kernel
    where = {s: i for i, s in enumerate(slots)}
    plan: list[tuple[bool, Any]] = []
    for p, d in spec.params:
        if p in where:
            plan.append((True, where[p]))
        else:
            plan.append((False, None if d is REQUIRED else d))

    def call(*args: Any) -> Any:
        return kernel(*[args[v] if is_arg else v for is_arg, v in plan])

    return call


def evaluate_literals(h: Hop, kernels: dict[str, Callable[..., Any]]) -> Any:
    """The value the instruction of ``h`` (a scalar operation over literals) computes, as the
    interpreter runs it: its kernel with the catalogue's arguments, NumPy scalars turned into the
    value contract's Python types, and the cast of a DOUBLE or INT result (``Instruction.cast``).
    Raises what the kernel raises. Constant folding calls it (rewrite.core.Ctx.evaluate)."""
    k = kernels.get(h.op)
    if k is None:
        raise KeyError(f"no kernel for '{h.op}'")
    v = norm_scalar(bind_args(h.op, h.params.get("slots"), k)(*[i.value for i in h.inputs]))
    if h.vt == DOUBLE and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if h.vt == INT and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _inplace_candidate(h: Hop, users: dict[int, list[Hop]], dag: Dag) -> bool:
    """``X[i, j] = v`` where X is read from variable V, nothing else in the block reads that
    value, and the result only goes back to V: the old value of V is dead after this
    instruction, so it can be updated in place (the runtime still checks that no other variable
    or caller shares the array)."""
    base = h.inputs[0]
    if base.op != "tread" or len(users.get(base.id, [])) != 1:
        return False
    outs = users.get(h.id, [])
    others = [u for u in outs if not (u.op == "twrite" and u.name == base.name)]
    return not others and any(u.op == "twrite" for u in outs) and h.id not in {r.id for r in dag.roots}


def _mark_reuse(ins: Instruction) -> None:
    """An element-wise instruction whose matrix operand dies with it may write into that operand
    (runtime.reuse; the run-time check makes sure nothing else holds the array)."""
    h = ins.hop
    if ins.reads is not None or h.dt != "matrix" or len(ins.args) != len(h.inputs):
        return
    a = ins.args
    same = len(a) == 2 and a[0] == a[1]  # D * D: one dying register at the first position
    dead = [r in ins.free and (a.count(r) == 1 or (same and n == 0)) and i.dt == "matrix" and i.op != "tread"
            for n, (r, i) in enumerate(zip(a, h.inputs))]
    k = reuse.operand(ins.fn, len(a), (h.rows, h.cols), [(i.rows, i.cols) for i in h.inputs], dead)
    if k >= 0 and ins.fn is not None:
        ins.reuse = k
        ins.fn = reuse.into(ins.fn, k, reuse.LOOP_REFS_SAME if same else reuse.LOOP_REFS, same)


def _matmult_transposed(mm: Callable[..., Any], ta: bool, tb: bool) -> Callable[..., Any]:
    def run(a: Any, b: Any) -> Any:
        return mm(a.T if ta else a, b.T if tb else b)

    if getattr(mm, "dense_matmul", False):
        run.dense_matmul_t = (ta, tb)  # type: ignore[attr-defined]  # (runtime.straight)
    return run


def spoof_kernel(h: Hop, threads: int | None = None, backend: str = "numba") -> Callable[..., Any]:
    """The generated kernel of a fused operator HOP, compiled (or found in the plan cache) when it
    first runs, for the formats its inputs come in (codegen.compile_plan);
    backend "reference" runs the CPlan on the pure-NumPy reference interpreter instead (the spec:
    tests check the optimizer's plans with it without paying for Numba compilation)."""
    plan = h.params["cplan"]
    if backend == "reference":
        from lafuse.codegen.reference import evaluate

        def ref(*args: Any) -> Any:
            return evaluate(plan, list(args))

        return ref
    started = "lafuse.codegen" in sys.modules
    t0 = time.perf_counter()
    from lafuse import codegen

    if not started:  # Numba's import, part of its start-up: reported by --stats with the kernel loads
        codegen.record_import_time(time.perf_counter() - t0)
    op = codegen.compile_plan(plan, threads=threads, eager=False)

    def run(*args: Any) -> Any:
        return op(list(args))

    run.fused = op  # type: ignore[attr-defined]
    return run


def operation_bytes(h: Hop, bounds: dict[int, float]) -> float:
    """Memory of ``h``'s operation: its output and its (distinct) inputs, by the sizes known when the
    DAG was lowered (actual sizes after a dynamic recompilation) and worst-case non-zeros where they
    are unknown (``bounds``: sizes.nnz_bound of every HOP so far); -1 when the output's dims are
    unknown. An input of unknown dims counts 0: the guard errs towards running."""
    out = sizes.output_bytes(h.rows, h.cols, int(min(bounds.get(h.id, -1.0), 2.0**62)))
    if out < 0:
        return -1.0
    seen: set[int] = set()
    total = out
    for i in h.inputs:
        if i.id not in seen and i.dt == "matrix" and i.rows >= 0 and i.cols >= 0:
            seen.add(i.id)
            total += sizes.output_bytes(i.rows, i.cols, int(min(bounds.get(i.id, -1.0), 2.0**62)))
    return total


def _guard_memory(h: Hop, fn: Callable[..., Any], bounds: dict[int, float]) -> Callable[..., Any]:
    """``fn``, or, when the operation needs more than the memory budget, an instruction that stops
    with a clear error when it is reached (earlier statements of the block still run; paper 003 §3:
    SystemDS would choose a distributed operator here). Decided at lowering, so running costs
    nothing; a plan is lowered again when a recompilation learns the sizes."""
    need = operation_bytes(h, bounds)
    if not memory.over_budget(need):
        return fn
    what = f"'{h.op}' with a {h.rows}x{h.cols} result"

    def over_budget(*args: Any) -> Any:
        memory.check(need, what)
        return fn(*args)  # the budget was raised since lowering

    return over_budget


def lower(dag: Dag, kernels: dict[str, Callable[..., Any]], threads: int | None = None,
          backend: str = "numba", chains: bool = True, reuse_buffers: bool = True) -> Plan:
    order = dag.hops()
    users: dict[int, list[Hop]] = {}
    for h in order:
        for i in h.inputs:
            users.setdefault(i.id, []).append(h)
    reg: dict[int, int] = {}
    constants: dict[int, Any] = {}
    instrs: list[Instruction] = []
    writes: list[tuple[str, int]] = []
    folded = foldable_transposes(order, users, dag)
    chain = mmchains(order, users, dag, folded) if chains and "mmchain" in kernels else {}
    absorbed = {a for c in chain.values() for a in c.absorbed}
    bounds: dict[int, float] = {}
    for h in order:
        bounds[h.id] = sizes.nnz_bound(h, bounds)
        r = len(reg)
        reg[h.id] = r
        if h.id in folded or h.id in absorbed:  # read through by its product, or part of a chain
            continue
        if h.kind == "literal":
            constants[r] = h.value
            continue
        args = [reg[i.id] for i in h.inputs]
        op = h.op
        if op == "twrite":
            writes.append((h.name or "", args[0]))
            continue
        fn = None
        reads: list[Hop] | None = None
        if h.kind == "spoof":
            fn = spoof_kernel(h, threads, backend)
        elif h.id in chain:
            c = chain[h.id]
            op = "mmchain"
            reads = [c.x, c.v] + ([c.w] if c.w is not None else [])
            args = [reg[i.id] for i in reads]
            fn = functools.partial(kernels["mmchain"], w_first=c.w_first, transposed=c.transposed)
        elif op not in SPECIAL:
            k = kernels.get(op)
            if k is None:
                raise NotImplementedError(f"no kernel for operation '{op}'")
            fn = bind_args(op, h.params.get("slots"), k)
            if h.kind == "matmult" and any(i.id in folded for i in h.inputs):
                ta, tb = (i.id in folded for i in h.inputs)
                reads = [i.inputs[0] if i.id in folded else i for i in h.inputs]
                args = [reg[i.id] for i in reads]
                fn = _matmult_transposed(fn, ta, tb)
        if fn is not None and h.dt == "matrix":
            fn = _guard_memory(h, fn, bounds)
        cast = None
        # SystemDS: print(ifelse(c, 7, 2.5)) prints 7, but y = ifelse(...) makes y a DOUBLE
        if h.dt == "scalar" and op not in ("tread", "get", "fcall", "pread") and (
                op != "ifelse" or h.params.get("assigned")):
            cast = {"double": float, "int": int}.get(h.vt)
        ins = Instruction(op, h, args, r, fn, cast=cast, reads=reads)
        if op == "lix":
            ins.inplace = _inplace_candidate(h, users, dag)
        instrs.append(ins)
    # liveness: last reader of each register
    last: dict[int, int] = {}
    for pos, ins in enumerate(instrs):
        for a in ins.args:
            last[a] = pos
    keep = {r for _, r in writes}
    for a, pos in last.items():
        if a not in keep and a not in constants:
            instrs[pos].free.append(a)
    if reuse_buffers:
        for ins in instrs:
            _mark_reuse(ins)
    result = reg[dag.roots[0].id] if dag.roots else -1
    return Plan(instrs, len(reg), constants, writes, result)
