"""The hardware profile the cost model uses: measured rates of this machine, or defaults.

``lafuse calibrate`` measures the rates and stores them as JSON in the user cache directory
(``$LAFUSE_PROFILE`` if set, else ``$XDG_CACHE_HOME/lafuse/profile.json``, else
``~/.cache/lafuse/profile.json``). Without a file, conservative built-in defaults apply
(:mod:`lafuse.cost.constants`), so costing never needs a calibration run.

A file that does not parse, or holds anything but a JSON object of known keys with positive finite
rates, is ignored with one warning and the defaults apply: every cost divides by these rates, so a 0
or a string would fail every run. Such a file counts as missing for the automatic calibration
(``codegen.deferred``), which replaces it.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from lafuse.config import profile_path
from lafuse.cost import constants as K
from lafuse.cost.fit import LinearCost


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
    numba_import_time: float = K.DEFAULT_NUMBA_IMPORT_TIME  # s, a process's import of the code generator
    numba_first_load: float = K.DEFAULT_NUMBA_FIRST_LOAD  # s, a process's first kernel load beyond a later one's
    net_bw: float = K.DEFAULT_NET_BW  # bytes/s, a block between two Dask workers (the cuboid operators' Bn)
    threads: int = 1  # cores the rates were measured with
    source: str = "default"  # "default" or "calibrated <ISO date>"
    # cost functions fitted to measured runs of the local implementations (cost.fit, paper 002 §7),
    # by implementation name; an implementation not here is costed by the analytical model
    fitted: tuple[tuple[str, LinearCost], ...] = ()

    def fitted_cost(self, impl: str) -> LinearCost | None:
        """The fitted cost of ``impl``; None where none was measured or the fit is stale (fitted over
        other feature definitions, cost.fit.FEATURES_VERSION): the analytical model applies."""
        f = dict(self.fitted).get(impl)
        return f if f is not None and f.current else None

    def to_json(self) -> str:
        data = asdict(self)
        data["fitted"] = {name: f.to_dict() for name, f in self.fitted}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @staticmethod
    def from_dict(data: Any) -> HardwareProfile:
        if not isinstance(data, dict):
            raise ValueError(f"not a JSON object of rates but {type(data).__name__}")
        names = {f.name for f in fields(HardwareProfile)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown hardware profile keys {unknown}; known: {sorted(names)}")
        data = dict(data)
        if "fitted" in data:
            raw = data["fitted"]
            if not isinstance(raw, dict):
                raise ValueError(f"fitted is {json.dumps(raw)}, not an object of fitted costs by implementation")
            try:
                data["fitted"] = tuple(sorted((str(k), LinearCost.from_dict(v)) for k, v in raw.items()))
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(f"fitted: {e}") from None
        for k, v in data.items():
            if k == "fitted":
                continue
            if k == "source":
                ok = isinstance(v, str)
            elif k == "threads":
                ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
            else:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            if not ok:
                raise ValueError(f"{k} is {json.dumps(v)}, not a positive number" if k != "source" else
                                 f"source is {json.dumps(v)}, not a string")
        return replace(HardwareProfile(), **data)


_cached: dict[str, HardwareProfile] = {}


def _read(p: Path) -> HardwareProfile:
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("not UTF-8 text") from e
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from e
    return HardwareProfile.from_dict(data)


def load(path: Path | None = None) -> HardwareProfile:
    """The calibrated profile if one exists (and is valid), else the defaults."""
    p = path or profile_path()
    key = str(p)
    if key in _cached:
        return _cached[key]
    prof = HardwareProfile()
    if p.is_file():
        try:
            prof = _read(p)
        except (OSError, ValueError, TypeError) as e:
            why = getattr(e, "strerror", None) or e
            print(f"lafuse: warning: ignoring the hardware profile {p}: {why}; using the built-in defaults "
                  f"(`lafuse calibrate` replaces it)", file=sys.stderr)
    _cached[key] = prof
    return prof


def valid(path: Path) -> bool:
    """Whether ``path`` holds a profile ``load`` would use (quietly)."""
    try:
        _read(path)
    except (OSError, ValueError, TypeError):
        return False
    return True


def save(prof: HardwareProfile, path: Path | None = None) -> Path:
    p = path or profile_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(prof.to_json())
    tmp.replace(p)
    _cached.pop(str(p), None)
    return p
