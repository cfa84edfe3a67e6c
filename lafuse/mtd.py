"""The ``.mtd`` file beside a data file: parsing and checking it, merging it with a read's parameters,
writing it, and the data check that ties it to the one data file it was written with.

Why a data check: a ``.mtd`` describes a data file (rows, cols, nnz, format, separator), and a reader
that pairs new data with old metadata (an interrupted or concurrent write, a file copied without its
``.mtd``) reads a different matrix without noticing. lafuse's writers therefore record the data
file's length and CRC-32 in the ``.mtd``. SystemDS 3.4 rejects unknown keys ("MTD file ... contains
invalid parameter name"), but tolerates and ignores ``description`` (``DataExpression.DESCRIPTIONPARAM``,
also what ``write(..., description="...")`` fills), so the check goes there as text:
``"description": "lafuse data check: 1234 bytes, crc32 89abcdef"`` (after the user's own description,
if any, in brackets). Files with that text are still read by SystemDS; files without it (SystemDS's,
hand-written) are checked only against their rows, cols and nnz.

Why a top-level module: the compiler reads a ``.mtd`` for a read's sizes (as SystemDS's parser does)
and the runtime reads it again with the data, so both stages share this one parser (imports follow the
pipeline: hops and runtime import it, it imports nothing of theirs).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from lafuse.errors import DMLRuntimeError

MATRIX_FORMATS = ("csv", "text", "mm", "binary", "npy")
_SYSTEMDS_ONLY_FORMATS = ("libsvm", "hdf5", "proto", "federated", "compressed", "cog", "json")
NA_SEP = "\u00b7"  # DataExpression.DELIM_NA_STRING_SEP

# DataExpression.READ_VALID_MTD_PARAM_NAMES of SystemDS 3.4: any other key is an error there too
VALID_MTD_KEYS = frozenset({
    "iofilename", "rows", "cols", "nnz", "format", "rows_in_block", "cols_in_block", "data_type",
    "value_type", "schema", "description", "author", "created", "default", "sep", "fill", "header",
    "naStrings", "indSep", "dataset", "privacy", "fine_grained_privacy"})
_IGNORED_KEYS = frozenset({"iofilename", "description", "author", "created", "indSep", "dataset", "privacy",
                           "fine_grained_privacy", "rows_in_block", "cols_in_block"})
_CHECK = re.compile(r"lafuse data check: (\d+) bytes, crc32 ([0-9a-f]{8})\]?$")


@dataclass
class Meta:
    """What a read knows before it looks at the data: the merged parameters, where each came from,
    and the data check of a lafuse-written ``.mtd``."""

    params: dict[str, Any]
    mtd_path: str | None = None
    from_mtd: set[str] = field(default_factory=set)
    check: tuple[int, int] | None = None  # (bytes, crc32) the data file was written with

    def source(self, key: str) -> str:
        return f"'{self.mtd_path}'" if key in self.from_mtd else "the read statement"


def norm_format(fmt: Any, path: str) -> str:
    f = str(fmt).lower()
    if f in MATRIX_FORMATS:
        return f
    if f in _SYSTEMDS_ONLY_FORMATS:
        raise DMLRuntimeError(f"format '{fmt}' of '{path}' is not supported by lafuse "
                              f"(supported: {', '.join(MATRIX_FORMATS)})")
    raise DMLRuntimeError(f"invalid format '{fmt}' for '{path}' (expected one of {', '.join(MATRIX_FORMATS)})")


def norm_value_type(vt: Any) -> str:
    v = str(vt).lower()
    return {"integer": "int", "int64": "int", "int32": "int", "fp64": "double", "fp32": "double",
            "str": "string", "bool": "boolean"}.get(v, v)


def _count(key: str, v: Any, where: str) -> int | None:
    """rows/cols/nnz: a whole number >= 0, or -1 for unknown (what SystemDS writes for an unknown nnz)."""
    ok = isinstance(v, int) and not isinstance(v, bool)
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v, ok = int(v), True  # a DML number such as rows=3.0 (and 3.0 in JSON, which SystemDS refuses)
    if not ok or v < -1:
        raise DMLRuntimeError(f"{where}: '{key}' must be a whole number >= 0 (-1: unknown), got {json.dumps(v)}")
    return None if v == -1 else int(v)


def _flag(key: str, v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise DMLRuntimeError(f"{where}: '{key}' must be TRUE or FALSE, got {json.dumps(v)}")


def norm_param(key: str, v: Any, where: str) -> Any:
    """One read/write parameter or ``.mtd`` entry in lafuse's form; ``where`` names the file or
    statement it came from for the error of a malformed value."""
    if key in ("rows", "cols", "nnz"):
        return _count(key, v, where)
    if key in ("header", "fill", "sparse"):
        return _flag(key, v, where)
    if key in ("format", "data_type", "value_type", "schema", "sep") and not isinstance(v, str):
        raise DMLRuntimeError(f"{where}: '{key}' must be a string, got {json.dumps(v)}")
    if key in ("format", "data_type"):
        return v.lower()
    if key == "value_type":
        return norm_value_type(v)
    if key == "schema":
        return ",".join(s for s in v.split(",") if s).upper()
    if key == "sep" and v == "":
        raise DMLRuntimeError(f"{where}: the separator 'sep' must not be empty")
    if key == "default":
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise DMLRuntimeError(f"{where}: 'default' must be a number, got {json.dumps(v)}")
        try:
            return float(v)
        except ValueError:
            raise DMLRuntimeError(f"{where}: 'default' must be a number, got {json.dumps(v)}") from None
    if key == "naStrings":
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return NA_SEP.join(v)
        if not isinstance(v, str):
            raise DMLRuntimeError(f"{where}: 'naStrings' must be a string or a list of strings, got {json.dumps(v)}")
    return v


def param_text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def load_mtd(mtd_path: str) -> dict[str, Any] | None:
    """The JSON object of a ``.mtd`` file (None when there is none), every error naming the file."""
    if not os.path.exists(mtd_path):
        return None
    if os.path.isdir(mtd_path):
        raise DMLRuntimeError(f"metadata file '{mtd_path}' is a directory")
    try:
        with open(mtd_path, "rb") as f:
            raw = f.read()
        mtd = json.loads(raw.decode("utf-8-sig"))
    except OSError as e:
        raise DMLRuntimeError(f"cannot read metadata file '{mtd_path}': {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:  # JSON errors and invalid UTF-8 are ValueErrors
        raise DMLRuntimeError(f"cannot parse metadata file '{mtd_path}': {e}") from None
    if not isinstance(mtd, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(mtd), "a number")
        raise DMLRuntimeError(f"metadata file '{mtd_path}' holds {kind}, not a JSON object")
    for k in mtd:
        if k not in VALID_MTD_KEYS:
            raise DMLRuntimeError(f"MTD file {mtd_path} contains invalid parameter name: {k}")
    return mtd


def mtd_params(mtd_path: str, mtd: dict[str, Any]) -> dict[str, Any]:
    """The read parameters a ``.mtd`` gives, in lafuse's form (unknown counts left out)."""
    where = f"metadata file '{mtd_path}'"
    out = {k: norm_param(k, v, where) for k, v in mtd.items() if k not in _IGNORED_KEYS}
    return {k: v for k, v in out.items() if v is not None}


