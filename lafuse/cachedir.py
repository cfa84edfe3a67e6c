"""Which plan-cache directory a process uses, whether it is safe to, and the key that signs its files.

The plan cache (``lafuse/codegen/cache.py``) keeps generated kernels and Numba's compiled code of them
on disk, and Numba loads that code (pickles holding native code) into the process. So the directory is
used only if no other user can put files there: it must be a directory owned by this user, writable by
its owner and by nobody else (neither group nor world). ``LAFUSE_CODEGEN_CACHE=/tmp/shared`` (mode
1777) therefore fails the check, as does a directory of another user or one marked read-only; the
process then warns once and compiles into a private temporary directory (``mkdtemp``: mode 0700,
removed at exit). Why a directory rather than in-memory compiles: the kernels carry Numba's
``cache=True`` and Numba needs a real source file to compile them at all; a private directory keeps
one code path (the same verification, the same loader) and costs only this run's compiles. What the
check defends and what it does not is set out with the integrity check in
:mod:`lafuse.codegen.integrity`.

The key signs Numba's files (HMAC-SHA256). It lives in a per-user file *outside* the cache directory
(``$LAFUSE_CACHE_KEY``, else ``$XDG_CONFIG_HOME/lafuse/cache.key``, else ``~/.config/lafuse/cache.key``),
created with 32 random bytes and mode 0600 on first use; a key file that is not a regular file of
this user readable by it alone is not used (nor is a cache signed with it).

This module starts no Numba: the optimizer asks which directory to probe before it decides to load
the code generator.
"""

from __future__ import annotations

import atexit
import os
import stat
import sys
from pathlib import Path

from lafuse.config import codegen_cache_dir as configured
from lafuse.config import user_file

KEY_BYTES = 32
PYCACHE = "__pycache__"  # Numba's files of the kernels, beside their sources

_USABLE: dict[str, Path] = {}  # configured directory -> the directory this process uses for it
_PRIVATE: list[Path] = []  # this process's private directory, if it needed one
_KEYS: dict[str, tuple[bytes | None, str | None]] = {}  # key file -> (key, why it is not usable)
_EPHEMERAL = os.urandom(KEY_BYTES)  # signs the private directory when the key file is unusable
_WARNED: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr, once per process for the same message (a run meets the same bad file at
    every recompilation)."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"lafuse: warning: {message}", file=sys.stderr, flush=True)


def _euid() -> int:
    return os.geteuid()


def unsafe(path: Path, follow: bool = True) -> str | None:
    """Why ``path`` may not hold cached code (None: it may). ``follow=False`` for the directories
    lafuse creates itself, which must not be symlinks."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as e:
        return f"cannot inspect it ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    mode = f"mode {stat.S_IMODE(st.st_mode):04o}"
    if st.st_uid != _euid():
        return f"owned by uid {st.st_uid}, not by this user (uid {_euid()})"
    if st.st_mode & stat.S_IWOTH:
        return f"writable by all users ({mode})"
    if st.st_mode & stat.S_IWGRP:
        return f"writable by its group ({mode})"
    if not st.st_mode & stat.S_IWUSR:
        return f"read-only ({mode})"
    return None


def _prepare(d: Path) -> str | None:
    """Create ``d`` (mode 0700) and its Numba subdirectory if missing, and check both (None: usable)."""
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        return f"cannot create it ({e.strerror or e})"
    why = unsafe(d)
    if why is not None:
        return why
    sub = d / PYCACHE
    try:
        sub.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return f"cannot create {PYCACHE} in it ({e.strerror or e})"
    why = unsafe(sub, follow=False)
    if why is not None:
        return f"its {PYCACHE} is {why}"
    try:  # a read-only file system passes the mode check
        # (os.open, not tempfile: every run probes, and tempfile's import costs more than the probe)
        probe = sub / f".probe_{os.getpid()}_{id(sub):x}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as e:
        return f"not writable ({e.strerror or e})"
    key_file = key_path().absolute()
    if key_file == d.absolute() or d.absolute() in key_file.parents:
        return f"the key file {key_file} lies inside it"
    return user_key()[1]


def usable() -> Path:
    """The plan-cache directory of this process: the configured one if it passes the checks, else a
    private temporary directory (with one warning). Checked once per process and configured path."""
    conf = configured()
    d = _USABLE.get(str(conf))
    if d is None:
        why = _prepare(conf)
        if why is None:
            d = conf
        else:
            d = private()
            warn(f"plan cache {conf} not used: {why}; kernels are compiled into a private temporary "
                 f"directory for this process")
        _USABLE[str(conf)] = d
    return d


def abandon(reason: str) -> Path:
    """Stop using the configured directory for the rest of the process (a write into it failed)."""
    conf = configured()
    d = private()
    if _USABLE.get(str(conf)) != d:
        warn(f"plan cache {conf} not used from now on: {reason}; kernels are compiled into a private "
             f"temporary directory for this process")
        _USABLE[str(conf)] = d
    return d


def private() -> Path:
    """This process's own temporary plan cache (created once, removed at exit)."""
    if not _PRIVATE:
        import shutil  # deferred: tempfile and shutil load ~3 ms of stdlib; only this path needs them
        import tempfile  # deferred: tempfile (~3 ms), only when a file is written

        d = Path(tempfile.mkdtemp(prefix="lafuse-codegen-"))
        (d / PYCACHE).mkdir(mode=0o700)
        _PRIVATE.append(d)
        atexit.register(shutil.rmtree, d, True)
    return _PRIVATE[0]


