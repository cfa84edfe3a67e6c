"""read/write must produce and accept SystemDS 3.4.0's files.

The literal file contents below were observed from SystemDS 3.4.0 ``write(...)`` with
``-exec singlenode``; ``.mtd`` files are compared without their ``author`` and ``created`` lines.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.io import parse_java_double, read_value, write_value
from lafuse.runtime.values import Frame, is_sparse, to_dense

NAN, INF = float("nan"), float("inf")

# X = matrix("1 0 3.5 0 0 -2 NaN 1e-7 1e20", rows=3, cols=3)
X = np.array([[1.0, 0.0, 3.5], [0.0, 0.0, -2.0], [NAN, 1e-7, 1e20]])

SDS_X_CSV = "1.0,0,3.5\n0,0,-2.0\nNaN,1.0E-7,1.0E20\n"
SDS_X_CSV_HEADER_SEMI = "C1;C2;C3\n1.0;0;3.5\n0;0;-2.0\nNaN;1.0E-7;1.0E20\n"
SDS_X_TEXT = "1 1 1.0\n1 3 3.5\n2 3 -2.0\n3 1 NaN\n3 2 1.0E-7\n3 3 1.0E20\n"
SDS_X_MM = "%%MatrixMarket matrix coordinate real general\n3 3 6\n" + SDS_X_TEXT
SDS_ZERO_CSV = "0,0,0\n0,0,0\n"  # matrix(0, rows=2, cols=3)
SDS_ZERO_TEXT = "0 0 0\n"
SDS_ZERO_MM = "%%MatrixMarket matrix coordinate real general\n2 3 0\n0 0 0\n"
SDS_CSV_SPARSE = "1.0,,3.5\n,,-2.0\n"  # write(..., format="csv", sparse=TRUE)
SDS_INF_CSV = "Infinity,NaN,Infinity\nNaN,NaN,-Infinity\n"

SDS_MTD_CSV = """{
    "data_type": "matrix",
    "value_type": "double",
    "rows": 3,
    "cols": 3,
    "nnz": 6,
    "format": "csv",
    "header": false,
    "sep": ",",
}"""
SDS_MTD_CSV_HEADER = SDS_MTD_CSV.replace('"header": false', '"header": true').replace('"sep": ","', '"sep": ";"')
SDS_MTD_TEXT = """{
    "data_type": "matrix",
    "value_type": "double",
    "rows": 3,
    "cols": 3,
    "nnz": 6,
    "format": "text",
}"""
SDS_MTD_BINARY = """{
    "data_type": "matrix",
    "value_type": "double",
    "rows": 3,
    "cols": 3,
    "rows_in_block": 1000,
    "cols_in_block": 1000,
    "nnz": 6,
    "format": "binary",
}"""
SDS_MTD_SCALAR = """{
    "data_type": "scalar",
    "value_type": "%s",
    "format": "text",
}"""
SDS_MTD_FRAME = """{
    "data_type": "frame",
    "schema": "INT64,FP64,BOOLEAN,STRING,",
    "rows": 2,
    "cols": 4,
    "format": "csv",
    "header": true,
    "sep": ",",
}"""


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _put(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def _stamps_removed(text):
    """Without author, created and lafuse's data check (the description), which vary per write."""
    return "\n".join(ln for ln in text.split("\n")
                     if '"author"' not in ln and '"created"' not in ln and '"description"' not in ln)


def _mtd_without_stamps(path):
    text = _read(path)
    assert text.startswith("{\n    ") and text.endswith("\n}")  # 4-space JSON, no final newline
    return _stamps_removed(text)


def _sds_mtd(expected_without_stamps, csv=False):
    """The full .mtd SystemDS wrote: author before header/sep (csv) or last, then created."""
    lines = expected_without_stamps.split("\n")
    at = -3 if csv else -1
    lines.insert(len(lines) + at, '    "author": "root",')
    lines[-2] = lines[-2].rstrip(",") + ","
    lines.insert(-1, '    "created": "2026-11-22 03:15:23 UTC"')
    return "\n".join(lines)


