"""``lf.<name>``: sources (``lf.read``, ``lf.rand``, ``lf.seq``, ``lf.full``), and every DML builtin and
every function of lafuse's algorithm library (``lafuse/builtins/*.dml``) as a lazy call.

A builtin's result kind (matrix or scalar) follows the catalogue (``lang.builtins``); a library
function's kinds and number of results follow its DML signature (several results: a tuple). Python
names cannot hold dots: ``lf.as_scalar`` is ``as.scalar``, and a keyword ``index_return`` is
``index.return``. Statement builtins (``print``, ``write``, ``stop``, ``assert``) run at once.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from lafuse import config as cfgmod
from lafuse.api import expr as E
from lafuse.api.expr import MATRIX, OTHER, SCALAR, Node
from lafuse.api.lazy import Matrix, as_node, wrap
from lafuse.lang import builtins as B

# the catalogue's unary builtins whose result has the argument's shape
_SAME_SHAPE = frozenset({"unary"})
# Python names of the API's own that shadow a DML builtin of the same name (lf.matrix binds a NumPy
# array; DML's matrix(data, rows, cols) is lf.full or M.reshape)
OWN = frozenset({"matrix", "read"})


def _kw(name: str, params: tuple[str, ...]) -> str:
    if name in params:
        return name
    dotted = name.replace("_", ".")
    return dotted if dotted in params else name


def _kind(spec: B.BuiltinSpec, nodes: list[Node], kw: dict[str, Node]) -> str:
    out = spec.out
    anym = any(n.kind == MATRIX for n in [*nodes, *kw.values()])
    if out == "matrix":
        return MATRIX
    if out.startswith("scalar:"):
        return OTHER if out == "scalar:string" else SCALAR
    if out in ("same", "same_double", "same_bool"):
        return MATRIX if anym else SCALAR
    if out == "agg":
        return SCALAR if len(nodes) == 1 else (MATRIX if anym else SCALAR)
    if out in ("list", "frame"):
        return OTHER
    if spec.name in ("as.scalar", "castAsScalar"):
        return SCALAR
    if spec.name == "ifelse":
        return MATRIX if anym else SCALAR
    if spec.name == "quantile":
        p = kw.get("p") or (nodes[1] if len(nodes) > 1 else None)
        return MATRIX if p is not None and p.kind == MATRIX else SCALAR
    return MATRIX


def _shape(spec: B.BuiltinSpec, nodes: list[Node]) -> tuple[int, int]:
    if not nodes or nodes[0].kind != MATRIX:
        return (-1, -1)
    r, c = nodes[0].shape
    if spec.kind in _SAME_SHAPE and spec.out in ("same", "same_double") and len(nodes) == 1:
        return (r, c)
    if spec.name in B.ROW_AGGS:
        return (r, 1)
    if spec.name in B.COL_AGGS:
        return (1, c)
    if spec.name in B.CUM_AGGS:
        return (r, c)
    if spec.name == "t":
        return (c, r)
    return (-1, -1)


def builtin(name: str) -> Any:
    """``lf.<name>`` for a catalogue builtin (``name`` as DML spells it)."""
    spec = B.lookup(name)
    assert spec is not None

    def call(*args: Any, **kwargs: Any) -> Any:
        nodes = [as_node(a) for a in args]
        kw = {_kw(k, spec.param_names): as_node(v) for k, v in kwargs.items() if v is not None}
        if spec.out == "none":
            from lafuse.api.run import run_statement

            return run_statement(E.call(name, nodes, kw, kind=OTHER))
        if spec.out == "multi":
            c = E.call(name, nodes, kw, kind=OTHER, nout=spec.nout)
            return tuple(wrap(E.output(c, k, MATRIX)) for k in range(spec.nout))
        kind = _kind(spec, nodes, kw)
        return wrap(E.call(name, nodes, kw, kind=kind, shape=_shape(spec, nodes) if kind == MATRIX else (1, 1)))

    call.__name__ = call.__qualname__ = name.replace(".", "_")
    call.__doc__ = f"DML's ``{name}({', '.join(spec.param_names)}{', ...' if spec.varargs else ''})``, lazily."
    return call


def library_dirs() -> list[str]:
    cfg = cfgmod.get()
    own = [os.path.join(os.path.dirname(os.path.dirname(__file__)), "builtins")] if cfg.lafuse_builtins else []
    return [d for d in (*own, *cfg.builtin_dirs) if os.path.isdir(d)]


def library_names() -> list[str]:
    """The functions of the algorithm library (``<name>.dml`` defining ``m_<name>`` or ``<name>``)."""
    return sorted({f[:-4] for d in library_dirs() for f in os.listdir(d) if f.endswith(".dml")})


@lru_cache(maxsize=256)
def _signature(name: str, dirs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(parameter names, result kinds) of library function ``name``, or None."""
    from lafuse.hops.resolver import FunctionResolver

    got = FunctionResolver(list(dirs)).dispatch_builtin(name, "matrix")
    if got is None:
        return None
    fd = got[1]
    kinds = tuple(MATRIX if p.type_name == "matrix" else SCALAR if p.type_name == "scalar" and
                  p.value_type != "string" else OTHER for p in fd.outputs)
    return tuple(p.name for p in fd.params), kinds


