"""Pure-NumPy interpreter of CPlans: the specification generated kernels must match.

Every operator is evaluated with lafuse's own unfused kernels (``lafuse.runtime.local.kernels``),
so a fused operator means exactly what the operators it replaces mean (Java division and modulus
semantics, NaN/Inf propagation, min/max with NaN). Inputs are densified: the interpreter is the
spec, not a fast path.

Templates are evaluated on whole matrices: a row-template node that is a scalar per row becomes an
n x 1 column, a row vector per row an n x L matrix, so the unfused element-wise, row-aggregate and
matrix-multiply kernels apply unchanged. The one deliberate deviation from the unfused operators is
the outer template's rule (cplan.py): cells where the main input X is zero are zero, and its
LEFT_MM/RIGHT_MM products sum over the non-zero cells of the result only (sparse products, as
SystemDS's wdivmm does), so a NaN in ``mm`` reaches only the rows it is multiplied into. Cell and
magg plans with a CSR input follow the unfused operators' sparse semantics (:func:`_eval_flags`):
a structural zero annihilates ``*`` with a full-size operand whatever it holds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lafuse.hops.cplan import (
    CELL,
    COL_AGG,
    COL_AGG_B1_T,
    COL_AGG_T,
    COLVEC,
    FULL_AGG,
    LEFT_MM,
    MAIN,
    MATRIX,
    NO_AGG,
    RIGHT_MM,
    ROW_AGG,
    ROW_UNARY,
    ROWVEC,
    SCALAR,
    CNode,
    CPlan,
    colrange_bounds,
    postorder,
)
from lafuse.runtime.local.kernels import KERNELS
from lafuse.sparse import sp


def _dense(v: Any) -> Any:
    if hasattr(v, "toarray"):
        return np.asarray(v.toarray(), dtype=np.float64)
    if isinstance(v, np.ndarray):
        return v.astype(np.float64, copy=False)
    return float(v)


def _read(v: Any, access: str, shape: tuple[int, int]) -> Any:
    d = _dense(v)
    if access == SCALAR:
        return float(d) if not isinstance(d, np.ndarray) else float(d.reshape(-1)[0])
    if not isinstance(d, np.ndarray):
        raise ValueError(f"a {access} input must be a matrix")
    expect = {MAIN: shape, CELL: shape, ROWVEC: (shape[0], 1), COLVEC: (1, shape[1])}.get(access)
    if expect is not None and d.shape != expect:
        raise ValueError(f"{access} input has shape {d.shape}, expected {expect}")
    return d


def main_position(plan: CPlan) -> int:
    """The input position of the plan's MAIN input (it fixes the iteration space)."""
    found = [int(n.arg) for n in postorder(plan) if n.op == "input" and n.access == MAIN]  # type: ignore[call-overload]
    if not found:
        raise ValueError("the plan has no MAIN input")
    return found[0]


def _bcast(args: list[Any]) -> list[Any]:
    """Expand matrix operands of an element-wise op to one shape when they are a column vector and
    a row vector (a per-row scalar against a row vector in the row template) or when a ternary op
    mixes shapes: the unfused kernels reject those combinations, per row they are plain broadcasts."""
    mats = [a for a in args if isinstance(a, np.ndarray)]
    if len({a.shape for a in mats}) <= 1:
        return args
    shape = np.broadcast_shapes(*[a.shape for a in mats])
    if len(args) == 2 and any(a.shape == shape for a in mats):
        return args
    return [np.broadcast_to(a, shape).copy() if isinstance(a, np.ndarray) else a for a in args]


def _eval(plan: CPlan, inputs: list[Any], shape: tuple[int, int], extra: dict[str, Any]) -> dict[int, Any]:
    memo: dict[int, Any] = {}

    def ev(n: CNode) -> Any:
        if id(n) in memo:
            return memo[id(n)]
        if n.op == "input":
            v = _read(inputs[int(n.arg)], n.access, shape)  # type: ignore[call-overload]
        elif n.op == "literal":
            v = float(n.arg)  # type: ignore[arg-type]
        elif n.op == "seq":
            v = _seq(n, shape)
        elif n.op in extra:
            v = extra[n.op](n, ev)
        else:
            v = _dense(KERNELS[n.op](*_bcast([ev(c) for c in n.children])))
        memo[id(n)] = v
        return v

    for r in plan.all_roots():
        ev(r)
    return memo


