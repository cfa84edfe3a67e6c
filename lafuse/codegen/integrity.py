"""Numba's cache files of lafuse's kernels are signed when written and verified before Numba unpickles them.

Why: Numba's on-disk cache is an index (``*.nbi``, a pickle) and compiled code (``*.nbc``, a pickled
object holding native code); Numba unpickles both without checking where they came from, and a
pickle executes whatever its author wants. Anyone who can write these files runs code in every later
``lafuse run``. Each kernel's source is a second way in: a ``.py`` whose module-level code runs when
it is imported.

Threat model, and what defends against what:

* Other local users. The cache directory is used only if it is this user's, writable by nobody else
  (:mod:`lafuse.cachedir`; otherwise a private temporary directory). That keeps them from writing,
  replacing or renaming any file in it, so they cannot plant code, and also not the JSON run feedback
  (``observed.json``, ``prestart.json``), which is not signed. It does not cover the directories
  above the cache: whoever may write an ancestor can swap the whole directory.
* Files that are modified, truncated or not written by this lafuse: a cache directory copied or
  synced from elsewhere, a volume another machine (or its root) writes, a crash mid-write, another
  Numba or tool writing into ``__pycache__``, a swapped directory (above). Numba's files carry an
  HMAC-SHA256 over their name and content, under a per-user key kept outside the cache directory
  (0600, ``lafuse.cachedir.key_path``); the bytes Numba unpickles are the very bytes whose tag was
  checked (this class reads each file once, checks, then unpickles from memory), so there is no window
  between check and use for these files. A bad or missing tag deletes the kernel's Numba files and
  the kernel is compiled again (one warning). The tag binds the file name, so one kernel's valid code
  cannot stand in for another's. Kernel sources are not signed: the plan cache regenerates the source,
  compares it with the file, rewrites a file that differs (one warning), and executes the regenerated
  text, never the file's, so a planted ``.py`` never runs.
* Not defended: this user's own processes and root (they can read the key and write anything the
  user can, including lafuse itself), and code Numba caches outside the plan cache (the primitives'
  files under the installed package's ``__pycache__``, which has the trust of the package's own
  ``.pyc`` files). Residual TOCTOU: a kernel's source file is checked and then read by Numba for its
  time stamp only; the time stamp decides whether the index is current, never what code runs.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

from numba.core.caching import IndexDataCacheFile, NullCache

from lafuse import cachedir


class SignedCacheFile(IndexDataCacheFile):  # type: ignore[misc]
    """Numba's index/data file pair with each file prefixed by an HMAC of its name and content."""

    def __init__(self, cache_path: str, filename_base: str, source_stamp: Any, key: bytes,
                 warn: bool = True) -> None:
        super().__init__(cache_path, filename_base, source_stamp)
        self._key = key
        self._filename_base = filename_base
        self._warn = warn


    def _read_verified(self, path: str) -> bytes | None:
        """The content of ``path`` if its tag is valid; else the kernel's Numba files are deleted
        (FileNotFoundError propagates: a missing file is no corruption)."""
        with open(path, "rb") as f:
            raw = f.read()
        payload = cachedir.verified(os.path.basename(path), raw, self._key)
        if payload is not None:
            return payload
        self._discard(path, "not signed by this user's lafuse (modified, truncated or foreign)")
        return None

    def _discard(self, path: str, why: str) -> None:
        if self._warn:
            cachedir.warn(f"{path}: {why}; deleted with the kernel's other compiled files, recompiling")
        prefix = self._filename_base + "."
        try:
            names = [n for n in os.listdir(self._cache_path) if n.startswith(prefix)]
        except OSError:
            names = []
        for n in names:
            try:
                os.unlink(os.path.join(self._cache_path, n))
            except OSError:
                pass

    def _write_signed(self, path: str, payload: bytes) -> None:
        try:
            with self._open_for_write(path) as f:
                f.write(cachedir.tag(os.path.basename(path), payload, self._key))
                f.write(payload)
        except OSError as e:  # e.g. disk full: the kernel runs, it is compiled again next time
            cachedir.warn(f"compiled kernel not saved to {path}: {e.strerror or e}")

    def _load_index(self) -> dict[Any, str]:
        try:
            payload = self._read_verified(self._index_path)
        except FileNotFoundError:
            return {}
        if payload is None:
            return {}
        try:
            f = io.BytesIO(payload)
            version = pickle.load(f)
            if version != self._version:
                return {}
            stamp, overloads = pickle.loads(f.read())
        except Exception as e:  # noqa: BLE001 - signed by us yet unreadable: discard it like a bad tag
            self._discard(self._index_path, f"unreadable ({type(e).__name__})")
            return {}
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads: dict[Any, str]) -> None:
        payload = pickle.dumps(self._version, protocol=-1) + self._dump((self._source_stamp, overloads))
        self._write_signed(self._index_path, payload)

    def _load_data(self, name: str) -> Any:
        path = self._data_path(name)
        payload = self._read_verified(path)  # FileNotFoundError is an OSError: Numba's load() compiles
        if payload is None:
            raise FileNotFoundError(path)
        try:
            return pickle.loads(payload)
        except Exception as e:  # noqa: BLE001
            self._discard(path, f"unreadable ({type(e).__name__})")
            raise FileNotFoundError(path) from e

    def _save_data(self, name: str, data: Any) -> None:
        self._write_signed(self._data_path(name), self._dump(data))


def protect(dispatcher: Any, cache_path: Path | None = None, warn: bool = True) -> None:
    """Make ``dispatcher`` (an ``@njit(cache=True)`` function not yet compiled) keep its cache files in
    ``cache_path`` (default: where Numba put them) signed with this process's key. A Numba whose cache
    internals differ gets no disk cache at all: compiling every time is slower, loading unverified
    code is not an option."""
    cache: Any = getattr(dispatcher, "_cache", None)
    old: Any = getattr(cache, "_cache_file", None)
    if cache is None or isinstance(cache, NullCache):
        return
    try:
        path = str(cache_path) if cache_path is not None else old._cache_path
        new = SignedCacheFile(path, cache._impl.filename_base, old._source_stamp, cachedir.key(), warn)
    except AttributeError:
        dispatcher._cache = NullCache()
        return
    cache._cache_path = path
    cache._cache_file = new
