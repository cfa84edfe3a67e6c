"""Distributed data generation and reading: ``rand`` generated block by block on the workers, ``read``
of csv, text (IJV), MatrixMarket and npy files parsed by the workers where they see the file.

rand. lafuse's rand is SystemDS's (runtime.local.sdsrand): the matrix is cut into 1000 x 1000 blocks
(SystemDS's block size, whatever the run's), each drawn from its own seed of one seed sequence. This
process draws the seeds (microseconds a block), each worker generates its blocks with the local
per-block function (``sdsrand.rand_block``) and the run's blocks are cut from them when the run's block
size is another: the local values, bit for bit. What has no block seeds (poisson, NumPy-stream sparse
rand) and arguments the local kernel refuses run the local kernel (its result scattered, its errors
its own).

read. The local reader (runtime.io.readers) defines the values and the errors; the workers run its
own parsing functions on row ranges (csv: the lines of one row block; IJV and MatrixMarket: chunks of
lines, whose cells are then gathered into the blocks they fall in, a repeated cell keeping its last
value in file order as locally; npy: slices of a memory map). Where a file's cells could be read by
either of the local reader's two paths (pandas' parser or the line loop), the distributed read takes
the one the local read of the whole file would: every chunk the fast one, or, if any chunk cannot,
every chunk the loop. Anything out of the ordinary (an error in any chunk, sizes that disagree with
the metadata, a lone carriage return, a directory of part files, a sparse npz) makes the read
local, so a bad file gives exactly the local error and an odd one exactly the local matrix. A file the
workers do not see (another machine, another file under the same path) is read here and scattered.

Block formats follow the local rule per block (runtime.dask.backend.DaskBackend.convert). Every
block is a task the scheduler can rerun (rand from its seed, read from the file), so a worker lost
mid-script loses none of them, as with scattered blocks (runtime.dask.backend.DaskBackend.scatter);
the price is theirs too: the scheduler keeps the tasks a live block descends from (a loop's
iterations back to the rand or read that started it).
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from lafuse.errors import DMLError
from lafuse.formats import sparse_format
from lafuse.mtd import Meta, merged, norm_format
from lafuse.plan.instructions import Instruction
from lafuse.runtime.dask.matrix import Blocked
from lafuse.runtime.io.readers import (
    _assemble,
    _csv_sep,
    _matrix_shape,
    _npy_header,
    _parse_ijv_lines,
    _read_csv_fast,
    _read_csv_matrix,
    _read_ijv_fast,
    guess_format,
)
from lafuse.runtime.io.text import INT, decode, lines, split_csv
from lafuse.runtime.local import sdsrand
from lafuse.runtime.local.kernels import bind_args
from lafuse.runtime.local.kernels_common import need_float, trunc_index
from lafuse.runtime.local.kernels_datagen import k_rand
from lafuse.runtime.values import choose_format, is_matrix, nnz, to_dense
from lafuse.sparse import sp

if TYPE_CHECKING:
    from lafuse.runtime.dask.backend import DaskBackend

SDS_BLOCK = 1000  # sdsrand.DEFAULT_BLOCKSIZE: the block grid of rand's seeds
MAX_RAND_BLOCKS = 1 << 20  # more seed blocks (10^12 cells; rows=Inf) run the local kernel: its budget error
CHUNK_BYTES = 16 << 20  # bytes of IJV / MatrixMarket lines one parse task reads
SCAN_BYTES = 16 << 20  # bytes this process reads at a time to find line starts and the data check
BOM = b"\xef\xbb\xbf"


def bind(be: DaskBackend, ins: Instruction) -> Callable[..., Any] | None:
    h, op = ins.hop, ins.opcode
    if op in ("rand", "Rand"):
        return bind_args("rand", h.params.get("slots"), functools.partial(_rand, be, (h.rows, h.cols)))
    if op == "pread":
        return functools.partial(_read, be, h)
    return None


# ---------------------------------------------------------------- rand


def _rand_spec(dims: tuple[int, int], rows: Any, cols: Any, min_v: Any, max_v: Any, sparsity: Any, pdf: Any,
               seed: Any, lam: Any) -> tuple[int, int, float, float, float, bool, int] | None:
    """(rows, cols, min, max, sparsity, normal, seed) of a rand generated from block seeds, or None
    where the local kernel runs instead (its errors, poisson, NumPy streams, sizes other than planned)."""
    from lafuse.runtime.local import kernels_datagen as kd  # deferred: the kernels, on first rand

    r, c = kd._dim(rows, "rows", "rand"), kd._dim(cols, "cols", "rand")
    lo = need_float(min_v if min_v is not None else 0.0, "rand", "min")
    hi = need_float(max_v if max_v is not None else 1.0, "rand", "max")
    spars = need_float(sparsity if sparsity is not None else 1.0, "rand", "sparsity")
    dist = str(pdf if pdf is not None else "uniform").lower()
    need_float(lam if lam is not None else 1.0, "rand", "lambda")
    if not 0.0 <= spars <= 1.0 or dist not in ("uniform", "normal") or (spars < 1.0 and not kd.EXACT_SPARSE_RAND):
        return None
    if r == 0 or c == 0 or (dims[0] >= 0 and dims[0] != r) or (dims[1] >= 0 and dims[1] != c):
        return None
    if -(-r // SDS_BLOCK) * -(-c // SDS_BLOCK) > MAX_RAND_BLOCKS:
        return None
    s = -1 if seed is None else trunc_index(seed, "rand")
    return r, c, lo, hi, spars, dist == "normal", sdsrand.random_seed() if s == -1 else s


def _rand(be: DaskBackend, dims: tuple[int, int], rows: Any = 1, cols: Any = 1, min_v: Any = 0.0,
          max_v: Any = 1.0, sparsity: Any = 1.0, pdf: Any = "uniform", seed: Any = -1, lam: Any = 1.0) -> Any:
    """rand's arguments in the catalogue's order (runtime.local.kernels_datagen.k_rand)."""

    args = (rows, cols, min_v, max_v, sparsity, pdf, seed, lam)
    try:
        spec = _rand_spec(dims, *args)
    except (DMLError, ValueError, TypeError, OverflowError):
        spec = None
    if spec is None:  # the local kernel: its value, or its error
        return be.scatter(k_rand(*args))
    r, c, lo, hi, spars, normal, s = spec
    src = Blocked(r, c, SDS_BLOCK)
    if normal:
        lo, hi = 0.0, 1.0
    elif (lo == 0.0 and hi == 0.0) or spars == 0:  # (sds_rand's and k_rand's all-zero rand)
        return _filled(be, r, c, 0.0)
    elif spars == 1.0 and (lo == hi or (np.isnan(lo) and np.isnan(hi))):
        return _filled(be, r, c, lo)
    seeds = sdsrand.block_seeds(s, src.nrb * src.ncb)
    for k, (i, j) in enumerate(src.grid()):
        br, bc = min(SDS_BLOCK, r - i * SDS_BLOCK), min(SDS_BLOCK, c - j * SDS_BLOCK)
        src.blocks[(i, j)] = be.submit(rand_block, seeds[k], br, bc, lo, hi - lo, spars, normal)
    return _reblock(be, src, be.cfg.block_size)


def _filled(be: DaskBackend, rows: int, cols: int, value: float) -> Blocked:
    out = Blocked(rows, cols, be.cfg.block_size)
    for i, j in out.grid():
        h, w = min(out.bs, rows - i * out.bs), min(out.bs, cols - j * out.bs)
        out.blocks[(i, j)] = be.submit(filled_block, h, w, value)
    return out


def _reblock(be: DaskBackend, src: Blocked, bs: int) -> Blocked:
    """``src`` (blocks of ``src.bs``) in blocks of ``bs``: the same blocks when the sizes agree, else
    each block one task pasting the pieces of the source blocks it covers."""
    if src.bs == bs:
        return src
    out = Blocked(src.rows, src.cols, bs)
    for i, j in out.grid():
        r0, r1 = i * bs, min(src.rows, (i + 1) * bs)
        c0, c1 = j * bs, min(src.cols, (j + 1) * bs)
        pieces = []
        for si in range(r0 // src.bs, (r1 - 1) // src.bs + 1):
            for sj in range(c0 // src.bs, (c1 - 1) // src.bs + 1):
                p0, p1 = max(r0, si * src.bs), min(r1, (si + 1) * src.bs)
                q0, q1 = max(c0, sj * src.bs), min(c1, (sj + 1) * src.bs)
                pieces.append((src.blocks[(si, sj)], p0 - si * src.bs, p1 - si * src.bs, q0 - sj * src.bs,
                               q1 - sj * src.bs, p0 - r0, q0 - c0))
        out.blocks[(i, j)] = be.submit(paste, r1 - r0, c1 - c0, *pieces)
    return out


# ---------------------------------------------------------------- read


def _read(be: DaskBackend, hop: Any, *args: Any) -> Any:
    """DML ``read`` of a matrix into a distributed one: read by the workers where they can, else the
    local read (runtime.io.read_value: its value scattered, its errors its own)."""
    from lafuse.runtime.io import read_value  # deferred: IO, only for scripts that read

    kw = dict(zip(hop.params["slots"], args))
    path = str(kw.pop("target"))
    expect = (hop.dt, hop.rows, hop.cols, hop.nnz)
    out = None
    try:
        out = _read_distributed(be, path, dict(kw), expect)
    except Exception:  # noqa: BLE001 - anything the workers' read met: the local read reports it exactly
        out = None
    if out is not None:
        return out
    v = read_value(path, kw, expect=expect)

    return be.scatter(v) if is_matrix(v) else v


def _read_distributed(be: DaskBackend, path: str, params: dict[str, Any], expect: tuple[str, int, int, int]
                      ) -> Blocked | None:

    meta = merged(path, params)
    p = meta.params
    if "format" not in p and "sep" not in p and path.lower().endswith(".tsv"):
        p["sep"] = "\t"  # (read_value: a format guessed from the extension brings its separator)
    if p.get("data_type", "matrix") != "matrix" or not os.path.isfile(path):
        return None
    fmt = norm_format(p["format"], path) if "format" in p else guess_format(path)
    apath = os.path.abspath(path)
    if not _visible(be, apath):
        return None
    bs = be.cfg.block_size
    if fmt in ("binary", "npy"):
        out = _read_npy(be, path, apath, meta, bs)
    elif fmt == "csv":
        out = _read_csv(be, path, apath, meta, bs)
    else:
        out = _read_ijv(be, path, apath, meta, bs, fmt == "mm")
    if out is None or not _as_declared(be, out, meta, expect):
        return None
    return out


def _stat(path: str) -> tuple[int, int] | None:
    """A file's length and modification time, as a worker sees it (None: it sees no file there)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _visible(be: DaskBackend, apath: str) -> bool:
    """Whether every worker sees the file this process sees under ``apath`` (same length and time)."""
    mine = _stat(apath)
    seen = be.client().run(_stat, apath)
    return mine is not None and bool(seen) and all(tuple(v) == mine if v is not None else False for v in seen.values())


