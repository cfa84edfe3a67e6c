"""What the compiler knows about a file a script reads: its ``.mtd`` on disk, or what a write earlier
in the same script put there.

Why: a read's sizes are compile-time facts (validation, rewrites and fusion depend on them), but a
``.mtd`` that the script itself overwrites before the read is stale: ``write(t(X), "f")`` then
``Y = read("f")`` must see ``t(X)``'s sizes, not the old file's. SystemDS does this for writes of
variables in the main program (``DMLTranslator.prepareReadAfterWrite``: the read takes the write's
format, sizes and types; its 3.4 fails with "Undefined Variable (null)" when the written value is an
expression). lafuse follows the writes in program order with their control flow: a write in one branch
of an ``if``, in a loop body (which may run zero or more times before the read), in a function, or to a
path known only at run time makes the file's sizes unknown, and the read resolves them at run time
(dynamic recompilation); the runtime also checks that a read returns the sizes it was compiled for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lafuse.errors import DMLError, DMLValidationError, Span
from lafuse.hops.hop import BOOLEAN, DOUBLE, FRAME, INT, LIST, MATRIX, SCALAR, STRING, Hop
from lafuse.lang import ast as A
from lafuse.mtd import load_mtd, mtd_params  # the runtime's parser too: both accept the same .mtd files

ANY = "*"  # a write whose path is known only at run time: it may have changed any file


@dataclass(frozen=True)
class Written:
    """A file's content as an earlier write left it; None/-1 where that is not known."""

    dt: str | None = None
    vt: str | None = None
    rows: int = -1
    cols: int = -1
    nnz: int = -1

    def unknown(self) -> Written:
        return Written(self.dt, self.vt)


def file_key(path: str) -> str:
    return os.path.abspath(path)


def _arg(call: A.Call, name: str, pos: int) -> A.Expr | None:
    positional = [a for a in call.args if a.name is None]
    for a in call.args:
        if a.name == name:
            return a.value
    return positional[pos].value if len(positional) > pos else None


def _const_path(e: A.Expr | None, nvargs: dict[str, Any], pos_args: list[Any]) -> str | None:
    """The path a write's ``file`` argument names, when it is known before running."""
    if isinstance(e, A.Str):
        return e.value
    if isinstance(e, A.CmdArg):
        if e.name.isdigit():
            i = int(e.name) - 1
            v = pos_args[i] if 0 <= i < len(pos_args) else None
        else:
            v = nvargs.get(e.name)
        return v if isinstance(v, str) else None
    if isinstance(e, A.Call) and e.name == "ifdef" and len(e.args) == 2 and isinstance(e.args[0].value, A.CmdArg):
        name = e.args[0].value.name
        given = name in nvargs or (name.isdigit() and 0 < int(name) <= len(pos_args))
        return _const_path(e.args[0].value if given else e.args[1].value, nvargs, pos_args)
    return None


def writes_in(stmts: list[A.Stmt], nvargs: dict[str, Any], pos_args: list[Any]) -> set[str]:
    """Keys of the files the statements write (``ANY`` for a path known only at run time)."""
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, A.CallStmt) and s.call.name == "write":
            p = _const_path(_arg(s.call, "file", 1), nvargs, pos_args)
            out.add(file_key(p) if p is not None else ANY)
        elif isinstance(s, A.If):
            out |= writes_in(s.then_body, nvargs, pos_args) | writes_in(s.else_body, nvargs, pos_args)
        elif isinstance(s, (A.While, A.For)):
            out |= writes_in(s.body, nvargs, pos_args)
    return out


