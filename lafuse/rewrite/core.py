"""Rewrite framework: the rule record, the rewrite context and the helpers rules share.

A rule is one pure function. Its ``scope`` says what it looks at:

* ``"hop"``   ``fn(h: Hop, ctx) -> Hop | None``: a local rule. Returns a replacement for ``h`` (new
  HOPs or an existing one) or ``None``. It must not mutate ``h`` or any existing HOP; the driver
  puts the replacement in place of ``h`` in every parent and root.
* ``"dag"``   ``fn(dag: Dag, ctx) -> bool``: a whole-DAG rule (CSE, matrix-multiply chains) that
  rewires the DAG itself and reports whether it changed anything.
* ``"block"`` ``fn(b: Block, ctx) -> list[Block] | None``: a statement-block rule (constant
  predicates, empty blocks). Returns the blocks that replace ``b`` (maybe none) or ``None``.

``phase`` is ``"static"`` (size-independent; runs in every pass) or ``"dynamic"`` (depends on sizes;
runs when ``rewrite_dag`` is called with ``dynamic=True``, which the compiler does at compile time
with compile-time sizes and again at dynamic recompilation with the actual sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lafuse.errors import NO_SPAN
from lafuse.hops import sizes
from lafuse.hops.hop import BOOLEAN, DOUBLE, INT, MATRIX, SCALAR, STRING, UNKNOWN, Hop, literal, walk
from lafuse.hops.program import Dag
from lafuse.lang.builtins import NONDETERMINISTIC, STATEMENT_ONLY

# ops whose result depends on more than their inputs, or that act on the world: never merged,
# folded, dropped, duplicated or reordered
IMPURE_OPS = frozenset(NONDETERMINISTIC | STATEMENT_ONLY | {"pread", "time", "fcall", "twrite", "exists"})
NUMERIC_VT = (INT, DOUBLE)


@dataclass(frozen=True)
class Rule:
    name: str
    fn: Callable[..., Any]
    scope: str  # "hop" | "dag" | "block"
    phase: str  # "static" | "dynamic"
    # a local rule's HOP kinds: it returns None for any other (the driver does not call it there)
    kinds: frozenset[str] | None = None

    @property
    def doc(self) -> str:
        d = (self.fn.__doc__ or "").strip()
        return d.splitlines()[0] if d else ""


def rule(name: str, scope: str = "hop", phase: str = "static",
         kinds: tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], Rule]:
    def deco(fn: Callable[..., Any]) -> Rule:
        return Rule(name, fn, scope, phase, None if kinds is None else frozenset(kinds))

    return deco


_SEEDED = ("rand", "Rand", "sample")


def is_impure(h: Hop) -> bool:
    """Nondeterministic or side-effecting. A ``rand``/``sample`` with a literal seed other than -1 is a
    pure function of its arguments."""
    if h.op in _SEEDED and h.kind == "datagen":
        for slot, x in zip(h.params.get("slots") or (), h.inputs):
            if slot == "seed":
                v = x.value if x.is_literal else None
                return not (isinstance(v, int) and not isinstance(v, bool) and v != -1)
        return True
    return h.op in IMPURE_OPS or h.kind == "funcall" or bool(h.params.get("side_effect"))


class Ctx:
    """What a rule may ask about the DAG it runs on: consumers of a HOP, sizes, purity."""

    def __init__(self, cfg: Any = None, dynamic: bool = False, known: dict[str, Any] | None = None,
                 dag: Dag | None = None, evaluate: Callable[[Hop], Any] | None = None,
                 cost: Callable[..., float] | None = None, hints: dict[str, float] | None = None):
        self.cfg = cfg
        self.dynamic = dynamic
        self.known = known
        self.dag = dag
        # the value a scalar HOP over literals computes, as the runtime computes it (constant folding
        # runs the runtime's kernels; the compiler injects it, so rewrites never import the runtime)
        self.evaluate = evaluate
        # the cost of a whole DAG with fusion, ``cost(dag, hints)`` (the compiler injects it: rewrites
        # import no cost model), with the non-zeros of the variables read where known; the
        # sum-product rule weighs its plans with it
        self.cost = cost
        self.hints = hints
        self._parents: dict[int, dict[int, Hop]] | None = None  # id -> {consumer id: consumer}
        self._reach: set[int] = set()
        self._roots: set[int] = set()
        # purity only ever improves under rewrites (no rule introduces an impure HOP), so a cached
        # answer stays valid (or conservative) for the whole rewrite_dag call
        self._pure: dict[int, bool] = {}

    # ---- structure: consumers and reachability, maintained incrementally by replace()
    def invalidate(self) -> None:
        """Forget the consumer map (after a DAG rule rewired the DAG itself)."""
        self._parents = None

    def _build(self) -> dict[int, dict[int, Hop]]:
        assert self.dag is not None
        order = walk(self.dag.roots)
        self._reach = {h.id for h in order}
        self._roots = {r.id for r in self.dag.roots}
        par: dict[int, dict[int, Hop]] = {}
        for h in order:
            for c in h.inputs:
                par.setdefault(c.id, {})[h.id] = h
        self._parents = par
        return par

    def _par(self) -> dict[int, dict[int, Hop]]:
        return self._parents if self._parents is not None else self._build()

    def parents(self, h: Hop) -> list[Hop]:
        """The distinct consumers of ``h``, in DAG order."""
        d = self._par().get(h.id)
        return list(d.values()) if d else []

    def n_consumers(self, h: Hop) -> int:
        d = self._par().get(h.id)
        return len(d) if d else 0

    def reachable(self, h: Hop) -> bool:
        self._par()
        return h.id in self._reach

    def is_root(self, h: Hop) -> bool:
        self._par()
        return h.id in self._roots

    def replace(self, old: Hop, new: Hop) -> list[Hop]:
        """Put ``new`` in place of ``old`` in every consumer and root; HOPs only ``old`` used become
        unreachable. Consumer lists are updated incrementally (no walk of the whole DAG)."""
        assert self.dag is not None
        if old is new:
            return []
        par = self._par()
        consumers = par.pop(old.id, {})
        self._register(new, par)
        mine = par.setdefault(new.id, {})
        for pid, p in consumers.items():
            p.inputs = [new if i is old else i for i in p.inputs]
            mine[pid] = p
        if old.id in self._roots:
            self.dag.roots[:] = [new if r is old else r for r in self.dag.roots]
            self._roots.discard(old.id)
            self._roots.add(new.id)
        self._release(old, par)
        return list(consumers.values())

    def _register(self, h: Hop, par: dict[int, dict[int, Hop]]) -> None:
        """Add the HOPs of a new subexpression (and their input edges) to the consumer map."""
        stack = [h]
        while stack:
            x = stack.pop()
            if x.id in self._reach:
                continue
            self._reach.add(x.id)
            for c in x.inputs:
                par.setdefault(c.id, {})[x.id] = x
                if c.id not in self._reach:
                    stack.append(c)

    def _release(self, h: Hop, par: dict[int, dict[int, Hop]]) -> None:
        """Drop ``h`` and what only it used, when nothing consumes it any more."""
        stack = [h]
        while stack:
            x = stack.pop()
            if par.get(x.id) or x.id in self._roots or x.id not in self._reach:
                continue
            self._reach.discard(x.id)
            for c in x.inputs:
                d = par.get(c.id)
                if d and d.pop(x.id, None) is not None and not d:
                    stack.append(c)

    def check_consistency(self) -> None:
        """Debug aid: the incrementally maintained consumer map equals one built from scratch."""
        if self._parents is None or self.dag is None:
            return
        inc_par = {k: set(v) for k, v in self._parents.items() if v and k in self._reach}
        inc_reach, inc_roots = set(self._reach), set(self._roots)
        self._build()
        fresh = {k: set(v) for k, v in self._parents.items() if v}
        assert inc_reach == self._reach, (
            f"consumer map out of date: reachable differs by {sorted(inc_reach ^ self._reach)[:10]}")
        assert inc_roots == self._roots, "consumer map out of date: roots differ"
        assert inc_par == fresh, "consumer map out of date: consumers differ"

    def uses(self, h: Hop) -> tuple[list[Hop], bool, bool]:
        """``parents(h)``, ``is_root(h)`` and ``single_use(h)`` from one lookup (the sum-product rule's
        region keys ask all three of every operator of every region)."""
        d = self._par().get(h.id)
        ps = list(d.values()) if d else []
        root = h.id in self._roots
        return ps, root, len(ps) == 1 and not root and sum(1 for i in ps[0].inputs if i is h) == 1

    def single_use(self, h: Hop) -> bool:
        """``h`` feeds exactly one input slot of one HOP and is no root (so rewriting its only consumer
        makes ``h`` itself dead: no work is duplicated)."""
        return self.uses(h)[2]

    def pure(self, h: Hop) -> bool:
        """No nondeterministic or side-effecting HOP in ``h``'s cone: it may be dropped or reordered."""
        memo = self._pure
        got = memo.get(h.id)
        if got is not None:
            return got
        stack: list[tuple[Hop, bool]] = [(h, False)]  # iterative: DAGs can be deep
        while stack:
            x, expanded = stack.pop()
            if x.id in memo:
                continue
            if expanded:
                memo[x.id] = not is_impure(x) and all(memo[i.id] for i in x.inputs)
            elif is_impure(x):
                memo[x.id] = False
            else:
                stack.append((x, True))
                stack.extend((i, False) for i in x.inputs if i.id not in memo)
        return memo[h.id]

    # ---- construction
    def infer(self, h: Hop) -> Hop:
        sizes.infer(h, self.known)
        return h

    def mk(self, op: str, kind: str, inputs: list[Hop], dt: str, vt: str, like: Hop | None = None,
           params: dict[str, Any] | None = None) -> Hop:
        """A new HOP with sizes inferred; ``like`` lends its source span."""
        h = Hop(op, kind, inputs, dt, vt, like.span if like is not None else inputs[0].span,
                params=dict(params or {}))
        return self.infer(h)

    def lit(self, value: Any, like: Hop | None = None) -> Hop:
        h = literal(value, like.span if like is not None else NO_SPAN)
        return self.infer(h)

    def transpose(self, x: Hop, like: Hop | None = None) -> Hop:
        return self.mk("t", "reorg", [x], MATRIX, DOUBLE, like or x, {"slots": ("target",)})

    def matmult(self, a: Hop, b: Hop, like: Hop | None = None) -> Hop:
        return self.mk("%*%", "matmult", [a, b], MATRIX, DOUBLE, like or a)

    def agg(self, op: str, x: Hop, like: Hop | None = None) -> Hop:
        return self.mk(op, "agg_unary", [x], SCALAR, DOUBLE, like or x, {"slots": ("target",)})

    def binary(self, op: str, a: Hop, b: Hop, like: Hop | None = None) -> Hop:
        dt = MATRIX if MATRIX in (a.dt, b.dt) else SCALAR
        vt = DOUBLE if dt == MATRIX else scalar_arith_vt(op, a.vt, b.vt)
        return self.mk(op, "binary", [a, b], dt, vt, like or a)

    # ---- values
    def value(self, h: Hop) -> Any:
        """Literal value, or None. Never a run-time scalar (plans are cached across scalar values)."""
        return h.value if h.is_literal else None

    def size_value(self, h: Hop) -> Any:
        """Value of a scalar that may determine sizes: literals, nrow/ncol of known dims, and (at
        recompilation) size scalars, which are part of the recompiled plan's cache signature."""
        return sizes.scalar_value(h, self.known)


def scalar_arith_vt(op: str, a: str, b: str) -> str:
    """SystemDS scalar typing of arithmetic (dml-semantics §4): int op int stays INT except / and ^."""
    if op in ("<", "<=", ">", ">=", "==", "!=", "&", "|"):
        return BOOLEAN
    if STRING in (a, b):
        return STRING
    if UNKNOWN in (a, b):
        return UNKNOWN
    if op in ("/", "^"):
        return DOUBLE
    return INT if a == INT and b == INT else DOUBLE


def num_literal(h: Hop) -> float | int | None:
    """The numeric value of a literal INT/DOUBLE scalar, else None (booleans and strings excluded)."""
    if h.is_literal and isinstance(h.value, (int, float)) and not isinstance(h.value, bool):
        return h.value
    return None


def same_dims(a: Hop, b: Hop) -> bool:
    return a.dims_known and b.dims_known and a.rows == b.rows and a.cols == b.cols
