"""DML ``read``/``write`` with SystemDS 3.4.0's file layouts, so files move freely between the two.

Verified against SystemDS 3.4.0 (``-exec singlenode``, which writes one file, never a directory):

* ``csv``: one line per row, cells joined by ``sep``; zero cells are written as ``0`` (or left empty
  with ``sparse=TRUE``), other cells as Java ``Double.toString`` (``1.0``, ``1.0E-7``, ``NaN``,
  ``-Infinity``). ``header=TRUE`` adds ``C1,C2,...``. Reading honours ``header``, ``sep``, ``fill``
  (empty cells become ``default``, else an error) and ``naStrings`` (cells read as NaN).
* ``text`` (IJV): ``i j v`` lines, 1-based, non-zeros only, row-major; an all-zero matrix is the single
  line ``0 0 0``. It is the default write format.
* ``mm``: ``%%MatrixMarket matrix coordinate real general``, then ``rows cols nnz``, then IJV lines
  (``0 0 0`` when empty); SystemDS writes *no* ``.mtd`` for mm. Reading accepts real/integer/pattern
  and general/symmetric, and rejects array, complex and skew-symmetric like SystemDS.
* ``binary`` is SystemDS's Hadoop SequenceFile of Java-serialized blocks, which has no sensible
  Python reader; lafuse stores ``binary`` (and ``npy``) as NumPy ``.npy`` (dense) or SciPy ``.npz``
  (sparse) under the exact path given. Such files are not readable by SystemDS.
* Every write except mm leaves ``<path>.mtd``: a JSON object with 4-space indentation and no final
  newline whose keys come in SystemDS's order (see ``_mtd``). A read merges ``<path>.mtd`` with its
  own parameters and, like SystemDS, fails when both give different values for the same key.
* Scalars are written as their bare text (no newline): ``3.5``, ``7``, ``true``, ``hello``.
* Writing a matrix with zero rows or columns fails, as in SystemDS (except to npy).

Deliberate differences: ``text`` without known dimensions infers them from the largest indices
(SystemDS refuses), and a read without format or ``.mtd`` guesses the format from the extension or
the content (csv by default).
"""

from __future__ import annotations

import getpass
import json
import os
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.printing import java_double_str
from lafuse.runtime.sparse import sp
from lafuse.runtime.values import Frame, ListValue, choose_format, is_matrix, is_sparse, nnz

MATRIX_FORMATS = ("csv", "text", "mm", "binary", "npy")
_SYSTEMDS_ONLY_FORMATS = ("libsvm", "hdf5", "proto", "federated", "compressed", "cog", "json")
_BLOCKSIZE = 1000  # SystemDS default block size, recorded in binary .mtd files
_MM_HEADER = "%%MatrixMarket matrix coordinate real general"
_NA_SEP = "\u00b7"  # DataExpression.DELIM_NA_STRING_SEP

_JAVA_DEC = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_JAVA_HEX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?")
_INT = re.compile(r"[+-]?\d+")


# ---------------------------------------------------------------------------------------------
# parameters and metadata
# ---------------------------------------------------------------------------------------------

def _norm_format(fmt: Any, path: str) -> str:
    f = str(fmt).lower()
    if f in MATRIX_FORMATS:
        return f
    if f in _SYSTEMDS_ONLY_FORMATS:
        raise DMLRuntimeError(f"format '{fmt}' of '{path}' is not supported by lafuse "
                              f"(supported: {', '.join(MATRIX_FORMATS)})")
    raise DMLRuntimeError(f"invalid format '{fmt}' for '{path}' (expected one of {', '.join(MATRIX_FORMATS)})")


def _norm_value_type(vt: Any) -> str:
    v = str(vt).lower()
    return {"integer": "int", "int64": "int", "int32": "int", "fp64": "double", "fp32": "double",
            "str": "string", "bool": "boolean"}.get(v, v)


def _norm_param(key: str, v: Any) -> Any:
    if key in ("rows", "cols", "nnz") and v is not None:
        return int(v)
    if key in ("header", "fill", "sparse"):
        if isinstance(v, str):
            return v.strip().lower() == "true"
        return bool(v)
    if key in ("format", "data_type"):
        return str(v).lower()
    if key == "value_type":
        return _norm_value_type(v)
    if key == "schema":
        return ",".join(s for s in str(v).split(",") if s).upper()
    return v


