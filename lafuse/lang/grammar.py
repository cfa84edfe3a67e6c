"""DML source text -> AST with lark, with spans. One lark LALR parser built once per process.

Imported only when a script is not in the AST cache (lafuse.lang.parser): lark and its tables
cost ~0.1 s of a start."""

from __future__ import annotations

import functools
import hashlib
import io
import os

import lark
from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, v_args
from lark.tree import Meta

from lafuse import cachedir
from lafuse.errors import DMLSyntaxError, DMLValidationError, Span
from lafuse.lang import ast as A
from lafuse.lang.escapes import unescape

_GRAMMAR = os.path.join(os.path.dirname(__file__), "dml.lark")

_VALUE_TYPES = {
    "double": "double", "int": "int", "integer": "int", "boolean": "boolean", "bool": "boolean",
    "string": "string", "unknown": "unknown",
}
_DATA_TYPES = {"matrix": "matrix", "frame": "frame", "list": "list", "tensor": "matrix", "scalar": "scalar"}
_TYPE_HINT = " (known types: Matrix[Double], Frame, List, Double, Integer, Boolean, String)"

_KEYWORDS = frozenset({
    "if", "else", "for", "in", "parfor", "while", "function", "return", "source", "setwd", "as",
    "TRUE", "FALSE", "externalFunction", "implemented",
})
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_CLOSER_TERMINALS = {")": "RPAR", "]": "RSQB", "}": "RBRACE"}

# what the parser can accept next, summarized: a class of tokens is named once
_EXPR_START = frozenset({"NAME", "INT", "FLOAT", "STRING", "LPAR", "ADDOP", "NOT", "TRUE", "FALSE", "CMD_NAMED",
                         "CMD_POS"})
_STMT_START = frozenset({"NAME", "LSQB", "IF", "FOR", "PARFOR", "WHILE", "SOURCE", "SETWD", "CMD_NAMED"})
_BINOPS = frozenset({"OROP", "ANDOP", "CMPOP", "ADDOP", "MULOP", "MMOP", "MODOP", "POWOP"})
_PUNCT_ORDER = [")", "]", "}", ",", ":", "=", "<-", "+=", "(", "[", "{"]


class _Scan:
    """Brackets still open at an offset, and the end of the last token before it (strings and
    comments skipped); also finds a block comment that is never closed."""

    def __init__(self, text: str, upto: int):
        self.stack: list[tuple[str, int]] = []  # (opener, offset)
        self.last_end = 0  # offset just after the last significant character before upto
        self.open_comment: int | None = None  # offset of a '/*' that is never closed
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c == "#":
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            if text.startswith("/*", i):
                j = text.find("*/", i + 2)
                if j < 0:
                    self.open_comment = i
                    break
                i = j + 2
                continue
            if i >= upto:
                break
            if c in "\"'":
                j = i + 1
                while j < n and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                i = min(j + 1, n)
                self.last_end = i
                continue
            if c in _OPENERS:
                self.stack.append((c, i))
            elif c in _CLOSERS:
                if self.stack and self.stack[-1][0] == _CLOSERS[c]:
                    self.stack.pop()
            if not c.isspace():
                self.last_end = i + 1
            i += 1


