"""Staged control flow: ``lf.fori_loop``, ``lf.while_loop`` and ``lf.cond`` call their Python functions
once, on lazy stand-ins for the state, and become DML ``for``, ``while`` and ``if`` blocks of the one
script ``compute`` emits (as JAX's ``lax`` control flow becomes loops of the compiled program).

Why: a Python loop over lazy values either builds one expression of every iteration (unrolled: a DAG
that grows with the iterations, compiled whole) or computes each iteration (``persist``: a plan
boundary each iteration, and a compile for each distinct iteration). A staged loop is compiled once,
its body one HOP DAG that the runtime recompiles when sizes change, as the same loop written in DML:
the same plans (paper 003 §2: a script's runtime plan holds one program block a loop body,
recompiled at run time where its sizes are unknown).

The rules are JAX's: the state is a value or a tuple, list or dict of them (lazy matrices and
scalars, NumPy and SciPy arrays, Python numbers); a body returns state of the same structure and
kinds (a matrix stays a matrix) and, where both are known, the same shapes. A value built inside a
body is a value only there: return it in the state to use it after the loop. Nothing is computed
inside a body (``float(s)``, ``np.asarray(M)``, a Python ``if`` on a lazy scalar): the body runs
once, when traced, not once an iteration; ``lf.cond`` and ``lf.while_loop`` are the control flow
that depends on values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lafuse.api import expr as E
from lafuse.api.expr import MATRIX, OTHER, SCALAR, Node, Scope


class ScopeError(TypeError):
    """A value built inside a loop or branch body, used outside it (or computed while tracing)."""


@dataclass
class Body:
    """A traced body: the state's stand-ins in it (``carries``; none for a branch) and its results."""

    scope: Scope
    carries: list[Node]
    results: list[Node]


@dataclass
class Loop:
    """A "loop" node's value. ``kind``: "for" (``index``: its 0-based variable; bounds: the node's first
    two arguments) or "while" (``cond``: the condition, traced in the body's scope on the same
    stand-ins)."""

    kind: str
    body: Body
    index: Node | None = None
    cond: Node | None = None


@dataclass
class Branch:
    """An "if" node's value: both bodies (the predicate: the node's first argument)."""

    then: Body
    orelse: Body


