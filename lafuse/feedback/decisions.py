"""Cost-based fusion decisions of earlier runs, reused where nothing they rest on has changed.

Why: the cost-based optimizer (paper 000 §4-5: exploration, plan enumeration, then the decision
whether a kernel pays for its compile or load) takes 5-10 ms per DAG of a loop body, and a script
whose every DAG stays unfused decides the same again at every run. In a mini-batch loop of small
blocks that was a fifth of the algorithm: AutoEncoder 2e4 x 100 ran in 0.131 s under the cost policy
(median of 10 alternating runs), 0.105 s with the optimizer answering "unfused" at once, 0.102 s
without codegen. Reusing the decision takes a key and one lookup.

What a decision rests on, all of it in its key (a change of any part means deciding again):

- the DAG: every HOP's kind, operator, types, dimensions, non-zeros, name, value, parameters,
  place in the script (the run feedback keys candidates by it) and inputs by position, and the roots;
- how often its block is expected to run, and the non-zeros of the variables it reads;
- the configuration, but for the fields that only change what is printed;
- the hardware profile: its file (a profile given to the optimizer directly: its rates and source);
- the process state the compile penalty reads: the code generator imported, scipy's BLAS imported
  (decisions are reused only before the process has loaded a kernel, when nothing else has changed);
- the run feedback (observed block executions and savings, feedback.observed), the plan cache's
  kernel files (a kernel compiled or evicted since), and lafuse's own source files (sizes,
  modification times).

Decisions that left a kernel to a background compile are not kept (the next run, with the kernel
cached, decides again). An unfused decision is replayed without the optimizer (the DAG as it is, with
what the optimizer reports beside it: the candidates the run feedback counts, their per-execution
savings, which of them call BLAS, how many operators a compile would not pay for); a fused one by
its materialization cuts, applied to a new exploration of the same DAG (exploration and the plan
construction only: no plan enumeration, no compile decision). Decisions are read from the file
once per process; those a process makes are saved when the run ends (``lafuse run``) and reused by
later processes only: within one process each DAG is decided once anyway. File ``decisions.json``
next to the plan cache, the newest ``MAX_ENTRIES`` kept, replaced atomically; a corrupt one (not a
JSON object, or an entry that is not a decision, found when it is looked up or when the run's save
keeps it) is deleted with one warning (observed.discard). Config ``fusion_reuse`` (``LAFUSE_FUSION_REUSE=0``)
turns reuse off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lafuse import cachedir
from lafuse.config import profile_path
from lafuse.feedback import observed

FILE = "decisions.json"
MAX_ENTRIES = 1024  # ~220 bytes each in the file, read once by a process that optimizes
# configuration fields that change only what a run prints, not what the optimizer decides
OUTPUT_ONLY = frozenset({"stats", "stats_top", "explain", "debug", "check_metadata"})


@dataclass(frozen=True)
class Decision:
    """An outcome of the cost-based optimizer, as far as a later run needs it to rebuild it."""

    candidates: tuple[str, ...]  # fusion.optimizer.observed_key of every candidate weighed (Dag.candidates)
    savings: tuple[tuple[str, float], ...]  # s per execution the optimizer expected of each (observed.SAVINGS)
    blas: tuple[str, ...]  # candidates whose kernel calls BLAS (observed.BLAS)
    unfused: int  # operators left unfused because compiling would not pay (FusionStats)
    observed: int  # of the decisions, those weighed by observed executions (FusionStats)
    # the materialization cuts of a plan with fused operators, (HOP, input group) by position in the
    # DAG's topological order; None: nothing fused
    cuts: tuple[tuple[int, int], ...] | None = None
    prestart: tuple[str, ...] = ()  # kernels kept only on a background start (fusion.ON_PRESTART)
    start_shared: int = 0  # kernels kept because they share Numba's start (FusionStats)
    # the source of the hardware profile decided on (HardwareProfile.source, fusion.DECIDED_ON): a replay
    # keys on the profile's file, not its rates, and does not load it
    profile: str = "default"
    # the multi-aggregates chosen (fusion.magg.positions): each one's aggregates by position in the order
    maggs: tuple[tuple[int, ...], ...] = ()


_loaded: dict[str, dict[str, Any]] = {}  # the file's entries, as JSON (_entries)
_new: dict[str, Decision] = {}  # this process's decisions, saved at the end of the run
_digests: dict[str, str] = {}  # per-process parts of the key (feedback, kernels, profile), computed once


def _path() -> Path:
    return observed.cache_path(FILE)


def _object(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    return raw


def _parse(raw: Any) -> dict[str, Decision]:
    return {str(k): _decision(k, v) for k, v in _object(raw).items()}


def _decision(k: str, v: Any) -> Decision:
    """One entry of the file, validated (ValueError, TypeError, KeyError: the file is corrupt)."""
    if not isinstance(v, dict):
        raise ValueError(f"entry {k!r} is not a decision")
    cands, blas, savings = v["candidates"], v["blas"], v["savings"]
    if not (isinstance(cands, list) and all(isinstance(c, str) for c in cands)
            and isinstance(blas, list) and all(isinstance(b, str) for b in blas)
            and isinstance(savings, dict) and all(isinstance(s, str) for s in savings)):
        raise ValueError(f"entry {k!r} is not a decision")
    counts = [v["unfused"], v["observed"], v.get("start_shared", 0)]
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
        raise ValueError(f"entry {k!r} has a bad count")
    cuts, prestart, source = v.get("cuts"), v.get("prestart", []), v.get("profile", "default")
    maggs = v.get("maggs", [])
    if not (isinstance(maggs, list) and all(
            isinstance(g, list) and len(g) >= 2 and all(type(i) is int and i >= 0 for i in g) for g in maggs)):
        raise ValueError(f"entry {k!r} has bad multi-aggregates")
    if cuts is not None and not (isinstance(cuts, list) and all(
            isinstance(c, list) and len(c) == 2 and all(type(i) is int and i >= 0 for i in c) for c in cuts)):
        raise ValueError(f"entry {k!r} has bad cuts")
    if not (isinstance(prestart, list) and all(isinstance(p, str) for p in prestart) and isinstance(source, str)):
        raise ValueError(f"entry {k!r} is not a decision")
    sav = [(name, observed._number(s)) for name, s in savings.items()]  # (ValueError: not a number)
    return Decision(tuple(cands), tuple(sav), tuple(blas), counts[0], counts[1],
                    None if cuts is None else tuple((a, b) for a, b in cuts), tuple(prestart), counts[2], source,
                    tuple(tuple(g) for g in maggs))


def _entries() -> dict[str, Any]:
    """The file's entries as JSON, each validated when it is used: a process looks up a few of up to
    MAX_ENTRIES, and building every Decision took ~1 ms of its first lookup (124 entries)."""
    key = str(_path())
    if key not in _loaded:
        _loaded[key] = observed.read_feedback(_path(), _object) or {}
    return _loaded[key]


def _corrupt(e: Exception) -> None:
    observed.discard(_path(), e)
    _loaded[str(_path())] = {}


def _profile_stamp() -> str:
    """The hardware profile's file as the key sees it (path, inode, size, modification time; absent:
    the built-in defaults, which the source digest covers): reading and validating it means importing
    cost.profile, ~2 ms of the first replay in a process that otherwise never loads it."""
    p = profile_path()
    try:
        st = os.stat(p)
    except OSError:
        return f"{p}: absent"
    return f"{p}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _feedback_digest() -> str:
    """The run feedback file's bytes (parsing it to digest its observations took ~1 ms of the first
    lookup; equal bytes are equal observations, and a file rewritten with the same ones only misses
    once)."""
    try:
        text = observed.cache_path(observed.FILE).read_bytes()
    except OSError:
        text = b""
    return hashlib.sha256(text).hexdigest()


def _kernels_digest() -> str:
    return hashlib.sha256(" ".join(sorted(cachedir.indexed_kernels())).encode()).hexdigest()


def _once(name: str, fn: Any) -> str:
    if name not in _digests:
        _digests[name] = fn()
    return _digests[name]


def _config_text(cfg: Any) -> str:
    items = ({f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} if dataclasses.is_dataclass(cfg)
             else dict(vars(cfg)))
    return repr(sorted((k, v) for k, v in items.items() if k not in OUTPUT_ONLY))


def key(order: list[Any], roots: list[Any], weight: float, hints: dict[str, float] | None, cfg: Any,
        prof: Any = None, literals: str = "none") -> str | None:
    """The decision key of a DAG (its HOPs ``order``ed, inputs first, and ``roots``) or None when
    it cannot be keyed (a parameter without a stable text: an object shown by address). ``prof``: the
    hardware profile given to the optimizer; None, the one it loads, keyed by its file."""
    at = {h.id: i for i, h in enumerate(order)}
    parts = []
    for h in order:
        params = repr(sorted(h.params.items()))
        span = h.span
        where = "" if span is None else f"{span.file}:{span.line}:{span.col}"
        parts.append(f"{h.kind}|{h.op}|{h.dt}|{h.vt}|{h.rows}|{h.cols}|{h.nnz}|{h.name}|{h.value!r}|{params}|"
                     f"{[at.get(i.id, -1) for i in h.inputs]}|{where}")
    parts.append(repr([at.get(r.id, -1) for r in roots]))
    text = "\n".join(parts)
    if " at 0x" in text:
        return None
    state = ("numba" in sys.modules, "lafuse.codegen" in sys.modules, "scipy.linalg.cython_blas" in sys.modules)
    head = [repr(weight), repr(sorted((hints or {}).items())), _config_text(cfg), literals,
            _once("profile", _profile_stamp) if prof is None else repr(asdict(prof)), repr(state),
            observed.source_digest(), _once("feedback", _feedback_digest),
            _once("kernels", _kernels_digest)]
    return hashlib.sha256(("\n".join(head) + "\n" + text).encode()).hexdigest()[:32]


def lookup(k: str) -> Decision | None:
    """An earlier process's decision for key ``k``."""
    v = _entries().get(k)
    if v is None:
        return None
    try:
        return _decision(k, v)
    except (ValueError, TypeError, KeyError) as e:
        _corrupt(e)
        return None


def record(k: str, decision: Decision) -> None:
    _new[k] = decision


def save() -> int:
    """Merge this process's decisions into the file (atomically; the newest win); how many."""
    if not _new:
        return 0
    try:  # every entry kept is validated here, after the run, so a corrupt one goes now
        merged = _parse({k: v for k, v in _entries().items() if k not in _new})
    except (ValueError, TypeError, KeyError) as e:
        _corrupt(e)
        merged = {}
    merged.update(_new)
    if len(merged) > MAX_ENTRIES:
        merged = dict(list(merged.items())[-MAX_ENTRIES:])
    data = {k: {"candidates": list(d.candidates), "savings": dict(d.savings), "blas": list(d.blas),
                "unfused": d.unfused, "observed": d.observed, "start_shared": d.start_shared,
                "cuts": None if d.cuts is None else [list(c) for c in d.cuts], "prestart": list(d.prestart),
                "profile": d.profile, "maggs": [list(g) for g in d.maggs]}
            for k, d in merged.items()}
    observed.write_json(_path(), data)
    _loaded[str(_path())] = data
    n = len(_new)
    _new.clear()
    return n
