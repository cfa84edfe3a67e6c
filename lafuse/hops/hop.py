"""High-level operators (HOPs): the nodes of the per-block DAGs the optimizer works on.

A HOP names its operation (``op``), its HOP kind (for EXPLAIN and for rules that work on a whole
kind), its inputs, its data and value type, its output size (``rows``, ``cols``, ``nnz``; -1 means
unknown), a memory estimate and the DML span it came from.
"""

from __future__ import annotations

import itertools
from typing import Any

from lafuse.errors import NO_SPAN, Span

_ids = itertools.count(1)

# data types
SCALAR, MATRIX, FRAME, LIST, UNKNOWN = "scalar", "matrix", "frame", "list", "unknown"
# value types
DOUBLE, INT, BOOLEAN, STRING = "double", "int", "boolean", "string"

# HOP kinds, as in SystemDS: data, literal, datagen, unary, binary, ternary, agg_unary, matmult,
# reorg, rix (right indexing), lix (left indexing), nary, param_builtin, builtin, funcall
KIND_ABBREV = {
    "data": "", "literal": "lit", "datagen": "dg", "unary": "u", "binary": "b", "ternary": "t",
    "agg_unary": "ua", "matmult": "ba", "reorg": "r", "rix": "rix", "lix": "lix", "nary": "n",
    "param_builtin": "pb", "builtin": "bi", "funcall": "fcall", "extract": "x",
}


class Hop:
    __slots__ = (
        "id", "op", "kind", "inputs", "dt", "vt", "rows", "cols", "nnz", "mem", "out_mem",
        "exec_type", "span", "params", "name", "value",
    )

    def __init__(
        self,
        op: str,
        kind: str,
        inputs: list[Hop] | None = None,
        dt: str = UNKNOWN,
        vt: str = UNKNOWN,
        span: Span = NO_SPAN,
        params: dict[str, Any] | None = None,
        name: str | None = None,
        value: Any = None,
    ):
        self.id = next(_ids)
        self.op = op
        self.kind = kind
        self.inputs: list[Hop] = list(inputs or [])
        self.dt = dt
        self.vt = vt
        self.rows = -1
        self.cols = -1
        self.nnz = -1
        self.mem = -1.0  # operation memory estimate in bytes (inputs + output)
        self.out_mem = -1.0  # output memory estimate in bytes
        self.exec_type = "CP"
        self.span = span
        self.params: dict[str, Any] = params or {}
        self.name = name  # variable name of data ops (tread/twrite)
        self.value = value  # literal value

    # ---- helpers used by rewrites and sizes
    @property
    def is_literal(self) -> bool:
        return self.kind == "literal"

    @property
    def is_matrix(self) -> bool:
        return self.dt == MATRIX

    @property
    def is_scalar(self) -> bool:
        return self.dt == SCALAR

    @property
    def dims_known(self) -> bool:
        return self.rows >= 0 and self.cols >= 0

    def set_dims(self, rows: int, cols: int, nnz: int = -1) -> None:
        self.rows, self.cols, self.nnz = int(rows), int(cols), int(nnz)

    def copy_dims(self, other: Hop) -> None:
        self.rows, self.cols, self.nnz = other.rows, other.cols, other.nnz

    def label(self) -> str:
        if self.kind == "literal":
            return f"LiteralOp {self.value!r}" if not isinstance(self.value, str) else f"LiteralOp \"{self.value}\""
        if self.kind == "data":
            return f"{self.op.capitalize() if self.op != 'tread' else 'TRead'} {self.name}".replace(
                "Twrite", "TWrite").replace("Pwrite", "PWrite").replace("Pread", "PRead")
        if self.kind == "funcall":
            return f"fcall {self.params.get('fname')}"
        ab = KIND_ABBREV.get(self.kind, self.kind)
        return f"{ab}({self.op})"

    def __repr__(self) -> str:
        ins = ",".join(str(i.id) for i in self.inputs)
        return f"({self.id}) {self.label()} ({ins})"


def literal(value: Any, span: Span = NO_SPAN) -> Hop:
    if isinstance(value, bool):
        vt = BOOLEAN
    elif isinstance(value, int):
        vt = INT
    elif isinstance(value, float):
        vt = DOUBLE
    elif isinstance(value, str):
        vt = STRING
    else:
        vt = UNKNOWN
    h = Hop("lit", "literal", [], SCALAR, vt, span, value=value)
    h.rows = h.cols = 0
    h.nnz = -1
    return h


def walk(roots: list[Hop]) -> list[Hop]:
    """All HOPs reachable from ``roots`` in a topological order (inputs before users)."""
    seen: set[int] = set()
    order: list[Hop] = []
    for r in roots:
        stack: list[tuple[Hop, int]] = [(r, 0)]
        while stack:
            h, i = stack.pop()
            if i == 0 and h.id in seen:
                continue
            if i < len(h.inputs):
                stack.append((h, i + 1))
                c = h.inputs[i]
                if c.id not in seen:
                    stack.append((c, 0))
            else:
                if h.id not in seen:
                    seen.add(h.id)
                    order.append(h)
    return order
