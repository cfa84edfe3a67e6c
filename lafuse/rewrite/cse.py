"""Common subexpression elimination over one HOP DAG (SystemDS RewriteCommonSubexpressionElimination).

Two HOPs merge when they have the same operation, kind, types, variable name, parameters and the
very same (already merged) inputs; literals merge by value and Python type (``1`` and ``1.0`` and
``TRUE`` stay apart, ``-0.0`` and ``0.0`` too). Commutative numeric operations compare their inputs
as a set (``A*B`` merges with ``B*A``: IEEE multiplication and addition commute exactly).
Nondeterministic and side-effecting HOPs (rand, sample, time, read, print, write, stop, function
calls, TWrites) never merge: running them once instead of twice would change the program.
"""

from __future__ import annotations

from typing import Any

from lafuse.hops.hop import BOOLEAN, DOUBLE, INT, MATRIX, Hop, walk
from lafuse.hops.program import Dag
from lafuse.rewrite.core import Ctx, is_impure, rule

_COMMUTATIVE = {"+", "*", "==", "!=", "&", "|"}


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float):
        return ("f", repr(v))
    if isinstance(v, (str, int, bool)) or v is None:
        return (type(v).__name__, v)
    return ("r", repr(v))


def cse_key(h: Hop) -> tuple | None:
    """Structural key of ``h`` over its inputs' identities, or None when ``h`` must never merge."""
    if is_impure(h):
        return None
    if h.is_literal:
        return ("lit", type(h.value).__name__, repr(h.value))
    ins: tuple = tuple(id(i) for i in h.inputs)
    if h.kind == "binary" and h.op in _COMMUTATIVE and len(ins) == 2 and all(
            i.dt == MATRIX or i.vt in (INT, DOUBLE, BOOLEAN) for i in h.inputs):
        ins = tuple(sorted(ins))
    try:
        params = _freeze(h.params)
    except TypeError:
        return None
    return (h.op, h.kind, h.dt, h.vt, h.name, params, ins)


@rule("cse", scope="dag")
def eliminate_common_subexpressions(dag: Dag, ctx: Ctx) -> bool:
    """Merge structurally identical HOPs, bottom-up.

    ``a = sum(X * Y); b = sum(X * Y) + 1`` -> one ``X * Y`` and one ``sum`` feeding both;
    ``rand(rows=2, cols=2) + rand(rows=2, cols=2)`` keeps both rands.
    """
    rep: dict[int, Hop] = {}  # id(hop) -> representative
    table: dict[tuple, Hop] = {}
    changed = False
    for h in walk(dag.roots):
        if any(id(i) in rep for i in h.inputs):
            h.inputs = [rep.get(id(i), i) for i in h.inputs]
        key = cse_key(h)
        if key is None:
            continue
        first = table.get(key)
        if first is None:
            table[key] = h
        elif first is not h:
            rep[id(h)] = first
            changed = True
    if changed:
        dag.roots[:] = [rep.get(id(r), r) for r in dag.roots]
        ctx.invalidate()
    return changed
