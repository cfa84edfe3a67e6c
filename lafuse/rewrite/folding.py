"""Folding rules: constant folding of scalar operations on literals, and size-based folding.

Constant folding runs the very kernels the runtime would run, through the evaluator the compiler
hands the rewrite driver (``Ctx.evaluate``: runtime.local.backend.evaluate_literals), so a folded literal is
bit-identical to the value the instruction would have produced, with the same Python type (INT stays
``int``, DOUBLE ``float``, string concatenation a ``str``). An operation whose kernel raises is left
alone: the error then happens at run time with the HOP's source span. Without an evaluator (a
rewrite run outside a compiler) nothing is folded.

Folding never uses run-time scalar values (``ctx.known``): recompiled plans are cached by input
shapes, not by every scalar value, so only sizes may be folded in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lafuse.hops.hop import BOOLEAN, DOUBLE, INT, MATRIX, SCALAR, STRING, UNKNOWN, Hop
from lafuse.rewrite.core import Ctx, rule

_ARITH = {"+", "-", "*", "/", "^", "%%", "%/%"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_FOLD_BINARY = _ARITH | _COMPARE | {"&", "|", "xor", "bitwAnd", "log"}
_FOLD_UNARY = {
    "u-", "!", "abs", "exp", "sqrt", "round", "ceil", "floor", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "sign", "log", "isNaN", "isInf", "isNA", "as.integer", "as.double", "as.logical",
}
_FOLD_NARY = {"min", "max"}
# not ifelse: its run-time value keeps the taken branch's type, and a TWrite of an ifelse casts
# (plan.build), so a literal in its place could change a variable's type

def _type_ok(v: Any, vt: str) -> bool:
    if isinstance(v, bool):
        return vt in (BOOLEAN, UNKNOWN)
    if isinstance(v, int):
        return vt in (INT, UNKNOWN)
    if isinstance(v, float):
        return vt in (DOUBLE, UNKNOWN)
    if isinstance(v, str):
        return vt in (STRING, UNKNOWN)
    return False


def foldable(h: Hop) -> bool:
    if h.dt != SCALAR or not h.inputs:
        return False
    if not all(i.is_literal and i.value is not None for i in h.inputs):
        return False
    k = h.kind
    return ((k == "binary" and h.op in _FOLD_BINARY) or (k == "unary" and h.op in _FOLD_UNARY)
            or (k == "nary" and h.op in _FOLD_NARY))


def evaluate(h: Hop, run: Callable[[Hop], Any]) -> tuple[bool, Any]:
    """``run`` (the runtime's evaluator) on ``h``'s literal inputs: (ok, value)."""
    try:
        v = run(h)
    except Exception:  # noqa: BLE001 - any run-time error stays a run-time error
        return False, None
    return _type_ok(v, h.vt), v


@rule("fold_constants", kinds=("binary", "unary", "nary"))
def fold_constants(h: Hop, ctx: Ctx) -> Hop | None:
    """Scalar operations on literals become literals, computed by the runtime's own kernels.

    ``3 / 2`` -> ``1.5`` (DOUBLE); ``3 + 2`` -> ``5`` (INT); ``"a" + 1`` -> ``"a1"``; ``!TRUE`` -> ``FALSE``;
    ``max(2, 7.5)`` -> ``7.5``; ``5 %/% 0`` is left for the runtime when its kernel raises.
    """
    if ctx.evaluate is None or not foldable(h):
        return None
    ok, v = evaluate(h, ctx.evaluate)
    if not ok:
        return None
    return ctx.lit(v, h)


@rule("fold_sizes", phase="dynamic", kinds=("unary",))
def fold_sizes(h: Hop, ctx: Ctx) -> Hop | None:
    """``nrow``/``ncol``/``length`` of a matrix with known dims become INT literals.

    ``X = rand(rows=10, cols=3); n = nrow(X)`` -> ``n = 10``; ``length(X)`` -> ``30``.
    Not applied when that would drop the only use of a nondeterministic computation (``nrow(rand(..))``).
    """
    if h.kind != "unary" or h.op not in ("nrow", "ncol", "length") or len(h.inputs) != 1:
        return None
    x = h.inputs[0]
    if x.dt != MATRIX or not x.dims_known:
        return None
    if not ctx.pure(x) and ctx.n_consumers(x) <= 1 and not ctx.is_root(x):
        return None
    v = x.rows if h.op == "nrow" else x.cols if h.op == "ncol" else x.rows * x.cols
    return ctx.lit(int(v), h)


def truth_value(v: Any) -> bool | None:
    """The branch a literal predicate takes (as the interpreter decides), or None if undecidable."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return bool(v != 0) if not (isinstance(v, float) and math.isnan(v)) else True
    if isinstance(v, str) and v in ("TRUE", "true", "FALSE", "false"):
        return v in ("TRUE", "true")
    return None
