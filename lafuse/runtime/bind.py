"""Binding a physical plan (lafuse.plan) to code through the backend of each instruction's execution
type: every instruction gets the callable that runs it, once per plan; the interpreter and the
straight-line code call them. A backend (the local one: runtime.local.backend) binds instructions,
converts a value to a format the plan asks for (``convert`` instructions) and collects a value into
this process (what a distributed backend's ``collect`` instructions will call)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lafuse.plan.instructions import Instruction, Plan

# opcodes the interpreter executes itself (they touch the symbol table, IO, or control)
SPECIAL = {"tread", "twrite", "fcall", "print", "stop", "assert", "write", "pread", "time", "list",
           "toString", "get", "lrix", "llix", "setwd", "as.frame", "as.list", "exists"}


class Backend(Protocol):
    """What the runtime needs of an execution type's backend."""

    name: str

    def bind(self, ins: Instruction) -> Callable[..., Any] | None:
        """The callable that runs ``ins`` (None: the interpreter runs it, SPECIAL). Raises
        NotImplementedError for an operation the backend has no code for."""

    def convert(self, value: Any, fmt: str) -> Any:
        """``value`` in format ``fmt`` (lafuse.formats); the value itself if it is in that format."""

    def collect(self, value: Any) -> Any:
        """``value`` as a block of this process."""

    def settle(self) -> None:
        """At the end of a run: let go of what the backend held for it (the Dask backend's paced
        tasks); nothing for the local one."""


def bind(plan: Plan, backends: Mapping[str, Backend]) -> Plan:
    """``plan`` with every instruction bound (``Instruction.fn``) by the backend of its execution
    type; a bound plan is returned as it is (a plan is bound once, not per iteration)."""
    if plan.bound:
        return plan
    for ins in plan.instructions:
        be = backends.get(ins.exec_type)
        if be is None:
            raise NotImplementedError(f"no backend for execution type '{ins.exec_type}'")
        ins.fn = be.bind(ins)
    plan.bound = True
    return plan
