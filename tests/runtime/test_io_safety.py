"""File IO that fails safely: atomic, checked writes; reads that compare the data with its metadata,
reject what they cannot represent and stay inside the memory budget; read-after-write sizes."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lafuse import cli
from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.errors import DMLRuntimeError
from lafuse.runtime.interp import Interpreter
from lafuse.runtime.io import read_value, write_value
from lafuse.runtime.values import to_dense

REPO = Path(__file__).resolve().parents[2]
OLD = np.array([[1.0, 0.0, 3.5], [0.0, -2.0, 6.0]])
NEW = np.array([[7.0, 8.0], [0.0, 9.5], [1e-7, 0.0]])


def _run(capsys, script: str, *extra: str) -> tuple[int, str, str]:
    """``lafuse run -s script`` in-process: (exit code, stdout, stderr)."""
    rc = cli.main(["run", "--no-codegen", "-s", script, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _same(a, b) -> bool:
    a, b = to_dense(a), to_dense(b)
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _bytes(p) -> bytes:
    with open(p, "rb") as f:
        return f.read()


def _leftovers(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith((".lafuse-tmp", ".lafuse-old")))


# ------------------------------------------------------------------------- 1. atomic, checked writes

@pytest.mark.parametrize("fmt", ["csv", "text", "binary"])
def test_a_failed_metadata_rename_leaves_the_old_pair(tmp_path, monkeypatch, fmt):
    path = str(tmp_path / "m")
    write_value(OLD, path, {"format": fmt})
    old_data, old_mtd = _bytes(path), _bytes(path + ".mtd")
    real = os.replace

    def failing(src, dst, *a, **k):
        if str(dst).endswith(".mtd"):
            raise OSError(errno.EIO, "Input/output error")
        return real(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(DMLRuntimeError, match=re.escape(f"cannot write '{path}.mtd': Input/output error")):
        write_value(NEW, path, {"format": fmt})
    monkeypatch.undo()
    assert _bytes(path) == old_data and _bytes(path + ".mtd") == old_mtd  # the data was put back
    assert _leftovers(tmp_path) == []
    assert _same(read_value(path, {}), OLD)


@pytest.mark.parametrize("call,err", [
    ("fsync", OSError(errno.ENOSPC, "No space left on device")),  # a full disk
    ("open", PermissionError(errno.EACCES, "Permission denied")),  # a read-only directory (tests run as root)
])
def test_a_disk_error_while_writing_leaves_the_old_pair(tmp_path, monkeypatch, call, err):
    path = str(tmp_path / "m.csv")
    write_value(OLD, path, {"format": "csv"})
    old_data, old_mtd = _bytes(path), _bytes(path + ".mtd")
    real = getattr(os, call)

    def failing(*a, **k):
        if call == "open" and not str(a[0]).endswith(".lafuse-tmp"):
            return real(*a, **k)
        raise err

    monkeypatch.setattr(os, call, failing)
    with pytest.raises(DMLRuntimeError, match=re.escape(f"cannot write '{path}': {err.strerror}")):
        write_value(NEW, path, {"format": "csv"})
    monkeypatch.undo()
    assert _bytes(path) == old_data and _bytes(path + ".mtd") == old_mtd
    assert _leftovers(tmp_path) == []


def test_a_directory_in_the_way_of_the_metadata_fails_before_touching_the_data(tmp_path, capsys):
    path = tmp_path / "m.csv"
    write_value(OLD, str(path), {"format": "csv"})
    old_data = _bytes(path)
    os.remove(str(path) + ".mtd")
    os.mkdir(str(path) + ".mtd")
    rc, _, err = _run(capsys, f'write(matrix(1, rows=2, cols=2), "{path}", format="csv")')
    assert rc == 1
    assert f"runtime error: cannot write '{path}.mtd': it is a directory" in err
    assert _bytes(path) == old_data and _leftovers(tmp_path) == []


def test_a_read_only_metadata_file_is_replaced_with_its_permissions(tmp_path):
    """Replacing renames over the old files (as SystemDS's delete-then-create does), so a read-only
    .mtd in a writable directory does not stop the write half-way; its mode is kept."""
    path = str(tmp_path / "m.csv")
    write_value(OLD, path, {"format": "csv"})
    os.chmod(path + ".mtd", 0o444)
    write_value(NEW, path, {"format": "csv"})
    assert _same(read_value(path, {}), NEW)
    assert os.stat(path + ".mtd").st_mode & 0o777 == 0o444


def test_a_device_is_written_in_place_not_replaced(tmp_path):
    """Renaming over /dev/null (as root) would replace the device with a file."""
    link = tmp_path / "sink"
    link.symlink_to("/dev/null")
    write_value(OLD, str(link), {"format": "csv"})
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and link.is_symlink()
    assert json.loads(_bytes(str(link) + ".mtd"))["rows"] == 2


def test_new_data_beside_old_metadata_is_an_error(tmp_path, capsys):
    for fmt, name in (("csv", "m.csv"), ("text", "m.txt"), ("binary", "m.bin")):
        path = str(tmp_path / name)
        write_value(OLD, path, {"format": fmt})
        old_mtd = _bytes(path + ".mtd")
        write_value(OLD * 2, path, {"format": fmt})  # same sizes and nnz: only the check tells them apart
        with open(path + ".mtd", "wb") as f:
            f.write(old_mtd)
        rc, out, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
        assert rc == 1 and out == ""
        assert f"runtime error: '{path}' does not match its metadata file '{path}.mtd': the data file has " in err
        assert "Write the file again; to accept the data as it is, remove the \"description\" entry" in err


def test_systemds_reads_what_lafuse_writes(tmp_path):
    """SystemDS 3.4 rejects unknown .mtd keys; lafuse's data check lives in "description", which it ignores."""
    from conformance import sds

    d = tmp_path / "files"
    write_value(OLD, str(d / "x.csv"), {"format": "csv", "description": 'my "data"'})
    write_value(OLD, str(d / "x.txt"), {"format": "text"})
    write_value(2.5, str(d / "s"), {})
    src = tmp_path / "script"
    src.mkdir()
    (src / "r.dml").write_text(f'X = read("{d}/x.csv")\nY = read("{d}/x.txt")\ns = read("{d}/s")\n'
                               'print(sum(X) + " " + sum(Y) + " " + s)\n')
    res = sds.run_systemds(src / "r.dml", None, tmp_path / "work")
    assert res.ok, res.error
    assert res.stdout_lines == ["8.5 8.5 2.5"]


def test_temporaries_are_never_read_and_are_cleaned_up(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-0").write_text("1,2\n")
    (parts / ".part-1.99999999.0a0b0c0d.lafuse-tmp").write_text("5,5\n")
    assert _same(read_value(str(parts), {"format": "csv"}), np.array([[1.0, 2.0]]))
    stale = tmp_path / ".m.csv.99999999.0a0b0c0d.lafuse-tmp"  # from a writer that is gone
    stale.write_text("junk")
    write_value(OLD, str(tmp_path / "m.csv"), {"format": "csv"})
    assert not stale.exists()


# ------------------------------------------------------------------------- 2. data against metadata

MTD = {"data_type": "matrix", "value_type": "double", "rows": 3, "cols": 3, "nnz": 9, "format": "csv",
       "header": False, "sep": ","}


@pytest.mark.parametrize("data,mtd,message", [
    ("1,2,3\n4,5,6\n", MTD,
     r"Read matrix dimensions differ from meta data: \[2x3\] vs\. \[3x3\] \(declared by '.*\.mtd'\)"),
    ("1,2,3\n4,5,6\n7,8,9\n1,1,1\n", MTD, r"Read matrix dimensions differ from meta data: \[4x3\] vs\. \[3x3\]"),
    ("1,2\n4,5\n7,8\n", MTD, r"Read matrix dimensions differ from meta data: \[3x2\] vs\. \[3x3\]"),
    ("1,2,3\n4,0,6\n7,8,9\n", MTD,
     r"Read matrix inconsistent with given meta data: expected nnz=9, real nnz=8 \(declared by '.*\.mtd'\)"),
    ("1 1 1.0\n2 2 2.0\n", {**MTD, "format": "text", "nnz": 3},
     r"Read matrix inconsistent with given meta data: expected nnz=3, real nnz=2"),
    ("1 1 1.0\n4 3 2.0\n", {**MTD, "format": "text", "nnz": 2}, r"cell \(4, 3\) is outside the 3x3 matrix"),
])
def test_reads_check_the_data_against_the_metadata(tmp_path, capsys, data, mtd, message):
    path = tmp_path / "m.dat"
    path.write_text(data)
    (tmp_path / "m.dat.mtd").write_text(json.dumps(mtd, indent=4))
    rc, out, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
    assert (rc, out) == (1, "")
    assert re.search(message, err), err


@pytest.mark.parametrize("text,message", [
    ("3 3 3\n1 1 1.0\n2 2 2.0\n", "the MatrixMarket size line declares 3 entries, but the file holds 2"),
    ("3 3 1\n1 1 1.0\n2 2 2.0\n", "the MatrixMarket size line declares 1 entries, but the file holds 2"),
    ("3 3 2\n1 1 1.0\n2 2\n", "expected 'row col value', found '2 2'"),
])
def test_matrix_market_entries_must_match_the_size_line(tmp_path, capsys, text, message):
    path = tmp_path / "m.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n" + text)
    rc, out, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
    assert (rc, out) == (1, "") and message in err, err


def test_npy_against_metadata_and_a_truncated_npy(tmp_path, capsys):
    path = str(tmp_path / "m.npy")
    write_value(OLD, path, {"format": "npy"})
    mtd = json.loads(_bytes(path + ".mtd"))
    del mtd["description"]
    with open(path + ".mtd", "w") as f:
        json.dump({**mtd, "rows": 3}, f)
    rc, _, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
    assert rc == 1 and r"Read matrix dimensions differ from meta data: [2x3] vs. [3x3]" in err
    os.remove(path + ".mtd")
    raw = _bytes(path)
    with open(path, "wb") as f:
        f.write(raw[:-5])
    rc, _, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
    assert rc == 1
    assert f"'{path}' is truncated or damaged: its header declares a 2x3 float64 array (48 bytes of data), " \
           "the file holds 43" in err


# ------------------------------------------------------------------------- 3. read after write

def _ijv_pair(path: Path) -> None:
    path.write_text("1 1 1.0\n1 2 2.0\n1 3 3.0\n2 1 4.0\n2 2 5.0\n2 3 6.0\n")
    Path(str(path) + ".mtd").write_text(json.dumps({"data_type": "matrix", "value_type": "double", "rows": 2,
                                                     "cols": 3, "nnz": 6, "format": "text"}))


def test_a_read_after_a_write_has_the_written_sizes(tmp_path, capsys):
    """SystemDS 3.4 prints 3x2 and 3x3 261.0 for this script with ``Xt = t(X); write(Xt, ...)`` (and
    fails with "Undefined Variable (null)" on ``write(t(X), ...)``)."""
    f = tmp_path / "w.ijv"
    _ijv_pair(f)
    rc, out, err = _run(capsys, f'X = read("{f}")\nwrite(t(X), "{f}")\nY = read("{f}")\n'
                                'print(nrow(Y) + "x" + ncol(Y))\nZ = Y %*% X\n'
                                'print(nrow(Z) + "x" + ncol(Z) + " " + sum(Z))')
    assert (rc, err) == (0, "")
    assert out == "3x2\n3x3 261.0\n"


def test_a_read_before_a_write_in_the_same_block_sees_the_old_file(tmp_path, capsys):
    f = tmp_path / "w.ijv"
    _ijv_pair(f)
    rc, out, err = _run(capsys, f'Y0 = read("{f}")\nwrite(matrix(7, rows=2, cols=3), "{f}")\nprint(sum(Y0))')
    assert (rc, out, err) == (0, "21.0\n", "")


def test_writes_in_branches_loops_functions_and_to_computed_paths(tmp_path, capsys):
    """The test suite runs with LAFUSE_CHECK_METADATA=1: a compile-time size that differs from the
    value read would fail the run, so these sizes are exact or unknown, never stale."""
    f = tmp_path / "w.ijv"
    _ijv_pair(f)
    rc, out, err = _run(capsys, f'''
X = read("{f}")
if (sum(X) > 100) {{
  write(t(X), "{f}")
}}
Y = read("{f}")
print("if: " + nrow(Y) + "x" + ncol(Y))
for (i in 1:3) {{
  Z = read("{f}")
  print("loop " + i + ": " + nrow(Z) + "x" + ncol(Z))
  write(t(Z), "{f}")
}}
g = function(Matrix[Double] A, String p) {{
  write(A, p)
}}
g(matrix(1, rows=4, cols=5), "{f}")
W = read("{f}")
print("function: " + nrow(W) + "x" + ncol(W))
p = "{tmp_path}/w" + ".ijv"
write(matrix(2, rows=6, cols=1), p)
V = read("{f}")
print("computed path: " + nrow(V) + "x" + ncol(V) + " " + sum(V))
''')
    assert (rc, err) == (0, "")
    assert out == ("if: 2x3\nloop 1: 2x3\nloop 2: 3x2\nloop 3: 2x3\nfunction: 4x5\n"
                   "computed path: 6x1 12.0\n")


def test_a_scalar_file_rewritten_in_a_loop_keeps_its_type(tmp_path, capsys):
    f = str(tmp_path / "count")
    write_value(1, f, {})
    rc, out, err = _run(capsys, 'for (i in 1:3) {\n  s = read(ifdef($f, "none"))\n  write(s + 1, $f)\n}\n'
                                'print(read($f))', "--nvargs", f"f={f}")
    assert (rc, out, err) == (0, "4\n", "")


def test_a_file_changed_after_compilation_is_an_error(tmp_path):
    f = str(tmp_path / "m.csv")
    write_value(OLD, f, {"format": "csv"})
    comp = Compiler(cfgmod.get())
    prog = comp.compile_text(f'X = read("{f}")\nprint(nrow(X))', "<t>")
    write_value(NEW, f, {"format": "csv"})  # by someone else, between compiling and running
    with pytest.raises(DMLRuntimeError, match=re.escape(
            f"'{f}' holds a 3x2 matrix, but the script was compiled for 2x3 (from its metadata then)")):
        Interpreter(prog, comp).run()


# ------------------------------------------------------------------------- 4. npy data types

@pytest.mark.parametrize("arr,message", [
    (np.array([[1 + 2j, 3]]), "holds complex data (dtype complex128)"),
    (np.array([["2020-01-01"]], dtype="datetime64[D]"), "holds datetime data (dtype datetime64[D])"),
    (np.array([["a", "bc"]]), "holds string data (dtype <U2)"),
    (np.array([[1, "x"]], dtype=object), "holds Python object data (dtype object)"),
    (np.zeros((2, 2, 2)), "holds a 3-D array; only 2-D matrices can be read"),
])
def test_npy_that_is_not_real_numbers_is_rejected(tmp_path, capsys, arr, message):
    path = tmp_path / "a.npy"
    np.save(path, arr, allow_pickle=True)
    rc, out, err = _run(capsys, f'X = read("{path}"); print(sum(X))')
    assert (rc, out) == (1, "")
    assert f"runtime error: '{path}' {message}" in err, err


def test_npy_bool_and_integers_become_doubles_and_garbage_is_an_error(tmp_path, capsys):
    for arr in (np.array([[True, False], [True, True]]), np.array([[1, -2], [3, 2**40]], dtype=np.int64),
                np.array([[1, 2], [3, 4]], dtype=np.uint8), np.array([[0.5, 2]], dtype=np.float32)):
        np.save(tmp_path / "a.npy", arr)
        got = read_value(str(tmp_path / "a.npy"), {})
        assert got.dtype == np.float64 and np.array_equal(got, arr.astype(np.float64))
    (tmp_path / "g.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    rc, _, err = _run(capsys, f'X = read("{tmp_path / "g.npy"}"); print(sum(X))')
    assert rc == 1 and f"runtime error: cannot read '{tmp_path / 'g.npy'}' as npy: " in err


# ------------------------------------------------------------------------- 5. malformed .mtd

@pytest.mark.parametrize("mtd,message", [
    ("[1, 2, 3]", "metadata file '{p}.mtd' holds a list, not a JSON object"),
    ('{"rows": "abc", "cols": 3, "format": "csv"}',
     "metadata file '{p}.mtd': 'rows' must be a whole number >= 0 (-1: unknown), got \"abc\""),
    ('{"rows": -2, "cols": 3, "format": "csv"}',
     "metadata file '{p}.mtd': 'rows' must be a whole number >= 0 (-1: unknown), got -2"),
    ('{"rows": 2.5, "cols": 3, "format": "csv"}',
     "metadata file '{p}.mtd': 'rows' must be a whole number >= 0 (-1: unknown), got 2.5"),
    ('{"rows": 2, "cols": 3, "format": "csv", "row": 2}', "MTD file {p}.mtd contains invalid parameter name: row"),
    ('{"rows": 2, "cols": 3, "header": "maybe"}', "metadata file '{p}.mtd': 'header' must be TRUE or FALSE, "
                                                  "got \"maybe\""),
    ('{"rows": 2,', "cannot parse metadata file '{p}.mtd': "),
])
def test_a_malformed_mtd_is_an_error_naming_it(tmp_path, capsys, mtd, message):
    p = tmp_path / "m.csv"
    p.write_text("1,2,3\n4,5,6\n")
    Path(str(p) + ".mtd").write_text(mtd)
    want = message.format(p=p)
    rc, out, err = _run(capsys, f'X = read("{p}"); print(sum(X))')  # compile time: a literal path
    assert (rc, out) == (1, "") and f"validation error: {want}" in err, err
    rc, out, err = _run(capsys, 'X = read($f); print(sum(X))', "--nvargs", f"f={p}")
    assert (rc, out) == (1, "") and f"validation error: {want}" in err, err
    rc, out, err = _run(capsys, f'd = "{tmp_path}"\nfor (i in 1:1) {{ X = read(d + "/m.csv"); print(sum(X)) }}')
    assert (rc, out) == (1, "") and f"runtime error: {want}" in err, err  # a path computed at run time


# ------------------------------------------------------------------------- 6. tsv and byte order marks

def test_tsv_is_split_on_tabs_and_a_bom_is_skipped(tmp_path):
    (tmp_path / "x.tsv").write_text("1\t2.5\n3\t4\n")
    assert _same(read_value(str(tmp_path / "x.tsv"), {}), np.array([[1.0, 2.5], [3.0, 4.0]]))
    (tmp_path / "c.tsv").write_text("1,2\n")  # an explicit sep or format wins, as in SystemDS
    assert _same(read_value(str(tmp_path / "c.tsv"), {"sep": ","}), np.array([[1.0, 2.0]]))
    bom = "\ufeff"
    cases = {"b.csv": (bom + "1,2\n3,4\n", {}), "b2.csv": (bom + "1,NaN\n3,4\n", {}),
             "b.txt": (bom + "1 1 1.0\n2 2 4.0\n", {}),
             "b.mtx": (bom + "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 4.0\n", {}),
             "b": (bom + "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 4.0\n", {})}
    for name, (text, params) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        got = to_dense(read_value(str(tmp_path / name), params))
        assert got.shape == (2, 2) and got[0, 0] == 1.0, name


# ------------------------------------------------------------------------- 7. memory budget

def test_reads_stop_before_allocating_beyond_the_memory_budget(tmp_path, capsys):
    big = tmp_path / "big.txt"
    big.write_text("1000000000 1000000000 1.0\n")  # 26 bytes declaring a 1e9 x 1e9 matrix
    conf = tmp_path / "budget.json"
    conf.write_text(json.dumps({"memory_budget": 0.1}))
    rc, out, err = _run(capsys, f'X = read("{big}"); print(sum(X))', "--config", str(conf))
    assert (rc, out) == (1, "")
    assert re.search(rf"runtime error: reading '{re.escape(str(big))}' \(1000000000x1000000000, 1 cells\) "
                     r"needs 17 GB, beyond the memory budget of [\d.]+ [GM]B \(memory_budget=0\.1 of", err), err
    assert "raise memory_budget in a --config file" in err
    x = np.ones((300, 100))
    for fmt in ("npy", "csv", "text"):
        path = str(tmp_path / f"x.{fmt}")
        write_value(x, path, {"format": fmt})
        with cfgmod.using(memory_budget=1e-7):  # about 2 KB here
            with pytest.raises(DMLRuntimeError, match=rf"reading '{re.escape(path)}'.* needs .*beyond the "
                                                      r"memory budget"):
                read_value(path, {})
        assert _same(read_value(path, {}), x)


# ------------------------------------------------------------------------- interrupted writes

def test_killed_writes_leave_the_old_or_the_new_matrix_or_a_clear_error(tmp_path):
    """A writer process overwrites a file again and again (OLD and NEW in turn) and is SIGKILLed at
    random moments; after each kill, lafuse's reader must return OLD or NEW exactly or fail with a
    clear error, never another matrix. A kill counts as mid-write when it left a temporary file or a
    data file its .mtd does not describe: most must be, or the test proves nothing."""
    rng = np.random.default_rng(18)
    old = np.round(rng.normal(size=(150, 40)) * (rng.random((150, 40)) < 0.6), 3)
    new = np.round(rng.normal(size=(100, 70)) * (rng.random((100, 70)) < 0.6), 3)
    np.save(tmp_path / "old.npy", old)
    np.save(tmp_path / "new.npy", new)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("io_kill_writer.py"))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    outcomes: dict[str, dict[str, int]] = {}
    try:
        for fmt, name in (("csv", "m.csv"), ("text", "m.txt"), ("mm", "m.mtx"), ("npy", "m.npy")):
            d = tmp_path / fmt
            d.mkdir()
            path = str(d / name)
            write_value(old, path, {"format": fmt})
            seen = outcomes[fmt] = {"old": 0, "new": 0, "error": 0, "mid": 0, "writes": 0}
            for _ in range(6):
                req = {"path": path, "fmt": fmt, "a": str(tmp_path / "old.npy"), "b": str(tmp_path / "new.npy"),
                       "delay": float(rng.uniform(0.05, 0.25))}
                assert server.stdin is not None and server.stdout is not None
                server.stdin.write(json.dumps(req) + "\n")
                server.stdin.flush()
                reply = server.stdout.readline().split()
                assert reply[0] == "killed", reply
                seen["writes"] += int(reply[1])
                left = _leftovers(d)
                try:
                    got = read_value(path, {})
                except DMLRuntimeError as e:
                    assert re.search(r"does not match its metadata file|Read matrix", str(e)), e
                    seen["error"] += 1
                    seen["mid"] += 1
                    continue
                assert _same(got, old) or _same(got, new), f"{fmt}: a kill left a different matrix"
                seen["old" if _same(got, old) else "new"] += 1
                seen["mid"] += bool(left)
            write_value(old, path, {"format": fmt})  # the next write removes the dead writer's temporaries
            assert _leftovers(d) == []
    finally:
        server.kill()
        server.wait()
    kills = sum(s["old"] + s["new"] + s["error"] for s in outcomes.values())
    mid = sum(s["mid"] for s in outcomes.values())
    assert kills == 24 and all(s["writes"] > 0 for s in outcomes.values()), outcomes
    assert mid >= kills // 2, outcomes  # the kills did land inside writes
    assert sum(s["old"] for s in outcomes.values()) > 0 and sum(s["new"] for s in outcomes.values()) > 0, outcomes

