"""The plan cache's files per kernel: its size bound (LRU eviction), ``lafuse cache info`` and ``clear``.

A kernel is its generated source ``k_<hash>_<digest>_<machine>.py`` plus Numba's files of it in
``__pycache__`` (``<stem>.*.nbi`` index, ``<stem>.*.nbc`` compiled code); they are counted, aged and
removed together. When a kernel was last used is its source's access time, which the plan cache sets
on every load (explicitly, so ``noatime`` mounts do not matter; the modification time stays, since
Numba's index is keyed by it). Eviction runs after each cold compile (which adds files; a load adds
none) and removes the least recently used kernels until the cache fits ``Config.cache_max_bytes``.

No Numba here, so ``lafuse cache info`` answers without starting it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from lafuse import cachedir
from lafuse.cachedir import PYCACHE
from lafuse.config import profile_path

RUN_FEEDBACK = ("observed.json", "prestart.json", "decisions.json", "sumproduct.json")  # run feedback beside the kernels (lafuse.feedback)
MARKERS = ".deferred_*.json"  # one per running background job (lafuse.codegen.deferred)
STALE_AFTER = 600.0  # s, a background job older than this is taken for dead


@dataclass
class Kernel:
    stem: str
    files: list[Path] = field(default_factory=list)
    bytes: int = 0
    used: float = 0.0  # s since the epoch: the last load or compile


def _entries(d: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(d) as it:
            return [e for e in it if e.name.startswith("k_") and e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def kernels(d: Path) -> dict[str, Kernel]:
    """The kernels in cache directory ``d`` by file stem (Numba files without a source too)."""
    out: dict[str, Kernel] = {}
    for sub, is_source in ((d, True), (d / PYCACHE, False)):
        for e in _entries(sub):
            if is_source and not e.name.endswith(".py"):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile
                continue
            stem = e.name[:-3] if is_source else e.name.split(".", 1)[0]
            k = out.setdefault(stem, Kernel(stem))
            k.files.append(Path(e.path))
            k.bytes += st.st_size
            k.used = max(k.used, st.st_atime, st.st_mtime) if is_source else max(k.used, st.st_mtime)
    return out


def touch(source: Path) -> None:
    """Mark a kernel used now (its access time; the modification time, Numba's stamp, stays)."""
    try:
        st = os.stat(source)
        os.utime(source, ns=(time.time_ns(), st.st_mtime_ns))
    except OSError:  # evicted meanwhile, or a file system without times: it just ages
        pass


def discard(d: Path, stem: str) -> None:
    """Remove a kernel's source and Numba's files of it."""
    for p in [d / f"{stem}.py", *(Path(e.path) for e in _entries(d / PYCACHE) if e.name.split(".", 1)[0] == stem)]:
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def evict(d: Path, max_bytes: int, keep: str = "") -> int:
    """Remove the least recently used kernels (never ``keep``) until the kernels of ``d`` take at most
    ``max_bytes`` (0: no bound); returns how many were removed."""
    if max_bytes <= 0:
        return 0
    ks = kernels(d)
    total = sum(k.bytes for k in ks.values())
    n = 0
    for k in sorted(ks.values(), key=lambda k: k.used):
        if total <= max_bytes:
            break
        if k.stem == keep:
            continue
        for p in k.files:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        total -= k.bytes
        n += 1
    return n


def pending(d: Path, max_age: float = STALE_AFTER) -> list[tuple[int, Path]]:
    """Background jobs (``lafuse.codegen.deferred``) still running on cache ``d``: (pid, marker) of each
    marker younger than ``max_age`` whose process is alive (a marker outlives a killed process)."""
    now = time.time()
    out = []
    for p in d.glob(MARKERS):
        try:
            if now - p.stat().st_mtime >= max_age:
                continue
            pid = int(json.loads(p.read_text())["pid"])
        except FileNotFoundError:  # finished meanwhile
            continue
        except (OSError, ValueError, KeyError, TypeError):  # being written: the job is starting
            out.append((0, p))
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:  # alive, another user's (pid reused)
            pass
        out.append((pid, p))
    return out


def _human(n: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def info(max_bytes: int) -> list[str]:
    """``lafuse cache info``: where the cache is, whether runs use it, what it holds."""
    d = cachedir.configured()
    if not d.exists():
        return [f"plan cache: {d} (does not exist yet; the first run that fuses creates it)",
                f"key file: {cachedir.key_path()}", f"size bound: {_human(max_bytes)} (cache_max_bytes)"]
    why = cachedir.unsafe(d)
    if why is None and (d / PYCACHE).exists():
        sub = cachedir.unsafe(d / PYCACHE, follow=False)
        why = None if sub is None else f"its {PYCACHE} is {sub}"
    if why is None:
        why = cachedir.user_key(create=False)[1]
    check = "passed (owned by this user, writable by it alone)" if why is None else \
        f"FAILED: {why} (runs do not use it: they compile into a private temporary directory)"
    ks = list(kernels(d).values())
    total = sum(k.bytes for k in ks)
    lines = [f"plan cache: {d}", f"safety check: {check}", f"key file: {cachedir.key_path()}",
             f"kernels: {len(ks)}, {_human(total)} (size bound {_human(max_bytes) if max_bytes > 0 else 'none'}, "
             f"cache_max_bytes; least recently used kernels are evicted beyond it)"]
    if ks:
        lines.append(f"last used: oldest {_when(min(k.used for k in ks))}, newest {_when(max(k.used for k in ks))}")
    asts, codes = ast_files(d), code_files(d)
    lines.append(f"parsed scripts: {len(asts)}, {_human(sum(p.stat().st_size for p in asts))} "
                 f"(at most {cachedir.PARSED_AST[2]}, least recently used removed)")
    lines.append(f"compiled plan code: {len(codes)}, {_human(sum(p.stat().st_size for p in codes))} "
                 f"(at most {cachedir.PLAN_CODE[2]}, least recently used removed)")
    jobs = pending(d)
    lines.append(f"background jobs pending: {len(jobs)}" + (f" (pids {', '.join(str(p) for p, _ in jobs)})"
                                                            if jobs else ""))
    return lines


def ast_files(d: Path) -> list[Path]:
    """The parsed scripts kept in cache directory ``d`` (lang.parser)."""
    return cachedir.cached_files(d, *cachedir.PARSED_AST[:2])


def code_files(d: Path) -> list[Path]:
    """The generated plan code kept in cache directory ``d`` (runtime.straight.compiled)."""
    return cachedir.cached_files(d, *cachedir.PLAN_CODE[:2])


def clear(everything: bool) -> tuple[int, list[str]]:
    """``lafuse cache clear``: remove the kernels and Numba's files of them (and leftovers of interrupted
    writes); ``everything`` also removes the run feedback and the hardware profile. Returns the number
    of kernels removed and the other files removed. Refuses a directory of another user."""
    d = cachedir.configured()
    if not d.exists():
        return 0, []
    try:
        st = os.stat(d)
    except OSError as e:
        raise OSError(f"cannot inspect {d}: {e.strerror}") from e
    if st.st_uid != cachedir._euid():
        raise PermissionError(f"{d} is owned by uid {st.st_uid}, not by this user: not clearing it")
    ks = kernels(d)
    for k in ks.values():
        for p in k.files:
            p.unlink(missing_ok=True)
    live = {p for _, p in pending(d)}
    other: list[str] = []
    leftovers = [p for pat in (".tmp_*", ".deferred_*", ".observed_*", ".prestart_*") for p in d.glob(pat)]
    leftovers += [p for p in (d / PYCACHE).glob("*.tmp.*")] + [p for p in (d / PYCACHE).glob(".probe_*")]
    for what, files in (("parsed scripts", ast_files(d)), ("compiled plan codes", code_files(d))):
        for p in files:
            p.unlink(missing_ok=True)
        if files:
            other.append(f"{len(files)} {what}")
    if everything:
        leftovers += [d / name for name in RUN_FEEDBACK] + [profile_path()]
    for p in leftovers:
        if p in live or not (p.is_file() or p.is_symlink()):
            continue
        p.unlink(missing_ok=True)
        other.append(p.name)
    return len(ks), other
