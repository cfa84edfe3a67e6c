"""Invariants of HOP DAGs and programs, checked after rewrites in tests and debug runs.

``validate_dag(dag)`` raises AssertionError with a message naming the offending HOP when:

* a root or an input is not a HOP, a HOP is its own input, or the DAG has a cycle;
* two different HOP objects share one id (the rewriter and the recompiler key maps by id);
* a TWrite is not a root, has other than one input, has no name, is consumed by another HOP, is
  written twice, or precedes a side-effect root (roots are side effects in statement order, then
  TWrites);
* a literal has inputs or is not a scalar;
* a statement-only HOP (print, write, stop, assert) is not a root;
* data types are inconsistent: matrix multiply of a scalar, a transpose of a scalar, an element-wise
  operation on a matrix that is not a matrix, a full aggregate that is not a scalar;
* dims contradict the known dims of the inputs: element-wise operands not broadcast-compatible,
  ``%*%`` inner dims differ, a result's dims differ from what its inputs imply (matmult, transpose,
  element-wise, and generally what ``sizes.infer`` derives when both are known).

``validate_program(prog)`` checks every DAG of every block (main program and compiled functions),
and that predicate DAGs have exactly one root.
"""

from __future__ import annotations

import copy
from typing import Any

from lafuse.hops import sizes
from lafuse.hops.hop import FRAME, LIST, MATRIX, SCALAR, Hop
from lafuse.hops.program import Dag, ForBlock, GenericBlock, IfBlock, Program, WhileBlock, iter_blocks
from lafuse.hops.sizes import broadcast_dim
from lafuse.lang.builtins import FULL_AGGS

_STATEMENT_ONLY = {"print", "write", "stop", "assert"}
_ELEMENTWISE_MM = {"+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|",
                   "min", "max", "xor", "bitwAnd"}
# kinds whose dims sizes.infer derives from inputs alone (no hidden state such as TRead dims)
_INFER_CHECKED_KINDS = {"unary", "binary", "ternary", "agg_unary", "matmult", "reorg", "rix", "lix", "nary",
                        "datagen"}


def _fail(msg: str, h: Hop | None = None) -> None:
    where = ""
    if h is not None:
        where = f" at {h!r}"
        if h.span is not None and h.span.line:
            where += f" (line {h.span.line})"
    raise AssertionError(msg + where)


def _bcast_ok(a: int, b: int) -> bool:
    return a < 0 or b < 0 or a == b or a == 1 or b == 1


def user_size_conflict(h: Hop) -> str | None:
    """The script's own dimension error at ``h`` once sizes are known (a message in the runtime
    kernels' words), or None. Dynamic recompilation raises it before rewrites run, so the rewrite
    validator only ever sees DAGs whose conflicts are the compiler's fault."""
    if len(h.inputs) != 2:
        return None
    a, b = h.inputs
    if h.kind == "matmult" and a.cols >= 0 and b.rows >= 0 and a.cols != b.rows:
        return f"invalid dimensions for matrix multiplication (k1={a.cols}, k2={b.rows})"
    if h.kind == "binary" and h.op in _ELEMENTWISE_MM and a.dt == MATRIX and b.dt == MATRIX and \
            not (_bcast_ok(a.rows, b.rows) and _bcast_ok(a.cols, b.cols)):
        return f"element-wise '{h.op}' dimension mismatch: {a.rows}x{a.cols} vs {b.rows}x{b.cols}"
    return None


def validate_dag(dag: Dag, known: dict[str, Any] | None = None) -> None:
    roots = dag.roots
    for r in roots:
        if not isinstance(r, Hop):
            _fail(f"root {r!r} is not a HOP")
    # --- acyclic, inputs are HOPs, unique ids (iterative DFS with colors)
    color: dict[int, int] = {}  # id(obj) -> 1 on stack, 2 done
    by_id: dict[int, Hop] = {}
    order: list[Hop] = []
    for r in roots:
        stack: list[tuple[Hop, int]] = [(r, 0)]
        while stack:
            h, i = stack.pop()
            if i == 0:
                st = color.get(id(h))
                if st == 2:
                    continue
                if st == 1:
                    _fail("cycle in the HOP DAG", h)
                color[id(h)] = 1
                other = by_id.get(h.id)
                if other is not None and other is not h:
                    _fail(f"two HOPs share id {h.id}: {other!r} and", h)
                by_id[h.id] = h
            if i < len(h.inputs):
                c = h.inputs[i]
                if not isinstance(c, Hop):
                    _fail(f"input {i} is not a HOP ({c!r})", h)
                if c is h:
                    _fail("HOP is its own input", h)
                stack.append((h, i + 1))
                st = color.get(id(c))
                if st == 1:
                    _fail(f"cycle in the HOP DAG through {c!r}", h)
                if st is None:
                    stack.append((c, 0))
            else:
                color[id(h)] = 2
                order.append(h)
    # --- roots: side effects first, then TWrites
    seen_twrite = False
    names: set[str] = set()
    root_ids = {id(r) for r in roots}
    for r in roots:
        if r.op == "twrite":
            seen_twrite = True
            if len(r.inputs) != 1:
                _fail(f"TWrite has {len(r.inputs)} inputs, expected 1", r)
            if not r.name:
                _fail("TWrite without a variable name", r)
            if r.name in names:
                _fail(f"variable '{r.name}' is written twice by one DAG", r)
            names.add(r.name)  # type: ignore[arg-type]
        elif seen_twrite:
            _fail("a non-TWrite root follows the TWrites (side effects must come first)", r)
    for h in order:
        for c in h.inputs:
            if c.op == "twrite":
                _fail(f"TWrite {c!r} is used as an input", h)
        if h.op == "twrite" and id(h) not in root_ids:
            _fail("TWrite is not a root", h)
        if h.op in _STATEMENT_ONLY and h.params.get("side_effect") and id(h) not in root_ids:
            _fail("statement HOP is not a root", h)
        if h.kind == "literal":
            if h.inputs:
                _fail("literal with inputs", h)
            if h.dt != SCALAR:
                _fail(f"literal with data type {h.dt}", h)
        _check_types_and_dims(h, known)


