"""Straight-line Python code of a lowered plan: one statement per instruction over local variables.

Why: the interpreter's loop over instructions costs about 2-3 us per instruction (building the
argument list from the register list, the branches for in-place updates, casts, metadata checks
and statistics, the loop over registers to free), more than a small operand's NumPy call. A
mini-batch loop body of 40-odd instructions runs thousands of times; as generated code each
instruction is one call with its registers as locals (paper 001 §5.4: SystemDS keeps its runtime
instructions cheap for the same loops). The plan stays the unit the interpreter reasons about;
this module only binds it to faster code.

The generated function has the interpreter loop's semantics exactly: the same calls in the same
order, scalar casts, in-place left indexing (the same reference counts: a list of the arguments
holds the target, like the loop's argument list), registers cleared after their last reader,
writes committed after the last instruction, and an error mapped to the instruction that raised
it (``failing``: the generated line that raised names the instruction). It is built once a plan
has run ``Config.straight_line_after`` times by the loop: compiling it costs about one loop run's
overhead, which a block that runs once would not get back.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse import cachedir
from lafuse.plan.instructions import Instruction, Plan
from lafuse.runtime import reuse


def generate(plan: Plan, check: bool, timed: bool = False) -> tuple[Callable[..., Any], list[int]]:
    """The plan's function ``run(st, special, lixi, castf, chk, stats)`` and, per source line, the index
    of the instruction it belongs to (-1: none). ``check``: each matrix result is compared with its
    HOP's predicted metadata (the interpreter's check_metadata). ``timed``: each instruction adds its
    time and one execution to its own counters for ``stats`` (``--stats``), as the loop does; the
    statistics then describe the code that runs without them, at two clock reads an instruction."""
    names: dict[str, Any] = {}
    lines: list[str] = []
    owner: list[int] = []

    def emit(text: str, i: int) -> None:
        lines.append(text)
        owner.append(i)

    def bind(value: Any, prefix: str, i: int) -> str:
        name = f"{prefix}{i}"
        names[name] = value
        return name

    names["T"], names["ND"], names["PC"], names["F64"] = type, np.ndarray, time.perf_counter, np.dtype(np.float64)
    for r, v in plan.constants.items():
        bind(v, "r", r)
    for i, ins in enumerate(plan.instructions):
        out = f"r{ins.out}"
        args = ", ".join(f"r{a}" for a in ins.args)
        call = _call(ins, i, args, bind, plan.constants)
        if timed:
            me = bind(ins, "i", i)
            # an instruction's first run under these statistics zeroes its counters and estimates it
            # (untimed, from its arguments); then the loop's window: the call, cast and check
            emit(f"if {me}.stats_of is not stats: stats.first_run({me}, [{args}])", i)
            emit("t_ = PC()", i)
        if ins.inplace:
            # the list holds the target as the loop's argument list does (interp._lix_inplace counts it)
            emit(f"{out} = lixi([{args}])", i)
            emit(f"if {out} is None: {out} = {call}", i)
        else:
            emit(f"{out} = {call}", i)
        if ins.cast is not None:
            t = bind(ins.cast, "t", i)
            emit(f"if type({out}) is not {t}: {out} = castf({out}, {t})", i)
        if check:
            emit(f"chk({bind(ins.hop, 'h', i)}, {out})", i)
        if timed:
            emit(f"{me}.t_sum += PC() - t_; {me}.runs += 1", i)
        for f in ins.free:
            emit(f"r{f} = None", i)
    for name, r in plan.writes:
        emit(f"st[{name!r}] = r{r}", -1)
    # the loop's register list holds None for a register no instruction sets (a twrite root's)
    assigned = set(plan.constants) | {ins.out for ins in plan.instructions}
    emit(f"return {f'r{plan.result}' if plan.result in assigned else 'None'}", -1)
    fn = closure(names, "run(st, special, lixi, castf, chk, stats)", lines,
                 f"<lafuse plan of {len(plan.instructions)} instructions>")
    return fn, [-1] * BODY_LINE + owner


# the line of a closure's first body statement (1: make's header, 2: the function's)
BODY_LINE = 3


def closure(names: dict[str, Any], header: str, body: list[str], filename: str) -> Callable[..., Any]:
    """The function ``def <header>: <body>`` (one statement a line, from line BODY_LINE) compiled with
    ``names`` as its closure variables: read as cells, faster than globals in a loop's hot path."""
    src = (f"def make({', '.join(names)}):\n def {header}:\n" + "".join(f"  {ln}\n" for ln in body)
           + f" return {header.split('(')[0]}\n")
    scope: dict[str, Any] = {}
    exec(compiled(src, filename), scope)
    return scope["make"](**names)  # type: ignore[no-any-return]


