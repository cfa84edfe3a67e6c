"""FuseME's cuboid-based fusion plan generator, CFG (paper 004 §4): which operators of a HOP DAG one
distributed cuboid operator (lafuse.cost.cuboid) covers, several matrix multiplications included.

* Exploration (Alg. 2, :func:`explore`): grow a partial plan F from a seed product by its adjacent
  operators still in the workload. A termination operator (an output two or more distinct operators
  read, a materialization point; or a unary aggregation over more than one block, which needs a
  shuffle) joins only as F's top, a consumer of F, after which F stops growing upwards; a termination
  input stays out. Every operator looked at leaves the workload; repeat while a product is left in it.
* Exploitation (Alg. 3, :func:`exploit`): per candidate, the product with the largest I x J x K block
  space is the main one; the other products, farthest (edges within F) from it first, are split off
  with the operators that feed them inside F when the cuboid model costs the two parts less than F at
  their searched (P, Q, R); a part split off is refined in turn.

The model of a partial plan (:func:`model`): the main product's left-input operators are its L-space,
its right-input ones its R-space, the rest its O-space; a space holding products is the model of the
space around its own main product (the one whose output has the space's shape, else the largest),
nested. A matrix read from outside F is an input of the space that reads it; F's results read
outside it are the O-space's outputs. Sizes in bytes (worst case where non-zeros are unknown).

Why here and not in the runtime: what one operator covers is a fusion decision, made on the DAG before
it is lowered; the runtime only runs what the plan says (runtime.dask.fused_outer for the outer-product
operators; operators covering several products do not run yet).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from lafuse.cost import cuboid
from lafuse.hops.hop import MATRIX, Hop
from lafuse.hops.program import Dag
from lafuse.hops.sizes import value_bytes

KINDS = frozenset(("binary", "unary", "matmult", "reorg", "ternary", "nary", "agg_unary"))


@dataclass
class Partial:
    """A partial fusion plan: its operators (by HOP id), its main product, the choice the cuboid
    model makes for it, and the splits exploitation made (each: the product split off, F's cost
    before, the two parts' cost after)."""

    ops: dict[int, Hop]
    main: Hop
    choice: cuboid.Choice | None = None
    splits: list[tuple[Hop, float, float]] = field(default_factory=list)


def _is_op(h: Hop) -> bool:
    return h.kind in KINDS and (h.dt == MATRIX or any(i.dt == MATRIX for i in h.inputs))


def consumers(dag: Dag) -> dict[int, list[Hop]]:
    out: dict[int, list[Hop]] = {}
    for h in dag.hops():
        for i in h.inputs:
            out.setdefault(i.id, []).append(h)
    return out


def _blocks(n: int, bs: int) -> int:
    return max(1, -(-max(n, 0) // bs))


def space_size(h: Hop, bs: int) -> int:
    """I x J x K of a product in blocks."""
    a = h.inputs[0]
    return _blocks(h.rows, bs) * _blocks(h.cols, bs) * _blocks(a.cols, bs)


def is_termination(h: Hop, cons: dict[int, list[Hop]], bs: int) -> bool:
    # distinct readers: ``x * x`` (a rewritten ``x ^ 2``) reads x twice but is one operator
    if len({c.id for c in cons.get(h.id, ())}) >= 2:
        return True
    if h.kind == "agg_unary":
        x = h.inputs[0]
        return x.rows > bs or x.cols > bs
    return False


def explore(dag: Dag, bs: int) -> list[dict[int, Hop]]:
    """Alg. 2: the candidate partial plans of ``dag`` (operators by id), seeds largest product first."""
    cons = consumers(dag)
    work = {h.id: h for h in dag.hops() if _is_op(h)}
    out: list[dict[int, Hop]] = []
    while True:
        seeds = [h for h in work.values() if h.kind == "matmult"]
        if not seeds:
            return out
        vm = max(seeds, key=lambda h: (space_size(h, bs), -h.id))
        del work[vm.id]
        F = {vm.id: vm}
        top = False

        adj = _adjacent(F, top, work, cons)
        while adj:
            for v in adj:
                if not is_termination(v, cons, bs):
                    F[v.id] = v
                elif not top and any(u.id in F for u in v.inputs):  # an outgoing one: F's top
                    F[v.id] = v
                    top = True
            for v in adj:
                work.pop(v.id, None)
            adj = _adjacent(F, top, work, cons)
        out.append(F)


def _adjacent(F: dict[int, Hop], top: bool, work: dict[int, Hop], cons: dict[int, list[Hop]]) -> list[Hop]:
    """Operators next to F still in the workload: its inputs, and its consumers until F has a top."""
    found: dict[int, Hop] = {}
    for u in F.values():
        for c in u.inputs:
            if c.id in work:
                found[c.id] = c
        if not top:
            for p in cons.get(u.id, ()):
                if p.id in work:
                    found[p.id] = p
    return [found[k] for k in sorted(found)]


def _cells(h: Hop) -> float:
    if h.dt != MATRIX:
        return 1.0
    return float(h.nnz if h.nnz >= 0 else max(h.rows, 0) * max(h.cols, 0))


def _feeding(root: Hop, members: dict[int, Hop]) -> dict[int, Hop]:
    """``root`` (when a member) and the members it reads, transitively through members."""
    out: dict[int, Hop] = {}
    stack = [root]
    while stack:
        h = stack.pop()
        if h.id in members and h.id not in out:
            out[h.id] = h
            stack.extend(h.inputs)
    return out


def model(F: dict[int, Hop], main: Hop, bs: int, cons: dict[int, list[Hop]] | None = None,
          flowing: frozenset[int] = frozenset()) -> cuboid.Model:
    """The cuboid model of partial plan ``F`` around its product ``main`` (module docstring);
    ``cons``: the DAG's consumers (F's outputs are the members read outside F; None: a nested
    space, whose product flows into its parent), ``flowing``: products whose values flow in."""
    a, b = main.inputs[0], main.inputs[1]
    left, right = _feeding(a, F), _feeding(b, F)
    rest = {k: h for k, h in F.items() if k not in left and k not in right and k != main.id}
    flow = flowing | {main.id}

    def space(members: dict[int, Hop], plane: tuple[int, int], operand: Hop | None,
              outputs: tuple[float, ...] = ()) -> cuboid.Space:
        nested = None
        products = [u for u in members.values() if u.kind == "matmult"]
        if products:  # the product shaped as the plane (else the largest) and what it covers: nested
            shaped = [u for u in products if (u.rows, u.cols) == plane]
            inner = max(shaped or products, key=lambda u: (space_size(u, bs), -u.id))
            covered = nested_ids(members, inner)
            nested = model({k: members[k] for k in covered}, inner, bs, None, flow)
            members = {k: u for k, u in members.items() if k not in covered}
        inputs: dict[int, Hop] = {}
        if operand is not None and operand.id not in F:
            inputs[operand.id] = operand
        for u in members.values():
            for c in u.inputs:
                if c.id not in F and c.id not in flow and c.dt == MATRIX:
                    inputs[c.id] = c
        return cuboid.Space(inputs=tuple(value_bytes(c) for c in inputs.values()), outputs=outputs,
                            ops=sum(_cells(u) for u in members.values()), nested=nested)

    results: tuple[float, ...] = ()
    if cons is not None:  # F's results read outside it: materialized in the O-space
        results = tuple(value_bytes(u) for u in F.values() if any(p.id not in F for p in cons.get(u.id, ())))
    k = max(a.cols, 0)
    sparse = min(_cells(a) / max(1.0, float(max(a.rows, 0) * k)), _cells(b) / max(1.0, float(k * max(b.cols, 0))))
    return cuboid.Model(I=_blocks(main.rows, bs), J=_blocks(main.cols, bs), K=_blocks(k, bs),
                        L=space(left, (max(a.rows, 0), k), a if a.id not in F else None),
                        R=space(right, (k, max(b.cols, 0)), b if b.id not in F else None),
                        O=space(rest, (max(main.rows, 0), max(main.cols, 0)), None, results),
                        mm_ops=2.0 * max(main.rows, 0) * max(main.cols, 0) * k * min(1.0, sparse),
                        mm_out=value_bytes(main))


def nested_ids(members: dict[int, Hop], inner: Hop) -> set[int]:
    """The members a nested product's model covers: those that feed it and those that read it (and
    what those read, inside the space): the nested model's own L-, R- and O-spaces."""
    covered = set(_feeding(inner, members))
    grew = True
    while grew:
        grew = False
        for k, u in members.items():
            if k not in covered and any(i.id in covered for i in u.inputs):
                covered |= set(_feeding(u, members))
                grew = True
    return covered


def _distance(F: dict[int, Hop], src: Hop) -> dict[int, int]:
    """Edges between ``src`` and each member of F, within F, in either direction."""
    nbr: dict[int, set[int]] = {k: set() for k in F}
    for k, u in F.items():
        for i in u.inputs:
            if i.id in F:
                nbr[k].add(i.id)
                nbr[i.id].add(k)
    dist = {src.id: 0}
    q = deque([src.id])
    while q:
        k = q.popleft()
        for n in nbr[k]:
            if n not in dist:
                dist[n] = dist[k] + 1
                q.append(n)
    return dist


def _cost(F: dict[int, Hop], main: Hop, bs: int, cons: dict[int, list[Hop]],
          cl: cuboid.Cluster) -> cuboid.Choice:
    return cuboid.search(model(F, main, bs, cons), cl)


def exploit(F: dict[int, Hop], cons: dict[int, list[Hop]], bs: int, cl: cuboid.Cluster) -> list[Partial]:
    """Alg. 3: ``F`` refined into partial plans, each with its main product and chosen (P, Q, R)."""
    todo = [dict(F)]
    out: list[Partial] = []
    while todo:
        cur = todo.pop(0)
        products = [h for h in cur.values() if h.kind == "matmult"]
        if not products:
            continue
        vm = max(products, key=lambda h: (space_size(h, bs), -h.id))
        part = Partial(cur, vm, _cost(cur, vm, bs, cons, cl))
        dist = _distance(cur, vm)
        for vi in sorted((h for h in products if h is not vm), key=lambda h: (-dist.get(h.id, -1), h.id)):
            if vi.id not in part.ops:
                continue
            fi = _feeding(vi, part.ops)
            if vm.id in fi:
                continue
            fm = {k: h for k, h in part.ops.items() if k not in fi}
            cm, ci = _cost(fm, vm, bs, cons, cl), _cost(fi, vi, bs, cons, cl)
            assert part.choice is not None
            if part.choice.cost > cm.cost + ci.cost:
                part.splits.append((vi, part.choice.cost, cm.cost + ci.cost))
                part.ops, part.choice = fm, cm
                todo.append(fi)
        out.append(part)
    return out


def plan(dag: Dag, bs: int, cl: cuboid.Cluster) -> list[Partial]:
    """CFG's partial plans for ``dag``: exploration, then exploitation of every candidate."""
    cons = consumers(dag)
    return [p for F in explore(dag, bs) for p in exploit(F, cons, bs, cl)]
