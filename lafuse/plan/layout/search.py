"""The searches of paper 002: brute force (Alg. 2), the tree DP (Alg. 3, Eq. 1) and the frontier DP
for DAGs (Alg. 4, Eq. 2). Each returns the optimal type-correct annotation (paper 002 §4.3) of the
problem's graph; the DPs in time linear in the number of vertices.

All three walk format assignments (each operation's output format) and read each vertex's local
table (graph.Problem.local), which already holds the best implementation, input formats and input
conversions for every (argument formats, output format): given all output formats, the cost of an
annotation is the sum of those entries. Brute force recomputes each entry from the catalogue
itself, so the tests that compare it with the DPs check the tables too.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from lafuse.plan.layout.graph import INF, Annotation, Problem

MAX_BRUTE_OPERATIONS = 64  # brute force's recursion is one level per operation (and its time exponential)
MAX_JOINT_CELLS = 1 << 24  # cells of one frontier step's joint table (P ** vertices): ~134 MB of float64


def optimize(pb: Problem, max_cells: int = MAX_JOINT_CELLS) -> Annotation:
    """The optimal annotation: the tree DP for a tree-shaped graph, else the frontier DP (a ValueError
    where a frontier step would join more than ``max_cells`` cells)."""
    return tree_dp(pb) if pb.graph.is_tree() else frontier_dp(pb, max_cells)


# ---------------------------------------------------------------- brute force (Alg. 2)
def brute_force(pb: Problem) -> Annotation:
    """Every output format of every operation, in topological order, with the cost so far as a bound
    (costs are not negative, so a partial annotation as dear as the best whole one is dropped).
    Exponential: for tests and tiny graphs."""
    g = pb.graph
    ops = g.operations()
    if len(ops) > MAX_BRUTE_OPERATIONS:
        raise ValueError(f"brute force is for tiny graphs: {len(ops)} operations (at most "
                         f"{MAX_BRUTE_OPERATIONS}); use optimize")
    fmt = pb.source_formats()
    memo: dict[tuple, float] = {}  # by the vertex's signature: the paper's graphs repeat one product
    sig = {v: (g.vertices[v].op, tuple(g.vertices[a].m for a in g.vertices[v].args), g.vertices[v].m,
               pb.banned.get(v, frozenset())) for v in ops}
    best: list = [INF, None]

    def entry(v: int, args: tuple[int, ...], rho: int) -> float:
        key = (sig[v], args, rho)
        got = memo.get(key)
        if got is None:
            got = memo[key] = _entry_from_catalogue(pb, v, args, rho)
        return got

    def walk(i: int, so_far: float) -> None:
        if so_far >= best[0]:
            return
        if i == len(ops):
            best[0], best[1] = so_far, dict(fmt)
            return
        v = ops[i]
        args = tuple(fmt[a] for a in g.vertices[v].args)
        for c, rho in sorted((entry(v, args, rho), rho) for rho in range(pb.P)):  # cheap first: a low bound early
            if c == INF:
                break
            fmt[v] = rho
            walk(i + 1, so_far + c)
        fmt.pop(v, None)

    walk(0, 0.0)
    return Annotation(INF) if best[1] is None else pb.annotate(best[1], best[0])


def _entry_from_catalogue(pb: Problem, v: int, args: tuple[int, ...], rho: int) -> float:
    """The local table's entry recomputed from the implementations and the conversion costs."""
    g, cat = pb.graph, pb.cat
    vx = g.vertices[v]
    ms = tuple(g.vertices[a].m for a in vx.args)
    convs = [pb.conversions(m).cost for m in ms]
    best = INF
    ban = pb.banned.get(v, frozenset())
    for impl in cat.impls:
        if impl.op != vx.op or impl.arity != len(ms) or impl.name in ban:
            continue
        for p_in in itertools.product(range(pb.P), repeat=len(ms)):
            names = tuple(pb.formats[p] for p in p_in)
            if not all(cat.holds(m, f) for m, f in zip(ms, names)):
                continue
            if impl.out(ms, names, vx.m) != pb.formats[rho] or not cat.holds(vx.m, pb.formats[rho]):
                continue
            c = float(impl.cost(ms, names, vx.m))
            if c < 0:
                raise ValueError(f"implementation {impl.name} costs {c} < 0 (costs are seconds)")
            best = min(best, c + sum(float(convs[j][a, p]) for j, (a, p) in enumerate(zip(args, p_in))))
    return best


