"""Start Numba in a background thread while the script is parsed, compiled and begins to run.

Why: a process that loads kernels from the disk cache pays Numba's start once, importing Numba and
llvmlite (0.15-0.2 s here) before its first kernel. When the previous run of the same script loaded
kernels, this one will too, so ``lafuse run`` begins that import at launch on a second thread;
parsing, compilation and the NumPy operations before the first fused operator run meanwhile.
NumPy releases the GIL inside its operations, so the import overlaps with them; while it runs, the
interpreter's switch interval is lowered, so the main thread gets the GIL back within 0.2 ms of
asking instead of 5 ms. Measured on lafuse's l2svm at 10^6 x 10 with 2 kernels (interleaved runs,
medians): time inside the script 1.17 s without (4 runs), 0.94 s with (3 runs).

Which scripts: ``prestart.json`` next to the plan cache maps a digest of the script's text and the
fusion policy to the number of kernels its last run under that policy used (whether a run uses
kernels depends on the policy: a cost-based run that follows a fuse-all run of the same script
often uses none, and an import it does not need slows its main thread, 37 -> 89 ms measured on a
50 ms script). The thread imports only Numba (never a lafuse module, so it
cannot deadlock on an import lock the main thread holds); importing ``lafuse.codegen`` later waits
for it. Config ``numba_prestart``, env ``LAFUSE_NUMBA_PRESTART=0`` turns it off.

A first run of a script (nothing recorded) that reads at least COMPILE_READ_BYTES of matrices from
files is expected to compile kernels: fusion pays on data that size. Its thread starts after the
static compile (which knows the sizes from the files' metadata) and also loads what Numba's compiler
needs before its first compile, while the main thread reads the files.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from typing import Any

from lafuse.feedback.observed import cache_path, read_feedback, write_json

FILE = "prestart.json"
MAX_SCRIPTS = 1024  # scripts remembered (the most recently run)
SWITCH_INTERVAL = 2e-4  # s, the interpreter's switch interval while the import runs
COMPILE_READ_BYTES = 32 << 20  # a first run reading this much is expected to compile kernels

_THREAD: list[threading.Thread] = []
_WHY: list[str] = []  # why it was started (--stats)


def _key(text: str, policy: str) -> str:
    return hashlib.sha256(f"{policy}\0{text}".encode()).hexdigest()[:24]


def _parse(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"entry {k!r} is {json.dumps(v)}, not a kernel count")
    return {str(k): v for k, v in raw.items()}


def _read() -> dict[str, int]:
    """The file's counts (a corrupt file is deleted with a warning: observed.read_feedback)."""
    return read_feedback(cache_path(FILE), _parse) or {}


def wanted(text: str, policy: str) -> bool:
    """The last run of this script under this fusion policy used kernels (so this one will start Numba
    anyway)."""
    return _read().get(_key(text, policy), 0) > 0


def record(text: str, policy: str, kernels: int) -> None:
    """Remember how many kernels this run of the script used (atomically; the newest entries win)."""
    old = _read()
    key = _key(text, policy)
    if old.get(key) == kernels:
        return
    data = {k: v for k, v in old.items() if k != key}
    data[key] = int(kernels)
    if len(data) > MAX_SCRIPTS:
        data = dict(list(data.items())[-MAX_SCRIPTS:])
    write_json(cache_path(FILE), data)


def _import_numba(compile_ready: bool) -> None:
    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        import numba  # noqa: F401
        from numba.core.registry import cpu_target
        from numba.core.runtime import rtsys

        rtsys.initialize(cpu_target.target_context)
        if compile_ready:
            from numba.core.compiler_lock import global_compiler_lock

            with global_compiler_lock:  # (what Numba's compiler does first, under the same lock)
                cpu_target.typing_context.refresh()
                cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - the main thread's own import reports any real problem
        pass
    finally:
        sys.setswitchinterval(old)


def first_run(text: str, policy: str) -> bool:
    """No run of this script under this fusion policy has been recorded."""
    return _key(text, policy) not in _read()


def start(compile_ready: bool = False, why: str = "the script's last run used kernels") -> None:
    """Begin importing Numba on a background thread (once per process); ``compile_ready`` also loads
    the implementation registries Numba's compiler installs before its first compile (0.3-0.4 s of
    a process's first cold compile, measured in ``sum(X * Y * Z)``), for a run expected to compile."""
    if not _THREAD and "numba" not in sys.modules:
        _WHY.append(why)
        t = threading.Thread(target=_import_numba, args=(compile_ready,), name="lafuse-numba-start",
                             daemon=True)
        _THREAD.append(t)
        t.start()


def started() -> bool:
    return bool(_THREAD)


def reason() -> str:
    """Why the background start began ("" if it did not)."""
    return _WHY[0] if _WHY else ""


def join() -> None:
    """Wait for the background import (before the process exits: never end mid-import)."""
    for t in _THREAD:
        t.join()
