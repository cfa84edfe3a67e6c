"""Shared test setup: every run (in-process and the CLI subprocesses the tests start) checks
predicted metadata against runtime metadata and validates every HOP DAG after each rewrite."""

from __future__ import annotations

import os

os.environ.setdefault("LAFUSE_CHECK_METADATA", "1")
os.environ.setdefault("LAFUSE_VALIDATE", "1")
# no background compiles from the CLI runs of the test suite (tests/fusion/test_deferred.py turns
# them on where it tests them)
os.environ.setdefault("LAFUSE_CODEGEN_DEFER", "0")
# nor feedback from earlier runs' block executions (feedback.observed; tests/fusion/test_deferred.py)
os.environ.setdefault("LAFUSE_FUSION_OBSERVED", "0")
# nor cost-based decisions reused from earlier runs (feedback.decisions; tests/fusion/test_decisions.py)
os.environ.setdefault("LAFUSE_FUSION_REUSE", "0")
# nor a background calibration after runs that decided on the default profile (test_deferred.py tests it)
os.environ.setdefault("LAFUSE_AUTO_CALIBRATE", "0")
# nor Numba started at launch because an earlier run of a script used kernels (test_deferred.py)
os.environ.setdefault("LAFUSE_NUMBA_PRESTART", "0")

# one hardware profile for every run of the suite, whatever this machine calibrated (or did not): the
# optimizer's cost-based choices (sum-product rewrites, fusion plans, formats) that tests assert are
# then the same on every machine (tests of calibration set their own profile)
os.environ.setdefault("LAFUSE_PROFILE", os.path.join(os.path.dirname(__file__), "fixtures", "profile.json"))

from hypothesis import settings  # noqa: E402

# CI runs a fixed, reproducible example set (a red CI must mean a real regression); local runs
# explore new random examples each time
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