def _same(a, b):
    a, b = to_dense(a), to_dense(b)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)  # NaN == NaN here


# ------------------------------------------------------------------------- exact SystemDS layouts

def test_csv_layout(tmp_path):
    write_value(X, str(tmp_path / "x.csv"), {"format": "csv"})
    assert _read(tmp_path / "x.csv") == SDS_X_CSV
    assert _mtd_without_stamps(tmp_path / "x.csv.mtd") == SDS_MTD_CSV
    meta = json.loads(_read(tmp_path / "x.csv.mtd"))
    # SystemDS's order; description (where SystemDS puts a write's description) holds lafuse's data check
    assert list(meta) == ["data_type", "value_type", "rows", "cols", "nnz", "format", "description", "author",
                          "header", "sep", "created"]
    write_value(X, str(tmp_path / "xh.csv"), {"format": "csv", "header": True, "sep": ";"})
    assert _read(tmp_path / "xh.csv") == SDS_X_CSV_HEADER_SEMI
    assert _mtd_without_stamps(tmp_path / "xh.csv.mtd") == SDS_MTD_CSV_HEADER


def test_csv_zero_sparse_and_special_layouts(tmp_path):
    write_value(np.zeros((2, 3)), str(tmp_path / "z.csv"), {"format": "csv"})
    assert _read(tmp_path / "z.csv") == SDS_ZERO_CSV
    y = np.array([[1.0, -0.0, 3.5], [0.0, 0.0, -2.0]])
    write_value(y, str(tmp_path / "s.csv"), {"format": "csv", "sparse": True})
    assert _read(tmp_path / "s.csv") == SDS_CSV_SPARSE
    write_value(y, str(tmp_path / "d.csv"), {"format": "csv", "sparse": False})
    assert _read(tmp_path / "d.csv") == "1.0,0,3.5\n0,0,-2.0\n"
    w = np.array([[INF, NAN, INF], [NAN, NAN, -INF]])
    write_value(w, str(tmp_path / "w.csv"), {"format": "csv"})
    assert _read(tmp_path / "w.csv") == SDS_INF_CSV
    write_value(sp.csr_array(X[:2]), str(tmp_path / "sp.csv"), {"format": "csv"})
    assert _read(tmp_path / "sp.csv") == "1.0,0,3.5\n0,0,-2.0\n"


def test_text_and_mm_layouts(tmp_path):
    write_value(X, str(tmp_path / "x.txt"), {"format": "text"})
    assert _read(tmp_path / "x.txt") == SDS_X_TEXT
    assert _mtd_without_stamps(tmp_path / "x.txt.mtd") == SDS_MTD_TEXT
    write_value(X, str(tmp_path / "x.def"), {})  # text is the default format
    assert _read(tmp_path / "x.def") == SDS_X_TEXT
    write_value(sp.csr_array(np.nan_to_num(X, nan=5.0)), str(tmp_path / "s.txt"), {"format": "text"})
    assert _read(tmp_path / "s.txt") == SDS_X_TEXT.replace("NaN", "5.0")
    write_value(np.zeros((2, 3)), str(tmp_path / "z.txt"), {"format": "text"})
    assert _read(tmp_path / "z.txt") == SDS_ZERO_TEXT
    write_value(np.array([[7.0]]), str(tmp_path / "o.txt"), {"format": "text"})
    assert _read(tmp_path / "o.txt") == "1 1 7.0\n"
    write_value(X, str(tmp_path / "x.mm"), {"format": "mm"})
    assert _read(tmp_path / "x.mm") == SDS_X_MM
    assert not os.path.exists(tmp_path / "x.mm.mtd")  # SystemDS writes no metadata for mm
    write_value(np.zeros((2, 3)), str(tmp_path / "z.mm"), {"format": "mm"})
    assert _read(tmp_path / "z.mm") == SDS_ZERO_MM