class FileTracker:
    """The builder's knowledge of files written so far, along program order; ``state`` maps a file
    key to what the last write left there (files not in it are as the disk's ``.mtd`` says)."""

    def __init__(self) -> None:
        self.state: dict[str, Written] = {}
        self.in_functions: set[str] = set()  # written by some function body: unknown wherever read
        self.anywhere: set[str] = set()
        self.fn_depth = 0
        self.nvargs: dict[str, Any] = {}
        self.pos_args: list[Any] = []

    def prepare(self, script: A.Script, functions: dict[str, A.FunctionDef], nvargs: dict[str, Any],
                pos_args: list[Any]) -> None:
        self.nvargs, self.pos_args = nvargs, pos_args
        for f in functions.values():
            self.in_functions |= writes_in(f.body, nvargs, pos_args)
        self.anywhere = self.in_functions | writes_in(script.statements, nvargs, pos_args)

    # ---- control flow
    def snapshot(self) -> dict[str, Written]:
        return dict(self.state)

    def restore(self, state: dict[str, Written]) -> None:
        self.state = dict(state)

    def join(self, other: dict[str, Written]) -> None:
        """After an ``if``: what both branches agree on stays known."""
        out: dict[str, Written] = {}
        for k in set(self.state) | set(other):
            a, b = self.state.get(k), other.get(k)
            if a == b and a is not None:
                out[k] = a
            else:
                w = a or b or Written()
                same_type = a is not None and b is not None and (a.dt, a.vt) == (b.dt, b.vt)
                out[k] = w.unknown() if same_type else Written()
        self.state = out

    def enter_loop(self, body: list[A.Stmt]) -> dict[str, Written]:
        """The state at the top of every iteration (and after the loop): the files the body writes
        may hold the body's data or what was there before."""
        for k in writes_in(body, self.nvargs, self.pos_args):
            self.state[k] = self.state[k].unknown() if k in self.state else Written()
        return self.snapshot()

    # ---- statements
    def note_write(self, key: str, target: Hop) -> None:
        if self.fn_depth:
            return  # function bodies are built out of call order: prepare() covers them
        if key == ANY:
            self.state = {k: w.unknown() for k, w in self.state.items()}
            self.state[ANY] = Written()
            return
        if target.dt == MATRIX:
            self.state[key] = Written(MATRIX, DOUBLE, target.rows, target.cols, target.nnz)
        else:
            self.state[key] = Written(target.dt, target.vt)

    def lookup(self, key: str) -> tuple[str, Written | None]:
        """("disk", None): the file is as its ``.mtd`` says; ("written", w): an earlier write of the
        script left w; ("unknown", None): the script may have changed it in ways not known here."""
        if self.fn_depth:
            return ("unknown", None) if key in self.anywhere or ANY in self.anywhere else ("disk", None)
        if key in self.in_functions or ANY in self.in_functions:
            return "unknown", None
        if key in self.state:
            return "written", self.state[key]
        if ANY in self.state:
            return "unknown", None
        return "disk", None


_DT = {"matrix": MATRIX, "scalar": SCALAR, "frame": FRAME, "list": LIST}
_VT = {"double": DOUBLE, "int": INT, "boolean": BOOLEAN, "string": STRING}


def read_meta(args: dict[str, Hop], params: dict[str, Any], span: Span, files: FileTracker) -> None:
    """Compile-time data type, value type and sizes of ``read()``: from the read's literal arguments,
    then from an earlier write of the same file, else from its ``.mtd`` (as SystemDS does)."""
    path_h = args.get("target")
    meta: dict[str, Any] = {}
    if path_h is not None and path_h.is_literal and isinstance(path_h.value, str):
        path = path_h.value
        how, w = files.lookup(file_key(path))
        if how == "written" and w is not None and w.dt is not None:
            meta = {"data_type": w.dt, "value_type": w.vt, "rows": w.rows, "cols": w.cols, "nnz": w.nnz}
        else:  # the .mtd on disk, for the types only when the script may have rewritten the file
            how = "unknown" if how == "written" else how
            try:
                mtd = load_mtd(path + ".mtd")
                meta = mtd_params(path + ".mtd", mtd) if mtd is not None else {}
            except DMLError as e:
                if how == "disk":
                    raise DMLValidationError(e.message, span) from None
                meta = {}  # the script rewrites it before this read: the runtime reads the new one
            if how == "unknown":
                meta = {k: v for k, v in meta.items() if k in ("data_type", "value_type")}
    for k in ("rows", "cols", "data_type", "value_type"):
        h = args.get(k)
        if h is not None and h.is_literal:
            meta[k] = h.value
    params["data_type"] = _DT.get(str(meta.get("data_type") or "matrix").lower(), MATRIX)
    params["value_type"] = _VT.get(str(meta.get("value_type") or "double").lower(), DOUBLE)
    if params["data_type"] == MATRIX:
        params["value_type"] = DOUBLE
    for k in ("rows", "cols", "nnz"):
        v = meta.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and float(v).is_integer():
            params[k] = int(v)
