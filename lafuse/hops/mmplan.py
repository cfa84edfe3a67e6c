"""A distributed fused operator that covers several operators around a matrix multiplication, as
data (paper 004 §4: one partial plan of FuseME's plan generator, fusion.cfg; built by fusion.fuseme,
run by runtime.dask.fused_mm).

The operator's nodes are the DAG's operators it covers, in order, each reading other nodes or the
operator's inputs. One product is the main one (``M = A %*% B``). The nodes that feed A are the
L-space, those that feed B the R-space, and the rest the O-space. The O-space's nodes either depend
on M or not: a nested product such as GNMF's ``G %*% U`` does not.

Why regions: a cuboid (p, q, r) of the I x J x K product space needs A's block rows of group p and
block columns of group r, B's of (r, q), and the O-space's values at M's piece (p, q). :func:`need`
says which block range of every input that takes, walking the nodes from the value asked for down to
the inputs. :func:`upward` walks from M's piece up to the top for the nodes that depend on M.
Regions are block ranges ``(i0, i1, j0, j1)``; a vector broadcast along a dimension takes its one
block there.

What fits (checked by :func:`check`, so what the runtime is handed always runs):

* cell-wise unary and binary operators, with vectors and scalars broadcasting;
* transposes;
* products nested in a space, on values that do not depend on M;
* sum, rowSums and colSums, on M's values only as the top, where the pieces' partial results are
  added.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from lafuse.hops.hop import MATRIX

Region = tuple[int, int, int, int]  # block rows i0:i1, block columns j0:j1
SCALAR_REGION: Region = (0, 1, 0, 1)  # a scalar's (it is taken whole)

CELLWISE_KINDS = frozenset(("binary", "unary"))
AGGREGATES = {"sum": "full", "rowSums": "row", "colSums": "col"}  # -> how pieces combine
NO_AGG = "none"


@dataclass(frozen=True)
class Node:
    """One covered operator: ``args`` are nodes (>= 0) or the operator's inputs (-1 - position)."""

    op: str
    kind: str
    args: tuple[int, ...]
    rows: int
    cols: int
    dt: str = MATRIX
    slots: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MMPlan:
    """The nodes, the main product's index, the spaces (node indexes), the top node and the inputs'
    dims and data types. ``agg``: how the pieces' results of the top combine (NO_AGG: each is the
    top's block range at its piece; ``full``, ``row``, ``col``: partial aggregates added)."""

    nodes: tuple[Node, ...]
    main: int
    left: frozenset[int]
    right: frozenset[int]
    rest: frozenset[int]
    out: int
    inputs: tuple[tuple[int, int, str], ...]
    agg: str = NO_AGG

    def dims(self, ref: int) -> tuple[int, int, str]:
        if ref >= 0:
            n = self.nodes[ref]
            return n.rows, n.cols, n.dt
        return self.inputs[-1 - ref]

    @functools.cached_property
    def dependents(self) -> frozenset[int]:
        """The O-space nodes that read M, directly or through others (derived once per plan: every
        block row of a task asks)."""
        out = {self.main}
        for k in sorted(self.rest):
            if any(a in out for a in self.nodes[k].args):
                out.add(k)
        out.discard(self.main)
        return frozenset(out)

    def describe(self) -> str:
        """``{t(V)%*%X; *, /, %*%}``: the main product and the other operators (``--explain``)."""
        def name(ref: int) -> str:
            if ref < 0:
                return f"in{-1 - ref}"
            n = self.nodes[ref]
            return f"t({name(n.args[0])})" if n.op == "t" else f"[{n.rows}x{n.cols}]"

        m = self.nodes[self.main]
        others = ", ".join(self.nodes[k].op for k in range(len(self.nodes)) if k != self.main)
        return f"{{{name(m.args[0])}%*%{name(m.args[1])}; {others}}}"


def blocks(n: int, bs: int) -> int:
    return max(1, -(-max(n, 0) // bs))


def whole(dims: tuple[int, int, str], bs: int) -> Region:
    return 0, blocks(dims[0], bs), 0, blocks(dims[1], bs)


def _union(a: Region | None, b: Region) -> Region:
    if a is None:
        return b
    return min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3])


def _arg_region(node: Node, arg: tuple[int, int, str], reg: Region) -> Region:
    """The region of a cell-wise operator's matrix argument at the node's region ``reg``."""
    r, c, _ = arg
    if (r, c) == (node.rows, node.cols):
        return reg
    if r == 1 and c == 1:
        return 0, 1, 0, 1
    if r == 1:
        return 0, 1, reg[2], reg[3]
    return reg[0], reg[1], 0, 1


