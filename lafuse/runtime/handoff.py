"""What a run hands on when it ends, for later runs: the fusion feedback (how often each candidate's
block ran, the cost-based decisions made, the sum-product regions without a candidate plan) and the
kernels that pay only once compiled into the plan cache, compiled by a background job
(``codegen.deferred``), with the machine's calibration if the run had none.

Why at the end of a run: the files are read once per process and written once (a process's own
decisions serve it from memory); ``lafuse run`` hands them on when its script ends, the Python API
when the process exits (``api.run``), so a script and the same computation from Python learn alike.
"""

from __future__ import annotations

import sys
from typing import Any


def run_ended(cfg: Any) -> None:
    spawn_deferred(cfg)
    save_feedback(cfg)


def save_feedback(cfg: Any) -> None:
    """Record how often each fusion candidate's block ran (feedback.observed), the cost-based
    decisions made (feedback.decisions) and the sum-product regions without a candidate plan
    (feedback.sumproduct), for later runs."""
    saves = []
    verdicts = sys.modules.get("lafuse.feedback.sumproduct")  # (loaded: the sum-product rule ran)
    if verdicts is not None:
        saves.append((cfg.fusion_reuse, verdicts.save, "sum-product verdicts"))
    if cfg.codegen and "lafuse.fusion" in sys.modules:  # (else nothing was weighed)
        from lafuse.feedback import decisions, observed  # deferred: only after a run that fused

        saves += [(cfg.fusion_observed, observed.save, "observed block executions"),
                  (cfg.fusion_reuse, decisions.save, "fusion decisions")]
    for on, save, what in saves:
        if on:
            try:
                save()
            except OSError as e:  # e.g. a read-only cache directory: the run itself succeeded
                print(f"lafuse: warning: {what} not saved: {e}", file=sys.stderr)


def calibrate_later(cfg: Any) -> Any:
    """The profile path a background job should calibrate into, or None: only a run whose fusion
    decisions used the built-in defaults (no profile file) asks for one (codegen.deferred)."""
    fusion = sys.modules.get("lafuse.fusion")  # not loaded: nothing was optimized
    if not (cfg.codegen and cfg.auto_calibrate and fusion is not None and "default" in fusion.DECIDED_ON):
        return None
    from lafuse.cost import profile  # deferred: only when a profile is looked at

    path = profile.profile_path()
    return None if profile.valid(path) else path


def spawn_deferred(cfg: Any) -> None:
    """Hand the kernels that only pay from the disk cache to a background compile, and the machine's
    calibration if the run had none (codegen.deferred)."""
    fusion = sys.modules.get("lafuse.fusion")  # not loaded: nothing was optimized, nothing deferred
    plans = dict(fusion.DEFERRED) if cfg.codegen and cfg.codegen_defer and fusion is not None else {}
    # (--no-background, LAFUSE_BACKGROUND=0: no job of any kind, and no look at the profile for one)
    calibrate = calibrate_later(cfg) if cfg.background else None
    if cfg.background and (plans or calibrate is not None):
        from lafuse.codegen import deferred  # deferred: loads codegen, only when a job is handed on

        try:
            deferred.spawn(plans, calibrate)
        except OSError as e:  # e.g. a read-only cache directory: the run itself succeeded
            print(f"lafuse: warning: background job ({len(plans)} kernel compiles"
                  f"{', calibration' if calibrate else ''}) not started: {e}", file=sys.stderr)
    if fusion is not None:
        fusion.DEFERRED.clear()


def _policy(cfg: Any) -> str | None:
    """The fusion policy Numba kernels may run under (None: no Numba kernels under this config)."""
    return cfg.fusion if cfg.codegen and cfg.codegen_backend == "numba" else None


def prestart_at_launch(text: str, cfg: Any) -> None:
    """Begin the imports the script's last run needed (SciPy's sparse module; Numba, when kernels may
    run under the config's fusion policy) on a background thread (feedback.prestart)."""
    from lafuse.feedback import prestart  # deferred: only when prestart is on

    policy = _policy(cfg)
    if prestart.wanted(text, prestart.SPARSE):
        prestart.start_sparse("the script's last run used sparse matrices")
    if policy is not None and prestart.wanted(text, policy):
        prestart.start()


def prestart_wait() -> None:
    """Wait for the background start begun at launch, if any (``lf.compile``: a program compiled ahead
    is ready to run, the imports its run needs done, not running beside it)."""
    prestart = sys.modules.get("lafuse.feedback.prestart")
    if prestart is not None:
        prestart.join()


def record_kernels_used(texts: list[str], cfg: Any) -> None:
    """Remember whether this process used kernels and sparse matrices, for each script it ran, so their
    next runs start Numba and SciPy's sparse module at launch (feedback.prestart); wait for a background
    start still running (never exit mid-import). Kernels kept only because this run's background start
    had imported Numba (fusion.ON_PRESTART) do not count: else a start would keep itself going. (One
    script a ``lafuse run``; the Python API's process records what it used for each script it
    compiled, the last few: a script run beside one that used kernels may start Numba needlessly.)"""
    from lafuse.feedback import prestart  # deferred: only when prestart is on
    from lafuse.sparse import sp

    policy = _policy(cfg)
    counts = {prestart.SPARSE: int(type(sp).used)}
    if policy is not None:
        codegen = sys.modules.get("lafuse.codegen")  # not loaded: no kernel was compiled or loaded
        fusion = sys.modules.get("lafuse.fusion")
        used = set(codegen.cache_stats()["per_kernel"]) if codegen is not None else set()
        counts[policy] = len(used - (fusion.ON_PRESTART if fusion is not None else set()))
    try:
        prestart.record(texts, counts)
    except OSError as e:  # e.g. a read-only cache directory: the run itself succeeded
        print(f"lafuse: warning: kernels used by this run not recorded: {e}", file=sys.stderr)
    prestart.join()
