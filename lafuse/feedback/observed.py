"""How often each candidate fused operator's block ran in the last run that saw it (profile feedback).

Why: whether a kernel pays for its one-time cost (a cold compile, or Numba's start plus a load from
the disk cache) depends on how often its block runs, and for a ``while`` loop the compiler can only
guess (``DEFAULT_WHILE_ITERATIONS`` per level: 100 for a line search inside a Newton loop that
runs ~25 times in all in l2svm). ``lafuse run`` records, per canonical plan hash and place in the
script (fusion.optimizer.observed_key: one plan in a loop and after it are two candidates), how many times
the lowered plans that held the candidate executed, in ``observed.json`` next to the plan cache
(``$LAFUSE_CODEGEN_CACHE``); later runs weigh that candidate by the observed count instead of
the guess. Like the plan cache it learns across runs: the first run of a script decides on the
guess (and, as before, defers kernels that would pay from the disk cache to a background compile).

Numba's start (~0.4 s from the disk cache) is paid once per process, by the first kernel. The
file also keeps the per-execution saving the optimizer expected of each candidate and which run
it belonged to: when that run's candidates together save more than the start (each net of its
load), a cached kernel of the script is weighed against its load alone.

Counts are per run (the latest run overwrites a key's count; keys of other scripts stay). A missing
file means no observations; a corrupt one (not JSON, or an entry that is not a count) is deleted with
one warning and means none either: feedback must never fail a run, and the next run starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lafuse import cachedir
from lafuse.feedback import EXECUTED

FILE = "observed.json"
MAX_KEYS = 4096  # keys kept in the file (the most recently observed)

_loaded: dict[str, dict[str, Observation]] = {}
SAVINGS: dict[str, float] = {}  # s saved per execution, as the optimizer priced each candidate here
BLAS: set[str] = set()  # candidates whose kernel calls BLAS (cost.fused.calls_blas)


@dataclass(frozen=True)
class Observation:
    """One candidate in the latest run that executed it: executions, the seconds the optimizer
    expected fusing it to save per execution, that run's id (its candidates share Numba's start),
    and whether its kernel calls BLAS (then the shared start includes scipy's BLAS import)."""

    runs: float
    saving: float = 0.0
    run: str = ""
    blas: bool = False


_source: list[str] = []  # the digest of lafuse's source, once computed


def source_digest() -> str:
    """lafuse's own source (every module's size and modification time), computed once per process:
    a changed cost model or optimizer must not replay what the old one decided (feedback.decisions,
    feedback.sumproduct)."""
    if not _source:
        h = hashlib.sha256()
        todo = [str(Path(__file__).resolve().parent.parent)]
        while todo:  # (os.scandir: directories told apart without a stat; ~0.45 ms for ~130 modules)
            with os.scandir(todo.pop()) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if e.name.endswith((".py", ".dml")) and e.is_file():
                    st = e.stat()
                    h.update(f"{e.path}:{st.st_size}:{st.st_mtime_ns};".encode())
                elif e.name != "__pycache__" and e.is_dir():
                    todo.append(e.path)
        _source.append(h.hexdigest())
    return _source[0]


def cache_path(name: str) -> Path:
    """A file of run feedback next to the plan cache (``$LAFUSE_CODEGEN_CACHE``, if it passes the
    safety check of :mod:`lafuse.cachedir`)."""
    return cachedir.usable() / name


def read_feedback(path: Path, parse: Any) -> Any:
    """``parse(json)`` of a feedback file; None if there is none. A file that cannot be read or parsed
    (``parse`` raises ValueError/TypeError/KeyError) is deleted with one warning: the caller rebuilds it."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        cachedir.warn(f"run feedback {path} unreadable ({e.strerror}); ignored")
        return None
    try:
        return parse(json.loads(text))
    except (ValueError, TypeError, KeyError) as e:
        discard(path, e)
        return None


def discard(path: Path, e: Exception) -> None:
    """Delete a corrupt feedback file with one warning (``e``: what was wrong with it)."""
    cachedir.warn(f"run feedback {path} is corrupt ({type(e).__name__}: {e}); deleted, rebuilt by later runs")
    try:
        path.unlink()
    except OSError:
        pass


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{json.dumps(v)} is not a number")
    return float(v)


def _parse(raw: Any) -> dict[str, Observation]:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    data: dict[str, Observation] = {}
    for k, v in raw.items():
        if not isinstance(v, dict) or _number(v["runs"]) < 0 or not isinstance(v.get("run", ""), str) \
                or not isinstance(v.get("blas", False), bool):
            raise ValueError(f"entry {k!r} is not an observation")
        data[str(k)] = Observation(_number(v["runs"]), _number(v.get("saving", 0.0)), str(v.get("run", "")),
                                   v.get("blas", False))
    return data


def write_json(path: Path, data: Any, sort_keys: bool = False) -> None:
    """Replace ``path`` atomically (concurrent runs: the last writer wins, no reader sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cachedir.replace_atomically(path, json.dumps(data, sort_keys=sort_keys).encode(), prefix=f".{path.stem}_")


def _path() -> Path:
    return cache_path(FILE)


def load() -> dict[str, Observation]:
    """Observations per candidate key (fusion.optimizer.observed_key; read once per process and cache directory)."""
    p = _path()
    key = str(p)
    if key not in _loaded:
        _loaded[key] = read_feedback(p, _parse) or {}
    return _loaded[key]


def start_shared(key: str, load_time: float, start_time: float, blas_time: float = 0.0) -> bool:
    """Whether the run that last executed ``key`` had candidates whose savings, net of their loads,
    together pay for Numba's start (and ``blas_time``, scipy's BLAS import, when one of those that
    pay calls BLAS): then no single kernel of the script has to pay it alone."""
    obs = load()
    o = obs.get(key)
    if o is None or not o.run:
        return False
    paying = [(x.runs * x.saving - load_time, x.blas) for x in obs.values() if x.run == o.run]
    paying = [(n, b) for n, b in paying if n > 0.0]
    return sum(n for n, _ in paying) >= start_time + (blas_time if any(b for _, b in paying) else 0.0)


def counts() -> dict[str, float]:
    """This process's executions per candidate (counted by the interpreter, feedback.EXECUTED)."""
    return {k: float(v) for k, v in EXECUTED.items()}


def save() -> int:
    """Merge this run's observations into the file (atomically; the newest keys win); returns how many."""
    new = counts()
    if not new:
        return 0
    run = hashlib.sha256(" ".join(sorted(new)).encode()).hexdigest()[:16]
    p = _path()
    merged = {k: v for k, v in load().items() if k not in new}
    merged.update({k: Observation(n, SAVINGS.get(k, 0.0), run, k in BLAS) for k, n in new.items()})
    if len(merged) > MAX_KEYS:
        merged = dict(list(merged.items())[-MAX_KEYS:])
    if merged == load():  # a run that repeats the last one observes the same: no rewrite (2-12 ms a run)
        return len(new)
    write_json(p, {k: asdict(v) for k, v in merged.items()}, sort_keys=True)
    _loaded[str(p)] = merged
    return len(new)
