"""The memo table of partial fusion plans and the OFMC exploration (paper 000 sec. 3, Alg. 1).

A group per HOP holds memo entries ``(template, refs, closed)``: ``refs`` has one slot per HOP
input, the id of the input's group when the input is fused into this operator, or -1 when it is
read materialized. Only references are stored, never whole sub-plans, so the table stays linear
in the DAG size; the selectors expand plans by following references.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from lafuse.fusion.templates import BY_NAME, CLOSED_INVALID, CLOSED_VALID, OPEN, TEMPLATES, fused_input, solo
from lafuse.hops.hop import Hop, walk

MAX_ENTRIES_PER_GROUP = 64  # 2^|inputs| * |templates| is at most 24 for ternary operators
# operators one fused operator may cover: Numba's compile time grows faster than linearly with a
# kernel's length (measured: a cell-wise chain of 40 operators 4.3 s cold, 80 operators 9.8 s, 200
# about a minute, 4,000 ran out of 24 GB), so a longer region is cut into several fused operators
MAX_FUSED_OPS = 64


@dataclass(frozen=True)
class MemoEntry:
    template: str
    refs: tuple[int, ...]
    closed: bool = False

    @property
    def nrefs(self) -> int:
        return len(self.refs) - self.refs.count(-1)

    def __repr__(self) -> str:
        return f"{self.template[0].upper()}({','.join(map(str, self.refs))}){'c' if self.closed else ''}"


@dataclass
class MemoTable:
    groups: dict[int, list[MemoEntry]] = field(default_factory=dict)
    hops: dict[int, Hop] = field(default_factory=dict)
    consumers: dict[int, list[Hop]] = field(default_factory=dict)
    explored: int = 0  # HOPs visited
    created: int = 0  # entries created before pruning
    pruned: int = 0  # entries removed (closed invalid, closed without references, duplicates, dominated)
    ranked: dict = field(default_factory=dict)  # (hop id, templates, open only) -> entries, best first
    expanded: dict = field(default_factory=dict)  # construct.expand's results under the cuts they depend on
    # hop id -> operators of the largest fused region its entries cover (an upper bound: a shared
    # sub-expression counts once per path), which MAX_FUSED_OPS bounds
    sizes: dict[int, int] = field(default_factory=dict)

    def size(self, e: MemoEntry) -> int:
        return 1 + sum(self.sizes.get(r, 1) for r in e.refs if r >= 0)

    def entries(self, hid: int) -> list[MemoEntry]:
        return self.groups.get(hid, [])

    def has_open(self, hid: int, template: str) -> bool:
        return any(e.template == template and not e.closed for e in self.groups.get(hid, []))

    def templates_of(self, hid: int) -> set[str]:
        return {e.template for e in self.groups.get(hid, [])}

    def render(self) -> str:
        lines = []
        for hid, es in self.groups.items():
            h = self.hops[hid]
            lines.append(f"  ({hid}) {h.label()}: " + " ".join(map(repr, es)))
        return "\n".join(lines)


def _create_plans(memo: MemoTable, h: Hop, trigger: int | None, tname: str) -> list[MemoEntry]:
    """All entries of template ``tname`` at ``h``: each input slot is -1 or a reference to an
    input group with an open plan this template can fuse or merge; ``trigger`` (an input
    position) must be referenced."""
    t = BY_NAME[tname]
    options: list[list[int]] = []
    for k in range(len(h.inputs)):
        g = fused_input(h, k)
        ref_ok = g.id in memo.groups and (
            (memo.has_open(g.id, tname) and t.fuse(h, g))
            or any(not e.closed and e.template != tname for e in memo.groups[g.id]) and t.merge(h, g))
        if k == trigger:
            if not ref_ok:
                return []
            options.append([g.id])
        else:
            options.append([-1, g.id] if ref_ok else [-1])
    entries = (MemoEntry(tname, refs) for refs in itertools.product(*options))
    return [e for e in entries if memo.size(e) <= MAX_FUSED_OPS]


def explore(roots: list[Hop], dominance: bool = False, single: bool = False) -> MemoTable:
    """Populate a memo table bottom-up in one pass (Algorithm 1). ``dominance`` also prunes entries
    dominated by an entry with a superset of references to single-consumer inputs (only valid for
    the heuristics, which never prefer materializing such an input). ``single`` keeps a closed entry
    without references where the template's plan of that one operator is worth having
    (``templates.solo``)."""
    memo = MemoTable()
    order = walk(roots)
    for h in order:
        memo.hops[h.id] = h
        for i in h.inputs:
            memo.consumers.setdefault(i.id, []).append(h)
    for h in order:  # topological order = the recursion's post-order
        memo.explored += 1
        cands: list[MemoEntry] = []
        for t in TEMPLATES:
            if t.open(h):
                cands += _create_plans(memo, h, None, t.name)
        for k in range(len(h.inputs)):
            g = fused_input(h, k)
            for tname in sorted(memo.templates_of(g.id)):
                t = BY_NAME[tname]
                if memo.has_open(g.id, tname) and t.fuse(h, g):
                    cands += _create_plans(memo, h, k, tname)
        memo.created += len(cands)
        kept: list[MemoEntry] = []
        seen: set[tuple[str, tuple[int, ...]]] = set()
        for e in cands:
            status = BY_NAME[e.template].close(h)
            if status == CLOSED_INVALID or (status == CLOSED_VALID and e.nrefs == 0
                                            and not (single and solo(e.template, h))):
                continue
            key = (e.template, e.refs)
            if key in seen:
                continue
            seen.add(key)
            kept.append(MemoEntry(e.template, e.refs, status == CLOSED_VALID) if status != OPEN else e)
        if dominance:
            kept = _prune_dominated(memo, kept)
        kept = kept[:MAX_ENTRIES_PER_GROUP]
        memo.pruned += len(cands) - len(kept)
        if kept:
            memo.groups[h.id] = kept
            memo.sizes[h.id] = max(memo.size(e) for e in kept)
    return memo


def _prune_dominated(memo: MemoTable, entries: list[MemoEntry]) -> list[MemoEntry]:
    def single_use(e: MemoEntry) -> bool:
        return all(len(memo.consumers.get(r, [])) <= 1 for r in e.refs if r >= 0)

    out = []
    for e in entries:
        dominated = single_use(e) and any(
            o is not e and o.template == e.template and o.closed == e.closed and o.nrefs > e.nrefs
            and all(r < 0 or r == s for r, s in zip(e.refs, o.refs)) for o in entries)
        if not dominated:
            out.append(e)
    return out
