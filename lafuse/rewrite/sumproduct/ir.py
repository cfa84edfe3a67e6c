"""Sum-product plans (paper 001 §3.1): the aggregation/product part of a HOP DAG as restricted
relational algebra over (i, j, v) relations, and its translation in from HOPs.

A matrix is a relation over two indices, a vector over one, a scalar over none (an extent-1 dimension
carries no index). A :class:`Term` is ``coef * Γ_{keep; sum}(Π factors)``: the join of its factors on
equal index names (``*_{j=k}`` is a rename), their values multiplied, every index outside ``keep``
summed. A :class:`Sum` adds terms of one shape (element-wise ``+``/``-``: the full outer join).
Selections become renames too: ``trace(E)`` reads E with its column index renamed to its row index,
``diag(v)`` is a term whose ``keep`` repeats one index, ``E[a:b, ]`` slices every factor that holds
E's row index. Translating in already applies the rewrites that never cost anything (join elimination
of ``X * (X != 0)``, constants folded into the coefficient); the ones that choose an order live in
:mod:`lafuse.rewrite.sumproduct.plans`.

A region is the tree of single-use operators under a root; a second translation also absorbs the
shared ones (their other consumers keep them): ``sum(W %*% H)`` is worth rewriting only where the
other consumer of ``W %*% H`` no longer needs it materialized (a fused outer-product operator
computes it inside), and whether it does is the cost model's question.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

from lafuse.hops.hop import DOUBLE, INT, MATRIX, SCALAR, Hop
from lafuse.rewrite.core import Ctx, is_impure, num_literal

Index = str | None  # None: a dimension of extent 1
Keep = tuple[Index, Index]  # the output's (row, column) indices


@dataclass(frozen=True)
class Factor:
    """A leaf relation: ``hop``'s cells indexed (row, col); ``row == col`` reads its diagonal."""

    hop: Hop
    row: Index
    col: Index

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for i in (self.row, self.col) if i is not None))

    def renamed(self, m: dict[str, str]) -> Factor:
        return Factor(self.hop, _r(self.row, m), _r(self.col, m))


def _r(i: Index, m: dict[str, str]) -> Index:
    return m.get(i, i) if i is not None else None


@dataclass(frozen=True)
class Term:
    """``coef * Γ_{keep; sum}(Π factors)``; ``tree`` is the join order as written (nested tuples of
    factor positions), which tells the join-ordering rewrite apart from the written plan."""

    keep: Keep
    factors: tuple[Factor, ...]
    coef: float = 1.0
    tree: object = None

    def indices(self) -> set[str]:
        out = {i for f in self.factors for i in f.indices}
        out.update(i for i in self.keep if i is not None)
        return out

    def renamed(self, m: dict[str, str]) -> Term:
        return Term((_r(self.keep[0], m), _r(self.keep[1], m)), tuple(f.renamed(m) for f in self.factors),
                    self.coef, self.tree)


@dataclass(frozen=True)
class Sum:
    """``Σ sign * term`` over terms of one shape."""

    terms: tuple[tuple[float, Term], ...]

    @property
    def keep(self) -> Keep:
        return self.terms[0][1].keep

    def single(self) -> Term | None:
        """The one term, its sign in the coefficient (None for a sum of several)."""
        if len(self.terms) != 1:
            return None
        sign, t = self.terms[0]
        return t if sign == 1.0 else replace(t, coef=sign * t.coef)


@dataclass
class Region:
    """What translation in found: the plan, the extents of its indices, the HOPs it absorbed, and the
    rewrites translation already applied (by paper 001's category names)."""

    root: Hop
    plan: Sum
    extents: dict[str, int] = field(default_factory=dict)
    absorbed: list[Hop] = field(default_factory=list)
    applied: set[str] = field(default_factory=set)
    shared_left: bool = False  # a shared operator it could absorb was left a leaf (translate's shared=False)


# operators a plan absorbs (everything else is a leaf); scalar arithmetic stays outside: a sum of
# aggregates is as cheap as it gets
SP_OPS = {("matmult", "%*%"), ("binary", "*"), ("binary", "+"), ("binary", "-"), ("reorg", "t"),
          ("reorg", "diag"), ("agg_unary", "sum"), ("agg_unary", "rowSums"), ("agg_unary", "colSums"),
          ("agg_unary", "trace"), ("rix", "rix"), ("unary", "u-")}


def is_sp_op(h: Hop) -> bool:
    return (h.kind, h.op) in SP_OPS and (h.dt == MATRIX or h.kind == "agg_unary")


def _is_num_scalar(h: Hop) -> bool:
    return h.dt == SCALAR and h.vt in (INT, DOUBLE)


