"""Running DML from the library tests: with lafuse's own builtins (``lafuse/builtins``), or with
SystemDS's shipped scripts (extracted from the installed jar) executed by lafuse -- the latter checks
that our implementations are drop-in replacements (same signatures, output shapes and meanings)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from conformance import sds

from lafuse import config as cfgmod
from lafuse.compiler import run_dml
from lafuse.errors import DMLStop


def _dense(v: Any) -> Any:
    if hasattr(v, "toarray"):
        return np.asarray(v.toarray())
    return v


def run_lib(text: str, inputs: dict[str, Any] | None = None, outputs: tuple[str, ...] | list[str] = (),
            nvargs: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """(outputs, printed text) of ``text`` run with lafuse's own builtin library only."""
    out = io.StringIO()
    cfg = cfgmod.get().with_(lafuse_builtins=True, builtin_dirs=())
    res = run_dml(text, inputs, outputs, nvargs=nvargs, cfg=cfg, out=out)
    return {k: _dense(v) for k, v in res.items()}, out.getvalue()


def run_sds(text: str, inputs: dict[str, Any] | None = None, outputs: tuple[str, ...] | list[str] = (),
            nvargs: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """Same, but builtins resolve to SystemDS 3.4.0's own scripts/builtin/*.dml (run by lafuse)."""
    out = io.StringIO()
    cfg = cfgmod.get().with_(lafuse_builtins=False, builtin_dirs=(str(sds.builtin_scripts_dir()),))
    res = run_dml(text, inputs, outputs, nvargs=nvargs, cfg=cfg, out=out)
    return {k: _dense(v) for k, v in res.items()}, out.getvalue()


def assert_close(a: Any, b: Any, rtol: float) -> None:
    """Same shape and values within ``rtol``, with an absolute floor scaled to ``b``'s magnitude."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, np.abs(b).max()))


def assert_stops(text: str, inputs: dict[str, Any], match: str) -> None:
    """``text`` run with lafuse's library ends in ``stop()`` with a message matching ``match``."""
    with pytest.raises(DMLStop, match=match):
        run_lib(text, inputs, [])
