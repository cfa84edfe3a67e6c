"""The physical plan: what runs where, in which format (between fusion and the runtime).

``build`` turns an optimized HOP DAG into a :class:`Plan` of register instructions and decides
everything physical about them: which transposes a product reads in place, which products run as
one ``mmchain`` pass, the execution type (only ``local`` so far), the formats predicted for each
result, which operand an element-wise result may take over, which registers die where, which
operations exceed the memory budget. It compiles and loads nothing: costing and EXPLAIN read the
plan as it is, and the runtime binds it to code (runtime.bind) once per plan, as tinygrad's
schedule items become exec items.
"""

from lafuse.plan.build import build
from lafuse.plan.instructions import Instruction, Plan

__all__ = ["Instruction", "Plan", "build"]
