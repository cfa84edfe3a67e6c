"""The strategy of a distributed matrix product, chosen by SystemDS's rules and cost formulas
(paper 003; SystemDS's optFindMMultMethodSpark): TSMM, MapMMChain, MapMM left/right (broadcast),
ZIPMM, CPMM, RMM. The Dask backend (runtime.dask.matmul) implements each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lafuse.plan.instructions import Instruction

if TYPE_CHECKING:  # (exectype imports this module's users; no import circle at run time)
    from lafuse.plan.exectype import ClusterShape

RMM = "rmm"
METHODS = (RMM,)


def distributable(ins: Instruction) -> bool:
    """Whether the Dask backend has a strategy for the product ``ins`` as the plan shaped it: for now
    a plain product of two matrices of known dims (no mmchain, no transposed operand read in place)."""
    h = ins.hop
    if ins.chain is not None or ins.reads is not None or ins.opcode != h.op or len(h.inputs) != 2:
        return False
    return all(i.dt == "matrix" and i.rows >= 0 and i.cols >= 0 for i in h.inputs)


def choose(ins: Instruction, cluster: ClusterShape) -> str:
    """The strategy of the distributed product ``ins``."""
    return RMM
