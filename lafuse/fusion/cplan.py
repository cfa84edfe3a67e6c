"""CPlans: the code-generation plan of one fused operator (paper 000 sec. 3).

A CPlan is a template type, an output/aggregation type and a DAG of CNodes over the operator's
inputs. CNodes are hash-consed on construction (:class:`CPlanBuilder`), so equal subexpressions
are shared (CSE). The canonical key (:meth:`CPlan.canonical_key`) renumbers inputs by their first
use in a fixed traversal and replaces every literal by a numbered scalar argument, so plans that
differ only in which matrices they read or in their constants share one generated kernel (the
plan cache of paper 001 sec. 4.4: literals are kernel arguments, CSLH).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# how an input is read inside a cell-wise kernel at cell (i, j)
MAIN = "main"  # the main input: X[i, j] (its shape is the operator's iteration space)
CELL = "cell"  # a side input of the same shape: Y[i, j]
ROWVEC = "rowvec"  # a column vector broadcast along rows: v[i, 0]
COLVEC = "colvec"  # a row vector broadcast along columns: v[0, j]
SCALAR = "scalar"  # a scalar (or 1x1) input
ACCESS = (MAIN, CELL, ROWVEC, COLVEC, SCALAR)

# output / aggregation types of the Cell template (paper 000 Table 1)
NO_AGG = "no_agg"
FULL_AGG = "full_agg"
ROW_AGG = "row_agg"
COL_AGG = "col_agg"
AGG_OPS = ("sum", "sumsq", "min", "max")

UNARY = ("u-", "!", "abs", "exp", "log", "sqrt", "round", "floor", "ceil", "sign", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "isNaN", "isInf")
BINARY = ("+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "min", "max",
          "xor")
TERNARY = ("ifelse",)


@dataclass(frozen=True)
class CNode:
    """One node: ``op`` is "input" (``arg`` = input position), "literal" (``arg`` = value) or an
    operator with ``children``."""

    op: str
    children: tuple[CNode, ...] = ()
    arg: object = None
    access: str = ""  # inputs only: MAIN, CELL, ROWVEC, COLVEC or SCALAR

    def __repr__(self) -> str:
        if self.op == "input":
            return f"in{self.arg}[{self.access}]"
        if self.op == "literal":
            return repr(self.arg)
        return f"{self.op}({', '.join(map(repr, self.children))})"


@dataclass
class CPlan:
    template: str  # "cell" (row, magg and outer follow with #5)
    root: CNode
    agg: str = NO_AGG
    agg_op: str = "sum"
    sparse_safe: bool = False  # the kernel may iterate over the main input's non-zeros only
    ninputs: int = field(default=0)

    def canonical_key(self) -> tuple[str, tuple[int, ...], tuple[float, ...]]:
        """(hash, input permutation, literal values): the hash is equal for plans that differ only in
        input order and literal values; the permutation maps canonical input slots to this plan's
        input positions, the literals are the kernel's scalar arguments in canonical order."""
        order: list[int] = []
        lits: list[float] = []
        memo: dict[int, str] = {}

        def walk(n: CNode) -> str:
            key = id(n)
            if key in memo:
                return memo[key]
            if n.op == "input":
                pos = int(n.arg)  # type: ignore[call-overload]
                if pos not in order:
                    order.append(pos)
                s = f"i{order.index(pos)}:{n.access}"
            elif n.op == "literal":
                lits.append(float(n.arg))  # type: ignore[arg-type]
                s = f"l{len(lits) - 1}"
            else:
                s = f"{n.op}(" + ",".join(walk(c) for c in n.children) + ")"
            memo[key] = s
            return s

        text = f"{self.template}|{self.agg}|{self.agg_op}|{int(self.sparse_safe)}|{walk(self.root)}"
        return hashlib.sha256(text.encode()).hexdigest()[:32], tuple(order), tuple(lits)


class CPlanBuilder:
    """Builds CNodes with common-subexpression elimination (structurally equal nodes are one object)."""

    def __init__(self) -> None:
        self._memo: dict[tuple, CNode] = {}

    def _intern(self, key: tuple, node: CNode) -> CNode:
        return self._memo.setdefault(key, node)

    def input(self, pos: int, access: str) -> CNode:
        if access not in ACCESS:
            raise ValueError(f"unknown input access {access!r}")
        return self._intern(("input", pos, access), CNode("input", (), pos, access))

    def literal(self, value: float) -> CNode:
        v = float(value)
        return self._intern(("literal", repr(v)), CNode("literal", (), v))

    def op(self, name: str, *children: CNode) -> CNode:
        arity = {**{o: 1 for o in UNARY}, **{o: 2 for o in BINARY}, **{o: 3 for o in TERNARY}}.get(name)
        if arity is None:
            raise ValueError(f"operator {name!r} cannot be fused")
        if arity != len(children):
            raise ValueError(f"{name} takes {arity} operands, got {len(children)}")
        return self._intern((name, *(id(c) for c in children)), CNode(name, tuple(children)))