def _as_declared(be: DaskBackend, out: Blocked, meta: Meta, expect: tuple[str, int, int, int]) -> bool:
    """The read matrix against the sizes its metadata declares and the script was compiled for
    (readers.check_matrix, readers._check_expected): a difference is the local read's error."""
    p = meta.params
    _, rows, cols, want_nnz = expect
    for want, have in ((p.get("rows"), out.rows), (p.get("cols"), out.cols), (rows, out.rows), (cols, out.cols)):
        if want is not None and want >= 0 and want != have:
            return False
    if p.get("nnz") is None and want_nnz < 0:
        return True
    z = sum(_gather(be, [be.submit(block_nnz, f) for f in out.blocks.values()]))
    if p.get("nnz") is not None and p["nnz"] != z:
        return False
    return want_nnz < 0 or want_nnz == z


def _gather(be: DaskBackend, futures: list[Any]) -> list[Any]:
    """The values of ``futures`` here (the backend's wait: failures located, Ctrl-C lands)."""
    return be.gather(futures) if futures else []


def _scan(apath: str, start: int, every: int, want_crc: bool) -> tuple[list[int], int, bool, int]:
    """One pass over the file: the byte offsets where lines 0, every, 2*every, ... of the data from
    ``start`` begin (every 0: none), its number of lines (as runtime.io.text.lines counts them),
    whether a carriage return occurs anywhere, and the whole file's CRC-32 (if ``want_crc``)."""
    marks = [start]
    newlines = 0
    has_cr = False
    crc = 0
    last = b""
    pos = 0
    with open(apath, "rb") as f:
        while True:
            buf = f.read(SCAN_BYTES)
            if not buf:
                break
            if want_crc:
                crc = zlib.crc32(buf, crc)
            has_cr = has_cr or b"\r" in buf
            lo = max(0, start - pos)
            if every and lo < len(buf):
                a = np.frombuffer(buf, dtype=np.uint8, offset=lo)
                nl = np.flatnonzero(a == 10) + (pos + lo)
                g = np.arange(newlines + 1, newlines + 1 + nl.size)  # lines ended so far, after each newline
                marks.extend((nl[g % every == 0] + 1).tolist())
                newlines += nl.size
            elif lo < len(buf):
                newlines += buf.count(b"\n", lo)
            pos += len(buf)
            last = buf[-1:]
    end = pos
    nlines = newlines + (1 if end > start and last != b"\n" else 0)
    return [m for m in marks if m < end], nlines, has_cr, crc


