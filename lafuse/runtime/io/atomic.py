"""Replacing a data file and its ``.mtd`` together, so that a failed or killed write never leaves a
half-written file under the target's name.

Why: writing in place truncates the old file first, so a kill mid-write leaves part of the new data,
and a failure at the ``.mtd`` (a directory in the way, a full disk) leaves new data beside the old
metadata. Here every new file is written in full to a hidden temporary file in the target's directory
(``.NAME.PID.RANDOM.lafuse-tmp``: readers of part-file directories skip names starting with '.'),
flushed and fsynced; then the targets are checked, hard-linked to hidden backups, and replaced with
``os.replace`` (atomic on POSIX) in order, data first and the ``.mtd`` last; then the directory is
fsynced (so the renames survive a power loss) and the backups are dropped. A failure anywhere puts the
old files back from the backups and removes the temporaries. A kill leaves at most hidden temporaries
(removed by the next write of the same target once their process is gone) and, in the instant
between the two renames, new data beside the old ``.mtd``, which the data check of ``lafuse/mtd.py``
reports when the pair is read.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from lafuse.errors import DMLRuntimeError

TMP_SUFFIX = ".lafuse-tmp"
OLD_SUFFIX = ".lafuse-old"


class HashingWriter:
    """A binary sink that counts and checksums what passes through (the ``.mtd``'s data check)."""

    def __init__(self, f: BinaryIO):
        self._f = f
        self.nbytes = 0
        self.crc = 0

    def write(self, b: bytes | bytearray | memoryview) -> int:
        self._f.write(b)
        n = memoryview(b).nbytes
        self.nbytes += n
        self.crc = zlib.crc32(b, self.crc)
        return n

    def text(self, s: str) -> None:
        self.write(s.encode("utf-8"))


@dataclass
class Staged:
    target: str
    tmp: str | None  # None: the target is removed
    backup: str | None = None
    replaced: bool = False
    existed: bool = False


def _error(target: str, e: OSError) -> DMLRuntimeError:
    return DMLRuntimeError(f"cannot write '{target}': {e.strerror or e}")


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # not Linux: read it the old way
    os.umask(old)
    return old


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, but another user's
        return True
    return True


def remove_stale(target: str) -> None:
    """Temporaries and backups of ``target`` whose writing process is gone (it was killed)."""
    d, base = os.path.split(os.path.abspath(target))
    prefix = "." + base + "."
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n.endswith((TMP_SUFFIX, OLD_SUFFIX))]
    except OSError:
        return
    for n in names:
        pid = n[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(d, n))


def _hidden(target: str, suffix: str) -> str:
    d, base = os.path.split(os.path.abspath(target))
    return os.path.join(d, f".{base}.{os.getpid()}.{secrets.token_hex(4)}{suffix}")


class AtomicFiles:
    """``with AtomicFiles() as tx: tx.stage(path, fill); tx.stage(path + ".mtd", fill2)`` replaces
    both files when the block ends without an error, in staging order, and neither otherwise."""

    def __init__(self) -> None:
        self._staged: list[Staged] = []

    def __enter__(self) -> AtomicFiles:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._commit()
        else:
            self._discard()

    def stage(self, target: str, fill: Callable[[HashingWriter], None]) -> HashingWriter:
        """Write ``target``'s new content to a temporary file now; returns its length and CRC-32."""
        target = _resolve(target)
        if os.path.isdir(target):
            raise DMLRuntimeError(f"cannot write '{target}': it is a directory")
        d = os.path.dirname(target)
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise _error(target, e) from None
        if os.path.exists(target) and not os.path.isfile(target):
            return _write_direct(target, fill)  # a device or a pipe (/dev/null): nothing to replace
        remove_stale(target)
        tmp = _hidden(target, TMP_SUFFIX)
        entry = Staged(target, tmp)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise _error(target, e) from None
        self._staged.append(entry)
        try:
            with os.fdopen(fd, "wb") as f:
                mode = _mode(target)
                os.fchmod(f.fileno(), mode)
                sink = HashingWriter(f)
                fill(sink)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise _error(target, e) from None
        return sink

    def remove(self, target: str) -> None:
        """Drop ``target`` (if it exists) at the commit, after the files staged before."""
        self._staged.append(Staged(_resolve(target), None))

    def _discard(self) -> None:
        for s in self._staged:
            if s.tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(s.tmp)

    def _commit(self) -> None:
        try:
            for s in self._staged:  # before anything is replaced: what would make a rename fail
                if os.path.isdir(s.target) and not os.path.islink(s.target):
                    raise DMLRuntimeError(f"cannot write '{s.target}': it is a directory")
            for s in self._staged:
                s.existed = os.path.lexists(s.target)
                if s.existed:
                    s.backup = _hidden(s.target, OLD_SUFFIX)
                    try:
                        os.link(s.target, s.backup, follow_symlinks=False)
                    except OSError:  # no hard links here (some network file systems): no rollback
                        s.backup = None
            for s in self._staged:
                try:
                    if s.tmp is not None:
                        os.replace(s.tmp, s.target)
                    elif s.existed:
                        os.unlink(s.target)
                except OSError as e:
                    raise _error(s.target, e) from None
                s.replaced = True
        except BaseException:
            self._rollback()
            raise
        _fsync_dirs(self._staged)
        for s in self._staged:
            if s.backup is not None:
                with contextlib.suppress(OSError):
                    os.unlink(s.backup)

    def _rollback(self) -> None:
        for s in reversed(self._staged):
            with contextlib.suppress(OSError):
                if s.replaced and s.backup is not None:
                    os.replace(s.backup, s.target)
                    s.backup = None
                elif s.replaced and not s.existed:
                    os.unlink(s.target)
        for s in self._staged:
            for p in (s.tmp, s.backup):
                if p is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(p)


def _write_direct(target: str, fill: Callable[[HashingWriter], None]) -> HashingWriter:
    try:
        with open(target, "wb") as f:
            sink = HashingWriter(f)
            fill(sink)
    except OSError as e:
        raise _error(target, e) from None
    return sink


def _resolve(target: str) -> str:
    """A symlinked target is written where the link points (the link stays)."""
    p = os.path.abspath(target)
    return os.path.realpath(p) if os.path.islink(p) else p


def _mode(target: str) -> int:
    """Keep an existing file's permissions; a new file gets what open() would give it."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _fsync_dirs(staged: list[Staged]) -> None:
    """Make the renames durable; best effort (some file systems cannot fsync a directory)."""
    for d in sorted({os.path.dirname(s.target) for s in staged}):
        with contextlib.suppress(OSError):
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
