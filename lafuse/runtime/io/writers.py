"""DML ``write``: matrices, scalars and csv frames, each data file replaced together with its ``.mtd``
(``atomic.AtomicFiles``: data first, metadata last), the ``.mtd`` carrying the data check."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.mtd import author, check_text, created, mtd_text, norm_format, norm_param
from lafuse.runtime.io.atomic import AtomicFiles, HashingWriter
from lafuse.runtime.printing import java_double_str
from lafuse.runtime.values import Frame, ListValue, is_matrix, is_sparse, nnz
from lafuse.sparse import sp

_BLOCKSIZE = 1000  # SystemDS default block size, recorded in binary .mtd files
_MM_HEADER = "%%MatrixMarket matrix coordinate real general"
_CHUNK_CELLS = 1_000_000  # cells turned into text at a time: bounded memory for the string copies


def write_value(value: Any, path: str, params: dict[str, Any]) -> None:
    """DML ``write(value, path, ...)``; ``text`` is the default format, as in SystemDS."""
    where = f"write of '{path}'"
    p = {("naStrings" if k == "na.strings" else k): norm_param(k, v, where)
         for k, v in params.items() if v is not None}
    desc = str(p["description"]) if p.get("description") not in (None, "") else None
    if isinstance(value, ListValue):
        raise DMLRuntimeError(f"cannot write a list to '{path}'; write its elements one by one")
    if isinstance(value, Frame):
        _write_frame(value, path, p, desc)
        return
    if not is_matrix(value):
        _write_scalar(value, path, desc)
        return
    fmt = norm_format(p.get("format", "text"), path)
    rows, cols = value.shape
    if (rows == 0 or cols == 0) and fmt not in ("binary", "npy"):
        raise DMLRuntimeError(f"cannot write '{path}': write of matrices with zero rows or columns "
                              f"is not supported ({rows}x{cols})")
    sep = str(p.get("sep", ","))
    header = bool(p.get("header", False))
    z = nnz(value)
    with AtomicFiles() as tx:
        if fmt == "csv":
            data = tx.stage(path, lambda w: _write_chunks(w, _csv_chunks(value, sep, header, bool(p.get("sparse")))))
        elif fmt == "text":
            data = tx.stage(path, lambda w: _write_chunks(w, _ijv_chunks(value, z)))
        elif fmt == "mm":
            head = f"{_MM_HEADER}\n{rows} {cols} {z}\n"
            tx.stage(path, lambda w: _write_chunks(w, _prefixed(head, _ijv_chunks(value, z))))
            tx.remove(path + ".mtd")  # SystemDS writes none for mm; a stale one would mislead reads
            return
        else:
            data = tx.stage(path, lambda w: _write_npy(w, value))
        fields: list[tuple[str, Any]] = [("data_type", "matrix"), ("value_type", "double"),
                                         ("rows", rows), ("cols", cols)]
        if fmt == "binary":
            fields += [("rows_in_block", _BLOCKSIZE), ("cols_in_block", _BLOCKSIZE)]
        fields += [("nnz", z), ("format", fmt), ("description", check_text(data.nbytes, data.crc, desc)),
                   ("author", author())]
        if fmt == "csv":
            fields += [("header", header), ("sep", sep)]
        fields.append(("created", created()))
        tx.stage(path + ".mtd", lambda w: w.text(mtd_text(fields)))


def _write_chunks(w: HashingWriter, chunks: Iterator[str]) -> None:
    for c in chunks:
        w.text(c)


def _prefixed(head: str, rest: Iterator[str]) -> Iterator[str]:
    yield head
    yield from rest


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


def _csv_chunks(m: Any, sep: str, header: bool, sparse_zeros: bool) -> Iterator[str]:
    rows, cols = m.shape
    if header:
        yield sep.join(f"C{j + 1}" for j in range(cols)) + "\n"
    zero = "" if sparse_zeros else "0"
    step = max(1, _CHUNK_CELLS // max(cols, 1))
    for r0 in range(0, rows, step):
        block = m[r0:r0 + step]
        cells = _cells_text(block.toarray() if is_sparse(block) else np.asarray(block), zero)
        yield "".join(sep.join(cells[i:i + cols]) + "\n" for i in range(0, len(cells), cols))


def _ijv_chunks(m: Any, total_nnz: int) -> Iterator[str]:
    """``i j v`` lines of the non-zeros, row-major, a block of rows at a time; ``0 0 0`` when there are none."""
    if total_nnz == 0:
        yield "0 0 0\n"
        return
    if is_sparse(m):
        c = sp.csr_array(m)
        c.sort_indices()
        ii = np.repeat(np.arange(m.shape[0]), np.diff(c.indptr))
        jj, vv = c.indices, c.data
        keep = vv != 0.0
        ii, jj, vv = ii[keep], jj[keep], vv[keep]
        for k in range(0, ii.size, _CHUNK_CELLS):
            yield _ijv_lines(ii[k:k + _CHUNK_CELLS], jj[k:k + _CHUNK_CELLS], vv[k:k + _CHUNK_CELLS])
        return
    rows, cols = m.shape
    step = max(1, _CHUNK_CELLS // max(cols, 1))
    for r0 in range(0, rows, step):
        a = np.asarray(m[r0:r0 + step])
        ii, jj = np.nonzero(a)
        if ii.size:
            yield _ijv_lines(ii + r0, jj, a[ii, jj])


def _ijv_lines(ii: np.ndarray, jj: np.ndarray, vv: np.ndarray) -> str:
    cells = _cells_text(vv, "0")
    return "".join(f"{i} {j} {s}\n" for i, j, s in zip((ii + 1).tolist(), (jj + 1).tolist(), cells))


def _write_npy(w: HashingWriter, m: Any) -> None:
    if is_sparse(m):
        buf = io.BytesIO()  # numpy's zip writer wants a real file or a buffer
        sp.save_npz(buf, sp.csr_matrix(m), compressed=False)
        w.write(buf.getbuffer())
    else:
        np.save(w, np.asarray(m, dtype=np.float64), allow_pickle=False)


def _write_scalar(v: Any, path: str, desc: str | None) -> None:
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
    with AtomicFiles() as tx:
        data = tx.stage(path, lambda w: w.text(text))
        fields = [("data_type", "scalar"), ("value_type", vt), ("format", "text"),
                  ("description", check_text(data.nbytes, data.crc, desc)), ("author", author()),
                  ("created", created())]
        tx.stage(path + ".mtd", lambda w: w.text(mtd_text(fields)))


def _frame_text_cell(x: Any, vtype: str) -> str:
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if vtype in ("FP64", "FP32") or isinstance(x, (float, np.floating)):
        return java_double_str(float(x))
    return str(x)


def _frame_chunks(f: Frame, sep: str, header: bool) -> Iterator[str]:
    nrows, ncols = f.shape
    if header:
        names = list(f.names) if f.names else [f"C{j + 1}" for j in range(ncols)]
        yield sep.join(names) + "\n"
    step = max(1, _CHUNK_CELLS // max(ncols, 1))
    for r0 in range(0, nrows, step):
        yield "".join(sep.join(_frame_text_cell(f.columns[j][i], f.schema[j]) for j in range(ncols)) + "\n"
                      for i in range(r0, min(nrows, r0 + step)))


def _write_frame(f: Frame, path: str, p: dict[str, Any], desc: str | None) -> None:
    fmt = str(p.get("format", "text")).lower()
    if fmt != "csv":
        raise DMLRuntimeError(f"frames can only be written as csv, not '{fmt}': {path}")
    sep = str(p.get("sep", ","))
    header = bool(p.get("header", False))
    nrows, ncols = f.shape
    with AtomicFiles() as tx:
        data = tx.stage(path, lambda w: _write_chunks(w, _frame_chunks(f, sep, header)))
        fields = [("data_type", "frame"), ("schema", "".join(t + "," for t in f.schema)), ("rows", nrows),
                  ("cols", ncols), ("format", "csv"), ("description", check_text(data.nbytes, data.crc, desc)),
                  ("author", author()), ("header", header), ("sep", sep), ("created", created())]
        tx.stage(path + ".mtd", lambda w: w.text(mtd_text(fields)))