MAX_IN_MEMORY = 256  # code objects a process keeps (a long one recompiling many plans keeps the newest)
MIN_CACHED_LINES = 12  # a shorter function compiles in less time than its file takes to read and verify
_codes: dict[str, types.CodeType] = {}


def compiled(src: str, filename: str) -> types.CodeType:
    """``compile(src, filename, "exec")``, from this process's memory or the plan cache when the same
    source was compiled before. Why: Python compiles a loop body's plan of 40-odd instructions in 1-2
    ms (more than 20 of its iterations' overhead) and a process compiles it anew; the code object
    depends on the text alone (every value is a closure variable), so it is kept as marshal data,
    signed like every file of the plan cache (lafuse.cachedir; a file whose tag does not verify is
    compiled again), keyed by the text, the file name and the Python that marshals it."""
    import hashlib  # deferred: ~4 ms of stdlib, only when caching generated code
    import importlib.util
    import marshal

    h = hashlib.sha256(importlib.util.MAGIC_NUMBER + sys.version.encode())
    for part in (filename, src):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    key = h.hexdigest()[:32]
    code = _codes.get(key)
    if code is not None:
        return code
    cacheable = src.count("\n") >= MIN_CACHED_LINES and os.environ.get("LAFUSE_CODE_CACHE", "1") != "0"
    name = f"code_{key}.marshal"

    if cacheable:
        payload = cachedir.load_file(name)
        if payload is not None:
            try:
                loaded = marshal.loads(payload)
            except (ValueError, EOFError, TypeError):
                loaded = None
            if isinstance(loaded, types.CodeType) and loaded.co_filename == filename:
                _codes[key] = loaded
                return loaded
    code = compile(src, filename, "exec")
    if len(_codes) >= MAX_IN_MEMORY:
        _codes.pop(next(iter(_codes)))
    _codes[key] = code
    if cacheable:
        cachedir.store_file(name, marshal.dumps(code), *cachedir.PLAN_CODE)
    return code


def _call(ins: Instruction, i: int, args: str, bind: Callable[[Any, str, int], str],
          constants: dict[int, Any]) -> str:
    """The expression of an instruction's call; ``args``: its argument registers, comma-separated."""
    if ins.opcode == "tread":
        return f"st[{ins.hop.name!r}]"
    if ins.fn is None:
        return f"special({ins.opcode!r}, {bind(ins.hop, 'h', i)}, [{args}], st)"
    if ins.reuse >= 0:  # the kernel writing into a dying operand, counting this code's references
        same = ins.fn.reuse_same  # type: ignore[attr-defined]
        refs = reuse.STRAIGHT_REFS_SAME if same else reuse.STRAIGHT_REFS
        return f"{bind(reuse.into(ins.fn.kern, ins.reuse, refs, same), 'f', i)}({args})"  # type: ignore[attr-defined]
    call = f"{bind(ins.fn, 'f', i)}({args})"
    fast = _dense_fast_path(ins, i, bind, constants) or _row_slice_fast_path(ins, constants)
    return call if fast is None else f"{fast[0]} if {fast[1]} else {call}"


_MISSING = object()