class _In:
    """One translation in: fresh index names, extents, absorbed HOPs."""

    def __init__(self, ctx: Ctx, root: Hop, shared: bool) -> None:
        self.ctx = ctx
        self.root = root
        self.shared = shared
        self.names = (f"i{k}" for k in itertools.count())
        self.region = Region(root, Sum(()))
        self.steps = 0  # operators translated (a shared one once per path to it)

    def fresh(self, extent: int) -> Index:
        if extent == 1:
            return None
        n = next(self.names)
        self.region.extents[n] = extent
        return n

    def leaf(self, h: Hop) -> Sum | None:
        if h.dt == MATRIX:
            if not h.dims_known or h.rows < 1 or h.cols < 1 or h.rows == h.cols == 1:
                return None  # (a 1 x 1 matrix has no index, yet is no scalar: left as written)
            r, c = self.fresh(h.rows), self.fresh(h.cols)
            return _one(Term((r, c), (Factor(h, r, c),), 1.0, 0))
        if _is_num_scalar(h):
            v = num_literal(h)
            if v is not None and math.isfinite(v) and v != 0:
                return _one(Term((None, None), (), float(v), None))
            return _one(Term((None, None), (Factor(h, None, None),), 1.0, 0))
        return None

    def absorbs(self, h: Hop) -> bool:
        if not is_sp_op(h) or is_impure(h):
            return False
        if h is self.root or self.ctx.single_use(h):
            return True
        # a shared one, unless the block writes or prints it: then it is materialized anyway
        ok = not self.ctx.is_root(h) and not any(p.kind in ("data", "builtin") or self.ctx.is_root(p)
                                                 for p in self.ctx.parents(h))
        self.region.shared_left |= ok and not self.shared
        return self.shared and ok

    def sp(self, h: Hop) -> Sum | None:
        self.steps += 1
        if self.steps > MAX_TRANSLATION_STEPS:
            raise _TooLarge
        if not self.absorbs(h):
            return self.constant(h) or self.leaf(h)
        n, applied = len(self.region.absorbed), set(self.region.applied)
        got = self._op(h)
        if got is None:  # (what its inputs absorbed is not absorbed after all)
            del self.region.absorbed[n:]
            self.region.applied = applied
            return self.leaf(h) if h is not self.root else None
        self.region.absorbed.append(h)
        return got

    def constant(self, h: Hop) -> Sum | None:
        """``matrix(c, r, k)`` for a finite literal c != 0: no factor, only its indices and c."""
        if h.kind != "datagen" or h.op != "matrix" or h.dt != MATRIX or not h.dims_known:
            return None
        slots = h.params.get("slots") or ()
        vals = dict(zip(slots, h.inputs))
        v = num_literal(vals["data"]) if "data" in vals else None
        if v is None or not math.isfinite(v) or v == 0 or h.rows < 1 or h.cols < 1 or h.rows == h.cols == 1:
            return None
        self.region.applied.add("aggregation elimination")
        return _one(Term((self.fresh(h.rows), self.fresh(h.cols)), (), float(v), None))

    def _op(self, h: Hop) -> Sum | None:  # noqa: C901 (one case per operator)
        ins = h.inputs
        if h.kind == "matmult":
            a, b = self.sp(ins[0]), self.sp(ins[1])
            if a is None or b is None or a.single() is None or b.single() is None:
                return None
            ta, tb = a.single(), b.single()
            assert ta is not None and tb is not None
            s, s2 = ta.keep[1], tb.keep[0]
            if (s is None) != (s2 is None):
                return None
            if s2 is not None and s is not None:
                tb = tb.renamed({s2: s})
            if _diagonal(ta.keep) or _diagonal(tb.keep):
                self.region.applied.add("aggregation elimination")  # diag(v) %*% X: no product left
            t = _product(ta, tb, (ta.keep[0], tb.keep[1]))
            if s is not None and s not in t.keep and all(s not in f.indices for f in t.factors):
                t = replace(t, coef=t.coef * self.region.extents[s])  # Σ_s over constants: |s| times
            return _one(t)
        if h.kind == "binary" and h.op == "*":
            a, b = self.sp(ins[0]), self.sp(ins[1])
            if a is None or b is None or a.single() is None or b.single() is None:
                return None
            ta, tb = a.single(), b.single()
            assert ta is not None and tb is not None
            keep, m = _align(ta.keep, tb.keep)
            if keep is None:
                return None
            t = _product(ta, tb.renamed(m), keep)
            kept = _eliminate_joins(t)
            if kept is not t:
                self.region.applied.add("join elimination")
            return _one(kept)
        if h.kind == "binary" and h.op in ("+", "-"):
            a, b = self.sp(ins[0]), self.sp(ins[1])
            if a is None or b is None or _shape(ins[0]) != _shape(ins[1]):
                return None
            # (every term of a Sum keeps the same index names; b's are renamed onto a's, one to one:
            # diag(v) + C keeps (i, i) beside (j, k), and renaming both j and k to i would add only
            # C's diagonal; such a sum stays as written)
            onto: dict[str, str] = {}
            for p, q in zip(b.keep, a.keep):
                if p is None or q is None:
                    continue
                if onto.setdefault(p, q) != q:
                    return None
            if len(set(onto.values())) != len(onto) or (a.keep[0] is not None and a.keep[0] == a.keep[1]
                                                        and b.keep[0] != b.keep[1]):
                return None
            sign = 1.0 if h.op == "+" else -1.0
            return Sum(a.terms + tuple((sign * s, t.renamed(onto)) for s, t in b.terms))
        if h.kind == "unary" and h.op == "u-":
            a = self.sp(ins[0])
            return None if a is None else Sum(tuple((-s, t) for s, t in a.terms))
        if h.kind == "reorg" and h.op == "t":
            a = self.sp(ins[0])
            return None if a is None else Sum(tuple((s, replace(t, keep=(t.keep[1], t.keep[0]))) for s, t in a.terms))
        if h.kind == "reorg" and h.op == "diag":
            x = ins[0]
            if not x.dims_known:
                return None
            a = self.sp(x)
            if a is None:
                return None
            if x.cols == 1 and x.rows > 1:  # vector -> diagonal matrix: keep repeats the index
                return Sum(tuple((s, replace(t, keep=(t.keep[0], t.keep[0]))) for s, t in a.terms))
            if x.rows == x.cols and x.rows > 1:  # matrix -> its diagonal: a selection σ_{i=j}
                self.region.applied.add("selection push-down")
                return Sum(tuple((s, _select_diag(t, True, self.region.extents)) for s, t in a.terms))
            return None
        if h.kind == "agg_unary":
            x = ins[0]
            if x.dt != MATRIX or not x.dims_known or (h.params.get("direction") not in (None, "")):
                return None
            a = self.sp(x)
            if a is None:
                return None
            if h.op == "trace":
                if x.rows != x.cols:
                    return None
                self.region.applied.add("selection push-down")
                return Sum(tuple((s, _select_diag(t, False, self.region.extents)) for s, t in a.terms))
            if len(a.terms) > 1:
                self.region.applied.add("aggregation push-down")
            return Sum(tuple((s, _aggregate(t, _kept(h.op, t.keep), self.region.extents)) for s, t in a.terms))
        if h.kind == "rix":
            return self._rix(h)
        return None

    def _rix(self, h: Hop) -> Sum | None:
        """``E[a:b, c:d]`` with literal bounds: every factor holding E's row (column) index is sliced
        (selection push-down, paper 001 Eq. 2); a factor holding both as its diagonal is not."""
        x = h.inputs[0]
        b = [num_literal(i) for i in h.inputs[1:5]]
        if len(h.inputs) != 5 or any(v is None or not float(v).is_integer() for v in b) or not x.dims_known:
            return None
        if not h.dims_known:
            return None
        a = self.sp(x)
        if a is None or a.single() is None:
            return None
        t = a.single()
        assert t is not None
        rl, ru, cl, cu = (int(v) for v in b)  # type: ignore[arg-type]
        if (rl, ru, cl, cu) == (1, x.rows, 1, x.cols):
            return None  # no selection (remove_unnecessary_rix's)
        if not (1 <= rl <= ru <= x.rows and 1 <= cl <= cu <= x.cols):
            return None  # out of bounds: the indexing as written reports it
        for idx, lo, hi, n in ((t.keep[0], rl, ru, x.rows), (t.keep[1], cl, cu, x.cols)):
            if idx is None or (lo, hi) == (1, n):
                continue
            if _diagonal(t.keep):
                return None
            new = self.fresh(hi - lo + 1)
            fs = []
            for f in t.factors:
                if idx not in f.indices:
                    fs.append(f)
                    continue
                if f.row == f.col:
                    return None
                axis = 0 if f.row == idx else 1
                fs.append(Factor(self.slice(f.hop, axis, lo, hi, h), new if axis == 0 else f.row,
                                 new if axis == 1 else f.col))
            keep = (new if t.keep[0] == idx else t.keep[0], new if t.keep[1] == idx else t.keep[1])
            t = Term(keep, tuple(fs), t.coef, t.tree)
        self.region.applied.add("selection push-down")
        return _one(t)

    def slice(self, x: Hop, axis: int, lo: int, hi: int, like: Hop) -> Hop:
        c = self.ctx
        r = (c.lit(lo, like), c.lit(hi, like), c.lit(1, like), c.lit(x.cols, like)) if axis == 0 else \
            (c.lit(1, like), c.lit(x.rows, like), c.lit(lo, like), c.lit(hi, like))
        return c.mk("rix", "rix", [x, *r], MATRIX, DOUBLE, like)


