"""DML abstract syntax tree. Every node keeps the source span that produced it, so validation
and runtime errors, and EXPLAIN output, can name a file, line and column."""

from __future__ import annotations

from dataclasses import dataclass, field

from lafuse.errors import NO_SPAN, Span


@dataclass
class Node:
    span: Span = field(default=NO_SPAN, kw_only=True, compare=False, repr=False)


# ---------------------------------------------------------------- expressions


@dataclass
class Expr(Node):
    pass


@dataclass
class Num(Expr):
    value: int | float


@dataclass
class Str(Expr):
    value: str


@dataclass
class Bool(Expr):
    value: bool


@dataclass
class Var(Expr):
    name: str


@dataclass
class CmdArg(Expr):
    """``$name`` or ``$1``: a command-line argument."""

    name: str


@dataclass
class Range(Node):
    """One dimension of an index: ``lo`` alone is a single position, ``lo:hi`` a range;
    a missing dimension (``X[,j]``) is represented by ``None`` instead of a Range."""

    lo: Expr
    hi: Expr | None = None


@dataclass
class Index(Expr):
    name: str
    rows: Range | None
    cols: Range | None


@dataclass
class ListIndex(Expr):
    """``L[i]`` (one element, by position or name) or ``L[i:j]`` (a sub-list)."""

    name: str
    key: Expr
    hi: Expr | None = None


@dataclass
class Arg(Node):
    name: str | None
    value: Expr


@dataclass
class Call(Expr):
    name: str  # may carry a namespace: ``ns::f``
    args: list[Arg]

    @property
    def positional(self) -> list[Expr]:
        return [a.value for a in self.args if a.name is None]

    @property
    def named(self) -> dict[str, Expr]:
        return {a.name: a.value for a in self.args if a.name is not None}


@dataclass
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass
class UnOp(Expr):
    op: str  # "-", "+", "!"
    operand: Expr


# ---------------------------------------------------------------- statements


@dataclass
class Stmt(Node):
    pass


@dataclass
class Target(Node):
    """Left side of an assignment: a variable, an indexed variable, or a list element."""

    name: str
    rows: Range | None = None
    cols: Range | None = None
    indexed: bool = False
    list_key: Expr | None = None


@dataclass
class Assign(Stmt):
    target: Target
    expr: Expr
    accumulate: bool = False  # ``+=``


@dataclass
class MultiAssign(Stmt):
    targets: list[Target]
    expr: Expr


@dataclass
class CallStmt(Stmt):
    call: Call


@dataclass
class If(Stmt):
    pred: Expr
    then_body: list[Stmt]
    else_body: list[Stmt]


@dataclass
class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    incr: Expr | None
    body: list[Stmt]
    parallel: bool = False
    options: dict[str, Expr] = field(default_factory=dict)


@dataclass
class While(Stmt):
    pred: Expr
    body: list[Stmt]


@dataclass
class Import(Stmt):
    path: str
    namespace: str


@dataclass
class Param(Node):
    type_name: str  # normalized: "matrix", "frame", "list", "scalar"
    value_type: str  # "double", "int", "boolean", "string", "unknown"
    name: str
    default: Expr | None = None


@dataclass
class FunctionDef(Node):
    name: str
    params: list[Param]
    outputs: list[Param]
    body: list[Stmt]
    file: str = ""


@dataclass
class Script(Node):
    path: str
    statements: list[Stmt]
    functions: dict[str, FunctionDef]
    imports: list[Import] = field(default_factory=list)
