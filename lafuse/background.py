"""The background process a run leaves behind (codegen.deferred starts it, detached and niced):

    python -m lafuse.background --job     # the job on stdin: calibrate if asked, then compile kernels
    python -m lafuse.background --wait    # block until no background job is pending (benchmarks, tests)

Calibration runs first, so the compiles do not skew its measurement. Here, above the pipeline, because
calibrating runs the compiler and the interpreter (lafuse.calibrate), and compiling a kernel in its
mode runs the runtime's fused-operator runners (runtime.local.fused), which the code generator below
them must not import.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any

from lafuse import cachedir
from lafuse import config as cfgmod
from lafuse.calibrate import calibrate
from lafuse.codegen import deferred
from lafuse.cost import profile


def calibrate_into(target: Path) -> None:
    """Measure this machine (quick) into ``target``, unless a valid profile appeared there meanwhile
    (another run's background job, or the user's ``lafuse calibrate``); an invalid one is replaced."""
    if profile.valid(target):
        return
    try:
        profile.save(calibrate(quick=True), target)
    except Exception:  # noqa: BLE001 - nobody reads this process's output: the compiles still run, and
        pass  # the defaults stay (the next run that decides on them asks again)


def compile_all(job: dict[str, Any]) -> int:
    """Run a job's compiles (its calibration, ``job["calibrate"]``, is done before): every plan that
    is not cached yet, in the mode its recorded input sizes will run (runtime.local.fused.predict_mode);
    returns how many plans were compiled. ``job["plans"]``: (plan, input sizes) pairs, the sizes (rows,
    cols, CSR) by plan position or None (the dense mode)."""
    from lafuse.runtime.local.fused import precompile  # deferred: Numba, not needed by --wait

    n = 0
    with cfgmod.using(cache_max_bytes=int(job.get("cache_max_bytes", cfgmod.get().cache_max_bytes))):
        for plan, inputs in job["plans"]:
            n += precompile(plan, inputs)
    return n


def main(argv: list[str]) -> int:
    if argv == ["--wait"]:
        return 0 if deferred.wait() else 1
    if argv != ["--job"]:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        os.nice(deferred.NICE)
    except OSError:  # pragma: no cover - not permitted: work at normal priority
        pass
    marker = deferred.marker(cachedir.usable(), os.getpid())
    try:  # the job comes from the lafuse run that started this process, over the pipe
        job = pickle.load(sys.stdin.buffer)
        if job.get("calibrate") is not None:
            calibrate_into(Path(job["calibrate"]))
        compile_all(job)
    finally:
        marker.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
