"""CPlans: the code-generation plan of one fused operator (paper 000 sec. 3).

Four templates (paper 000 Table 1), each a skeleton the generated body plugs into:

* ``cell``: iterates over the cells (i, j) of the main input (or only its non-zeros when the
  plan is sparse-safe and no side input holds NaN/Inf); every node is a scalar. Aggregation
  ``agg`` in NO_AGG, FULL_AGG, ROW_AGG, COL_AGG with ``agg_op`` in sum, sumsq, min, max.
* ``magg``: several full aggregates over one iteration space (``roots`` with ``agg_ops``), e.g.
  ``sum(X*Y)`` and ``sum(X*Z)`` reading X once; the result is a tuple of floats.
* ``row``: iterates over the rows i of the main input; a node is a scalar or a row vector
  (1 x L). Inputs: MAIN is X[i, :], CELL a side matrix's row Y[i, :], ROWVEC v[i, 0] (scalar),
  COLVEC a whole 1 x L row vector, SCALAR, MATRIX a whole side matrix B (only as ``vecmat``'s
  second operand). Row-only ops: ``rowSums``/``rowMins``/``rowMaxs`` (vector -> scalar),
  ``dot`` (two vectors -> scalar), ``vecmat`` (vector (1 x K) times MATRIX (K x L) -> vector).
  Element-wise ops broadcast a scalar (or a 1 x 1 vector) over a vector. Output ``agg``:
  NO_AGG (n x L, or n x 1 for a scalar root), COL_AGG (1 x L: the sum over i), FULL_AGG
  (the sum over i of all entries), COL_AGG_T (L x 1, the transpose of COL_AGG: ``t(X) %*% w``)
  and COL_AGG_B1_T (L x L2: the sum over i of t(root_i) %*% root2_i, ``t(X) %*% W``).
* ``outer``: iterates over the non-zeros (i, j) of the sparse main input X (n x m) with
  factors U (n x r, access OUTER_U: row U[i, :]) and V (m x r, access OUTER_V: row V[j, :]);
  ``uv(U, V)`` is the scalar dot(U[i, :], V[j, :]) = (U %*% t(V))[i, j]. Nodes are scalars; CELL,
  ROWVEC, COLVEC and SCALAR side inputs read as in ``cell``. Output ``agg``: NO_AGG (n x m with
  X's sparsity pattern), FULL_AGG (sum), RIGHT_MM (n x k: ``W %*% mm`` with mm (m x k): row i
  += w_ij * mm[j, :]), LEFT_MM (m x k: ``t(W) %*% mm`` with mm (n x k): row j += w_ij * mm[i, :]);
  ``mm`` is the input position of that matrix. Cells where X is zero are zero (SystemDS's
  sparse-safe semantics of wsloss/wcemm/wdivmm; the template only opens on such expressions).

A CPlan is a template type, an output/aggregation type and a DAG of CNodes over the operator's
inputs. CNodes are hash-consed on construction (:class:`CPlanBuilder`), so equal subexpressions
are shared (CSE). The canonical key (:meth:`CPlan.canonical_key`) renumbers inputs by their first
use in a fixed traversal and replaces every literal by a numbered scalar argument, so plans that
differ only in which matrices they read or in their constants share one generated kernel (the
plan cache of paper 001 sec. 4.4: literals are kernel arguments, CSLH).
"""

from __future__ import annotations

import hashlib
import math
from contextvars import ContextVar
from dataclasses import dataclass, field

from lafuse.lang.builtins import ZERO_PRESERVING_UNARY

# how an input is read inside a cell-wise kernel at cell (i, j)
MAIN = "main"  # the main input: X[i, j] (its shape is the operator's iteration space)
CELL = "cell"  # a side input of the same shape: Y[i, j]
ROWVEC = "rowvec"  # a column vector broadcast along rows: v[i, 0]
COLVEC = "colvec"  # a row vector broadcast along columns: v[0, j]
SCALAR = "scalar"  # a scalar (or 1x1) input
MATRIX = "matrix"  # row template: a whole side matrix (vecmat's right operand)
OUTER_U = "outer_u"  # outer template: U[i, :]
OUTER_V = "outer_v"  # outer template: V[j, :]
ACCESS = (MAIN, CELL, ROWVEC, COLVEC, SCALAR, MATRIX, OUTER_U, OUTER_V)

