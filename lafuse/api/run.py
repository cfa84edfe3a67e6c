"""Computing lazy values: their graph as one DML script, compiled and run in this process by the same
compiler and runtime as ``lafuse run`` (rewrites, sum-product optimization, fusion, dynamic
recompilation, the Dask runtime under ``exec_type``).

Errors the compiler or runtime find are raised at the Python line that built the failing expression
(the script's line -> node -> span map of ``api.emit``), as the same lafuse error type.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

from lafuse import config as cfgmod
from lafuse.api.emit import PATH, Script, describe, emit
from lafuse.api.expr import MATRIX, Node, line_span
from lafuse.errors import DMLError

_LAST: list[Any] = [None]  # the statistics of the last compute under ``stats=True``


def last_stats() -> Any:
    """The ``runtime.stats.Stats`` of the last ``compute`` run with ``lf.config(stats=True)`` (which
    instructions ran, heavy hitters: ``.render()``), or None."""
    return _LAST[0]


MAX_PROGRAMS = 32  # compiled scripts kept (a Python loop computes the same script each iteration)
_PROGRAMS: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
MAX_RECORDED = 8  # scripts whose imports (Numba, SciPy's sparse module) the process records at exit
_HANDOFF: dict[str, Any] = {}  # "cfg": the config of the last compile; "texts": the last scripts compiled


def _launch(text: str, cfg: cfgmod.Config) -> None:
    """What ``lafuse run`` does around a script, for a script compiled from Python: the process's first
    compile sets malloc up (``memory.tune_malloc``); a script whose last run imported Numba or SciPy's
    sparse module starts them in the background (``feedback.prestart``); at exit, the process hands
    on what a run hands on when its script ends (fusion decisions and feedback, the kernels that pay
    only from the plan cache, compiled in the background: ``runtime.handoff``) and records those
    imports for the scripts it compiled. A later process computing the same expressions starts where
    this one left off, as a later run of the same script does."""
    from lafuse.runtime import handoff

    if not _HANDOFF:
        import atexit

        from lafuse import memory

        memory.tune_malloc()  # (as lafuse run: freed intermediates reused, not page-faulted in again)
        atexit.register(_at_exit)
        _HANDOFF["texts"] = []
    _HANDOFF["cfg"] = cfg
    texts = _HANDOFF["texts"]
    if text not in texts:
        texts.append(text)
        del texts[:-MAX_RECORDED]
    if cfg.numba_prestart:
        handoff.prestart_at_launch(text, cfg)


def _at_exit() -> None:
    from lafuse.runtime import handoff

    cfg = _HANDOFF["cfg"]
    handoff.run_ended(cfg)
    if cfg.numba_prestart:
        handoff.record_kernels_used(_HANDOFF["texts"], cfg)


def _key(script: Script, cfg: cfgmod.Config) -> tuple | None:
    """What a compiled program rests on: the script, the config, and each input's type, and a
    matrix's size, non-zeros and format (exact non-zeros feed size rewrites and format choices); a
    bound scalar's value is not known to the compiler (``compile_text`` types it only), so one program
    serves every value. None: an input without a stable key (compiled afresh)."""
    from lafuse.runtime.values import is_matrix, is_sparse

    parts: list[tuple] = []
    for name, v in script.bound.items():
        if is_matrix(v):
            parts.append((name, v.shape, script.nnz[name], is_sparse(v)))
        elif isinstance(v, (bool, int, float, str)):  # (its type only: the compiler knows no bound value)
            parts.append((name, type(v).__name__))
        else:
            return None
    return (script.text, cfg, tuple(parts))


def compiled(script: Script, cfg: cfgmod.Config, stats: Any) -> tuple[Any, Any]:
    """(compiler, program) of ``script``: the one compiled for the same key before, else new (its
    compiler recording into ``stats``; a run sets the statistics it records into: ``_run``)."""
    from lafuse.compiler import Compiler
    from lafuse.runtime.values import is_matrix, nnz

    for name, v in script.bound.items():
        if name not in script.nnz and is_matrix(v):
            script.nnz[name] = nnz(v)
    key = _key(script, cfg)
    got = _PROGRAMS.get(key) if key is not None else None
    if got is not None and key is not None:
        _PROGRAMS.move_to_end(key)
        return got
    _launch(script.text, cfg)
    comp = Compiler(cfg, stats=stats)
    prog = comp.compile_text(script.text, PATH, script.bound, tuple(script.outputs), input_nnz=script.nnz)
    plan_ahead(comp, prog, script.bound, cfg)
    if key is not None:
        _PROGRAMS[key] = (comp, prog)
        if len(_PROGRAMS) > MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    return comp, prog


def plan_ahead(comp: Any, prog: Any, bound: dict[str, Any], cfg: cfgmod.Config) -> None:
    """At compile, what the run's first plans would load: the program's leading straight-line blocks
    that read only the bound inputs are planned as the run would plan them (the same DAG, weight and
    inputs: the interpreter binds a block's plan when it has one), and the fusion optimizer is
    imported when some block may be fused (``compiler.fusion_cannot_pay``). Why: ``lafuse run`` gets
    both before a script's first ``time()``, planning its ``read`` statements; a Python script has
    none, so its first compute paid them, measured on the benchmark's L2SVM at 10^4 x 100 (alternating
    fresh processes, medians of 8): 21.0 ms against the DML's 13.9; 16.7 with the import done at
    compile; 13.8 against 12.9 with the first block planned too."""
    from lafuse.compiler import fusion_cannot_pay
    from lafuse.hops.program import GenericBlock, iter_blocks

    if cfg.codegen and "lafuse.fusion" not in sys.modules:
        blocks = [*prog.blocks, *(b for f in prog.functions.values() for b in f.blocks)]
        if any(isinstance(b, GenericBlock) and not fusion_cannot_pay(b.dag, b.weight, cfg) for b in iter_blocks(blocks)):
            import lafuse.fusion  # noqa: F401  (the ~70 ms import, here rather than inside the run)
    for b in prog.blocks:
        if not isinstance(b, GenericBlock) or b.requires_recompile or not b.dag.reads() <= bound.keys():
            break
        if b.plan is None:
            b.plan = comp.plan_dag(b.dag, b.weight, dict(bound))


def _run(script: Script, program: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The script's outputs by variable (``program``: its compiled (compiler, program), else the one
    ``compiled`` finds or makes)."""
    from lafuse.plan.instructions import DASK
    from lafuse.runtime.interp import Interpreter
    from lafuse.threads import blas_limited

    cfg = cfgmod.get()
    stats = None
    if cfg.stats:
        from lafuse.runtime.stats import Stats

        stats = Stats()

    def go() -> dict[str, Any]:
        comp, prog = compiled(script, cfg, stats) if program is None else program
        comp.stats = stats
        with blas_limited(cfg.threads):
            st = Interpreter(prog, comp, out=sys.stdout, stats=stats).run(dict(script.bound))
        if stats is not None:
            stats.fusion = comp.fusion_stats
        return {k: comp.backends[DASK].collect(st[k]) for k in script.outputs if k in st}

    try:
        return _deep(script, go)
    finally:
        _LAST[0] = stats


