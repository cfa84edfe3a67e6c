"""Run statistics: compile and execution time and heavy hitters (time and count per opcode).

Printed by ``--stats`` in the shape of SystemDS's statistics output.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from lafuse.cost import operators, profile
from lafuse.runtime.values import is_matrix, nnz_estimate

MAX_KERNEL_LINES = 10  # per-kernel compile/load lines under "Codegen kernels" in --stats


@dataclass
class Stats:
    start: float = field(default_factory=time.perf_counter)
    parse_time: float = 0.0
    compile_time: float = 0.0
    exec_time: float = 0.0
    recompiles: int = 0
    recompile_time: float = 0.0
    functions_called: int = 0
    # the instructions that ran (each accumulates its own time and count: interp.exec_plan)
    ran: list[Any] = field(default_factory=list)
    estimated_total: float | None = None  # whole-program estimate of the cost model (if any; no measured times)
    estimate_exact: bool = True  # False when the estimate rests on guessed (unknown) sizes
    profile: Any = None  # the hardware profile the estimates use (loaded on first estimate)
    fusion: Any = None  # lafuse.fusion.FusionStats of the run (codegen on)
    dask: Any = None  # runtime.dask.backend.DaskCounters of the run (when a distributed operator ran)
    reused: tuple[int, int] = (0, 0)  # element-wise results written into a dying operand, their bytes

    def first_run(self, ins: Any, args: list[Any]) -> None:
        """An instruction's first execution under these statistics: it joins ``ran`` with zeroed
        counters (an instruction of a plan another run executed restarts them) and gets its cost
        estimate. Why per instruction: three dictionary updates per executed instruction cost ~1 us,
        a visible part of a mini-batch loop of small operations."""
        ins.stats_of, ins.t_sum, ins.runs = self, 0.0, 0
        self.ran.append(ins)
        if ins.est is None:
            ins.est = self.estimate(ins, args)

    def _by_opcode(self) -> tuple[dict[str, float], dict[str, int], dict[str, float]]:
        t: dict[str, float] = {}
        c: dict[str, int] = {}
        e: dict[str, float] = {}
        for ins in self.ran:
            op = ins.opcode if ins.opcode != "fcall" else "fcall " + ins.hop.params["fname"]
            t[op] = t.get(op, 0.0) + ins.t_sum
            c[op] = c.get(op, 0) + ins.runs
            e[op] = e.get(op, 0.0) + ins.runs * (ins.est or 0.0)
        return t, c, e

    @property
    def op_time(self) -> dict[str, float]:
        return self._by_opcode()[0]

    @property
    def op_count(self) -> dict[str, int]:
        """Executions per opcode (``fcall <name>`` per called function)."""
        return self._by_opcode()[1]

    @property
    def op_est(self) -> dict[str, float]:
        """Cost-model seconds per opcode, as executed."""
        return self._by_opcode()[2]

    def estimate(self, ins: Any, args: list[Any] | None = None) -> float:
        """The cost model's seconds for one executed instruction, from its HOP's (re)compiled sizes
        and the actual non-zeros of the variables it reads; a call's body is recorded by its own
        instructions, so the call itself is its overhead."""
        if self.profile is None:
            self.profile = profile.load()
        hints = {h.name: nnz_estimate(v) for h, v in zip(ins.reads or ins.hop.inputs, args or [])
                 if h.op == "tread" and h.name and h.nnz < 0 and is_matrix(v)}
        return operators.instruction_cost(ins.opcode, ins.hop, self.profile, ins.inplace, hints, ins.block,
                                          ins.reads, ins.transposed).total

    def heavy_hitters(self, n: int = 10) -> list[tuple[str, float, int]]:
        times, counts, _ = self._by_opcode()
        items = sorted(times.items(), key=lambda kv: -kv[1])[:n]
        return [(op, t, counts[op]) for op, t in items]

    def render(self, n: int = 10) -> str:
        total = time.perf_counter() - self.start
        lines = [
            "lafuse Statistics:",
            f"Total elapsed time:\t\t{total:.3f} sec.",
            f"Total compilation time:\t\t{self.parse_time + self.compile_time:.3f} sec.",
            f"  parse:\t\t\t{self.parse_time:.3f} sec.",
            f"  HOP build, rewrites, lowering:\t{self.compile_time:.3f} sec.",
            f"Total execution time:\t\t{self.exec_time:.3f} sec.",
            f"Dynamic recompilations:\t\t{self.recompiles} ({self.recompile_time:.3f} sec.)",
            f"Function calls:\t\t\t{self.functions_called}",
            f"In-place element-wise results:\t{self.reused[0]} ({self.reused[1] / 2**20:.1f} MiB not allocated)",
            f"Heavy hitter instructions (top {n}):",
        ]
        hh = self.heavy_hitters(n)
        op_est = self.op_est
        w = max([len(op) for op, _, _ in hh] + [11])
        lines.append(f"  {'#':>3}  {'Instruction':<{w}}  {'Time(s)':>9}  {'Count':>7}  {'Est(s)':>9}  {'Est/Time':>8}")
        for i, (op, t, c) in enumerate(hh, 1):
            if op.startswith("fcall "):  # measured time includes the body; its estimate does not
                est = ratio = "-"
            else:
                e = op_est.get(op, 0.0)
                est, ratio = f"{e:.3f}", (f"{e / t:.2f}" if t > 0 else "-")
            lines.append(f"  {i:>3}  {op:<{w}}  {t:>9.3f}  {c:>7}  {est:>9}  {ratio:>8}")
        if self.estimated_total is not None:
            ratio = f"{self.estimated_total / self.exec_time:.2f}" if self.exec_time > 0 else "-"
            guess = "" if self.estimate_exact else ", rests on guessed sizes"
            lines.append(f"Estimated execution time (cost model, plans that ran): {self.estimated_total:.3f} sec. "
                         f"(estimate/measured {ratio}{guess})")
        lines += self._codegen_lines()
        if self.dask is not None:  # runtime.dask.backend.DaskCounters.lines: this process's and the workers' side
            lines += self.dask.lines()
        return "\n".join(lines)

    def _codegen_lines(self) -> list[str]:
        """Paper 000 Table 3 and Figure 12: optimizer and compilation effort of operator fusion."""
        f = self.fusion
        if f is None:
            return []
        s = f.select
        reused = f" ({f.reused} as an earlier run decided them, not enumerated again)" if f.reused else ""
        out = [f"Codegen: DAGs optimized {f.dags}{reused}, fused operators {f.fused_ops} (CPlans {f.cplans}), "
               f"memo entries {f.memo_entries} (pruned {f.memo_pruned}), optimizer time {f.time:.3f} sec.",
               f"Codegen plans: partitions {s.partitions}, interesting points {s.points}, plans "
               f"{s.plans_total} total, {s.plans_evaluated} evaluated, {s.pruned_cost} skipped by cost, "
               f"{s.pruned_structural} skipped by structure"
               + (f", {s.over_budget} partitions not enumerated to the end (their plan budget spent: the best "
                  f"plan seen, fuse-no-redundancy's or a greedy pass, whichever costs least)" if s.over_budget else "")
               + f"; {f.unfused_by_compile_cost} operators left "
               f"unfused because compilation would not pay off"
               + (f" ({f.deferred} kernels that would pay from the disk cache: compiled in the background "
                  f"after the run)" if f.deferred else "")
               + (f"; {f.observed} decisions weighed by the block executions an earlier run observed"
                  if f.observed else "")
               + (f"; {f.start_shared} kernels kept because they share Numba's start with the script's others"
                  if f.start_shared else "")
               + (f"; multi-aggregates {f.maggs}" if f.maggs else "")
               + (f" ({f.magg_declined} merges of full aggregates declined: one operator would cost more)"
                  if f.magg_declined else "")]
        if "default" in sys.modules["lafuse.fusion"].DECIDED_ON:
            out.append("Codegen decisions used the built-in default hardware profile (slower rates than most "
                       "machines'): `lafuse calibrate` measures this one; `lafuse run` does it in its background "
                       "job unless LAFUSE_AUTO_CALIBRATE=0")
        codegen = sys.modules.get("lafuse.codegen")  # not loaded: no kernel was compiled or loaded
        c = codegen.cache_stats() if codegen is not None and hasattr(codegen, "cache_stats") else {}
        out.append(f"Codegen kernels: compiled {c.get('compiled', 0)} ({c.get('compile_time_cold', 0.0):.3f} sec.), "
                   f"disk cache hits {c.get('disk_hits', 0)} ({c.get('compile_time_warm', 0.0):.3f} sec.), "
                   f"memory cache hits {c.get('mem_hits', 0)}; importing Numba {c.get('import_time', 0.0):.3f} sec."
                   + _prestart_note())
        per = sorted(c.get("per_kernel", {}).items(), key=lambda kv: -(kv[1]["cold"] + kv[1]["warm"]))
        for key, t in per[:MAX_KERNEL_LINES]:
            out.append(f"  kernel {key[:16]}: cold compile {t['cold']:.3f} sec., disk-cache load {t['warm']:.3f} sec.")
        if len(per) > MAX_KERNEL_LINES:
            out.append(f"  ... {len(per) - MAX_KERNEL_LINES} more kernels")
        return out


def _prestart_note() -> str:
    why = getattr(sys.modules.get("lafuse.feedback.prestart"), "reason", lambda: "")()
    return f" (begun in the background before it was needed: {why})" if why else ""