def _row_slice_fast_path(ins: Instruction, constants: dict[int, Any]) -> tuple[str, str] | None:
    """(expression, guard) of ``X[lo:hi, ]`` over whole rows of a row-major float64 matrix with int
    bounds inside it: the view k_rix returns (kernels_reorg), without its call, bound conversions and
    checks (1.2 us a mini-batch slice, two of them an iteration). The whole matrix (``1:nrow``) and
    anything else go to the kernel, which also raises its errors."""
    a = ins.args
    if not getattr(ins.fn, "row_view", False) or len(a) != 5:
        return None
    cl, cu = constants.get(a[3], _MISSING), constants.get(a[4], _MISSING)
    if not (cl is None or (type(cl) is int and cl == 1)) or not (cu is None or type(cu) is int):
        return None
    x, lo, hi = (f"r{r}" for r in a[:3])
    cols = "" if cu is None else f" and {x}.shape[1] == {cu}"
    return (f"{x}[{lo} - 1:{hi}]",
            f"T({x}) is ND and T({lo}) is int and T({hi}) is int and 1 <= {lo} <= {hi} <= {x}.shape[0] and "
            f"({lo} > 1 or {hi} < {x}.shape[0]){cols} and {x}.dtype is F64 and {x}.flags.c_contiguous")


def _dense_fast_path(ins: Instruction, i: int, bind: Callable[[Any, str, int], str],
                     constants: dict[int, Any]) -> tuple[str, str] | None:
    """(expression, guard) of what the kernel computes when the guard holds: NumPy's own call for dense
    operands, the kernel's fast path without its call and type dispatch (about 1 us of a mini-batch
    operation's 3-5 us). The guards are the kernel's own (same-shape dense, dense with a float, a
    conformable dense product); anything else calls the kernel. Floating-point errors need no errstate
    here: generated code runs inside the interpreter, under kernels_common.ieee_thread."""
    fn = ins.fn
    a = ins.args
    op = getattr(fn, "dense_op", None)
    if op is not None and len(a) == 1:
        return f"{bind(op, 'u', i)}(r{a[0]})", f"T(r{a[0]}) is ND"
    if op is not None and len(a) == 2:
        u = bind(op, "u", i)
        x, y = (_float_constant(constants, r) for r in a)
        if x is None and y is None:
            dts = [h.dt for h in ins.hop.inputs]
            if dts == ["matrix", "scalar"]:  # a scalar variable: the kernel's float case
                return f"{u}(r{a[0]}, r{a[1]})", f"T(r{a[0]}) is ND and T(r{a[1]}) is float"
            if dts == ["scalar", "matrix"]:
                return f"{u}(r{a[0]}, r{a[1]})", f"T(r{a[0]}) is float and T(r{a[1]}) is ND"
            return f"{u}(r{a[0]}, r{a[1]})", f"T(r{a[0]}) is ND and T(r{a[1]}) is ND and r{a[0]}.shape == r{a[1]}.shape"
        if x is None and y is not None:
            return f"{u}(r{a[0]}, {bind(y, 'k', i)})", f"T(r{a[0]}) is ND"
        if x is not None and y is None:
            return f"{u}({bind(x, 'k', i)}, r{a[1]})", f"T(r{a[1]}) is ND"
        return None
    if len(a) != 2:
        return None
    ta, tb = getattr(fn, "dense_matmul_t", (False, False))
    if not (getattr(fn, "dense_matmul", False) or ta or tb):
        return None
    left, right = f"r{a[0]}" + (".T" if ta else ""), f"r{a[1]}" + (".T" if tb else "")
    return f"{left} @ {right}", f"T(r{a[0]}) is ND and T(r{a[1]}) is ND and {left}.shape[1] == {right}.shape[0]"


def _float_constant(constants: dict[int, Any], r: int) -> float | None:
    """A literal operand's value as the kernel passes it to NumPy (an int becomes a float), or None."""
    v = constants.get(r)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def failing(code: types.CodeType, tb: types.TracebackType | None, owner: list[int]) -> int:
    """The index of the instruction whose line of ``code`` the traceback passes through (-1: none)."""
    while tb is not None:
        if tb.tb_frame.f_code is code:
            line = tb.tb_lineno
            return owner[line] if 0 <= line < len(owner) else -1
        tb = tb.tb_next
    return -1