TEMPLATES = ("cell", "magg", "row", "outer")

# output / aggregation types of the Cell template (paper 000 Table 1)
NO_AGG = "no_agg"
FULL_AGG = "full_agg"
ROW_AGG = "row_agg"
COL_AGG = "col_agg"
COL_AGG_T = "col_agg_t"  # row template
COL_AGG_B1_T = "col_agg_b1_t"  # row template
LEFT_MM = "left_mm"  # outer template
RIGHT_MM = "right_mm"  # outer template
AGG_OPS = ("sum", "sumsq", "min", "max")

UNARY = ("u-", "!", "abs", "exp", "log", "sqrt", "round", "floor", "ceil", "sign", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "isNaN", "isInf")
BINARY = ("+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "min", "max",
          "xor")
TERNARY = ("ifelse",)
ROW_UNARY = ("rowSums", "rowMins", "rowMaxs", "rowVars")  # row template: vector -> scalar
ROW_VECTOR = ("rowCumsum",)  # row template: vector -> vector (the running sum along the row)
ROW_BINARY = ("dot", "vecmat", "cbind")  # row template (cbind: a row vector of both operands' elements)
# row template: colrange(x, lo, hi), the elements lo..hi (1-based, literal bounds) of a row vector: a
# column range X[, lo:hi] of a row-aligned input read inside the plan (SystemDS's rowAggPattern17/30)
COLRANGE = "colrange"


def colrange_bounds(n: CNode) -> tuple[int, int]:
    """(lo, hi) of a ``colrange`` node: its literal bounds, 1-based and inclusive."""
    lo, hi = (int(float(x.arg)) for x in n.children[1:])  # type: ignore[arg-type]
    return lo, hi


OUTER_BINARY = ("uv",)  # outer template: dot(U[i, :], V[j, :]) of its OUTER_U and OUTER_V inputs
# seq(from, to, incr) of integer from and incr generated in the kernel: row i (0-based) holds from + i * incr,
# the unfused cumulative sum exactly (SystemDS's Cell and Row templates take such a seq: cellwisetmpl22)
SEQ = "seq"
ARITY = {**{o: 1 for o in UNARY + ROW_UNARY + ROW_VECTOR}, **{o: 2 for o in BINARY + ROW_BINARY},
         **{o: 3 for o in TERNARY}, "uv": 2, SEQ: 2, COLRANGE: 3}


@dataclass(frozen=True)
class CNode:
    """One node: ``op`` is "input" (``arg`` = input position), "literal" (``arg`` = value) or an
    operator with ``children``."""

    op: str
    children: tuple[CNode, ...] = ()
    arg: object = None
    access: str = ""  # inputs only: MAIN, CELL, ROWVEC, COLVEC or SCALAR

    def __repr__(self) -> str:
        if self.op == "input":
            return f"in{self.arg}[{self.access}]"
        if self.op == "literal":
            return repr(self.arg)
        return f"{self.op}({', '.join(map(repr, self.children))})"


# the literal policy of the CPlans being built (set by fusion.optimize for one DAG)
CONST_LITS: ContextVar[str] = ContextVar("const_lits", default="none")