def _checked(apath: str, meta: Meta, start: int = 0, every: int = 0) -> tuple[list[int], int] | None:
    """``_scan`` of a text file whose data matches its ``.mtd``'s data check and which has no carriage
    return (lines then end at newlines only); None otherwise."""
    marks, nlines, has_cr, crc = _scan(apath, start, every, meta.check is not None)
    if has_cr or (meta.check is not None and (os.path.getsize(apath), crc) != tuple(meta.check)):
        return None
    return marks, nlines


def _text_start(apath: str) -> int:
    with open(apath, "rb") as f:
        return 3 if f.read(3) == BOM else 0


# ---------------------------------------------------------------- npy


def _read_npy(be: DaskBackend, path: str, apath: str, meta: Meta, bs: int) -> Blocked | None:

    size = os.path.getsize(apath)
    with open(apath, "rb") as f:
        head = f.read(6)
        if head.startswith((b"SEQ", b"PK")):
            return None  # a SystemDS binary (the local error), a sparse npz (read here)
        f.seek(0)
        shape, fortran, dtype, offset = _npy_header(path, f)
    rows, cols = _matrix_shape(path, shape)
    if rows == 0 or cols == 0 or size - offset != rows * cols * dtype.itemsize:
        return None
    if meta.check is not None and _checked(apath, meta) is None:
        return None
    out = Blocked(rows, cols, bs)
    for i, j in out.grid():
        out.blocks[(i, j)] = be.submit(npy_block, apath, offset, dtype.str, rows, cols, fortran, i * bs,
                                       min(rows, (i + 1) * bs), j * bs, min(cols, (j + 1) * bs))
    _gather(be, [be.submit(block_nnz, f) for f in out.blocks.values()])  # (a failed block: the local read)
    return out