def library(name: str) -> Any:
    """``lf.<name>`` for a library function: its results lazy (several: a tuple)."""
    sig = _signature(name, tuple(library_dirs()))
    if sig is None:
        raise AttributeError(name)
    params, kinds = sig

    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(params):
            raise TypeError(f"{name}() takes at most {len(params)} positional arguments ({len(args)} given)")
        unknown = set(kwargs) - set(params)
        if unknown:
            raise TypeError(f"{name}() has no parameter {', '.join(sorted(unknown))}; its parameters: "
                            f"{', '.join(params)}")
        kw = {k: as_node(v) for k, v in kwargs.items() if v is not None}
        nodes = [as_node(a) for a in args]
        if len(kinds) == 1:
            return wrap(E.call(name, nodes, kw, kind=kinds[0]))
        c = E.call(name, nodes, kw, kind=OTHER, nout=len(kinds))
        return tuple(wrap(E.output(c, k, kd)) for k, kd in enumerate(kinds))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"lafuse's algorithm library: ``{name}({', '.join(params)})``, lazily."
    return call


def lookup(name: str) -> Any:
    """``lf.<name>``: a catalogue builtin (underscores for dots), else a library function."""
    for n in (name, name.replace("_", ".")):
        if n not in OWN and B.lookup(n) is not None:
            return builtin(n)
    return library(name)


# ---------------------------------------------------------------- sources
def read(path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """A matrix (or, with ``data_type="scalar"``/``"frame"``, another value) read from ``path`` when
    computed; ``format=`` and the other arguments of DML's ``read``. Metadata (the ``.mtd`` file) gives
    its shape at build time where present."""
    spec = B.lookup("read")
    assert spec is not None
    kw = {_kw(k, spec.param_names): as_node(v) for k, v in kwargs.items() if v is not None}
    dt = str(kwargs.get("data_type", "matrix")).lower()
    kind = MATRIX if dt == "matrix" else SCALAR if dt == "scalar" else OTHER
    shape = _mtd_shape(os.fspath(path)) if kind == MATRIX else (-1, -1)
    if "rows" in kwargs and "cols" in kwargs:
        shape = (int(kwargs["rows"]), int(kwargs["cols"]))
    return wrap(E.call("read", [as_node(os.fspath(path))], kw, kind=kind, shape=shape))


def _mtd_shape(path: str) -> tuple[int, int]:
    import json

    try:
        with open(path + ".mtd", encoding="utf-8") as f:
            m = json.load(f)
        return (int(m["rows"]), int(m["cols"]))
    except (OSError, ValueError, KeyError, TypeError):
        return (-1, -1)


def full(shape: tuple[int, int], value: Any) -> Matrix:
    """A ``rows x cols`` matrix of ``value`` (DML's ``matrix(value, rows, cols)``)."""
    r, c = (int(x) for x in shape)
    return Matrix(E.call("matrix", [as_node(value), E.literal(r), E.literal(c)], shape=(r, c)))


def zeros(shape: tuple[int, int]) -> Matrix:
    return full(shape, 0.0)


def ones(shape: tuple[int, int]) -> Matrix:
    return full(shape, 1.0)


def rand(rows: int, cols: int, min: float = 0.0, max: float = 1.0, sparsity: float = 1.0,
         pdf: str = "uniform", seed: int = -1) -> Matrix:
    """DML's ``rand``: the same values as SystemDS for the same seed (``seed=-1``: a fresh one)."""
    kw = {"rows": rows, "cols": cols, "min": min, "max": max, "sparsity": sparsity, "pdf": pdf, "seed": seed}
    return Matrix(E.call("rand", [], {k: as_node(v) for k, v in kw.items()}, shape=(int(rows), int(cols))))


def seq(start: float, stop: float, step: float | None = None) -> Matrix:
    """DML's ``seq``: a column from ``start`` to ``stop`` *inclusive*, by ``step``."""
    args = [as_node(start), as_node(stop)] + ([as_node(step)] if step is not None else [])
    n = -1
    if all(isinstance(v, (int, float)) for v in (start, stop)) and isinstance(step, (int, float, type(None))):
        s = step if step is not None else (1 if stop >= start else -1)
        n = int((stop - start) / s) + 1 if s != 0 and (stop - start) * s >= 0 else -1
    return Matrix(E.call("seq", args, shape=(n, 1)))


def cbind(*ms: Any) -> Matrix:
    return Matrix(E.call("cbind", [as_node(m) for m in ms]))


def rbind(*ms: Any) -> Matrix:
    return Matrix(E.call("rbind", [as_node(m) for m in ms]))
