"""The format-choice problem of paper 002 §3-4: a compute graph, a catalogue of formats,
implementations and transformations, and the tables every search reads.

Two tables make the searches cheap and keep them honest with each other:

* the *conversion* table of a matrix type: the least cost of turning format a into format b by a
  chain of transformations (Floyd-Warshall over the catalogue's single steps; paper 002 labels each
  edge with one transformation, a chain of them is one composite transformation here), and the chain;
* the *local* table of a vertex: for each tuple of formats its arguments arrive in and each output
  format rho, the least cost of running the vertex so that it yields rho — over the implementations
  of its operation and the input formats they take, plus converting each argument to that input
  format (the bracketed terms of Eq. 1 and Eq. 2 that depend only on the vertex and its arguments).

Given every vertex's output format, the cost of an annotation is the sum of the vertices' local
entries; the searches differ only in how they walk the format assignments.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

INF = math.inf


@dataclass(frozen=True)
class MType:
    """A matrix type (paper 002 §3: dimensions; here also the non-zeros costs read, -1 unknown)."""
    rows: int
    cols: int
    nnz: int = -1

    @property
    def cells(self) -> int:
        return self.rows * self.cols

    @property
    def sparsity(self) -> float:
        return 1.0 if self.nnz < 0 or self.cells == 0 else self.nnz / self.cells


@dataclass(frozen=True)
class Vertex:
    """A source (``op == "source"``, its stored format ``fmt`` given) or an operation over earlier
    vertices (``args``, in argument order; one vertex may be an argument twice)."""
    op: str
    m: MType
    args: tuple[int, ...] = ()
    fmt: str | None = None
    name: str = ""


SOURCE = "source"


@dataclass
class Graph:
    """A compute graph (paper 002 §4.1), built in topological order: arguments before their users."""
    vertices: list[Vertex] = field(default_factory=list)

    def source(self, m: MType, fmt: str, name: str = "") -> int:
        self.vertices.append(Vertex(SOURCE, m, (), fmt, name))
        return len(self.vertices) - 1

    def add(self, op: str, m: MType, *args: int, name: str = "") -> int:
        n = len(self.vertices)
        if any(not 0 <= a < n for a in args):
            raise ValueError(f"vertex {name or op} reads a vertex not yet in the graph: {args}")
        self.vertices.append(Vertex(op, m, tuple(args), None, name))
        return n

    def consumers(self) -> list[list[int]]:
        """Each vertex's out-edges, as the consuming vertex once per edge."""
        out: list[list[int]] = [[] for _ in self.vertices]
        for i, v in enumerate(self.vertices):
            for a in v.args:
                out[a].append(i)
        return out

    def is_tree(self) -> bool:
        """Every vertex has at most one out-edge (paper 002 §5.1), so no result is shared."""
        return all(len(c) <= 1 for c in self.consumers())

    def operations(self) -> list[int]:
        return [i for i, v in enumerate(self.vertices) if v.op != SOURCE]


TypeSpec = Callable[[tuple[MType, ...], tuple[str, ...], MType], "str | None"]
CostFn = Callable[[tuple[MType, ...], tuple[str, ...], MType], float]


@dataclass(frozen=True)
class Impl:
    """An atomic computation implementation: ``out(input types, input formats, output type)`` is its
    type-specification function (the format it yields, or None where it cannot run), ``cost`` the
    seconds it takes there."""
    name: str
    op: str
    arity: int
    out: TypeSpec
    cost: CostFn


@dataclass(frozen=True)
class Transform:
    """A physical matrix transformation: ``out(type, format)`` the format it yields (None: cannot),
    ``cost(type, format)`` its seconds."""
    name: str
    out: Callable[[MType, str], str | None]
    cost: Callable[[MType, str], float]


def _holds_any(m: MType, fmt: str) -> bool:
    return True


@dataclass(frozen=True)
class Catalogue:
    """What the searches may choose from; ``holds(type, format)`` is a format's type-specification
    function (whether the format can store a matrix of that type, e.g. one block within a worker's
    memory)."""
    formats: tuple[str, ...]
    impls: tuple[Impl, ...]
    transforms: tuple[Transform, ...]
    holds: Callable[[MType, str], bool] = _holds_any