def _deep(script: Script, fn: Any) -> Any:
    """``fn()`` on a deep thread (``runtime.deepstack``: the compiler and interpreter recurse), a
    lafuse error it raises located at the Python line of the script's failing node."""
    from lafuse.runtime import deepstack

    try:
        return deepstack.call(fn)
    except DMLError as e:
        raise relocate(e, script) from None


def compile_script(script: Script) -> tuple[Any, Any]:
    """(compiler, program) of ``script`` under the current config (``compiled``), on a deep thread."""
    cfg = cfgmod.get()
    return _deep(script, lambda: compiled(script, cfg, None))


def relocate(e: DMLError, script: Script) -> DMLError:
    """``e`` at the Python line of the node whose statement failed; an error inside a library function
    keeps its DML position and names the Python line of the call."""
    span = e.span
    if span is None:
        return e
    if span.file == PATH:
        node = script.lines.get(span.line)
        if node is not None:
            e.span = line_span(node.span)
            e.message = f"{e.message} (in {describe(node)})"
            e.args = (e.message,)
        return e
    calls = [n for n in script.lines.values() if n.op == "call"]
    if len(calls) == 1:
        s = calls[0].span
        e.message = f"{e.message} (in {calls[0].fn}() called at {s.file}:{s.line})"
        e.args = (e.message,)
    return e


