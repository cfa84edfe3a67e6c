"""The interpreter over program blocks and lowered instructions, with a symbol table per call.

Generic blocks run their lowered plan; blocks whose sizes were unknown at compile time are
recompiled against the actual sizes in the symbol table first (and the plan cached by that
input signature). Control-flow blocks evaluate predicate plans. Function calls get a fresh
symbol table.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from lafuse import config as cfgmod
from lafuse.errors import DMLError, DMLRuntimeError, DMLStop
from lafuse.feedback import EXECUTED
from lafuse.formats import DENSE, default_format
from lafuse.hops.program import Block, ForBlock, GenericBlock, IfBlock, Program, WhileBlock
from lafuse.plan.instructions import DASK, Plan
from lafuse.runtime import deepstack, parfor, progress, recompile, straight
from lafuse.runtime.bind import bind
from lafuse.runtime.dask.matrix import Blocked, any_matrix
from lafuse.runtime.local.kernels import KERNELS, bind_args
from lafuse.runtime.local.kernels_common import ieee_thread
from lafuse.runtime.printing import dml_str, java_format, to_string
from lafuse.runtime.progress import RunProgress
from lafuse.runtime.values import Frame, ListValue, cast_scalar, is_matrix, is_sparse, nnz, to_dense

if TYPE_CHECKING:  # --stats only: imported where a run makes one
    from lafuse.runtime.stats import Stats


def _dag_span(dag: Any, b: Block) -> Any:
    """Where a predicate or loop bound is written: its expression, else the statement."""
    span = dag.roots[0].span if dag.roots else None
    return span if span is not None and span.line > 0 else b.span


def _describe(v: Any) -> str:
    if is_matrix(v):
        return f"a {v.shape[0]}x{v.shape[1]} matrix"
    if isinstance(v, str):
        return f"the string '{v}'"
    if isinstance(v, ListValue):
        return "a list"
    return f"a {type(v).__name__}" if not isinstance(v, (int, float)) else repr(v)


def _to_bool(v: Any, what: str = "predicate") -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, np.floating, np.integer)):
        return bool(v != 0)
    if is_matrix(v):
        if v.shape == (1, 1):
            return bool(v[0, 0] != 0) if isinstance(v, np.ndarray) else bool(v.toarray()[0, 0] != 0)
        raise DMLRuntimeError(f"{what} must be a scalar, got a {v.shape[0]}x{v.shape[1]} matrix")
    if isinstance(v, str):
        if v in ("TRUE", "true"):
            return True
        if v in ("FALSE", "false"):
            return False
    raise DMLRuntimeError(f"{what} must be a boolean or number, got {_describe(v)}")


def _to_num(v: Any, what: str) -> int | float:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if is_matrix(v) and v.shape == (1, 1):
        return float(v[0, 0]) if isinstance(v, np.ndarray) else float(v.toarray()[0, 0])
    raise DMLRuntimeError(f"{what} must be a number, got {_describe(v)}")


# errors of a kernel that become a DML runtime error at its instruction (others are bugs: a traceback)
_KERNEL_ERRORS = (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, MemoryError,
                  np.linalg.LinAlgError)


class Interpreter:
    def __init__(self, program: Program, compiler: Any, out: TextIO | None = None, stats: Stats | None = None):
        self.program = program
        self.compiler = compiler  # lafuse.compiler.Compiler: builds function bodies, recompiles blocks
        self.out = out or sys.stdout
        self.stats = stats
        self.cfg = cfgmod.get()
        self._calls = threading.local()  # DML call depth of each thread (parfor workers have their own stack)
        self.kernels: dict[str, Callable[..., Any]] = KERNELS
        self._pred_plans: dict[int, Plan] = {}
        self.progress: RunProgress | None = None  # the live progress line's view of where the run is

    # ------------------------------------------------------------ blocks
    def run(self, symtab: dict[str, Any] | None = None) -> dict[str, Any]:
        """Runs on a deep thread (runtime.deepstack): DML recursion and deep nesting recurse here."""
        st = symtab if symtab is not None else {}
        self.progress = progress.begin(self.cfg.progress, self.cfg.progress_after)
        try:
            deepstack.call(self._exec_all, self.program.blocks, st)
        finally:
            if self.progress is not None:
                self.progress.stop()
            for be in self.compiler.backends.values():
                be.settle()  # (the Dask backend lets go of the tasks it paced)
        return st

    def _exec_all(self, blocks: list[Block], st: dict[str, Any]) -> None:
        with ieee_thread():
            self.exec_blocks(blocks, st)

    def exec_blocks(self, blocks: list[Block], st: dict[str, Any]) -> None:
        for b in blocks:
            self.exec_block(b, st)

    def exec_block(self, b: Block, st: dict[str, Any]) -> None:
        if isinstance(b, GenericBlock):
            if self.progress is not None:
                self.progress.where = b.lines
            plan = self._plan_for(b, st)
            self.exec_plan(plan, st)
        elif isinstance(b, IfBlock):
            if self._truth(b.pred, b, st, "if predicate"):
                self.exec_blocks(b.then_blocks, st)
            else:
                self.exec_blocks(b.else_blocks, st)
        elif isinstance(b, WhileBlock):
            frame = self._loop("while", "", None)
            try:
                while self._truth(b.pred, b, st, "while predicate"):
                    if frame is not None:
                        frame[2] += 1
                    self.exec_blocks(b.body, st)
            finally:
                self._unloop(frame)
        elif isinstance(b, ForBlock):
            self.exec_for(b, st)
        else:  # pragma: no cover
            raise DMLRuntimeError(f"unknown block {type(b).__name__}")

    def _plan_for(self, b: GenericBlock, st: dict[str, Any]) -> Plan:
        if b.requires_recompile and self.cfg.dynamic_recompile:
            return recompile.plan_for(self, b, st)
        if b.plan is None:
            b.plan = self.compiler.plan_dag(b.dag, b.weight, st)
            if self.cfg.explain == "formats":
                recompile.explain_formats(self, b, b.plan)
        return bind(b.plan, self.compiler.backends)  # (a plan EXPLAIN or the cost model built is bound here)

    def _dag_plan(self, dag: Any) -> Plan:
        plan = self._pred_plans.get(id(dag))
        if plan is None:
            plan = self._pred_plans[id(dag)] = self.compiler.lower_dag(dag)
        return plan

    def eval_pred(self, plan: Plan, st: dict[str, Any]) -> Any:
        regs = self.exec_plan(plan, st, keep_result=True)
        return regs

    def _truth(self, dag: Any, b: Block, st: dict[str, Any], what: str) -> bool:
        """A predicate's value as a boolean; a value that is none (a string, a matrix) is an error
        at the predicate's expression."""
        v = self.eval_pred(self._dag_plan(dag), st)
        try:
            return _to_bool(v, what)
        except DMLError as e:
            raise e.with_span(_dag_span(dag, b)) from None

    def _bound(self, dag: Any, b: Block, st: dict[str, Any], what: str) -> int:
        """A for loop's bound or increment, truncated to an integer as SystemDS casts it to INT64."""
        v = self.eval_pred(self._dag_plan(dag), st)
        try:
            return int(_to_num(v, what))
        except DMLError as e:
            raise e.with_span(_dag_span(dag, b)) from None
        except (ValueError, OverflowError):  # NaN / Inf (SystemDS casts them to a long silently)
            raise DMLRuntimeError(f"{what} must be a finite number, got {dml_str(_to_num(v, what))}",
                                  _dag_span(dag, b)) from None

    def exec_for(self, b: ForBlock, st: dict[str, Any]) -> None:
        # SystemDS casts the bounds and the increment to INT64 (truncation): seq(0, 1, 0.25) runs
        # zero times, 0.5:2.5 runs 0, 1, 2 (verified against SystemDS 3.4)
        start = self._bound(b.start, b, st, "for loop start")
        stop = self._bound(b.stop, b, st, "for loop end")
        if b.incr is not None:
            incr = self._bound(b.incr, b, st, "for loop increment")
            if incr == 0 or (stop - start) * incr < 0:
                return
        else:
            incr = 1 if stop >= start else -1
        values: Any = range(start, stop + (1 if incr > 0 else -1), incr)
        if b.parallel and self.cfg.parfor_parallel and self.cfg.threads > 1:
            if parfor.run_parallel(self, b, values, st):
                return
        frame = self._loop("for", b.var, len(values))
        try:
            for v in values:
                st[b.var] = v
                if frame is not None:
                    frame[2] += 1
                self.exec_blocks(b.body, st)
        finally:
            self._unloop(frame)

    def _loop(self, kind: str, var: str, n: int | None) -> list[Any] | None:
        """A loop's line in the progress (its iteration counted by the caller), or None without one."""
        if self.progress is None:
            return None
        frame: list[Any] = [kind, var, 0, n]
        self.progress.loops.append(frame)
        return frame

    def _unloop(self, frame: list[Any] | None) -> None:
        if frame is not None and self.progress is not None:
            self.progress.loops.remove(frame)

    # ------------------------------------------------------------ instructions
    def exec_plan(self, plan: Plan, st: dict[str, Any], keep_result: bool = False) -> Any:
        for k in plan.candidates:
            EXECUTED[k] = EXECUTED.get(k, 0) + 1
        stats = self.stats
        check = self.cfg.check_metadata
        after = self.cfg.straight_line_after
        if after >= 0:
            code = plan.code
            mode = (check, stats is not None)  # --stats: code that times each instruction
            if code is None or code[3] != mode:
                plan.runs += 1
                if plan.runs > after:
                    fn, owner = straight.generate(plan, *mode)
                    code = plan.code = (fn, fn.__code__, owner, mode)
            if code is not None and code[3] == mode:
                try:
                    v = code[0](st, self.special, _lix_inplace, cast_scalar, _check_metadata, stats)
                except Exception as e:
                    self._straight_error(plan, code, st, e)
                    raise
                return v if keep_result else None
        return self._exec_loop(plan, st, stats, check, keep_result)

    def _straight_error(self, plan: Plan, code: tuple, st: dict[str, Any], e: Exception) -> None:
        """Raises the error the interpreter loop would for ``e`` from generated code (the same span and
        message; runtime.straight.failing finds the instruction); returns to re-raise it unchanged."""
        i = straight.failing(code[1], e.__traceback__, code[2])
        if i < 0:
            return
        ins = plan.instructions[i]
        if isinstance(e, DMLError):
            raise e.with_span(ins.hop.span) from None
        if isinstance(e, KeyError) and ins.opcode == "tread":
            self.special("tread", ins.hop, [], st)
        if isinstance(e, _KERNEL_ERRORS):
            raise DMLRuntimeError(f"{ins.opcode}: {e}", ins.hop.span) from None

    def _exec_loop(self, plan: Plan, st: dict[str, Any], stats: Stats | None, check: bool,
                   keep_result: bool) -> Any:
        regs: list[Any] = [None] * plan.nregs
        for r, v in plan.constants.items():
            regs[r] = v
        for ins in plan.instructions:
            try:
                args = [regs[a] for a in ins.args]
                t0 = time.perf_counter() if stats is not None else 0.0
                fn = ins.fn
                if ins.inplace and (v := _lix_inplace(args)) is not None:
                    pass
                elif fn is not None:
                    v = fn(*args)
                else:
                    v = self.special(ins.opcode, ins.hop, args, st)
                cast = ins.cast
                if cast is not None and type(v) is not cast:
                    v = cast_scalar(v, cast)
                regs[ins.out] = v
                v = None  # no stray reference: in-place updates count references
                if check:
                    _check_metadata(ins.hop, regs[ins.out])
                if stats is not None:
                    if ins.stats_of is not stats:
                        stats.first_run(ins, args)
                    ins.t_sum += time.perf_counter() - t0
                    ins.runs += 1
            except DMLError as e:
                raise e.with_span(ins.hop.span) from None
            except _KERNEL_ERRORS as e:
                raise DMLRuntimeError(f"{ins.opcode}: {e}", ins.hop.span) from None
            for f in ins.free:
                regs[f] = None
        for name, r in plan.writes:
            st[name] = regs[r]
        if keep_result:
            return regs[plan.result]
        return None

    def special(self, op: str, hop: Any, args: list[Any], st: dict[str, Any]) -> Any:
        if op == "tread":
            try:
                return st[hop.name]
            except KeyError:
                raise DMLRuntimeError(f"variable '{hop.name}' is not defined here (assigned only on some paths?)",
                                      hop.span) from None
        if op == "get":
            v = args[0]
            i = hop.params.get("index", 0)
            if not isinstance(v, tuple):
                if i == 0:
                    return v
                raise DMLRuntimeError("call did not return multiple values", hop.span)
            if i >= len(v):
                raise DMLRuntimeError(f"call returned {len(v)} values, value {i + 1} requested", hop.span)
            return v[i]
        if op == "fcall":
            return self.call_function(hop.params["fname"], args, hop.params["argnames"], hop)
        if op == "print":
            if len(args) == 0:
                s = ""
            elif len(args) == 1:
                s = dml_str(args[0])
            else:
                if not isinstance(args[0], str):
                    raise DMLRuntimeError("print with several arguments needs a format string first", hop.span)
                s = java_format(args[0], list(args[1:]))
            self.out.write(s + "\n")
            return None
        if op == "stop":
            raise DMLStop(dml_str(args[0]) if args else "", hop.span)
        if op == "assert":
            if not _to_bool(args[0], "assert condition"):
                raise DMLRuntimeError("assertion failed", hop.span)
            return None
        if op == "toString":
            return bind_args("toString", hop.params["slots"], to_string)(*args)
        if op == "write":
            # deferred: IO (~15 ms, pandas later), only for scripts that write
            from lafuse.runtime.io import write_value

            kw = dict(zip(hop.params["slots"], args))
            target = kw.pop("target")
            if isinstance(target, Blocked):  # (one no collect brought here: the file is the local write's)
                target = self.compiler.backends[DASK].collect(target)
            write_value(target, str(kw.pop("file")), kw)
            return None
        if op == "pread":
            # deferred: IO (~15 ms, pandas later), only for scripts that read
            from lafuse.runtime.io import read_value

            kw = dict(zip(hop.params["slots"], args))
            # the sizes it was compiled for: a file changed since then is an error, not a surprise
            return read_value(str(kw.pop("target")), kw, expect=(hop.dt, hop.rows, hop.cols, hop.nnz))
        if op == "time":
            return time.time_ns()
        if op == "list":
            names = list(hop.params.get("slots") or [])
            return ListValue(list(args), names if any(names) else None)
        if op == "lrix":
            return _list_index(args[0], args[1], args[2] if len(args) > 2 else None)
        if op == "llix":
            lst, key, val = args
            if not isinstance(lst, ListValue):
                raise DMLRuntimeError("list element assignment needs a list", hop.span)
            items = list(lst.items)
            i = int(key) - 1 if not isinstance(key, str) else (lst.names or []).index(key)
            if not 0 <= i < len(items):
                raise DMLRuntimeError(f"list index {key} out of bounds [1, {len(items)}]", hop.span)
            items[i] = val
            return ListValue(items, lst.names)
        if op == "as.frame":
            v = args[0]
            if isinstance(v, Frame):
                return v
            if not is_matrix(v):
                return Frame([[v]], ["FP64" if isinstance(v, float) else "STRING"], ["C1"])
            d = to_dense(v)
            return Frame([list(map(float, d[:, j])) for j in range(d.shape[1])], ["FP64"] * d.shape[1],
                         [f"C{j + 1}" for j in range(d.shape[1])])
        if op in ("as.list",):
            v = args[0]
            return v if isinstance(v, ListValue) else ListValue([v])
        if op == "setwd":
            return None
        raise DMLRuntimeError(f"operation '{op}' is not supported", hop.span)

    # ------------------------------------------------------------ functions
    def call_function(self, key: str, args: list[Any], argnames: list[str | None], hop: Any) -> tuple:
        fp = self.compiler.function(key)
        if self.stats is not None:
            self.stats.functions_called += 1
        depth = getattr(self._calls, "depth", 0) + 1
        limit = deepstack.max_call_depth()
        if depth > limit:
            raise DMLRuntimeError(f"recursion deeper than {limit} calls in '{key}'", hop.span)
        self._calls.depth = depth
        try:
            st: dict[str, Any] = {}
            params = fp.params
            # the builder names every argument (hops.builder._bind_args); unnamed ones bind by position
            given = {n if n is not None else params[i].name: a for i, (n, a) in enumerate(zip(argnames, args))}
            for p in params:
                if p.name in given:
                    st[p.name] = _coerce(given[p.name], p, key)
                elif p.default is not None:
                    st[p.name] = _coerce(self.compiler.eval_default(key, p, self), p, key)
                else:
                    raise DMLRuntimeError(f"missing argument '{p.name}' in call of '{key}'", hop.span)
            self.exec_blocks(fp.blocks, st)
            outs = []
            for o in fp.outputs:
                if o.name not in st:
                    raise DMLRuntimeError(f"function '{key}' did not assign its output '{o.name}'", hop.span)
                outs.append(_coerce(st[o.name], o, key))
            return tuple(outs)
        except RecursionError:  # Python's stack ran out below this call (deep expressions at a deep level)
            raise DMLRuntimeError(f"recursion too deep in '{key}': the stack is exhausted at call depth {depth} "
                                  f"(at most {limit} calls fit)", hop.span) from None
        finally:
            self._calls.depth = depth - 1