def test_binary_mtd_and_npy_storage(tmp_path):
    write_value(X, str(tmp_path / "x.bin"), {"format": "binary"})
    assert _mtd_without_stamps(tmp_path / "x.bin.mtd") == SDS_MTD_BINARY
    with open(tmp_path / "x.bin", "rb") as f:
        assert f.read(6) == b"\x93NUMPY"  # lafuse's binary is .npy, at exactly the given path
    _same(read_value(str(tmp_path / "x.bin"), {}), X)


@pytest.mark.parametrize("order", ["C", "F"])
def test_large_npy_reads_into_populated_memory(tmp_path, monkeypatch, order):
    """Files from POPULATE_MIN_BYTES on are read into a MAP_POPULATE mapping (memory.fresh_bytes): the
    same values, C order, writable, aligned, and the mapping lives as long as the matrix."""
    import mmap

    from lafuse import memory

    monkeypatch.setattr(memory, "POPULATE_MIN_BYTES", 1024)
    a = np.asfortranarray(np.arange(600.0).reshape(40, 15) - 7.5) if order == "F" else \
        np.arange(600.0).reshape(40, 15) - 7.5
    np.save(tmp_path / "a.npy", a)
    got = read_value(str(tmp_path / "a.npy"), {})
    assert np.array_equal(got, a) and got.flags.c_contiguous and got.flags.writeable and got.flags.aligned
    if order == "C" and hasattr(mmap, "MAP_POPULATE"):  # read in place: the mapping is the array's memory
        base = got
        while getattr(base, "base", None) is not None:
            base = base.base
        assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    got[0, 0] = 1.0  # a private mapping: the file is not written through it
    assert np.load(tmp_path / "a.npy")[0, 0] == -7.5


@pytest.mark.parametrize("value,text,vtype", [(3.5, "3.5", "double"), (7, "7", "int"), (True, "true", "boolean"),
                                             ("hello", "hello", "string"), (1e-7, "1.0E-7", "double")])
def test_scalar_layout_and_roundtrip(tmp_path, value, text, vtype):
    path = str(tmp_path / "s")
    write_value(value, path, {})
    assert _read(path) == text  # no trailing newline
    assert _mtd_without_stamps(path + ".mtd") == SDS_MTD_SCALAR % vtype
    back = read_value(path, {})
    assert back == value and type(back) is type(value)


def test_frame_csv_layout_and_roundtrip(tmp_path):
    f = Frame(columns=[[1, -3], [2.5, 0.0], [True, False], ["ab c", None]],
              schema=["INT64", "FP64", "BOOLEAN", "STRING"], names=["x", "y", "z", "w"])
    path = str(tmp_path / "fr.csv")
    write_value(f, path, {"format": "csv", "header": True})
    assert _read(path) == "x,y,z,w\n1,2.5,true,ab c\n-3,0.0,false,\n"
    assert _mtd_without_stamps(path + ".mtd") == SDS_MTD_FRAME
    back = read_value(path, {})
    assert isinstance(back, Frame)
    assert back.schema == f.schema and back.names == f.names and back.columns == f.columns


# ------------------------------------------------------------------------- round trips

CASES = {
    "dense": np.arange(1.0, 13.0).reshape(3, 4) / 7.0,
    "sparse": sp.random(300, 200, density=0.01, format="csr", random_state=3, dtype=np.float64),
    "empty_rows": np.array([[0.0, 0.0, 0.0], [1.5, 0.0, -2.0], [0.0, 0.0, 0.0]]),
    "all_zero": np.zeros((4, 5)),
    "one_by_one": np.array([[-3.25]]),
    "nan_inf": np.array([[NAN, INF], [-INF, 1e-300], [5e-324, 1.7976931348623157e308]]),
    "last_cell_empty": np.array([[1.0, 0.0], [0.0, 0.0]]),
}


