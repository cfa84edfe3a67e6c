"""AST -> program of statement blocks with HOP DAGs, with validation and type inference.

The builder walks statements in order, keeping a compile-time environment (variable -> data type,
value type, dims) across blocks. Consecutive assignments and calls form one generic block whose
DAG reads block inputs through TReads and publishes every assigned variable through a TWrite;
liveness later drops the TWrites nobody reads (dead code, dml-semantics §2).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

from lafuse.errors import DMLSizeError, DMLValidationError, Span
from lafuse.hops import parfor_deps, sizes
from lafuse.hops.files import ANY, FileTracker, file_key, read_meta
from lafuse.hops.hop import BOOLEAN, DOUBLE, FRAME, INT, LIST, MATRIX, SCALAR, STRING, UNKNOWN, Hop, literal
from lafuse.hops.program import (
    Block,
    Dag,
    ForBlock,
    FunctionProgram,
    GenericBlock,
    IfBlock,
    Program,
    WhileBlock,
)
from lafuse.hops.resolver import FunctionResolver, VarInfo, builtin_out_type
from lafuse.lang import ast as A
from lafuse.lang.builtins import REQUIRED, SPECS, STATEMENT_ONLY, BuiltinSpec

CONSTANTS = {"NaN": math.nan, "Inf": math.inf, "pi": math.pi}
ARITH = {"+", "-", "*", "/", "^", "%%", "%/%"}
COMPARE = {"<", "<=", ">", ">=", "==", "!="}
LOGICAL = {"&", "|", "&&", "||"}


class Builder:
    def __init__(self, resolver: FunctionResolver, nvargs: dict[str, Any] | None = None,
                 pos_args: list[Any] | None = None, path: str = "<string>"):
        self.resolver = resolver
        self.nvargs = nvargs or {}
        self.pos_args = pos_args or []
        self.path = path
        self.ns = ""  # namespace of the function being built
        self.env: dict[str, VarInfo] = {}
        self._var_map: dict[str, Hop] = {}
        self._treads: dict[str, Hop] = {}
        self._roots: list[Hop] = []
        self._assigned: list[str] = []
        self._dag_reads: list[Hop] = []  # read() HOPs of the current DAG, in statement order
        self.files = FileTracker()

    # ------------------------------------------------------------ programs
    def build_program(self, script: A.Script) -> Program:
        self.resolver.add_script(script, "")
        for imp in script.imports:
            self.resolver.load_namespace(imp, os.path.dirname(os.path.abspath(script.path)), "")
        self.files.prepare(script, self.resolver.functions, self.nvargs, self.pos_args)
        blocks = self.build_blocks([s for s in script.statements if not isinstance(s, A.Import)])
        funcs = {k: FunctionProgram(f.name, f.params, f.outputs, [], f.file, f.span,
                                    k.split("::")[0] if "::" in k else "")
                 for k, f in self.resolver.functions.items()}
        return Program(blocks, funcs, script.path)

    def build_function(self, key: str, fdef: A.FunctionDef,
                       known: dict[str, VarInfo] | None = None) -> list[Block]:
        """Build a function body; ``known`` carries parameter sizes that every call site agrees on (IPA)."""
        saved_env, saved_ns = self.env, self.ns
        self.files.fn_depth += 1
        self.env = {}
        self.ns = key.split("::")[0] if "::" in key else ""
        for p in fdef.params:
            self.env[p.name] = VarInfo(p.type_name, p.value_type if p.type_name == SCALAR else DOUBLE)
            info = (known or {}).get(p.name)
            if info is not None and info.dt == self.env[p.name].dt:
                # sizes from the call sites, value type from the signature (an INT argument
                # passed to a Double parameter is widened)
                self.env[p.name] = replace(info, vt=self.env[p.name].vt)
        try:
            blocks = self.build_blocks(fdef.body)
        except DMLSizeError:
            if not known:
                raise
            self.env, self.ns = saved_env, saved_ns
            return self.build_function(key, fdef, None)
        finally:
            self.env, self.ns = saved_env, saved_ns
            self.files.fn_depth -= 1
        return blocks

    def build_blocks(self, stmts: list[A.Stmt]) -> list[Block]:
        blocks: list[Block] = []
        run: list[A.Stmt] = []
        for s in stmts:
            if isinstance(s, (A.Assign, A.MultiAssign, A.CallStmt)):
                if _calls_time(s):
                    # time() reads the clock: it must run after everything before it and before
                    # everything after it, so it gets a block of its own (a DAG has no order)
                    if run:
                        blocks.append(self._generic(run))
                    blocks.append(self._generic([s]))
                    run = []
                    continue
                run.append(s)
                continue
            if run:
                blocks.append(self._generic(run))
                run = []
            blocks.append(self._control(s))
        if run:
            blocks.append(self._generic(run))
        return blocks

    # ------------------------------------------------------------ blocks
    def _begin_dag(self) -> None:
        self._var_map, self._treads, self._roots, self._assigned, self._dag_reads = {}, {}, [], [], []

    def _generic(self, stmts: list[A.Stmt]) -> GenericBlock:
        self._begin_dag()
        for s in stmts:
            self._statement(s)
        roots = list(self._roots)
        for name in self._assigned:
            h = self._var_map[name]
            tw = Hop("twrite", "data", [h], h.dt, h.vt, h.span, name=name)
            sizes.infer(tw)
            roots.append(tw)
            self.env[name] = VarInfo(h.dt, h.vt, h.rows, h.cols, h.nnz)
        first, last = stmts[0].span, stmts[-1].span
        span = Span(first.file, first.line, first.col, max(last.end_line, last.line), last.end_col)
        blk = GenericBlock(dag=Dag(roots), span=span)
        blk.requires_recompile = any(h.dt == MATRIX and not h.dims_known for h in blk.dag.hops())
        return blk

    def _pred_dag(self, e: A.Expr) -> Dag:
        self._begin_dag()
        return Dag([self.expr(e)])

    def _control(self, s: A.Stmt) -> Block:
        if isinstance(s, A.If):
            pred = self._pred_dag(s.pred)
            self._check_predicate(pred.roots[0], s.pred.span)
            before = dict(self.env)
            files_before = self.files.snapshot()
            then_blocks = self.build_blocks(s.then_body)
            env_then, files_then = self.env, self.files.snapshot()
            self.env = dict(before)
            self.files.restore(files_before)
            else_blocks = self.build_blocks(s.else_body)
            self.env = _merge_env(env_then, self.env)
            self.files.join(files_then)
            return IfBlock(pred=pred, then_blocks=then_blocks, else_blocks=else_blocks, span=s.span)
        if isinstance(s, A.While):
            files_top = self.files.enter_loop(s.body)
            before = self._stable_loop_env(s.body, None)
            self.files.restore(files_top)
            pred = self._pred_dag(s.pred)
            self._check_predicate(pred.roots[0], s.pred.span)
            body = self.build_blocks(s.body)
            self.env = _merge_env(before, self.env)
            self.files.restore(files_top)
            return WhileBlock(pred=pred, body=body, span=s.span)
        if isinstance(s, A.For):
            if s.parallel:
                parfor_deps.check(s, {k: v.dt for k, v in self.env.items()})
            start = self._pred_dag(s.start)
            stop = self._pred_dag(s.stop)
            incr = self._pred_dag(s.incr) if s.incr is not None else None
            for d, e in ((start, s.start), (stop, s.stop), (incr, s.incr)):
                if d is not None and d.roots[0].dt not in (SCALAR, UNKNOWN):
                    raise DMLValidationError("for loop bounds must be scalars", e.span if e else s.span)
            files_top = self.files.enter_loop(s.body)
            before = self._stable_loop_env(s.body, s.var)
            self.files.restore(files_top)
            body = self.build_blocks(s.body)
            self.env = _merge_env(before, self.env)
            self.files.restore(files_top)
            opts = {}
            for k, v in s.options.items():
                opts[k] = v.name if isinstance(v, A.Var) else getattr(v, "value", None)
            return ForBlock(var=s.var, start=start, stop=stop, incr=incr, body=body, parallel=s.parallel,
                            options=opts, span=s.span)
        raise DMLValidationError(f"unsupported statement {type(s).__name__}", s.span)

    def _stable_loop_env(self, body: list[A.Stmt], loop_var: str | None) -> dict[str, VarInfo]:
        """The environment at the top of every iteration: types and sizes that a pass over the body
        does not change are kept, the others are merged (unknown sizes). Leaves it in self.env."""
        cur = dict(self.env)
        if loop_var is not None:
            cur[loop_var] = VarInfo(SCALAR, INT)
        if _assigned_names(body) & set(cur):
            saved = (self._var_map, self._treads, self._roots, self._assigned, self._dag_reads)
            for _ in range(4):
                self.env = dict(cur)
                self.build_blocks(body)
                new = _merge_env(cur, {k: v for k, v in self.env.items() if k in cur})
                if new == cur:
                    break
                cur = new
            self._var_map, self._treads, self._roots, self._assigned, self._dag_reads = saved
        self.env = dict(cur)
        return cur

    def _check_predicate(self, h: Hop, span: Span) -> None:
        if h.dt == SCALAR and h.vt == STRING:
            raise DMLValidationError("a predicate must be a boolean or numeric scalar, not a string", span)

    # ------------------------------------------------------------ statements
    def _assign_var(self, name: str, h: Hop) -> None:
        self._var_map[name] = h
        if name in self._assigned:
            self._assigned.remove(name)
        self._assigned.append(name)

    def _statement(self, s: A.Stmt) -> None:
        if isinstance(s, A.Assign):
            t = s.target
            value = self.expr(s.expr)
            if value.dt == UNKNOWN and value.op == "none":
                raise DMLValidationError(f"'{getattr(s.expr, 'name', '?')}' does not return a value", s.expr.span)
            if s.accumulate:
                if t.indexed:
                    cur = self._index_hop(A.Index(t.name, t.rows, t.cols, span=t.span))
                else:
                    cur = self._read_var(t.name, t.span)
                value = self._binary("+", cur, value, s.span)
            if t.list_key is not None and self._read_var(t.name, t.span).dt == MATRIX:
                # a single index on a matrix selects a row: V[2] means V[2,]
                t = A.Target(t.name, A.Range(t.list_key, None, span=t.list_key.span), None, indexed=True,
                             span=t.span)
            if t.list_key is not None:
                base = self._read_var(t.name, t.span)
                key = self.expr(t.list_key)
                h = Hop("llix", "lix", [base, key, value], LIST, UNKNOWN, s.span)
                self._assign_var(t.name, h)
            elif t.indexed:
                base = self._read_var(t.name, t.span)
                if base.dt == SCALAR:
                    raise DMLValidationError(f"cannot index into scalar variable '{t.name}'", t.span)
                if value.dt not in (SCALAR, MATRIX, UNKNOWN):
                    raise DMLValidationError("left indexing needs a matrix or scalar on the right", s.expr.span)
                bounds, flags = self._bounds(base, t.rows, t.cols)
                h = Hop("lix", "lix", [base, value, *bounds], MATRIX, DOUBLE, s.span, params=flags)
                self._check_lix(h, s.span)
                sizes.infer(h)
                self._assign_var(t.name, h)
            else:
                if value.op == "ifelse" and value.dt == SCALAR:
                    value.params["assigned"] = True  # assignment fixes the value type (see lower)
                self._assign_var(t.name, value)
        elif isinstance(s, A.MultiAssign):
            call = s.expr
            if not isinstance(call, A.Call):
                raise DMLValidationError("the right side of a multi-assignment must be a function call", s.expr.span)
            src = self._call(call, nout=len(s.targets))
            outs = src.params.get("out_types") or [(UNKNOWN, UNKNOWN)] * len(s.targets)
            if len(outs) < len(s.targets):
                raise DMLValidationError(
                    f"'{call.name}' returns {len(outs)} values but {len(s.targets)} are assigned", s.span)
            for i, t in enumerate(s.targets):
                if t.indexed or t.list_key is not None:
                    raise DMLValidationError("multi-assignment targets must be plain variables", t.span)
                dt, vt = outs[i]
                x = Hop("get", "extract", [src], dt, vt, t.span, params={"index": i})
                sizes.infer(x)
                self._assign_var(t.name, x)
        elif isinstance(s, A.CallStmt):
            h = self._call(s.call, statement=True)
            self._roots.append(h)
        else:  # pragma: no cover - grammar prevents it
            raise DMLValidationError(f"unexpected statement {type(s).__name__}", s.span)

    def _check_lix(self, h: Hop, span: Span) -> None:
        base, value = h.inputs[0], h.inputs[1]
        if value.dt != MATRIX or not value.dims_known:
            return
        r = sizes.range_len(h.inputs[2], h.inputs[3], h.params.get("row_single"), None)
        c = sizes.range_len(h.inputs[4], h.inputs[5], h.params.get("col_single"), None)
        if h.params.get("row_all"):
            r = base.rows
        if h.params.get("col_all"):
            c = base.cols
        if r >= 0 and c >= 0 and (r, c) != (value.rows, value.cols):
            raise DMLValidationError(
                f"left indexing: the target range is {r}x{c} but the right side is "
                f"{value.rows}x{value.cols}", span)

    # ------------------------------------------------------------ expressions
    def _read_var(self, name: str, span: Span) -> Hop:
        if name in self._var_map:
            return self._var_map[name]
        if name in self._treads:
            return self._treads[name]
        info = self.env.get(name)
        if info is None:
            if name in CONSTANTS:
                return literal(CONSTANTS[name], span)
            raise DMLValidationError(f"undefined variable '{name}'", span)
        h = Hop("tread", "data", [], info.dt, info.vt, span, name=name)
        h.rows, h.cols, h.nnz = info.rows, info.cols, info.nnz
        if info.dt == SCALAR:
            h.rows = h.cols = 0
        sizes.infer(h)
        self._treads[name] = h
        return h

    def expr(self, e: A.Expr) -> Hop:
        if isinstance(e, A.Num):
            return literal(e.value, e.span)
        if isinstance(e, A.Str):
            return literal(e.value, e.span)
        if isinstance(e, A.Bool):
            return literal(e.value, e.span)
        if isinstance(e, A.Var):
            return self._read_var(e.name, e.span)
        if isinstance(e, A.CmdArg):
            return literal(self._cmd_value(e), e.span)
        if isinstance(e, A.BinOp):
            return self._binary(e.op, self.expr(e.left), self.expr(e.right), e.span)
        if isinstance(e, A.UnOp):
            x = self.expr(e.operand)
            if e.op == "+":
                if x.dt == SCALAR and x.vt in (STRING, BOOLEAN):
                    raise DMLValidationError(f"unary '+' cannot be applied to a {x.vt}", e.span)
                return x
            op = "u-" if e.op == "-" else "!"
            if op == "u-" and x.dt == SCALAR and x.vt in (STRING, BOOLEAN):
                raise DMLValidationError(f"unary '-' cannot be applied to a {x.vt}", e.span)
            if op == "!" and x.dt == SCALAR and x.vt == STRING:
                raise DMLValidationError("'!' cannot be applied to a string", e.span)
            if op == "u-" and x.is_literal and isinstance(x.value, (int, float)):
                return literal(-x.value, e.span)
            vt = DOUBLE if x.dt == MATRIX else (BOOLEAN if op == "!" else x.vt)
            h = Hop(op, "unary", [x], x.dt, vt, e.span)
            sizes.infer(h)
            return h
        if isinstance(e, A.Index):
            return self._index_hop(e)
        if isinstance(e, A.ListIndex):
            base = self._read_var(e.name, e.span)
            key = self.expr(e.key)
            if base.dt == MATRIX:  # V[i] on a matrix is row i
                return self._index_hop(A.Index(e.name, A.Range(e.key, e.hi, span=e.key.span), None, span=e.span))
            if base.dt == LIST or base.dt == UNKNOWN:
                ins = [base, key] + ([self.expr(e.hi)] if e.hi is not None else [])
                return Hop("lrix", "rix", ins, LIST, UNKNOWN, e.span)
            raise DMLValidationError(
                f"'{e.name}' needs two indices: {e.name}[rows, cols] (single index is for lists)", e.span)
        if isinstance(e, A.Call):
            return self._call(e)
        raise DMLValidationError(f"unsupported expression {type(e).__name__}", e.span)

    def _cmd_value(self, e: A.CmdArg) -> Any:
        if e.name.isdigit():
            i = int(e.name) - 1
            if 0 <= i < len(self.pos_args):
                return self.pos_args[i]
            raise DMLValidationError(f"missing positional argument ${e.name} (pass it with --args)", e.span)
        if e.name in self.nvargs:
            return self.nvargs[e.name]
        raise DMLValidationError(
            f"missing command-line argument ${e.name} (pass it with --nvargs {e.name}=..., or use ifdef)", e.span)

    def _bounds(self, base: Hop, rows: A.Range | None, cols: A.Range | None) -> tuple[list[Hop], dict]:
        flags: dict[str, Any] = {}
        out: list[Hop] = []
        for dim, rng in (("row", rows), ("col", cols)):
            if rng is None:
                flags[f"{dim}_all"] = True
                lo = literal(1)
                hi = Hop("nrow" if dim == "row" else "ncol", "unary", [base], SCALAR, INT, base.span)
                sizes.infer(hi)
            else:
                lo = self.expr(rng.lo)
                if rng.hi is None:
                    hi = lo
                    flags[f"{dim}_single"] = True
                else:
                    hi = self.expr(rng.hi)
                for b, sub in ((lo, rng.lo), (hi, rng.hi or rng.lo)):
                    if b.dt not in (SCALAR, UNKNOWN) or b.vt == STRING:
                        raise DMLValidationError("index bounds must be numeric scalars", sub.span)
            out += [lo, hi]
        return out, flags

    def _index_hop(self, e: A.Index) -> Hop:
        base = self._read_var(e.name, e.span)
        if base.dt == SCALAR:
            raise DMLValidationError(f"cannot index into scalar variable '{e.name}'", e.span)
        if base.dt == LIST:
            raise DMLValidationError(f"list '{e.name}' takes a single index: {e.name}[i]", e.span)
        bounds, flags = self._bounds(base, e.rows, e.cols)
        dt = FRAME if base.dt == FRAME else MATRIX
        h = Hop("rix", "rix", [base, *bounds], dt, DOUBLE, e.span, params=flags)
        sizes.infer(h)
        # bounds known at compile time must lie inside known dims; the caret goes under the index as
        # written here, not where its value came from (i = 4 ... X[i, 1] points at the i of X[i, 1])
        written = [x for r in (e.rows, e.cols) for x in ((r.lo, r.hi or r.lo) if r else (None, None))]
        for k, bh in enumerate(bounds):
            n, dim = (base.rows, "row") if k < 2 else (base.cols, "column")
            v = sizes.scalar_value(bh)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    (not math.isfinite(v) or int(v) < 1 or (n >= 0 and int(v) > n)):  # (NaN, Inf: never inside)
                src = written[k]
                at = src.span if src is not None and src.span.line > 0 else e.span  # the offending index
                # deferred: only an error if the indexing survives dead-code removal (dml-semantics §2)
                shown = v if math.isfinite(v) else "NaN" if v != v else "Infinity" if v > 0 else "-Infinity"
                h.params.setdefault("error", DMLValidationError(
                    f"{dim} index {shown} is out of bounds for '{e.name}' with {n if n >= 0 else '?'} {dim}s", at))
        return h

    # ---- operators
    def _binary(self, op: str, a: Hop, b: Hop, span: Span) -> Hop:
        op = {"&&": "&", "||": "|"}.get(op, op)
        for x in (a, b):
            if x.dt in (LIST, FRAME) and op != "+":
                raise DMLValidationError(f"operator '{op}' is not defined for a {x.dt}", span)
            if x.dt == UNKNOWN and x.op == "none":
                raise DMLValidationError("a call that returns nothing cannot be an operand", span)
        if op == "%*%":
            if a.dt != MATRIX or b.dt != MATRIX:
                if a.dt == SCALAR or b.dt == SCALAR:
                    raise DMLValidationError("matrix multiplication '%*%' needs two matrices, not a scalar", span)
            if a.cols >= 0 and b.rows >= 0 and a.cols != b.rows:
                raise DMLSizeError(
                    f"matrix multiplication dimension mismatch: {a.rows}x{a.cols} %*% {b.rows}x{b.cols}", span)
            h = Hop("%*%", "matmult", [a, b], MATRIX, DOUBLE, span)
            sizes.infer(h)
            return h
        if a.dt == MATRIX or b.dt == MATRIX:
            for x in (a, b):
                if x.dt == SCALAR and x.vt == STRING:
                    raise DMLValidationError(f"operator '{op}' between a matrix and a string", span)
            if a.dt == MATRIX and b.dt == MATRIX:
                self._check_broadcast(op, a, b, span)
            h = Hop(op, "binary", [a, b], MATRIX, DOUBLE, span)
            sizes.infer(h)
            return h
        # scalar-scalar typing (SystemDS promotion rules, dml-semantics §4)
        if op in ARITH:
            if STRING in (a.vt, b.vt):
                if op != "+":
                    raise DMLValidationError(f"operator '{op}' is not defined for strings", span)
                vt = STRING
            elif BOOLEAN in (a.vt, b.vt):
                raise DMLValidationError(
                    f"arithmetic '{op}' on a BOOLEAN is not allowed (use as.integer() first)", span)
            elif op in ("/", "^"):
                vt = DOUBLE
            elif a.vt == INT and b.vt == INT:
                vt = INT
            elif UNKNOWN in (a.vt, b.vt):
                vt = UNKNOWN
            else:
                vt = DOUBLE
        else:
            vt = BOOLEAN
        dt = SCALAR if a.dt == SCALAR and b.dt == SCALAR else UNKNOWN
        h = Hop(op, "binary", [a, b], dt, vt, span)
        sizes.infer(h)
        return h

    def _check_broadcast(self, op: str, a: Hop, b: Hop, span: Span) -> None:
        if not (a.dims_known and b.dims_known):
            return
        ok = (a.rows == b.rows and a.cols == b.cols) or (b.rows == 1 and b.cols == 1) or \
            (a.rows == 1 and a.cols == 1) or (b.rows == a.rows and b.cols == 1) or \
            (b.rows == 1 and b.cols == a.cols) or (a.rows == b.rows and a.cols == 1) or \
            (a.rows == 1 and a.cols == b.cols)
        if a.rows == 1 and b.cols == 1 and a.cols != b.cols and not (a.cols == 1 or b.rows == 1):
            ok = False
        if not ok or ((a.cols == 1 and b.rows == 1 and a.rows != 1 and b.cols != 1)
                      or (a.rows == 1 and b.cols == 1 and a.cols != 1 and b.rows != 1)):
            raise DMLSizeError(
                f"element-wise '{op}' dimension mismatch: {a.rows}x{a.cols} vs {b.rows}x{b.cols}", span)

    # ---- calls
    def _call(self, call: A.Call, nout: int = 1, statement: bool = False) -> Hop:
        name = call.name
        if name == "ifdef":
            if len(call.args) != 2 or not isinstance(call.args[0].value, A.CmdArg):
                raise DMLValidationError("ifdef needs a command-line argument and a default: ifdef($x, 1)", call.span)
            cmd = call.args[0].value
            if cmd.name in self.nvargs:
                return literal(self.nvargs[cmd.name], cmd.span)
            if cmd.name.isdigit() and 0 < int(cmd.name) <= len(self.pos_args):
                return literal(self.pos_args[int(cmd.name) - 1], cmd.span)
            return self.expr(call.args[1].value)
        found = self.resolver.lookup(name, self.ns)
        if found is not None and (name not in SPECS or "::" in name or found[0] in self.resolver.functions):
            return self._fcall(found[0], found[1], call, nout)
        spec = SPECS.get(name)
        if spec is None:
            if name == "setwd":
                return literal(None)
            if "::" not in name:
                first = call.args[0].value if call.args else None
                found = self.resolver.dispatch_builtin(name, self._peek_dt(first) if first else UNKNOWN)
                if found is not None:
                    return self._fcall(found[0], found[1], call, nout)
            raise DMLValidationError(f"undefined function '{name}'", call.span)
        if name in STATEMENT_ONLY and not statement:
            raise DMLValidationError(f"'{name}' does not return a value", call.span)
        return self._builtin(spec, call, nout)

    def _peek_dt(self, e: A.Expr) -> str:
        """The data type of an expression without building it (building twice would duplicate
        function calls): enough to dispatch m_/s_/f_ builtin variants."""
        if isinstance(e, (A.Num, A.Str, A.Bool, A.CmdArg)):
            return SCALAR
        if isinstance(e, A.Var):
            h = self._var_map.get(e.name) or self._treads.get(e.name)
            if h is not None:
                return h.dt
            info = self.env.get(e.name)
            return info.dt if info else (SCALAR if e.name in CONSTANTS else UNKNOWN)
        if isinstance(e, A.Index):
            return MATRIX
        if isinstance(e, A.UnOp):
            return self._peek_dt(e.operand)
        if isinstance(e, A.BinOp):
            dts = {self._peek_dt(e.left), self._peek_dt(e.right)}
            return MATRIX if MATRIX in dts else (SCALAR if dts == {SCALAR} else UNKNOWN)
        if isinstance(e, A.Call):
            spec = SPECS.get(e.name)
            if e.name in ("as.scalar", "castAsScalar"):
                return SCALAR
            if spec is not None:
                if spec.out == "matrix":
                    return MATRIX
                if spec.out.startswith("scalar:"):
                    return SCALAR
                if spec.out == "frame":
                    return FRAME
                args = [self._peek_dt(a.value) for a in e.args]
                if spec.out in ("same", "same_double", "same_bool", "agg"):
                    if MATRIX in args and not (spec.out == "agg" and len(args) == 1):
                        return MATRIX
                    return SCALAR
            return UNKNOWN
        return UNKNOWN

    def _fcall(self, key: str, fdef: A.FunctionDef, call: A.Call, nout: int) -> Hop:
        names = self._bind_args(fdef, call)
        ins = [self.expr(a.value) for a in call.args]
        params = {p.name: p for p in fdef.params}
        for a, h, nm in zip(call.args, ins, names):
            p = params[nm]
            if p.type_name == MATRIX and h.dt == SCALAR:
                raise DMLValidationError(
                    f"argument '{p.name}' of '{call.name}' must be a matrix, got {_a(h.vt)} scalar", a.value.span)
            if p.type_name == SCALAR and h.dt == MATRIX:
                raise DMLValidationError(
                    f"argument '{p.name}' of '{call.name}' must be a scalar, got a matrix", a.value.span)
        if nout > len(fdef.outputs) and nout > 1:
            raise DMLValidationError(
                f"function '{call.name}' returns {len(fdef.outputs)} values but {nout} are assigned", call.span)
        outs = [(o.type_name, o.value_type if o.type_name == SCALAR else DOUBLE) for o in fdef.outputs]
        h = Hop("fcall", "funcall", ins, UNKNOWN, UNKNOWN, call.span,
                params={"fname": key, "argnames": names, "out_types": outs,
                        "nout": len(outs)})
        # calls always run (they may print or stop), even when their results are dead
        self._roots.append(h)
        if nout == 1 and outs:
            x = Hop("get", "extract", [h], outs[0][0], outs[0][1], call.span, params={"index": 0})
            sizes.infer(x)
            return x
        return h

    def _bind_args(self, fdef: A.FunctionDef, call: A.Call) -> list[str]:
        """The parameter each argument of a user-function call binds, as SystemDS 3.4 binds them
        (StatementBlock.rewriteFunctionCallStatements): the unnamed argument at position i binds the
        i-th parameter, wherever named ones stand (f(A, shift=1, scale=0.5), f(A=A, 0.5, 2)), a
        named one binds its name; a parameter bound twice is an error. SystemDS takes such mixed
        calls only for the functions it inlines (one block of statements, no control flow) and
        rejects them for others; lafuse takes them for every function."""
        pnames = [p.name for p in fdef.params]
        names: list[str] = []
        how: dict[str, str] = {}
        for i, a in enumerate(call.args):
            if a.name is None:
                if i >= len(pnames):
                    raise DMLValidationError(
                        f"function '{call.name}' takes {len(pnames)} argument{'' if len(pnames) == 1 else 's'} "
                        f"but {len(call.args)} were given", a.value.span)
                nm, this = pnames[i], f"by position (argument {i + 1})"
            else:
                if a.name not in pnames:
                    raise DMLValidationError(f"function '{call.name}' has no parameter '{a.name}'", a.span)
                nm, this = a.name, "by name"
            if nm in how:
                twice = "named twice" if how[nm] == this else f"given twice: {how[nm]} and {this}"
                raise DMLValidationError(f"parameter '{nm}' of '{call.name}' is {twice}",
                                         a.span if a.name is not None else a.value.span)
            how[nm] = this
            names.append(nm)
        missing = [p.name for p in fdef.params if p.default is None and p.name not in how]
        if missing:
            raise DMLValidationError(
                f"call of '{call.name}' is missing required argument(s): {', '.join(missing)}", call.span)
        return names

    def _normalize(self, spec: BuiltinSpec, call: A.Call) -> tuple[list[str], list[A.Expr]]:
        pos = [a for a in call.args if a.name is None]
        named = [a for a in call.args if a.name is not None]
        if spec.varargs and spec.name in ("print", "cbind", "rbind", "append", "min", "max"):
            if named:
                raise DMLValidationError(f"'{spec.name}' takes no named arguments", named[0].span)
            if not pos and spec.name != "print":
                raise DMLValidationError(f"'{spec.name}' needs at least one argument", call.span)
            return [f"arg{i}" for i in range(len(pos))], [a.value for a in pos]
        if spec.name == "list":
            return [a.name or "" for a in call.args], [a.value for a in call.args]
        pnames = spec.param_names
        # positional forms whose meaning depends on the count (SystemDS): table(A, B, rows, cols)
        # and quantile(X, W, p)
        if spec.name == "table" and len(pos) == 4 and not named:
            pnames = ("target", "target2", "rows", "cols")
        elif spec.name == "quantile" and len(pos) == 3 and not named:
            pnames = ("target", "weights", "p")
        if len(pos) > len(pnames):
            raise DMLValidationError(
                f"'{spec.name}' takes at most {len(pnames)} argument{'' if len(pnames) == 1 else 's'} "
                f"but {len(pos)} were given", pos[len(pnames)].value.span)
        slots = list(pnames[: len(pos)])
        exprs = [a.value for a in pos]
        for a in named:
            nm = a.name
            # SystemDS accepts a few alternative spellings of the main input
            if nm not in pnames and nm in ("X", "A", "x", "input") and "target" in pnames:
                nm = "target"
            if nm not in pnames:
                raise DMLValidationError(
                    f"'{spec.name}' has no parameter '{a.name}' (parameters: {', '.join(pnames)})", a.span)
            if nm in slots:
                raise DMLValidationError(f"parameter '{nm}' of '{spec.name}' is given twice", a.span)
            slots.append(nm)
            exprs.append(a.value)
        missing = [p for p, d in spec.params if d is REQUIRED and p not in slots]
        if missing:
            raise DMLValidationError(
                f"'{spec.name}' is missing required argument(s): {', '.join(missing)}", call.span)
        return slots, exprs

    def _builtin(self, spec: BuiltinSpec, call: A.Call, nout: int = 1) -> Hop:
        slots, exprs = self._normalize(spec, call)
        ins = [self.expr(e) for e in exprs]
        for h, e in zip(ins, exprs):
            if h.dt == UNKNOWN and h.op == "none":
                raise DMLValidationError("a call that returns nothing cannot be an argument", e.span)
        name = spec.name
        kind = spec.kind
        params: dict[str, Any] = {"slots": tuple(slots)}
        dt, vt = builtin_out_type(spec, ins)
        op = name
        if name in ("min", "max") and len(ins) >= 2:
            kind = "nary"
        if name == "matrix" and ins and ins[0].dt == MATRIX:
            kind = "reorg"
        if name == "log" and len(ins) == 2:
            kind = "binary"
        if name in STATEMENT_ONLY:
            dt, vt = UNKNOWN, UNKNOWN
        if spec.nout > 1:
            params["out_types"] = [(MATRIX, DOUBLE)] * spec.nout
            if nout == 1:
                raise DMLValidationError(f"'{name}' returns {spec.nout} values: use [a, b] = {name}(...)", call.span)
        if name == "read":
            read_meta(dict(zip(slots, ins)), params, call.span, self.files)
            dt = params.get("data_type", MATRIX)
            vt = params.get("value_type", DOUBLE)
            kind = "data"
            op = "pread"
        h = Hop(op, kind, ins, dt, vt, call.span, params=params)
        if name in STATEMENT_ONLY:
            h.params["side_effect"] = True
        if name == "read":
            h.name = str(ins[0].value) if ins[0].is_literal else None
            h.rows, h.cols, h.nnz = params.get("rows", -1), params.get("cols", -1), params.get("nnz", -1)
            self._dag_reads.append(h)
        if name == "write":
            self._note_write(h)
        self._validate_builtin(h, call)
        sizes.infer(h)
        return h

    def _note_write(self, h: Hop) -> None:
        """A write changes what later reads of its file see (sizes); reads of the file built earlier
        in this DAG must run before it, so they become roots ahead of the write (roots run in order)."""
        args = dict(zip(h.params["slots"], h.inputs))
        f = args.get("file")
        key = file_key(f.value) if f is not None and f.is_literal and isinstance(f.value, str) else ANY
        self.files.note_write(key, args["target"])
        roots = {id(r) for r in self._roots}
        for r in self._dag_reads:
            src = r.inputs[0]
            rkey = file_key(src.value) if src.is_literal and isinstance(src.value, str) else ANY
            if id(r) not in roots and (rkey == key or ANY in (key, rkey)):
                self._roots.append(r)
                roots.add(id(r))

    def _validate_builtin(self, h: Hop, call: A.Call) -> None:
        name = call.name
        ins = h.inputs
        mat_in = {"t", "rowSums", "colSums", "rowMeans", "colMeans", "rowMaxs", "colMaxs", "rowMins",
                  "colMins", "rowIndexMax", "rowIndexMin", "cumsum", "cumprod", "cummin", "cummax",
                  "rev", "diag", "solve", "inv", "cholesky", "eigen", "svd", "trace", "removeEmpty",
                  "order", "table", "nrow", "ncol", "colVars", "rowVars", "colSds", "rowSds",
                  "colProds", "rowProds", "det", "qr", "lu", "median", "var", "sd", "quantile"}
        if name in mat_in and ins and ins[0].dt == SCALAR and name != "table":
            raise DMLValidationError(f"'{name}' needs a matrix argument, got {_a(ins[0].vt)} scalar",
                                     _arg_span(call, 0))
        if name in ("sum", "mean", "prod") and ins and ins[0].dt == SCALAR:
            raise DMLValidationError(f"'{name}' needs a matrix argument, got a scalar", call.span)
        if name == "as.scalar" and ins and ins[0].dt == MATRIX and ins[0].dims_known and (ins[0].rows, ins[0].cols) != (1, 1):
            raise DMLValidationError(
                f"as.scalar needs a 1x1 matrix, got {ins[0].rows}x{ins[0].cols}", _arg_span(call, 0))
        if name == "solve" and len(ins) == 2 and ins[0].dims_known and ins[0].rows != ins[0].cols:
            raise DMLValidationError(f"solve needs a square matrix, got {ins[0].rows}x{ins[0].cols}", call.span)
        if name in ("cbind", "append") and len([i for i in ins if i.dt == MATRIX]) >= 2:
            rs = {i.rows for i in ins if i.dt == MATRIX and i.rows >= 0}
            if len(rs) > 1:
                raise DMLValidationError(f"cbind: inputs have different numbers of rows {sorted(rs)}", call.span)
        if name == "rbind" and len([i for i in ins if i.dt == MATRIX]) >= 2:
            cs = {i.cols for i in ins if i.dt == MATRIX and i.cols >= 0}
            if len(cs) > 1:
                raise DMLValidationError(f"rbind: inputs have different numbers of columns {sorted(cs)}", call.span)
        if name in ("exp", "log", "sqrt", "abs", "round", "ceil", "floor", "sin", "cos", "tan", "sign") and \
                ins and ins[0].dt == SCALAR and ins[0].vt in (STRING,):
            raise DMLValidationError(f"'{name}' needs a number, got a string", call.span)
        if name == "matrix":
            slots = h.params["slots"]
            for s, i in zip(slots, ins):
                if s in ("rows", "cols") and i.dt == MATRIX:
                    raise DMLValidationError(f"matrix(): '{s}' must be a scalar", call.span)
                if s in ("rows", "cols"):
                    v = sizes.scalar_value(i)
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                        raise DMLValidationError(f"matrix(): '{s}' must not be negative, got {v}", call.span)


def _merge_env(a: dict[str, VarInfo], b: dict[str, VarInfo]) -> dict[str, VarInfo]:
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
        elif out[k] != v:
            o = out[k]
            if o.dt == v.dt:
                same = (o.rows, o.cols, o.nnz) == (v.rows, v.cols, v.nnz)
                out[k] = VarInfo(o.dt, o.vt if o.vt == v.vt else UNKNOWN,
                                 o.rows if same else -1, o.cols if same else -1, o.nnz if same else -1)
                if not same and o.rows == v.rows:
                    out[k] = replace(out[k], rows=o.rows)
                if not same and o.cols == v.cols:
                    out[k] = replace(out[k], cols=o.cols)
            else:
                out[k] = VarInfo(UNKNOWN, UNKNOWN)
    return out


def _assigned_names(stmts: list[A.Stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, A.Assign):
            out.add(s.target.name)
        elif isinstance(s, A.MultiAssign):
            out.update(t.name for t in s.targets)
        elif isinstance(s, A.If):
            out |= _assigned_names(s.then_body) | _assigned_names(s.else_body)
        elif isinstance(s, A.While):
            out |= _assigned_names(s.body)
        elif isinstance(s, A.For):
            out |= _assigned_names(s.body) | {s.var}
    return out


def _a(word: str) -> str:
    """'a double' / 'an int': the article for a type name in a message."""
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _arg_span(call: A.Call, i: int) -> Span:
    """The span of a call's i-th argument (the call's own span when absent)."""
    return call.args[i].value.span if i < len(call.args) and call.args[i].value.span.line else call.span


def _calls_time(node: object) -> bool:
    """Whether a statement's expression tree calls time()."""
    if isinstance(node, A.Call) and node.name == "time":
        return True
    if isinstance(node, list):
        return any(_calls_time(x) for x in node)
    if isinstance(node, A.Node):
        return any(_calls_time(v) for v in A.children(node))
    return False
