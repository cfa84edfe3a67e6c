"""Plan pictures: HOP DAGs and physical plans as Graphviz graphs (``lafuse explain --format svg``,
``Matrix.visualize``, a lazy matrix in Jupyter).

A HOP DAG (the program stages, up to ``sizes``) is one node a HOP with its size. A physical plan (the
block stages, from ``fuse``) is one node an instruction, with its execution type, output format and
cost estimate; a fused operator is a cluster (its template, cost) holding the operations of the plan
it generates code for, fed by the instructions whose results it reads. Text only: rendering (SVG,
PNG) is Graphviz's ``dot`` binary, called by :func:`render`.
"""

from __future__ import annotations

import shutil
from typing import Any

from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.program import Dag
from lafuse.plan.instructions import DASK, Plan

FORMATS = ("dot", "svg", "png")
_FILL = {"spoof": "#e8f0fe", DASK: "#fde7c8"}


class GraphvizMissing(RuntimeError):
    """Rendering needs Graphviz's ``dot`` binary (``make install`` installs it; ``--format dot`` does not)."""


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _size(h: Hop) -> str:
    if h.dt != MATRIX:
        return f"{h.dt}.{h.vt}"
    nnz = f", nnz {h.nnz}" if h.nnz >= 0 and h.rows >= 0 and h.nnz != h.rows * h.cols else ""
    return f"{h.rows} x {h.cols}{nnz}"


def _secs(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} us"


class Graph:
    """A DOT digraph built up from DAGs and plans, one cluster each (a program's blocks)."""

    def __init__(self, title: str = "") -> None:
        self.lines = ["digraph lafuse {", "  rankdir=BT;", '  node [fontname="Helvetica", fontsize=10];',
                      '  edge [arrowsize=0.6];']
        if title:
            self.lines.append(f'  label="{_esc(title)}"; labelloc=t;')
        self.n = 0

    def _id(self) -> str:
        self.n += 1
        return f"n{self.n}"

    def node(self, label: str, shape: str = "box", fill: str | None = None, indent: str = "  ") -> str:
        nid = self._id()
        style = f', style="filled", fillcolor="{fill}"' if fill else ""
        self.lines.append(f'{indent}{nid} [label="{_esc(label)}", shape={shape}{style}];')
        return nid

    def edge(self, a: str, b: str) -> None:
        self.lines.append(f"  {a} -> {b};")

    def open(self, label: str, fill: str | None = None, indent: str = "  ") -> str:
        cid = self._id()
        style = f' style="filled,rounded"; fillcolor="{fill}";' if fill else " style=rounded;"
        self.lines.append(f'{indent}subgraph cluster_{cid} {{ label="{_esc(label)}";{style}')
        return cid

    def close(self, indent: str = "  ") -> None:
        self.lines.append(f"{indent}}}")

    def source(self) -> str:
        return "\n".join([*self.lines, "}"]) + "\n"

    # ------------------------------------------------------------ a HOP DAG
    def dag(self, dag: Dag, title: str) -> None:
        """One node a HOP (label, size), edges input -> consumer, in a cluster named ``title``."""
        self.open(title)
        ids: dict[int, str] = {}
        for h in dag.hops():
            label = f"{h.label()}\n{_size(h)}"
            ids[h.id] = self.node(label, "ellipse" if h.dt != MATRIX else "box",
                                  _FILL["spoof"] if h.kind == "spoof" else None, "    ")
        self.close()
        for h in dag.hops():
            for i in h.inputs:
                if i.id in ids:
                    self.edge(ids[i.id], ids[h.id])

    # ------------------------------------------------------------ a physical plan
    def plan(self, plan: Plan, title: str, costs: dict[int, float] | None = None) -> None:
        """One node an instruction (and a constant, a variable written), a fused operator a cluster of
        its generated plan's operations; ``costs``: estimated seconds of instruction ``id(ins)``."""
        costs = costs or {}
        self.open(title)
        reg: dict[int, str] = {}
        for r, v in sorted(plan.constants.items()):
            reg[r] = self.node(repr(v), "plaintext", indent="    ")
        pending: list[tuple[str, str]] = []
        for ins in plan.instructions:
            h = ins.hop
            cost = costs.get(id(ins))
            head = ins.method or ins.opcode
            extra = [_size(h)]
            if h.dt == MATRIX and ins.out_fmt:
                extra.append(ins.out_fmt)
            if ins.exec_type == DASK:
                extra.append(f"DASK blocks {ins.block}" if ins.block else "DASK")
            if cost is not None:
                extra.append(_secs(cost))
            label = f"{head}{' ' + h.name if h.name else ''}\n" + ", ".join(extra)
            fill = _FILL[DASK] if ins.exec_type == DASK else None
            if ins.cplan is not None:
                out = self._fused(ins, label, reg, pending)
            else:
                out = self.node(label, "box" if h.dt == MATRIX else "ellipse", fill, "    ")
                pending += [(reg[a], out) for a in ins.args if a in reg]
            reg[ins.out] = out
        for name, r in plan.writes:
            if r in reg:
                pending.append((reg[r], self.node(f"write {name}", "note", indent="    ")))
        self.close()
        for a, b in pending:
            self.edge(a, b)

    def _fused(self, ins: Any, label: str, reg: dict[int, str], pending: list[tuple[str, str]]) -> str:
        """A fused operator: a cluster with its CPlan's operations; the operator's own node is its output."""
        p = ins.cplan
        self.open(f"{p.template} template", _FILL["spoof"], "    ")
        seen: dict[int, str] = {}
        stack = list(p.all_roots())
        order = []
        while stack:  # (postorder of the CNodes: shared subexpressions once)
            n = stack.pop()
            if id(n) in seen:
                continue
            seen[id(n)] = ""
            order.append(n)
            stack.extend(n.children)
        for n in reversed(order):
            if n.op == "input":
                text = f"in{n.arg} [{n.access}]"
            elif n.op == "literal":
                text = repr(n.arg)
            else:
                text = n.op
            seen[id(n)] = self.node(text, "ellipse" if n.op != "literal" else "plaintext", indent="      ")
            if n.op == "input":
                pos = int(n.arg)
                if pos < len(ins.args) and ins.args[pos] in reg:
                    pending.append((reg[ins.args[pos]], seen[id(n)]))
            for c in n.children:
                pending.append((seen[id(c)], seen[id(n)]))
        out = self.node(label, "box", "#c6dafc", "      ")
        for r in p.all_roots():
            pending.append((seen[id(r)], out))
        self.close("    ")
        return out


def render(source: str, fmt: str) -> bytes:
    """``source`` (DOT) as ``fmt``: "dot" as is, "svg"/"png" by Graphviz's ``dot``; GraphvizMissing
    with the way to install it when ``dot`` is not on the PATH."""
    if fmt == "dot":
        return source.encode()
    if fmt not in FORMATS:
        raise ValueError(f"unknown picture format {fmt!r}: one of {', '.join(FORMATS)}")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissing("drawing a plan as svg or png needs Graphviz's 'dot' program, which is not "
                              "on the PATH: install it (make install does: apt-get install graphviz), "
                              "or ask for --format dot")
    import graphviz  # (the Python package runs dot with the right arguments and reports its errors)

    return graphviz.Source(source).pipe(format=fmt, engine="dot")
