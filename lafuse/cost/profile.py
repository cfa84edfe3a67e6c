"""The hardware profile the cost model uses: measured rates of this machine, or defaults.

``lafuse calibrate`` measures the rates and stores them as JSON in the user cache directory
(``$LAFUSE_PROFILE`` if set, else ``$XDG_CACHE_HOME/lafuse/profile.json``, else
``~/.cache/lafuse/profile.json``). Without a file, conservative built-in defaults apply
(:mod:`lafuse.cost.constants`), so costing never needs a calibration run.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from lafuse.cost import constants as K


@dataclass(frozen=True)
class HardwareProfile:
    mem_read_bw: float = K.DEFAULT_MEM_READ_BW  # bytes/s
    mem_write_bw: float = K.DEFAULT_MEM_WRITE_BW  # bytes/s
    cache_bw: float = K.DEFAULT_CACHE_BW  # bytes/s, read + written, working set in the last-level cache
    cache_bytes: float = K.DEFAULT_CACHE_BYTES  # bytes, the last-level cache
    blas_flops: float = K.DEFAULT_BLAS_FLOPS  # FLOP/s
    elementwise_rate: float = K.DEFAULT_ELEMENTWISE_RATE  # cells/s
    transcendental_rate: float = K.DEFAULT_TRANSCENDENTAL_RATE  # cells/s
    sparse_rate: float = K.DEFAULT_SPARSE_RATE  # non-zeros/s
    instruction_overhead: float = K.DEFAULT_INSTRUCTION_OVERHEAD  # s per instruction (scalar operands)
    matrix_op_overhead: float = K.DEFAULT_MATRIX_OP_OVERHEAD  # s per instruction on small matrices
    rand_rate: float = K.DEFAULT_RAND_RATE  # cells/s of dense rand (SystemDS-compatible generator)
    transpose_rate: float = K.DEFAULT_TRANSPOSE_RATE  # cells/s of t() on a large dense matrix
    rowagg_rate: float = K.DEFAULT_ROWAGG_RATE  # cells/s of a row aggregate over few columns
    csv_read_rate: float = K.DEFAULT_CSV_READ_RATE  # cells/s
    csv_write_rate: float = K.DEFAULT_CSV_WRITE_RATE  # cells/s
    binary_read_bw: float = K.DEFAULT_BINARY_READ_BW  # bytes/s
    first_touch_bw: float = K.DEFAULT_FIRST_TOUCH_BW  # bytes/s, growth of the process's memory (page faults)
    codegen_compile_time: float = K.DEFAULT_CODEGEN_COMPILE_TIME  # s per kernel
    threads: int = 1  # cores the rates were measured with
    source: str = "default"  # "default" or "calibrated <ISO date>"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @staticmethod
    def from_dict(data: dict[str, Any]) -> HardwareProfile:
        names = {f.name for f in fields(HardwareProfile)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown hardware profile keys {unknown}; known: {sorted(names)}")
        return replace(HardwareProfile(), **data)


def profile_path() -> Path:
    env = os.environ.get("LAFUSE_PROFILE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lafuse" / "profile.json"


_cached: dict[str, HardwareProfile] = {}


def load(path: Path | None = None) -> HardwareProfile:
    """The calibrated profile if one exists (and parses), else the defaults."""
    p = path or profile_path()
    key = str(p)
    if key in _cached:
        return _cached[key]
    prof = HardwareProfile()
    if p.is_file():
        try:
            prof = HardwareProfile.from_dict(json.loads(p.read_text()))
        except (OSError, ValueError, TypeError) as e:
            import sys

            print(f"lafuse: ignoring the hardware profile {p}: {e}", file=sys.stderr)
    _cached[key] = prof
    return prof


def save(prof: HardwareProfile, path: Path | None = None) -> Path:
    p = path or profile_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(prof.to_json())
    tmp.replace(p)
    _cached.pop(str(p), None)
    return p