@dataclass
class CPlan:
    """``root`` is the output expression (``roots``/``agg_ops`` for magg, where ``root`` is the
    first root); ``root2`` the right factor of COL_AGG_B1_T; ``mm`` the input position of the
    matrix an outer LEFT_MM/RIGHT_MM multiplies with. Exactly one input has access MAIN (the
    iteration space; the reference interpreter takes it at position 0)."""

    template: str
    root: CNode
    agg: str = NO_AGG
    agg_op: str = "sum"
    sparse_safe: bool = False  # the kernel may iterate over the main input's non-zeros only
    ninputs: int = field(default=0)
    roots: tuple[CNode, ...] = ()
    agg_ops: tuple[str, ...] = ()
    root2: CNode | None = None
    mm: int = -1
    # row template: the inputs it reads cell by cell are narrow (at most NARROW_ROW_COLS columns when
    # fused), so the generated block body is the transposed one (codegen.gen_row_block)
    narrow: bool = False
    # which literals the kernel's source holds as constants instead of reading them from its ``lits``
    # argument (config codegen_literals): "none", "all", or "int" (the finite integer ones); a plan
    # takes the policy of the fusion.optimize call that builds it (CONST_LITS)
    const_lits: str = field(default_factory=lambda: CONST_LITS.get())

    def is_const(self, n: CNode) -> bool:
        """Whether literal ``n`` is a constant of the kernel (part of its canonical hash)."""
        if self.const_lits == "all":
            return True
        v = float(n.arg)  # type: ignore[arg-type]
        return self.const_lits == "int" and math.isfinite(v) and v.is_integer()

    def all_roots(self) -> tuple[CNode, ...]:
        if self.template == "magg":
            return self.roots
        return (self.root,) if self.root2 is None else (self.root, self.root2)

    def canonical_key(self) -> tuple[str, tuple[int, ...], tuple[float, ...]]:
        """(hash, input permutation, literal values): the hash is equal for plans that differ only in
        input order and the values of literals that are arguments; the permutation maps canonical input
        slots to this plan's input positions, the literals are the kernel's scalar arguments in canonical
        order (a constant literal, ``const_lits``, is in the hash by its value instead)."""
        order: list[int] = []
        lits: list[float] = []
        memo: dict[int, str] = {}

        def walk(n: CNode) -> str:
            key = id(n)
            if key in memo:
                return memo[key]
            if n.op == "input":
                pos = int(n.arg)  # type: ignore[call-overload]
                if pos not in order:
                    order.append(pos)
                s = f"i{order.index(pos)}:{n.access}"
            elif n.op == "literal" and self.is_const(n):
                s = f"c{float(n.arg)!r}"  # type: ignore[arg-type]
            elif n.op == "literal":
                lits.append(float(n.arg))  # type: ignore[arg-type]
                s = f"l{len(lits) - 1}"
            else:
                s = f"{n.op}(" + ",".join(walk(c) for c in n.children) + ")"
            memo[key] = s
            return s

        body = "|".join(walk(r) for r in self.all_roots())
        if self.mm >= 0:
            if self.mm not in order:
                order.append(self.mm)
            body += f"|mm=i{order.index(self.mm)}"
        for pos in range(self.ninputs):  # inputs no node reads keep their slots (stable arity)
            if pos not in order:
                order.append(pos)
        ops = ",".join(self.agg_ops) if self.template == "magg" else self.agg_op
        text = f"{self.template}|{self.agg}|{ops}|{int(self.sparse_safe)}|{body}" + ("|narrow" if self.narrow else "")
        return hashlib.sha256(text.encode()).hexdigest()[:32], tuple(order), tuple(lits)


# widest MAIN/CELL input a row plan reads cell by cell for which it counts as narrow: up to a cache line
# (8 doubles) per row, a column-at-a-time pass touches no more lines than a row-at-a-time one
NARROW_ROW_COLS = 8


def cell_read_inputs(plan: CPlan) -> set[int]:
    """Input positions of MAIN/CELL inputs a row plan reads cell by cell, as opposed to whole blocks
    of rows handed to BLAS: the left operand of ``vecmat`` and the COL_AGG_B1_T factors."""
    blockwise = {id(plan.root), id(plan.root2)} if plan.agg == COL_AGG_B1_T else set()
    out: set[int] = set()
    for n in postorder(plan):
        for k, ch in enumerate(n.children):
            if ch.op == "input" and ch.access in (MAIN, CELL) and not (n.op == "vecmat" and k == 0):
                out.add(int(ch.arg))  # type: ignore[call-overload]
    r = plan.root
    if r.op == "input" and r.access in (MAIN, CELL) and id(r) not in blockwise:
        out.add(int(r.arg))  # type: ignore[call-overload]
    return out


