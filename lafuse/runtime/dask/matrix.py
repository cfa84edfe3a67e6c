"""The distributed matrix value: its metadata and one future per block (no Dask import: the
interpreter and dynamic recompilation check for it in every run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lafuse.runtime.values import is_matrix


@dataclass
class Blocked:
    """A distributed matrix: ``blocks[(i, j)]`` is the future of rows ``i*bs:(i+1)*bs`` and columns
    ``j*bs:(j+1)*bs`` (clipped at the edges)."""

    rows: int
    cols: int
    bs: int
    blocks: dict[tuple[int, int], Any] = field(default_factory=dict)
    # the value gathered once (runtime.dask.backend.collect keeps small ones: the blocks never change)
    local: Any = field(default=None, repr=False, compare=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.cols

    @property
    def nrb(self) -> int:
        return max(1, -(-self.rows // self.bs))

    @property
    def ncb(self) -> int:
        return max(1, -(-self.cols // self.bs))

    def grid(self) -> list[tuple[int, int]]:
        return [(i, j) for i in range(self.nrb) for j in range(self.ncb)]


def any_matrix(v: Any) -> bool:
    """A matrix value, local (NumPy, SciPy) or distributed: what a variable typed Matrix may hold and
    what has dims for a recompilation (``values.is_matrix`` stays local-only: kernels take only those)."""
    return is_matrix(v) or isinstance(v, Blocked)