@dataclass
class Annotation:
    """A search's answer (paper 002 §4.2): each operation's implementation and output format, and the
    transformations on each input edge, keyed (vertex, argument position), in order; ``cost`` its
    total (Cost(G')), infinite when no type-correct annotation exists."""
    cost: float
    impl: dict[int, str] = field(default_factory=dict)
    fmt: dict[int, str] = field(default_factory=dict)
    transforms: dict[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.cost < INF


@dataclass
class Conversions:
    """Least costs between a matrix type's formats (``cost[a, b]``, 0 on the diagonal) and the chains."""
    cost: np.ndarray
    nxt: np.ndarray  # next format on the cheapest chain from a to b (-1: none)
    step: dict[tuple[int, int], str]  # the transformation of each single step used

    def chain(self, a: int, b: int) -> tuple[str, ...]:
        out: list[str] = []
        while a != b:
            n = int(self.nxt[a, b])
            if n < 0:
                raise ValueError(f"no chain of transformations from format {a} to {b}")
            out.append(self.step[(a, n)])
            a = n
        return tuple(out)


@dataclass
class Local:
    """A vertex's local table: ``best[a_1, ..., a_n, rho]`` and the choice behind each entry, coded as
    implementation index * P**n + the flat index of the input formats (-1: none)."""
    best: np.ndarray
    choice: np.ndarray


class Problem:
    """A graph and a catalogue, with the conversion and local tables (computed once per matrix type and
    per distinct vertex signature: the paper's graphs repeat one type)."""

    def __init__(self, graph: Graph, cat: Catalogue, banned: dict[int, frozenset[str]] | None = None,
                 share: Problem | None = None):
        """``banned``: implementations a vertex may not use (a runner-up is the best plan without the
        chosen one); ``share``: a problem over the same catalogue whose tables this one may reuse (a
        local table's key holds the vertex's bans)."""
        self.graph, self.cat = graph, cat
        self.banned = banned or {}
        self.formats = cat.formats
        self.index = {f: i for i, f in enumerate(cat.formats)}
        self.P = len(cat.formats)
        for i, v in enumerate(graph.vertices):
            if v.op == SOURCE and v.fmt not in self.index:
                raise ValueError(f"source {v.name or i} is stored as {v.fmt!r}, not a format of the catalogue")
        if share is not None and share.cat is not cat:
            raise ValueError("a problem shares tables only with one over the same catalogue")
        self._conv: dict[MType, Conversions] = share._conv if share is not None else {}
        self._local: dict[tuple, Local] = share._local if share is not None else {}

    # ------------------------------------------------------------ conversions
    def conversions(self, m: MType) -> Conversions:
        got = self._conv.get(m)
        if got is None:
            got = self._conv[m] = self._closure(m)
        return got

    def _closure(self, m: MType) -> Conversions:
        P, fmts, cat = self.P, self.formats, self.cat
        cost = np.full((P, P), INF)
        nxt = np.full((P, P), -1, dtype=np.int64)
        step: dict[tuple[int, int], str] = {}
        ok = [cat.holds(m, f) for f in fmts]  # a chain may start in any format (a source's is given)
        for a in range(P):
            cost[a, a], nxt[a, a] = 0.0, a
            for t in cat.transforms:
                out = t.out(m, fmts[a])
                b = self.index.get(out) if out is not None else None
                if b is None or b == a or not ok[b]:
                    continue
                c = float(t.cost(m, fmts[a]))
                if c < cost[a, b]:
                    cost[a, b], nxt[a, b], step[(a, b)] = c, b, t.name
        for k in range(P):  # Floyd-Warshall: chains of transformations
            via = cost[:, k:k + 1] + cost[k:k + 1, :]
            better = via < cost
            if better.any():
                cost = np.where(better, via, cost)
                nxt = np.where(better, nxt[:, k:k + 1], nxt)
        return Conversions(cost, nxt, step)

    # ------------------------------------------------------------ local tables
    def local(self, v: int) -> Local:
        vx = self.graph.vertices[v]
        ms = tuple(self.graph.vertices[a].m for a in vx.args)
        ban = self.banned.get(v, frozenset())
        key = (vx.op, ms, vx.m, ban)
        got = self._local.get(key)
        if got is None:
            got = self._local[key] = self._local_table(vx.op, ms, vx.m, ban)
        return got

    def _local_table(self, op: str, ms: tuple[MType, ...], m: MType, ban: frozenset[str] = frozenset()) -> Local:
        P, n, fmts, cat = self.P, len(ms), self.formats, self.cat
        best = np.full((P,) * n + (P,), INF)
        choice = np.full((P,) * n + (P,), -1, dtype=np.int64)
        convs = [self.conversions(mj).cost for mj in ms]
        holds_in = [[cat.holds(mj, f) for f in fmts] for mj in ms]
        holds_out = {f: cat.holds(m, f) for f in fmts}
        for k, impl in enumerate(cat.impls):
            if impl.op != op or impl.arity != n or impl.name in ban:
                continue
            for flat, p_in in enumerate(itertools.product(range(P), repeat=n)):
                if not all(holds_in[j][p] for j, p in enumerate(p_in)):
                    continue
                names = tuple(fmts[p] for p in p_in)
                out = impl.out(ms, names, m)
                rho = self.index.get(out) if out is not None else None
                if rho is None or not holds_out[out]:  # type: ignore[index]
                    continue
                total: np.ndarray | float = float(impl.cost(ms, names, m))
                for j, p in enumerate(p_in):  # + converting argument j from each format to p
                    total = total + convs[j][:, p].reshape((1,) * j + (P,) + (1,) * (n - j - 1))
                total = np.broadcast_to(total, (P,) * n)
                cur = best[..., rho]
                better = total < cur
                if np.any(better):
                    best[..., rho] = np.where(better, total, cur)
                    choice[..., rho] = np.where(better, k * P ** n + flat, choice[..., rho])
        return Local(best, choice)

    def decode(self, v: int, arg_fmts: tuple[int, ...], rho: int) -> tuple[str, tuple[int, ...]]:
        """The implementation and input formats behind ``local(v)`` at (arg_fmts, rho)."""
        code = int(self.local(v).choice[arg_fmts + (rho,)])
        if code < 0:
            raise ValueError(f"vertex {v} cannot yield {self.formats[rho]} from {arg_fmts}")
        n = len(arg_fmts)
        k, flat = divmod(code, self.P ** n) if n else (code, 0)
        p_in = tuple(int(x) for x in np.unravel_index(flat, (self.P,) * n)) if n else ()
        return self.cat.impls[k].name, p_in

    def annotate(self, fmt: dict[int, int], cost: float) -> Annotation:
        """The annotation of a format assignment (every vertex's output format index; sources their
        given one): each operation's implementation and its input edges' transformation chains."""
        ann = Annotation(cost)
        for v in self.graph.operations():
            vx = self.graph.vertices[v]
            args = tuple(fmt[a] for a in vx.args)
            name, p_in = self.decode(v, args, fmt[v])
            ann.impl[v], ann.fmt[v] = name, self.formats[fmt[v]]
            for j, (a, p) in enumerate(zip(vx.args, p_in)):
                ann.transforms[(v, j)] = self.conversions(self.graph.vertices[a].m).chain(fmt[a], p)
        return ann

    def evaluate(self, ann: Annotation) -> float:
        """Cost(G') of an annotation computed from the catalogue alone (paper 002 Alg. 1 summed). A
        ValueError names the first place it is not type-correct."""
        fmt = self.formats_of(ann)
        return sum(self.vertex_cost(v, ann, fmt) for v in self.graph.operations())

    def formats_of(self, ann: Annotation) -> dict[int, str]:
        """Every vertex's output format under ``ann`` (sources: their stored one)."""
        fmt = {i: str(v.fmt) for i, v in enumerate(self.graph.vertices) if v.op == SOURCE}
        fmt.update(ann.fmt)
        return fmt

    def vertex_cost(self, v: int, ann: Annotation, fmt: dict[int, str]) -> float:
        """Vertex v's own cost under ``ann`` (paper 002 Alg. 1): its input edges' transformations
        applied in turn to its arguments' formats ``fmt``, then its implementation's type-specification
        and cost at the formats that reach it; a ValueError where that is not type-correct."""
        g, cat = self.graph, self.cat
        steps = {t.name: t for t in cat.transforms}
        vx = g.vertices[v]
        total, names = 0.0, []
        for j, a in enumerate(vx.args):
            f, m = fmt[a], g.vertices[a].m
            for t in ann.transforms.get((v, j), ()):
                nf = steps[t].out(m, f)
                if nf is None or not cat.holds(m, nf):
                    raise ValueError(f"vertex {v} input {j}: {t} cannot transform {f}")
                total += float(steps[t].cost(m, f))
                f = nf
            names.append(f)
        impl = next(i for i in cat.impls if i.name == ann.impl[v])
        ms = tuple(g.vertices[a].m for a in vx.args)
        got = impl.out(ms, tuple(names), vx.m)
        if impl.op != vx.op or got is None or got != ann.fmt[v] or not cat.holds(vx.m, got):
            raise ValueError(f"vertex {v}: {impl.name} on {names} does not yield {ann.fmt[v]}")
        return total + float(impl.cost(ms, tuple(names), vx.m))

    def source_formats(self) -> dict[int, int]:
        return {i: self.index[v.fmt] for i, v in enumerate(self.graph.vertices)  # type: ignore[index]
                if v.op == SOURCE}
