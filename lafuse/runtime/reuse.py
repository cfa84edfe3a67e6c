"""Element-wise results written into the buffer of an operand that dies with the instruction.

Why: a large intermediate that a single element-wise operation consumes need not live beside its
result. ``tanh(X %*% W + b)`` over a 50000 x 32 X allocates three 12.8 MB arrays when each
operation makes a new one, and a process touching fresh memory pays page faults for every page
(3-38 ms per such array in the benchmark's mini-batch MLP, varying by process). NumPy elides such a
temporary itself when Python's reference count shows it is the only owner (``a + b + c``, from
256 KiB on); an interpreter holding registers never lets it see one. Liveness does: the plan
(plan.build) knows the last reader of every register, and this module decides at run time, by the same reference
count, that nothing else holds the array (no variable, no view, no other register, no caller).

Only what the kernel's own dense fast path computes as one NumPy ufunc call is done in place (same
shape, a scalar, or a row or column vector broadcast that is not a narrow one): ``f(a, b, out=a)``
gives the same values as ``f(a, b)``. One register read twice (``(X - W %*% H) ^ 2``, which the
rewrites turn into ``D * D``) counts as one dying operand: ``f(a, a, out=a)`` reads each cell before
it writes it. That spares GNMF's last statement one of its two 400 MB allocations; fresh allocations
that large are where this host's transparent huge pages stall on compaction (that ``*`` took 0.06 s
in most runs, 0.5-1.1 s in two of six). Anything else calls the kernel. Fused kernels remember that
an array holds no NaN/Inf (codegen.finite); an array updated in place is forgotten there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from lafuse.formats import NARROW_COLS, NARROW_MIN_ROWS
from lafuse.plan.build import REUSE_MIN_CELLS
from lafuse.runtime.local.kernels_common import errstate
from lafuse.runtime.local.kernels_elementwise import add_at_nonzeros
from lafuse.sparse import sp

_F64 = np.dtype(np.float64)
_ND = np.ndarray
_refs = sys.getrefcount


def _probe(a: Any, b: Any = None) -> int:
    return _refs(a)


def _loop_refs() -> int:
    """References to an argument inside a kernel called the way interp._exec_loop calls it: the
    register list, the argument list, the call's tuple, the parameter and getrefcount's own."""
    regs: list[Any] = [np.empty(1), 1.0]
    args = [regs[a] for a in (0, 1)]
    return _probe(*args)


def _straight_refs() -> int:
    """The same for generated straight-line code (runtime.straight): a local, the parameter and
    getrefcount's own."""
    r0 = np.empty(1)
    return _probe(r0, 1.0)


def _loop_refs_same() -> int:
    """``_loop_refs`` when one register is both arguments (``f(r, r)``)."""
    regs: list[Any] = [np.empty(1)]
    args = [regs[a] for a in (0, 0)]
    return _probe(*args)


def _straight_refs_same() -> int:
    """``_straight_refs`` when one local is both arguments."""
    r0 = np.empty(1)
    return _probe(r0, r0)


# measured, not assumed: they follow the interpreter's calling conventions on this Python
LOOP_REFS = _loop_refs()
STRAIGHT_REFS = _straight_refs()
LOOP_REFS_SAME = _loop_refs_same()
STRAIGHT_REFS_SAME = _straight_refs_same()


# results written in place and their bytes, this process (--stats shows a run's share)
DONE = [0, 0]


def dense_ufunc(kern: Callable[..., Any]) -> np.ufunc | None:
    """The kernel's dense operation when it is a float64 -> float64 NumPy ufunc."""
    f = getattr(kern, "dense_op", None)
    if not isinstance(f, np.ufunc) or f.nout != 1:
        return None
    sig = "d->d" if f.nin == 1 else "dd->d" if f.nin == 2 else ""
    return f if sig and sig in f.types else None


