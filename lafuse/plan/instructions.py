"""Physical instructions and plans: data only; the runtime binds each instruction to code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lafuse.hops.hop import Hop

LOCAL = "local"  # this process
DASK = "dask"  # the Dask cluster (runtime.dask): a distributed matrix of blocks held by the workers
EXEC_TYPES = (LOCAL, DASK)
_EXEC_LABEL = {LOCAL: "CP", DASK: "DASK"}  # as SystemDS prints it (CP: its control program, SPARK)


@dataclass
class Instruction:
    opcode: str
    hop: Hop
    args: list[int]
    out: int
    free: list[int] = field(default_factory=list)
    cast: type | None = None  # Python type a scalar result is coerced to (its inferred value type)
    inplace: bool = False  # lix that may update its target in place (see interp._lix_inplace)
    reuse: int = -1  # argument whose buffer an element-wise result may take (runtime.reuse)
    reads: list[Hop] | None = None  # the HOPs of ``args`` where they are not ``hop.inputs`` (read-through, mmchain)
    exec_type: str = LOCAL
    out_fmt: str | None = None  # formats.DENSE / CSR as the default rule predicts it (CSC: a planned conversion); None: decided at run time
    transposed: tuple[bool, bool] | None = None  # a product's operands read transposed in place
    chain: tuple[bool, bool] | None = None  # mmchain: (w is the left operand of *, result transposed)
    pattern: Any = None  # a sampled sum's description (hops.patterns.SampledSum: its operators and sides)
    method: str | None = None  # a distributed product's strategy (plan.mmstrategy: rmm, cpmm, mapmm_l, ...)
    block: int = 0  # a distributed instruction's block size (rows and columns)
    dist: Any = None  # a distributed outer fused operator's kind and (P,Q,R) (plan.fusedstrategy.FusedChoice)
    need: float = -1.0  # bytes the operation holds (output and distinct inputs; -1 unknown)
    over_budget: bool = False  # need exceeds the memory budget: the instruction stops with an error
    est: float | None = None  # cost-model estimate in seconds (computed on first use by --stats)
    # bound by the runtime (runtime.bind): the callable that runs it; None for what the interpreter
    # executes itself
    fn: Callable[..., Any] | None = None
    # --stats: the run's statistics this instruction's counters belong to, its time and executions
    stats_of: Any = None
    t_sum: float = 0.0
    runs: int = 0

    @property
    def held(self) -> bool:
        """A conversion of a variable's value kept with the value (plan.layout.local: its HOP holds the
        executions the conversion is amortized over, which the cost model reads)."""
        return self.opcode == "convert" and "held" in self.hop.params

    @property
    def cplan(self) -> Any:
        """The fused operator's plan (hops.cplan.CPlan) a ``spoof*`` instruction runs."""
        return self.hop.params.get("cplan") if self.hop.kind == "spoof" else None

    def render(self, fmts: dict[int, str | None] | None = None) -> str:
        """SystemDS's EXPLAIN line (CP: the local execution type); with ``fmts`` (a register's
        predicted format, Plan.formats), the formats of the matrix operands and of the result:
        ``fmt(dense,?->csr)`` (``?``: decided at run time, ``-``: a scalar result)."""
        ins = " ".join(f"_r{a}" for a in self.args)
        h = self.hop
        size = f"[{h.rows},{h.cols},{h.nnz}]" if h.dt == "matrix" else f"[{h.dt}.{h.vt}]"
        extra = f" {h.name}" if h.name else ""
        line = f"{_EXEC_LABEL[self.exec_type]} {self.method or self.opcode}{extra} {ins} -> _r{self.out} {size}"
        if self.block:
            line += f" blocks({self.block})"
        if self.dist is not None:
            line += f" {self.dist}"
        if self.held:
            line += " held"
        if fmts is None:
            return line
        ins_f = [fmts[a] or "?" for a in self.args if a in fmts]
        if h.dt != "matrix" and not ins_f:
            return line
        out_f = (self.out_fmt or "?") if h.dt == "matrix" else "-"
        return f"{line} fmt({','.join(ins_f)}->{out_f})"


@dataclass
class Plan:
    instructions: list[Instruction]
    nregs: int
    constants: dict[int, Any]
    writes: list[tuple[str, int]]  # (variable, register) committed after the block
    result: int = -1  # register of the single root of a predicate DAG
    candidates: tuple[str, ...] = ()  # canonical hashes of the fusion candidates of its DAG
    layout: Any = None  # the format choice of its local operators (plan.layout.local.Layout), if any was weighed
    bound: bool = False  # the runtime bound every instruction (runtime.bind), once per plan
    # runtime.straight: executions by the interpreter loop, then the generated code (function, its
    # code object, instruction per line, (whether it checks metadata, whether it times instructions))
    runs: int = 0
    code: tuple[Callable[..., Any], Any, list[int], tuple[bool, bool]] | None = None

    def formats(self) -> dict[int, str | None]:
        """The predicted format of each matrix register (None: decided at run time)."""
        return {ins.out: ins.out_fmt for ins in self.instructions if ins.hop.dt == "matrix"}