# ---------------------------------------------------------------- state trees
def _flatten(tree: Any, leaves: list[Any]) -> Any:
    """``tree``'s structure (its leaves appended to ``leaves``): tuples (named too), lists and dicts."""
    if isinstance(tree, tuple):
        return (type(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, list):
        return (list, [_flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        return (dict, list(tree), [_flatten(t, leaves) for t in tree.values()])
    if tree is None:
        raise TypeError("None is not a loop state value (a lazy value, an array or a number)")
    leaves.append(tree)
    return None


def _build(struct: Any, leaves: Any) -> Any:
    if struct is None:
        return next(leaves)
    if struct[0] is dict:
        return {k: _build(s, leaves) for k, s in zip(struct[1], struct[2])}
    items = [_build(s, leaves) for s in struct[1]]
    if struct[0] in (tuple, list):
        return struct[0](items)
    return struct[0](*items)  # a named tuple


def _describe(struct: Any) -> str:
    if struct is None:
        return "a value"
    if struct[0] is dict:
        return f"a dict with keys {struct[1]}"
    return f"a {struct[0].__name__} of {len(struct[1])}"


def _nodes(leaves: list[Any]) -> list[Node]:
    from lafuse.api.lazy import as_node

    return [as_node(v) for v in leaves]


# ---------------------------------------------------------------- tracing
def _trace(scope: Scope, fn: Callable[..., Any], *args: Any) -> Any:
    E.SCOPES.append(scope)
    try:
        return fn(*args)
    finally:
        E.SCOPES.pop()


def _stand_ins(scope: Scope, inits: list[Node]) -> list[Node]:
    return _trace(scope, lambda: [Node("carry", n.kind, shape=n.shape, value=k, span=scope.span)
                                  for k, n in enumerate(inits)])


def _results(what: str, got: Any, struct: Any, kinds: list[Node], span: Any) -> list[Node]:
    """The body's results as nodes, checked against the state's structure, kinds and shapes."""
    leaves: list[Any] = []
    try:
        got_struct = _flatten(got, leaves)
    except TypeError as e:
        raise TypeError(f"{what} body: {e}") from None
    if not _same(got_struct, struct):
        raise TypeError(f"{what} body returned {_describe(got_struct)}; its state is {_describe(struct)}")
    nodes = _nodes(leaves)
    for k, (n, ref) in enumerate(zip(nodes, kinds)):
        if n.kind != ref.kind:
            raise TypeError(f"{what}: state value {k} is a {ref.kind} and the body returned a {n.kind}")
        if n.kind == MATRIX and all(d >= 0 for d in (*n.shape, *ref.shape)) and n.shape != ref.shape:
            raise E.ShapeError(f"{what}: state value {k} is {ref.shape[0]}x{ref.shape[1]} and the body "
                               f"returned a {n.shape[0]}x{n.shape[1]} matrix (a loop's state keeps its "
                               f"shape)", span)
    return nodes


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if a[0] is not b[0] or len(a[-1]) != len(b[-1]) or (a[0] is dict and a[1] != b[1]):
        return False
    return all(_same(x, y) for x, y in zip(a[-1], b[-1]))


def _free(roots: list[Node], scope: Scope) -> list[Node]:
    """The values from enclosing scopes that a body reads (they are computed before its block)."""
    free: list[Node] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op in ("lit", "input"):
            continue
        if n.scope is scope:
            stack.extend(n.inputs())
        elif scope.within(n.scope):
            free.append(n)
        else:
            raise leaked(n)
    return free


def leaked(n: Node) -> ScopeError:
    """The error for ``n``, built in a body, reached from outside that body."""
    from lafuse.api.emit import describe

    s = n.scope
    assert s is not None
    where = f"the body of the {s.what} at {s.span.file}:{s.span.line}"
    if s in E.SCOPES:
        return ScopeError(f"{describe(n)} cannot be computed or used outside {where}: a body is traced "
                          f"once, not run each iteration; return the value in the state (lf.cond and "
                          f"lf.while_loop are control flow that depends on values)")
    return ScopeError(f"{describe(n)} was built inside {where} and is used outside it: return it from "
                      f"the body as part of the state")


def _outs(n: Node, kinds: list[Node], results: list[list[Node]]) -> list[Node]:
    """The node's results as "out" nodes, each with the shape every body agrees on (else unknown)."""
    outs = []
    for k, ref in enumerate(kinds):
        dims = [ref.shape[d] if all(r[k].shape[d] == ref.shape[d] for r in results) else -1 for d in (0, 1)]
        outs.append(E.output(n, k, ref.kind, (dims[0], dims[1])))
    return outs


def _wrap(nodes: list[Node], struct: Any) -> Any:
    from lafuse.api.lazy import wrap

    return _build(struct, iter([wrap(n) for n in nodes]))


# ---------------------------------------------------------------- the API
def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``body_fun(i, state)`` for ``i`` from ``lower`` to ``upper - 1`` (a lazy scalar in the body), as
    one DML ``for`` loop: ``state = init_val`` and, each iteration, ``state = body_fun(i, state)``.
    Bounds are Python integers or lazy scalars; no iteration when ``upper <= lower``."""
    span = E.origin()
    leaves: list[Any] = []
    struct = _flatten(init_val, leaves)
    inits = _nodes(leaves)
    if isinstance(lower, int) and isinstance(upper, int) and upper <= lower:
        return _wrap(inits, struct)
    lo, hi = _nodes([lower, upper])
    for b in (lo, hi):
        if b.kind != SCALAR:
            raise TypeError(f"fori_loop bounds are integers or lazy scalars, not a {b.kind}")
    scope = Scope(E.SCOPES[-1], "fori_loop", span)
    carries = _stand_ins(scope, inits)
    index = _trace(scope, lambda: Node("loopvar", SCALAR, span=span))
    got = _trace(scope, body_fun, _wrap([index], None), _wrap(carries, struct))
    results = _results("fori_loop", got, struct, inits, span)
    loop = Loop("for", Body(scope, carries, results), index=index)
    n = Node("loop", OTHER, (lo, hi, *inits, *_free(results, scope)), "for", value=loop, nout=len(inits),
             span=span)
    return _wrap(_outs(n, inits, [results]), struct)


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``state = init_val``; while ``cond_fun(state)``: ``state = body_fun(state)``, as one DML
    ``while`` loop (the condition a lazy scalar, or a Python bool)."""
    span = E.origin()
    leaves: list[Any] = []
    struct = _flatten(init_val, leaves)
    inits = _nodes(leaves)
    scope = Scope(E.SCOPES[-1], "while_loop", span)
    carries = _stand_ins(scope, inits)
    cond = _nodes([_trace(scope, cond_fun, _wrap(carries, struct))])[0]
    if cond.kind != SCALAR:
        raise TypeError(f"while_loop condition is a {cond.kind}; it must be a scalar (e.g. M.sum() > 0)")
    got = _trace(scope, body_fun, _wrap(carries, struct))
    results = _results("while_loop", got, struct, inits, span)
    loop = Loop("while", Body(scope, carries, results), cond=cond)
    n = Node("loop", OTHER, (*inits, *_free([*results, cond], scope)), "while", value=loop,
             nout=len(inits), span=span)
    return _wrap(_outs(n, inits, [results]), struct)


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one DML ``if`` block: both
    branches are traced and return values of the same structure and kinds (``pred``: a lazy scalar or
    a Python bool)."""
    span = E.origin()
    p = _nodes([pred])[0]
    if p.kind != SCALAR:
        raise TypeError(f"cond's predicate is a {p.kind}; it must be a scalar (e.g. M.sum() > 0)")
    bodies: list[Body] = []
    struct: Any = None
    first: list[Node] = []
    for fn in (true_fun, false_fun):
        scope = Scope(E.SCOPES[-1], "cond", span)
        got = _trace(scope, fn, *operands)
        if not bodies:
            leaves: list[Any] = []
            struct = _flatten(got, leaves)
            first = _nodes(leaves)
            results = first
        else:
            results = _results("cond: false branch", got, struct, first, span)
        bodies.append(Body(scope, [], results))
    free: list[Node] = []
    for b in bodies:
        free += [f for f in _free(b.results, b.scope) if f not in free]
    n = Node("if", OTHER, (p, *free), "if", value=Branch(bodies[0], bodies[1]), nout=len(first), span=span)
    return _wrap(_outs(n, first, [b.results for b in bodies]), struct)
