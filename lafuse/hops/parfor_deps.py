"""Loop-dependency analysis of parfor bodies, in the spirit of SystemDS's ParForStatementBlock.

A parfor loop promises that its iterations are independent; SystemDS checks the promise at
validation time and rejects a loop that breaks it, and so does lafuse (``check=0`` in the loop's
header turns the check off, as in SystemDS). Conservative like SystemDS's: a loop it cannot prove
independent is rejected. Verified against SystemDS 3.4 on the cases of ``tests/lang/test_parfor_deps.py``.

* A variable that exists before the loop and is assigned as a whole in the body (``s = s + i``,
  ``y = i``, ``R = R + 1``) is a loop-carried dependency, even if only one branch assigns it
  (SystemDS: the iterations' copies of it cannot be merged).
* A variable assigned through left indexing (``R[i, 1] = ...``) is a result variable. Every pair of
  its accesses in the body -- write/write, each write with itself in another iteration, and
  write/read -- must touch disjoint cells in different iterations. Each index is brought to a
  linear form ``sum(c_v * v) + c`` over the loop variable, the variables of loops nested in the
  body (free: any value in each iteration) and variables fixed before the loop (which must cancel
  out); two accesses are disjoint if some dimension is provably disjoint:

  - both indices linear with the same form that depends on the loop variable and on no nested loop
    variable (``R[i, 1]`` with itself: equal only in the same iteration), or
  - no integer solution of ``f1(i1, ...) = f2(i2, ...)`` by the GCD test (``R[2*i, 1]`` and
    ``R[2*i-1, 1]``), or two different constants.

  Ranges (``R[i:(i+1), 1]``), whole dimensions (``R[, i]`` is disjoint by its column only), whole
  reads (``sum(R)``) and indices through variables assigned in the body (``k = i; R[k, 1]``) prove
  nothing; SystemDS rejects those as well.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from lafuse.errors import DMLValidationError, Span
from lafuse.lang import ast as A

Lin = dict[str, int]  # variable -> coefficient; "" -> constant term
ALL = "all"  # a whole dimension (R[, j])


@dataclass
class _Access:
    dims: tuple[object, object]  # per dimension: ALL, ("one", Lin | None) or ("range", Lin | None, Lin | None)
    write: bool
    span: Span


def check(loop: A.For, defined_before: dict[str, str]) -> None:
    """Raise a located validation error if the parfor ``loop`` may carry a dependency between its
    iterations; ``defined_before``: the data type of each variable that exists when the loop starts."""
    if _check_disabled(loop):
        return
    body = loop.body
    nested = _loop_vars(body)
    assigned = _whole_writes(body)  # name -> first span
    accum = _accumulated(body)  # matrices summed into by +=: results, as in SystemDS
    free = nested - {loop.var}
    unknown = set(assigned) - nested  # values that change inside an iteration
    bad: dict[str, Span] = {}
    for name, span in assigned.items():
        if name in defined_before and name != loop.var and name not in nested:
            if not (name in accum and defined_before[name] == "matrix"):
                bad.setdefault(name, span)
    accesses: dict[str, list[_Access]] = {}
    for name, acc in _accesses(body, loop.var, free, unknown):
        accesses.setdefault(name, []).append(acc)
    for name, accs in accesses.items():
        if name in bad or name not in defined_before:
            continue  # variables made in the body are private to an iteration
        if name in accum and defined_before[name] == "matrix":
            # an accumulated result (R += ...) may not be read or written otherwise in the body
            other = [a for a in accs if a.span not in accum[name]]
            if other:
                bad[name] = other[0].span
            continue
        if name in assigned:
            continue
        writes = [a for a in accs if a.write]
        if not writes:
            continue
        # reads indexed by a nested loop's variable (R[1, j] in for (j ...)) pass, as in SystemDS 3.4
        # (its bounds test accepts them) although iteration i may read what iteration j writes
        reads = [a for a in accs if not a.write and not _uses(a, free)]
        for k, w in enumerate(writes):
            clash = next((o for o in writes[k:] + reads if not _disjoint(w, o, loop.var, free)), None)
            if clash is not None:
                bad.setdefault(name, min(w.span, clash.span, key=lambda s: (s.line, s.col)))
                break
    if bad:
        names = sorted(bad, key=lambda n: (bad[n].line, bad[n].col))
        raise DMLValidationError(
            "parfor loop dependency analysis: inter-iteration (loop-carried) dependencies detected for "
            f"variable(s): {', '.join(names)}; ensure the iterations are independent (check=0 turns this "
            "check off)", bad[names[0]])


def _check_disabled(loop: A.For) -> bool:
    v = loop.options.get("check")
    return isinstance(v, (A.Num, A.Bool)) and not v.value


# ---------------------------------------------------------------- what the body assigns and reads

def _walk_stmts(stmts: list[A.Stmt]) -> Iterator[A.Stmt]:
    for s in stmts:
        yield s
        if isinstance(s, A.If):
            yield from _walk_stmts(s.then_body)
            yield from _walk_stmts(s.else_body)
        elif isinstance(s, (A.For, A.While)):
            yield from _walk_stmts(s.body)


def _loop_vars(body: list[A.Stmt]) -> set[str]:
    return {s.var for s in _walk_stmts(body) if isinstance(s, A.For)}


def _whole_writes(body: list[A.Stmt]) -> dict[str, Span]:
    out: dict[str, Span] = {}
    for s in _walk_stmts(body):
        if isinstance(s, A.Assign) and not s.target.indexed and s.target.list_key is None:
            out.setdefault(s.target.name, s.span)
        elif isinstance(s, A.MultiAssign):
            for t in s.targets:
                out.setdefault(t.name, t.span)
    return out


def _accumulated(body: list[A.Stmt]) -> dict[str, set[Span]]:
    """Variables every whole write of which is a ``+=`` (with the spans of those statements)."""
    acc: dict[str, set[Span]] = {}
    plain: set[str] = set()
    for s in _walk_stmts(body):
        if isinstance(s, A.Assign) and not s.target.indexed and s.target.list_key is None:
            if s.accumulate:
                acc.setdefault(s.target.name, set()).update({s.span, s.target.span})
            else:
                plain.add(s.target.name)
        elif isinstance(s, A.MultiAssign):
            plain.update(t.name for t in s.targets)
    return {k: v for k, v in acc.items() if k not in plain}


def _uses(a: _Access, names: set[str]) -> bool:
    for d in a.dims:
        if isinstance(d, tuple):
            for f in d[1:]:
                if f is not None and set(f) & names:
                    return True
    return False


def _exprs(s: A.Stmt) -> Iterator[A.Expr]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(s, A.Assign):
        yield s.expr
        t = s.target
        for r in (t.rows, t.cols):
            if r is not None:
                yield r.lo
                if r.hi is not None:
                    yield r.hi
        if t.list_key is not None:
            yield t.list_key
    elif isinstance(s, A.MultiAssign):
        yield s.expr
    elif isinstance(s, A.CallStmt):
        yield s.call
    elif isinstance(s, (A.If, A.While)):
        yield s.pred
    elif isinstance(s, A.For):
        yield from (e for e in (s.start, s.stop, s.incr) if e is not None)


def _sub(e: A.Node) -> Iterator[A.Node]:
    """Every node of an expression tree, iteratively (expressions may be deep)."""
    stack: list[A.Node] = [e]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, A.BinOp):
            stack += [n.right, n.left]
        elif isinstance(n, A.UnOp):
            stack.append(n.operand)
        elif isinstance(n, A.Call):
            stack += [a.value for a in reversed(n.args)]
        elif isinstance(n, A.Index):
            stack += [x for r in (n.cols, n.rows) if r is not None for x in (r.hi, r.lo) if x is not None]
        elif isinstance(n, A.ListIndex):
            stack += [x for x in (n.hi, n.key) if x is not None]


def _accesses(body: list[A.Stmt], var: str, free: set[str], unknown: set[str]) -> Iterator[tuple[str, _Access]]:
    def dim(r: A.Range | None) -> object:
        if r is None:
            return ALL
        if r.hi is None:
            return ("one", _linear(r.lo, unknown))
        return ("range", _linear(r.lo, unknown), _linear(r.hi, unknown))

    whole = (ALL, ALL)
    for s in _walk_stmts(body):
        if isinstance(s, A.Assign) and (s.target.indexed or s.target.list_key is not None):
            t = s.target
            dims = (dim(t.rows), dim(t.cols)) if t.indexed else (("one", _linear(t.list_key, unknown)), ALL)
            yield t.name, _Access(dims, True, t.span)
            if s.accumulate:  # R[i, 1] += x reads what it writes
                yield t.name, _Access(dims, False, t.span)
        for e in _exprs(s):
            for n in _sub(e):
                if isinstance(n, A.Var):
                    yield n.name, _Access(whole, False, n.span)
                elif isinstance(n, A.Index):
                    yield n.name, _Access((dim(n.rows), dim(n.cols)), False, n.span)
                elif isinstance(n, A.ListIndex):
                    row = ("one", _linear(n.key, unknown)) if n.hi is None else \
                        ("range", _linear(n.key, unknown), _linear(n.hi, unknown))
                    yield n.name, _Access((row, ALL), False, n.span)


# ---------------------------------------------------------------- linear index functions

def _linear(e: A.Expr | None, unknown: set[str]) -> Lin | None:
    """``e`` as integer coefficients of variables plus a constant, or None (not linear, not integer,
    or through a variable whose value changes inside an iteration)."""
    if e is None:
        return None
    if isinstance(e, A.Num):
        v = e.value
        if isinstance(v, float):
            if not v.is_integer():
                return None
            v = int(v)
        return {"": v}
    if isinstance(e, A.Var):
        return None if e.name in unknown else {e.name: 1}
    if isinstance(e, A.UnOp) and e.op in "+-":
        x = _linear(e.operand, unknown)
        return None if x is None else (x if e.op == "+" else {k: -c for k, c in x.items()})
    if isinstance(e, A.BinOp) and e.op in ("+", "-", "*"):
        a, b = _linear(e.left, unknown), _linear(e.right, unknown)
        if a is None or b is None:
            return None
        if e.op == "*":
            if set(a) <= {""}:
                a, b = b, a
            if not set(b) <= {""}:
                return None  # a product of variables
            f = b.get("", 0)
            return {k: c * f for k, c in a.items() if c * f}
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, c in b.items():
            out[k] = out.get(k, 0) + sign * c
        return {k: c for k, c in out.items() if c}
    return None


def _disjoint(a: _Access, b: _Access, var: str, free: set[str]) -> bool:
    """True if access ``a`` in one iteration and ``b`` in another never touch the same cell."""
    return any(_dim_disjoint(x, y, var, free) for x, y in zip(a.dims, b.dims))


def _dim_disjoint(x: object, y: object, var: str, free: set[str]) -> bool:
    if x == ALL or y == ALL:
        return False
    assert isinstance(x, tuple) and isinstance(y, tuple)
    if x[0] == "range" or y[0] == "range":
        return _const_ranges_disjoint(x, y)
    f, g = x[1], y[1]
    if f is None or g is None:
        return False
    if f == g:  # the same index: equal only within one iteration, if it moves with the loop variable
        return f.get(var, 0) != 0 and not (set(f) & free)
    # f(i1, ...) = g(i2, ...): the loop variable and nested loop variables are unknowns of each side,
    # variables fixed before the loop must cancel; no integer solution when the gcd of the unknowns'
    # coefficients does not divide the constant difference
    fixed = (set(f) | set(g)) - {"", var} - free
    if any(f.get(v, 0) != g.get(v, 0) for v in fixed):
        return False
    coefs = [c for h in (f, g) for k, c in h.items() if k == var or k in free]
    d = g.get("", 0) - f.get("", 0)
    gcd = math.gcd(*coefs) if coefs else 0
    return d != 0 if gcd == 0 else d % gcd != 0


def _const_ranges_disjoint(x: tuple, y: tuple) -> bool:
    def bounds(d: tuple) -> tuple[int, int] | None:
        lo, hi = (d[1], d[1]) if d[0] == "one" else (d[1], d[2])
        if lo is None or hi is None or set(lo) - {""} or set(hi) - {""}:
            return None
        return lo.get("", 0), hi.get("", 0)

    bx, by = bounds(x), bounds(y)
    return bx is not None and by is not None and (bx[1] < by[0] or by[1] < bx[0])