def is_private(d: Path) -> bool:
    return bool(_PRIVATE) and d == _PRIVATE[0]


def forget() -> None:
    """Check the directories again at their next use (tests: a new process)."""
    _USABLE.clear()
    _KEYS.clear()
    _INDEXED.clear()


# --------------------------------------------------------------------------------------------- key

def key_path() -> Path:
    return user_file("LAFUSE_CACHE_KEY", "XDG_CONFIG_HOME", ".config", "cache.key")


def _read_key(path: Path) -> bytes:
    """The key in ``path``; ValueError says why the file may not be used."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid != _euid():
            raise ValueError(f"owned by uid {st.st_uid}, not by this user")
        if st.st_mode & 0o077:
            raise ValueError(f"readable or writable by other users (mode {stat.S_IMODE(st.st_mode):04o}; "
                             f"chmod 600 it)")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise ValueError(f"holds {len(data)} bytes, not {KEY_BYTES}")
    return data


def _create_key(path: Path) -> None:
    """A new random key at ``path`` (mode 0600), atomically: concurrent first runs agree on one key."""
    import tempfile  # deferred: tempfile (~3 ms), only when a file is written

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".cache.key.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process made it first: its key is the key
            pass
    finally:
        os.unlink(tmp)


def user_key(create: bool = True) -> tuple[bytes | None, str | None]:
    """This user's signing key, or None and why it cannot be used (created if missing)."""
    path = key_path()
    hit = _KEYS.get(str(path))
    if hit is not None:
        return hit
    try:
        if create and not os.path.lexists(path):
            _create_key(path)
        out: tuple[bytes | None, str | None] = (_read_key(path), None)
    except FileNotFoundError:
        return None, f"no key file {path} yet"
    except (OSError, ValueError) as e:
        out = (None, f"the key file {path} is not usable: {getattr(e, 'strerror', None) or e}")
    _KEYS[str(path)] = out
    return out


def key() -> bytes:
    """The key that signs and verifies Numba's files in this process: the user's, or (when the key file
    is unusable, so the process uses a private directory) one that lives as long as the process."""
    k = user_key()[0]
    return k if k is not None else _EPHEMERAL


TAG_BYTES = 32  # an HMAC-SHA256 tag in front of each signed file


def tag(name: str, payload: bytes, with_key: bytes | None = None) -> bytes:
    """The tag of a file named ``name`` (binding the name: one file's bytes cannot stand in for another's).
    (hashlib and hmac are imported here: a run that loads no kernel signs nothing.)"""
    import hashlib  # deferred: a run that loads no kernel signs nothing (hashlib ~2 ms)
    import hmac  # deferred: as in tag()

    return hmac.new(with_key if with_key is not None else key(), name.encode() + b"\0" + payload,
                    hashlib.sha256).digest()


