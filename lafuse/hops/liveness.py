"""Live-variable analysis over statement blocks, and removal of dead TWrites.

Why this is semantics, not only speed: SystemDS scripts rely on dead assignments never running
(steplm's ``beta_best = beta_out_all[, column_best]`` with ``column_best = 0``, dml-semantics §2).
A TWrite whose variable is not live after its block is dropped, and with it every HOP only it used.
"""

from __future__ import annotations

from lafuse.hops.program import Block, Dag, ForBlock, GenericBlock, IfBlock, WhileBlock


def _dag_reads(d: Dag | None) -> set[str]:
    return d.reads() if d is not None else set()


def _prune(b: GenericBlock, live_out: set[str]) -> None:
    b.dag.roots = [r for r in b.dag.roots if not (r.op == "twrite" and r.name not in live_out)]


def analyze(blocks: list[Block], live_after: set[str], prune: bool = True) -> set[str]:
    """Set ``live_out`` on every block, drop dead TWrites if ``prune``; return the live-in set."""
    live = set(live_after)
    for b in reversed(blocks):
        live = _block(b, live, prune)
    return live


def _block(b: Block, live_out: set[str], prune: bool) -> set[str]:
    if prune:
        b.live_out = set(live_out)
    if isinstance(b, GenericBlock):
        writes = b.dag.writes()
        if prune:
            _prune(b, live_out)
        return (live_out - writes) | b.dag.reads()
    if isinstance(b, IfBlock):
        return _dag_reads(b.pred) | analyze(b.then_blocks, live_out, prune) | analyze(b.else_blocks, live_out, prune)
    if isinstance(b, WhileBlock):
        return _loop(b.body, live_out | _dag_reads(b.pred), set(), prune)
    if isinstance(b, ForBlock):
        bounds = _dag_reads(b.start) | _dag_reads(b.stop) | _dag_reads(b.incr)
        return _loop(b.body, set(live_out), {b.var}, prune) | bounds
    return set(live_out)


def _loop(body: list[Block], loop_in: set[str], defined: set[str], prune: bool) -> set[str]:
    """Fixpoint for a loop: what the body reads may be live at the loop head on every iteration.
    ``defined`` holds variables the loop itself sets (the for variable)."""
    for _ in range(100):
        new = loop_in | (analyze(body, loop_in, prune=False) - defined)
        if new == loop_in:
            break
        loop_in = new
    if prune:
        analyze(body, loop_in, prune=True)
    return loop_in
