"""Fusion decisions depend on the machine's profile and on whether the process has started Numba.
The tests fix both: the profile of the 2-core machine the kernel constants were measured on
(``lafuse calibrate`` output, committed), and Numba counted as started (so a decision does not
depend on which test ran first; that is the smallest compile penalty, the strictest case for
"tiny inputs stay unfused")."""

from __future__ import annotations

from pathlib import Path

import pytest

from lafuse import fusion

PROFILE = Path(__file__).resolve().parent.parent / "fixtures" / "profile_2core.json"


@pytest.fixture(autouse=True)
def fixed_cost_context(monkeypatch):
    monkeypatch.setenv("LAFUSE_PROFILE", str(PROFILE))
    monkeypatch.setattr(fusion, "_numba_started", lambda: True)
