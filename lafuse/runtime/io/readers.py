"""DML ``read``: matrices from csv, text (IJV), MatrixMarket and npy files, scalars, csv frames.

Every reader checks what it read against what was declared for it (the ``.mtd``, the read's
parameters, a MatrixMarket size line, an npy header) and asks the memory budget
(``lafuse.memory.check``) before it allocates: a 26-byte text file can declare a 1e9 x 1e9 matrix.
"""

from __future__ import annotations

import os
import re
import tokenize
from typing import Any

import numpy as np

from lafuse import memory
from lafuse.errors import DMLRuntimeError
from lafuse.formats import sparse_format
from lafuse.mtd import (
    NA_SEP,
    Meta,
    check_matrix,
    merged,
    norm_format,
    norm_value_type,
    verify_data,
    verify_size,
)
from lafuse.runtime.io.text import (
    INT,
    NUMERIC_BYTES,
    decode,
    file_size,
    lines,
    pandas_table,
    parse_java_double,
    parse_long,
    read_raw,
    safe_numeric_text,
    split_csv,
    strip_bom,
    writeable,
)
from lafuse.runtime.values import Frame, choose_format, is_matrix, nnz
from lafuse.sparse import sp

# measured peaks of whole reads (tracemalloc), beyond the file's bytes: the csv path holds the
# dense result about 4 times over (pandas' frame, its copy, the result; 2e4 x 200: 199 MB for a 77 MB
# file and 32 MB of doubles), the IJV path about 100 bytes per cell (token arrays, duplicate removal,
# COO -> CSR; 4e6 cells: 521 MB for a 113 MB file), and COO -> CSR two index arrays of rows+1
# (1e8 rows, 1 cell: 16.35 bytes per row, rounded up)
_CSV_DENSE_COPIES = 4
_IJV_BYTES_PER_CELL = 100
_CSR_BYTES_PER_ROW = 17


def read_value(path: str, params: dict[str, Any], expect: tuple[str, int, int, int] | None = None) -> Any:
    """DML ``read(path, ...)``. ``expect`` is (data type, rows, cols, nnz) the script was compiled for
    (-1 unknown): a file that changed since then is an error, not a value of another size."""
    meta = merged(path, params)
    p = meta.params
    if "format" not in p and "sep" not in p and path.lower().endswith(".tsv"):
        p["sep"] = "\t"  # a format guessed from the extension brings its separator
    data_type = p.get("data_type", "matrix")
    if data_type == "scalar":
        v = _read_scalar(path, meta, p.get("value_type", "double"))
    elif data_type == "frame":
        fmt = norm_format(p.get("format", "csv"), path)
        if fmt != "csv":
            raise DMLRuntimeError(f"frames can only be read from csv, not '{fmt}': {path}")
        v = _read_csv_frame(path, meta)
    elif data_type != "matrix":
        raise DMLRuntimeError(f"cannot read data_type '{data_type}' from '{path}'")
    else:
        v = _read_matrix(path, meta)
    if expect is not None:
        _check_expected(path, v, meta, expect, "data_type" in params)
    return v


def _read_matrix(path: str, meta: Meta) -> Any:
    p = meta.params
    fmt = norm_format(p["format"], path) if "format" in p else guess_format(path)
    if fmt in ("binary", "npy"):
        m = _read_npy(path, meta)
    else:
        raw = _load(path, meta)
        if fmt == "csv":
            m = _read_csv_matrix(path, meta, raw)
        elif fmt == "text":
            m = _read_ijv(path, meta, raw)
        else:
            m = _read_mm(path, meta, raw)
    check_matrix(path, meta, m.shape[0], m.shape[1], lambda: nnz(m))
    return choose_format(m)


