"""Deferred compilation: kernels that would pay off from the on-disk plan cache but not cold.

The cost-based selector leaves a fused operator unfused when its expected savings over a run do not
pay for a cold compile (~1.3 s, plus ~1.6 s for Numba's start in a fresh process) but would pay for
a load from the disk cache (~0.02 s). Without help such a kernel would never reach the cache: no run
compiles it, so every later run decides the same way. ``lafuse run`` therefore hands these plans
(``fusion.DEFERRED``) to a detached, low-priority process after the script has finished; it
compiles them into the disk cache, and the next run of the script fuses them at load cost.

The same process calibrates the machine (``lafuse calibrate --quick``, ~1.5 s) when the run decided
on the built-in default profile: those defaults are rates of a slow machine (3-7x below this
project's, measured), so they overstate what fusion saves against Numba's start, which is measured
in this machine's seconds (lafuse's l2svm at 10^6 x 10 fused to x1.24 of its unfused time on the
defaults). Calibrating runs before the compiles, so the two do not skew each other's measurement.

The job travels as a pickle in the cache directory (written by this user, read once, deleted).
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


def spawn(plans: dict[str, Any], calibrate: Path | None = None) -> subprocess.Popen[bytes] | None:
    """Start the background compile of ``plans`` (canonical hash -> CPlan), after a quick calibration
    saved to ``calibrate`` if given; None if there is nothing to do."""
    if not plans and calibrate is None:
        return None
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=".deferred_", suffix=".pkl", dir=d)
    with os.fdopen(fd, "wb") as f:
        pickle.dump({"plans": list(plans.values()), "calibrate": calibrate}, f)
    env = dict(os.environ, LAFUSE_CODEGEN_CACHE=str(d))
    return subprocess.Popen([sys.executable, "-m", "lafuse.codegen.deferred", path], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _calibrate(target: Path) -> None:
    """Measure this machine (quick) into ``target``, unless a profile appeared there meanwhile (another
    run's background job, or the user's ``lafuse calibrate``)."""
    from lafuse.cost import profile
    from lafuse.cost.calibrate import calibrate

    if target.is_file():
        return
    try:
        profile.save(calibrate(quick=True), target)
    except Exception:  # noqa: BLE001 - nobody reads this process's output: the compiles still run, and
        pass  # the defaults stay (the next run that decides on them asks again)


def compile_all(path: Path) -> int:
    """Run the job of the pickle at ``path``: the calibration it asks for, then a compile of every
    plan that is not cached yet; returns how many plans were compiled."""
    from lafuse.codegen import compile_plan, is_cached

    n = 0
    try:  # the pickle stays until the end: while it exists, a job is pending (see ``wait``)
        with open(path, "rb") as f:
            job = pickle.load(f)
        if job["calibrate"] is not None:
            _calibrate(Path(job["calibrate"]))
        for plan in job["plans"]:
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