@pytest.mark.parametrize("fmt", ["csv", "text", "mm", "binary", "npy"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_roundtrip(tmp_path, fmt, case):
    m = CASES[case]
    path = str(tmp_path / f"m.{fmt}")
    write_value(m, path, {"format": fmt})
    back = read_value(path, {"format": fmt} if fmt == "mm" else {})
    _same(back, m)
    assert back.dtype == np.float64


def test_large_sparse_input_becomes_csr(tmp_path):
    m = CASES["sparse"]
    for fmt in ("text", "mm", "csv"):
        path = str(tmp_path / f"s.{fmt}")
        write_value(m, path, {"format": fmt})
        back = read_value(path, {"format": fmt})
        assert is_sparse(back), fmt
    dense = np.ones((40, 40))
    write_value(dense, str(tmp_path / "d.txt"), {"format": "text"})
    assert not is_sparse(read_value(str(tmp_path / "d.txt"), {}))


# ------------------------------------------------------------------------- reading SystemDS files

def test_sds_mtd_helper_rebuilds_observed_file():
    observed = """{
    "data_type": "matrix",
    "value_type": "double",
    "rows": 3,
    "cols": 3,
    "nnz": 6,
    "format": "csv",
    "author": "root",
    "header": false,
    "sep": ",",
    "created": "2026-11-22 03:15:23 UTC"
}"""
    assert _sds_mtd(SDS_MTD_CSV, csv=True) == observed
    assert _stamps_removed(observed) == SDS_MTD_CSV


def test_read_systemds_files_with_metadata(tmp_path):
    _put(tmp_path / "x.csv", SDS_X_CSV)
    _put(tmp_path / "x.csv.mtd", _sds_mtd(SDS_MTD_CSV, csv=True))
    _same(read_value(str(tmp_path / "x.csv"), {}), X)
    _put(tmp_path / "xh.csv", SDS_X_CSV_HEADER_SEMI)
    _put(tmp_path / "xh.csv.mtd", _sds_mtd(SDS_MTD_CSV_HEADER, csv=True))
    _same(read_value(str(tmp_path / "xh.csv"), {}), X)
    _put(tmp_path / "x.txt", SDS_X_TEXT)
    _put(tmp_path / "x.txt.mtd", _sds_mtd(SDS_MTD_TEXT))
    _same(read_value(str(tmp_path / "x.txt"), {}), X)
    _put(tmp_path / "z.txt", SDS_ZERO_TEXT)
    _put(tmp_path / "z.txt.mtd", _sds_mtd(SDS_MTD_TEXT.replace('"rows": 3', '"rows": 2').replace('"nnz": 6', '"nnz": 0')))
    _same(read_value(str(tmp_path / "z.txt"), {}), np.zeros((2, 3)))
    _put(tmp_path / "s.dbl", "3.5")
    _put(tmp_path / "s.dbl.mtd", _sds_mtd(SDS_MTD_SCALAR % "double"))
    assert read_value(str(tmp_path / "s.dbl"), {}) == 3.5
    _put(tmp_path / "fr.csv", "x,y,z,w\n1,2.5,true,ab c\n-3,0.0,false,\n")
    _put(tmp_path / "fr.csv.mtd", _sds_mtd(SDS_MTD_FRAME, csv=True))
    f = read_value(str(tmp_path / "fr.csv"), {})
    assert f.columns == [[1, -3], [2.5, 0.0], [True, False], ["ab c", None]]


def test_read_mm_variants(tmp_path):
    _same(read_value(_put(tmp_path / "x.mm", SDS_X_MM), {"format": "mm"}), X)
    _same(read_value(str(tmp_path / "x.mm"), {}), X)  # sniffed from the header line
    _same(read_value(_put(tmp_path / "z.mm", SDS_ZERO_MM), {}), np.zeros((2, 3)))
    c = "%%MatrixMarket matrix coordinate real general\n% comment\n3 3 2\n1 1 5\n3 2 7.5\n"
    _same(read_value(_put(tmp_path / "c.mm", c), {}), np.array([[5.0, 0, 0], [0, 0, 0], [0, 7.5, 0]]))
    p = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n1 1\n3 2\n"
    _same(read_value(_put(tmp_path / "p.mm", p), {}), np.array([[1.0, 0, 0], [0, 0, 1], [0, 1, 0]]))
    i = "%%MatrixMarket matrix coordinate integer symmetric\n3 3 2\n1 1 4\n3 2 -2\n"
    _same(read_value(_put(tmp_path / "i.mm", i), {}), np.array([[4.0, 0, 0], [0, 0, -2], [0, -2, 0]]))


@pytest.mark.parametrize("text,message", [
    # SystemDS 3.4.0's messages for the same files
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "Incorrect format: array"),
    ("%%MatrixMarket matrix coordinate complex general\n3 3 1\n3 2 7.5 1\n", "Incorrect field: complex"),
    ("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n3 2 7.5\n", "Incorrect symmetry: skew-symmetric"),
    ("1 1 5\n", "header"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 1\n4 1 2.0\n", "outside the 3x3 matrix"),
])
def test_read_mm_errors(tmp_path, text, message):
    with pytest.raises(DMLRuntimeError, match=message):
        read_value(_put(tmp_path / "bad.mm", text), {"format": "mm"})


def test_read_mm_dimension_conflict(tmp_path):
    path = _put(tmp_path / "c.mm", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 5\n")
    with pytest.raises(DMLRuntimeError, match="invalid specified number of rows: 5 vs 3"):
        read_value(path, {"format": "mm", "rows": 5, "cols": 5})


# ------------------------------------------------------------------------- csv reading options

def test_csv_header_fill_default_and_na_strings(tmp_path):
    h = _put(tmp_path / "h.csv", "a,b,c\n1,2,3\n4,,6\n")
    _same(read_value(h, {"format": "csv", "header": True}), np.array([[1.0, 2, 3], [4, 0, 6]]))
    # rows larger than the file: SystemDS pads with zero rows (no error), lafuse refuses (a
    # short file is what an interrupted write leaves)
    with pytest.raises(DMLRuntimeError, match=r"h\.csv': Read matrix dimensions differ from meta data: "
                                              r"\[2x3\] vs\. \[4x3\] \(declared by the read statement\)"):
        read_value(h, {"format": "csv", "header": True, "rows": 4, "cols": 3})
    m = _put(tmp_path / "m.csv", "1,2,3\n4,,6\n7,NA,9\n")
    _same(read_value(m, {"format": "csv", "naStrings": "NA"}), np.array([[1.0, 2, 3], [4, 0, 6], [7, NAN, 9]]))
    _same(read_value(m, {"format": "csv", "fill": True, "default": -1, "naStrings": "NA"}),
          np.array([[1.0, 2, 3], [4, -1, 6], [7, NAN, 9]]))
    _same(read_value(m, {"format": "csv", "naStrings": "x\u00b7NA"}), np.array([[1.0, 2, 3], [4, 0, 6], [7, NAN, 9]]))
    with pytest.raises(DMLRuntimeError, match=r"m\.csv:3: cell 2 is not a number: 'NA'"):
        read_value(m, {"format": "csv"})
    with pytest.raises(DMLRuntimeError, match=r"m\.csv:2: empty field.*fill=TRUE"):
        read_value(m, {"format": "csv", "fill": False, "naStrings": "NA"})


def test_csv_separators_and_line_endings(tmp_path):
    _same(read_value(_put(tmp_path / "a.csv", "1;2\n3;4\n"), {"sep": ";"}), np.array([[1.0, 2], [3, 4]]))
    _same(read_value(_put(tmp_path / "b.csv", "1,2\r\n3,4\r\n"), {}), np.array([[1.0, 2], [3, 4]]))
    _same(read_value(_put(tmp_path / "c.csv", "1,2\n3,4"), {}), np.array([[1.0, 2], [3, 4]]))
    _same(read_value(_put(tmp_path / "d.csv", " 1 ,2.5e1\n-Infinity,NaN\n"), {}), np.array([[1.0, 25], [-INF, NAN]]))
    _same(read_value(_put(tmp_path / "e.csv", '"1",2\n3,"4"\n'), {}), np.array([[1.0, 2], [3, 4]]))


@pytest.mark.parametrize("text,message", [
    ("1,2,3\n4,5\n", r"bad\.csv:2: expected 3 cells, found 2"),
    ("1,x,3\n", r"bad\.csv:1: cell 2 is not a number: 'x'"),
    ("1,2\n\n3,4\n", r"bad\.csv:2: empty line"),
    ("NaN,inf\n", r"cell 2 is not a number: 'inf'"),  # Java's parseDouble rejects inf
])
def test_csv_errors_name_file_and_line(tmp_path, text, message):
    with pytest.raises(DMLRuntimeError, match=message):
        read_value(_put(tmp_path / "bad.csv", text), {"format": "csv"})


# ------------------------------------------------------------------------- text (ijv) reading

def test_text_reading_conventions(tmp_path):
    t = _put(tmp_path / "t.txt", "1 1 5\n3 2 7.5\n")
    _same(read_value(t, {"format": "text", "rows": 3, "cols": 2}), np.array([[5.0, 0], [0, 0], [0, 7.5]]))
    _same(read_value(t, {"format": "text"}), np.array([[5.0, 0], [0, 0], [0, 7.5]]))  # dims inferred
    dup = _put(tmp_path / "dup.txt", "1 1 5\n1 1 7\n")  # the last value of a repeated cell wins
    _same(read_value(dup, {"format": "text", "rows": 2, "cols": 2}), np.array([[7.0, 0], [0, 0]]))
    _same(read_value(_put(tmp_path / "z.txt", "0 0 0\n"), {"format": "text", "rows": 2, "cols": 2}), np.zeros((2, 2)))


@pytest.mark.parametrize("text,message", [
    ("1 1 5\n9 9 3\n", r"cell \(9, 9\) is outside the 3x3 matrix"),
    ("1 1 5\n2 x 3\n", r"bad\.txt:2: malformed cell '2 x 3'"),
    ("1 1 5 9\n", r"bad\.txt:1: expected 'row col value'"),
    ("0 2 5\n", r"bad\.txt:1: cell \(0, 2\) has a non-positive index"),
])
def test_text_errors(tmp_path, text, message):
    with pytest.raises(DMLRuntimeError, match=message):
        read_value(_put(tmp_path / "bad.txt", text), {"format": "text", "rows": 3, "cols": 3})


# ------------------------------------------------------------------------- metadata and formats

def test_mtd_conflicts_are_errors_like_systemds(tmp_path):
    path = str(tmp_path / "xh.csv")
    write_value(X, path, {"format": "csv", "header": True, "sep": ";"})
    _same(read_value(path, {"format": "csv", "sep": ";", "rows": 3}), X)  # agreeing values are fine
    for params, key in [({"sep": ","}, "sep"), ({"format": "text"}, "format"), ({"header": False}, "header"),
                        ({"rows": 5}, "rows")]:
        with pytest.raises(DMLRuntimeError, match=f"parameter '{key}' has conflicting values"):
            read_value(path, params)


def test_format_guessing_without_metadata(tmp_path):
    _same(read_value(_put(tmp_path / "plain", "1,2\n3,4\n"), {}), np.array([[1.0, 2], [3, 4]]))
    _same(read_value(_put(tmp_path / "m.txt", "2 2 4.5\n"), {}), np.array([[0.0, 0], [0, 4.5]]))
    np.save(tmp_path / "a.npy", np.eye(2))
    _same(read_value(str(tmp_path / "a.npy"), {}), np.eye(2))


def test_scalar_reading(tmp_path):
    assert read_value(_put(tmp_path / "b1", "TRUE"), {"data_type": "scalar", "value_type": "boolean"}) is True
    assert read_value(_put(tmp_path / "b2", "yes"), {"data_type": "scalar", "value_type": "boolean"}) is False
    assert read_value(_put(tmp_path / "d1", " 42 \n"), {"data_type": "scalar", "value_type": "double"}) == 42.0
    assert read_value(_put(tmp_path / "d2", "3.5"), {"data_type": "scalar"}) == 3.5
    s = read_value(_put(tmp_path / "s1", "hello world\nline2\n"), {"data_type": "scalar", "value_type": "string"})
    assert s == "hello world\nline2"
    with pytest.raises(DMLRuntimeError, match="cannot read a INT scalar"):
        read_value(_put(tmp_path / "i1", " 42 "), {"data_type": "scalar", "value_type": "int"})


def test_frame_csv_reading_with_schema(tmp_path):
    path = _put(tmp_path / "fr.csv", "x,y,z,w\n1,2.5,true,ab c\n-3,,FALSE,\n")
    f = read_value(path, {"data_type": "frame", "format": "csv", "header": True,
                          "schema": "INT64,FP64,BOOLEAN,STRING"})
    assert f.names == ["x", "y", "z", "w"]
    assert f.columns == [[1, -3], [2.5, 0.0], [True, False], ["ab c", None]]
    g = read_value(path, {"data_type": "frame", "format": "csv", "header": True})
    assert g.schema == ["STRING"] * 4 and g.columns[1] == ["2.5", None]


@pytest.mark.parametrize("call,message", [
    (lambda d: read_value(str(d / "missing.csv"), {"format": "csv"}), "does not exist: .*missing.csv"),
    (lambda d: read_value(_put(d / "m.csv", "1\n"), {"format": "foo"}), "invalid format 'foo'"),
    (lambda d: read_value(_put(d / "m.csv", "1\n"), {"format": "libsvm"}), "not supported by lafuse"),
    (lambda d: write_value(X, str(d / "o"), {"format": "ijv"}), "invalid format 'ijv'"),
    (lambda d: write_value(np.zeros((0, 0)), str(d / "e.csv"), {"format": "csv"}), "zero rows or columns"),
    (lambda d: write_value(X, str(d), {"format": "csv"}), "is a directory"),
    (lambda d: read_value(_put(d / "seq.bin", "SEQ\x06org.apache"), {"format": "binary"}), "SequenceFile"),
])
def test_errors(tmp_path, call, message):
    with pytest.raises(DMLRuntimeError, match=message):
        call(tmp_path)


def test_npy_accepts_empty_matrices(tmp_path):
    write_value(np.zeros((0, 3)), str(tmp_path / "e.npy"), {"format": "npy"})
    assert read_value(str(tmp_path / "e.npy"), {}).shape == (0, 3)


def test_parse_java_double():
    assert parse_java_double("1.5d") == 1.5
    assert parse_java_double(" -2e3F ") == -2000.0
    assert parse_java_double("0x1p3") == 8.0
    assert parse_java_double("-Infinity") == -INF
    assert np.isnan(parse_java_double("NaN"))
    for bad in ("inf", "nan", "1_0", "", "1e", "infinity"):
        with pytest.raises(ValueError):
            parse_java_double(bad)


def test_csv_fast_path_reads_the_doubles_of_the_cell_loop(tmp_path):
    """Plain numeric files go through pandas' C parser; it must give the doubles Python's float()
    (= Java's parseDouble on these spellings) gives, including 17-digit and extreme exponents."""
    from lafuse.runtime.io.readers import _read_csv_fast

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 5)) * 10.0 ** rng.integers(-300, 300, size=(400, 5))
    cells = [[repr(float(v)) if (i + j) % 3 else f"{v:.20e}" for j, v in enumerate(row)] for i, row in enumerate(x)]
    text = "\n".join(",".join(r) for r in cells) + "\n"
    path = _put(tmp_path / "f.csv", text)
    fast = _read_csv_fast(_bytes(path), {})
    assert fast is not None
    expect = np.array([[float(c) for c in r] for r in cells])
    assert np.array_equal(fast, expect)
    _same(read_value(path, {"format": "csv"}), expect)
    h = _put(tmp_path / "h.csv", "a;b\n1;-2.5e-3\n.5;7.\n")
    assert np.array_equal(_read_csv_fast(_bytes(h), {"sep": ";", "header": True}), np.array([[1.0, -2.5e-3], [0.5, 7.0]]))
    # a single column: pandas' copy-on-write hands out a read-only view; lafuse's matrices are writeable
    col = _read_csv_fast(_bytes(_put(tmp_path / "c.csv", "1\n2\n3\n")), {})
    assert col is not None and col.flags.writeable and col.flags.c_contiguous


@pytest.mark.parametrize("text,params", [
    ("1,2,3\n4,5\n", {}),  # short row: pandas would pad with NaN
    ("1,2\n3,4,5\n", {}),
    ("1,,3\n", {}),  # empty cell: fill/default rules
    ("1,NaN\n", {}),  # NaN / Infinity spellings: Java's, not pandas'
    ("1,2\r\n", {}),
    ("1,2\n\n3,4\n", {}),
    ("1,NA\n", {"naStrings": "NA"}),
    ("1::2\n", {"sep": "::"}),
    ("1,2\n", {"rows": 3, "cols": 2}),  # fewer rows than declared: the loop names the dimensions
    ('"1",2\n', {}),
])
def test_csv_fast_path_declines_what_the_cell_loop_must_handle(tmp_path, text, params):
    from lafuse.runtime.io.readers import _read_csv_fast

    assert _read_csv_fast(_bytes(_put(tmp_path / "x.csv", text)), params) is None


def test_ijv_fast_path_reads_what_the_line_parser_reads(tmp_path):
    """Plain ``row col value`` text goes through pandas' C parser; it must give the line parser's
    indices and doubles (Java's parseDouble on these spellings), keep the "0 0 0" empty marker and
    the last value of a repeated cell."""
    from lafuse.runtime.io.readers import _parse_ijv_lines, _read_ijv_fast
    from lafuse.runtime.io.text import lines

    rng = np.random.default_rng(5)
    n = 3000
    i, j = rng.integers(1, 400, size=n), rng.integers(1, 300, size=n)
    v = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n)
    cells = [f"{a} {b} {repr(float(x)) if k % 3 else f'{x:.20e}'}" for k, (a, b, x) in enumerate(zip(i, j, v))]
    path = _put(tmp_path / "s.ijv", "\n".join(cells + ["0 0 0", f"{i[0]} {j[0]} 7.5"]) + "\n")
    fast = _read_ijv_fast(_bytes(path))
    assert fast is not None
    slow = _parse_ijv_lines(path, lines(_read(path)), 0, False, 1)
    for a, b in zip(fast, slow):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    m = read_value(path, {"format": "text", "rows": 400, "cols": 300})
    assert to_dense(m)[i[0] - 1, j[0] - 1] == 7.5  # the later of two values for one cell


@pytest.mark.parametrize("text", [
    "1  2 3\n",  # two spaces
    "1\t2\t3\n",
    " 1 2 3\n",
    "1 2 3 \n",
    "1 2\n",  # no value
    "1 2 3 4\n",
    "1.0 2 3\n",  # a non-integer index: the line parser's message
    "1 2 NaN\n",
    "0 2 3\n",  # a non-positive index
    "1 2 3\n\n4 5 6\n",
    "",
])
def test_ijv_fast_path_declines_what_the_line_parser_must_handle(tmp_path, text):
    from lafuse.runtime.io.readers import _read_ijv_fast

    assert _read_ijv_fast(_bytes(_put(tmp_path / "x.ijv", text))) is None