def _check_types_and_dims(h: Hop, known: dict[str, Any] | None) -> None:
    ins = h.inputs
    kind, op = h.kind, h.op
    if kind == "matmult":
        if len(ins) != 2:
            _fail(f"matmult with {len(ins)} inputs", h)
        a, b = ins
        for x in (a, b):
            if x.dt in (SCALAR, FRAME, LIST):
                _fail(f"matrix multiply of a {x.dt} input {x!r}", h)
        if h.dt != MATRIX:
            _fail(f"matrix multiply with output data type {h.dt}", h)
        if a.cols >= 0 and b.rows >= 0 and a.cols != b.rows:
            _fail(f"matrix multiply inner dims differ: {a.rows}x{a.cols} %*% {b.rows}x{b.cols}", h)
        if h.rows >= 0 and a.rows >= 0 and h.rows != a.rows or h.cols >= 0 and b.cols >= 0 and h.cols != b.cols:
            _fail(f"matrix multiply result {h.rows}x{h.cols} from {a.rows}x{a.cols} %*% {b.rows}x{b.cols}", h)
    elif kind == "reorg" and op == "t":
        x = ins[0]
        if x.dt == SCALAR:
            _fail("transpose of a scalar", h)
        if h.dims_known and x.dims_known and (h.rows, h.cols) != (x.cols, x.rows):
            _fail(f"transpose result {h.rows}x{h.cols} of a {x.rows}x{x.cols} input", h)
    elif kind == "binary" and op in _ELEMENTWISE_MM and len(ins) == 2:
        a, b = ins
        if MATRIX in (a.dt, b.dt) and h.dt != MATRIX:
            _fail(f"element-wise '{op}' with a matrix input has data type {h.dt}", h)
        if a.dt == MATRIX and b.dt == MATRIX:
            if not (_bcast_ok(a.rows, b.rows) and _bcast_ok(a.cols, b.cols)):
                _fail(f"element-wise '{op}' dims are incompatible: {a.rows}x{a.cols} vs {b.rows}x{b.cols}", h)
            if h.dims_known and a.dims_known and b.dims_known and \
                    (h.rows, h.cols) != (broadcast_dim(a.rows, b.rows), broadcast_dim(a.cols, b.cols)):
                _fail(f"element-wise '{op}' result {h.rows}x{h.cols} from {a.rows}x{a.cols} and {b.rows}x{b.cols}", h)
        elif MATRIX in (a.dt, b.dt):
            m = a if a.dt == MATRIX else b
            if h.dims_known and m.dims_known and (h.rows, h.cols) != (m.rows, m.cols):
                _fail(f"matrix-scalar '{op}' result {h.rows}x{h.cols} from a {m.rows}x{m.cols} matrix", h)
    elif kind == "agg_unary" and op in FULL_AGGS and len(ins) == 1:
        if h.dt != SCALAR:
            _fail(f"full aggregate '{op}' with data type {h.dt}", h)
        if ins[0].dt == SCALAR:
            _fail(f"full aggregate '{op}' of a scalar", h)
    if h.dt == MATRIX and kind in _INFER_CHECKED_KINDS and h.dims_known:
        probe = copy.copy(h)
        probe.inputs = list(h.inputs)
        probe.params = dict(h.params)
        sizes.infer(probe, known)
        for what, have, want in (("rows", h.rows, probe.rows), ("cols", h.cols, probe.cols)):
            if want >= 0 and have != want:
                _fail(f"{what} {have} contradict the {want} its inputs imply", h)


def validate_program(prog: Program, known: dict[str, Any] | None = None) -> None:
    """``validate_dag`` on every DAG of the program and of its compiled functions."""
    lists = [prog.blocks] + [f.blocks for f in prog.functions.values() if f.blocks]
    for blocks in lists:
        for b in iter_blocks(blocks):
            if isinstance(b, GenericBlock):
                validate_dag(b.dag, known)
            elif isinstance(b, (IfBlock, WhileBlock)):
                _pred(b.pred, known, type(b).__name__)
            elif isinstance(b, ForBlock):
                for d in (b.start, b.stop, b.incr):
                    if d is not None:
                        _pred(d, known, "ForBlock")


def _pred(d: Dag, known: dict[str, Any] | None, what: str) -> None:
    if len(d.roots) != 1:
        raise AssertionError(f"{what} predicate DAG has {len(d.roots)} roots, expected 1")
    if d.roots[0].op == "twrite":
        raise AssertionError(f"{what} predicate DAG root is a TWrite")
    validate_dag(d, known)