# ---------------------------------------------------------------- tree DP (Alg. 3, Eq. 1)
def tree_dp(pb: Problem) -> Annotation:
    """F(v, rho) for every vertex in topological order: the least cost of the subtree of v with v
    yielding rho, the minimum over its arguments' formats of their F plus v's local entry."""
    g, P = pb.graph, pb.P
    if not g.is_tree():
        raise ValueError("the graph is not tree-shaped (a result is used more than once): use frontier_dp")
    F: dict[int, np.ndarray] = {}
    back: dict[int, np.ndarray] = {}
    for s, f in pb.source_formats().items():
        F[s] = np.full(P, INF)
        F[s][f] = 0.0
    for v in g.operations():
        args = g.vertices[v].args
        n = len(args)
        total = pb.local(v).best
        for j, a in enumerate(args):
            total = total + F[a].reshape((1,) * j + (P,) + (1,) * (n - j))
        flat = total.reshape(P ** n, P)
        back[v], F[v] = flat.argmin(axis=0), flat.min(axis=0)
    consumers = g.consumers()
    sinks = [v for v in g.operations() if not consumers[v]]
    cost = float(sum(F[v].min() for v in sinks))
    if cost == INF:
        return Annotation(INF)
    fmt = pb.source_formats()
    stack = [(v, int(F[v].argmin())) for v in sinks]
    while stack:
        v, rho = stack.pop()
        fmt[v] = rho
        args = g.vertices[v].args
        picked = np.unravel_index(int(back[v][rho]), (P,) * len(args)) if args else ()
        stack += [(a, int(p)) for a, p in zip(args, picked) if g.vertices[a].op != "source"]
    return pb.annotate(fmt, cost)


# ---------------------------------------------------------------- frontier DP (Alg. 4, Eq. 2)
@dataclass
class _Class:
    """An equivalence class along the frontier (paper 002 §6.1): vertices whose results are still to
    be used and that share ancestors, with the least cost of their joint history for every tuple of
    their formats (``table``, one axis per member)."""
    members: list[int]
    table: np.ndarray
    step: _Step | None  # how the class came to be (None: a source)


@dataclass
class _Step:
    v: int
    merged: list[_Class]  # the classes holding v's arguments, merged into this one
    joint: list[int]  # the joint table's axes: the merged classes' members in order, then v
    kept: list[int]  # positions in joint of the new class's members, in its order
    dropped: list[int]  # positions in joint minimized away (vertices no longer used)
    arg: np.ndarray  # for each entry of the new table, the dropped axes' formats (flat) that won


def frontier_dp(pb: Problem, max_cells: int = MAX_JOINT_CELLS) -> Annotation:
    """Move the frontier one vertex at a time (Alg. 4): merge the classes that hold the vertex's
    arguments, add the vertex's local entry (Eq. 2's first term and its conversions), and minimize
    away the vertices whose results have no use left. A class whose members all leave is closed: its
    least cost is final."""
    g, P = pb.graph, pb.P
    consumers = g.consumers()
    pending = [set(c) for c in consumers]
    where: dict[int, _Class] = {}
    for s, f in pb.source_formats().items():
        if consumers[s]:
            t = np.full(P, INF)
            t[f] = 0.0
            where[s] = _Class([s], t, None)
    closed: list[_Class] = []
    for v in g.operations():
        args = g.vertices[v].args
        merged: list[_Class] = []
        for a in args:
            c = where[a]
            if not any(c is m for m in merged):
                merged.append(c)
        joint = [m for c in merged for m in c.members] + [v]
        J = len(joint)
        if P ** J > max_cells:
            raise ValueError(f"the frontier at vertex {g.vertices[v].name or v} joins {J} results over {P} "
                             f"formats ({P ** J} cells): too entangled for the frontier DP")
        X: np.ndarray | float = 0.0
        off = 0
        for c in merged:
            k = len(c.members)
            X = X + c.table.reshape((1,) * off + (P,) * k + (1,) * (J - off - k))
            off += k
        X = X + _placed(pb.local(v).best, [joint.index(a) for a in args] + [J - 1], J, P)
        for a in set(args):
            pending[a].discard(v)
        kept = [i for i, u in enumerate(joint) if pending[u]]
        dropped = [i for i in range(J) if i not in kept]
        Xt = np.asarray(X).transpose(kept + dropped).reshape((P,) * len(kept) + (P ** len(dropped),))
        new = _Class([joint[i] for i in kept], Xt.min(axis=-1), None)
        new.step = _Step(v, merged, joint, kept, dropped, Xt.argmin(axis=-1))
        for c in merged:
            for m in c.members:
                where.pop(m, None)
        for m in new.members:
            where[m] = new
        if not new.members:
            closed.append(new)
    cost = float(sum(float(c.table) for c in closed))
    if cost == INF:
        return Annotation(INF)
    fmt = pb.source_formats()
    stack: list[tuple[_Class, tuple[int, ...]]] = [(c, ()) for c in closed]
    while stack:
        c, idx = stack.pop()
        st = c.step
        if st is None:
            continue
        full = [0] * len(st.joint)
        for pos, f in zip(st.kept, idx):
            full[pos] = f
        picked = np.unravel_index(int(st.arg[idx]), (P,) * len(st.dropped)) if st.dropped else ()
        for pos, dropped_fmt in zip(st.dropped, picked):
            full[pos] = int(dropped_fmt)
        fmt[st.v] = full[-1]
        off = 0
        for mc in st.merged:
            stack.append((mc, tuple(full[off:off + len(mc.members)])))
            off += len(mc.members)
    return pb.annotate(fmt, cost)