def _seq(n: CNode, shape: tuple[int, int]) -> np.ndarray:
    """A seq leaf's column (cplan.SEQ): the unfused seq's values."""
    frm, inc = (float(c.arg) for c in n.children)  # type: ignore[arg-type]
    return (frm + inc * np.arange(shape[0], dtype=float)).reshape(-1, 1)


def _full(v: Any, shape: tuple[int, int]) -> np.ndarray:
    if not isinstance(v, np.ndarray) or v.shape != shape:
        return np.broadcast_to(np.asarray(v, dtype=np.float64), shape).copy()
    return v


def _aggregate(cells: np.ndarray, agg: str, agg_op: str) -> Any:
    if agg == NO_AGG:
        return cells
    if agg_op == "sumsq":
        cells, op = cells * cells, "sum"
    else:
        op = agg_op
    if agg == FULL_AGG:
        return float(KERNELS[{"sum": "sum", "min": "min", "max": "max"}[op]](cells))
    fn = {ROW_AGG: {"sum": "rowSums", "min": "rowMins", "max": "rowMaxs"},
          COL_AGG: {"sum": "colSums", "min": "colMins", "max": "colMaxs"}}[agg][op]
    return _dense(KERNELS[fn](cells))


def _csr_inputs(plan: CPlan, inputs: list[Any]) -> bool:
    """Some full-size (MAIN or CELL) input is CSR: the unfused operators then have sparse semantics."""
    return any(n.op == "input" and n.access in (MAIN, CELL) and hasattr(inputs[int(n.arg)], "tocsr")  # type: ignore[call-overload]
               for n in postorder(plan))


def _eval_flags(plan: CPlan, inputs: list[Any], shape: tuple[int, int]) -> dict[int, Any]:
    """Cell values with the unfused operators' sparse semantics: next to each full-size node a
    "structural zero" mask (the unfused result is CSR there and holds no entry), by the rules of
    ``gen_cell.flag_rules``: a structural zero annihilates ``*``/``&`` with another full-size
    operand whatever it holds; a result is CSR where the unfused kernel keeps a CSR operand's
    pattern, and its zeros are then structural (+0.0)."""
    from lafuse.codegen.gen_cell import F00, KEEP_UNARY  # deferred: importing codegen loads Numba

    val: dict[int, Any] = {}
    flag: dict[int, Any] = {}
    sparse: dict[int, Any] = {}
    full: set[int] = set()
    for n in postorder(plan):
        k = id(n)
        flag[k] = sparse[k] = None
        if n.op == "input":
            x = inputs[int(n.arg)]  # type: ignore[call-overload]
            val[k] = _read(x, n.access, shape)
            if n.access in (MAIN, CELL):
                full.add(k)
                if hasattr(x, "tocsr"):
                    c = x.tocsr()
                    stored = np.zeros(shape, dtype=bool)
                    stored[np.repeat(np.arange(shape[0]), np.diff(c.indptr)), c.indices] = True
                    flag[k], sparse[k] = ~stored, np.ones(shape, dtype=bool)
            continue
        if n.op == "literal":
            val[k] = float(n.arg)  # type: ignore[arg-type]
            continue
        if n.op == "seq":
            val[k] = _seq(n, shape)
            continue
        ch = n.children
        args = [val[id(c)] for c in ch]
        v = _dense(KERNELS[n.op](*_bcast(args)))
        fulls = [c for c in ch if id(c) in full]
        if fulls:
            full.add(k)
        sp_: Any = None
        if len(ch) == 2 and len(fulls) == 2:
            a, b = (sparse[id(c)] for c in ch)
            if n.op in ("*", "&"):
                sp_ = a if b is None else b if a is None else (a | b)
                fa, fb = (flag[id(c)] for c in ch)
                # a CSR zero annihilates a dense operand; two CSR operands combine over the union
                ta = None if fa is None else fa if b is None else fa & ~b
                tb = None if fb is None else fb if a is None else fb & ~a
                ann = ta if tb is None else tb if ta is None else (ta | tb)
                if ann is not None:
                    v = np.where(ann, 0.0, _full(v, shape))
            elif n.op in F00 and a is not None and b is not None:
                sp_ = a & b
        elif len(ch) == 2 and len(fulls) == 1 and sparse[id(fulls[0])] is not None:
            z = [np.zeros(shape), args[1]] if ch[0] is fulls[0] else [args[0], np.zeros(shape)]
            with np.errstate(all="ignore"):
                sp_ = sparse[id(fulls[0])] & (_full(_dense(KERNELS[n.op](*_bcast(z))), shape) == 0)
        elif len(ch) == 1 and fulls and n.op in KEEP_UNARY:
            sp_ = sparse[id(ch[0])]
        if sp_ is not None:
            v = _full(v, shape)
            f = sp_ & (v == 0)
            v = np.where(f, 0.0, v)
            flag[k], sparse[k] = f, sp_
        val[k] = v
    return val


