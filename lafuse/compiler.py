"""The compilation chain, end to end, as one list of named stages (lafuse.stages.STAGES).

The program stages run once per script: parse (text -> AST), build (AST -> blocks of HOP DAGs),
liveness (variables live out of each block; dead assignments go), rewrite (static and dynamic
rewrites, constant folding), sizes (size propagation, then the functions compiled with the sizes
their call sites agree on: inter-procedural analysis). A function's body runs build..sizes when it
is compiled. The block stages run when a block first runs, again at each dynamic recompilation with
the actual sizes: fuse (fusion.optimize), plan (plan.build: the physical plan) and lower (runtime.bind:
the plan bound to its backends' code). ``lafuse explain --until STAGE`` stops after any of them.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from lafuse import config as cfgmod
from lafuse import memory, rewrite
from lafuse.cost import constants as K
from lafuse.errors import DMLRuntimeError
from lafuse.hops import liveness, sizes
from lafuse.hops.builder import Builder
from lafuse.hops.hop import MATRIX
from lafuse.hops.program import (
    Dag,
    ForBlock,
    FunctionProgram,
    GenericBlock,
    IfBlock,
    Program,
    WhileBlock,
    block_dags,
    iter_blocks,
    loop_iterations,
)
from lafuse.hops.resolver import FunctionResolver, VarInfo
from lafuse.lang import ast as A
from lafuse.lang.parser import parse
from lafuse.plan import Plan, build
from lafuse.plan.exectype import ClusterShape
from lafuse.plan.instructions import DASK, LOCAL
from lafuse.runtime import deepstack
from lafuse.runtime.bind import Backend, bind
from lafuse.runtime.dask.backend import DaskBackend
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.local.backend import LocalBackend, evaluate_literals
from lafuse.runtime.local.kernels import KERNELS
from lafuse.runtime.values import Frame, ListValue, as_input_value, is_matrix, nnz, nnz_estimate
from lafuse.stages import PROGRAM_STAGES
from lafuse.threads import blas_limited

if TYPE_CHECKING:  # --stats only: imported where a run makes one
    from lafuse.runtime.stats import Stats


class Compiler:
    def __init__(self, cfg: cfgmod.Config | None = None, nvargs: dict[str, Any] | None = None,
                 pos_args: list[Any] | None = None, stats: Stats | None = None,
                 explain_out: TextIO | None = None):
        self.cfg = cfg or cfgmod.get()
        self.nvargs = nvargs or {}
        self.pos_args = pos_args or []
        self.stats = stats
        self.explain_out = explain_out or sys.stdout
        own = [os.path.join(os.path.dirname(__file__), "builtins")] if self.cfg.lafuse_builtins else []
        dirs = [*own, *self.cfg.builtin_dirs]
        self.resolver = FunctionResolver([d for d in dirs if os.path.isdir(d)])
        self.builder: Builder | None = None
        self.program: Program | None = None
        # expected calls of each function: the largest weight of a block that calls it (a loop in
        # the caller makes a callee's blocks run as often, which amortizes fused kernels)
        self._call_weights: dict[str, float] = {}
        self._defaults: dict[tuple[str, str], Plan] = {}
        self._in_compile = False
        self.fusion_stats: Any = None  # fusion.FusionStats once a DAG was fused
        self.kernels = KERNELS
        # the runtime's backend of each execution type (runtime.bind)
        self.backends: dict[str, Backend] = {LOCAL: LocalBackend(KERNELS, self.cfg.threads, self.cfg.codegen_backend),
                                             DASK: DaskBackend(self.cfg)}
        self.evaluate = functools.partial(evaluate_literals, kernels=KERNELS)  # for constant folding

    # ------------------------------------------------------------ main program
    def compile_text(self, text: str, path: str = "<string>", inputs: dict[str, Any] | None = None,
                     outputs: tuple[str, ...] = (), until: str = "sizes",
                     input_nnz: dict[str, int] | None = None) -> Program:
        """The program stages (PROGRAM_STAGES) up to ``until`` (after "parse", the program as built).
        ``inputs``: values bound before the script runs (their types and sizes are known to the
        compiler); ``input_nnz``: their non-zeros where the caller counted them already;
        ``outputs``: variables that must survive dead-code removal (live at the end)."""
        stop = PROGRAM_STAGES.index(until)
        t0 = time.perf_counter()
        script = parse(text, path)
        t1 = time.perf_counter()
        self.builder = Builder(self.resolver, self.nvargs, self.pos_args, path)
        for name, v in (inputs or {}).items():
            self.builder.env[name] = _var_info(v, (input_nnz or {}).get(name))
        prog = self.builder.build_program(script)
        prog.sources[path] = text
        prog.sources.update(self.resolver.sources)
        self.program = prog
        prog.blocks = self._program_stages(prog.blocks, set(outputs), stop)
        self._in_compile = True  # function compile time is part of this span: count it once
        try:
            if stop == len(PROGRAM_STAGES) - 1:
                self._compile_functions(prog)
            else:  # bodies up to the same stage, without call-site sizes
                for key in [k for k in prog.functions if k in self.resolver.functions and not k.startswith("builtin:")]:
                    self.function(key, None, stop)
        finally:
            self._in_compile = False
        if self.stats is not None:
            self.stats.parse_time += t1 - t0
            self.stats.compile_time += time.perf_counter() - t1
        return prog

    def _program_stages(self, blocks: list, outputs: set[str], stop: int, weight: float = 1.0) -> list:
        """The stages after build (liveness, rewrite, sizes) over ``blocks``, up to PROGRAM_STAGES[stop]."""
        if stop >= PROGRAM_STAGES.index("liveness"):
            liveness.analyze(blocks, outputs)
        if stop >= PROGRAM_STAGES.index("rewrite"):
            blocks = self._rewrite(blocks)
        if stop >= PROGRAM_STAGES.index("sizes"):
            self._sizes(blocks, weight)
        return blocks

    def _rewrite(self, blocks: list) -> list:
        if self.cfg.rewrites:
            blocks = rewrite.rewrite_blocks(blocks, self.cfg, self.evaluate)
            for b in iter_blocks(blocks):
                for d in block_dags(b):
                    rewrite.rewrite_dag(d, self.cfg, dynamic=True, evaluate=self.evaluate, cost=self.dag_cost)
        return blocks

    def _sizes(self, blocks: list, weight: float) -> None:
        if self.cfg.rewrites:  # (without rewrites: the sizes the builder inferred)
            for b in iter_blocks(blocks):
                for d in block_dags(b):
                    for h in d.hops():
                        sizes.infer(h)
        # after rewrites: an out-of-range index in a branch that known sizes make dead (constant
        # predicate removed) is not an error, as in SystemDS; a surviving one is reported here
        _raise_deferred(blocks)
        _set_weights(blocks, weight, self._call_weights)
        for b in iter_blocks(blocks):
            if isinstance(b, GenericBlock):
                b.requires_recompile = any(h.dt == MATRIX and not h.dims_known for h in b.dag.hops())

    def rewrite_dag(self, dag: Dag, dynamic: bool = False, known: dict[str, Any] | None = None,
                    hints: dict[str, float] | None = None) -> None:
        """``hints``: the non-zeros of the variables the DAG reads (at recompilation), which the
        sum-product rule's costs use as fusion's do."""
        if self.cfg.rewrites:
            rewrite.rewrite_dag(dag, self.cfg, dynamic=dynamic, known=known, evaluate=self.evaluate,
                                cost=self.dag_cost, hints=hints)
        for h in dag.hops():
            sizes.infer(h, known)

    def dag_cost(self, dag: Dag, hints: dict[str, float] | None = None) -> float:
        """A DAG's cost with fusion (fusion.optimizer.dag_cost), for the sum-product rewrite's choice."""
        from lafuse.fusion import optimizer  # deferred: the cost model, only for a sum-product choice

        return optimizer.dag_cost(dag, self.cfg, hints=hints)

    def lower_dag(self, dag: Dag, weight: float = 1.0, st: dict[str, Any] | None = None,
                  recompile: bool = False) -> Plan:
        """The plan of ``dag`` (plan_dag), bound to its backends' code (runtime.bind)."""
        return bind(self.plan_dag(dag, weight, st, recompile), self.backends)

    def plan_dag(self, dag: Dag, weight: float = 1.0, st: dict[str, Any] | None = None,
                 recompile: bool = False) -> Plan:
        """The physical plan of ``dag``, unbound: nothing is compiled or loaded. Fusion (when codegen is
        on) rewrites a copy of the DAG right before, so it sees the sizes of the static compile or of
        the current dynamic recompilation; ``st`` (the symbol table when the runtime plans a block)
        gives it the non-zeros of the variables read; ``weight``: the block's expected executions;
        ``recompile``: a dynamic recompilation (fusion's literal policy tells it from a first plan)."""
        held = dag.held  # (the DAG's own: fusion below plans a copy)
        if self.cfg.codegen and may_distribute_products(dag, self.cfg.exec_type):
            # deferred: the plan generator, only for a block with products that may run on the cluster
            from lafuse.fusion import fuseme

            shape = self.cluster_shape
            dag = fuseme.apply(dag, self.cfg.exec_type, shape.block_size, shape.workers, shape.worker_bytes,
                               shape.min_cells)
        if self.cfg.codegen and not fusion_cannot_pay(dag, weight, self.cfg):
            # deferred: the optimizer and the fused cost model (~70 ms), only for DAGs fusion can change
            from lafuse import fusion

            if self.fusion_stats is None:
                self.fusion_stats = fusion.FusionStats()
            hints = None
            if st is not None:
                hints = {n: nnz_estimate(st[n]) for n in dag.reads() if n in st and is_matrix(st[n])}
            dag, _ = fusion.optimize(dag, self.cfg, self.fusion_stats, weight=weight, hints=hints,
                                     recompile=recompile)
        plan = build(dag, chains=self.cfg.mmchain, reuse_buffers=self.cfg.reuse_buffers, exec_mode=self.cfg.exec_type,
                     cluster=lambda: self.cluster_shape, squared_loss=self.cfg.squared_loss, formats=self.cfg.formats,
                     held=held, st=st)
        plan.candidates = dag.candidates
        return plan

    @functools.cached_property
    def cluster_shape(self) -> ClusterShape:
        """The cluster as the planner sees it (block size, workers, their memory). An existing cluster
        (``scheduler``) is asked: its workers' memory limits size the broadcast budget of the product
        strategies (the machine's memory would let a broadcast outgrow a worker)."""
        try:
            shape = ClusterShape.of(self.cfg)
        except ValueError as e:
            raise DMLRuntimeError(f"--worker-memory: {e}") from None
        if self.cfg.scheduler and self.cfg.exec_type != "local":
            workers, mem = self.backends[DASK].workers_memory()  # type: ignore[attr-defined]
            if workers:
                shape = dataclasses.replace(shape, workers=workers, worker_bytes=mem or shape.worker_bytes)
        return shape

    # ------------------------------------------------------------ functions
    def _compile_functions(self, prog: Program) -> None:
        """Inter-procedural analysis: compile every user function once, eagerly (so errors in
        function bodies are reported before anything runs), with the parameter sizes all of its
        call sites agree on; callees are compiled after their callers so nested sites count."""
        sites: dict[str, list[dict[str, VarInfo]]] = {}
        order: list[str] = []

        def collect(blocks: list) -> None:
            for b in iter_blocks(blocks):
                for d in block_dags(b):
                    for h in d.hops():
                        if h.kind != "funcall":
                            continue
                        key = h.params["fname"]
                        fdef = self.resolver.functions.get(key)
                        if fdef is None:
                            continue
                        names = h.params["argnames"]
                        pnames = [p.name for p in fdef.params]
                        info = {}
                        for i, a in enumerate(h.inputs):
                            nm = names[i] or (pnames[i] if i < len(pnames) else None)
                            if nm:
                                info[nm] = VarInfo(a.dt, a.vt, a.rows, a.cols, a.nnz)
                        sites.setdefault(key, []).append(info)
                        if key not in order:
                            order.append(key)

        # fixpoint: a function is (re)compiled whenever the sizes its call sites agree on change,
        # including sites in function bodies compiled later (a caller compiled after its callee,
        # recursion); agreement only ever loses information, so this terminates
        assert self.program is not None
        used: dict[str, dict[str, VarInfo]] = {}
        for _ in range(50):
            sites.clear()
            collect(prog.blocks)
            for key in list(used):
                collect(self.program.functions[key].blocks)
            stale = [k for k in order if used.get(k) != _agree(sites.get(k, []))]
            if not stale:
                break
            for key in stale:
                used[key] = _agree(sites.get(key, []))
                if key in self.program.functions:
                    self.program.functions[key].compiled = False
                self.function(key, used[key])
        else:  # no fixpoint: give up on call-site sizes
            for key in used:
                self.program.functions[key].compiled = False
                self.function(key)
        for key in list(prog.functions):
            if key not in used and key in self.resolver.functions and not key.startswith("builtin:"):
                self.function(key)

    def function(self, key: str, known: dict[str, VarInfo] | None = None,
                 stop: int = len(PROGRAM_STAGES) - 1) -> FunctionProgram:
        assert self.program is not None and self.builder is not None
        fp = self.program.functions.get(key)
        if fp is None and key in self.resolver.functions:  # a builtin script loaded later
            f = self.resolver.functions[key]
            fp = self.program.functions[key] = FunctionProgram(
                f.name, f.params, f.outputs, [], f.file, f.span, key.split("::")[0] if "::" in key else "")
        if fp is None:
            raise DMLRuntimeError(f"undefined function '{key}'")
        if not fp.compiled:
            t0 = time.perf_counter()
            fdef = self.resolver.functions[key]
            blocks = self.builder.build_function(key, fdef, known)
            fp.blocks = self._program_stages(blocks, {o.name for o in fdef.outputs}, stop,
                                             self._call_weights.get(key, 1.0))
            fp.compiled = True
            if self.stats is not None and not self._in_compile:
                self.stats.compile_time += time.perf_counter() - t0
        return fp

    def eval_default(self, key: str, p: A.Param, interp: Any) -> Any:
        plan = self._defaults.get((key, p.name))
        if plan is None:
            assert self.builder is not None
            b = self.builder
            assert p.default is not None
            saved = b.env, b.ns
            b.env, b.ns = {}, key.split("::")[0] if "::" in key else ""
            try:
                dag = b._pred_dag(p.default)
            finally:
                b.env, b.ns = saved
            plan = self._defaults[(key, p.name)] = self.lower_dag(dag)
        return interp.exec_plan(plan, {}, keep_result=True)


