"""NumPy's protocols on lazy values: ``np.exp(M)`` and ``np.sum(M)`` stay lazy.

``__array_ufunc__``: a ufunc with a DML counterpart of the same semantics becomes that operator or
builtin; another (or a ufunc method such as ``np.add.reduce``, or ``out=``) is refused with a
TypeError naming it, never computed silently with other semantics. ``__array_function__``: the common
reductions and shape functions have lazy forms; any other NumPy function computes its lazy arguments
and runs as NumPy's own (as ``np.asarray`` would).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lafuse.api import expr as E

# ufunc -> DML binary operator
_UFUNC_BINARY = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "true_divide": "/", "power": "^",
    "float_power": "^", "matmul": "%*%",
    "equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
    "logical_and": "&", "logical_or": "|",
}
# ufunc -> DML builtin of one argument (same shape)
_UFUNC_UNARY = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "absolute": "abs", "fabs": "abs", "sin": "sin", "cos": "cos",
    "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "sign": "sign", "floor": "floor", "ceil": "ceil", "isnan": "isNaN", "isinf": "isInf",
}


def _lazy(x: Any) -> bool:
    from lafuse.api.lazy import Expr

    return isinstance(x, Expr)


def array_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from lafuse.api.lazy import as_node, wrap

    name = ufunc.__name__
    if method != "__call__" or kwargs:
        what = f"np.{name}.{method}" if method != "__call__" else f"np.{name} with {', '.join(kwargs)}"
        raise TypeError(f"{what} has no lazy lafuse form: compute first (np.asarray(M))")
    nodes = [as_node(x) for x in inputs]
    if name in _UFUNC_BINARY and len(nodes) == 2:
        return wrap(E.binary(_UFUNC_BINARY[name], nodes[0], nodes[1]))
    if len(nodes) == 1:
        (a,) = nodes
        if name in _UFUNC_UNARY:
            return wrap(E.call(_UFUNC_UNARY[name], [a], kind=a.kind, shape=a.shape))
        if name == "negative":
            return wrap(E.unary("-", a))
        if name == "logical_not":
            return wrap(E.unary("!", a))
        if name == "positive":
            return wrap(a)
        if name == "square":
            return wrap(E.binary("^", a, E.literal(2)))
        if name == "reciprocal":
            return wrap(E.binary("/", E.literal(1.0), a))
        if name in ("log2", "log10"):
            return wrap(E.call("log", [a, E.literal(2 if name == "log2" else 10)], kind=a.kind, shape=a.shape))
    if name in ("remainder", "mod", "floor_divide") and len(inputs) == 2:  # (DML's truncate)
        from lafuse.api import pyops

        return (pyops.floor_divide if name == "floor_divide" else pyops.remainder)(*inputs)
    if name in ("maximum", "minimum") and len(nodes) == 2:  # (NaN propagates in both, as NumPy's)
        a, b = nodes
        kind = E.MATRIX if E.MATRIX in (a.kind, b.kind) else E.SCALAR
        shape = E._check_elementwise(name, a, b, E.origin())
        return wrap(E.call("max" if name == "maximum" else "min", [a, b], kind=kind, shape=shape))
    raise TypeError(f"np.{name} has no lazy lafuse form: compute first (np.asarray(M))")


def _axis(kwargs: dict[str, Any], args: tuple[Any, ...], allowed: tuple[str, ...] = ("axis",)) -> Any:
    extra = set(kwargs) - set(allowed)
    if extra:
        raise TypeError(f"lafuse's lazy form does not take {', '.join(sorted(extra))}")
    return kwargs.get("axis", args[1] if len(args) > 1 else None)


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from lafuse.api.lazy import Matrix, as_node, matrix, wrap

    name = func.__name__
    m = args[0] if args else None
    if isinstance(m, Matrix):
        if name in ("sum", "mean", "min", "max", "amin", "amax", "prod"):
            meth = {"amin": "min", "amax": "max"}.get(name, name)
            return getattr(m, meth)(_axis(kwargs, args))
        if name in ("var", "std"):
            return getattr(m, name)(_axis(kwargs, args, ("axis", "ddof")), kwargs.get("ddof", 0))
        if name == "transpose" and len(args) == 1 and not kwargs:
            return m.T
        if name == "shape":
            return m.shape
        if name == "ndim":
            return 2
        if name == "size" and len(args) == 1:
            return m.size
        if name == "trace" and len(args) == 1 and not kwargs:
            return wrap(E.call("trace", [m.node], kind=E.SCALAR))
        if name == "count_nonzero" and len(args) == 1 and not kwargs:
            return (m != 0).sum()
    if name in ("dot", "matmul") and len(args) == 2 and not kwargs:
        a, b = (x if isinstance(x, Matrix) else matrix(x) for x in args)
        return a @ b
    if name == "where" and len(args) == 3 and not kwargs:
        nodes = [as_node(x) for x in args]
        kind = E.MATRIX if any(n.kind == E.MATRIX for n in nodes) else E.SCALAR
        shape = E._check_elementwise("where", nodes[0], nodes[1], E.origin())
        shape = E._check_elementwise("where", E.Node("lit", kind, shape=shape), nodes[2], E.origin()) \
            if kind == E.MATRIX else (1, 1)
        return wrap(E.call("ifelse", nodes, kind=kind, shape=shape))
    if name in ("hstack", "vstack", "concatenate") and len(args) == 1:
        axis = kwargs.get("axis", 0) if name == "concatenate" else (1 if name == "hstack" else 0)
        if set(kwargs) - {"axis"}:
            raise TypeError(f"lafuse's lazy np.{name} does not take {', '.join(sorted(set(kwargs) - {'axis'}))}")
        from lafuse.api.functions import cbind, rbind

        return cbind(*args[0]) if axis == 1 else rbind(*args[0])
    return func(*_computed(args), **_computed(kwargs))


def _computed(x: Any) -> Any:
    """Lazy values (also inside lists, tuples and dicts) computed, for a NumPy function without a
    lazy form."""
    if _lazy(x):
        v = x.compute()
        return v.toarray() if hasattr(v, "toarray") else v
    if isinstance(x, (list, tuple)):
        return type(x)(_computed(v) for v in x)
    if isinstance(x, dict):
        return {k: _computed(v) for k, v in x.items()}
    return x


__all__ = ["array_function", "array_ufunc", "np"]