def _cell(plan: CPlan, inputs: list[Any]) -> Any:
    main = _dense(inputs[main_position(plan)])
    if not isinstance(main, np.ndarray):
        raise ValueError("the main input of a cell-wise operator must be a matrix")
    shape = main.shape
    memo = _eval_flags(plan, inputs, shape) if _csr_inputs(plan, inputs) else _eval(plan, inputs, shape, {})

    def cells(r: CNode) -> np.ndarray:
        return _full(memo[id(r)], shape)

    if plan.template == "magg":
        return tuple(_aggregate(cells(r), FULL_AGG, op) for r, op in zip(plan.roots, plan.agg_ops))
    return _aggregate(cells(plan.root), plan.agg, plan.agg_op)


def _keep(v: Any) -> Any:
    """A CSR value stays CSR (its format fixes the unfused operators' semantics), others densify."""
    if hasattr(v, "tocsr"):
        return sp.csr_array(v.tocsr(), dtype=np.float64)
    return _dense(v)


def _row(plan: CPlan, inputs: list[Any]) -> Any:
    """Row plans over a CSR main (or CSR CELL inputs) keep those CSR through the unfused kernels,
    so element-wise ops get the unfused sparse semantics and products (``X %*% v``,
    ``t(X) %*% w``, ``t(X) %*% W``) SciPy's: NaN/Inf in the dense factor meet stored entries only."""
    from lafuse.codegen.gen_row import analyze  # deferred: importing codegen loads Numba

    raw = inputs[main_position(plan)]
    n, m = raw.shape

    def read_any(v: Any, access: str) -> Any:
        d = _keep(v) if access == CELL else _dense(v)
        if access == CELL and (not hasattr(d, "shape") or d.shape[0] != n):
            raise ValueError(f"a CELL input of a row plan needs {n} rows")
        return d

    def vecmat(node: CNode, ev: Any) -> Any:
        a, bnode = node.children
        if bnode.op != "input" or bnode.access != MATRIX:
            raise ValueError("vecmat's second operand must be a MATRIX input")
        B = _dense(inputs[int(bnode.arg)])  # type: ignore[call-overload]
        left = ev(a)
        if not hasattr(left, "shape"):
            left = np.full((1, 1), left)
        return _dense(KERNELS["%*%"](left, B))

    def dot(node: CNode, ev: Any) -> Any:
        a, b = (ev(c) for c in node.children)
        return _dense(KERNELS["rowSums"](KERNELS["*"](*_bcast([a, b]))))

    def row_agg(node: CNode, ev: Any) -> Any:
        a = ev(node.children[0])
        if hasattr(a, "shape"):
            return _dense(KERNELS[node.op](a))
        return (math.nan if a != a else 0.0) if node.op == "rowVars" else a  # (one element: _var_axis)

    def cbind(node: CNode, ev: Any) -> Any:
        vals = [ev(c) for c in node.children]
        return np.hstack([_dense(v) if hasattr(v, "shape") else np.full((n, 1), float(v)) for v in vals])

    def colrange(node: CNode, ev: Any) -> Any:
        v = ev(node.children[0])
        lo, hi = colrange_bounds(node)
        return v[:, lo - 1:hi] if hasattr(v, "shape") else v

    def row_cumsum(node: CNode, ev: Any) -> Any:
        v = ev(node.children[0])
        return np.cumsum(_dense(v), axis=1) if hasattr(v, "shape") else v

    shape = (n, m)
    extra = {"vecmat": vecmat, "dot": dot, "cbind": cbind, "rowCumsum": row_cumsum, "colrange": colrange,
             **{op: row_agg for op in ROW_UNARY}}
    # CELL inputs of the row template may be wider or narrower than the main input
    memo: dict[int, Any] = {}
    for r in plan.all_roots():
        _walk_row(r, inputs, shape, extra, memo, read_any)

    def value(node: CNode) -> np.ndarray:
        v = memo[id(node)]
        if not hasattr(v, "shape"):
            return np.full((n, 1), v)
        v = _dense(v)
        return v if v.shape[0] == n else np.broadcast_to(v, (n, v.shape[1])).copy()

    def matrix(node: CNode) -> Any:
        v = memo[id(node)]
        return v if hasattr(v, "shape") and v.shape[0] == n else value(node)

    if plan.agg == COL_AGG_T:
        info = analyze(plan)
        r = plan.root
        if r.op == "*" and id(r) in info.sparse:  # t(A) %*% s: A the main row, s one value per row
            sca = info.scale_of[id(r)]
            vec = r.children[1] if r.children[0] is sca else r.children[0]
            if value(sca).shape[1] == 1:
                return _dense(KERNELS["%*%"](KERNELS["t"](matrix(vec)), value(sca)))
        return _dense(KERNELS["t"](_dense(KERNELS["colSums"](value(r)))))
    if plan.agg == COL_AGG_B1_T:
        if plan.root2 is None:
            raise ValueError("COL_AGG_B1_T needs root2")
        return _dense(KERNELS["%*%"](KERNELS["t"](matrix(plan.root)), value(plan.root2)))
    R = value(plan.root)
    if plan.agg == NO_AGG:
        return R
    if plan.agg == COL_AGG:
        return _dense(KERNELS["colSums"](R))
    if plan.agg == FULL_AGG:
        return float(KERNELS["sum"](R))
    raise ValueError(f"the row template has no aggregation {plan.agg!r}")


