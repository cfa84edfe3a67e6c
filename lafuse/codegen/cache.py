"""Two-level plan cache: compiled kernels in memory (LRU), generated sources on disk.

Why on disk as real ``.py`` files: Numba's own cache (``@njit(cache=True)``) is keyed by a
function's source file, so a generated kernel written to a stable path and compiled from there
is compiled once per machine, not once per process. The file name holds the canonical plan hash,
a digest of the generated source and of the primitives it calls (a generator or library change
never reuses a stale binary), the Numba version and the host CPU name (machine code is CPU
specific). Files are written atomically (temporary file + ``os.replace``) and not rewritten while
they hold the right source, so concurrent processes agree on one file and Numba's index (keyed by
the file's mtime) stays valid.

What is trusted: nothing read from the directory. The directory is this user's alone
(:mod:`lafuse.cachedir`); the source is regenerated on every load, compared with the file (a file
that differs is rewritten, with one warning) and executed from memory; Numba's files of it are signed
and verified (:mod:`lafuse.codegen.integrity`, which states the threat model). The cache is bounded
(``Config.cache_max_bytes``, least recently used kernels evicted: :mod:`lafuse.cachefiles`).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm
import numba
from numba.core.runtime import rtsys

from lafuse import cachedir, cachefiles
from lafuse import config as cfgmod
from lafuse.cachedir import usable as cache_dir
from lafuse.codegen import integrity
from lafuse.codegen.numba_gen import specialize

# part of every file name: kernels whose Numba files were written unsigned (lafuse before the
# integrity check) keep other names, so they are never taken for tampered ones (eviction ages them out)
FORMAT = "signed-1"
_PRIMS_DIGEST: str | None = None


def _prims_digest() -> str:
    global _PRIMS_DIGEST
    if _PRIMS_DIGEST is None:
        src = (Path(__file__).parent / "prims.py").read_bytes()
        _PRIMS_DIGEST = hashlib.sha256(src).hexdigest()
    return _PRIMS_DIGEST


def _machine_tag() -> str:
    tag = f"nb{numba.__version__}_{llvm.get_host_cpu_name()}"
    return "".join(ch if ch.isalnum() else "_" for ch in tag)


def file_name(key: str, source: str) -> str:
    digest = hashlib.sha256(f"{FORMAT}\0{source}{_prims_digest()}".encode()).hexdigest()[:12]
    return f"k_{key}_{digest}_{_machine_tag()}.py"


@dataclass
class Loaded:
    key: str
    source: str
    kernel: Any
    path: Path


@dataclass
class Stats:
    compiled: int = 0
    mem_hits: int = 0
    disk_hits: int = 0
    compile_time_cold: float = 0.0
    compile_time_warm: float = 0.0
    import_time: float = 0.0  # the runtime's first import of the code generator (Numba)
    per_kernel: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"compiled": self.compiled, "mem_hits": self.mem_hits, "disk_hits": self.disk_hits,
                "compile_time_cold": self.compile_time_cold, "compile_time_warm": self.compile_time_warm,
                "import_time": self.import_time,
                "per_kernel": {k: dict(v) for k, v in self.per_kernel.items()}}


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".py", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if path.exists():  # another process won: keep its file (and Numba's index of it)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _matches(path: Path, source: str) -> bool | None:
    """Whether the file holds exactly ``source`` (None: there is no file)."""
    try:
        with open(path, "rb") as f:
            return f.read() == source.encode()
    except FileNotFoundError:
        return None
    except OSError:  # unreadable (a directory, no permission): not the file it should be
        return False


def _place(d: Path, path: Path, source: str) -> bool:
    """Make ``path`` hold ``source``: True if it already did (a warm load may follow), False if it was
    missing or differed (then it is rewritten, and a differing one's Numba files deleted)."""
    ok = _matches(path, source)
    if ok:
        return True
    if ok is False:
        cachedir.warn(f"cached kernel {path} differs from its generated source (modified, truncated or "
                      f"corrupt); rewritten and recompiled")
        cachefiles.discard(d, path.stem)
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
    _write_atomic(path, source)
    return False


def _load_module(path: Path, source: str) -> Any:
    """The kernel's module, executed from ``source`` (what lafuse generated, never the file's bytes)
    with ``path`` as its file name: Numba's cache locates and stamps the kernel by that file."""
    name = "lafuse_codegen_" + path.stem
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    try:
        exec(compile(source, str(path), "exec"), mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def load_without_registries(kernel: Any) -> None:
    """Let ``kernel``'s dispatcher load its cached machine code without refreshing the target context
    (generated kernels, and the primitives lafuse calls from Python, e.g. ``prims.kcombine``).

    Why: Numba's ``Cache.load_overload`` first refreshes the target context, which imports and installs
    every implementation registry (``numba.np.*``, ``numba.cpython.*``, ...). Only compiling needs
    them; the cached object code needs the NRT, which is initialized here. That refresh was 0.20-0.28 s
    of a process's first disk-cache load (measured in multiLogReg: first load 0.23 s with it, 0.07 s
    without). On a miss, the dispatcher compiles as usual, and Numba's compiler refreshes the contexts
    itself. A Numba without these internals keeps its own ``load_overload``."""
    cache: Any = getattr(kernel, "_cache", None)
    load = getattr(cache, "_load_overload", None)
    guard = getattr(cache, "_guard_against_spurious_io_errors", None)
    if cache is None or load is None or guard is None:
        return
    def load_overload(sig: Any, target_context: Any) -> Any:
        rtsys.initialize(target_context)
        with guard():
            return load(sig, target_context)

    cache.load_overload = load_overload


class PlanCache:
    """``get`` returns the compiled kernel of a canonical plan hash: from memory, else from the
    disk cache (Numba loads its cached machine code: a warm compile), else generated and compiled
    (cold). ``warm_up(kernel)`` runs the kernel once on empty inputs, which makes Numba compile or
    load it, so compile time is paid (and measured) here rather than in the first real call."""

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self._mem: OrderedDict[str, Loaded] = OrderedDict()
        self._lock = threading.RLock()
        self.stats = Stats()

    def lookup(self, key: str) -> Loaded | None:
        with self._lock:
            hit = self._mem.get(key)
            if hit is not None:
                self._mem.move_to_end(key)
            return hit

    def on_disk(self, key: str, *sources: str) -> bool:
        """The generated source of one of ``sources`` (the mode variants of plan ``key``) and Numba's
        index of its compiled code are on disk (a source alone may still be compiling in another
        process); one listing of the index files for all of them."""
        d = cache_dir()
        stems = {p.stem for p in (d / file_name(key, s) for s in sources) if p.exists()}
        return bool(stems) and any(p.name.split(".", 1)[0] in stems
                                   for p in (d / "__pycache__").glob(f"k_{key}_*.nbi"))

    def get(self, key: str, generate: Callable[[], str], warm_up: Callable[[Any], None],
            file_key: str | None = None) -> Loaded:
        """``key`` names the kernel in memory; ``file_key`` (default ``key``), the canonical plan hash,
        names its file and its per-kernel statistics (the mode variants of one plan share them)."""
        fkey = file_key or key
        with self._lock:
            hit = self.lookup(key)
            if hit is not None:
                self.stats.mem_hits += 1
                return hit
            t0 = time.perf_counter()
            source = generate()
            d = cache_dir()
            path = d / file_name(fkey, source)
            try:
                existed = _place(d, path, source)
            except OSError as e:  # e.g. the disk filled up: this process goes on in a private directory
                d = cachedir.abandon(f"writing {path.name} failed ({e.strerror or e})")
                path = d / path.name
                existed = _place(d, path, source)
            kernel = _load_module(path, source).kernel
            integrity.protect(kernel, d / cachedir.PYCACHE)
            load_without_registries(kernel)
            warm_up(kernel)
            dt = time.perf_counter() - t0
            cold = not existed or sum(kernel.stats.cache_misses.values()) > 0
            if cold:
                cachefiles.evict(d, cfgmod.get().cache_max_bytes, keep=path.stem)
            else:
                cachefiles.touch(path)
            rec = self.stats.per_kernel.setdefault(fkey, {"cold": 0.0, "warm": 0.0})
            if cold:
                self.stats.compiled += 1
                self.stats.compile_time_cold += dt
                rec["cold"] += dt
            else:
                self.stats.disk_hits += 1
                self.stats.compile_time_warm += dt
                rec["warm"] += dt
            loaded = Loaded(key, source, kernel, path)
            self._mem[key] = loaded
            while len(self._mem) > self.maxsize:
                self._mem.popitem(last=False)
            return loaded

    def clear_memory(self) -> None:
        """Forget the compiled kernels (and their modules: a later ``get`` loads from disk)."""
        with self._lock:
            for loaded in self._mem.values():
                sys.modules.pop("lafuse_codegen_" + loaded.path.stem, None)
            self._mem.clear()


class ByMode:
    """The kernel of one canonical plan as one Numba function per input mode (dense, CSR, ...), each
    loaded or compiled on its first use (``for_mode``): a run of dense inputs never compiles the
    sparse code. ``runner.launch`` calls the function of the mode it passes."""

    def __init__(self, key: str, source: str, cache: PlanCache, warm_up: Callable[[Any], None]) -> None:
        self.key = key
        self.source = source  # the generic source, every mode (numba_gen.specialize pins one)
        self.uses_blas = re.search(r"\bmm\(", source) is not None  # (prims.mm: BLAS per block)
        self._cache = cache
        self._warm_up = warm_up
        self._fns: dict[int, Any] = {}

    def for_mode(self, mode: int) -> Any:
        fn = self._fns.get(mode)
        if fn is None:
            fn = self._fns[mode] = self._cache.get(f"{self.key}/{mode}", lambda: specialize(self.source, mode),
                                                   self._warm_up, file_key=self.key).kernel
        return fn

    def loaded(self) -> bool:
        return bool(self._fns)

    def modes(self) -> set[int]:
        """The modes whose function this process compiled or loaded, i.e. the modes that ran."""
        return set(self._fns)
