"""Sum-product regions for which earlier runs found no plan worth costing (paper 001 §3).

Why: the sum-product rule translates every region of a DAG and builds its alternative plans at
every compilation, and dynamic recompilation compiles a mini-batch loop body again at each new batch
size (AutoEncoder 5000 x 100 in batches of 256: the body at 256 and 136 rows, ~8 ms of rule work
each, a quarter of the run). Most regions have no candidate at all -- no plan does enough less work
than the region as written -- and that verdict rests on the region alone: its operators, their
sizes, which of them are shared, the literals it reads, and lafuse's own source. The rule keys a
region by exactly that (``rewrite.sumproduct.rule.region_key``) and skips translation when the key
is known.

Only "no candidate" verdicts are kept: a region whose candidates were costed against the DAG rests
on the whole DAG (fusion with its neighbours) and is decided again. Keys found in this process count
at once; ``lafuse run`` saves them (``save``) in ``sumproduct.json`` next to the plan cache, the
newest ``MAX_KEYS`` kept, the file replaced atomically and dropped whole when lafuse's source
changed (its digest is in the file). A corrupt file is deleted with one warning. Config
``fusion_reuse`` (``LAFUSE_FUSION_REUSE=0``) turns reading and saving the file off, as for fusion
decisions.
"""

from __future__ import annotations

from typing import Any

FILE = "sumproduct.json"
MAX_KEYS = 8192  # ~40 bytes each

_known: set[str] = set()  # no-candidate keys of this process and, once read, of the file
_new: list[str] = []  # found in this process, saved at the end of the run
_read: set[str] = set()  # file paths read by this process


def _parse(raw: Any) -> list[str]:
    from lafuse.feedback import observed

    if not isinstance(raw, dict) or not isinstance(raw.get("source"), str) \
            or not isinstance(raw.get("keys"), list) or not all(isinstance(k, str) for k in raw["keys"]):
        raise ValueError("not a list of region keys")
    return raw["keys"] if raw["source"] == observed.source_digest() else []


def _load(persist: bool) -> None:
    if not persist:
        return
    from lafuse.feedback import observed  # deferred: only when a region is looked up (~1 ms)

    path = observed.cache_path(FILE)
    if str(path) not in _read:
        _read.add(str(path))
        _known.update(observed.read_feedback(path, _parse) or ())


def known(key: str, persist: bool = True) -> bool:
    """An earlier compilation (of this process, or with ``persist`` of an earlier run) found no
    candidate plan for the region keyed ``key``."""
    if key in _known:
        return True
    _load(persist)
    return key in _known


def record(key: str) -> None:
    if key not in _known:
        _known.add(key)
        _new.append(key)


def save() -> int:
    """Merge this process's keys into the file (the newest kept); how many were new."""
    if not _new:
        return 0
    from lafuse.feedback import observed

    path = observed.cache_path(FILE)
    old = observed.read_feedback(path, _parse) or []
    fresh = set(_new)
    keys = [k for k in old if k not in fresh] + _new
    observed.write_json(path, {"source": observed.source_digest(),
                               "keys": keys[-MAX_KEYS:]})
    n = len(_new)
    _new.clear()
    return n