def _walk_row(node: CNode, inputs: list[Any], shape: tuple[int, int], extra: dict[str, Any],
              memo: dict[int, Any], read_any: Any) -> Any:
    def ev(n: CNode) -> Any:
        if id(n) in memo:
            return memo[id(n)]
        if n.op == "input":
            x = inputs[int(n.arg)]  # type: ignore[call-overload]
            if n.access in (CELL, MATRIX):
                v = read_any(x, n.access)
            elif n.access == COLVEC:
                v = _dense(x)
                if not isinstance(v, np.ndarray) or v.shape[0] != 1:
                    raise ValueError("a COLVEC input of a row plan must be a row vector")
            elif n.access == MAIN and hasattr(x, "tocsr"):
                v = _keep(x)
            else:
                v = _read(x, n.access, shape)
        elif n.op == "literal":
            v = float(n.arg)  # type: ignore[arg-type]
        elif n.op == "seq":
            v = _seq(n, shape)
        elif n.op in extra:
            v = extra[n.op](n, ev)
        else:
            v = _keep(KERNELS[n.op](*_bcast([ev(c) for c in n.children])))
        memo[id(n)] = v
        return v

    return ev(node)


def _outer(plan: CPlan, inputs: list[Any]) -> Any:
    X = _dense(inputs[main_position(plan)])
    if not isinstance(X, np.ndarray):
        raise ValueError("the main input of an outer operator must be a matrix")
    shape = X.shape

    def uv(node: CNode, ev: Any) -> Any:
        U = _dense(inputs[int(node.children[0].arg)])  # type: ignore[call-overload]
        V = _dense(inputs[int(node.children[1].arg)])  # type: ignore[call-overload]
        if U.shape[0] != shape[0] or V.shape[0] != shape[1] or U.shape[1] != V.shape[1]:
            raise ValueError(f"outer factors {U.shape} and {V.shape} do not match X {shape}")
        return _dense(KERNELS["%*%"](U, KERNELS["t"](V)))

    memo = _eval(plan, inputs, shape, {"uv": uv})
    W = _full(memo[id(plan.root)], shape)
    W = np.where(X != 0, W, 0.0)
    if plan.agg == NO_AGG:
        return W
    if plan.agg == FULL_AGG:
        return float(KERNELS["sum"](W))
    if plan.agg in (LEFT_MM, RIGHT_MM):
        mm = _dense(inputs[plan.mm])
        Ws = sp.csr_array(W)
        Ws.eliminate_zeros()
        with np.errstate(all="ignore"):
            return np.asarray((Ws.T if plan.agg == LEFT_MM else Ws) @ mm, dtype=np.float64)
    raise ValueError(f"the outer template has no aggregation {plan.agg!r}")


def evaluate(plan: CPlan, inputs: list[Any]) -> Any:
    """The fused operator's result for ``inputs`` (positional, as the CPlan's input nodes number
    them; the MAIN input fixes the iteration space). Cell: a matrix or float; magg: a tuple of
    floats; row and outer: a matrix (dense) or a float for FULL_AGG."""
    if plan.template in ("cell", "magg"):
        return _cell(plan, inputs)
    if plan.template == "row":
        return _row(plan, inputs)
    if plan.template == "outer":
        return _outer(plan, inputs)
    raise ValueError(f"unknown template {plan.template!r}")