LIX_DENSIFY_BYTES = 256 * 2**20  # a sparse loop target up to this dense size becomes dense


def _lix_inplace(args: list[Any]) -> Any:
    """Left indexing without a copy of the target, for loops like ``for (i in 1:n) R[i,] = ...``.

    Applies when nothing else can see the target: a dense array owning its buffer (not a view of
    another matrix), referenced only by the symbol table, the register and this call's argument
    list. A small sparse target is densified once (later iterations then update in place), since
    rebuilding CSR per iteration is quadratic. Returns None to fall back to the copying kernel,
    which also produces the error messages."""
    x, y = args[0], args[1]
    try:
        r0, r1, c0, c1 = (int(a) for a in args[2:6])
    except (TypeError, ValueError):
        return None
    m, n = x.shape
    if not (1 <= r0 <= r1 <= m and 1 <= c0 <= c1 <= n):
        return None
    if isinstance(y, np.ndarray):
        if y.shape != (r1 - r0 + 1, c1 - c0 + 1):
            return None
    elif not isinstance(y, (int, float)) or isinstance(y, bool):
        return None
    if type(x) is np.ndarray:
        # refs: symbol table, register, args list, getrefcount's own argument, local x
        if not x.flags.writeable or sys.getrefcount(x) > 5 or not _owns_buffer(x):
            return None
        out = x
    elif is_matrix(x) and 8.0 * m * n <= LIX_DENSIFY_BYTES:
        out = x.toarray()
    else:
        return None
    out[r0 - 1:r1, c0 - 1:c1] = y
    fin = sys.modules.get("lafuse.codegen.finite")
    if fin is not None:  # fused kernels memoize "holds no NaN/Inf" per array object
        fin.invalidate(out)
    return out


