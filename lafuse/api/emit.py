"""A lazy expression graph as a DML script: one statement a node, so the whole graph is one block
(one HOP DAG: the statements' variables link HOPs directly, nothing is materialized between them)
and every line of the script is one node, whose Python line an error there is reported at.

Inputs are bound by name (``lf_in0``, ... : the caller's arrays, not copies); Python scalars are
written as literals (the compiler folds and specializes them); a node read twice is one variable,
computed once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lafuse.api.expr import Node

PATH = "<lafuse python>"  # the script's name in spans (api.run maps its lines back to Python)
_PLAIN = frozenset(map(chr, range(32, 127))) - {"\\", '"'}  # string characters a DML literal keeps as is


@dataclass
class Script:
    text: str
    bound: dict[str, Any]  # input variable -> value
    nnz: dict[str, int]  # input matrix variable -> its non-zeros (counted when bound)
    outputs: list[str]  # the roots' variables, in order
    lines: dict[int, Node] = field(default_factory=dict)  # script line -> the node it computes


def literal_text(v: Any) -> str | None:
    """A Python scalar as DML source, or None when it must be bound (a string DML cannot spell)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v) if v >= 0 else f"({v})"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Inf" if v > 0 else "(-Inf)"
        text = repr(abs(v))
        if "e" not in text and "." not in text:
            text += ".0"
        return text if math.copysign(1.0, v) > 0 else f"(-{text})"
    if isinstance(v, str) and set(v) <= _PLAIN:
        return f'"{v}"'
    return None


def order(roots: list[Node]) -> list[Node]:
    """The nodes under ``roots``, inputs first."""
    seen: set[int] = set()
    out: list[Node] = []
    for r in roots:
        stack: list[tuple[Node, bool]] = [(r, False)]
        while stack:
            n, done = stack.pop()
            if done:
                out.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((i, False) for i in reversed(n.inputs()) if id(i) not in seen)
    return out


def emit(roots: list[Node]) -> Script:
    names: dict[int, str] = {}
    bound: dict[str, Any] = {}
    lines: list[str] = []
    script = Script("", bound, {}, [])

    def ref(n: Node) -> str:
        return names[id(n)]

    def put(n: Node, text: str) -> None:
        lines.append(text)
        script.lines[len(lines)] = n

    for n in order(roots):
        if n.op in ("lit", "input"):
            text = literal_text(n.value) if n.op == "lit" else None
            if text is None:
                text = f"lf_in{len(bound)}"
                bound[text] = n.value
                if n.nnz >= 0:
                    script.nnz[text] = n.nnz
            names[id(n)] = text
            continue
        var = f"lf_t{len(lines)}"
        if n.op == "out":
            names[id(n)] = f"{ref(_call_of(n))}_{n.value}"
            continue
        if n.op == "call" and n.nout > 1:
            outs = [f"{var}_{k}" for k in range(n.nout)]
            names[id(n)] = var
            put(n, f"[{', '.join(outs)}] = {_expr(n, ref)}")
            continue
        names[id(n)] = var
        put(n, f"{var} = {_expr(n, ref)}")
    for r in roots:
        name = names[id(r)]
        if r.op in ("lit", "input") or name in script.outputs:  # (an output variable of its own)
            var = f"lf_t{len(lines)}"
            put(r, f"{var} = {name}")
            name = var
        script.outputs.append(name)
    script.text = "\n".join(lines) + "\n"
    return script


def _call_of(n: Node) -> Node:
    """The call an "out" node is one result of."""
    c = n.args[0]
    assert c is not None
    return c


def _expr(n: Node, ref: Any) -> str:
    if n.op == "binary":
        return f"{ref(n.args[0])} {n.fn} {ref(n.args[1])}"
    if n.op == "unary":
        return f"{n.fn}{ref(n.args[0])}"
    if n.op == "index":
        x, rl, ru, cl, cu = n.args
        assert x is not None
        return f"{ref(x)}[{_range(rl, ru, ref)}, {_range(cl, cu, ref)}]"
    args = [ref(a) for a in n.args if a is not None] + [f"{k}={ref(v)}" for k, v in n.kw.items()]
    return f"{n.fn}({', '.join(args)})"


def _range(lo: Node | None, hi: Node | None, ref: Any) -> str:
    if lo is None:
        return ""
    assert hi is not None
    return ref(lo) if lo is hi else f"{ref(lo)}:{ref(hi)}"


def describe(n: Node, depth: int = 3) -> str:
    """A short DML-like text of an expression (``repr`` of a lazy value, error notes)."""
    if n.op == "input":
        v = n.value
        shape = getattr(v, "shape", None)
        return f"<{shape[0]}x{shape[1]} {type(v).__name__}>" if shape is not None else repr(v)
    if n.op == "lit":
        return literal_text(n.value) or repr(n.value)
    if depth == 0:
        return "..."
    if n.op == "out":
        return f"{describe(_call_of(n), depth)}[{n.value}]"
    names: dict[int, str] = {}

    def ref(x: Node) -> str:
        if id(x) not in names:
            names[id(x)] = describe(x, depth - 1)
            if x.op in ("binary",) and depth > 1:
                names[id(x)] = f"({names[id(x)]})"
        return names[id(x)]

    return _expr(n, ref)