# ---------------------------------------------------------------- csv


def _read_csv(be: DaskBackend, path: str, apath: str, meta: Meta, bs: int) -> Blocked | None:

    p = meta.params
    sep = _csv_sep(path, p)
    start = _text_start(apath)
    header = bool(p.get("header", False))
    head = b""
    if header:
        with open(apath, "rb") as f:
            f.seek(start)
            head = f.readline()
        if not head.endswith(b"\n"):
            return None
        start += len(head)
    scanned = _checked(apath, meta, start, bs)
    if scanned is None:
        return None
    marks, nrows = scanned
    if nrows == 0:
        return None
    with open(apath, "rb") as f:
        f.seek(start)
        first = lines(decode(path, f.readline()))
    ncols = len(split_csv(first[0], sep)) if first else 0
    if ncols == 0 or (p.get("cols") is not None and p["cols"] != ncols) or (
            p.get("rows") is not None and p["rows"] != nrows):
        return None
    sep_ok = len(sep) == 1 and sep.isascii() and sep not in "0123456789.eE+-\n"
    mode = "auto" if sep_ok and p.get("naStrings") is None else "slow"
    opts = {"sep": sep, "fill": p.get("fill", True), "default": p.get("default", 0.0),
            "naStrings": p.get("naStrings")}
    end = os.path.getsize(apath)
    bounds = [(marks[i], marks[i + 1] if i + 1 < len(marks) else end, min(bs, nrows - i * bs))
              for i in range(len(marks))]
    panels = [be.submit(csv_panel, apath, path, b0, b1, n, ncols, opts, mode) for b0, b1, n in bounds]
    fast = _gather(be, [be.submit(second, f) for f in panels])
    if any(fast) and not all(fast):  # the whole file takes the loop: so does every row block
        panels = [be.submit(csv_panel, apath, path, b0, b1, n, ncols, opts, "slow") if was else f
                  for (b0, b1, n), f, was in zip(bounds, panels, fast)]
        _gather(be, [be.submit(second, f) for f in panels])
    if not all(fast):
        decode(path, head)  # (the line loop decodes the header line too: its error is the local read's)
    out = Blocked(nrows, ncols, bs)
    for i, j in out.grid():
        out.blocks[(i, j)] = be.submit(columns, panels[i], j * bs, min(ncols, (j + 1) * bs))
    return out