def _placed(local: np.ndarray, axes: list[int], J: int, P: int) -> np.ndarray:
    """``local`` (axes: the arguments in order, then rho) laid on the joint table's axes ``axes``
    (an argument read twice: the diagonal), broadcastable over the J joint axes."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    distinct = sorted(set(axes))
    sub_in = "".join(letters[distinct.index(x)] for x in axes)
    sub_out = "".join(letters[i] for i in range(len(distinct)))
    t = np.einsum(f"{sub_in}->{sub_out}", local) if len(distinct) < len(axes) else local
    if len(distinct) == len(axes):  # einsum left the axes in argument order: sort them to joint order
        t = t.transpose(np.argsort(axes))
    shape = [1] * J
    for x in distinct:
        shape[x] = P
    return t.reshape(shape)


# ---------------------------------------------------------------- explaining a choice
@dataclass
class Row:
    """One operation of an annotation as ``--explain formats`` would list it: its implementation, the
    formats and transformations of its inputs, its output format, its own estimated cost (the
    implementation and its input transformations), and the runner-up: the implementation the best plan
    without the chosen one gives this vertex, and that whole plan's extra cost (None: no other way)."""
    vertex: int
    name: str
    impl: str
    inputs: tuple[tuple[str, tuple[str, ...]], ...]  # (format the argument is in, transformations)
    out: str
    cost: float
    runner_up: tuple[str, float] | None


def explain(pb: Problem, ann: Annotation, runner_up: bool = True) -> list[Row]:
    """The rows of ``ann`` (a search's answer for ``pb``); the runner-up of each vertex costs one more
    search with its chosen implementation banned."""
    g = pb.graph
    fmt = pb.formats_of(ann)
    rows = []
    for v in g.operations():
        vx = g.vertices[v]
        ins = tuple((fmt[a], ann.transforms.get((v, j), ())) for j, a in enumerate(vx.args))
        cost = pb.vertex_cost(v, ann, fmt)
        alt = None
        if runner_up:
            banned = dict(pb.banned)
            banned[v] = banned.get(v, frozenset()) | {ann.impl[v]}
            other = optimize(Problem(g, pb.cat, banned, share=pb))
            if other.feasible:
                alt = (other.impl[v], other.cost - ann.cost)
        rows.append(Row(v, vx.name or str(v), ann.impl[v], ins, ann.fmt[v], cost, alt))
    return rows


def render(rows: list[Row]) -> str:
    """The rows as text, one operation a line."""
    out = []
    for r in rows:
        ins = ", ".join(f + "".join(f" ->{t}" for t in ts) for f, ts in r.inputs)
        alt = "no other implementation" if r.runner_up is None else \
            f"runner-up {r.runner_up[0]} (plan +{r.runner_up[1]:.4g} s)"
        out.append(f"{r.name}: {r.impl}({ins}) -> {r.out}  cost {r.cost:.4g} s; {alt}")
    return "\n".join(out)