def _one(t: Term) -> Sum:
    return Sum(((1.0, t),))


def _shape(h: Hop) -> tuple[int, int]:
    return (h.rows, h.cols) if h.dt == MATRIX else (1, 1)


def _align(ka: Keep, kb: Keep) -> tuple[Keep | None, dict[str, str]]:
    """The output indices of an element-wise product of shapes ``ka`` and ``kb`` (an extent-1 side
    broadcasts), and the renames of ``kb``'s indices onto ``ka``'s."""
    m: dict[str, str] = {}
    out: list[Index] = []
    for x, y in zip(ka, kb):
        if x is not None and y is not None:
            if _diagonal(ka) or _diagonal(kb):
                return None, {}
            m[y] = x
            out.append(x)
        else:
            out.append(x if x is not None else y)
    return (out[0], out[1]), m


def _product(a: Term, b: Term, keep: Keep) -> Term:
    n = len(a.factors)
    tb = _shift(b.tree, n)
    tree = a.tree if b.tree is None else tb if a.tree is None else (a.tree, tb)
    return Term(keep, a.factors + b.factors, a.coef * b.coef, tree)


def _shift(tree: object, n: int) -> object:
    if tree is None:
        return None
    if isinstance(tree, int):
        return tree + n
    assert isinstance(tree, tuple)
    return tuple(_shift(x, n) for x in tree)


