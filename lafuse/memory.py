"""The memory budget of in-memory operations, and the guard that keeps a run inside it.

Why a guard: NumPy allocates lazily (``np.zeros`` of 20 GB succeeds on a 24 GB machine and the
kernel kills the process when the pages are touched), so an operation beyond physical memory
is not a clean ``MemoryError`` but a lost process. SystemDS compares each operation's memory
estimate (inputs + output, paper 003 §3) with a budget of 70% of the JVM heap and runs larger
ones on Spark; lafuse compares the same estimate with ``Config.memory_budget`` times this
machine's memory and, until a distributed backend can take the operation, stops with an error
that says what did not fit and how to raise the budget.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import sys
from functools import lru_cache
from typing import Any

from lafuse import config as cfgmod
from lafuse.errors import DMLRuntimeError


@lru_cache(maxsize=1)
def physical_memory() -> int:
    """Bytes of memory this process may use: the machine's RAM, or a smaller cgroup limit
    (containers: the kernel kills at the cgroup's limit, not at the machine's)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        ram = 8 << 30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < ram:
            ram = int(text)
    return int(ram)


_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_bytes(text: str) -> float:
    """``2GiB``, ``500MB``, ``1e9`` as bytes (Dask's notation), or a ValueError that says what is wrong."""
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"not a memory size: '{text}' (e.g. 2GiB, 500MB)")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def local_memory() -> float:
    """Bytes this process's operations may hold: ``Config.local_memory`` if given (a small driver, as
    SystemDS's hybrid mode on a small heap), else the machine's memory."""
    given = cfgmod.get().local_memory
    return parse_bytes(given) if given else float(physical_memory())


def budget_bytes() -> float:
    """Bytes one operation may use (inputs + output): ``memory_budget`` of ``local_memory``."""
    return cfgmod.get().memory_budget * local_memory()


def human(nbytes: float) -> str:
    nbytes = float(f"{nbytes:.3g}")  # 999999.99 reads as 1 MB, not 1e+03 KB
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def check(nbytes: float, what: str) -> None:
    """Raise a clear error before ``what`` allocates ``nbytes`` beyond the budget."""
    if nbytes > budget_bytes():
        cfg = cfgmod.get()
        of = f"--local-memory {cfg.local_memory}" if cfg.local_memory else human(physical_memory())
        raise DMLRuntimeError(
            f"{what} needs {human(nbytes)}, beyond the memory budget of {human(budget_bytes())} "
            f"(memory_budget={cfg.memory_budget:g} of {of}); if the machine has the memory, "
            f"raise " + ("--local-memory or " if cfg.local_memory else "") + "memory_budget in a --config file")


POPULATE_MIN_BYTES = 64 << 20  # below this, demand faults cost little next to the rest of a read


def fresh_bytes(nbytes: int) -> Any:
    """A writable uint8 array of ``nbytes`` for data that is read in once (a file): large ones are
    mapped with MAP_POPULATE, which faults the pages in with one call. Why: memory a process touches
    for the first time costs a page fault per 4 KiB page, and on a virtual machine those are slow;
    measured here reading a 160 MB .npy into ``np.empty``: 0.49-0.82 s, into a populated mapping
    0.09-0.11 s. Not for buffers a loop allocates again and again: freed pages fault back cheaply
    (an ``np.empty`` + fill of 160 MB in a loop took 25-40 ms, a populated mapping 120-150 ms)."""
    # deferred: memory is a foundation module that the command line imports before NumPy is needed
    import numpy as np

    if nbytes >= POPULATE_MIN_BYTES:
        flags = getattr(mmap, "MAP_POPULATE", 0)
        if flags:
            try:
                m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flags)
                return np.frombuffer(m, dtype=np.uint8)
            except (OSError, ValueError, AttributeError):  # (a platform or limit that refuses it)
                pass
    return np.empty(nbytes, dtype=np.uint8)


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
MALLOC_KEEP_BYTES = 1 << 30  # freed memory glibc keeps for reuse instead of returning it to the system
_TUNED: list[bool] = []  # whether this process tuned malloc (once: lafuse run, the Python API's compute)


def tune_malloc() -> bool:
    """Keep large freed blocks for reuse (glibc only; env LAFUSE_MALLOC_TUNE=0 leaves malloc alone).

    By default glibc serves each allocation over a (dynamic) threshold of a few MB with fresh pages
    from mmap and returns them on free, so every intermediate matrix page-faults its memory in again:
    measured here, ``sum((x * y) * 3)`` over 8 MB operands took 4.1 ms, 1.4 ms with large blocks
    served from and returned to the heap (32 MB operands: 13.8 vs 8.8 ms). An interpreter of
    whole-matrix operations allocates such blocks all the time (a script run by ``lafuse run`` or an
    expression computed from Python); the cost is up to this many bytes
    of freed memory kept by the process. Set once, before the first large allocation."""
    if os.environ.get("LAFUSE_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    if _TUNED:
        return _TUNED[0]
    try:  # the process's own symbols (Python links the C library): find_library would run ldconfig
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, MALLOC_KEEP_BYTES) == 1
    ok &= mallopt(_M_TRIM_THRESHOLD, MALLOC_KEEP_BYTES) == 1
    ok &= mallopt(_M_TOP_PAD, 64 << 20) == 1
    _TUNED.append(bool(ok))
    return bool(ok)