# unary operators with f(0) == 0
ZERO_UNARY = ZERO_PRESERVING_UNARY


def _full(n: CNode) -> bool:
    """The node is a full-size matrix expression (reads the main or a cell-aligned input)."""
    if n.op == "input":
        return n.access in (MAIN, CELL)
    return any(_full(c) for c in n.children)


COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def zero_safe(n: CNode, outer: bool = False) -> bool:
    """f == 0 wherever the (sparse) main input is 0, with the unfused operators' semantics: a zero
    of a sparse matrix annihilates ``*`` and ``&`` with another full-size matrix whatever it holds
    (SystemDS's sparse-safe rule, which lafuse's unfused kernels follow), and with a vector or
    scalar operand if that operand is finite (the runtime checks: :func:`finite_required`); every
    other operator keeps zeros only if it maps the actual zero to zero (``0 / y`` is NaN for
    y == 0: not safe, except under the Outer template's documented rule)."""
    if n.op == "input":
        return n.access == MAIN
    if n.op == "literal":
        return float(n.arg) == 0.0  # type: ignore[arg-type]
    if n.op == "uv":
        return False
    ch = n.children
    if n.op in ("*", "&"):
        return any(zero_safe(c, outer) for c in ch)
    if n.op == "/":
        return outer and zero_safe(ch[0], outer)
    if n.op in COMPARE and len(ch) == 2:  # against a literal c: safe if the zero compares false
        for x, c, zero_left in ((ch[0], ch[1], True), (ch[1], ch[0], False)):
            if c.op == "literal" and zero_safe(x, outer):
                v = float(c.arg)  # type: ignore[arg-type]
                return not COMPARE[n.op](0.0, v) if zero_left else not COMPARE[n.op](v, 0.0)
    if n.op in ("+", "-", "min", "max", "!=", "<", ">", "|", "xor"):
        return zero_safe(ch[0], outer) and zero_safe(ch[1], outer)
    if n.op == "^":
        return zero_safe(ch[0], outer) and ch[1].op == "literal" and float(ch[1].arg) > 0  # type: ignore[arg-type]
    if n.op in ZERO_UNARY:
        return zero_safe(ch[0], outer)
    if n.op == "ifelse":
        return zero_safe(ch[0], outer) and zero_safe(ch[2], outer)
    return False


def row_kinds(order: list[CNode]) -> dict[int, str]:
    """Static kinds of a row plan's nodes (children before parents in ``order``), by ``id``: "S" a
    scalar per row, "V" a vector per row, "M" a MATRIX operand (only vecmat's right operand)."""
    kind: dict[int, str] = {}
    for n in order:
        if n.op == "input":
            k = {MAIN: "V", CELL: "V", COLVEC: "V", ROWVEC: "S", SCALAR: "S", MATRIX: "M"}.get(n.access)
            if k is None:
                raise ValueError(f"input access {n.access!r} is not valid in a row plan")
        elif n.op == "literal" or n.op in ROW_UNARY or n.op == "dot":
            k = "S"
        elif n.op == "cbind":
            k = "V"
        elif n.op == COLRANGE:
            if kind[id(n.children[0])] != "V" or any(c.op != "literal" for c in n.children[1:]):
                raise ValueError("colrange reads a row vector between literal bounds")
            k = "V"
        elif n.op == "vecmat":
            if kind[id(n.children[1])] != "M":
                raise ValueError("vecmat's second operand must be a MATRIX input")
            k = "V"
        else:
            kinds = [kind[id(ch)] for ch in n.children]
            if "M" in kinds:
                raise ValueError(f"a MATRIX input can only be vecmat's right operand, not {n.op}'s")
            k = "V" if "V" in kinds else "S"
        kind[id(n)] = k
    return kind