def data_check(mtd: dict[str, Any]) -> tuple[int, int] | None:
    """The (bytes, crc32) a lafuse writer recorded in ``description``, if any."""
    desc = mtd.get("description")
    m = _CHECK.search(desc) if isinstance(desc, str) else None
    return (int(m.group(1)), int(m.group(2), 16)) if m else None


def merged(path: str, params: dict[str, Any]) -> Meta:
    """Read parameters plus ``<path>.mtd``; a key given differently in both is an error (as in SystemDS)."""
    given = {("naStrings" if k == "na.strings" else k): v for k, v in params.items() if v is not None}
    stmt = f"read of '{path}'"
    out = {k: norm_param(k, v, stmt) for k, v in given.items()}
    out = {k: v for k, v in out.items() if v is not None}
    mtd_path = path + ".mtd"
    mtd = load_mtd(mtd_path)
    if mtd is None:
        return Meta(out)
    from_mtd = mtd_params(mtd_path, mtd)
    for k, v in out.items():
        if k in from_mtd and from_mtd[k] != v:
            raise DMLRuntimeError(
                f"{mtd_path}: parameter '{k}' has conflicting values in metadata and read statement. "
                f"MTD file value: '{param_text(from_mtd[k])}'. Read statement value: '{param_text(v)}'.")
    keys = set(from_mtd) - set(out)
    return Meta({**from_mtd, **out}, mtd_path, keys, data_check(mtd))