def may_distribute_products(dag: Dag, exec_mode: str) -> bool:
    """Whether a product of ``dag`` may run on the cluster: any under ``--exec dask``; under ``auto``
    one whose operands and result, dense, exceed the memory budget (a bound of what plan.exectype
    decides, so a local script neither imports nor runs FuseME's plan generator)."""
    if exec_mode == "local":
        return False
    products = [h for h in dag.hops() if h.kind == "matmult"]
    if exec_mode == "dask" or not products:
        return bool(products)
    budget = memory.budget_bytes()
    return any(sum(8.0 * max(i.rows, 0) * max(i.cols, 0) if i.rows >= 0 and i.cols >= 0 else math.inf
                   for i in (h, *h.inputs)) > budget for h in products)


def fusion_cannot_pay(dag: Dag, weight: float, cfg: cfgmod.Config) -> bool:
    """Where no fused operator can come out of the optimizer, skip asking it (and a script without
    such DAGs never imports it: ~70 ms of its start). A DAG without matrices has nothing to fuse.
    Under the cost policy, neither has a block run once whose matrices are all small: a fused operator
    saves at most the writes and reads of the intermediates it removes and their instructions'
    dispatch; when that bound, at first-touch speed, is below the least a kernel costs (a load from
    the disk cache, cost.fused.compile_penalty) by a margin, no plan with a fused operator is cheaper."""
    costed = cfg.fusion == "cost" and cfg.codegen_backend == "numba" and weight <= 1.0
    cells = n = 0
    for h in dag.hops():
        if h.dt == MATRIX:
            if not costed or h.rows < 0 or h.cols < 0:
                return False
            cells += h.rows * h.cols
            n += 1
    if n == 0:
        return True
    bound = 3 * 8 * cells / K.DEFAULT_FIRST_TOUCH_BW + n * K.DEFAULT_MATRIX_OP_OVERHEAD
    return bound * K.FUSION_SKIP_MARGIN < K.CODEGEN_WARM_LOAD_TIME


