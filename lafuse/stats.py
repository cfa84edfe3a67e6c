"""Run statistics: compile and execution time and heavy hitters (time and count per opcode).

Printed by ``--stats`` in the shape of SystemDS's statistics output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Stats:
    start: float = field(default_factory=time.perf_counter)
    parse_time: float = 0.0
    compile_time: float = 0.0
    exec_time: float = 0.0
    recompiles: int = 0
    recompile_time: float = 0.0
    functions_called: int = 0
    op_time: dict[str, float] = field(default_factory=dict)
    op_count: dict[str, int] = field(default_factory=dict)

    def record(self, opcode: str, seconds: float) -> None:
        self.op_time[opcode] = self.op_time.get(opcode, 0.0) + seconds
        self.op_count[opcode] = self.op_count.get(opcode, 0) + 1

    def heavy_hitters(self, n: int = 10) -> list[tuple[str, float, int]]:
        items = sorted(self.op_time.items(), key=lambda kv: -kv[1])[:n]
        return [(op, t, self.op_count[op]) for op, t in items]

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
            f"Heavy hitter instructions (top {n}):",
        ]
        hh = self.heavy_hitters(n)
        w = max([len(op) for op, _, _ in hh] + [11])
        lines.append(f"  {'#':>3}  {'Instruction':<{w}}  {'Time(s)':>9}  {'Count':>7}")
        for i, (op, t, c) in enumerate(hh, 1):
            lines.append(f"  {i:>3}  {op:<{w}}  {t:>9.3f}  {c:>7}")
        return "\n".join(lines)