_LARK_OPTIONS = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": True}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    """The parser, its LALR tables loaded from the plan-cache directory when they were built before
    (building takes ~0.16 s of every start, loading ~0.01 s). Not lark's own ``cache=True``: that is
    a pickle at a predictable name in the world-writable ``/tmp``, which another user could plant for
    every later run to unpickle. Here the file lies in the user's checked directory and is signed
    (:mod:`lafuse.cachedir`), and lark unpickles the very bytes whose tag was verified."""

    with open(_GRAMMAR, "rb") as f:
        grammar = f.read()
    stamp = repr((grammar, lark.__version__, sorted(_LARK_OPTIONS.items()))).encode()
    name = f"grammar_{hashlib.sha256(stamp).hexdigest()[:16]}.lark"
    payload = cachedir.read_signed(name)
    if payload is not None:
        try:
            return Lark.load(io.BytesIO(payload))
        except Exception:  # noqa: BLE001 - signed by us yet not loadable (another lark): built again below
            pass
    parser = Lark(grammar.decode("utf-8"), **_LARK_OPTIONS)  # type: ignore[arg-type]
    buf = io.BytesIO()
    parser.save(buf)
    try:
        cachedir.write_signed(name, buf.getvalue())
    except OSError:  # a full disk or a vanished directory: the next run builds the tables again
        pass
    return parser


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

    def NAME(self, tok: Token) -> Token:
        # lark's contextual lexer reads a keyword as a name where no keyword fits (x = for + 1)
        if str(tok) in _KEYWORDS:
            raise DMLSyntaxError(f"'{tok}' is a reserved word and cannot be used as a name", self._span(tok))
        return tok

    # ---- program structure
    @v_args(meta=True)
    def start(self, meta, items):
        stmts, funcs, imports = [], {}, []
        for it in items:
            if isinstance(it, A.FunctionDef):
                if it.name in funcs:
                    first = funcs[it.name].span
                    raise DMLValidationError(
                        f"function '{it.name}' is defined twice (first definition at {first.line}:{first.col})",
                        it.span)
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

    @v_args(meta=True)
    def ml_type(self, meta, items):
        outer, inner = str(items[0]), items[1]
        lo = outer.lower()
        if inner is not None:
            dt = _DATA_TYPES.get(lo)
            vt = _VALUE_TYPES.get(str(inner).lower())
            if dt is None or vt is None:
                raise DMLSyntaxError(f"unknown type '{outer}[{inner}]'{_TYPE_HINT}", self._span(meta))
            return (dt, vt)
        if lo in _VALUE_TYPES:
            return ("scalar", _VALUE_TYPES[lo])
        if lo in _DATA_TYPES:
            return (_DATA_TYPES[lo], "double" if lo == "matrix" else "unknown")
        raise DMLSyntaxError(f"unknown type '{outer}'{_TYPE_HINT}", self._span(items[0]))

    # ---- statements
    @v_args(meta=True)
    def assign(self, meta, items):
        return A.Assign(items[0], items[1], span=self._span(meta))

    @v_args(meta=True)
    def acc_assign(self, meta, items):
        return A.Assign(items[0], items[1], accumulate=True, span=self._span(meta))

    @v_args(meta=True)
    def multi_assign(self, meta, items):
        targets = list(items[:-1])
        span = self._span(meta)
        if targets and targets[0].span.line > span.line:  # opened by a token that began at the previous newline
            t = targets[0].span
            span = Span(span.file, t.line, max(t.col - 1, 1), span.end_line, span.end_col)
        return A.MultiAssign(targets, items[-1], span=span)

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
        name, key, *hi = items
        return A.ListIndex(str(name), key, hi[0] if hi else None, span=self._span(meta))

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


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _describe(tok: Token) -> str:
    """How an unexpected token reads in a message: kind and text."""
    if tok.type == "$END":
        return "end of file"
    text = str(tok)
    if text in _KEYWORDS:
        return f"keyword '{text}'"
    if tok.type == "NAME":
        return f"identifier '{text}'"
    if tok.type in ("INT", "FLOAT"):
        return f"number '{text}'"
    if tok.type == "STRING":
        return f"string {text if len(text) <= 30 else text[:27] + '...'}"
    if tok.type in ("CMD_NAMED", "CMD_POS"):
        return f"command-line argument '{text}'"
    return f"'{text}'"


def _terminal_text(name: str) -> str | None:
    """The literal text of a fixed terminal ('in', ')', '<-'); None for classes such as NAME."""
    try:
        pat = _lark().get_terminal(name).pattern
    except KeyError:
        return None
    return pat.value if pat.type == "str" else None


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _expected(accepts: set[str], scan: _Scan, text: str, err_line: int) -> str:
    """A short, human summary of the tokens the parser would have accepted: classes of tokens
    ("an expression", "an operator", "a statement") are named once, punctuation is listed."""
    acc = set(accepts)
    classes: list[str] = []
    if len(acc & _BINOPS) >= 3:
        classes.append("an operator")
        acc -= _BINOPS
    if {"IF", "WHILE"} <= acc:
        classes.append("a new statement" if classes else "a statement")
        acc -= _STMT_START | {"$END", "_SEMI"}
    if {"INT", "LPAR", "NAME"} <= acc:
        classes.append("an expression")
        acc -= _EXPR_START | {"FUNCTION"}  # 'x = function' is rarely what was meant
    if len(acc) > 1:
        acc.discard("_SEMI")  # ';' is an optional terminator: never worth suggesting
    lone = {"NAME": "an identifier", "INT": "a number", "FLOAT": "a number", "STRING": "a string",
            "CMD_NAMED": "a command-line argument", "CMD_POS": "a command-line argument"}
    punct: list[str] = []
    for name in sorted(acc - {"$END"}):
        t = _terminal_text(name)
        if t is not None:
            punct.append(t)
        elif name in lone and lone[name] not in classes:
            classes.append(lone[name])
    punct.sort(key=lambda t: (_PUNCT_ORDER.index(t) if t in _PUNCT_ORDER else len(_PUNCT_ORDER), t))
    items = [f"'{t}'" for t in punct]
    # name a '(' or '[' left open on an earlier line: the likely mistake ('{' spans lines anyway)
    closer = _OPENERS[scan.stack[-1][0]] if scan.stack else None
    note = None
    if closer in (")", "]") and closer in punct:
        opener, pos = scan.stack[-1]
        line, col = _line_col(text, pos)
        if line != err_line:
            items.remove(f"'{closer}'")
            note = f"'{closer}' to close '{opener}' at {line}:{col}"
    items += classes
    if len(items) > 5:
        items = items[:4] + ["..."]
    if note:
        items.append(note)
    if not items and "$END" in acc:
        items.append("end of file")
    return _join(items) if items else ""


def _syntax_error(e: UnexpectedInput, path: str, text: str) -> DMLSyntaxError:
    """A syntax error at the offending token, naming it and what could have come instead."""
    tok: Token | None = getattr(e, "token", None)
    at_eof = isinstance(e, UnexpectedEOF) or (tok is not None and tok.type == "$END")
    pos: int = len(text)
    if isinstance(e, UnexpectedCharacters):
        pos = e.pos_in_stream or 0
    elif tok is not None and not at_eof and tok.start_pos is not None:
        pos = tok.start_pos
    scan = _Scan(text, pos)

    def err(msg: str, at: int, width: int = 1) -> DMLSyntaxError:
        line, col = _line_col(text, at)
        return DMLSyntaxError(msg, Span(path, line, col, line, col + max(1, width)))

    if scan.open_comment is not None and scan.open_comment <= pos:
        return err("unterminated block comment: '/*' is never closed by '*/'", scan.open_comment, 2)
    if isinstance(e, UnexpectedCharacters):
        ch = text[pos] if pos < len(text) else "?"
        if ch in "\"'":
            return err(f"unterminated string literal: missing closing {ch}", pos)
        return err(f"unexpected character {ch!r}", pos)
    ip = getattr(e, "interactive_parser", None)
    try:
        accepts = set(ip.accepts()) if ip is not None else set(getattr(e, "expected", None) or ())
    except Exception:  # accepts() replays the parser; never let it hide the real error
        accepts = set(getattr(e, "expected", None) or ())
    if at_eof:
        if scan.stack and _CLOSER_TERMINALS[_OPENERS[scan.stack[-1][0]]] in accepts:
            opener, opos = scan.stack[-1]
            line, col = _line_col(text, opos)
            msg = f"unexpected end of file, expected '{_OPENERS[opener]}' to close '{opener}' at {line}:{col}"
        else:
            exp = _expected(accepts, scan, text, 0)
            msg = "unexpected end of file" + (f", expected {exp}" if exp else "")
        return err(msg, scan.last_end)
    assert tok is not None
    t = str(tok)
    width = len(t) if "\n" not in t else 1
    err_line = tok.line or 0
    if t in _CLOSERS and tok.type == _CLOSER_TERMINALS[t]:
        if not scan.stack:
            return err(f"unexpected '{t}' without a matching '{_CLOSERS[t]}'", pos, width)
        opener, opos = scan.stack[-1]
        if _OPENERS[opener] != t:
            line, col = _line_col(text, opos)
            return err(f"unexpected '{t}', expected '{_OPENERS[opener]}' to close '{opener}' at {line}:{col}",
                       pos, width)
    # (where no keyword fits, lark's contextual lexer reads one as a NAME)
    if t == "else" and tok.type in ("ELSE", "NAME"):
        return err("'else' without a matching 'if'", pos, width)
    if t == "function" and tok.type in ("FUNCTION", "NAME") and any(o == "{" for o, _ in scan.stack):
        return err("function definitions are only allowed at the top level of a script, not inside a block",
                   pos, width)
    exp = _expected(accepts, scan, text, err_line)
    return err(f"unexpected {_describe(tok)}" + (f", expected {exp}" if exp else ""), pos, width)


def parse_text(text: str, path: str = "<string>") -> A.Script:
    """Parse with lark (no cache: lafuse.lang.parser.parse caches the result)."""
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, path, text) from None
    try:
        return _ToAst(path).transform(tree)
    except Exception as e:  # lark wraps transformer errors in VisitError
        orig = getattr(e, "orig_exc", e)
        if isinstance(orig, (DMLSyntaxError, DMLValidationError, RecursionError)):
            raise orig from None
        raise
