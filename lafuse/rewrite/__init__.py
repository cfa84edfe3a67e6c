"""HOP rewrites. Placeholder entry points until the rule set lands: rewrite_dag and rewrite_blocks."""

from __future__ import annotations

from typing import Any

from lafuse.hops.program import Block, Dag


def rewrite_dag(dag: Dag, cfg: Any, dynamic: bool = False, known: dict[str, Any] | None = None) -> None:
    return None


def rewrite_blocks(blocks: list[Block], cfg: Any) -> list[Block]:
    return blocks