def verify_size(path: str, meta: Meta) -> None:
    """Before reading: the data file's length against the length its ``.mtd`` was written with."""
    if meta.check is None or not os.path.isfile(path):
        return
    size = os.path.getsize(path)
    if size != meta.check[0]:
        raise DMLRuntimeError(_mismatch(path, meta, f"{size} bytes", f"{meta.check[0]} bytes"))


def verify_data(path: str, meta: Meta, raw: bytes | bytearray | memoryview) -> None:
    """After reading: the bytes of the data file against the CRC-32 its ``.mtd`` recorded."""
    if meta.check is None or not os.path.isfile(path):
        return
    import zlib  # deferred: only for a data check

    n, crc = meta.check
    got = zlib.crc32(raw)
    if len(raw) != n or got != crc:
        raise DMLRuntimeError(_mismatch(path, meta, f"{len(raw)} bytes with crc32 {got:08x}",
                                        f"{n} bytes with crc32 {crc:08x}"))


def _mismatch(path: str, meta: Meta, have: str, want: str) -> str:
    return (f"'{path}' does not match its metadata file '{meta.mtd_path}': the data file has {have}, the "
            f"metadata was written with data of {want} (an interrupted or concurrent write, or one of the "
            f"two files was replaced or edited). Write the file again; to accept the data as it is, remove "
            f"the \"description\" entry from the .mtd")


def check_matrix(path: str, meta: Meta, rows: int, cols: int, count_nnz: Any) -> None:
    """The matrix read against the rows, cols and nnz declared for it, with SystemDS's wording.
    SystemDS 3.4 pads a csv with fewer rows than declared (a hidden log warning); lafuse refuses,
    because a short file is what an interrupted write leaves. ``count_nnz`` runs only when nnz is declared."""
    p = meta.params
    want_r, want_c = p.get("rows"), p.get("cols")
    if (want_r is not None and want_r != rows) or (want_c is not None and want_c != cols):
        src = meta.source("rows" if want_r is not None and want_r != rows else "cols")
        raise DMLRuntimeError(
            f"'{path}': Read matrix dimensions differ from meta data: [{rows}x{cols}] vs. "
            f"[{-1 if want_r is None else want_r}x{-1 if want_c is None else want_c}] (declared by {src})")
    want_z = p.get("nnz")
    if want_z is not None:
        z = int(count_nnz())
        if z != want_z:
            raise DMLRuntimeError(f"'{path}': Read matrix inconsistent with given meta data: expected "
                                  f"nnz={want_z}, real nnz={z} (declared by {meta.source('nnz')})")


def mtd_text(fields: list[tuple[str, Any]]) -> str:
    """SystemDS's layout: 4-space indentation, keys in the order given, no final newline."""
    return json.dumps(dict(fields), indent=4)


def check_text(nbytes: int, crc: int, user: str | None = None) -> str:
    """The ``description`` value carrying the data check (after the user's description, if any)."""
    check = f"lafuse data check: {nbytes} bytes, crc32 {crc:08x}"
    return f"{user} [{check}]" if user else check


def author() -> str:
    import getpass  # deferred: only when writing metadata

    try:
        return getpass.getuser()
    except Exception:  # no user database entry (containers): any name will do
        return "lafuse"


def created() -> str:
    from datetime import UTC, datetime  # deferred: ~1 ms, only when writing metadata

    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