def compute(*values: Any) -> tuple[Any, ...]:
    """The values of several lazy expressions, computed together: one script, one plan, a
    subexpression they share computed once. Matrices come back as NumPy arrays (or SciPy CSR arrays
    where the runtime holds them sparse), scalars as Python numbers; non-lazy arguments as they are."""
    from lafuse.api.lazy import Expr

    lazy = [v for v in values if isinstance(v, Expr)]
    if not lazy:
        return tuple(values)
    script = emit([v.node for v in lazy])
    return _results(values, script, _run(script))


class Compiled:
    """Lazy values compiled into one plan, not run yet: ``compute()`` runs it (each call afresh, on the
    inputs the values were built over); ``dml`` is the script it was compiled from. Compiling ahead
    separates the compiler's time from the run's, as ``lafuse run`` compiles a script before it runs;
    ``lf.compute`` of the same values later finds this compiled program too (by script and sizes)."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        from lafuse.api.lazy import Expr

        self._values = values
        self._script = emit([v.node for v in values if isinstance(v, Expr)])
        self._program = compile_script(self._script)
        from lafuse.runtime import handoff

        # the background start of the imports the run needs (SciPy's sparse module, Numba) ends here:
        # measured, KMeans 10^4 x 50 compiled then run at once: it was still importing SciPy's sparse
        # module (0.2 s, at a lowered switch interval) when the run began
        handoff.prestart_wait()

    @property
    def dml(self) -> str:
        return self._script.text

    def compute(self) -> tuple[Any, ...]:
        """The values, as ``lf.compute`` returns them."""
        return _results(self._values, self._script, _run(self._script, self._program))


def compile(*values: Any) -> Compiled:  # noqa: A001  (lf.compile, as jax.jit(...).lower().compile())
    """``values`` compiled now, under the current config, into one plan to run later."""
    return Compiled(values)


def _results(values: tuple[Any, ...], script: Script, got: dict[str, Any]) -> tuple[Any, ...]:
    from lafuse.api.lazy import Expr

    results = iter([got[name] for name in script.outputs])
    return tuple(next(results) if isinstance(v, Expr) else v for v in values)


def run_statement(n: Node) -> None:
    """A statement builtin (print, write, stop, assert) run now."""
    from lafuse.api.emit import emit as _emit

    script = _emit([a for a in n.inputs()])
    line = f"{n.fn}({', '.join(_refs(script, n))})"
    script.text += line + "\n"
    script.lines[script.text.count("\n")] = n
    script.outputs = []
    _run(script)


def _refs(script: Script, n: Node) -> list[str]:
    """The variables the statement's arguments were emitted as (the script's outputs, in order)."""
    names = iter(script.outputs)
    pos = [next(names) for _ in [a for a in n.args if a is not None]]
    return pos + [f"{k}={next(names)}" for k in n.kw]


def shape_of(n: Node) -> tuple[int, int]:
    """A matrix's shape: the compiler's size propagation, else computed (``nrow``/``ncol``)."""
    from lafuse.api import expr as E

    assert n.kind == MATRIX
    r, c = compute_nodes([E.call("nrow", [n], kind=E.SCALAR), E.call("ncol", [n], kind=E.SCALAR)])
    return int(r), int(c)


def compute_nodes(nodes: list[Node]) -> list[Any]:
    script = emit(nodes)
    got = _run(script)
    return [got[name] for name in script.outputs]
