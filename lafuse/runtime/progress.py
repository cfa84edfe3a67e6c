"""The live progress line of a long run: the statement running (its lines), each enclosing loop's
iteration, and, while the run waits on the Dask cluster, its tasks (``runtime.dask.monitor``).

Shown on a terminal only (stdout and stderr both), once a run has lasted config ``progress_after``
seconds (2), by a daemon thread that reads the interpreter's position four times a second; transient (the line is gone
when the run ends). The interpreter's part is two attribute stores a block and one a loop iteration.
Config ``progress`` (``--quiet``, ``LAFUSE_PROGRESS=0``) turns it off.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

REFRESH = 0.25  # s between updates of the line

ACTIVE: list[RunProgress] = []  # the run progress on screen (the Dask wait line joins it instead of its own)


def wanted() -> bool:
    try:
        return sys.stderr.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class RunProgress:
    """Where the run is (set by the interpreter), drawn by a thread of its own."""

    def __init__(self, after: float = 2.0) -> None:
        self.after = after  # s before the line shows
        self.where = ""  # the current statement block's lines
        self.loops: list[list[Any]] = []  # [kind, variable, iteration, count or None] per enclosing loop
        self.tasks = ""  # the Dask wait line's text while the run waits on the cluster
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def text(self) -> str:
        parts = [self.where or "starting"]
        for kind, var, i, n in list(self.loops):
            parts.append(f"{kind} {var} {i}/{n}" if n is not None else f"{kind} iteration {i}")
        if self.tasks:
            parts.append(self.tasks)
        return " | ".join(parts)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._draw, name="lafuse-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _draw(self) -> None:
        if self._stop.wait(self.after):
            return
        from rich.console import Console  # deferred: rich, only for a long run on a terminal
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                       console=Console(stderr=True), transient=True, redirect_stdout=False, redirect_stderr=False)
        ACTIVE.append(self)
        try:
            with bar:
                task = bar.add_task(self.text(), total=None)
                while not self._stop.wait(REFRESH):
                    bar.update(task, description=self.text())
        finally:
            ACTIVE.remove(self)


def begin(enabled: bool, after: float) -> RunProgress | None:
    """A started progress for a run, or None (off, or not a terminal)."""
    if not enabled or not wanted():
        return None
    p = RunProgress(after)
    p.start()
    return p