# ---------------------------------------------------------------- text (IJV) and MatrixMarket


def _mm_header(path: str, apath: str, start: int) -> tuple[int, int, int, bool, bool, int] | None:
    """(rows, cols, entries, pattern, symmetric, offset of the first entry line) of a MatrixMarket
    file the local reader accepts the header of; None otherwise (the local read reports it)."""

    with open(apath, "rb") as f:
        f.seek(start)
        head = decode(path, f.readline()).rstrip("\n")
        parts = head.split()
        if not head.startswith("%%MatrixMarket") or len(parts) < 5 or parts[1].lower() != "matrix":
            return None
        layout, field, symmetry = parts[2].lower(), parts[3].lower(), parts[4].lower()
        if layout != "coordinate" or field not in ("real", "integer", "pattern") or symmetry not in (
                "general", "symmetric"):
            return None
        while True:
            raw = f.readline()
            if not raw:
                return None
            line = decode(path, raw).rstrip("\n")
            if not (line.startswith("%") or not line.strip()):
                break
        size = line.split()
        if len(size) != 3 or not all(INT.fullmatch(t) and int(t) >= 0 for t in size):
            return None
        rows, cols, entries = (int(t) for t in size)
        return rows, cols, entries, field == "pattern", symmetry == "symmetric", f.tell()


def _chunk_starts(apath: str, start: int, end: int) -> list[int]:
    """Line starts about CHUNK_BYTES apart from ``start``: where the parse tasks begin."""
    out = [start]
    with open(apath, "rb") as f:
        while out[-1] + CHUNK_BYTES < end:
            f.seek(out[-1] + CHUNK_BYTES - 1)
            f.readline()
            at = f.tell()
            if at >= end:
                break
            out.append(at)
    return out