def _owns_buffer(x: np.ndarray) -> bool:
    """True if no other live array can see x's memory: x owns it, or x is a full-size reshape of
    arrays that nothing but their child references (np.load and reshape results look like that)."""
    b = x.base
    while b is not None:
        # refs: the child's .base, the local b, getrefcount's argument
        if not isinstance(b, np.ndarray) or b.size != x.size or sys.getrefcount(b) > 3:
            return False
        b = b.base
    return True


def _list_index(lst: Any, key: Any, hi: Any = None) -> ListValue:
    """``L[i]``, ``L["name"]`` and ``L[i:j]`` all return a list, as in SystemDS; as.scalar and
    as.matrix unwrap a one-element list."""
    if not isinstance(lst, ListValue):
        raise DMLRuntimeError(f"list indexing needs a list, got {type(lst).__name__}")
    n = len(lst.items)
    if isinstance(key, str):
        if not lst.names or key not in lst.names:
            raise DMLRuntimeError(f"list has no element named '{key}'")
        i = lst.names.index(key)
        return ListValue([lst.items[i]], [key])
    lo = int(_to_num(key, "list index"))
    up = lo if hi is None else int(_to_num(hi, "list index"))
    if lo < 1 or up > n or lo > up:
        raise DMLRuntimeError(f"list index [{lo}:{up}] out of bounds for a list of length {n}")
    names = lst.names[lo - 1:up] if lst.names else None
    return ListValue(lst.items[lo - 1:up], names)


