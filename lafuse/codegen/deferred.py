"""Deferred compilation: kernels that would pay off from the on-disk plan cache but not cold.

The cost-based selector leaves a fused operator unfused when its expected savings over a run do not
pay for a cold compile (~1.3 s, plus ~1.6 s for Numba's start in a fresh process) but would pay for
a load from the disk cache (~0.02 s). Without help such a kernel would never reach the cache: no run
compiles it, so every later run decides the same way. ``lafuse run`` therefore hands these plans
(``fusion.DEFERRED``) to a detached, low-priority process after the script has finished; it
compiles them into the disk cache, and the next run of the script fuses them at load cost.

The plans travel as a pickle in the cache directory (written by this user, read once, deleted).
A kernel counts as cached only once Numba's index exists (``PlanCache.on_disk``), so a run that
starts while the background compile is still working decides as if the kernel were not there.

    python -m lafuse.codegen.deferred PLANS.pkl     # what the background process runs
    python -m lafuse.codegen.deferred --wait        # block until no background compile is pending
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lafuse.codegen.cache import cache_dir

NICE = 10  # the background compile yields the CPU to foreground work
STALE_AFTER = 600.0  # s, a pending compile older than this is taken for dead


def spawn(plans: dict[str, Any]) -> subprocess.Popen[bytes] | None:
    """Start the background compile of ``plans`` (canonical hash -> CPlan); None if there is none."""
    if not plans:
        return None
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=".deferred_", suffix=".pkl", dir=d)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(list(plans.values()), f)
    env = dict(os.environ, LAFUSE_CODEGEN_CACHE=str(d))
    return subprocess.Popen([sys.executable, "-m", "lafuse.codegen.deferred", path], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def compile_all(path: Path) -> int:
    """Compile every plan of the pickle at ``path`` that is not cached yet; returns how many."""
    from lafuse.codegen import compile_plan, is_cached

    n = 0
    try:  # the pickle stays until the end: while it exists, a compile is pending (see ``wait``)
        with open(path, "rb") as f:
            plans = pickle.load(f)
        for plan in plans:
            if not is_cached(plan):
                compile_plan(plan)
                n += 1
    finally:
        path.unlink(missing_ok=True)
    return n


def pending(max_age: float = STALE_AFTER) -> list[Path]:
    """Plan pickles of background compiles still running (younger than ``max_age`` seconds: an older
    one belongs to a process that died)."""
    now = time.time()
    out = []
    for p in cache_dir().glob(".deferred_*.pkl"):
        try:
            if now - p.stat().st_mtime < max_age:
                out.append(p)
        except OSError:  # finished meanwhile
            pass
    return out


def wait(timeout: float = STALE_AFTER) -> bool:
    """Block until no background compile is pending (benchmarks: a measurement must not share the
    CPU with one); False on timeout."""
    end = time.time() + timeout
    while pending():
        if time.time() > end:
            return False
        time.sleep(0.1)
    return True


def main(argv: list[str]) -> int:
    if argv == ["--wait"]:
        return 0 if wait() else 1
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        os.nice(NICE)
    except OSError:  # pragma: no cover - not permitted: compile at normal priority
        pass
    compile_all(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