def _param_text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _merged_params(path: str, params: dict[str, Any]) -> dict[str, Any]:
    """Read parameters plus ``<path>.mtd``; a key given differently in both is an error."""
    given = {("naStrings" if k == "na.strings" else k): v for k, v in params.items() if v is not None}
    mtd_path = path + ".mtd"
    if not os.path.isfile(mtd_path):
        return {k: _norm_param(k, v) for k, v in given.items()}
    try:
        with open(mtd_path, encoding="utf-8") as f:
            mtd = json.load(f)
    except (OSError, ValueError) as e:
        raise DMLRuntimeError(f"cannot parse metadata file '{mtd_path}': {e}") from None
    if not isinstance(mtd, dict):
        raise DMLRuntimeError(f"metadata file '{mtd_path}' does not hold a JSON object")
    out = {k: _norm_param(k, v) for k, v in mtd.items() if k not in ("author", "created", "description")}
    for k, v in given.items():
        nv = _norm_param(k, v)
        if k in out and out[k] != nv:
            raise DMLRuntimeError(
                f"{mtd_path}: parameter '{k}' has conflicting values in metadata and read statement. "
                f"MTD file value: '{_param_text(out[k])}'. Read statement value: '{_param_text(nv)}'.")
        out[k] = nv
    return out


def _mtd(fields: list[tuple[str, Any]]) -> str:
    return json.dumps(dict(fields), indent=4)


def _author() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user database entry (containers): any name will do
        return "lafuse"