def _check_metadata(hop: Any, v: Any) -> None:
    """Predicted metadata must match runtime metadata: a wrong compile-time size could feed a
    size-based rewrite and silently change results."""
    if hop.dt != "matrix" or not is_matrix(v):
        return
    r, c = v.shape
    if (hop.rows >= 0 and hop.rows != r) or (hop.cols >= 0 and hop.cols != c):
        raise AssertionError(f"HOP {hop!r} predicted {hop.rows}x{hop.cols}, runtime value is {r}x{c} "
                             f"(line {hop.span.line})")
    if hop.nnz >= 0:
        z = nnz(v)
        if z != hop.nnz:
            raise AssertionError(f"HOP {hop!r} predicted nnz={hop.nnz}, runtime nnz={z} (line {hop.span.line})")
        # the format the plan predicted (plan.build: the default rule, or a convert's) is the one produced
        fmt = hop.params.get("format") or default_format(r, c, hop.nnz)
        got = v.format if is_sparse(v) else DENSE
        if fmt != got:
            raise AssertionError(f"HOP {hop!r} predicted format {fmt}, runtime value is "
                                 f"{got.upper() if got != DENSE else got} (line {hop.span.line})")


def _coerce(v: Any, p: Any, fname: str) -> Any:
    """Typed signatures are followed at run time: an INT passed to a Double parameter widens."""
    if p.type_name == "scalar":
        if any_matrix(v):
            raise DMLRuntimeError(f"argument '{p.name}' of '{fname}' must be a scalar, got a matrix")
        if p.value_type == "double" and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if p.value_type == "int" and isinstance(v, float) and v.is_integer():
            return int(v)
    elif p.type_name == "matrix" and not any_matrix(v):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return np.full((1, 1), float(v))
        raise DMLRuntimeError(f"argument '{p.name}' of '{fname}' must be a matrix, got {type(v).__name__}")
    return v
