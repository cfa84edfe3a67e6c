"""Start Numba (and SciPy's sparse module) in a background thread while the script is parsed,
compiled and begins to run.

Why: a process that loads kernels from the disk cache pays Numba's start once, importing Numba,
llvmlite and the code generator (0.26-0.34 s here, measured inside ``lafuse run``) before its first
kernel. When the previous run of the same script loaded kernels, this one will too, so ``lafuse run`` begins that import at launch on a second thread;
parsing, compilation and the NumPy operations before the first fused operator run meanwhile.
NumPy releases the GIL inside its operations, so the import overlaps with them; while it runs, the
interpreter's switch interval is lowered, so the main thread gets the GIL back within 0.2 ms of
asking instead of 5 ms. Measured on lafuse's l2svm at 10^6 x 10 with 2 kernels (interleaved runs,
medians): time inside the script 1.17 s without (4 runs), 0.94 s with (3 runs).

Which scripts: ``prestart.json`` next to the plan cache maps a digest of the script's text and the
fusion policy to the number of kernels its last run under that policy used (whether a run uses
kernels depends on the policy: a cost-based run that follows a fuse-all run of the same script
often uses none, and an import it does not need slows its main thread, 37 -> 89 ms measured on a
50 ms script). The thread imports only Numba and SciPy (never a lafuse module, so it cannot
deadlock on an import lock the main thread holds); importing ``lafuse.codegen`` later waits for it.
Config ``numba_prestart``, env ``LAFUSE_NUMBA_PRESTART=0`` turns it off.

SciPy's sparse module the same way (record SPARSE): lafuse imports it on the first sparse value
(lafuse.sparse), and that import, 0.18-0.25 s, landed inside the run, e.g. in KMeans' first
``D <= rowMins(D)`` (a CSR result): 0.245 s for that call, 8-12 ms for the next ones. It is begun at
launch when the script's last run used sparse values. One thread runs the imports in turn.

A first run (nothing recorded) starts nothing: guessing from the size of its input files was tried
and dropped. A first run that imported Numba for nothing ran slower (GLM at 1e5 x 100: 0.85 s,
0.50-0.58 s without), and an import under way lowers the start a first kernel is charged
(fusion.optimizer._not_worth_compiling), which made the cost-based policy fuse GLM's row kernels, slower
than unfused (0.81 s against 0.32 s), and then record kernels for the next run.
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
SPARSE = "scipy.sparse"  # the record of whether a run used SciPy's sparse module (not a fusion policy)

_THREAD: list[threading.Thread] = []


def _key(text: str, policy: str) -> str:
    return hashlib.sha256(f"{policy}\0{text}".encode()).hexdigest()[:24]


def _parse(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"entry {k!r} is {json.dumps(v)}, not a kernel count")
    return {str(k): v for k, v in raw.items()}


_READ: dict[str, Any] = {}  # the file's counts as last parsed: "at" (path, mtime, size) -> "counts"


def _read() -> dict[str, int]:
    """The file's counts (a corrupt file is deleted with a warning: observed.read_feedback), parsed
    again only when the file changed: the Python API asks at every new script it compiles."""
    path = cache_path(FILE)
    try:
        st = path.stat()
        at: Any = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        at = None
    if at is not None and _READ.get("at") == at:
        return _READ["counts"]  # type: ignore[no-any-return]  # (callers only read it)
    counts = read_feedback(path, _parse) or {}
    _READ.update(at=at, counts=counts)
    return counts


def wanted(text: str, policy: str) -> bool:
    """The last run of this script under this fusion policy used kernels (so this one will start Numba
    anyway)."""
    return _read().get(_key(text, policy), 0) > 0


def record(texts: list[str], counts: dict[str, int]) -> None:
    """Remember what this run of the scripts used, by record name (a fusion policy: its kernels;
    SPARSE: 1 if it used sparse matrices), atomically, in one write; the newest entries win."""
    old = _read()
    new = {_key(text, name): int(n) for text in texts for name, n in counts.items()}
    if all(old.get(k) == v for k, v in new.items()):
        return
    data = {k: v for k, v in old.items() if k not in new}
    data.update(new)
    if len(data) > MAX_SCRIPTS:
        data = dict(list(data.items())[-MAX_SCRIPTS:])
    write_json(cache_path(FILE), data)


def _import_numba() -> None:
    import numba  # noqa: F401
    from numba.core.registry import cpu_target  # deferred: Numba, imported by the background start itself
    from numba.core.runtime import rtsys

    rtsys.initialize(cpu_target.target_context)


def _import_sparse() -> None:
    import scipy.sparse  # noqa: F401

    # the format optimizer and the profile it prices with: a plan with a sparse value weighs its formats
    import lafuse.cost.profile  # noqa: F401
    import lafuse.plan.layout.local  # noqa: F401


_JOBS: dict[str, Any] = {"sparse": _import_sparse, "numba": _import_numba}
_LOCK = threading.Lock()
_PENDING: list[str] = []
_SUBMITTED: dict[str, str] = {}  # job -> why
_RUNNING: list[bool] = [False]


def _worker() -> None:
    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        while True:
            with _LOCK:
                if not _PENDING:
                    _RUNNING[0] = False
                    return
                job = _PENDING.pop(0)
            try:
                _JOBS[job]()
            except Exception:  # noqa: BLE001 - the main thread's own import reports any real problem
                pass
    finally:
        sys.setswitchinterval(old)


def _submit(job: str, why: str) -> None:
    """Queue an import for the one background thread (started if none runs); each job once."""
    with _LOCK:
        if job in _SUBMITTED:
            return
        _SUBMITTED[job] = why
        _PENDING.append(job)
        if _RUNNING[0]:
            return
        _RUNNING[0] = True
    t = threading.Thread(target=_worker, name="lafuse-prestart", daemon=True)
    _THREAD.append(t)
    t.start()


def start(why: str = "the script's last run used kernels") -> None:
    """Begin importing Numba on the background thread (once per process)."""
    if "numba" not in sys.modules:
        _submit("numba", why)


def start_sparse(why: str) -> None:
    """Begin importing SciPy's sparse module on the background thread (once per process)."""
    if "scipy.sparse" not in sys.modules:
        _submit("sparse", why)


def started() -> bool:
    """Numba's import was begun in the background."""
    return "numba" in _SUBMITTED


def reason() -> str:
    """Why Numba's background start began ("" if it did not)."""
    return _SUBMITTED.get("numba", "")


def join() -> None:
    """Wait for the background import (before the process exits: never end mid-import)."""
    for t in _THREAD:
        t.join()
