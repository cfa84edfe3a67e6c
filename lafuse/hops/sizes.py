"""Size, sparsity and memory propagation over HOP DAGs.

Each HOP's output dims (rows, cols) and nnz are inferred from its inputs, and from literal or
runtime-known scalar arguments (``matrix(0, n, 1)`` with ``n`` known at recompile time). -1 means
unknown. The same rules run at compile time and at dynamic recompilation, where TReads carry the
actual sizes of the symbol table's values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lafuse.formats import default_format, format_bytes
from lafuse.hops.hop import MATRIX, SCALAR, Hop
from lafuse.lang.builtins import COL_AGGS, CUM_AGGS, ROUNDING, ROW_AGGS, ZERO_PRESERVING_UNARY


def scalar_value(h: Hop | None, known: dict[str, Any] | None = None) -> Any:
    """The value of a scalar HOP when it is a literal, a known TRead, or a simple expression of them."""
    if h is None:
        return None
    if h.kind == "literal":
        return h.value
    if h.op == "tread" and known is not None and h.name in known:
        return known[h.name]
    if h.op in ("nrow", "ncol") and h.inputs and h.inputs[0].dims_known:
        return h.inputs[0].rows if h.op == "nrow" else h.inputs[0].cols
    if h.kind == "binary" and h.op in ("+", "-", "*", "/") and len(h.inputs) == 2:
        a, b = scalar_value(h.inputs[0], known), scalar_value(h.inputs[1], known)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            try:
                return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[h.op]
            except (OverflowError, TypeError):
                return None
    if h.kind == "binary" and h.op in ("%/%", "%%") and len(h.inputs) == 2:
        a, b = scalar_value(h.inputs[0], known), scalar_value(h.inputs[1], known)
        if _finite_number(a) and _finite_number(b) and b != 0:
            return a // b if h.op == "%/%" else a % b
    if h.kind == "nary" and h.op in ("min", "max") and h.inputs and all(i.dt == SCALAR for i in h.inputs):
        vals = [scalar_value(i, known) for i in h.inputs]
        if all(_finite_number(v) for v in vals):  # NaN makes min/max NaN: left to run time
            return min(vals) if h.op == "min" else max(vals)
    if h.op in ("ceil", "floor") and h.inputs and h.inputs[0].dt == SCALAR:
        a = scalar_value(h.inputs[0], known)
        if _finite_number(a):
            return float(math.ceil(a) if h.op == "ceil" else math.floor(a))
    if h.op == "u-" and h.inputs:
        a = scalar_value(h.inputs[0], known)
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return -a
    if h.op in ("as.integer", "as.double") and h.inputs:
        a = scalar_value(h.inputs[0], known)
        if isinstance(a, (int, float)) and not isinstance(a, bool) and (h.op == "as.double" or math.isfinite(a)):
            return int(a) if h.op == "as.integer" else float(a)
    return None


def scalar_source(h: Hop | None, bind: Callable[[Any], str], out: list[str], known: str = "known") -> str:
    """``scalar_value(h, known)`` as Python statements appended to ``out``, over the symbol table named
    ``known`` (a dict, or None); returns the expression of the value. ``bind(v)`` names a constant.
    Why: a mini-batch loop evaluates its slice bounds' extent at every iteration to find its plan
    (runtime.recompile.signature); walking the bound expressions each time cost ~20 us an iteration,
    a closure per HOP ~1 us a bound, generated statements a fraction of that. The rules are
    scalar_value's, case for case (tests/hops compare the two), except that an OverflowError or
    TypeError anywhere means None for the whole (every rule gives None for a None operand, so the
    two agree); the caller catches them. The HOPs must not change while the code is in use (a
    block's DAG, which only its copies are recompiled from)."""
    if h is None:
        return "None"
    if h.kind == "literal":
        return bind(h.value)
    if h.op == "tread":
        v = f"_s{len(out)}"
        out.append(f"{v} = {known}.get({h.name!r}) if {known} is not None else None")
        return v
    if h.op in ("nrow", "ncol") and h.inputs:
        src = h.inputs[0]
        return bind((src.rows if h.op == "nrow" else src.cols) if src.dims_known else None)
    num, fin = bind((int, float)), bind(_finite_number)

    def arg(i: int) -> str:
        return scalar_source(h.inputs[i], bind, out, known)

    if h.kind == "binary" and h.op in ("+", "-", "*", "/") and len(h.inputs) == 2:
        a, b = arg(0), arg(1)
        val = f"({a} / {b} if {b} else None)" if h.op == "/" else f"{a} {h.op} {b}"
        line = f"{val} if isinstance({a}, {num}) and isinstance({b}, {num}) and not isinstance({a}, bool) else None"
    elif h.kind == "binary" and h.op in ("%/%", "%%") and len(h.inputs) == 2:
        a, b = arg(0), arg(1)
        line = f"{a} {'//' if h.op == '%/%' else '%'} {b} if {fin}({a}) and {fin}({b}) and {b} != 0 else None"
    elif h.kind == "nary" and h.op in ("min", "max") and h.inputs and all(i.dt == SCALAR for i in h.inputs):
        vals = [arg(i) for i in range(len(h.inputs))]
        line = f"{h.op}(({', '.join(vals)},)) if {' and '.join(f'{fin}({x})' for x in vals)} else None"
    elif h.op in ("ceil", "floor") and h.inputs and h.inputs[0].dt == SCALAR:
        a = arg(0)
        line = f"float({bind(math.ceil if h.op == 'ceil' else math.floor)}({a})) if {fin}({a}) else None"
    elif h.op == "u-" and h.inputs:
        a = arg(0)
        line = f"-{a} if isinstance({a}, {num}) and not isinstance({a}, bool) else None"
    elif h.op in ("as.integer", "as.double") and h.inputs:
        a = arg(0)
        line = (f"int({a}) if isinstance({a}, {num}) and not isinstance({a}, bool) and {bind(math.isfinite)}({a}) "
                f"else None" if h.op == "as.integer" else
                f"float({a}) if isinstance({a}, {num}) and not isinstance({a}, bool) else None")
    else:
        return "None"
    v = f"_s{len(out)}"  # one local per line: its operands' lines come first
    out.append(f"{v} = {line}")
    return v


def scalar_fn(h: Hop | None) -> Callable[[dict[str, Any] | None], Any]:
    """``scalar_value(h, known)`` as a compiled function of ``known`` alone (scalar_source)."""
    names: dict[str, Any] = {}

    def bind(value: Any) -> str:
        name = f"_c{len(names)}"
        names[name] = value
        return name

    body: list[str] = []
    result = scalar_source(h, bind, body)
    src = "def f(known):\n try:\n" + "".join(f"  {ln}\n" for ln in body) + f"  return {result}\n" \
        " except (OverflowError, TypeError):\n  return None\n"
    exec(compile(src, "<lafuse scalar>", "exec"), names)
    return names["f"]  # type: ignore[no-any-return]


def _finite_number(v: Any) -> bool:
    """A number that is not inf or NaN (an int beyond a float's range too: ``%/%`` of folded
    constants can give one, and ``math.isfinite`` raises on it)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, int) or math.isfinite(v))


# the largest dimension: SystemDS casts a dimension argument to a Java long, which saturates there
MAX_DIM = (1 << 63) - 1


def _int_or_unknown(v: Any) -> int:
    """A dimension argument's value as an int (-1: unknown), saturated at MAX_DIM: a literal such as
    1e308 would otherwise make a 309-digit dimension whose products no float holds (the size and cost
    estimates raised OverflowError converting them)."""
    if isinstance(v, bool) or v is None:
        return -1
    if isinstance(v, (int, float)) and math.isfinite(v):
        return min(int(v), MAX_DIM)
    return -1


def slot_arg(h: Hop, name: str) -> Hop | None:
    """The input HOP bound to parameter ``name`` of a builtin call (by the catalogue's slots)."""
    slots = h.params.get("slots")
    if slots is None:
        return None
    for s, inp in zip(slots, h.inputs):
        if s == name:
            return inp
    return None


def broadcast_dim(a: int, b: int) -> int:
    """Size of a broadcast dimension: a side of 1 takes the other side (which may be 0)."""
    if a == 1:
        return b
    if b == 1:
        return a
    return a if a == b else -1


def infer(h: Hop, known: dict[str, Any] | None = None) -> None:
    """Set ``h``'s rows, cols and nnz from its inputs (inputs must already be inferred)."""
    if h.dt != MATRIX:
        if h.dt == SCALAR:
            h.rows = h.cols = 0
        _memory(h)
        return
    ins = h.inputs
    op, kind = h.op, h.kind
    r = c = z = -1
    if kind == "datagen":
        if op == "matrix":
            data = slot_arg(h, "data")
            r = _int_or_unknown(scalar_value(slot_arg(h, "rows"), known)) if slot_arg(h, "rows") else -1
            c = _int_or_unknown(scalar_value(slot_arg(h, "cols"), known)) if slot_arg(h, "cols") else -1
            if data is not None and data.dt == MATRIX:
                if r < 0 and c >= 0 and data.dims_known and c > 0:
                    r = data.rows * data.cols // c
                if c < 0 and r >= 0 and data.dims_known and r > 0:
                    c = data.rows * data.cols // r
                z = data.nnz
            elif data is not None:
                v = scalar_value(data, known)
                if isinstance(v, (int, float)) and not isinstance(v, bool) and r >= 0 and c >= 0:
                    z = 0 if v == 0 else r * c
        elif op in ("rand", "Rand"):
            r = _int_or_unknown(scalar_value(slot_arg(h, "rows"), known)) if slot_arg(h, "rows") else 1
            c = _int_or_unknown(scalar_value(slot_arg(h, "cols"), known)) if slot_arg(h, "cols") else 1
            sp_h = slot_arg(h, "sparsity")
            sp = 1.0 if sp_h is None else scalar_value(sp_h, known)
            if r >= 0 and c >= 0 and isinstance(sp, (int, float)):
                mn = scalar_value(slot_arg(h, "min"), known) if slot_arg(h, "min") else 0.0
                mx = scalar_value(slot_arg(h, "max"), known) if slot_arg(h, "max") else 1.0
                if sp == 0 or (mn == 0 and mx == 0):
                    z = 0
                else:
                    pdf = scalar_value(slot_arg(h, "pdf"), known) if slot_arg(h, "pdf") else "uniform"
                    if sp >= 1.0 and isinstance(mn, (int, float)) and mn > 0 and str(pdf).lower() == "uniform":
                        z = r * c
        elif op == "seq":
            f, t = slot_arg(h, "from"), slot_arg(h, "to")
            inc = slot_arg(h, "incr")
            fv, tv = scalar_value(f, known), scalar_value(t, known)
            iv = scalar_value(inc, known) if inc is not None else None
            if isinstance(fv, (int, float)) and isinstance(tv, (int, float)):
                if iv is None:
                    iv = 1 if tv >= fv else -1
                n = (tv - fv) / iv if isinstance(iv, (int, float)) and iv != 0 else math.nan
                if math.isfinite(n) and n >= 0:  # (a NaN / Inf bound: unknown here, an error at run time)
                    r, c = int(math.floor(n + 1e-12)) + 1, 1
        elif op == "sample":
            r, c = _int_or_unknown(scalar_value(slot_arg(h, "size"), known)), 1
    elif kind == "data":
        if op in ("tread", "pread"):
            r, c, z = h.rows, h.cols, h.nnz
        elif ins:
            r, c, z = ins[0].rows, ins[0].cols, ins[0].nnz
    elif kind == "unary":
        a = ins[0]
        if op == "as.matrix":
            if a.dt == SCALAR:
                r, c = 1, 1
            elif a.dt == MATRIX:
                r, c, z = a.rows, a.cols, a.nnz
        elif op in ("inv", "cholesky"):
            r, c = a.rows, a.cols
        else:
            r, c = a.rows, a.cols
            if op in ZERO_PRESERVING_UNARY and op not in ROUNDING:
                z = a.nnz
            elif op in ROUNDING and a.nnz == 0:  # 0 stays 0, but round(0.25) = 0 drops a non-zero
                z = 0
            elif op in ("isNaN", "isInf", "isNA") and a.nnz == 0:
                z = 0
    elif kind == "binary":
        a, b = ins[0], ins[1]
        if op == "solve":
            r, c = a.cols, b.cols
        elif a.dt == MATRIX and b.dt == MATRIX:
            r, c = broadcast_dim(a.rows, b.rows), broadcast_dim(a.cols, b.cols)
            # no "X * 0 has nnz 0": 0 * NaN and 0 * Inf are NaN
        else:
            m = a if a.dt == MATRIX else b
            r, c = m.rows, m.cols
            other = b if m is a else a
            ov = scalar_value(other, known)
            if op == "*" and isinstance(ov, (int, float)) and not isinstance(ov, bool):
                z = m.nnz if ov != 0 and math.isfinite(ov) else -1  # 0 * NaN is NaN
            elif op == "/" and m is a and isinstance(ov, (int, float)) and ov != 0 and math.isfinite(ov):
                z = m.nnz
            elif op == "!=" and isinstance(ov, (int, float)) and ov == 0:  # X != 0: 1 exactly where X is not 0
                z = m.nnz
    elif kind == "ternary":
        ms = [i for i in ins if i.dt == MATRIX]
        if ms:
            r, c = ms[0].rows, ms[0].cols
            for m in ms[1:]:
                r, c = broadcast_dim(r, m.rows), broadcast_dim(c, m.cols)
    elif kind == "agg_unary":
        a = ins[0]
        if op in ROW_AGGS:
            r, c = a.rows, 1
        elif op in COL_AGGS:
            r, c = 1, a.cols
        elif op in CUM_AGGS:
            r, c = a.rows, a.cols
        elif op in ("min", "max"):  # element-wise n-ary form
            ms = [i for i in ins if i.dt == MATRIX]
            r, c = ms[0].rows, ms[0].cols
    elif kind == "matmult":
        a, b = ins
        r, c = a.rows, b.cols
        # no "an empty operand gives an empty product": 0 * NaN and 0 * Inf are NaN
    elif kind == "reorg":
        a = ins[0]
        if op == "t":
            r, c, z = a.cols, a.rows, a.nnz
        elif op == "rev":
            r, c, z = a.rows, a.cols, a.nnz
        elif op == "diag":
            if a.cols == 1 and a.rows >= 0:
                r, c, z = a.rows, a.rows, a.nnz
            elif a.cols > 1:
                r, c = a.rows, 1
            elif a.cols < 0 or a.rows < 0:
                r = c = -1
        elif op == "order":
            ir = scalar_value(slot_arg(h, "index.return"), known) if slot_arg(h, "index.return") else False
            r, c = (a.rows, 1) if ir is True else (a.rows, a.cols)
            if ir is not True:
                z = a.nnz
        elif op == "matrix":  # reshape
            r = _int_or_unknown(scalar_value(slot_arg(h, "rows"), known)) if slot_arg(h, "rows") else -1
            c = _int_or_unknown(scalar_value(slot_arg(h, "cols"), known)) if slot_arg(h, "cols") else -1
            z = a.nnz
    elif kind == "rix":
        x, rl, ru, cl, cu = ins
        r = range_len(rl, ru, h.params.get("row_single"), known)
        c = range_len(cl, cu, h.params.get("col_single"), known)
        # extents learned at recompile time from the bounds' values (recompile.range_spans)
        r = h.params.get("row_extent", -1) if r < 0 else r
        c = h.params.get("col_extent", -1) if c < 0 else c
        if h.params.get("row_all"):
            r = x.rows
        if h.params.get("col_all"):
            c = x.cols
        if x.nnz == 0:
            z = 0
        elif r >= 0 and c >= 0 and (r, c) == (x.rows, x.cols):
            z = x.nnz
    elif kind == "lix":
        r, c = ins[0].rows, ins[0].cols
    elif kind == "nary":
        ms = [i for i in ins if i.dt == MATRIX]
        if op in ("cbind", "append"):
            r = ms[0].rows if ms else -1
            c = sum(m.cols for m in ms) if all(m.cols >= 0 for m in ms) else -1
            z = sum(m.nnz for m in ms) if all(m.nnz >= 0 for m in ms) else -1
        elif op == "rbind":
            c = ms[0].cols if ms else -1
            r = sum(m.rows for m in ms) if all(m.rows >= 0 for m in ms) else -1
            z = sum(m.nnz for m in ms) if all(m.nnz >= 0 for m in ms) else -1
        elif ms:  # element-wise n-ary (min, max, ...): operands broadcast
            r, c = ms[0].rows, ms[0].cols
            for m in ms[1:]:
                r, c = broadcast_dim(r, m.rows), broadcast_dim(c, m.cols)
    elif kind == "param_builtin":
        # the matrix argument by name: replace(pattern=0, replacement=1, target=X) binds X third
        a = slot_arg(h, "target") or (ins[0] if ins else None)  # type: ignore[assignment]
        if op == "replace" and a is not None:
            r, c = a.rows, a.cols
        elif op == "table":
            rr, cc = slot_arg(h, "rows"), slot_arg(h, "cols")
            if rr is not None and cc is not None:
                r = _int_or_unknown(scalar_value(rr, known))
                c = _int_or_unknown(scalar_value(cc, known))
        elif op == "aggregate":
            ng = slot_arg(h, "ngroups")
            if ng is not None:
                r = _int_or_unknown(scalar_value(ng, known))
                tgt = slot_arg(h, "target")
                c = tgt.cols if tgt is not None else -1
        elif op in ("lower.tri", "upper.tri") and a is not None:
            r, c = a.rows, a.cols
    elif kind == "builtin":
        if op == "outer":
            r, c = ins[0].rows, ins[1].cols
    elif kind == "extract":
        src = ins[0]
        i = h.params.get("index", 0)
        if src.op == "eigen" and src.inputs[0].dims_known:
            n = src.inputs[0].rows
            r, c = (n, 1) if i == 0 else (n, n)
    h.rows, h.cols, h.nnz = r, c, z
    if r == 0 or c == 0:
        h.nnz = 0
    _memory(h)


def range_len(lo: Hop, hi: Hop, single: bool | None, known: dict[str, Any] | None) -> int:
    """Length of the index range ``lo:hi`` as indexing computes it (bounds truncated; 0 when empty), -1 unknown."""
    if single:
        return 1
    return span_len(scalar_value(lo, known), scalar_value(hi, known))


def span_len(a: Any, b: Any) -> int:
    """Length of ``a:b`` for bound values (``range_len``), -1 unless both are finite numbers."""
    if _float_bound(a) and _float_bound(b):  # a NaN / Inf bound is an error at run time
        return max(int(b) - int(a) + 1, 0)
    return -1


def _float_bound(v: Any) -> bool:
    """A number whose float is finite: an int beyond a float's range is no bound either (as
    scalar_value's float arithmetic makes it Inf; math.isfinite raised OverflowError on it)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def output_bytes(rows: int, cols: int, nnz: int) -> float:
    """Bytes of the block in the format the runtime gives it (formats.default_format)."""
    if rows < 0 or cols < 0:
        return -1.0
    return format_bytes(default_format(rows, cols, nnz), rows, cols, nnz)


def value_bytes(h: Hop) -> float:
    """Bytes of ``h``'s value as a cost model counts an operand: a matrix in the format the rule
    gives it (dense where its non-zeros are unknown: the worst case), 0 when its dims are unknown;
    8 for anything else (a scalar)."""
    if h.dt != MATRIX:
        return 8.0
    return max(0.0, output_bytes(h.rows, h.cols, h.nnz))


def _memory(h: Hop) -> None:
    if h.dt != MATRIX:
        h.out_mem = 8.0 if h.dt == SCALAR else -1.0
    else:
        h.out_mem = output_bytes(h.rows, h.cols, h.nnz)
    total = h.out_mem
    for i in h.inputs:
        if i.out_mem < 0 or total < 0:
            total = -1.0
            break
        total += i.out_mem
    h.mem = total


def bounded_bytes(h: Hop, bounds: dict[int, float]) -> float:
    """Bytes of matrix ``h``'s value at its worst-case non-zeros (``bounds``: :func:`nnz_bound` of
    every HOP so far; dense where it has none)."""
    return output_bytes(h.rows, h.cols, int(min(bounds.get(h.id, -1.0), 2.0**62)))


def nnz_bound(h: Hop, bounds: dict[int, float]) -> float:
    """A worst-case bound of ``h``'s non-zeros, for memory estimates where ``h.nnz`` (exact or unknown)
    is unknown; ``bounds`` holds the inputs' bounds (a topological pass fills it). Without it, a
    product or an element-wise product of sparse matrices counts as dense and a huge sparse problem
    would look like terabytes (SystemDS's worst-case sparsity estimates, OptimizerUtils, do the same):
    ``X %*% Y`` has at most ``min(nnz(X) * ncol(Y), nrow(X) * nnz(Y), nnz(X) * nnz(Y))`` non-zeros, a
    zero of a matrix operand of ``*`` stays zero (of a sparse one exactly; a dense one bounds the
    result above the sparsity turn point, where it is stored dense anyway), ``X + Y`` has at most
    ``nnz(X) + nnz(Y)``, transposes keep theirs; everything else is bounded by its cells. -1: unknown dims."""
    if h.dt != MATRIX or h.rows < 0 or h.cols < 0:
        return -1.0
    if h.nnz >= 0:
        return float(h.nnz)
    cells = float(h.rows) * h.cols

    def of(i: Hop) -> float:
        z = bounds.get(i.id, -1.0)
        return z if z >= 0 else (float(i.rows) * i.cols if i.rows >= 0 and i.cols >= 0 else math.inf)

    mats = [i for i in h.inputs if i.dt == MATRIX]
    if h.kind == "matmult" and len(mats) == 2:
        za, zb = of(mats[0]), of(mats[1])
        return min(cells, za * h.cols, h.rows * zb, za * zb)
    full = [of(i) for i in mats if (i.rows, i.cols) == (h.rows, h.cols)]
    if h.kind == "binary" and h.op in ("*", "&") and full:
        return min(cells, *full)
    if h.kind == "binary" and h.op in ("+", "-", "|") and len(full) == len(h.inputs) == 2:
        return min(cells, sum(full))
    if h.kind == "reorg" and h.op in ("t", "rev") and mats:
        return min(cells, of(mats[0]))
    main = h.inputs[0] if h.inputs and h.inputs[0].dt == MATRIX else None
    plan = h.params.get("cplan") if h.kind == "spoof" else None
    if plan is not None and main is not None and plan.sparse_safe and plan.agg == "no_agg" \
            and (main.rows, main.cols) == (h.rows, h.cols):
        # a sparse-safe fused operator iterates over its main input's (position 0) non-zeros only
        return min(cells, of(main))
    if h.kind == "unary" and h.op in ZERO_KEEPING_UNARY and len(full) == 1:
        return min(cells, full[0])
    if h.kind == "binary" and len(h.inputs) == 2 and len(full) == 1 and _zero_keeping(h):
        return min(cells, full[0])
    return cells


# unary operators that map 0 to 0: a zero cell of their operand stays zero
ZERO_KEEPING_UNARY = frozenset({"abs", "sqrt", "sign", "round", "floor", "ceil", "u-", "sin", "tan", "asin",
                                "atan", "sinh", "tanh"})
# binary operator -> when ``0 op c`` is 0 (matrix left) and when ``c op 0`` is 0 (matrix right), by c
_ZERO_LEFT: dict[str, Any] = {
    "*": lambda c: True, "/": lambda c: c != 0, "^": lambda c: c > 0, "+": lambda c: c == 0, "-": lambda c: c == 0,
    "!=": lambda c: c == 0, "==": lambda c: c != 0, ">": lambda c: c >= 0, ">=": lambda c: c > 0,
    "<": lambda c: c <= 0, "<=": lambda c: c < 0, "min": lambda c: c >= 0, "max": lambda c: c <= 0}
_ZERO_RIGHT: dict[str, Any] = {
    "*": lambda c: True, "+": lambda c: c == 0, "-": lambda c: c == 0, "!=": lambda c: c == 0,
    "==": lambda c: c != 0, ">": lambda c: c <= 0, ">=": lambda c: c < 0, "<": lambda c: c >= 0,
    "<=": lambda c: c > 0, "min": lambda c: c >= 0, "max": lambda c: c <= 0}


def _zero_keeping(h: Hop) -> bool:
    """Whether the matrix-scalar operation ``h`` (a literal scalar) maps a zero cell to zero, so its
    non-zeros are at most its matrix operand's (``X != 0``, ``X > 0``, ``X / 2``, ``X ^ 2``), as
    SystemDS's sparse-safe scalar operators keep them. NaN as the scalar: never."""
    a, b = h.inputs
    lit, table = (b, _ZERO_LEFT) if a.dt == MATRIX else (a, _ZERO_RIGHT)
    if not lit.is_literal or isinstance(lit.value, str) or lit.value is None:
        return False
    try:
        c = float(lit.value)
    except (TypeError, ValueError):
        return False
    test = table.get(h.op)
    return test is not None and c == c and bool(test(c))