def verified(name: str, raw: bytes, with_key: bytes | None = None) -> bytes | None:
    """The payload of a signed file's bytes ``raw``, or None when its tag is not this user's."""
    import hmac  # deferred: as in tag()

    head, payload = raw[:TAG_BYTES], raw[TAG_BYTES:]
    if len(raw) >= TAG_BYTES and hmac.compare_digest(head, tag(name, payload, with_key)):
        return payload
    return None


def read_signed(name: str) -> bytes | None:
    """The payload of the signed file ``name`` in this process's plan cache; None when it is missing,
    unreadable or its tag is not this user's (the caller then builds it again)."""
    try:
        raw = (usable() / name).read_bytes()
    except OSError:
        return None
    return verified(name, raw)


def write_signed(name: str, payload: bytes) -> Path:
    """Sign ``payload`` and put it in this process's plan cache as ``name`` (atomically, as
    replace_atomically does)."""
    path = usable() / name
    replace_atomically(path, tag(name, payload) + payload)
    return path


# the kinds of files kept here besides kernels: file name prefix, suffix, how many files are kept
PLAN_CODE = ("code_", ".marshal", 512)  # generated plan code (runtime.straight.compiled)
PARSED_AST = ("ast_", ".pickle", 256)  # parsed scripts (lang.parser)


def load_file(name: str) -> bytes | None:
    """``read_signed``, marking the file used now (its modification time: the order ``store_file``
    removes files in, and ``noatime`` mounts do not keep access times)."""
    payload = read_signed(name)
    if payload is not None:
        try:
            os.utime(usable() / name)
        except OSError:  # removed meanwhile: the payload was verified all the same
            pass
    return payload


def store_file(name: str, payload: bytes, prefix: str, suffix: str, max_files: int) -> None:
    """``write_signed``, then at most ``max_files`` files ``prefix*suffix`` kept, the least recently used
    removed. A failure (a full disk, a read-only directory) stores nothing: the caller builds it again
    next time."""
    try:
        d = write_signed(name, payload).parent
        files = cached_files(d, prefix, suffix)
        if len(files) > max_files:
            for p in sorted(files, key=lambda p: p.stat().st_mtime)[: len(files) - max_files]:
                p.unlink(missing_ok=True)
    except OSError:
        return


def cached_files(d: Path, prefix: str, suffix: str) -> list[Path]:
    """The files ``prefix*suffix`` in cache directory ``d`` (not symlinks)."""
    return [p for p in d.glob(f"{prefix}*{suffix}") if p.is_file() and not p.is_symlink()]


def indexed_kernels() -> frozenset[str]:
    """Canonical hashes of the kernels with a Numba index in this process's plan cache, listed once
    per process and directory (a cache holds thousands of files): the optimizer's probe before the
    code generator is loaded; kernels compiled later in the process are found by codegen.is_cached."""
    base = usable()
    keys = _INDEXED.get(str(base))
    if keys is None:
        try:
            names = os.listdir(base / PYCACHE)
        except OSError:
            names = []
        keys = _INDEXED[str(base)] = frozenset(n.split("_")[1] for n in names
                                               if n.startswith("k_") and n.endswith(".nbi"))
    return keys


_INDEXED: dict[str, frozenset[str]] = {}


def write_user_file(path: Path, data: bytes) -> None:
    """A file the user asked for (a plan picture): written whole or not at all (replace_atomically),
    with a new file's usual mode under the umask, not the temporary file's 0600."""
    replace_atomically(path, data, prefix=f".{path.name}.tmp_")
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def replace_atomically(path: Path, data: bytes, prefix: str = ".tmp_") -> None:
    """Put ``data`` at ``path`` through a temporary file (``prefix``: how ``lafuse cache clear`` finds a
    leftover one) in the same directory and ``os.replace``: a reader finds the old file or the new
    one, concurrent writers leave the last one's, and a failure (OSError) leaves no temporary file."""
    import tempfile  # deferred: tempfile (~3 ms), only when a file is written

    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
