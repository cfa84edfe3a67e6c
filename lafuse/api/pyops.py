"""Python's ``//`` and ``%`` in DML terms. DML's ``%/%`` and ``%%`` truncate toward zero (``%%`` is
NaN for an infinite divisor); Python and NumPy floor, the remainder taking the divisor's sign. Built
as CPython's float ``divmod`` computes them, from C's fmod, so they agree at 0, Inf and NaN too; a
fused cell kernel evaluates the whole formula in one pass.
"""

from __future__ import annotations

from typing import Any


def _fns() -> tuple[Any, Any, Any, Any]:
    from lafuse.api.functions import lookup

    return lookup("ifelse"), lookup("isInf"), lookup("sign"), lookup("floor")


def _fmod(x: Any, y: Any) -> Any:
    """C's fmod: ``x`` for a finite x and an infinite y (DML's %% gives NaN there)."""
    ifelse, is_inf, _, _ = _fns()
    from lafuse.api import expr as E
    from lafuse.api.lazy import as_node as node
    from lafuse.api.lazy import wrap

    xn, yn = node(x), node(y)
    inf_y = is_inf(wrap(yn))
    return ifelse(inf_y & (is_inf(wrap(xn)) == 0), wrap(xn), wrap(E.binary("%%", xn, yn)))


def _lazy(x: Any, y: Any) -> tuple[Any, Any] | None:
    from lafuse.api.lazy import as_node, wrap

    try:
        return wrap(as_node(x)), wrap(as_node(y))
    except TypeError:
        return None


def _divmod(x: Any, y: Any) -> tuple[Any, Any, Any, Any] | None:
    """(x, y, fmod(x, y), whether the remainder moves by y: it is non-zero and of another sign than
    y), lazily; None for an operand that is no number or matrix."""
    got = _lazy(x, y)
    if got is None:
        return None
    x, y = got
    m = _fmod(x, y)
    return x, y, m, (m != 0) & ((y < 0) != (m < 0))


def remainder(x: Any, y: Any) -> Any:
    """``x % y`` as Python's: the sign of ``y``; a zero remainder is a zero of ``y``'s sign."""
    got = _divmod(x, y)
    if got is None:
        return NotImplemented
    x, y, m, moved = got
    ifelse, _, sign, _ = _fns()
    return ifelse(m != 0, ifelse(moved, m + y, m), 0 * sign(y))


def floor_divide(x: Any, y: Any) -> Any:
    """``x // y`` as Python's and NumPy's (``x / 0`` for a zero divisor, as NumPy's)."""
    got = _divmod(x, y)
    if got is None:
        return NotImplemented
    x, y, m, moved = got
    ifelse, _, sign, floor = _fns()
    div = ifelse(moved, (x - m) / y - 1, (x - m) / y)
    fl = floor(div)
    fl = ifelse(div - fl > 0.5, fl + 1, fl)
    return ifelse(y == 0, x / y, ifelse(div != 0, fl, 0 * sign(x / y)))
