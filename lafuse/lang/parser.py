"""DML source text -> AST, with spans. One lark LALR parser built once per process."""

from __future__ import annotations

import functools
import os
import re

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, v_args
from lark.tree import Meta

from lafuse.errors import DMLSyntaxError, DMLValidationError, Span
from lafuse.lang import ast as A

_GRAMMAR = os.path.join(os.path.dirname(__file__), "dml.lark")

_VALUE_TYPES = {
    "double": "double", "int": "int", "integer": "int", "boolean": "boolean", "bool": "boolean",
    "string": "string", "unknown": "unknown",
}
_DATA_TYPES = {"matrix": "matrix", "frame": "frame", "list": "list", "tensor": "matrix", "scalar": "scalar"}

_TOKEN_NAMES = {
    "NAME": "identifier", "INT": "integer", "FLOAT": "number", "STRING": "string", "LPAR": "'('",
    "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','",
    "EQUAL": "'='", "SEMICOLON": "';'", "COLON": "':'", "$END": "end of file", "CMPOP": "comparison",
    "ADDOP": "'+' or '-'", "MULOP": "'*' or '/'",
}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    with open(_GRAMMAR, encoding="utf-8") as f:
        grammar = f.read()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", '"': '"', "'": "'"}


def unescape(body: str) -> str:
    """Java-style string escapes, as SystemDS's lexer applies them."""

    def rep(m: re.Match) -> str:
        s = m.group(0)
        if s[1] == "u":
            return chr(int(s[2:], 16))
        return _ESCAPES.get(s[1], s[1])

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", rep, body)


class _ToAst(Transformer):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _span(self, meta: Meta | Token) -> Span:
        if isinstance(meta, Token):
            return Span(self.path, meta.line or 0, meta.column or 0, meta.end_line or 0, meta.end_column or 0)
        if getattr(meta, "empty", True):
            return Span(self.path, 0, 0)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    # ---- program structure
    @v_args(meta=True)
    def start(self, meta, items):
        stmts, funcs, imports = [], {}, []
        for it in items:
            if isinstance(it, A.FunctionDef):
                if it.name in funcs:
                    raise DMLValidationError(f"function '{it.name}' is defined twice", it.span)
                funcs[it.name] = it
            else:
                if isinstance(it, A.Import):
                    imports.append(it)
                stmts.append(it)
        return A.Script(self.path, stmts, funcs, imports, span=self._span(meta))

    @v_args(meta=True)
    def function_def(self, meta, items):
        target, params, outs, body = items[0], [], [], []
        if target.indexed or target.list_key is not None:
            raise DMLSyntaxError("a function name cannot be indexed", target.span)
        for it in items[1:]:
            if isinstance(it, tuple) and it[0] == "param":
                params.append(it[1])
            elif isinstance(it, tuple) and it[0] == "out":
                outs.append(it[1])
            elif isinstance(it, A.Stmt):
                body.append(it)
        return A.FunctionDef(target.name, params, outs, body, self.path, span=target.span)

    @v_args(meta=True)
    def typed_param(self, meta, items):
        (dt, vt), name, default = items
        return ("param", A.Param(dt, vt, str(name), default, span=self._span(name)))

    @v_args(meta=True)
    def typed_out(self, meta, items):
        (dt, vt), name = items
        return ("out", A.Param(dt, vt, str(name), None, span=self._span(name)))

    def ml_type(self, items):
        outer, inner = str(items[0]), items[1]
        lo = outer.lower()
        if inner is not None:
            dt = _DATA_TYPES.get(lo)
            vt = _VALUE_TYPES.get(str(inner).lower())
            if dt is None or vt is None:
                raise DMLSyntaxError(f"unknown type '{outer}[{inner}]'", self._span(items[0]))
            return (dt, vt)
        if lo in _VALUE_TYPES:
            return ("scalar", _VALUE_TYPES[lo])
        if lo in _DATA_TYPES:
            return (_DATA_TYPES[lo], "double" if lo == "matrix" else "unknown")
        raise DMLSyntaxError(f"unknown type '{outer}'", self._span(items[0]))

    # ---- statements
    @v_args(meta=True)
    def assign(self, meta, items):
        return A.Assign(items[0], items[1], span=self._span(meta))

    @v_args(meta=True)
    def acc_assign(self, meta, items):
        return A.Assign(items[0], items[1], accumulate=True, span=self._span(meta))

    @v_args(meta=True)
    def multi_assign(self, meta, items):
        return A.MultiAssign(list(items[:-1]), items[-1], span=self._span(meta))

    @v_args(meta=True)
    def call_stmt(self, meta, items):
        name, args = items
        return A.CallStmt(A.Call(str(name), args or [], span=self._span(meta)), span=self._span(meta))

    @v_args(meta=True)
    def var_target(self, meta, items):
        return A.Target(str(items[0]), span=self._span(items[0]))

    @v_args(meta=True)
    def cmd_target(self, meta, items):
        raise DMLSyntaxError(f"cannot assign to command-line argument '{items[0]}'", self._span(items[0]))

    @v_args(meta=True)
    def idx_target(self, meta, items):
        name, rows, cols = items
        return A.Target(str(name), rows, cols, indexed=True, span=self._span(meta))

    @v_args(meta=True)
    def list_idx_target(self, meta, items):
        name, key = items
        return A.Target(str(name), list_key=key, span=self._span(meta))

    def block(self, items):
        return [it for it in items if isinstance(it, A.Stmt)]

    @v_args(meta=True)
    def if_stmt(self, meta, items):
        pred, then_body, else_body = items
        return A.If(pred, then_body, else_body or [], span=self._span(meta))

    def _loop(self, meta, items, parallel):
        var, pred, *rest = items
        body = rest[-1]
        opts = {r.name: r.value for r in rest[:-1]}
        start, stop, incr = pred
        return A.For(str(var), start, stop, incr, body, parallel, opts, span=self._span(meta))

    @v_args(meta=True)
    def for_stmt(self, meta, items):
        return self._loop(meta, items, False)

    @v_args(meta=True)
    def parfor_stmt(self, meta, items):
        return self._loop(meta, items, True)

    def range_pred(self, items):
        return (items[0], items[1], None)

    def expr_pred(self, items):
        e = items[0]
        if isinstance(e, A.Call) and e.name == "seq" and 2 <= len(e.args) <= 3:
            vals = [a.value for a in e.args]
            return (vals[0], vals[1], vals[2] if len(vals) == 3 else None)
        raise DMLSyntaxError("a for/parfor loop needs 'from:to' or seq(from, to[, incr])", e.span)

    @v_args(meta=True)
    def while_stmt(self, meta, items):
        return A.While(items[0], items[1], span=self._span(meta))

    @v_args(meta=True)
    def import_stmt(self, meta, items):
        return A.Import(unescape(str(items[0])[1:-1]), str(items[1]), span=self._span(meta))

    @v_args(meta=True)
    def setwd_stmt(self, meta, items):
        return A.CallStmt(A.Call("setwd", [A.Arg(None, A.Str(unescape(str(items[0])[1:-1])))]),
                          span=self._span(meta))

    # ---- expressions
    @v_args(meta=True)
    def binop(self, meta, items):
        left, op, right = items
        return A.BinOp(str(op), left, right, span=self._span(op))

    @v_args(meta=True)
    def unop(self, meta, items):
        op, operand = items
        return A.UnOp(str(op), operand, span=self._span(op))

    @v_args(meta=True)
    def var(self, meta, items):
        return A.Var(str(items[0]), span=self._span(items[0]))

    @v_args(meta=True)
    def cmd_arg(self, meta, items):
        return A.CmdArg(str(items[0])[1:], span=self._span(items[0]))

    @v_args(meta=True)
    def index(self, meta, items):
        name, rows, cols = items
        return A.Index(str(name), rows, cols, span=self._span(meta))

    @v_args(meta=True)
    def list_index(self, meta, items):
        name, key = items
        return A.ListIndex(str(name), key, span=self._span(meta))

    @v_args(meta=True)
    def index_range(self, meta, items):
        return A.Range(items[0], items[1], span=self._span(meta))

    @v_args(meta=True)
    def call(self, meta, items):
        name, args = items
        return A.Call(str(name), args or [], span=self._span(meta))

    def args(self, items):
        return [it if isinstance(it, A.Arg) else A.Arg(None, it, span=it.span) for it in items]

    @v_args(meta=True)
    def kwarg(self, meta, items):
        return A.Arg(str(items[0]), items[1], span=self._span(items[0]))

    @v_args(meta=True)
    def int_lit(self, meta, items):
        return A.Num(int(items[0]), span=self._span(items[0]))

    @v_args(meta=True)
    def float_lit(self, meta, items):
        return A.Num(float(items[0]), span=self._span(items[0]))

    @v_args(meta=True)
    def str_lit(self, meta, items):
        return A.Str(unescape(str(items[0])[1:-1]), span=self._span(items[0]))

    @v_args(meta=True)
    def true_lit(self, meta, items):
        return A.Bool(True, span=self._span(meta))

    @v_args(meta=True)
    def false_lit(self, meta, items):
        return A.Bool(False, span=self._span(meta))


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return repr(str(tok))