def arg_region(plan: MMPlan, k: int, pos: int, reg: Region, bs: int) -> Region:
    """The region of node ``k``'s argument ``pos`` that its region ``reg`` takes."""
    n = plan.nodes[k]
    dims = plan.dims(n.args[pos])
    if dims[2] != MATRIX:
        return SCALAR_REGION
    if n.kind == "matmult":
        inner = blocks(plan.dims(n.args[0])[1], bs)
        return (reg[0], reg[1], 0, inner) if pos == 0 else (0, inner, reg[2], reg[3])
    if n.op == "t":
        return reg[2], reg[3], reg[0], reg[1]
    if n.op in AGGREGATES:
        full = whole(dims, bs)
        return {"full": full, "row": (reg[0], reg[1], 0, full[3]), "col": (0, full[1], reg[2], reg[3])}[AGGREGATES[n.op]]
    return _arg_region(n, dims, reg)


def need(plan: MMPlan, targets: dict[int, Region], members: frozenset[int] | set[int], bs: int
         ) -> dict[int, Region]:
    """Every value's region (nodes and inputs, by reference) that computing ``targets`` (node or
    input -> region, taken as given) takes, through the nodes of ``members``."""
    got: dict[int, Region] = dict(targets)
    for k in sorted(members, reverse=True):  # (a node's arguments come before it)
        if k not in got:
            continue
        for pos, a in enumerate(plan.nodes[k].args):
            if a not in targets:
                got[a] = _union(got.get(a), arg_region(plan, k, pos, got[k], bs))
    return got


def cuboid_regions(plan: MMPlan, bs: int, rows: tuple[int, int], cols: tuple[int, int],
                   inner: tuple[int, int]) -> tuple[dict[int, Region], dict[int, Region]]:
    """The regions of the L- and R-spaces' values that cuboid (rows, cols, inner) of the main
    product's block space takes: A's piece rows x inner, B's inner x cols."""
    a, b = plan.nodes[plan.main].args
    return (need(plan, {a: (*rows, *inner)}, plan.left, bs),
            need(plan, {b: (*inner, *cols)}, plan.right, bs))


def rest_regions(plan: MMPlan, bs: int, rows: tuple[int, int], cols: tuple[int, int]) -> dict[int, Region]:
    """The regions of the O-space's values at the main product's piece rows x cols (the main
    product's and the nodes that read it fixed by :func:`upward`)."""
    return need(plan, upward(plan, (*rows, *cols)), plan.rest, bs)


def upward(plan: MMPlan, piece: Region) -> dict[int, Region]:
    """The region of every node that depends on M at M's piece ``piece`` (the top's included)."""
    dep = plan.dependents
    got = {plan.main: piece}
    for k in sorted(dep):
        n = plan.nodes[k]
        src = next(got[a] for a in n.args if a in got)
        if n.op == "t":
            got[k] = src[2], src[3], src[0], src[1]
        elif n.op in AGGREGATES:
            got[k] = {"full": (0, 1, 0, 1), "row": (src[0], src[1], 0, 1),
                      "col": (0, 1, src[2], src[3])}[AGGREGATES[n.op]]
        else:
            got[k] = src
    return got


def check(plan: MMPlan) -> str | None:
    """Why the runtime could not run ``plan`` (None: it can; module docstring)."""
    dep = plan.dependents
    for k, n in enumerate(plan.nodes):
        if n.kind == "matmult":
            if k != plan.main and any(a in dep or a == plan.main for a in n.args):
                return "a product reads the main product's values (its whole inner dimension)"
        elif n.op == "t":
            pass
        elif n.op in AGGREGATES:
            if k in dep and k != plan.out:
                return f"{n.op} of the main product's values is not the operator's result"
        elif n.kind not in CELLWISE_KINDS:
            return f"'{n.op}' ({n.kind})"
        if n.dt == MATRIX and k in dep and n.op not in AGGREGATES and n.op != "t":
            src = [plan.dims(a) for a in n.args if a in dep or a == plan.main]
            if any((r, c) != (n.rows, n.cols) for r, c, _ in src):
                return f"'{n.op}' broadcasts the main product's values"
    if plan.out not in dep:
        return "the result does not read the main product"
    return None