def into(kern: Callable[..., Any], k: int, refs: int, same: bool = False) -> Callable[..., Any]:
    """``kern`` that writes its result into argument ``k`` when the array is float64, owns its buffer,
    has the result's shape and at most ``refs`` references (LOOP_REFS or STRAIGHT_REFS: the caller's
    own; the ``_SAME`` ones when ``same``, one register passed as both arguments, checked by identity);
    else ``kern`` itself runs."""
    f = dense_ufunc(kern)
    assert f is not None
    finite = sys.modules
    plus_minus = f is np.add or f is np.subtract

    def forget(x: Any) -> None:
        DONE[0] += 1
        DONE[1] += x.nbytes
        fin = finite.get("lafuse.codegen.finite")
        if fin is not None:
            fin.invalidate(x)

    if f.nin == 1:
        def run1(x: Any) -> Any:
            if _dying(x, refs):
                with errstate():
                    f(x, out=x)
                forget(x)
                return x
            return kern(x)
        run: Callable[..., Any] = run1
    elif same:
        def run_same(a: Any, b: Any) -> Any:
            if a is b and _dying(a, refs):
                with errstate():
                    f(a, a, out=a)
                forget(a)
                return a
            return kern(a, b)
        run = run_same
    elif k == 0:
        def run0(a: Any, b: Any) -> Any:
            if _fits(b, a) and _dying(a, refs):
                with errstate():
                    f(a, b if type(b) is _ND else float(b), out=a)
                forget(a)
                return a
            if plus_minus and _sparse_into(f, b, a, refs, False):
                forget(a)
                return a
            return kern(a, b)
        run = run0
    else:
        def run_1(a: Any, b: Any) -> Any:
            if _fits(a, b) and _dying(b, refs):
                with errstate():
                    f(a if type(a) is _ND else float(a), b, out=b)
                forget(b)
                return b
            if plus_minus and _sparse_into(f, a, b, refs, True):
                forget(b)
                return b
            return kern(a, b)
        run = run_1
    run.reuse_arg = k  # type: ignore[attr-defined]
    run.reuse_same = same  # type: ignore[attr-defined]
    run.kern = kern  # type: ignore[attr-defined]
    return run


def _sparse_into(f: np.ufunc, S: Any, x: Any, refs: int, sparse_left: bool) -> bool:
    """``S + x``, ``x + S``, ``S - x`` or ``x - S`` (S a CSR matrix of x's shape, x a dying dense
    array with a non-zero: the kernel's result is dense then) written into x: x negated for ``S - x``,
    S's non-zeros added or subtracted at their cells; the kernel's values (``s - d`` is ``s + (-d)``),
    without the result's fresh allocation (GNMF's ``X - W %*% H``: 840 MB whose page faults cost
    1.8 s of a 2 s operation on this host). Whether it did."""
    if not (sp.issparse(S) and S.format == "csr" and S.dtype == _F64 and type(x) is _ND and S.shape == x.shape
            and S.has_canonical_format and _dying(x, refs + 1) and x.any()):
        return False
    with errstate():
        if sparse_left and f is np.subtract:
            np.negative(x, out=x)
        add_at_nonzeros(x, S, subtract=f is np.subtract and not sparse_left)
    return True


def _dying(x: Any, refs: int) -> bool:
    """Whether ``x`` is a float64 array of at least REUSE_MIN_CELLS that owns its writable buffer and that
    only the kernel's caller holds: ``refs`` references as the kernel counts them, one more here
    (this function's parameter)."""
    return type(x) is _ND and x.size >= REUSE_MIN_CELLS and x.dtype == _F64 and x.base is None \
        and x.flags.writeable and _refs(x) <= refs + 1


def _fits(other: Any, x: Any) -> bool:
    """Whether the kernel's fast path computes ``f(x, other)`` as one ufunc call with x's shape (x a
    matrix): a float or int (not bool), a same-shape float64 array, or a row or column vector
    broadcast over a matrix that is not narrow (the kernel runs a narrow one a column at a time)."""
    t = type(other)
    if t is float or t is int:
        return True
    if t is not _ND or other.dtype != _F64 or type(x) is not _ND:
        return False
    s, shape = other.shape, x.shape
    if s == shape:
        return True
    vector = (s[0] == 1 and s[1] == shape[1]) or (s[1] == 1 and s[0] == shape[0])
    return vector and not (1 < shape[1] <= NARROW_COLS and shape[0] >= NARROW_MIN_ROWS)