def _read_ijv(be: DaskBackend, path: str, apath: str, meta: Meta, bs: int, mm: bool) -> Blocked | None:
    p = meta.params
    start = _text_start(apath)
    mode, pattern, symmetric = "auto", False, False
    if mm:
        head = _mm_header(path, apath, start)
        if head is None:
            return None
        rows, cols, entries, pattern, symmetric, start = head
        if any(k in p and p[k] != v for k, v in (("rows", rows), ("cols", cols))):
            return None
        mode = "slow"  # (the local MatrixMarket reader has only the line parser)
    if _checked(apath, meta) is None:
        return None
    end = os.path.getsize(apath)
    starts = _chunk_starts(apath, start, end) if end > start else []
    bounds = list(zip(starts, [*starts[1:], end]))
    chunks = [be.submit(ijv_chunk, apath, path, b0, b1, mode, pattern, b1 == end) for b0, b1 in bounds]
    stats = _gather(be, [be.submit(ijv_summary, f, bs, symmetric) for f in chunks])
    fast = [s[1] for s in stats]
    if any(fast) and not all(fast):  # the whole file takes the line parser: so does every chunk
        chunks = [be.submit(ijv_chunk, apath, path, b0, b1, "slow", pattern, b1 == end) if was else f
                  for (b0, b1), f, was in zip(bounds, chunks, fast)]
        _gather(be, [be.submit(ijv_summary, f, bs, symmetric) for f in chunks])
    count = sum(s[0] for s in stats)
    top_i = max((s[2] for s in stats), default=-1)
    top_j = max((s[3] for s in stats), default=-1)
    if mm:
        if count != entries:
            return None
    else:
        rows = p.get("rows", top_i + 1)
        cols = p.get("cols", top_j + 1)
    if rows <= 0 or cols <= 0 or top_i >= rows or top_j >= cols or (
            symmetric and max(top_i, top_j) >= min(rows, cols)):
        return None
    out = Blocked(rows, cols, bs)
    for i, j in out.grid():
        deps = [f for f, s in zip(chunks, stats) if i in s[4]]
        r0, r1 = i * bs, min(rows, (i + 1) * bs)
        c0, c1 = j * bs, min(cols, (j + 1) * bs)
        out.blocks[(i, j)] = be.submit(ijv_block, path, r0, r1, c0, c1, symmetric, *deps)
    return out


# ---------------------------------------------------------------- block functions (run by workers)


def rand_block(bseed: int, br: int, bc: int, lo: float, rng: float, sparsity: float, normal: bool) -> Any:
    """One block of rand's seed grid by the local per-block generator, in the format the local
    kernel's rule gives its cells (runtime.local.kernels_datagen._sds_rand)."""

    res = sdsrand.rand_block(bseed, br, bc, lo, rng, sparsity, normal)
    if isinstance(res, np.ndarray):
        return res
    pos, vals = res
    rr, cc = pos // bc, pos % bc
    if sparse_format(br, bc, len(vals)):
        S = sp.coo_array((vals, (rr, cc)), shape=(br, bc)).tocsr()
        S.eliminate_zeros()
        return S
    out = np.zeros((br, bc), dtype=np.float64)
    out[rr, cc] = vals
    return out


def filled_block(h: int, w: int, value: float) -> Any:
    """An h x w block of ``value`` (zeros as the local fill makes them: CSR where the rule says so)."""
    if value == 0.0 and sparse_format(h, w, 0):
        return sp.csr_array((h, w), dtype=np.float64)
    return np.full((h, w), value, dtype=np.float64)


def paste(h: int, w: int, *pieces: tuple[Any, ...]) -> Any:
    """An h x w block of pieces (source block, its rows r0:r1, columns c0:c1, destination row,
    column), in the format the local rule gives its non-zeros."""

    out = np.zeros((h, w))
    for src, r0, r1, c0, c1, dr, dc in pieces:
        out[dr:dr + r1 - r0, dc:dc + c1 - c0] = to_dense(src[r0:r1, c0:c1])
    return choose_format(out)


def block_nnz(b: Any) -> int:

    return nnz(b)


def second(t: tuple[Any, ...]) -> Any:
    return t[1]


def npy_block(apath: str, offset: int, dtype: str, rows: int, cols: int, fortran: bool, r0: int, r1: int,
              c0: int, c1: int) -> Any:
    """Rows r0:r1, columns c0:c1 of an npy file's array, read through a memory map (the local reader's
    doubles: the array converted cell by cell)."""

    m = np.memmap(apath, dtype=np.dtype(dtype), mode="r", offset=offset, shape=(rows, cols),
                  order="F" if fortran else "C")
    try:
        return choose_format(np.array(m[r0:r1, c0:c1], dtype=np.float64, order="C"))
    finally:
        del m