def _load(path: str, meta: Meta) -> bytes:
    """A text data file's bytes, checked against its ``.mtd``'s data check, without a byte order mark."""
    if not os.path.exists(path):
        raise DMLRuntimeError(f"read input file does not exist: {path}")
    verify_size(path, meta)
    memory.check(file_size(path), f"reading '{path}' into memory")
    raw = read_raw(path)
    verify_data(path, meta, raw)
    return strip_bom(raw)


def _check_expected(path: str, v: Any, meta: Meta, expect: tuple[str, int, int, int], typed: bool) -> None:
    """``typed``: the read statement gave data_type (possibly as a variable the compiler did not see)."""
    dt, rows, cols, want_nnz = expect
    kind = "matrix" if is_matrix(v) else "frame" if isinstance(v, Frame) else "scalar"
    if not typed and dt in ("matrix", "frame", "scalar") and dt != kind:
        raise DMLRuntimeError(f"'{path}' holds a {kind}, but the script was compiled for a {dt} (from its "
                              f"metadata then): the file changed while the script ran")
    if kind != "matrix":
        return
    r, c = v.shape
    if (rows >= 0 and rows != r) or (cols >= 0 and cols != c):
        raise DMLRuntimeError(f"'{path}' holds a {r}x{c} matrix, but the script was compiled for {rows}x{cols} "
                              f"(from its metadata then): the file changed while the script ran")
    if want_nnz >= 0:
        z = meta.params["nnz"] if "nnz" in meta.params else nnz(v)  # a declared nnz was checked already
        if z != want_nnz:
            raise DMLRuntimeError(f"'{path}' holds {z} non-zeros, but the script was compiled for {want_nnz} "
                                  f"(from its metadata then): the file changed while the script ran")


def guess_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    by_ext = {".csv": "csv", ".tsv": "csv", ".mtx": "mm", ".mm": "mm", ".npy": "npy", ".npz": "npy",
              ".txt": "text", ".ijv": "text", ".text": "text"}
    if ext in by_ext:
        return by_ext[ext]
    if os.path.isfile(path):
        try:
            with open(path, "rb") as f:
                head = strip_bom(f.read(20))
        except OSError as e:
            raise DMLRuntimeError(f"cannot read '{path}': {e.strerror or e}") from None
        if head.startswith(b"%%MatrixMarket"):
            return "mm"
        if head.startswith((b"\x93NUMPY", b"PK\x03\x04")):
            return "npy"
    return "csv"


# ---------------------------------------------------------------------------------------------
# scalars
# ---------------------------------------------------------------------------------------------

def _read_scalar(path: str, meta: Meta, value_type: str) -> Any:
    content = "\n".join(lines(decode(path, _load(path, meta))))
    vt = norm_value_type(value_type)
    try:
        if vt == "double":
            return parse_java_double(content)
        if vt == "int":
            return parse_long(content, content)
    except ValueError as e:
        raise DMLRuntimeError(f"{path}: cannot read a {vt.upper()} scalar: {e}") from None
    if vt == "boolean":
        return content.lower() == "true"  # Boolean.parseBoolean: anything else is FALSE
    if vt == "string":
        return content
    raise DMLRuntimeError(f"invalid value_type '{value_type}' for scalar read of '{path}'")


# ---------------------------------------------------------------------------------------------
# csv
# ---------------------------------------------------------------------------------------------

def _csv_sep(path: str, p: dict[str, Any]) -> str:
    sep = str(p.get("sep", ","))
    if sep == "":
        raise DMLRuntimeError(f"empty csv separator for '{path}'")
    return sep


def _na_strings(na: Any) -> set[str]:
    """SystemDS separates several NA strings with a middle dot: naStrings="NA·-"."""
    if na is None:
        return set()
    if isinstance(na, (list, tuple)):
        return {str(x) for x in na}
    return set(str(na).split(NA_SEP))


