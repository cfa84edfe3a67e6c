"""Patterns of a HOP DAG that lowering turns into physical operators, and that fusion and the cost
model must see the same way: transposes a product reads in place, and ``t(X) %*% (w * (X %*% v))``
chains run as one blocked pass (paper 001 §5). Pure functions of the DAG, so the optimizer reads them
without the runtime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lafuse.formats import CSR, default_format
from lafuse.hops.hop import Hop
from lafuse.hops.program import Dag


def foldable_transposes(order: list[Hop], users: dict[int, list[Hop]], dag: Dag) -> set[int]:
    """Transposes whose only readers are ``%*%``: each product reads the operand transposed in place
    (BLAS takes a transposed operand, SciPy's CSR transpose is a CSC view), so ``t(X) %*% Y`` never
    materializes ``t(X)``. multiLogReg's ``t(X) %*% T`` (T n x k) would otherwise copy all of X twice
    per CG step; two products of one ``t(X)`` in a block (CSE) copied a 20000 x 200 X in 89 ms."""
    roots = {r.id for r in dag.roots}
    out: set[int] = set()
    for h in order:
        if h.kind == "reorg" and h.op == "t" and len(h.inputs) == 1 and h.id not in roots:
            us = users.get(h.id, [])
            if us and all(u.kind == "matmult" and len(u.inputs) == 2 for u in us):
                out.add(h.id)
    return out


# Element-wise operations whose dense kernel is one float64 -> float64 NumPy ufunc: a dense result of
# one takes the buffer of a same-shape matrix operand that dies with it (runtime.reuse), so it touches
# no new memory. The memory model of fusion's first-run saving (fusion.optimizer.growth_saved) reads it;
# a test checks it against the kernels.
REUSES_OPERAND = frozenset({"+", "-", "*", "/", "u-", "abs", "exp", "sqrt", "floor", "ceil", "sin", "cos",
                            "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh"})


@dataclass(frozen=True)
class Chain:
    """An unfused ``t(X) %*% (X %*% v)`` or ``t(X) %*% (w * (X %*% v))`` (see :func:`mmchains`)."""
    x: Hop
    v: Hop
    w: Hop | None
    w_first: bool  # whether w is the left operand of *
    transposed: bool  # the form t(q) %*% X: the chain's result transposed
    absorbed: tuple[int, ...]  # the inner product (and the *): no instructions of their own


def mmchains(order: list[Hop], users: dict[int, list[Hop]], dag: Dag, folded: set[int]) -> dict[int, Chain]:
    """Products ``t(X) %*% q`` with ``q`` = ``X %*% v`` or ``w * (X %*% v)`` (either side of ``*``),
    the transpose read through (:func:`foldable_transposes`), and their form ``t(q) %*% X`` (the
    rewrite transpose_matmult_vector's, for a column v), where nothing else reads ``q``'s parts: one
    instruction each, a blocked single scan over X (kernels_linalg.mmchain_blocked; paper 001 §5),
    keyed by the outer product. The plain products read a large X twice from memory: GLM's CG step
    ``t(X) %*% (mu * (X %*% D))`` over a 1e5 x 100 X took 9.8 ms, blocked 6.1 ms."""
    roots = {r.id for r in dag.roots}

    def only_here(x: Hop) -> bool:
        return x.id not in roots and x.id not in folded and len(users.get(x.id, [])) == 1

    def inner(q: Hop, x: Hop) -> bool:
        return (q.kind == "matmult" and q.op == "%*%" and len(q.inputs) == 2 and q.inputs[0].id == x.id
                and q.inputs[1].dt == "matrix" and q.inputs[1].id not in folded and only_here(q))

    def chain(x: Hop, r: Hop, transposed: bool, tr: tuple[int, ...]) -> Chain | None:
        if x.dt != "matrix" or x.id in folded:  # (X itself a transpose only products read: no register)
            return None
        if inner(r, x):
            return Chain(x, r.inputs[1], None, True, transposed, (*tr, r.id))
        if r.kind == "binary" and r.op == "*" and len(r.inputs) == 2 and only_here(r):
            a, b = r.inputs
            for q, w, first in ((b, a, True), (a, b, False)):
                if inner(q, x) and w.dt == "matrix" and w.id != q.id:
                    return Chain(x, q.inputs[1], w, first, transposed, (*tr, q.id, r.id))
        return None

    out: dict[int, Chain] = {}
    for h in order:
        if not (h.kind == "matmult" and h.op == "%*%" and len(h.inputs) == 2):
            continue
        a, b = h.inputs
        c = None
        if a.id in folded:
            c = chain(a.inputs[0], b, False, ())
            if c is None and len(users.get(a.id, [])) == 1:
                c = chain(b, a.inputs[0], True, (a.id,))
        if c is not None:
            out[h.id] = c
    return out


def _sole_reader(users: dict[int, list[Hop]], dag: Dag, folded: set[int]) -> Callable[[Hop, Hop], bool]:
    """``only(x, reader)``: nothing but ``reader`` reads ``x`` (which is no root and no transpose a
    product reads in place), so a pattern keyed elsewhere may absorb it."""
    roots = {r.id for r in dag.roots}

    def only(x: Hop, reader: Hop) -> bool:
        us = users.get(x.id, [])
        return x.id not in roots and x.id not in folded and bool(us) and all(u is reader for u in us)

    return only


def _factors(mm: Hop, folded: set[int]) -> tuple[Hop, Hop, tuple[bool, bool]]:
    """A product's operands as an instruction reads them: a transpose read in place by its input."""
    a, b = mm.inputs
    ta, tb = a.id in folded, b.id in folded
    return a.inputs[0] if ta else a, b.inputs[0] if tb else b, (ta, tb)


def _is_sum(h: Hop) -> bool:
    return h.kind == "agg_unary" and h.op == "sum" and len(h.inputs) == 1


# rows of U %*% V that a squared loss's instruction forms at once (kernels_linalg.k_wsloss): large enough
# for BLAS, small enough to stay in the cache's reach and to be no memory to plan for
SQUARED_LOSS_BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class SquaredLoss:
    """An unfused ``sum((X - U %*% V) ^ 2)`` (see :func:`squared_losses`)."""
    x: Hop
    u: Hop  # the product's operands, or the inputs of transposes it reads in place
    v: Hop
    transposed: tuple[bool, bool]  # (U read transposed, V read transposed)
    absorbed: tuple[int, ...]  # the product, the difference and its square: no instructions of their own


def squared_losses(order: list[Hop], users: dict[int, list[Hop]], dag: Dag, folded: set[int],
                   min_cells: int = 1 << 16) -> dict[int, SquaredLoss]:
    """``sum((X - U %*% V) ^ 2)`` or ``sum((U %*% V - X) ^ 2)`` (the square as ``D * D`` or ``D ^ 2``)
    over an X of the product's shape, known dims and at least ``min_cells`` cells, where nothing else
    reads the product, the difference or the square: one instruction each (SystemDS's wsloss without
    weights), keyed by the sum, which computes the product a block of rows at a time and never holds
    it whole (kernels_linalg.k_wsloss). Unfused, GNMF's loss over a 14000 x 7500 X holds an 840 MB
    product, which a hybrid plan with a small local budget sends to the cluster."""
    only = _sole_reader(users, dag, folded)

    out: dict[int, SquaredLoss] = {}
    for h in order:
        if not _is_sum(h):
            continue
        p = h.inputs[0]
        if p.kind != "binary" or len(p.inputs) != 2 or not only(p, h):
            continue
        d, e = p.inputs
        square = (p.op == "*" and d is e) or (p.op == "^" and e.kind == "literal" and e.value == 2
                                                and not isinstance(e.value, bool))
        if not square or d.kind != "binary" or d.op != "-" or len(d.inputs) != 2 or not only(d, p):
            continue
        for mm, x in (d.inputs, d.inputs[::-1]):
            if not (mm.kind == "matmult" and mm.op == "%*%" and len(mm.inputs) == 2 and only(mm, d)):
                continue
            if x.dt != "matrix" or x.id in folded or (x.rows, x.cols) != (mm.rows, mm.cols) or mm.rows < 0 \
                    or mm.cols < 0 or mm.rows * mm.cols < min_cells:
                continue
            out[h.id] = SquaredLoss(x, *_factors(mm, folded), (mm.id, d.id, p.id))
            break
    return out


# cell-wise operators a sampled sum applies to the product's values (one matrix operand each, the other
# a literal scalar for the binary ones)
SAMPLED_UNARY = frozenset({"exp", "log", "sqrt", "abs", "u-", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                           "cosh", "tanh", "sign", "round", "floor", "ceil"})
SAMPLED_BINARY = frozenset({"+", "-", "*", "/", "^"})
SAMPLED_MIN_CELLS = 1 << 16  # below this the product is cheap enough whole


@dataclass(frozen=True)
class SampledSum:
    """An unfused ``sum(X * g(U %*% V))`` (see :func:`sampled_sums`)."""
    x: Hop
    u: Hop  # the product's operands, or the inputs of transposes it reads in place
    v: Hop
    transposed: tuple[bool, bool]
    x_left: bool  # X the left operand of *
    chain: tuple[tuple[str, float | None, bool], ...]  # g, innermost first: (op, literal, literal on the left)
    absorbed: tuple[int, ...]


def sampled_sums(order: list[Hop], users: dict[int, list[Hop]], dag: Dag, folded: set[int],
                 min_cells: int = SAMPLED_MIN_CELLS) -> dict[int, SampledSum]:
    """``sum(X * g(U %*% V))`` (either side of ``*``) with g a chain of cell-wise operators on the
    product and literal scalars (``log(U %*% t(V) + 1e-15)``), X predicted CSR (known non-zeros) of
    the product's shape and at least ``min_cells`` cells, where nothing else reads the product, the
    chain or the ``*``: one instruction each (SystemDS's wcemm, generalized to any such g), keyed by
    the sum, which evaluates g only where X is not zero (kernels_linalg.k_sampled_sum). ``*`` is
    sparse-safe in lafuse as in SystemDS (a zero of X stays zero whatever g gives there), so those
    are the only cells the sum reads: the outer-product loss over a 3000 x 3000 X at 1% formed a
    9e6-cell product and its logarithm for 9e4 non-zeros."""
    only = _sole_reader(users, dag, folded)

    def literal(h: Hop) -> float | None:
        if h.kind != "literal" or isinstance(h.value, (bool, str)) or not isinstance(h.value, (int, float)):
            return None
        return float(h.value)

    out: dict[int, SampledSum] = {}
    for h in order:
        if not _is_sum(h):
            continue
        p = h.inputs[0]
        if p.kind != "binary" or p.op != "*" or len(p.inputs) != 2 or not only(p, h) or p.inputs[0] is p.inputs[1]:
            continue
        for x, g, x_left in ((p.inputs[0], p.inputs[1], True), (p.inputs[1], p.inputs[0], False)):
            if x.dt != "matrix" or x.id in folded or x.rows < 0 or x.cols < 0 or x.nnz < 0 \
                    or x.rows * x.cols < min_cells or default_format(x.rows, x.cols, x.nnz) != CSR:
                continue
            chain: list[tuple[str, float | None, bool]] = []
            absorbed = [p.id]
            node, reader = g, p
            while node.kind != "matmult" and only(node, reader):
                if node.kind == "unary" and node.op in SAMPLED_UNARY and len(node.inputs) == 1:
                    chain.append((node.op, None, False))
                    nxt = node.inputs[0]
                elif node.kind == "binary" and node.op in SAMPLED_BINARY and len(node.inputs) == 2:
                    a, b = node.inputs
                    if literal(b) is not None and a.dt == "matrix":
                        chain.append((node.op, literal(b), False))
                        nxt = a
                    elif literal(a) is not None and b.dt == "matrix":
                        chain.append((node.op, literal(a), True))
                        nxt = b
                    else:
                        break
                else:
                    break
                absorbed.append(node.id)
                node, reader = nxt, node
            mm = node
            if not (mm.kind == "matmult" and mm.op == "%*%" and len(mm.inputs) == 2 and only(mm, reader)
                    and (mm.rows, mm.cols) == (x.rows, x.cols)):
                continue
            out[h.id] = SampledSum(x, *_factors(mm, folded), x_left, tuple(reversed(chain)), (mm.id, *absorbed))
            break
    return out