def _bytes(apath: str, b0: int, b1: int) -> bytes:
    with open(apath, "rb") as f:
        f.seek(b0)
        raw = f.read(b1 - b0)
    if len(raw) != b1 - b0:
        raise OSError(f"'{apath}' changed while it was read")
    return raw


def csv_panel(apath: str, path: str, b0: int, b1: int, nrows: int, ncols: int, opts: dict[str, Any],
              mode: str) -> tuple[np.ndarray, bool]:
    """The rows of one row block (bytes b0:b1) by the local csv reader: pandas' parser when ``mode``
    is auto and the local reader's fast path takes them, else its line loop. Returns (rows, fast)."""

    raw = _bytes(apath, b0, b1)
    p = {"sep": opts["sep"], "header": False, "fill": opts["fill"], "default": opts["default"], "rows": nrows,
         "cols": ncols}
    if mode == "auto" and not raw.startswith(b"\n"):
        whole = _read_csv_fast(raw, p)
        if whole is not None:
            return whole, True
    # the line loop (an empty naStrings list: no NA strings, and the fast path skipped)
    p["naStrings"] = opts["naStrings"] if opts["naStrings"] is not None else []
    return _read_csv_matrix(path, Meta(p), raw), False


def columns(panel: tuple[np.ndarray, bool], c0: int, c1: int) -> Any:

    return choose_format(np.array(panel[0][:, c0:c1], dtype=np.float64))


def ijv_chunk(apath: str, path: str, b0: int, b1: int, mode: str, pattern: bool, last: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The cells of the IJV lines in bytes b0:b1 (0-based, file order, ``0 0 0`` markers dropped) by
    the local reader's parsers: pandas' when ``mode`` is auto and the local fast path takes the
    chunk as it would the whole file, else the line parser. Returns (i, j, v, fast)."""

    raw = _bytes(apath, b0, b1)
    if mode == "auto" and not raw.startswith(b"\n") and (last or b"\n\n" not in raw):
        fast = _read_ijv_fast(raw)
        if fast is not None:
            return (*fast, True)
    ii, jj, vv = _parse_ijv_lines(path, lines(decode(path, raw)), 0, pattern, 1)
    return ii, jj, vv, False


def ijv_summary(chunk: tuple[Any, ...], bs: int, symmetric: bool) -> tuple[int, bool, int, int, set[int]]:
    """(cells, fast, largest row, largest column, row blocks its cells fall in) of a parsed chunk."""
    ii, jj, _, fast = chunk
    if not ii.size:
        return 0, fast, -1, -1, set()
    blocks = set((np.unique(ii // bs)).tolist())
    if symmetric:
        blocks |= set((np.unique(jj // bs)).tolist())
    return int(ii.size), fast, int(ii.max()), int(jj.max()), blocks


def ijv_block(path: str, r0: int, r1: int, c0: int, c1: int, symmetric: bool, *chunks: tuple[Any, ...]) -> Any:
    """Block rows r0:r1, columns c0:c1 of the cells of ``chunks`` (in file order; a symmetric file's
    mirrored cells after all of them, as the local reader appends them) by the local reader's
    assembly (a repeated cell keeps its last value)."""

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    passes = [False, True] if symmetric else [False]
    for mirror in passes:
        for ii, jj, vv, _ in chunks:
            if mirror:
                off = ii != jj
                ii, jj, vv = jj[off], ii[off], vv[off]
            sel = (ii >= r0) & (ii < r1) & (jj >= c0) & (jj < c1)
            parts.append((ii[sel] - r0, jj[sel] - c0, vv[sel]))
    if parts:
        ii, jj, vv = (np.concatenate([p[k] for p in parts]) for k in range(3))
    else:
        ii = jj = np.zeros(0, dtype=np.int64)
        vv = np.zeros(0)
    return choose_format(_assemble(path, ii, jj, vv, r1 - r0, c1 - c0, 0))
