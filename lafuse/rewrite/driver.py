"""The rewrite driver: applies the rules of ``RULES`` to DAGs and block lists.

``rewrite_dag`` runs rounds until nothing changes (at most ``MAX_ROUNDS``). One round applies the
rules in ``RULES`` order: a DAG rule on the whole DAG, and each run of consecutive local rules in one
bottom-up pass (inputs before users; at each HOP the first rule that returns a replacement wins).
A replacement takes the HOP's place in every parent and root, and the sizes of the new HOPs and of
everything above them are inferred again. A rule (or run of local rules) that changed nothing is not
run again before something changes: the round that confirms the fixpoint runs only what came before
the last change (AutoEncoder 5000 x 100's recompilations: 7.6 -> 5.4 ms a run in the driver).

Debug hook: with ``LAFUSE_VALIDATE=1`` in the environment, or ``lafuse.rewrite.driver.VALIDATE = True``
(tests set it), the DAG invariants (``lafuse.hops.validate``) are checked after every rule application
and an AssertionError names the rule that broke them.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from lafuse.hops.hop import Hop, walk
from lafuse.hops.program import Block, Dag, ForBlock, IfBlock, WhileBlock
from lafuse.hops.validate import validate_dag
from lafuse.rewrite.core import Ctx, Rule

MAX_ROUNDS = 16
VALIDATE = False
# a rule that changed nothing is not run again before some rule changes the DAG (rules are functions
# of the DAG; tests turn it off to show the fixpoint is the same)
SKIP_CLEAN = True
APPLIED: Counter[str] = Counter()  # rule name -> number of applications in this process (diagnostics)


def validating() -> bool:
    return VALIDATE or os.environ.get("LAFUSE_VALIDATE", "") not in ("", "0")


def _check(dag: Dag, rule: str, ctx: Ctx | None = None) -> None:
    if validating():
        try:
            validate_dag(dag, ctx.known if ctx is not None else None)
            if ctx is not None:
                ctx.check_consistency()
        except AssertionError as e:
            raise AssertionError(f"after rewrite rule '{rule}': {e}") from None


def enabled_rules(cfg: Any, scopes: tuple[str, ...], dynamic: bool = True) -> list[Rule]:
    from lafuse.rewrite.rules import RULES  # deferred: rules -> mmchain -> driver (a cycle inside rewrite/)

    if cfg is not None and not getattr(cfg, "rewrites", True):
        return []
    off = set(getattr(cfg, "disabled_rules", ()) or ())
    unknown = off - {r.name for r in RULES}
    if unknown:
        raise ValueError(f"unknown rewrite rule(s) in disabled_rules: {sorted(unknown)}; "
                         f"known: {[r.name for r in RULES]}")
    return [r for r in RULES if r.scope in scopes and r.name not in off and (dynamic or r.phase == "static")]


def replace(dag: Dag, old: Hop, new: Hop, ctx: Ctx) -> None:
    """Put ``new`` in place of ``old`` in every parent and root, then re-infer sizes above it."""
    if old is new:
        return
    assert ctx.dag is dag
    _reinfer(ctx.replace(old, new), ctx)


def _reinfer(rewired: list[Hop], ctx: Ctx) -> None:
    """Infer the sizes of the rewired consumers again, and of theirs while something changes."""
    stack = list(rewired)
    while stack:
        p = stack.pop()
        before = (p.rows, p.cols, p.nnz)
        ctx.infer(p)
        if (p.rows, p.cols, p.nnz) != before:
            stack.extend(ctx.parents(p))


def by_kind(rules: list[Rule]) -> tuple[dict[str, list[Rule]], list[Rule]]:
    """The rules that can match a HOP of each kind, in order, and those for any other kind (the rules
    without declared kinds). Why: a recompilation tries ~20 local rules on every HOP of a block
    (5,000 calls for a mini-batch MLP's 270 HOPs), and most rules look at one kind only."""
    kinds = {k for r in rules if r.kinds is not None for k in r.kinds}
    table = {k: [r for r in rules if r.kinds is None or k in r.kinds] for k in kinds}
    return table, [r for r in rules if r.kinds is None]


def _local_pass(dag: Dag, rules: list[Rule], ctx: Ctx) -> tuple[bool, bool]:
    """(a HOP was replaced, a HOP's sizes were inferred anew without one)."""
    changed = resized = False
    table, other = by_kind(rules)
    for h in walk(dag.roots):
        if not ctx.reachable(h):
            continue  # replaced earlier in this pass
        before = (h.rows, h.cols, h.nnz)
        ctx.infer(h)
        resized = resized or (h.rows, h.cols, h.nnz) != before
        for r in table.get(h.kind, other):
            new = r.fn(h, ctx)
            if new is not None and new is not h:
                replace(dag, h, new, ctx)
                APPLIED[r.name] += 1
                changed = True
                _check(dag, r.name, ctx)
                break
    return changed, resized


def rewrite_dag(dag: Dag, cfg: Any, dynamic: bool = False, known: dict[str, Any] | None = None,
                evaluate: Callable[[Hop], Any] | None = None, cost: Callable[..., float] | None = None,
                hints: dict[str, float] | None = None) -> None:
    """Rewrite ``dag`` in place (its roots and HOPs) with the enabled HOP and DAG rules.

    ``dynamic`` also enables the size-dependent rules; ``known`` holds run-time scalar values at
    recompilation, used for sizes only (plans are cached by shapes and size scalars); ``evaluate``:
    the runtime's value of a scalar HOP over literals (Ctx.evaluate), which constant folding needs;
    ``cost``: a DAG's cost with fusion (Ctx.cost), which the sum-product rule weighs plans with, given
    ``hints``, the non-zeros of the variables the DAG reads where known (at recompilation).
    """
    rules = enabled_rules(cfg, ("hop", "dag"), dynamic)
    if not rules or not dag.roots:
        return
    ctx = Ctx(cfg, dynamic, known, dag, evaluate, cost, hints)
    _check(dag, "<input>", ctx)
    # A rule is a function of the DAG: one that changed nothing need not run again before something
    # does (the last round, that confirms the fixpoint, then runs only the rules before the last
    # change). ``version`` counts the changes; ``clean[i]``: the version the rules from i last left as
    # they found it.
    version = 0
    clean: dict[int, int] = {}
    for _ in range(MAX_ROUNDS):
        changed = False
        i = 0
        while i < len(rules):
            r = rules[i]
            j = i + 1
            if r.scope != "dag":
                while j < len(rules) and rules[j].scope == "hop":
                    j += 1
            if SKIP_CLEAN and clean.get(i) == version:
                i = j
                continue
            if r.scope == "dag":
                got = r.fn(dag, ctx)
                if got:
                    APPLIED[r.name] += 1
                    ctx.invalidate()
                    _check(dag, r.name, ctx)
                touched = got
            else:
                got, resized = _local_pass(dag, rules[i:j], ctx)
                touched = got or resized
            changed |= got
            if touched:
                version += 1
            else:
                clean[i] = version
            i = j
        if not changed:
            break


def rewrite_blocks(blocks: list[Block], cfg: Any, evaluate: Callable[[Hop], Any] | None = None) -> list[Block]:
    """Block-level rewrites, bottom-up over the block tree; predicates are rewritten (folded) first."""
    rules = enabled_rules(cfg, ("block",))
    if cfg is not None and not getattr(cfg, "rewrites", True):
        return blocks
    ctx = Ctx(cfg, True, None, None, evaluate)
    return _blocks(blocks, cfg, rules, ctx)


def _blocks(blocks: list[Block], cfg: Any, rules: list[Rule], ctx: Ctx) -> list[Block]:
    out: list[Block] = []
    for b in blocks:
        if isinstance(b, IfBlock):
            rewrite_dag(b.pred, cfg, dynamic=True, evaluate=ctx.evaluate)
            b.then_blocks = _blocks(b.then_blocks, cfg, rules, ctx)
            b.else_blocks = _blocks(b.else_blocks, cfg, rules, ctx)
        elif isinstance(b, WhileBlock):
            rewrite_dag(b.pred, cfg, dynamic=True, evaluate=ctx.evaluate)
            b.body = _blocks(b.body, cfg, rules, ctx)
        elif isinstance(b, ForBlock):
            for d in (b.start, b.stop, b.incr):
                if d is not None:
                    rewrite_dag(d, cfg, dynamic=True, evaluate=ctx.evaluate)
            b.body = _blocks(b.body, cfg, rules, ctx)
        repl: list[Block] | None = None
        for r in rules:
            repl = r.fn(b, ctx)
            if repl is not None:
                break
        if repl is None:
            out.append(b)
        else:
            APPLIED[r.name] += 1
            out.extend(repl)
    return out
