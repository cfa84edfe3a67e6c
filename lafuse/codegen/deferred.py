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

The job (the plans) travels to the background process over its stdin pipe, never through a file: a
pickle on disk would run whatever its writer put in it. What stays on disk is a marker per running job,
``.deferred_<pid>.json`` in the cache directory (JSON: pid, kernels, calibration, start time), which
``pending()`` and ``--wait`` read; the background process deletes it when it ends, and a marker whose
process is gone or older than ``STALE_AFTER`` does not count. One switch turns every background job
off: ``lafuse run --no-background``, env ``LAFUSE_BACKGROUND=0`` or config ``background`` (CI, batch
jobs); the finer switches ``codegen_defer`` and ``auto_calibrate`` still apply each to its part.
A kernel counts as cached only once Numba's index exists (``PlanCache.on_disk``), so a run that
starts while the background compile is still working decides as if the kernel were not there.

The background process is ``python -m lafuse.background --job`` (lafuse/background.py: it calibrates
when asked, then runs ``lafuse.background.compile_all``); ``python -m lafuse.background --wait`` blocks until no job is
pending.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lafuse import cachedir, cachefiles
from lafuse import config as cfgmod
from lafuse.feedback.observed import write_json

NICE = 10  # the background compile yields the CPU to foreground work
STALE_AFTER = cachefiles.STALE_AFTER  # s, a pending compile older than this is taken for dead


def marker(d: Path, pid: int) -> Path:
    return d / f".deferred_{pid}.json"


def spawn(plans: dict[str, Any], calibrate: Path | None = None,
          max_bytes: int | None = None) -> subprocess.Popen[bytes] | None:
    """Start the background compile of ``plans`` (canonical hash -> (CPlan, input sizes), as
    ``fusion.DEFERRED`` holds them), after a quick calibration
    saved to ``calibrate`` if given; None if there is nothing to do, or if this process's plan cache is
    a private temporary one (removed at exit: compiling into it would be wasted)."""
    if not plans and calibrate is None:
        return None
    d = cachedir.usable()
    if cachedir.is_private(d):
        return None
    job = pickle.dumps({"plans": list(plans.values()), "calibrate": None if calibrate is None else str(calibrate),
                        "cache_max_bytes": cfgmod.get().cache_max_bytes if max_bytes is None else max_bytes})
    env = dict(os.environ, LAFUSE_CODEGEN_CACHE=str(d))
    proc = subprocess.Popen([sys.executable, "-m", "lafuse.background", "--job"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.stdin is not None
    try:  # the marker before the job: the process waits for its job, so it cannot end before the marker
        write_json(marker(d, proc.pid), {"pid": proc.pid, "kernels": len(plans), "calibrate": calibrate is not None,
                                          "started": time.time()})
        proc.stdin.write(job)
        proc.stdin.close()
    except BaseException:
        proc.kill()
        marker(d, proc.pid).unlink(missing_ok=True)
        raise
    return proc


def pending(max_age: float = STALE_AFTER) -> list[Path]:
    """Markers of background jobs still running on this cache (younger than ``max_age`` seconds and
    their process alive)."""
    return [p for _, p in cachefiles.pending(cachedir.usable(), max_age)]


def wait(timeout: float = STALE_AFTER) -> bool:
    """Block until no background compile is pending (benchmarks: a measurement must not share the
    CPU with one); False on timeout."""
    end = time.time() + timeout
    while pending():
        if time.time() > end:
            return False
        time.sleep(0.1)
    return True