ROW_SPARSE_CONSUMERS = ("dot", "vecmat", "rowSums", "rowMins", "rowMaxs", "*", "/")


@dataclass
class RowSparse:
    """Which nodes of a row plan keep a CSR main row's sparsity (the kernel's mode 2 computes them at
    the row's non-zeros only): the main row, and products/quotients of such a node by a non-sparse
    factor (``scale_of``). ``ok``: every consumer of a sparse node takes it as such; ``len1``: the
    vector factors that must have length 1 at run time. The code generator and the cost model share it
    (a plan priced as sparsity-exploiting must be one the kernel runs so)."""

    sparse: set[int] = field(default_factory=set)
    scale_of: dict[int, CNode] = field(default_factory=dict)
    len1: list[CNode] = field(default_factory=list)
    ok: bool = False


def row_sparse(order: list[CNode], kind: dict[int, str], root2: CNode | None = None) -> RowSparse:
    """The sparse form of a row plan's nodes (``order``: children before parents; ``kind``: row_kinds)."""
    rs = RowSparse()
    for n in order:
        if n.op == "input" and n.access == MAIN:
            rs.sparse.add(id(n))
        elif n.op in ("*", "/") and len(n.children) == 2:
            a, b = n.children
            if n.op == "*" and id(b) in rs.sparse and id(a) not in rs.sparse:
                a, b = b, a
            if id(a) in rs.sparse and id(b) not in rs.sparse:
                rs.sparse.add(id(n))
                rs.scale_of[id(n)] = b
                if kind[id(b)] == "V":
                    rs.len1.append(b)
    ok = True
    for n in order:
        for pos, ch in enumerate(n.children):
            if id(ch) not in rs.sparse:
                continue
            if n.op not in ROW_SPARSE_CONSUMERS or id(n) in rs.sparse and ch is not sparse_base(n, rs.sparse, rs.scale_of):
                ok = False
            if n.op in ("*", "/") and id(n) not in rs.sparse:
                ok = False
            if n.op == "vecmat" and pos != 0:
                ok = False
            if n.op == "dot" and all(id(x) in rs.sparse for x in n.children):
                ok = False
    if root2 is not None and id(root2) in rs.sparse:
        ok = False
    rs.ok = ok
    return rs


def sparse_base(n: CNode, sparse: set[int], scale_of: dict[int, CNode]) -> CNode:
    """The sparse operand of a sparse product/quotient node (``sparse``, ``scale_of``: RowSparse's)."""
    a, b = n.children
    return a if id(a) in sparse and scale_of[id(n)] is b else b


def postorder(plan: CPlan) -> list[CNode]:
    """The plan's distinct nodes, children before parents."""
    return nodes_below(plan.all_roots())


def nodes_below(roots: tuple[CNode, ...] | list[CNode]) -> list[CNode]:
    """The distinct nodes under ``roots`` (theirs included), children before parents."""
    out: list[CNode] = []
    seen: set[int] = set()

    def walk(n: CNode) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        for ch in n.children:
            walk(ch)
        out.append(n)

    for r in roots:
        walk(r)
    return out


# accesses whose inputs a fused kernel reads as dense arrays (vectors, vecmat's whole matrix, the outer
# factors); MAIN and CELL inputs are read in either format
DENSE_ACCESS = frozenset((ROWVEC, COLVEC, MATRIX, OUTER_U, OUTER_V))