def _set_weights(blocks: list, w: float, calls: dict[str, float],
                 loops: tuple[tuple[float, frozenset[str]], ...] = ()) -> None:
    """Expected executions of each generic block (loop bodies: DEFAULT_WHILE_ITERATIONS per loop
    level, as the cost model assumes; function bodies: as often as their most frequent call site),
    which amortize fused kernels' compilation. Records the weight of each call site in ``calls``.
    ``loops``: the enclosing loops, outermost first (iterations, variables their bodies assign): a
    block's ``held`` reads (hops.program.Dag.held) are the variables the innermost loops do not
    assign, with those loops' iterations (a conversion kept with such a value is made once for them)."""
    for b in blocks:
        if isinstance(b, GenericBlock):
            b.weight = w
            b.dag.held = _held(b.dag.reads(), loops) if loops else {}
            for h in b.dag.hops():
                if h.kind == "funcall":
                    calls[h.params["fname"]] = max(calls.get(h.params["fname"], 0.0), w)
        elif isinstance(b, IfBlock):
            _set_weights(b.then_blocks, w, calls, loops)
            _set_weights(b.else_blocks, w, calls, loops)
        elif isinstance(b, ForBlock):
            it = _for_iterations(b, K.DEFAULT_WHILE_ITERATIONS)
            _set_weights(b.body, w * it, calls, loops + ((float(it), _assigned(b.body) | {b.var}),))
        elif isinstance(b, WhileBlock):
            it = K.DEFAULT_WHILE_ITERATIONS
            _set_weights(b.body, w * it, calls, loops + ((float(it), _assigned(b.body)),))


