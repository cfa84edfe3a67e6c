"""How often each candidate fused operator's block ran in the last run that saw it (profile feedback).

Why: whether a kernel pays for its one-time cost (a cold compile, or Numba's start plus a load from
the disk cache) depends on how often its block runs, and for a ``while`` loop the compiler can only
guess (``DEFAULT_WHILE_ITERATIONS`` per level: 100 for a line search inside a Newton loop that
runs ~25 times in all in l2svm). ``lafuse run`` records, per canonical plan hash, how many times
the lowered plans that held the candidate executed, in ``observed.json`` next to the plan cache
(``$LAFUSE_CODEGEN_CACHE``); later runs weigh that candidate by the observed count instead of
the guess. Like the plan cache it learns across runs: the first run of a script decides on the
guess (and, as before, defers kernels that would pay from the disk cache to a background compile).

Counts are per run (the latest run overwrites a key's count; keys of other scripts stay). A missing
or unreadable file means no observations.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

FILE = "observed.json"
MAX_KEYS = 4096  # keys kept in the file (the most recently observed)

_loaded: dict[str, dict[str, float]] = {}


def _path() -> Path:
    from lafuse.config import codegen_cache_dir

    return Path(codegen_cache_dir()) / FILE


def load() -> dict[str, float]:
    """Observed executions per canonical plan hash (read once per process and cache directory)."""
    p = _path()
    key = str(p)
    if key not in _loaded:
        data: dict[str, float] = {}
        try:
            raw = json.loads(p.read_text())
            if isinstance(raw, dict):
                data = {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and v >= 0}
        except (OSError, ValueError):
            pass
        _loaded[key] = data
    return _loaded[key]


def weight(key: str, default: float) -> float:
    """Expected executions of a candidate's block in a run: the observed count, else ``default``."""
    return load().get(key, default)


def counts() -> dict[str, float]:
    """This process's executions per candidate (counted by the interpreter, runtime.lower.EXECUTED)."""
    from lafuse.runtime.lower import EXECUTED

    return {k: float(v) for k, v in EXECUTED.items()}


def save() -> int:
    """Merge this run's counts into the file (atomically; the newest keys win); returns how many."""
    new = counts()
    if not new:
        return 0
    p = _path()
    merged = {k: v for k, v in load().items() if k not in new}
    merged.update(new)
    if len(merged) > MAX_KEYS:
        merged = dict(list(merged.items())[-MAX_KEYS:])
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".observed_", suffix=".json", dir=p.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(merged, f, sort_keys=True)
    os.replace(tmp, p)
    _loaded[str(p)] = merged
    return len(new)