def split_outer(plan: CPlan) -> tuple[CPlan, CPlan]:
    """An outer plan as its two halves, for an operator that splits the product's inner dimension
    (paper 004's cuboids with R > 1): the product alone (``uv`` at the main input's non-zeros, whose
    partial results over pieces of the inner dimension add up), and the plan with ``uv`` read from a
    new CELL input at position ``plan.ninputs`` (the summed product). Both keep the input positions."""
    prod = next(n for n in postorder(plan) if n.op == "uv")
    s = CNode("input", arg=plan.ninputs, access=CELL)
    memo: dict[int, CNode] = {}

    def swap(n: CNode) -> CNode:
        if n.op == "uv":
            return s
        if id(n) not in memo:
            memo[id(n)] = CNode(n.op, tuple(swap(c) for c in n.children), n.arg, n.access) if n.children else n
        return memo[id(n)]

    main = next(n for n in postorder(plan) if n.op == "input" and n.access == MAIN)
    # (times X != 0, which is 1 wherever the template computes a cell: the kernel iterates its main input,
    # which a node must read)
    mm_half = CPlan("outer", CNode("*", (prod, CNode("!=", (main, CNode("literal", arg=0.0))))),
                    agg=NO_AGG, sparse_safe=True, ninputs=plan.ninputs)
    rest = CPlan(plan.template, swap(plan.root), agg=plan.agg, agg_op=plan.agg_op, sparse_safe=plan.sparse_safe,
                 ninputs=plan.ninputs + 1, root2=None if plan.root2 is None else swap(plan.root2), mm=plan.mm)
    return mm_half, rest


def dense_inputs(plan: CPlan) -> set[int]:
    """Input positions the fused kernel reads only as dense arrays: those of DENSE_ACCESS and the outer
    template's ``mm`` matrix. Why the plan asks: a CSR value there is densified on every call, which
    the physical plan makes an explicit ``convert`` instruction (plan.build) that it can price, print
    and, inside a loop, see."""
    access: dict[int, set[str]] = {}
    for n in postorder(plan):
        if n.op == "input":
            access.setdefault(int(n.arg), set()).add(n.access)  # type: ignore[call-overload]
    out = {p for p, a in access.items() if a <= DENSE_ACCESS}
    if plan.mm >= 0:
        out.add(plan.mm)
    return out


def finite_required(plan: CPlan) -> set[int]:
    """Input positions that must hold only finite values for a sparse-safe plan to skip the main
    input's zeros: the vector and scalar inputs of a ``*``/``&`` operand that meets a main-derived
    zero without being a full-size matrix (``X * r`` is NaN where r is NaN, ``X * Y`` is not)."""
    out: set[int] = set()
    seen: set[int] = set()

    def inputs(n: CNode) -> None:
        if n.op == "input":
            out.add(int(n.arg))  # type: ignore[call-overload]
        for c in n.children:
            inputs(c)

    def walk(n: CNode) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        if n.op in ("*", "&"):
            for c in n.children:
                others = [o for o in n.children if o is not c]
                if zero_safe(c) and any(not _full(o) for o in others):
                    for o in others:
                        if not _full(o):
                            inputs(o)
        for c in n.children:
            walk(c)

    for r in plan.all_roots():
        walk(r)
    return out


class CPlanBuilder:
    """Builds CNodes with common-subexpression elimination (structurally equal nodes are one object)."""

    def __init__(self) -> None:
        self._memo: dict[tuple, CNode] = {}

    def _intern(self, key: tuple, node: CNode) -> CNode:
        return self._memo.setdefault(key, node)

    def input(self, pos: int, access: str) -> CNode:
        if access not in ACCESS:
            raise ValueError(f"unknown input access {access!r}")
        return self._intern(("input", pos, access), CNode("input", (), pos, access))

    def literal(self, value: float) -> CNode:
        v = float(value)
        return self._intern(("literal", repr(v)), CNode("literal", (), v))

    def uv(self, u: CNode, v: CNode) -> CNode:
        """The outer template's dot(U[i, :], V[j, :]) over inputs of access OUTER_U and OUTER_V."""
        if (u.access, v.access) != (OUTER_U, OUTER_V):
            raise ValueError("uv reads an OUTER_U and an OUTER_V input")
        return self.op("uv", u, v)

    def op(self, name: str, *children: CNode) -> CNode:
        arity = ARITY.get(name)
        if arity is None:
            raise ValueError(f"operator {name!r} cannot be fused")
        if arity != len(children):
            raise ValueError(f"{name} takes {arity} operands, got {len(children)}")
        return self._intern((name, *(id(c) for c in children)), CNode(name, tuple(children)))