def _csv_extent(raw: bytes, sep: str, header: bool) -> tuple[int, int]:
    """Data lines and cells of the first one, from the bytes (for the memory estimate before parsing)."""
    n = raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0) - (1 if header else 0)
    start = raw.find(b"\n") + 1 if header else 0
    end = raw.find(b"\n", start)
    first = raw[start:end if end >= 0 else len(raw)]
    return max(n, 0), first.count(sep.encode("utf-8", "replace")) + 1 if first else 0


def _read_csv_fast(raw: bytes, p: dict[str, Any]) -> np.ndarray | None:
    """A plain numeric csv file read by pandas' C parser (~25x faster than the line loop below: 1e6 x 10
    in 0.5 s instead of 13 s). Only for files the loop would read to the same doubles: a one-byte
    separator, no NA strings, nothing but digits, signs, points, exponents and newlines (so no
    quotes, NaN/Infinity spellings or empty cells), and every row the same length. Anything else
    returns None and the loop reads it, with its cell-precise errors."""
    sep = str(p.get("sep", ","))
    if len(sep) != 1 or not sep.isascii() or sep in "0123456789.eE+-\n" or p.get("naStrings") is not None:
        return None
    header = bool(p.get("header", False))
    body = raw[raw.find(b"\n") + 1:] if header else raw
    if not body or body.translate(None, NUMERIC_BYTES + sep.encode()) or b"\n\n" in raw:
        return None
    df = pandas_table(body, sep, np.float64)
    if df is None:
        return None
    out = df.to_numpy(dtype=np.float64)
    ncols, nrows = p.get("cols"), p.get("rows")
    if np.isnan(out).any() or (ncols is not None and out.shape[1] != ncols) or (
            nrows is not None and out.shape[0] != nrows):
        return None  # short rows (padded with NaN) or sizes the metadata disagrees with: the loop explains
    return writeable(out)


def _read_csv_matrix(path: str, meta: Meta, raw: bytes) -> np.ndarray:
    p = meta.params
    sep = _csv_sep(path, p)
    header = bool(p.get("header", False))
    n, seen_cols = _csv_extent(raw, sep, header)
    ncols = p.get("cols")
    est_cols = max(seen_cols, ncols or 0)
    memory.check(len(raw) + _CSV_DENSE_COPIES * 8 * n * est_cols, f"reading '{path}' ({n}x{est_cols}, dense)")
    whole = _read_csv_fast(raw, p)
    if whole is not None:
        return whole
    all_lines = lines(decode(path, raw))
    data, first = (all_lines[1:], 2) if header and all_lines else (all_lines, 1)
    fill = p.get("fill", True)
    fill_value = float(p.get("default", 0.0))
    na_set = _na_strings(p.get("naStrings"))
    for k, line in enumerate(data):
        if line.strip() == "":
            raise DMLRuntimeError(f"{path}:{first + k}: empty line in csv file")
    first_cells = len(split_csv(data[0], sep)) if data else 0
    if ncols is None:
        ncols = first_cells
    if (p.get("rows") is not None and len(data) != p["rows"]) or (data and first_cells != ncols):
        check_matrix(path, meta, len(data), first_cells, lambda: 0)  # the declared sizes are wrong
    out = np.zeros((len(data), ncols), dtype=np.float64)
    fast = not na_set and safe_numeric_text("\n".join(data[:1000]), sep)
    for k, line in enumerate(data):
        cells = line.split(sep) if '"' not in line else split_csv(line, sep)
        if len(cells) != ncols:
            raise DMLRuntimeError(f"{path}:{first + k}: expected {ncols} cells, found {len(cells)}")
        if fast and safe_numeric_text(line, sep):
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


# ---------------------------------------------------------------------------------------------
# text (IJV) and MatrixMarket
# ---------------------------------------------------------------------------------------------

