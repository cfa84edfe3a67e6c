"""What the distributed tests share: the configuration of a local and of a Dask run, a result as a
dense array, and the errors of one script run both ways."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import run_dml
from lafuse.errors import DMLError


def cfg(scheduler: str | None = None, **kw: Any) -> cfgmod.Config:
    """A local run (no ``scheduler``) or one under --exec dask on ``scheduler`` with blocks of 7 (edge
    blocks everywhere); no code generation unless ``kw`` asks, no background work; ``kw`` overrides."""
    base: dict[str, Any] = dict(codegen=False, background=False)
    if scheduler is not None:
        base.update(exec_type="dask", scheduler=scheduler, block_size=7)
    base.update(kw)
    return cfgmod.Config(**base)


def dense(v: Any) -> np.ndarray:
    return v.toarray() if hasattr(v, "toarray") else np.asarray(v)


def errors_both_ways(text: str, scheduler: str, outputs: tuple[str, ...] = (), error: type = DMLError) -> list[str]:
    """The messages of ``text`` run locally and on Dask, each of which must stop with ``error``."""
    msgs = []
    for c in (cfg(), cfg(scheduler)):
        with pytest.raises(error) as e:
            run_dml(text, outputs=outputs, cfg=c, out=io.StringIO())
        msgs.append(str(e.value))
    return msgs
