"""The execution type of each operator: where it runs.

SystemDS's hybrid plans (paper 003 §3) run an operator in the single-process control program when
its memory estimate fits the budget and distributed otherwise. lafuse decides the same here, per
instruction, from the operation's memory need and the budget; with no distributed backend yet,
``auto`` keeps every operator local, and one that does not fit stops with the budget's clear error
when it is reached (runtime.bind) instead of running out of memory.
"""

from __future__ import annotations

from lafuse.config import CHOICES
from lafuse.plan.instructions import LOCAL

MODES = CHOICES["exec_type"]  # Config.exec_type and --exec


def choose(need: float, budget: float, mode: str) -> str:
    """The execution type of an operation that holds ``need`` bytes (-1 unknown) under a memory
    budget of ``budget`` bytes. ``mode`` "local" forces local; "auto" would send an operation that
    does not fit to the distributed backend once there is one."""
    if mode not in MODES:
        raise ValueError(f"unknown execution type mode '{mode}' (one of {', '.join(MODES)})")
    return LOCAL