def _syntax_error(e: UnexpectedInput, path: str, text: str) -> DMLSyntaxError:
    line, col = getattr(e, "line", 0) or 0, getattr(e, "column", 0) or 0
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        msg = f"unexpected character {ch!r}"
        if ch in "\"'":
            msg = "unterminated string literal"
        return DMLSyntaxError(msg, Span(path, line, col, line, col + 1))
    if isinstance(e, UnexpectedEOF):
        lines = text.rstrip().splitlines() or [""]
        return DMLSyntaxError("unexpected end of file (missing '}' or ')'?)",
                              Span(path, len(lines), len(lines[-1]) + 1))
    tok = getattr(e, "token", None)
    expected = sorted(_TOKEN_NAMES.get(t, t) for t in (getattr(e, "expected", None) or [])
                      if not t.startswith("__"))
    if tok is not None and tok.type == "$END":
        lines = text.rstrip().splitlines() or [""]
        return DMLSyntaxError("unexpected end of file (missing '}' or ')'?)",
                              Span(path, len(lines), len(lines[-1]) + 1))
    msg = f"unexpected {_describe(tok)}" if tok is not None else "syntax error"
    if expected and len(expected) <= 6:
        msg += ", expected " + " or ".join(expected)
    end = col + max(1, len(str(tok))) if tok is not None else col + 1
    return DMLSyntaxError(msg, Span(path, line, col, line, end))


def parse(text: str, path: str = "<string>") -> A.Script:
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, path, text) from None
    try:
        return _ToAst(path).transform(tree)
    except Exception as e:  # lark wraps transformer errors in VisitError
        orig = getattr(e, "orig_exc", e)
        if isinstance(orig, (DMLSyntaxError, DMLValidationError)):
            raise orig from None
        raise


def parse_file(path: str) -> A.Script:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise DMLSyntaxError(f"cannot read script '{path}': {e.strerror}") from None
    return parse(text, path)