def _assigned(body: list) -> frozenset[str]:
    """The variables a loop body assigns (in any of its blocks)."""
    return frozenset(h.name for b in iter_blocks(body) for d in block_dags(b) for h in d.roots
                     if h.op == "twrite" and h.name)


def _held(reads: set[str], loops: tuple[tuple[float, frozenset[str]], ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in reads:
        reps = 1.0
        for it, assigned in reversed(loops):
            if name in assigned:
                break
            reps *= it
        if reps > 1.0:
            out[name] = reps
    return out


def _for_iterations(b: Any, default: int) -> int:
    """Iterations of a for loop with constant bounds (``for (i in 1:200)``), else ``default``."""
    def fold(d: Any) -> Any:
        return sizes.scalar_value(d.roots[0], {}) if d is not None and d.roots else None

    n = loop_iterations(fold(b.start), fold(b.stop), fold(b.incr), b.incr is None)
    return default if n is None else max(n, 1)


def _raise_deferred(blocks: list) -> None:
    """Raise the first compile-time error attached to a HOP that survived dead-code removal."""
    errs = []
    for b in iter_blocks(blocks):
        for d in block_dags(b):
            errs += [h.params["error"] for h in d.hops() if "error" in h.params]
    if errs:
        raise min(errs, key=lambda e: (e.span.line, e.span.col) if e.span else (0, 0))


def _agree(sites: list[dict[str, VarInfo]]) -> dict[str, VarInfo]:
    """Parameter infos equal at every call site (a function called with different sizes keeps
    unknown sizes; its blocks are then recompiled at run time)."""
    if not sites:
        return {}
    out = dict(sites[0])
    for s in sites[1:]:
        for k in list(out):
            if s.get(k) != out[k]:
                v = out[k]
                out[k] = VarInfo(v.dt, v.vt if s.get(k) is not None and s[k].vt == v.vt else "unknown")
    return out


def _var_info(v: Any, known_nnz: int | None = None) -> VarInfo:
    if is_matrix(v):
        return VarInfo(MATRIX, "double", v.shape[0], v.shape[1], nnz(v) if known_nnz is None else known_nnz)
    if isinstance(v, bool):
        return VarInfo("scalar", "boolean")
    if isinstance(v, int):
        return VarInfo("scalar", "int")
    if isinstance(v, float):
        return VarInfo("scalar", "double")
    if isinstance(v, str):
        return VarInfo("scalar", "string")
    if isinstance(v, Frame):
        return VarInfo("frame", "unknown", *v.shape)
    if isinstance(v, ListValue):
        return VarInfo("list", "unknown")
    raise TypeError(f"cannot pass a {type(v).__name__} to DML")


def run_dml(text: str, inputs: dict[str, Any] | None = None, outputs: tuple[str, ...] | list[str] = (),
            nvargs: dict[str, Any] | None = None, cfg: cfgmod.Config | None = None,
            out: TextIO | None = None) -> dict[str, Any]:
    """Run a DML script from Python: ``inputs`` are bound as variables (NumPy arrays, SciPy sparse
    matrices, Python scalars), ``outputs`` are returned by name.

    >>> import numpy as np, lafuse
    >>> lafuse.run_dml("Y = t(X) %*% X", inputs={"X": np.ones((3, 2))}, outputs=["Y"])["Y"]
    array([[3., 3.],
           [3., 3.]])
    """
    bound = {k: as_input_value(v, f"input '{k}'") for k, v in (inputs or {}).items()}

    def go() -> dict[str, Any]:
        with cfgmod.using(cfg or cfgmod.get()):
            comp = Compiler(cfgmod.get(), nvargs)
            prog = comp.compile_text(text, "<run_dml>", bound, tuple(outputs))
            with blas_limited(comp.cfg.threads):
                st = Interpreter(prog, comp, out=out).run(dict(bound))
            return {k: comp.backends[DASK].collect(v) for k, v in st.items() if k in outputs}

    st = deepstack.call(go)  # deep scripts recurse deeply (runtime.deepstack)
    missing = [o for o in outputs if o not in st]
    if missing:
        raise DMLRuntimeError(f"the script did not assign the requested output(s): {', '.join(missing)}")
    return {o: st[o] for o in outputs}


def run_text(text: str, path: str = "<string>", nvargs: dict[str, Any] | None = None,
             cfg: cfgmod.Config | None = None, out: TextIO | None = None) -> tuple[str, dict[str, Any]]:
    """Compile and run a DML script; returns (printed output, final symbol table). For tests and the API."""

    buf = out or io.StringIO()

    def go() -> dict[str, Any]:
        with cfgmod.using(cfg or cfgmod.get()):
            comp = Compiler(cfgmod.get(), nvargs)
            prog = comp.compile_text(text, path)
            return Interpreter(prog, comp, out=buf).run()

    st = deepstack.call(go)  # deep scripts recurse deeply (runtime.deepstack)
    return (buf.getvalue() if isinstance(buf, io.StringIO) else ""), st