def _aggregate(t: Term, keep: Keep, extents: dict[str, int]) -> Term:
    """Σ over the indices of ``t.keep`` not in ``keep``; one no factor holds sums a constant: its
    extent joins the coefficient."""
    held = {i for f in t.factors for i in f.indices}
    coef = t.coef
    for i in set(t.keep) - set(keep) - {None}:
        if i not in held:
            coef *= extents[i]  # type: ignore[index]
    return Term(keep, t.factors, coef, t.tree)


def _kept(op: str, k: Keep) -> Keep:
    """The output indices of aggregate ``op`` over a relation with indices ``k``."""
    return (k[0], None) if op == "rowSums" else (None, k[1]) if op == "colSums" else (None, None)


def _diagonal(k: Keep) -> bool:
    return k[0] is not None and k[0] == k[1]


def _select_diag(t: Term, vector: bool, extents: dict[str, int]) -> Term:
    """σ_{row = col}(t) (a square t of extent > 1): its diagonal as a column vector, or summed (trace)."""
    r, c = t.keep
    if r is None or c is None:  # 1 x 1: its only cell
        return replace(t, keep=(None, None))
    out = t.renamed({c: r}) if c != r else t
    return _aggregate(replace(out, keep=(r, r)), (r, None) if vector else (None, None), extents)


def _eliminate_joins(t: Term) -> Term:
    """``X * (X != 0)`` -> ``X``: the indicator of X's non-zeros, joined with X on the same indices,
    changes no value (a zero stays 0, NaN * 1 is NaN, Inf * 1 is Inf)."""
    fs = list(t.factors)
    drop: set[int] = set()
    for k, f in enumerate(fs):
        h = f.hop
        if h.kind == "binary" and h.op == "!=" and len(h.inputs) == 2 and num_literal(h.inputs[1]) == 0:
            x = h.inputs[0]
            if any(j != k and j not in drop and g.hop is x and (g.row, g.col) == (f.row, f.col)
                   for j, g in enumerate(fs)):
                drop.add(k)
    if not drop:
        return t
    keep_pos = [k for k in range(len(fs)) if k not in drop]
    return Term(t.keep, tuple(fs[k] for k in keep_pos), t.coef, None)


# operators one translation may visit: absorbing shared operators translates a shared one once per
# path to it, which a deep DAG of shared steps makes exponential (an MLogreg iteration with its five CG
# steps unrolled: 200000 visits, 3 s, for regions no plan improves); a region past it stays as written
MAX_TRANSLATION_STEPS = 2000


class _TooLarge(Exception):
    """A translation past MAX_TRANSLATION_STEPS."""


def translate(h: Hop, ctx: Ctx, shared: bool = False) -> Region | None:
    """The sum-product plan of the operators rooted at ``h`` (``shared``: absorbing shared ones too),
    or None when ``h`` is not one."""
    if not is_sp_op(h) or not ctx.pure(h):
        return None
    t = _In(ctx, h, shared)
    try:
        plan = t.sp(h)
    except _TooLarge:
        return None
    if plan is None or not t.region.absorbed:
        return None
    t.region.plan = plan
    return t.region
