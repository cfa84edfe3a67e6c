"""DML abstract syntax tree. Every node keeps the source span that produced it, so validation
and runtime errors, and EXPLAIN output, can name a file, line and column.

The node classes are dataclasses made on first use. Why: making a dataclass execs its generated
methods, ~0.35 ms a class, ~9 ms for these 26 at every start, while a warm run never constructs a
node: it unpickles the script's cached AST (lang.parser), which calls no ``__init__``. A subclass
of :class:`Node` carries stand-ins for ``__init__``, ``__repr__`` and ``__eq__`` that make it (and
its bases) a dataclass, then call the real method; ``typing.dataclass_transform`` tells type
checkers they are dataclasses. Code that walks a node's fields generically uses :func:`children`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, dataclass_transform

from lafuse.errors import NO_SPAN, Span

_STAND_INS = ("__init__", "__repr__", "__eq__", "__hash__", "_lazy")
_making = threading.Lock()


def made(cls: type[Node]) -> type[Node]:
    """``cls``, a dataclass now with its bases (each made once)."""
    if "_lazy" in cls.__dict__:
        with _making:
            for c in reversed(cls.__mro__):
                if "_lazy" in c.__dict__:
                    for name in _STAND_INS:
                        delattr(c, name)
                    dataclass(c)
    return cls


def children(node: Node) -> list[Any]:
    """The values of a node's fields but its span, in field order: from the instance, whose class
    need not be made (a walk over an unpickled tree makes none)."""
    return [v for k, v in vars(node).items() if k != "span"]


def _init(self: Node, *args: Any, **kw: Any) -> None:
    made(type(self)).__init__(self, *args, **kw)


def _repr(self: Node) -> str:
    return made(type(self)).__repr__(self)


def _eq(self: Node, other: object) -> bool:
    return made(type(self)).__eq__(self, other)  # type: ignore[no-any-return]


@dataclass_transform(field_specifiers=(field,))
@dataclass
class Node:
    span: Span = field(default=NO_SPAN, kw_only=True, compare=False, repr=False)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # unhashable, as a dataclass with eq (and not frozen) is
        cls.__init__, cls.__repr__, cls.__eq__, cls.__hash__ = _init, _repr, _eq, None  # type: ignore[assignment,method-assign]
        cls._lazy = True  # type: ignore[attr-defined]


# ---------------------------------------------------------------- expressions


class Expr(Node):
    pass


class Num(Expr):
    value: int | float


class Str(Expr):
    value: str


class Bool(Expr):
    value: bool


class Var(Expr):
    name: str


class CmdArg(Expr):
    """``$name`` or ``$1``: a command-line argument."""

    name: str


class Range(Node):
    """One dimension of an index: ``lo`` alone is a single position, ``lo:hi`` a range;
    a missing dimension (``X[,j]``) is represented by ``None`` instead of a Range."""

    lo: Expr
    hi: Expr | None = None


class Index(Expr):
    name: str
    rows: Range | None
    cols: Range | None


class ListIndex(Expr):
    """``L[i]`` (one element, by position or name) or ``L[i:j]`` (a sub-list)."""

    name: str
    key: Expr
    hi: Expr | None = None


class Arg(Node):
    name: str | None
    value: Expr


class Call(Expr):
    name: str  # may carry a namespace: ``ns::f``
    args: list[Arg]

    @property
    def positional(self) -> list[Expr]:
        return [a.value for a in self.args if a.name is None]

    @property
    def named(self) -> dict[str, Expr]:
        return {a.name: a.value for a in self.args if a.name is not None}


class BinOp(Expr):
    op: str
    left: Expr
    right: Expr


class UnOp(Expr):
    op: str  # "-", "+", "!"
    operand: Expr


# ---------------------------------------------------------------- statements


class Stmt(Node):
    pass


class Target(Node):
    """Left side of an assignment: a variable, an indexed variable, or a list element."""

    name: str
    rows: Range | None = None
    cols: Range | None = None
    indexed: bool = False
    list_key: Expr | None = None


class Assign(Stmt):
    target: Target
    expr: Expr
    accumulate: bool = False  # ``+=``


class MultiAssign(Stmt):
    targets: list[Target]
    expr: Expr


class CallStmt(Stmt):
    call: Call


class If(Stmt):
    pred: Expr
    then_body: list[Stmt]
    else_body: list[Stmt]


class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    incr: Expr | None
    body: list[Stmt]
    parallel: bool = False
    options: dict[str, Expr] = field(default_factory=dict)


class While(Stmt):
    pred: Expr
    body: list[Stmt]


class Import(Stmt):
    path: str
    namespace: str


class Param(Node):
    type_name: str  # normalized: "matrix", "frame", "list", "scalar"
    value_type: str  # "double", "int", "boolean", "string", "unknown"
    name: str
    default: Expr | None = None


class FunctionDef(Node):
    name: str
    params: list[Param]
    outputs: list[Param]
    body: list[Stmt]
    file: str = ""


class Script(Node):
    path: str
    statements: list[Stmt]
    functions: dict[str, FunctionDef]
    imports: list[Import] = field(default_factory=list)
