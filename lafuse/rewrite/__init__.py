"""HOP rewrites: static and dynamic algebraic rewrites, constant folding, CSE, matrix-multiply chain
optimization and block-level dead-code removal, one pure function per rule.

Entry points (called by ``lafuse.compiler``):

* ``rewrite_blocks(blocks, cfg) -> list[Block]`` once per program/function: constant predicates,
  empty blocks.
* ``rewrite_dag(dag, cfg, dynamic=False, known=None) -> None`` per DAG, at compile time and again at
  dynamic recompilation with the actual sizes; mutates ``dag.roots`` and the HOPs in place.

The rules are listed, in application order, in ``lafuse.rewrite.rules.RULES``; their names are what
``Config.disabled_rules`` takes.
"""

from __future__ import annotations

from lafuse.rewrite.core import Ctx, Rule
from lafuse.rewrite.driver import rewrite_blocks, rewrite_dag
from lafuse.rewrite.rules import RULES, RULES_BY_NAME

__all__ = ["RULES", "RULES_BY_NAME", "Ctx", "Rule", "rewrite_blocks", "rewrite_dag"]
