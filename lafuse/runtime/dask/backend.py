"""The Dask backend (runtime.bind.Backend): binds the plan's ``dask`` instructions to distributed
operators over distributed matrices (runtime.dask.matrix.Blocked), scatters local matrices and
collects distributed ones. Each call submits its block tasks at once (``pure=False``: a key per
execution, so a loop never gets a stale result) and returns futures; only a scalar result (a full
sum) is gathered, because control flow may steer on it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lafuse.config import Config
from lafuse.plan import exectype
from lafuse.plan.instructions import DASK, Instruction
from lafuse.runtime.dask import cluster
from lafuse.runtime.dask.matrix import Blocked


@dataclass
class DaskCounters:
    """What this process asked of the cluster (``--stats``): tasks submitted, blocks and bytes
    scattered to the workers and gathered from them. Bytes moved between workers are the workers'
    own counters (not yet reported)."""

    tasks: int = 0
    scattered_blocks: int = 0
    scattered_bytes: int = 0
    gathered_blocks: int = 0
    gathered_bytes: int = 0


class DaskBackend:
    name = DASK
    OPS = exectype.DISTRIBUTED  # what plan.exectype may send here

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.counters = DaskCounters()

    @functools.cached_property
    def blocks(self) -> Any:
        from lafuse.runtime.dask import blocks  # deferred: dask's sizeof, SciPy; only once a Dask op runs

        return blocks

    def client(self) -> Any:
        return cluster.client(self.cfg)

    # ------------------------------------------------------------------ protocol
    def bind(self, ins: Instruction) -> Callable[..., Any] | None:
        op = ins.opcode
        if op == "scatter":
            return self.scatter
        if op == "collect":
            return self.collect
        if op not in self.OPS:
            raise NotImplementedError(f"no distributed operator for '{op}'")
        if op in exectype.ELEMENTWISE_BINARY:
            return functools.partial(self._ew2, op)
        if op in exectype.ELEMENTWISE_UNARY:
            return functools.partial(self._ew1, op)
        if op == "sum":
            return self._sum
        if op in ("rowSums", "colSums"):
            return functools.partial(self._rowcol, op)
        if op == "t":
            return self._t
        return self._mm

    def convert(self, value: Any, fmt: str) -> Any:
        return value  # each block keeps the format its kernel chose (the local rule, per block)

    def scatter(self, m: Any) -> Any:
        """A local matrix as a distributed one, its blocks sent to the workers (a distributed one as
        it is: a variable may hold either)."""
        if isinstance(m, Blocked):
            return m
        b = self.blocks
        parts = b.split(m, self.cfg.block_size)
        keys = list(parts)
        # hash=False: a key per block (equal blocks, e.g. all-zero ones, would share a key and a release)
        futures = self.client().scatter([parts[k] for k in keys], hash=False)
        self.counters.scattered_blocks += len(keys)
        self.counters.scattered_bytes += sum(_nbytes(p) for p in parts.values())
        return Blocked(m.shape[0], m.shape[1], self.cfg.block_size, dict(zip(keys, futures)))

    def collect(self, x: Any) -> Any:
        """A distributed matrix gathered into this process (a local value as it is)."""
        if not isinstance(x, Blocked):
            return x
        keys = x.grid()
        got = self.client().gather([x.blocks[k] for k in keys])
        self.counters.gathered_blocks += len(keys)
        self.counters.gathered_bytes += sum(_nbytes(p) for p in got)
        return self.blocks.assemble(dict(zip(keys, got)), x.nrb, x.ncb)

    # ------------------------------------------------------------------ operators
    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.counters.tasks += 1
        return self.client().submit(fn, *args, pure=False)

    def _like(self, x: Any, blocks: dict[tuple[int, int], Any], rows: int | None = None,
              cols: int | None = None) -> Any:
        return Blocked(x.rows if rows is None else rows, x.cols if cols is None else cols, x.bs, blocks)

    def _ew2(self, op: str, a: Any, b: Any) -> Any:
        B = self.blocks
        m = a if isinstance(a, Blocked) else b
        out = {}
        for k in m.grid():
            out[k] = self._submit(B.apply, op, a.blocks[k] if isinstance(a, Blocked) else a,
                                  b.blocks[k] if isinstance(b, Blocked) else b)
        return self._like(m, out)

    def _ew1(self, op: str, a: Any) -> Any:
        return self._like(a, {k: self._submit(self.blocks.apply, op, f) for k, f in a.blocks.items()})

    def _sum(self, a: Any) -> float:
        B = self.blocks
        parts = [self._submit(B.apply, "sum", a.blocks[k]) for k in a.grid()]
        return float(self._submit(B.add_all, *parts).result())

    def _rowcol(self, op: str, a: Any) -> Any:
        B = self.blocks
        if op == "rowSums":
            out = {(i, 0): self._submit(B.add_all, *[self._submit(B.apply, op, a.blocks[(i, j)])
                                                     for j in range(a.ncb)]) for i in range(a.nrb)}
            return self._like(a, out, cols=1)
        out = {(0, j): self._submit(B.add_all, *[self._submit(B.apply, op, a.blocks[(i, j)])
                                                 for i in range(a.nrb)]) for j in range(a.ncb)}
        return self._like(a, out, rows=1)

    def _t(self, a: Any) -> Any:
        return self._like(a, {(j, i): self._submit(self.blocks.apply, "t", f) for (i, j), f in a.blocks.items()},
                          rows=a.cols, cols=a.rows)

    def _mm(self, a: Any, b: Any) -> Any:
        """C[i, j] = sum over k of A[i, k] %*% B[k, j], one task per output block (SystemDS's RMM: each
        input block goes to every task of its row or column of C)."""
        if a.bs != b.bs:  # pragma: no cover - one block size per run
            raise ValueError("operands of a distributed product must have one block size")
        out = {}
        for i in range(a.nrb):
            for j in range(b.ncb):
                pairs = [f for k in range(a.ncb) for f in (a.blocks[(i, k)], b.blocks[(k, j)])]
                out[(i, j)] = self._submit(self.blocks.mm_sum, *pairs)
        return self._like(a, out, cols=b.cols)


def _nbytes(b: Any) -> int:
    """Bytes of a block as it travels (the arrays of a CSR block)."""
    if hasattr(b, "indptr"):
        return int(b.data.nbytes + b.indices.nbytes + b.indptr.nbytes)
    return int(getattr(b, "nbytes", 8))
