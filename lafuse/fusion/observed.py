"""How often each candidate fused operator's block ran in the last run that saw it (profile feedback).

Why: whether a kernel pays for its one-time cost (a cold compile, or Numba's start plus a load from
the disk cache) depends on how often its block runs, and for a ``while`` loop the compiler can only
guess (``DEFAULT_WHILE_ITERATIONS`` per level: 100 for a line search inside a Newton loop that
runs ~25 times in all in l2svm). ``lafuse run`` records, per canonical plan hash, how many times
the lowered plans that held the candidate executed, in ``observed.json`` next to the plan cache
(``$LAFUSE_CODEGEN_CACHE``); later runs weigh that candidate by the observed count instead of
the guess. Like the plan cache it learns across runs: the first run of a script decides on the
guess (and, as before, defers kernels that would pay from the disk cache to a background compile).

Numba's start (~0.25 s from the disk cache) is paid once per process, by the first kernel. The
file also keeps the per-execution saving the optimizer expected of each candidate and which run
it belonged to: when that run's candidates together save more than the start (each net of its
load), a cached kernel of the script is weighed against its load alone.

Counts are per run (the latest run overwrites a key's count; keys of other scripts stay). A missing
or unreadable file means no observations.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FILE = "observed.json"
MAX_KEYS = 4096  # keys kept in the file (the most recently observed)

_loaded: dict[str, dict[str, Observation]] = {}
SAVINGS: dict[str, float] = {}  # s saved per execution, as the optimizer priced each candidate here


@dataclass(frozen=True)
class Observation:
    """One candidate in the latest run that executed it: executions, the seconds the optimizer
    expected fusing it to save per execution, and that run's id (its candidates share Numba's start)."""

    runs: float
    saving: float = 0.0
    run: str = ""


def cache_path(name: str) -> Path:
    """A file of run feedback next to the plan cache (``$LAFUSE_CODEGEN_CACHE``)."""
    from lafuse.config import codegen_cache_dir

    return Path(codegen_cache_dir()) / name


def write_json(path: Path, data: Any, sort_keys: bool = False) -> None:
    """Replace ``path`` atomically (concurrent runs: the last writer wins, no reader sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}_", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, sort_keys=sort_keys)
    os.replace(tmp, path)


def _path() -> Path:
    return cache_path(FILE)


def load() -> dict[str, Observation]:
    """Observations per canonical plan hash (read once per process and cache directory)."""
    p = _path()
    key = str(p)
    if key not in _loaded:
        data: dict[str, Observation] = {}
        try:
            raw = json.loads(p.read_text())
            for k, v in (raw.items() if isinstance(raw, dict) else ()):
                if isinstance(v, dict) and isinstance(v.get("runs"), (int, float)) and v["runs"] >= 0:
                    data[str(k)] = Observation(float(v["runs"]), float(v.get("saving", 0.0)), str(v.get("run", "")))
        except (OSError, ValueError, TypeError):
            pass
        _loaded[key] = data
    return _loaded[key]


def start_shared(key: str, load_time: float, start_time: float) -> bool:
    """Whether the run that last executed ``key`` had candidates whose savings, net of their loads,
    together pay for Numba's start: then no single kernel of the script has to pay it alone."""
    obs = load()
    o = obs.get(key)
    if o is None or not o.run:
        return False
    total = sum(max(0.0, x.runs * x.saving - load_time) for x in obs.values() if x.run == o.run)
    return total >= start_time


def counts() -> dict[str, float]:
    """This process's executions per candidate (counted by the interpreter, runtime.lower.EXECUTED)."""
    from lafuse.runtime.lower import EXECUTED

    return {k: float(v) for k, v in EXECUTED.items()}


def save() -> int:
    """Merge this run's observations into the file (atomically; the newest keys win); returns how many."""
    new = counts()
    if not new:
        return 0
    run = hashlib.sha256(" ".join(sorted(new)).encode()).hexdigest()[:16]
    p = _path()
    merged = {k: v for k, v in load().items() if k not in new}
    merged.update({k: Observation(n, SAVINGS.get(k, 0.0), run) for k, n in new.items()})
    if len(merged) > MAX_KEYS:
        merged = dict(list(merged.items())[-MAX_KEYS:])
    write_json(p, {k: asdict(v) for k, v in merged.items()}, sort_keys=True)
    _loaded[str(p)] = merged
    return len(new)