def _parse_ijv_lines(path: str, text_lines: list[str], start: int, pattern: bool, first: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    want = 2 if pattern else 3
    toks_per_line = [ln.split() for ln in text_lines[start:]]
    toks_per_line = [t for t in toks_per_line if t]
    if all(len(t) == want for t in toks_per_line) and safe_numeric_text("\n".join(text_lines[start:]), " "):
        flat = [x for t in toks_per_line for x in t]
        try:  # fast path; any oddity falls through to the line-by-line parse and its messages
            fi = np.array(flat[0::want], dtype=np.int64)
            fj = np.array(flat[1::want], dtype=np.int64)
            fv = np.ones(fi.size) if pattern else np.array(flat[2::3], dtype=np.float64)
            marker = (fi == 0) & (fj == 0)
            if not ((fi < 1) | (fj < 1))[~marker].any():
                return fi[~marker] - 1, fj[~marker] - 1, fv[~marker]
        except (ValueError, OverflowError):
            pass
    ii: list[int] = []
    jj: list[int] = []
    vv: list[float] = []
    for k in range(start, len(text_lines)):
        toks = text_lines[k].split()
        if not toks:
            continue
        if len(toks) != want and not (pattern and len(toks) == 3):
            raise DMLRuntimeError(f"{path}:{first + k}: expected 'row col{'' if pattern else ' value'}', "
                                  f"found '{text_lines[k].strip()}'")
        try:
            if not (INT.fullmatch(toks[0]) and INT.fullmatch(toks[1])):
                raise ValueError("row and column must be integers")
            i, j = int(toks[0]), int(toks[1])
            v = 1.0 if pattern else parse_java_double(toks[2])
        except ValueError as e:
            raise DMLRuntimeError(f"{path}:{first + k}: malformed cell '{text_lines[k].strip()}': {e}") from None
        if i == 0 and j == 0:
            continue  # "0 0 0" marks an all-zero matrix
        if i < 1 or j < 1:
            raise DMLRuntimeError(f"{path}:{first + k}: cell ({i}, {j}) has a non-positive index")
        if i > 2**62 or j > 2**62:
            raise DMLRuntimeError(f"{path}:{first + k}: cell ({i}, {j}) has an index beyond any matrix")
        ii.append(i - 1)
        jj.append(j - 1)
        vv.append(v)
    return np.asarray(ii, dtype=np.int64), np.asarray(jj, dtype=np.int64), np.asarray(vv, dtype=np.float64)


def _assemble(path: str, ii: np.ndarray, jj: np.ndarray, vv: np.ndarray, rows: int, cols: int,
              file_bytes: int) -> Any:
    if ii.size and (ii.max() >= rows or jj.max() >= cols):
        bad = int(np.argmax((ii >= rows) | (jj >= cols)))
        raise DMLRuntimeError(f"{path}: cell ({ii[bad] + 1}, {jj[bad] + 1}) is outside the "
                              f"{rows}x{cols} matrix")
    dense = 0 if sparse_format(rows, cols, int(ii.size)) else 8 * rows * cols
    memory.check(file_bytes + _IJV_BYTES_PER_CELL * ii.size + _CSR_BYTES_PER_ROW * (rows + 1) + dense,
                 f"reading '{path}' ({rows}x{cols}, {ii.size} cells)")
    if ii.size:  # a repeated cell keeps its last value, as SystemDS's reader does
        key = ii * max(cols, 1) + jj
        _, last = np.unique(key[::-1], return_index=True)
        keep = np.sort(ii.size - 1 - last)
        ii, jj, vv = ii[keep], jj[keep], vv[keep]
    return sp.csr_array((vv, (ii, jj)), shape=(rows, cols), dtype=np.float64)


def _read_ijv_fast(raw: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``row col value`` lines as the writers lay them out (one space between tokens, nothing but
    digits, signs, points and exponents) read by pandas' C parser: 1e6 cells in ~0.2 s instead of
    ~3 s. Anything else returns None and the line parser reads it, with its line-precise errors."""
    body = raw.rstrip(b"\n")
    if not body or body.translate(None, NUMERIC_BYTES + b" ") or b"  " in body or b" \n" in body \
            or b"\n " in body or b"\n\n" in body or body.startswith(b" ") or body.endswith(b" ") \
            or re.search(rb"[^0-9 \n][0-9]* ", body):  # an index (a token before a space) of more than digits
        return None
    df = pandas_table(body, " ", {0: np.int64, 1: np.int64, 2: np.float64})
    if df is None or df.shape[1] != 3:
        return None
    fi, fj, fv = (np.array(df[k].to_numpy()) for k in range(3))
    marker = (fi == 0) & (fj == 0)  # "0 0 0" marks an all-zero matrix
    if ((fi < 1) | (fj < 1))[~marker].any():
        return None  # the line parser names the bad cell
    return fi[~marker] - 1, fj[~marker] - 1, fv[~marker]


def _read_ijv(path: str, meta: Meta, raw: bytes) -> Any:
    p = meta.params
    fast = _read_ijv_fast(raw)
    ii, jj, vv = fast if fast is not None else _parse_ijv_lines(path, lines(decode(path, raw)), 0, False, 1)
    rows = p.get("rows", int(ii.max()) + 1 if ii.size else 0)
    cols = p.get("cols", int(jj.max()) + 1 if jj.size else 0)
    return _assemble(path, ii, jj, vv, rows, cols, len(raw))


def _read_mm(path: str, meta: Meta, raw: bytes) -> Any:
    p = meta.params
    text_lines = lines(decode(path, raw))
    if not text_lines or not text_lines[0].startswith("%%MatrixMarket"):
        raise DMLRuntimeError(f"{path}:1: MatrixMarket header '%%MatrixMarket matrix coordinate ...' missing")
    head = text_lines[0].split()
    if len(head) < 5 or head[1].lower() != "matrix":
        raise DMLRuntimeError(f"{path}:1: malformed MatrixMarket header '{text_lines[0]}'")
    layout, field, symmetry = head[2].lower(), head[3].lower(), head[4].lower()
    if layout != "coordinate":
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect format: {layout} (expected coordinate).")
    if field not in ("real", "integer", "pattern"):
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect field: {field} (expected real | integer | pattern).")
    if symmetry not in ("general", "symmetric"):
        raise DMLRuntimeError(f"{path}: MatrixMarket: Incorrect symmetry: {symmetry} "
                              f"(expected general | symmetric).")
    k = 1
    while k < len(text_lines) and (text_lines[k].startswith("%") or not text_lines[k].strip()):
        k += 1
    if k >= len(text_lines):
        raise DMLRuntimeError(f"{path}: MatrixMarket size line 'rows cols nnz' missing")
    size = text_lines[k].split()
    if len(size) != 3 or not all(INT.fullmatch(t) and int(t) >= 0 for t in size):
        raise DMLRuntimeError(f"{path}:{k + 1}: malformed MatrixMarket size line '{text_lines[k]}'")
    rows, cols, entries = (int(t) for t in size)
    for key, val in (("rows", rows), ("cols", cols)):
        if key in p and p[key] != val:
            raise DMLRuntimeError(f"{path}: MM file: invalid specified number of {key}: {p[key]} vs {val}")
    ii, jj, vv = _parse_ijv_lines(path, text_lines[k + 1:], 0, field == "pattern", k + 2)
    if ii.size != entries:
        raise DMLRuntimeError(f"{path}: the MatrixMarket size line declares {entries} entries, but the file "
                              f"holds {ii.size} (a truncated or partly written file?)")
    if symmetry == "symmetric":
        off = ii != jj
        ii, jj, vv = np.concatenate([ii, jj[off]]), np.concatenate([jj, ii[off]]), np.concatenate([vv, vv[off]])
    return _assemble(path, ii, jj, vv, rows, cols, len(raw))


# ---------------------------------------------------------------------------------------------
# npy / npz (lafuse's binary)
# ---------------------------------------------------------------------------------------------

_DTYPE_KINDS = {"c": "complex", "M": "datetime", "m": "timedelta", "S": "byte string", "U": "string",
                "O": "Python object", "V": "structured (record)"}


def _check_dtype(path: str, dtype: np.dtype) -> None:
    """Only real numbers become matrix cells: complex, date and text arrays would lose what they hold."""
    if dtype.kind not in "biuf":
        kind = _DTYPE_KINDS.get(dtype.kind, dtype.kind)
        raise DMLRuntimeError(f"'{path}' holds {kind} data (dtype {dtype}); matrices can be read only from "
                              f"boolean, integer or floating-point arrays")


def _matrix_shape(path: str, shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 2:
        return shape[0], shape[1]
    if len(shape) <= 1:
        return (int(np.prod(shape)), 1)  # a scalar or vector array is a column vector
    raise DMLRuntimeError(f"'{path}' holds a {len(shape)}-D array; only 2-D matrices can be read")


def _read_npy(path: str, meta: Meta) -> Any:
    if os.path.isdir(path):
        raise DMLRuntimeError(f"cannot read '{path}': it is a directory (npy/binary data is one file)")
    if not os.path.isfile(path):
        raise DMLRuntimeError(f"read input file does not exist: {path}")
    verify_size(path, meta)
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as f:
            head = f.read(6)
            if head.startswith(b"SEQ"):
                raise DMLRuntimeError(f"'{path}' is a SystemDS binary (Hadoop SequenceFile), which lafuse cannot "
                                      f"read; write it from SystemDS with format=\"csv\" or \"text\"")
            if head.startswith(b"PK"):
                return _read_npz(path, meta, size)
            f.seek(0)
            shape, fortran, dtype, offset = _npy_header(path, f)
            rows, cols = _matrix_shape(path, shape)
            count = rows * cols
            if size - offset != count * dtype.itemsize:
                raise DMLRuntimeError(
                    f"'{path}' is truncated or damaged: its header declares a {'x'.join(map(str, shape)) or '1'} "
                    f"{dtype} array ({count * dtype.itemsize} bytes of data), the file holds {size - offset}")
            convert = dtype != np.dtype("<f8") or (fortran and rows > 1 and cols > 1)
            memory.check(size + (8 * count if convert else 0), f"reading '{path}' ({rows}x{cols}, dense)")
            buf = memory.fresh_bytes(size)  # the file once, in memory the result can live in
            f.seek(0)
            if f.readinto(buf.data) != size:
                raise DMLRuntimeError(f"'{path}' changed while it was read")
    except OSError as e:
        raise DMLRuntimeError(f"cannot read '{path}': {e.strerror or e}") from None
    verify_data(path, meta, buf.data)
    arr = buf[offset:].view(dtype) if count else np.zeros(0, dtype=dtype)
    arr = arr.reshape((rows, cols), order="F" if fortran else "C")
    # a copy only to convert, reorder or align (a header padded to an odd length): kernels want aligned data
    return np.require(arr, dtype=np.float64, requirements=["C", "A", "W"])


def _npy_header(path: str, f: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except (ValueError, TypeError, SyntaxError, EOFError, RecursionError, tokenize.TokenError) as e:
        # (NumPy parses the header's dict with the tokenizer: a flipped byte can end it mid-expression)
        raise DMLRuntimeError(f"cannot read '{path}' as npy: {e}") from None
    _check_dtype(path, dtype)
    return tuple(int(s) for s in shape), bool(fortran), dtype, f.tell()


def _read_npz(path: str, meta: Meta, size: int) -> Any:
    """SciPy's sparse .npz (lafuse's binary of a sparse matrix)."""
    import io as _io  # deferred: zipfile and zlib, only for compressed .npz files
    import zipfile
    import zlib

    memory.check(3 * size, f"reading '{path}' (sparse npz of {size} bytes)")
    raw = read_raw(path)
    verify_data(path, meta, raw)
    try:
        m = sp.load_npz(_io.BytesIO(raw))
    except (ValueError, KeyError, TypeError, EOFError, OSError, zipfile.BadZipFile, zlib.error,
            NotImplementedError) as e:
        raise DMLRuntimeError(f"cannot read '{path}' as a sparse npz: {e}") from None
    _check_dtype(path, m.dtype)
    if len(m.shape) != 2:
        raise DMLRuntimeError(f"'{path}' holds a {len(m.shape)}-D array; only 2-D matrices can be read")
    try:
        return sp.csr_array(m, dtype=np.float64)
    except (ValueError, IndexError) as e:  # inconsistent index arrays
        raise DMLRuntimeError(f"'{path}' holds a damaged sparse matrix: {e}") from None


# ---------------------------------------------------------------------------------------------
# frames (csv)
# ---------------------------------------------------------------------------------------------

_FRAME_TYPES = ("STRING", "FP64", "FP32", "INT64", "INT32", "BOOLEAN")
_FRAME_CELL_BYTES = 64  # a Python object and its list slot, per cell


def _read_csv_frame(path: str, meta: Meta) -> Frame:
    p = meta.params
    raw = _load(path, meta)
    sep = _csv_sep(path, p)
    header = bool(p.get("header", False))
    n, c = _csv_extent(raw, sep, header)
    memory.check(2 * len(raw) + _FRAME_CELL_BYTES * n * max(c, p.get("cols") or 0),
                 f"reading frame '{path}' ({n}x{c})")
    all_lines = lines(decode(path, raw))
    header_line = all_lines[0] if header and all_lines else None
    data, first = (all_lines[1:], 2) if header and all_lines else (all_lines, 1)
    ncols = p.get("cols")
    if ncols is None:
        ncols = len(split_csv(data[0], sep)) if data else (
            len(split_csv(header_line, sep)) if header_line is not None else 0)
    if p.get("rows") is not None and p["rows"] != len(data):
        raise DMLRuntimeError(f"'{path}': Read frame dimensions differ from meta data: [{len(data)}x{ncols}] "
                              f"vs. [{p['rows']}x{ncols}] (declared by {meta.source('rows')})")
    schema = [s for s in str(p.get("schema", "")).split(",") if s] or ["STRING"] * ncols
    if len(schema) != ncols:
        raise DMLRuntimeError(f"{path}: schema has {len(schema)} types for {ncols} columns")
    for t in schema:
        if t not in _FRAME_TYPES:
            raise DMLRuntimeError(f"{path}: unknown frame column type '{t}'")
    na_set = _na_strings(p.get("naStrings"))
    names = split_csv(header_line, sep) if header_line is not None else [f"C{j + 1}" for j in range(ncols)]
    if len(names) != ncols:
        raise DMLRuntimeError(f"{path}:1: the header has {len(names)} names for {ncols} columns")
    columns: list[list[Any]] = [[] for _ in range(ncols)]
    for k, line in enumerate(data):
        cells = split_csv(line, sep)
        if len(cells) != ncols:
            raise DMLRuntimeError(f"{path}:{first + k}: expected {ncols} cells, found {len(cells)}")
        for j, cell in enumerate(cells):
            columns[j].append(_frame_cell(path, first + k, cell, schema[j], na_set))
    return Frame(columns=columns, schema=schema, names=names)


def _frame_cell(path: str, line: int, c: str, vtype: str, na_set: set[str]) -> Any:
    if c in na_set:
        return None
    try:
        if vtype in ("FP64", "FP32"):
            return parse_java_double(c) if c.strip() else 0.0
        if vtype in ("INT64", "INT32"):
            t = c.strip()
            return parse_long(t, c) if t else 0
    except ValueError as e:
        raise DMLRuntimeError(f"{path}:{line}: cannot read '{c}' as {vtype}: {e}") from None
    if vtype == "BOOLEAN":
        return c.strip().lower() == "true" if c.strip() else False
    return c if c != "" else None

