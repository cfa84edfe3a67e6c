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


def order(roots: list[Node], done: Any = ()) -> list[Node]:
    """The nodes under ``roots``, inputs first (not below a node in ``done``, ids already emitted)."""
    seen: set[int] = set(done)
    out: list[Node] = []
    for r in roots:
        stack: list[tuple[Node, bool]] = [(r, False)]
        while stack:
            n, fin = stack.pop()
            if fin:
                out.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((i, False) for i in reversed(n.inputs()) if id(i) not in seen)
    return out


def emit(roots: list[Node]) -> Script:
    em = _Emitter()
    em.block(roots, None, "")
    script = em.script
    for r in roots:
        name = em.names[id(r)]
        if r.op in ("lit", "input") or name in script.outputs:  # (an output variable of its own)
            var = em.fresh()
            em.put(r, f"{var} = {name}")
            name = var
        script.outputs.append(name)
    script.text = "\n".join(em.lines) + "\n"
    return script


class _Emitter:
    """Statements for nodes, block by block: a loop's or branch's body (``api.control``) is emitted
    inside its DML block, from the nodes of its scope; what it reads from enclosing scopes is
    emitted before the block (those are the loop node's inputs)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.script = Script("", {}, {}, [])

    def ref(self, n: Node) -> str:
        return self.names[id(n)]

    def fresh(self) -> str:
        return f"lf_t{len(self.lines)}"

    def put(self, n: Node, text: str) -> None:
        self.lines.append(text)
        self.script.lines[len(self.lines)] = n

    def block(self, roots: list[Node], scope: Any, indent: str) -> None:
        for n in order(roots, self.names):
            self.node(n, scope, indent)

    def node(self, n: Node, scope: Any, indent: str) -> None:
        if id(n) in self.names:  # (an input or literal a body emitted meanwhile)
            return
        if n.op in ("lit", "input"):
            text = literal_text(n.value) if n.op == "lit" else None
            if text is None:
                text = f"lf_in{len(self.script.bound)}"
                self.script.bound[text] = n.value
                if n.nnz >= 0:
                    self.script.nnz[text] = n.nnz
            self.names[id(n)] = text
            return
        if n.scope is not scope or n.op in ("carry", "loopvar"):  # (a stand-in is named by its block)
            from lafuse.api.control import leaked

            raise leaked(n)
        var = self.fresh()
        if n.op == "out":
            self.names[id(n)] = f"{self.ref(_call_of(n))}_{n.value}"
        elif n.op == "loop":
            self.loop(n, indent)
        elif n.op == "if":
            self.branch(n, indent)
        elif n.op == "call" and n.nout > 1:
            outs = [f"{var}_{k}" for k in range(n.nout)]
            self.names[id(n)] = var
            self.put(n, f"{indent}[{', '.join(outs)}] = {_expr(n, self.ref)}")
        else:
            self.names[id(n)] = var
            self.put(n, f"{indent}{var} = {_expr(n, self.ref)}")

    def loop(self, n: Node, indent: str) -> None:
        """``lf_c<k>_<j> = init_j``, then the loop over a body that ends assigning its results to them
        (its "out" nodes are these variables after the loop)."""
        from lafuse.api.control import Loop

        lp: Loop = n.value
        body = lp.body
        base = f"lf_c{len(self.lines)}"
        self.names[id(n)] = base
        carried = [f"{base}_{j}" for j in range(len(body.carries))]
        inits = n.args[2:] if lp.kind == "for" else n.args  # (free values follow: zip stops at the state)
        for var, c, init in zip(carried, body.carries, inits):
            assert init is not None
            self.put(n, f"{indent}{var} = {self.ref(init)}")
            self.names[id(c)] = var
        inner, close = indent + "  ", [indent + "}"]
        if lp.kind == "for":
            lo, hi = n.args[0], n.args[1]
            assert lo is not None and hi is not None and lp.index is not None
            index = self.names[id(lp.index)] = f"lf_i{len(self.lines)}"
            if lo.op == "lit" and hi.op == "lit":
                rng = f"{lo.value}:{hi.value - 1}"
            else:  # (DML's a:b counts down when b < a)
                self.put(n, f"{indent}if ({self.ref(hi)} > {self.ref(lo)}) {{")
                indent, inner, close = inner, inner + "  ", [inner + "}", indent + "}"]
                rng = f"{self.ref(lo)}:({self.ref(hi)} - 1)"
            self.put(n, f"{indent}for ({index} in {rng}) {{")
        else:
            assert lp.cond is not None
            test = f"{base}_w"
            self.condition(n, lp.cond, body.scope, test, indent)
            self.put(n, f"{indent}while ({test}) {{")
        self.block(body.results, body.scope, inner)
        self.assign(n, carried, body.results, inner)
        if lp.cond is not None:
            self.condition(n, lp.cond, body.scope, f"{base}_w", inner)
        for line in close:
            self.put(n, line)

    def condition(self, n: Node, cond: Node, scope: Any, var: str, indent: str) -> None:
        """A while loop's condition into ``var``: before the loop and at the end of its body, its nodes
        emitted afresh each time (named anew: the second reads the body's results)."""
        mine = [m for m in order([cond], self.names) if m.op not in ("lit", "input")]
        self.block([cond], scope, indent)
        self.put(n, f"{indent}{var} = {self.ref(cond)}")
        for m in mine:
            del self.names[id(m)]

    def assign(self, n: Node, carried: list[str], results: list[Node], indent: str) -> None:
        """``carried_j = result_j`` for each j, as simultaneous assignments: a result that is another
        state variable is copied first (a body that swaps two values)."""
        srcs = [self.ref(r) for r in results]
        for j, src in enumerate(srcs):
            if src in carried and src != carried[j]:
                tmp = self.fresh()
                self.put(n, f"{indent}{tmp} = {src}")
                srcs[j] = tmp
        for var, src in zip(carried, srcs):
            if src != var:
                self.put(n, f"{indent}{var} = {src}")

    def branch(self, n: Node, indent: str) -> None:
        from lafuse.api.control import Branch

        br: Branch = n.value
        base = self.names[id(n)] = f"lf_c{len(self.lines)}"
        results = [f"{base}_{j}" for j in range(n.nout)]
        pred = n.args[0]
        assert pred is not None
        self.put(n, f"{indent}if ({self.ref(pred)}) {{")
        for k, body in enumerate((br.then, br.orelse)):
            if k:
                self.put(n, f"{indent}}} else {{")
            self.block(body.results, body.scope, indent + "  ")
            for var, r in zip(results, body.results):
                self.put(n, f"{indent}  {var} = {self.ref(r)}")
        self.put(n, f"{indent}}}")


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
    if n.op in ("carry", "loopvar"):
        what = n.scope.what if n.scope is not None else "loop"
        return f"<{'the index' if n.op == 'loopvar' else f'state value {n.value}'} of a {what}>"
    if n.op in ("loop", "if"):
        return {"for": "fori_loop", "while": "while_loop", "if": "cond"}[n.fn] + "(...)"
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
