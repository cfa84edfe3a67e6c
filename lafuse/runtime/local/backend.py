"""The local backend: binds instructions to the kernels of this process (NumPy dense blocks, SciPy CSR
blocks, generated fused kernels), converts formats and collects (a local value is collected already).

What binding decides once per plan: a kernel with its arguments in the catalogue's order, a fused
operator's generated kernel, a product reading transposed operands in place, the memory-budget
stop, a result written into a dying operand (runtime.reuse).
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

from lafuse import memory
from lafuse.formats import CSC, CSR, DENSE
from lafuse.hops.hop import Hop
from lafuse.plan.build import SHAPE_ONLY, scalar_cast
from lafuse.plan.instructions import LOCAL, Instruction
from lafuse.runtime import reuse
from lafuse.runtime.bind import SPECIAL
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.local.kernels import bind_args
from lafuse.runtime.local.kernels_common import norm_scalar
from lafuse.runtime.values import cast_scalar, is_sparse, to_csr, to_dense
from lafuse.sparse import sp


class LocalBackend:
    """``kernels``: operation name -> kernel (runtime.local.kernels.KERNELS); ``threads``: the
    fused kernels' thread count; ``codegen``: "numba" (generated kernels) or "reference" (the CPlan
    interpreter, runtime.local.reference)."""

    name = LOCAL

    def __init__(self, kernels: dict[str, Callable[..., Any]], threads: int | None = None,
                 codegen: str = "numba") -> None:
        self.kernels = kernels
        self.threads = threads
        self.codegen = codegen

    def bind(self, ins: Instruction) -> Callable[..., Any] | None:
        h, op = ins.hop, ins.opcode
        kernels = self.kernels
        if op == "convert":
            fn: Callable[..., Any] = functools.partial(held_convert if ins.held else self.convert,
                                                       fmt=ins.out_fmt or DENSE)
        elif h.kind == "spoof":
            fn = spoof_kernel(h, self.threads, self.codegen)
        elif h.kind == "cuboid":  # (a partial plan of fusion.fuseme, its operators in turn)
            from lafuse.runtime.local import mmeval  # deferred: it imports this module

            fn = functools.partial(_whole_mm, mmeval.whole, h.params["mmplan"])
        elif ins.chain is not None:
            fn = functools.partial(kernels["mmchain"], w_first=ins.chain[0], transposed=ins.chain[1])
        elif op == "wsloss":
            ta, tb = ins.transposed or (False, False)
            fn = functools.partial(kernels["wsloss"], ta=ta, tb=tb)
        elif op == "sampledsum":
            ta, tb = ins.transposed or (False, False)
            fn = functools.partial(kernels["sampledsum"], ta=ta, tb=tb, x_left=ins.pattern.x_left,
                                   chain=ins.pattern.chain)
        elif op in SPECIAL:
            return None
        else:
            k = kernels.get(op)
            if k is None:
                raise NotImplementedError(f"no kernel for operation '{op}'")
            fn = bind_args(op, h.params.get("slots"), k)
            if op in SHAPE_ONLY:
                fn = _dims_anywhere(op, fn)
            if ins.transposed is not None:
                fn = _matmult_transposed(fn, *ins.transposed)
        if h.dt == "matrix" and ins.over_budget:
            fn = _stop_over_budget(fn, ins.need, f"'{h.op}' with a {h.rows}x{h.cols} result")
        if ins.reuse >= 0:
            if reuse.dense_ufunc(fn) is None:  # (arguments bound in another order: the kernel's own call)
                ins.reuse = -1
            else:
                same = len(ins.args) == 2 and ins.args[0] == ins.args[1]
                fn = reuse.into(fn, ins.reuse, reuse.LOOP_REFS_SAME if same else reuse.LOOP_REFS, same)
        return fn

    def convert(self, value: Any, fmt: str) -> Any:
        """A copy in ``fmt`` (the value itself where it is in ``fmt`` already: a format decided at run
        time can differ from the predicted one)."""
        if fmt == DENSE:
            return to_dense(value)
        if fmt == CSR and not is_sparse(value):
            return to_csr(value)
        return convert_sparse(value, fmt)

    def collect(self, value: Any) -> Any:
        return value

    def settle(self) -> None:
        pass


def convert_sparse(value: Any, fmt: str) -> Any:
    """A sparse value in CSR or CSC as planned (plan.layout.local); a dense one as it is: a format the
    kernel decided at run time may be dense where CSR was predicted, and every kernel takes dense."""
    if fmt in (CSR, CSC) and is_sparse(value) and value.format != fmt:
        return sp.csr_array(value) if fmt == CSR else sp.csc_array(value)
    return value


# the conversions kept with variables' values: id(value) -> (a weak reference to it, format, converted).
# A value is never changed in place once a variable holds it (interp._lix_inplace updates only dense
# arrays it owns), so a converted form stays right for as long as the value lives.
_HELD: dict[int, tuple[Any, str, Any]] = {}


def held_convert(value: Any, fmt: str) -> Any:
    """``value`` in ``fmt``, converted once per value: a loop that reads a variable it does not assign
    converts it in its first iteration only (plan.layout.local's ``hold``)."""
    if not is_sparse(value) or value.format == fmt:
        return value
    key = id(value)
    got = _HELD.get(key)
    if got is not None and got[0]() is value and got[1] == fmt:
        return got[2]
    out = convert_sparse(value, fmt)

    def drop(_ref: Any, key: int = key) -> None:
        _HELD.pop(key, None)

    try:
        ref = weakref.ref(value, drop)
    except TypeError:  # (a value that takes no weak reference: converted each time)
        return out
    _HELD[key] = (ref, fmt, out)
    return out


def _whole_mm(whole: Callable[..., Any], plan: Any, *args: Any) -> Any:
    return whole(plan, 1000, args)  # (every value whole: the block size only names the regions)


def _stop_over_budget(fn: Callable[..., Any], need: float, what: str) -> Callable[..., Any]:
    """An operation that needs more than the memory budget stops with a clear error when it is
    reached (earlier statements of the block still run; paper 003 §3: SystemDS would choose a
    distributed operator here). Decided when the plan was built, so running costs nothing; a plan is
    built again when a recompilation learns the sizes."""

    def over_budget(*args: Any) -> Any:
        memory.check(need, what)
        return fn(*args)  # the budget was raised since the plan was built

    return over_budget


def _dims_anywhere(op: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``nrow``/``ncol``/``length`` of a local value or of a distributed one (its dims: nothing moves)."""

    def run(x: Any) -> Any:
        if isinstance(x, Blocked):
            return x.rows if op == "nrow" else x.cols if op == "ncol" else x.rows * x.cols
        return kernel(x)

    return run


def evaluate_literals(h: Hop, kernels: dict[str, Callable[..., Any]]) -> Any:
    """The value the instruction of ``h`` (a scalar operation over literals) computes, as the
    interpreter runs it: its kernel with the catalogue's arguments, NumPy scalars turned into the
    value contract's Python types, and the cast of a DOUBLE or INT result (``Instruction.cast``).
    Raises what the kernel raises. Constant folding calls it (rewrite.core.Ctx.evaluate)."""
    k = kernels.get(h.op)
    if k is None:
        raise KeyError(f"no kernel for '{h.op}'")
    v = norm_scalar(bind_args(h.op, h.params.get("slots"), k)(*[i.value for i in h.inputs]))
    to = scalar_cast(h)
    return v if to is None else cast_scalar(v, to)


def _matmult_transposed(mm: Callable[..., Any], ta: bool, tb: bool) -> Callable[..., Any]:
    def run(a: Any, b: Any) -> Any:
        return mm(a.T if ta else a, b.T if tb else b)

    if getattr(mm, "dense_matmul", False):
        run.dense_matmul_t = (ta, tb)  # type: ignore[attr-defined]  # (runtime.straight)
    return run


def spoof_kernel(h: Hop, threads: int | None = None, backend: str = "numba") -> Callable[..., Any]:
    """The generated kernel of a fused operator HOP, compiled (or found in the plan cache) when it
    first runs, for the formats its inputs come in (runtime.local.fused.compile_plan);
    backend "reference" runs the CPlan on the pure-NumPy reference interpreter instead (the spec:
    tests check the optimizer's plans with it without paying for Numba compilation)."""
    plan = h.params["cplan"]
    if backend == "reference":
        from lafuse.runtime.local.reference import evaluate  # deferred: it loads code generation's templates

        def ref(*args: Any) -> Any:
            return evaluate(plan, list(args))

        return ref
    started = "lafuse.codegen" in sys.modules
    t0 = time.perf_counter()
    from lafuse import codegen  # deferred: Numba's import, ~0.5 s, only for a plan with a fused operator
    from lafuse.runtime.local import fused  # deferred: it imports codegen

    if not started:  # Numba's import, part of its start-up: reported by --stats with the kernel loads
        codegen.record_import_time(time.perf_counter() - t0)
    op = fused.compile_plan(plan, threads=threads, eager=False)

    def run(*args: Any) -> Any:
        return op(list(args))

    run.fused = op  # type: ignore[attr-defined]
    return run
