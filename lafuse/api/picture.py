"""Pictures of lazy expressions: the plan ``compute`` would run (``Matrix.visualize``, and a lazy
matrix in Jupyter: ``_repr_svg_``), drawn by ``plan.dot`` from the compiled program, nothing run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class Picture:
    """A plan picture: ``source`` (DOT); shown as SVG in Jupyter; ``save(path)`` by the file's suffix."""

    def __init__(self, source: str) -> None:
        self.source = source

    def render(self, fmt: str) -> bytes:
        from lafuse.plan.dot import render

        return render(self.source, fmt)

    def save(self, path: str | os.PathLike[str], fmt: str | None = None) -> Path:
        """Written whole or not at all (a temporary file renamed)."""
        from lafuse.cachedir import write_user_file

        out = Path(path)
        write_user_file(out, self.render(fmt or out.suffix.lstrip(".") or "svg"))
        return out

    def _repr_svg_(self) -> str | None:
        from lafuse.plan.dot import GraphvizMissing

        try:
            return self.render("svg").decode()
        except GraphvizMissing:
            return None  # (Jupyter shows the text repr instead)

    def __repr__(self) -> str:
        return f"lafuse.Picture({self.source.count(' -> ')} edges; .source is DOT, .save(path) renders)"


def picture(values: list[Any], until: str = "plan") -> Picture:
    """The plan of computing ``values`` together: HOP DAGs for a program stage (``until`` up to
    "sizes"), the physical plan with fused operators as clusters from "fuse" on."""
    from lafuse.api.emit import emit
    from lafuse.api.run import compile_script
    from lafuse.explain import program_graph
    from lafuse.stages import STAGES

    if until not in STAGES or until == "parse":
        raise ValueError(f"until must be one of {', '.join(s for s in STAGES if s != 'parse')}, not {until!r}")
    script = emit([v.node for v in values])
    comp, prog = compile_script(script)
    return Picture(program_graph(prog, until, comp, "lafuse plan"))