def _created() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _write_text(path: str, text: str) -> None:
    if os.path.isdir(path):
        raise DMLRuntimeError(f"cannot write '{path}': it is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise DMLRuntimeError(f"cannot write '{path}': {e.strerror or e}") from None


# ---------------------------------------------------------------------------------------------
# low-level parsing
# ---------------------------------------------------------------------------------------------

def parse_java_double(s: str) -> float:
    """``Double.parseDouble``: trims, accepts NaN/Infinity, f/d suffixes and hex; not ``inf``/``1_0``."""
    t = s.strip(" \t\r\n\x0b\x0c\x00")
    if _JAVA_DEC.fullmatch(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t.replace("Infinity", "inf"))
    m = _JAVA_HEX.fullmatch(t)
    if m:
        v = float.fromhex("0x" + m.group(2))
        return -v if m.group(1) == "-" else v
    raise ValueError(f"For input string: \"{s}\"")


def _read_file_text(path: str) -> str:
    """Whole file, or the concatenated part files of a directory written by a distributed run."""
    if not os.path.exists(path):
        raise DMLRuntimeError(f"read input file does not exist: {path}")
    try:
        if os.path.isdir(path):
            parts = sorted(p for p in os.listdir(path)
                           if not p.startswith((".", "_")) and os.path.isfile(os.path.join(path, p)))
            chunks = []
            for p in parts:
                with open(os.path.join(path, p), encoding="utf-8") as f:
                    chunks.append(f.read())
            return "".join(c if c.endswith("\n") or not c else c + "\n" for c in chunks)
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise DMLRuntimeError(f"cannot read '{path}': {e}") from None


def _lines(text: str) -> list[str]:
    """Java BufferedReader line splitting (\\n, \\r\\n, \\r); no empty line after a final newline."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _split_csv(line: str, sep: str) -> list[str]:
    """Split one csv line; double-quoted cells may contain the separator ("" escapes a quote)."""
    if '"' not in line:
        return line.split(sep)
    out, cur, i, n, quoted = [], [], 0, len(line), False
    while i < n:
        c = line[i]
        if quoted:
            if c == '"':
                if i + 1 < n and line[i + 1] == '"':
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(c)
        elif c == '"':
            quoted = True
        elif line.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _safe_numeric_text(text: str, sep: str) -> bool:
    """True when Python's float() can only accept what Java's parseDouble accepts, cell by cell."""
    extra = "".join(sorted(set(sep) - set("0123456789.eE+- \t")))
    return re.search(r"[^0-9.eE+\- \t\n\r" + re.escape(extra) + "]", text) is None


# ---------------------------------------------------------------------------------------------
# readers
# ---------------------------------------------------------------------------------------------

def _guess_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    by_ext = {".csv": "csv", ".tsv": "csv", ".mtx": "mm", ".mm": "mm", ".npy": "npy", ".npz": "npy",
              ".txt": "text", ".ijv": "text", ".text": "text"}
    if ext in by_ext:
        return by_ext[ext]
    if os.path.isfile(path):
        with open(path, "rb") as f:
            head = f.read(16)
        if head.startswith(b"%%MatrixMarket"):
            return "mm"
        if head.startswith((b"\x93NUMPY", b"PK\x03\x04")):
            return "npy"
    return "csv"


def read_value(path: str, params: dict[str, Any]) -> Any:
    """DML ``read(path, ...)`` for matrices, scalars and (csv) frames."""
    p = _merged_params(path, params)
    data_type = p.get("data_type", "matrix")
    if data_type == "scalar":
        return _read_scalar(path, p.get("value_type", "double"))
    if data_type == "frame":
        fmt = _norm_format(p.get("format", "csv"), path)
        if fmt != "csv":
            raise DMLRuntimeError(f"frames can only be read from csv, not '{fmt}': {path}")
        return _read_csv_frame(path, p)
    if data_type != "matrix":
        raise DMLRuntimeError(f"cannot read data_type '{data_type}' from '{path}'")
    fmt = _norm_format(p["format"], path) if "format" in p else _guess_format(path)
    if fmt == "csv":
        m = _read_csv_matrix(path, p)
    elif fmt == "text":
        m = _read_ijv(path, p)
    elif fmt == "mm":
        m = _read_mm(path, p)
    else:
        m = _read_npy(path)
    rows, cols = p.get("rows"), p.get("cols")
    if fmt in ("text", "npy") and ((rows is not None and rows != m.shape[0])
                                   or (cols is not None and cols != m.shape[1])):
        raise DMLRuntimeError(f"'{path}' holds a {m.shape[0]}x{m.shape[1]} matrix, but rows={rows}, "
                              f"cols={cols} were given")
    return choose_format(m)


def _parse_long(text: str, shown: str) -> int:
    """Java ``Long.parseLong`` acceptance (no spaces, no decimal point), with its message."""
    if not _INT.fullmatch(text):
        raise ValueError(f"For input string: \"{shown}\"")
    return int(text)


def _read_scalar(path: str, value_type: str) -> Any:
    content = "\n".join(_lines(_read_file_text(path)))
    vt = _norm_value_type(value_type)
    try:
        if vt == "double":
            return parse_java_double(content)
        if vt == "int":
            return _parse_long(content, content)
    except ValueError as e:
        raise DMLRuntimeError(f"{path}: cannot read a {vt.upper()} scalar: {e}") from None
    if vt == "boolean":
        return content.lower() == "true"  # Boolean.parseBoolean: anything else is FALSE
    if vt == "string":
        return content
    raise DMLRuntimeError(f"invalid value_type '{value_type}' for scalar read of '{path}'")


def _csv_rows(path: str, p: dict[str, Any]) -> tuple[list[str], int, str]:
    """Data lines (header removed), the line number of the first one, and the separator."""
    sep = str(p.get("sep", ","))
    if sep == "":
        raise DMLRuntimeError(f"empty csv separator for '{path}'")
    lines = _lines(_read_file_text(path))
    first = 1
    if p.get("header", False) and lines:
        lines = lines[1:]
        first = 2
    return lines, first, sep


def _na_strings(na: Any) -> set[str]:
    """SystemDS separates several NA strings with a middle dot: naStrings="NA·-"."""
    if na is None:
        return set()
    if isinstance(na, (list, tuple)):
        return {str(x) for x in na}
    return set(str(na).split(_NA_SEP))


_NUMERIC_BYTES = b"0123456789.eE+-\n"


def _file_bytes(path: str) -> bytes | None:
    """A plain file's bytes for the pandas fast paths (None for a directory of part files, or when
    it cannot be read: the line parsers report that)."""
    if os.path.isdir(path):
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _pandas_table(body: bytes, sep: str, dtype: Any) -> Any:
    """``body`` parsed by pandas' C parser (no header, no NA strings), or None if it rejects it."""
    import io as _io

    import pandas as pd

    try:
        return pd.read_csv(_io.BytesIO(body), sep=sep, header=None, dtype=dtype, na_filter=False, engine="c")
    except (ValueError, TypeError, OverflowError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def _read_csv_fast(path: str, p: dict[str, Any]) -> np.ndarray | None:
    """A plain numeric csv file read by pandas' C parser (~25x faster than the line loop below: 1e6 x 10
    in 0.5 s instead of 13 s). Only for files the loop would read to the same doubles: a one-byte
    separator, no NA strings, nothing but digits, signs, points, exponents and newlines (so no
    quotes, NaN/Infinity spellings or empty cells), and every row the same length. Anything else
    returns None and the loop reads it, with its cell-precise errors."""
    sep = str(p.get("sep", ","))
    if len(sep) != 1 or not sep.isascii() or sep in "0123456789.eE+-\n" or p.get("naStrings") is not None:
        return None
    raw = _file_bytes(path)
    if raw is None:
        return None
    header = bool(p.get("header", False))
    body = raw[raw.find(b"\n") + 1:] if header else raw
    if not body or body.translate(None, _NUMERIC_BYTES + sep.encode()) or b"\n\n" in raw:
        return None
    df = _pandas_table(body, sep, np.float64)
    if df is None:
        return None
    out = df.to_numpy(dtype=np.float64)
    ncols, nrows = p.get("cols"), p.get("rows")
    if np.isnan(out).any() or (ncols is not None and out.shape[1] != ncols) or (
            nrows is not None and out.shape[0] != nrows):
        return None  # short rows (padded with NaN) or sizes the metadata disagrees with: the loop explains
    out = np.ascontiguousarray(out)
    # pandas' copy-on-write hands out a read-only view (one column); matrices lafuse reads are
    # ordinary writeable arrays, whatever reader made them
    return out if out.flags.writeable else out.copy()


def _read_csv_matrix(path: str, p: dict[str, Any]) -> Any:
    whole = _read_csv_fast(path, p)
    if whole is not None:
        return whole
    lines, first, sep = _csv_rows(path, p)
    fill = p.get("fill", True)
    fill_value = float(p.get("default", 0.0))
    na = p.get("naStrings")
    na_set = _na_strings(na)
    ncols = p.get("cols")
    for k, line in enumerate(lines):
        if line.strip() == "":
            raise DMLRuntimeError(f"{path}:{first + k}: empty line in csv file")
    if ncols is None:
        ncols = len(_split_csv(lines[0], sep)) if lines else 0
    nrows_given = p.get("rows")
    if nrows_given is not None and len(lines) > nrows_given:
        raise DMLRuntimeError(f"{path}: {len(lines)} data lines but rows={nrows_given}")
    out = np.zeros((nrows_given if nrows_given is not None else len(lines), ncols), dtype=np.float64)
    fast = not na_set and _safe_numeric_text("\n".join(lines[:1000]), sep)
    for k, line in enumerate(lines):
        cells = line.split(sep) if '"' not in line else _split_csv(line, sep)
        if len(cells) != ncols:
            raise DMLRuntimeError(f"{path}:{first + k}: expected {ncols} cells, found {len(cells)}")
        if fast and _safe_numeric_text(line, sep):
            try:
                out[k] = [float(c) for c in cells]
                continue
            except ValueError:
                pass  # empty cells or bad numbers: the careful path below explains
        for j, c in enumerate(cells):
            if c in na_set:
                out[k, j] = np.nan
            elif c == "" or c.strip() == "":
                if not fill:
                    raise DMLRuntimeError(
                        f"{path}:{first + k}: empty field in cell {j + 1}; use fill=TRUE to read "
                        f"delimited files with empty fields")
                out[k, j] = fill_value
            else:
                try:
                    out[k, j] = parse_java_double(c)
                except ValueError:
                    raise DMLRuntimeError(f"{path}:{first + k}: cell {j + 1} is not a number: '{c}'") from None
    return out


def _parse_ijv_lines(path: str, lines: list[str], start: int, pattern: bool, first: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    want = 2 if pattern else 3
    toks_per_line = [ln.split() for ln in lines[start:]]
    toks_per_line = [t for t in toks_per_line if t]
    if all(len(t) == want for t in toks_per_line) and _safe_numeric_text("\n".join(lines[start:]), " "):
        flat = [x for t in toks_per_line for x in t]
        try:  # fast path; any oddity falls through to the line-by-line parse and its messages
            fi = np.array(flat[0::want], dtype=np.int64)
            fj = np.array(flat[1::want], dtype=np.int64)
            fv = np.ones(fi.size) if pattern else np.array(flat[2::3], dtype=np.float64)
            marker = (fi == 0) & (fj == 0)
            if not ((fi < 1) | (fj < 1))[~marker].any():
                return fi[~marker] - 1, fj[~marker] - 1, fv[~marker]
        except ValueError:
            pass
    ii: list[int] = []
    jj: list[int] = []
    vv: list[float] = []
    for k in range(start, len(lines)):
        toks = lines[k].split()
        if not toks:
            continue
        if len(toks) != want and not (pattern and len(toks) == 3):
            raise DMLRuntimeError(f"{path}:{first + k}: expected 'row col{'' if pattern else ' value'}', "
                                  f"found '{lines[k].strip()}'")
        try:
            if not (_INT.fullmatch(toks[0]) and _INT.fullmatch(toks[1])):
                raise ValueError("row and column must be integers")
            i, j = int(toks[0]), int(toks[1])
            v = 1.0 if pattern else parse_java_double(toks[2])
        except ValueError as e:
            raise DMLRuntimeError(f"{path}:{first + k}: malformed cell '{lines[k].strip()}': {e}") from None
        if i == 0 and j == 0:
            continue  # "0 0 0" marks an all-zero matrix
        if i < 1 or j < 1:
            raise DMLRuntimeError(f"{path}:{first + k}: cell ({i}, {j}) has a non-positive index")
        ii.append(i - 1)
        jj.append(j - 1)
        vv.append(v)
    return np.asarray(ii, dtype=np.int64), np.asarray(jj, dtype=np.int64), np.asarray(vv, dtype=np.float64)


def _assemble(path: str, ii: np.ndarray, jj: np.ndarray, vv: np.ndarray, rows: int, cols: int) -> Any:
    if ii.size and (ii.max() >= rows or jj.max() >= cols):
        bad = int(np.argmax((ii >= rows) | (jj >= cols)))
        raise DMLRuntimeError(f"{path}: cell ({ii[bad] + 1}, {jj[bad] + 1}) is outside the "
                              f"{rows}x{cols} matrix")
    if ii.size:  # a repeated cell keeps its last value, as SystemDS's reader does
        key = ii * max(cols, 1) + jj
        _, last = np.unique(key[::-1], return_index=True)
        keep = np.sort(ii.size - 1 - last)
        ii, jj, vv = ii[keep], jj[keep], vv[keep]
    return sp.csr_array((vv, (ii, jj)), shape=(rows, cols), dtype=np.float64)


def _read_ijv_fast(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``row col value`` lines as the writers lay them out (one space between tokens, nothing but
    digits, signs, points and exponents) read by pandas' C parser: 1e6 cells in ~0.2 s instead of
    ~3 s. Anything else returns None and the line parser reads it, with its line-precise errors."""
    raw = _file_bytes(path)
    if raw is None:
        return None
    body = raw.rstrip(b"\n")
    if not body or body.translate(None, _NUMERIC_BYTES + b" ") or b"  " in body or b" \n" in body \
            or b"\n " in body or b"\n\n" in body or body.startswith(b" ") or body.endswith(b" ") \
            or re.search(rb"[^0-9 \n][0-9]* ", body):  # an index (a token before a space) of more than digits
        return None
    df = _pandas_table(body, " ", {0: np.int64, 1: np.int64, 2: np.float64})
    if df is None or df.shape[1] != 3:
        return None
    fi, fj, fv = (np.array(df[k].to_numpy()) for k in range(3))
    marker = (fi == 0) & (fj == 0)  # "0 0 0" marks an all-zero matrix
    if ((fi < 1) | (fj < 1))[~marker].any():
        return None  # the line parser names the bad cell
    return fi[~marker] - 1, fj[~marker] - 1, fv[~marker]


def _read_ijv(path: str, p: dict[str, Any]) -> Any:
    fast = _read_ijv_fast(path)
    ii, jj, vv = fast if fast is not None else _parse_ijv_lines(path, _lines(_read_file_text(path)), 0, False, 1)
    rows = p.get("rows", int(ii.max()) + 1 if ii.size else 0)
    cols = p.get("cols", int(jj.max()) + 1 if jj.size else 0)
    return _assemble(path, ii, jj, vv, rows, cols)


def _read_mm(path: str, p: dict[str, Any]) -> Any:
    lines = _lines(_read_file_text(path))
    if not lines or not lines[0].startswith("%%MatrixMarket"):
        raise DMLRuntimeError(f"{path}:1: MatrixMarket header '%%MatrixMarket matrix coordinate ...' missing")
    head = lines[0].split()
    if len(head) < 5 or head[1].lower() != "matrix":
        raise DMLRuntimeError(f"{path}:1: malformed MatrixMarket header '{lines[0]}'")
    layout, field, symmetry = head[2].lower(), head[3].lower(), head[4].lower()
    if layout != "coordinate":
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect format: {layout} (expected coordinate).")
    if field not in ("real", "integer", "pattern"):
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect field: {field} (expected real | integer | pattern).")
    if symmetry not in ("general", "symmetric"):
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect symmetry: {symmetry} "
                              f"(expected general | symmetric).")
    k = 1
    while k < len(lines) and (lines[k].startswith("%") or not lines[k].strip()):
        k += 1
    if k >= len(lines):
        raise DMLRuntimeError(f"{path}: MatrixMarket size line 'rows cols nnz' missing")
    size = lines[k].split()
    if len(size) != 3 or not all(_INT.fullmatch(t) for t in size):
        raise DMLRuntimeError(f"{path}:{k + 1}: malformed MatrixMarket size line '{lines[k]}'")
    rows, cols = int(size[0]), int(size[1])
    for key, val in (("rows", rows), ("cols", cols)):
        if key in p and p[key] != val:
            raise DMLRuntimeError(f"{path}: MM file: invalid specified number of {key}: {p[key]} vs {val}")
    body = lines[k + 1:]
    ii, jj, vv = _parse_ijv_lines(path, body, 0, field == "pattern", k + 2)
    if symmetry == "symmetric":
        off = ii != jj
        ii, jj, vv = np.concatenate([ii, jj[off]]), np.concatenate([jj, ii[off]]), np.concatenate([vv, vv[off]])
    return _assemble(path, ii, jj, vv, rows, cols)


def _read_npy(path: str) -> Any:
    if not os.path.isfile(path):
        raise DMLRuntimeError(f"read input file does not exist: {path}")
    with open(path, "rb") as f:
        head = f.read(6)
    try:
        if head.startswith(b"SEQ"):
            raise DMLRuntimeError(f"'{path}' is a SystemDS binary (Hadoop SequenceFile), which lafuse cannot "
                                  f"read; write it from SystemDS with format=\"csv\" or \"text\"")
        if head.startswith(b"PK"):
            m = sp.load_npz(path)
            return sp.csr_array(m, dtype=np.float64)
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise DMLRuntimeError(f"cannot read '{path}' as npy: {e}") from None
    if arr.ndim != 2:
        arr = arr.reshape(-1, 1) if arr.ndim <= 1 else arr
        if arr.ndim != 2:
            raise DMLRuntimeError(f"'{path}' holds a {arr.ndim}-D array; only 2-D matrices can be read")
    return np.ascontiguousarray(arr, dtype=np.float64)


_FRAME_TYPES = ("STRING", "FP64", "FP32", "INT64", "INT32", "BOOLEAN")


def _read_csv_frame(path: str, p: dict[str, Any]) -> Frame:
    lines, first, sep = _csv_rows(path, p)
    header_line = None
    if p.get("header", False):
        all_lines = _lines(_read_file_text(path))
        header_line = all_lines[0] if all_lines else None
    ncols = p.get("cols")
    if ncols is None:
        ncols = len(_split_csv(lines[0], sep)) if lines else (
            len(_split_csv(header_line, sep)) if header_line is not None else 0)
    schema = [s for s in str(p.get("schema", "")).split(",") if s] or ["STRING"] * ncols
    if len(schema) != ncols:
        raise DMLRuntimeError(f"{path}: schema has {len(schema)} types for {ncols} columns")
    for t in schema:
        if t not in _FRAME_TYPES:
            raise DMLRuntimeError(f"{path}: unknown frame column type '{t}'")
    na = p.get("naStrings")
    na_set = _na_strings(na)
    names = _split_csv(header_line, sep) if header_line is not None else [f"C{j + 1}" for j in range(ncols)]
    columns: list[list[Any]] = [[] for _ in range(ncols)]
    for k, line in enumerate(lines):
        cells = _split_csv(line, sep)
        if len(cells) != ncols:
            raise DMLRuntimeError(f"{path}:{first + k}: expected {ncols} cells, found {len(cells)}")
        for j, c in enumerate(cells):
            columns[j].append(_frame_cell(path, first + k, c, schema[j], na_set))
    return Frame(columns=columns, schema=schema, names=names)


def _frame_cell(path: str, line: int, c: str, vtype: str, na_set: set[str]) -> Any:
    if c in na_set:
        return None
    try:
        if vtype in ("FP64", "FP32"):
            return parse_java_double(c) if c.strip() else 0.0
        if vtype in ("INT64", "INT32"):
            t = c.strip()
            return _parse_long(t, c) if t else 0
    except ValueError as e:
        raise DMLRuntimeError(f"{path}:{line}: cannot read '{c}' as {vtype}: {e}") from None
    if vtype == "BOOLEAN":
        return c.strip().lower() == "true" if c.strip() else False
    return c if c != "" else None


# ---------------------------------------------------------------------------------------------
# writers
# ---------------------------------------------------------------------------------------------

def write_value(value: Any, path: str, params: dict[str, Any]) -> None:
    """DML ``write(value, path, ...)``; ``text`` is the default format, as in SystemDS."""
    p = {("naStrings" if k == "na.strings" else k): _norm_param(k, v) for k, v in params.items() if v is not None}
    if isinstance(value, ListValue):
        raise DMLRuntimeError(f"cannot write a list to '{path}'; write its elements one by one")
    if isinstance(value, Frame):
        _write_frame(value, path, p)
        return
    if not is_matrix(value):
        _write_scalar(value, path)
        return
    fmt = _norm_format(p.get("format", "text"), path)
    rows, cols = value.shape
    if (rows == 0 or cols == 0) and fmt not in ("binary", "npy"):
        raise DMLRuntimeError(f"cannot write '{path}': write of matrices with zero rows or columns "
                              f"is not supported ({rows}x{cols})")
    sep = str(p.get("sep", ","))
    header = bool(p.get("header", False))
    if fmt == "csv":
        _write_text(path, _csv_text(value, sep, header, bool(p.get("sparse", False))))
    elif fmt == "text":
        _write_text(path, _ijv_text(value))
    elif fmt == "mm":
        _write_text(path, f"{_MM_HEADER}\n{rows} {cols} {nnz(value)}\n" + _ijv_text(value))
        if os.path.isfile(path + ".mtd"):  # SystemDS writes none for mm; a stale one would mislead reads
            os.remove(path + ".mtd")
        return
    else:
        _write_npy(value, path)
    fields: list[tuple[str, Any]] = [("data_type", "matrix"), ("value_type", "double"),
                                     ("rows", rows), ("cols", cols)]
    if fmt == "binary":
        fields += [("rows_in_block", _BLOCKSIZE), ("cols_in_block", _BLOCKSIZE)]
    fields += [("nnz", nnz(value)), ("format", fmt), ("author", _author())]
    if fmt == "csv":
        fields += [("header", header), ("sep", sep)]
    fields.append(("created", _created()))
    _write_text(path + ".mtd", _mtd(fields))


def _cells_text(vals: np.ndarray, zero: str) -> list[str]:
    """Double.toString of every value (``zero`` for 0): repr where it equals Java's output (see
    printing._fast_range), the ported algorithm elsewhere."""
    flat = np.ascontiguousarray(vals, dtype=np.float64).ravel()
    out = list(map(repr, flat.tolist()))
    a = np.abs(flat)
    for k in np.flatnonzero(~((a >= 1e-3) & (a < 1e7))).tolist():
        x = float(flat[k])
        out[k] = zero if x == 0.0 else java_double_str(x)
    return out


def _csv_text(m: Any, sep: str, header: bool, sparse_zeros: bool) -> str:
    rows, cols = m.shape
    out: list[str] = []
    if header:
        out.append(sep.join(f"C{j + 1}" for j in range(cols)) + "\n")
    zero = "" if sparse_zeros else "0"
    step = max(1, 1_000_000 // max(cols, 1))  # bounded memory for the string copies
    for r0 in range(0, rows, step):
        block = m[r0:r0 + step]
        cells = _cells_text(block.toarray() if is_sparse(block) else np.asarray(block), zero)
        for i in range(0, len(cells), cols):
            out.append(sep.join(cells[i:i + cols]) + "\n")
    return "".join(out)


def _ijv_text(m: Any) -> str:
    if is_sparse(m):
        c = sp.csr_array(m)
        c.sort_indices()
        ii = np.repeat(np.arange(m.shape[0]), np.diff(c.indptr))
        jj, vv = c.indices, c.data
        keep = vv != 0.0
        ii, jj, vv = ii[keep], jj[keep], vv[keep]
    else:
        a = np.asarray(m)
        ii, jj = np.nonzero(a)
        vv = a[ii, jj]
    if ii.size == 0:
        return "0 0 0\n"
    cells = _cells_text(vv, "0")
    return "".join(f"{i} {j} {s}\n" for i, j, s in zip((ii + 1).tolist(), (jj + 1).tolist(), cells))


def _write_npy(m: Any, path: str) -> None:
    if os.path.isdir(path):
        raise DMLRuntimeError(f"cannot write '{path}': it is a directory")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:  # a file object keeps numpy from appending ".npy"
            if is_sparse(m):
                sp.save_npz(f, sp.csr_matrix(m), compressed=False)
            else:
                np.save(f, np.asarray(m, dtype=np.float64), allow_pickle=False)
    except OSError as e:
        raise DMLRuntimeError(f"cannot write '{path}': {e.strerror or e}") from None


def _write_scalar(v: Any, path: str) -> None:
    if isinstance(v, (bool, np.bool_)):
        text, vt = ("true" if v else "false"), "boolean"
    elif isinstance(v, (int, np.integer)):
        text, vt = str(int(v)), "int"
    elif isinstance(v, (float, np.floating)):
        text, vt = java_double_str(float(v)), "double"
    elif isinstance(v, str):
        text, vt = v, "string"
    else:
        raise DMLRuntimeError(f"cannot write a value of type {type(v).__name__} to '{path}'")
    _write_text(path, text)
    _write_text(path + ".mtd", _mtd([("data_type", "scalar"), ("value_type", vt), ("format", "text"),
                                     ("author", _author()), ("created", _created())]))


def _frame_text_cell(x: Any, vtype: str) -> str:
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if vtype in ("FP64", "FP32") or isinstance(x, (float, np.floating)):
        return java_double_str(float(x))
    return str(x)


def _write_frame(f: Frame, path: str, p: dict[str, Any]) -> None:
    fmt = str(p.get("format", "text")).lower()
    if fmt != "csv":
        raise DMLRuntimeError(f"frames can only be written as csv, not '{fmt}': {path}")
    sep = str(p.get("sep", ","))
    header = bool(p.get("header", False))
    nrows, ncols = f.shape
    names = list(f.names) if f.names else [f"C{j + 1}" for j in range(ncols)]
    out = [sep.join(names) + "\n"] if header else []
    for i in range(nrows):
        out.append(sep.join(_frame_text_cell(f.columns[j][i], f.schema[j]) for j in range(ncols)) + "\n")
    _write_text(path, "".join(out))
    _write_text(path + ".mtd", _mtd([
        ("data_type", "frame"), ("schema", "".join(t + "," for t in f.schema)), ("rows", nrows),
        ("cols", ncols), ("format", "csv"), ("author", _author()), ("header", header), ("sep", sep),
        ("created", _created())]))
