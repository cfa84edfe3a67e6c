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

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.counters = DaskCounters()

    @functools.cached_property
    def blocks(self) -> Any:
        from lafuse.runtime.dask import blocks  # deferred: dask's sizeof, SciPy; only once a Dask op runs

        return blocks

    def client(self) -> Any:
        return cluster.client(self.cfg)

    @functools.cached_property
    def operators(self) -> tuple[Any, ...]:
        """The modules of distributed operators, each with ``bind(backend, ins)`` -> callable or None
        (not its operator): products, fused operators, data generation and IO, the rest."""
        from lafuse.runtime.dask import matmul, ops  # deferred: SciPy and the kernels, once a Dask op runs

        return (matmul, ops)

    # ------------------------------------------------------------------ protocol
    def bind(self, ins: Instruction) -> Callable[..., Any] | None:
        op = ins.opcode
        if op == "scatter":
            return self.scatter
        if op == "collect":
            return self.collect
        for mod in self.operators:
            fn = mod.bind(self, ins)
            if fn is not None:
                return fn
        raise NotImplementedError(f"no distributed operator for '{op}'")

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

    # ------------------------------------------------------------------ for the operator modules
    def submit(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """One task on the cluster (a new key per call: ``pure=False``), counted."""
        self.counters.tasks += 1
        return self.client().submit(fn, *args, pure=False, **kw)

    def like(self, x: Any, blocks: dict[tuple[int, int], Any], rows: int | None = None,
             cols: int | None = None) -> Any:
        """A distributed matrix of ``blocks`` with ``x``'s block size (and dims unless given)."""
        return Blocked(x.rows if rows is None else rows, x.cols if cols is None else cols, x.bs, blocks)


def _nbytes(b: Any) -> int:
    """Bytes of a block as it travels (the arrays of a CSR block)."""
    if hasattr(b, "indptr"):
        return int(b.data.nbytes + b.indices.nbytes + b.indptr.nbytes)
    return int(getattr(b, "nbytes", 8))
