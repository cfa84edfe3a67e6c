"""Statement-block rules (SystemDS RewriteRemoveUnnecessaryBranches, RewriteRemoveEmptyBasicBlocks,
RewriteRemoveForLoopEmptySequence-style dead code beyond liveness).

They run in ``rewrite_blocks`` after the predicate DAGs were folded (constant folding, size folding,
command-line ``$args`` already substituted by the builder), bottom-up: children before parents.
"""

from __future__ import annotations

from lafuse.hops.program import Block, Dag, ForBlock, GenericBlock, IfBlock, WhileBlock
from lafuse.rewrite.core import Ctx, is_impure, num_literal, rule
from lafuse.rewrite.folding import truth_value


def literal_predicate(pred: Dag) -> bool | None:
    """The constant truth value of a folded predicate DAG, or None."""
    if len(pred.roots) != 1 or not pred.roots[0].is_literal:
        return None
    return truth_value(pred.roots[0].value)


def _pure_dag(d: Dag | None) -> bool:
    return d is None or not any(is_impure(h) for h in d.hops())


@rule("remove_constant_branch", scope="block")
def remove_constant_branch(b: Block, ctx: Ctx) -> list[Block] | None:
    """An ``if`` whose predicate is a constant is replaced by the branch it takes.

    ``if (TRUE) { x = 1 } else { x = 2 }`` -> ``x = 1``; ``if ($debug == 1) {...}`` with ``debug=0`` -> nothing.
    """
    if not isinstance(b, IfBlock):
        return None
    v = literal_predicate(b.pred)
    if v is None:
        return None
    return list(b.then_blocks if v else b.else_blocks)


@rule("remove_false_while", scope="block")
def remove_false_while(b: Block, ctx: Ctx) -> list[Block] | None:
    """A ``while`` loop whose predicate is constant FALSE never runs: ``while (FALSE) {...}`` -> nothing."""
    if isinstance(b, WhileBlock) and literal_predicate(b.pred) is False:
        return []
    return None


@rule("remove_empty_blocks", scope="block")
def remove_empty_blocks(b: Block, ctx: Ctx) -> list[Block] | None:
    """Blocks that do nothing are dropped: a generic block without roots (all its assignments were dead),
    an ``if`` with two empty branches and a pure predicate, a ``for`` with an empty body whose loop
    variable is dead afterwards and whose bounds are pure (and whose increment is not a run-time 0).

    ``x = 1`` (x never read) -> nothing; ``if (a > b) {}`` -> nothing; ``for (i in 1:n) {}`` -> nothing.
    """
    if isinstance(b, GenericBlock):
        return [] if not b.dag.roots else None
    if isinstance(b, IfBlock):
        if not b.then_blocks and not b.else_blocks and _pure_dag(b.pred):
            return []
        return None
    if isinstance(b, ForBlock):
        if b.body or b.var in b.live_out:
            return None
        if not all(_pure_dag(d) for d in (b.start, b.stop, b.incr)):
            return None
        if b.incr is not None:
            r = b.incr.roots[0] if len(b.incr.roots) == 1 else None
            if r is None or num_literal(r) in (None, 0):
                return None
        return []
    return None
