"""Distributed rand, read and write (runtime.dask.io) against the local runtime, at 7x7 blocks (edge
blocks everywhere): rand gives the local values bit for bit, the workers read csv/text/mm/npy files
into the local matrix, a write from a distributed matrix leaves the local write's bytes, and bad
input fails with the local error."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from lafuse import config as cfgmod
from lafuse.compiler import Compiler, run_dml
from lafuse.explain import explain_program
from tests.on_dask.common import cfg as _cfg
from tests.on_dask.common import dense as _dense
from tests.on_dask.common import errors_both_ways


def _plan(text: str, cfg: cfgmod.Config, outputs: tuple[str, ...]) -> str:
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        return explain_program(comp.compile_text(text, "<test>", outputs=outputs), "runtime", comp)


def _same(a, b, name: str) -> None:
    a, b = _dense(a), _dense(b)
    assert a.shape == b.shape, (name, a.shape, b.shape)
    assert np.array_equal(a, b, equal_nan=True), name
    assert np.array_equal(np.signbit(a), np.signbit(b)), name  # (-0.0 too)


# ---------------------------------------------------------------- rand

RANDS = {
    "U": "rand(rows=23, cols=17, min=-1, max=1, seed=1)",  # dense uniform, 7x7 edge blocks
    "N": "rand(rows=20, cols=16, pdf=\"normal\", seed=7)",
    "S": "rand(rows=30, cols=40, sparsity=0.3, seed=2)",  # sparse: each cell drawn (dense-format seed block)
    "G": "rand(rows=50, cols=45, sparsity=0.05, min=2, max=3, seed=3)",  # geometric skips (sparse seed block)
    "E": "rand(rows=1003, cols=3, seed=4)",  # two seed blocks: row block 143 spans both
    "F": "rand(rows=9, cols=1002, sparsity=0.5, pdf=\"normal\", seed=5)",
    "C": "rand(rows=12, cols=11, min=2.5, max=2.5, seed=6)",  # constant fill
    "Z": "rand(rows=12, cols=11, sparsity=0.0, seed=6)",  # all zero
    "P": "rand(rows=10, cols=9, pdf=\"poisson\", lambda=3, seed=8)",  # no block seeds: stays local
}


def test_distributed_rand_is_the_local_rand_bit_for_bit(dask_scheduler):
    """Every block is generated on a worker from its seed by the local per-block generator
    (sdsrand.rand_block): the same doubles as the local kernel, dense and sparse, uniform and normal,
    across the 1000x1000 seed grid; the plan runs each such rand as a DASK instruction."""
    text = "".join(f"{k} = {v}\n" for k, v in RANDS.items())
    names = tuple(RANDS)
    local = run_dml(text, outputs=names, cfg=_cfg(), out=io.StringIO())
    dist = run_dml(text, outputs=names, cfg=_cfg(dask_scheduler), out=io.StringIO())
    for k in names:
        _same(dist[k], local[k], k)
    plan = _plan(text, _cfg(dask_scheduler), names)
    dask_rands = re.findall(r"^-*DASK rand .*\[(\d+),(\d+),", plan, re.M)
    assert len(dask_rands) == len(RANDS) - 1, plan  # all but poisson
    assert re.search(r"^-*CP rand .*\[10,9,", plan, re.M), plan


def test_unseeded_and_runtime_argument_rand(dask_scheduler):
    """seed=-1 draws one seed for the whole matrix (a valid rand of the asked shape and range); a
    pdf known only at run time is distributed and still the local values; sizes only known at run
    time keep the local kernel."""
    text = """
X = rand(rows=15, cols=16, min=3, max=4)
p = "nor" + "mal"
Y = rand(rows=15, cols=16, pdf=p, seed=11)
"""
    local = run_dml(text, outputs=("Y",), cfg=_cfg(), out=io.StringIO())
    dist = run_dml(text, outputs=("X", "Y"), cfg=_cfg(dask_scheduler), out=io.StringIO())
    x = _dense(dist["X"])
    assert x.shape == (15, 16) and (x >= 3).all() and (x < 4).all() and len(np.unique(x)) == x.size
    _same(dist["Y"], local["Y"], "Y")


@pytest.mark.parametrize("args", ["rows=5, cols=6, sparsity=2", "rows=5, cols=6, pdf=\"cauchy\"",
                                  "rows=5, cols=6, seed=\"x\""])
def test_bad_rand_arguments_fail_as_locally(args, dask_scheduler):
    text = f"s = 2\nX = rand({args}) * s\nprint(sum(X))\n"
    errs = errors_both_ways(text, dask_scheduler, ("X",))
    assert errs[0] == errs[1]


# ---------------------------------------------------------------- read


def _mtd(path, rows, cols, fmt, **extra):
    import json

    d = {"data_type": "matrix", "value_type": "double", "rows": rows, "cols": cols, "format": fmt, **extra}
    (path.parent / (path.name + ".mtd")).write_text(json.dumps(d))


def _csv_text(a: np.ndarray, sep: str = ",") -> str:
    return "".join(sep.join(repr(float(x)) if x == x else "NaN" for x in row) + "\n" for row in a)


def _ijv_text(a: np.ndarray, order: np.ndarray) -> str:
    ii, jj = np.nonzero(a)
    return "".join(f"{ii[k] + 1} {jj[k] + 1} {float(a[ii[k], jj[k]])!r}\n" for k in order[order < ii.size])


@pytest.fixture
def files(tmp_path):
    """Files of each readable format, with the read statement of each (sizes declared: a distributed
    read needs them at compile time)."""
    rng = np.random.default_rng(5)
    a = np.round(rng.uniform(-5, 5, (23, 17)), 3)
    a[rng.random(a.shape) < 0.4] = 0.0
    out = {}
    p = tmp_path / "plain.csv"
    p.write_bytes(b"\xef\xbb\xbf" + _csv_text(a).encode())  # (a byte order mark is no part of the first cell)
    out["csv"] = f'read("{p}", format="csv", rows=23, cols=17)'
    p = tmp_path / "head.csv"
    p.write_text(",".join(f"C{j + 1}" for j in range(17)) + "\n" + _csv_text(a, ";"))
    _mtd(p, 23, 17, "csv", header=True, sep=";")
    out["csv_header"] = f'read("{p}")'
    b = a.copy()
    b[3, 4] = np.nan
    b[20, 0] = np.inf
    p = tmp_path / "nan.csv"
    p.write_text(_csv_text(b).replace("inf", "Infinity").replace("19.0,", "19,"))
    out["csv_nan"] = f'read("{p}", format="csv", rows=23, cols=17)'
    cells = [[repr(float(x)) for x in row] for row in a]
    for i, j in ((0, 0), (5, 16), (22, 3)):
        cells[i][j] = "NA"
    for i, j in ((1, 2), (9, 0), (22, 16)):
        cells[i][j] = ""
    p = tmp_path / "na.csv"
    p.write_text("".join(",".join(row) + "\n" for row in cells))
    out["csv_na_fill"] = f'read("{p}", format="csv", rows=23, cols=17, naStrings="NA", fill=TRUE, default=7)'
    p = tmp_path / "zero.csv"
    p.write_text(_csv_text(np.zeros((9, 8))))
    out["csv_zero"] = f'read("{p}", format="csv", rows=9, cols=8)'
    p = tmp_path / "crlf.csv"
    p.write_text(_csv_text(a).replace("\n", "\r\n"))
    out["csv_crlf"] = f'read("{p}", format="csv", rows=23, cols=17)'
    order = rng.permutation(23 * 17)  # any order of cells; a repeated cell keeps its last value
    p = tmp_path / "cells.ijv"
    p.write_text(_ijv_text(a, order) + "3 4 99.5\n1 1 0.25\n3 4 -1.5\n")
    c = a.copy()
    c[2, 3], c[0, 0] = -1.5, 0.25
    out["text"] = (f'read("{p}", format="text", rows=23, cols=17)', c)
    p = tmp_path / "mixed.ijv"  # one line only the line parser reads: every chunk takes it
    p.write_text(_ijv_text(a, np.arange(a.size)).replace("\n5 ", "\n5\t", 1))
    out["text_mixed"] = f'read("{p}", format="text", rows=23, cols=17)'
    p = tmp_path / "empty.ijv"
    p.write_text("0 0 0\n")
    _mtd(p, 10, 12, "text")
    out["text_zero"] = f'read("{p}")'
    s = a[:17, :17] + a[:17, :17].T
    lower = np.tril(s)
    ii, jj = np.nonzero(lower)
    p = tmp_path / "sym.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real symmetric\n% a comment\n\n17 17 " + str(ii.size) + "\n"
                 + "".join(f"{i + 1} {j + 1} {float(lower[i, j])!r}\n" for i, j in zip(ii, jj)))
    out["mm_symmetric"] = f'read("{p}", format="mm", rows=17, cols=17)'
    ii, jj = np.nonzero(a)
    p = tmp_path / "pattern.mtx"
    p.write_text(f"%%MatrixMarket matrix coordinate pattern general\n23 17 {ii.size}\n"
                 + "".join(f"{i + 1} {j + 1}\n" for i, j in zip(ii, jj)))
    out["mm_pattern"] = f'read("{p}", format="mm", rows=23, cols=17)'
    p = tmp_path / "ints.npy"
    np.save(p, np.asfortranarray((a * 1000).astype(np.int32)))
    out["npy_fortran_int"] = f'read("{p}", format="npy", rows=23, cols=17)'
    p = tmp_path / "b.npy"
    np.save(p, b)
    out["npy_nan"] = f'read("{p}", rows=23, cols=17)'
    return out


LOCAL_ONLY = {"csv_crlf"}  # a carriage return: the file is read here and scattered


def test_distributed_read_gives_the_local_matrix(files, dask_scheduler, monkeypatch):
    """Each format read by the workers (no local read: ``read_value`` is not called) into exactly the
    local matrix: edge blocks, a header, NaN/Infinity cells, NA strings and empty cells filled, an
    all-zero matrix, cells in any order with repeats, a symmetric and a pattern MatrixMarket file
    parsed in several chunks (one line only the line parser reads makes every chunk take it), an int
    Fortran-order npy, a byte order mark. A file with carriage returns is read here."""
    import lafuse.runtime.io as lio
    from lafuse.runtime.dask import io as dio

    names = sorted(files)
    text = "".join(f"{k} = {v[0] if isinstance(v, tuple) else v}\n" for k, v in files.items())
    local = run_dml(text, outputs=tuple(names), cfg=_cfg(), out=io.StringIO())
    for k, v in files.items():
        if isinstance(v, tuple):
            _same(local[k], v[1], k)  # (the local reader's last-value rule, checked here once)
    monkeypatch.setattr(dio, "CHUNK_BYTES", 200)  # IJV/mm files of ~5 KB in a few dozen chunks
    read_here: list[str] = []
    real = lio.read_value
    monkeypatch.setattr(lio, "read_value", lambda path, *a, **kw: read_here.append(path) or real(path, *a, **kw))
    dist = run_dml(text, outputs=tuple(names), cfg=_cfg(dask_scheduler), out=io.StringIO())
    for k in names:
        _same(dist[k], local[k], k)
    assert sorted(p.rsplit("/", 1)[1] for p in read_here) == ["crlf.csv"], read_here
    plan = _plan(text, _cfg(dask_scheduler), tuple(names))
    assert len(re.findall(r"^-*DASK pread ", plan, re.M)) == len(names), plan


def test_a_file_the_workers_do_not_see_is_read_here_and_scattered(files, dask_scheduler, monkeypatch):
    from lafuse.runtime.dask import io as dio

    text = f"X = {files['csv_header']}\nY = X * 2\n"
    local = run_dml(text, outputs=("Y",), cfg=_cfg(), out=io.StringIO())
    monkeypatch.setattr(dio, "_visible", lambda be, path: False)
    dist = run_dml(text, outputs=("Y",), cfg=_cfg(dask_scheduler), out=io.StringIO())
    _same(dist["Y"], local["Y"], "Y")


def _bad_files(tmp_path):
    a = np.arange(1.0, 41.0).reshape(8, 5)
    bad = {}
    p = tmp_path / "word.csv"
    p.write_text(_csv_text(a).replace("27.0", "2x7"))
    bad["csv_cell"] = (f'read("{p}", format="csv", rows=8, cols=5)', f"{p}:6: cell 2 is not a number")
    p = tmp_path / "short.csv"
    p.write_text(_csv_text(a).replace(",39.0", ""))
    bad["csv_short"] = (f'read("{p}", format="csv", rows=8, cols=5)', f"{p}:8: expected 5 cells, found 4")
    p = tmp_path / "blank.csv"
    p.write_text(_csv_text(a[:4]) + "\n" + _csv_text(a[4:]))
    bad["csv_blank"] = (f'read("{p}", format="csv", rows=9, cols=5)', f"{p}:5: empty line")
    p = tmp_path / "rows.csv"
    p.write_text(_csv_text(a))
    _mtd(p, 9, 5, "csv")
    bad["csv_mtd_rows"] = (f'read("{p}")', "dimensions differ from meta data")
    p = tmp_path / "cell.ijv"
    p.write_text("1 1 2.0\n2 2 x\n3 3 1.0\n")
    bad["text_cell"] = (f'read("{p}", format="text", rows=8, cols=5)', f"{p}:2: malformed cell")
    p = tmp_path / "outside.ijv"
    p.write_text("1 1 2.0\n9 2 1.0\n")
    bad["text_outside"] = (f'read("{p}", format="text", rows=8, cols=5)', "outside the 8x5 matrix")
    p = tmp_path / "cut.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n8 5 3\n1 1 1.0\n2 2 2.0\n")
    bad["mm_truncated"] = (f'read("{p}", format="mm", rows=8, cols=5)', "declares 3 entries")
    p = tmp_path / "cut.npy"
    np.save(p, a)
    p.write_bytes(p.read_bytes()[:-8])
    bad["npy_truncated"] = (f'read("{p}", format="npy", rows=8, cols=5)', "truncated or damaged")
    p = tmp_path / "crc.csv"
    run_dml(f'write(matrix(1, rows=8, cols=5), "{p}", format="csv")', cfg=_cfg(), out=io.StringIO())
    p.write_text(p.read_text().replace("1.0", "2.0", 1))
    bad["csv_crc"] = (f'read("{p}")', "does not match its metadata file")
    return bad


def test_bad_input_fails_with_the_local_error(tmp_path, dask_scheduler):
    """A bad file stops the read with the local reader's error (data file:line where it gives one,
    the DML statement's position), whichever worker met it."""
    for name, (stmt, what) in _bad_files(tmp_path).items():
        text = f"s = 2\nX = {stmt}\nY = X * s\nprint(sum(Y))\n"
        errs = errors_both_ways(text, dask_scheduler, ("Y",))
        assert what in errs[0], (name, errs[0])
        assert errs[1] == errs[0], name
        assert errs[0].startswith("<run_dml>:2:"), errs[0]


# ---------------------------------------------------------------- write


WRITES = {
    "x.csv": 'format="csv"',
    "h.csv": 'format="csv", header=TRUE, sep=";"',
    "s.csv": 'format="csv", sparse=TRUE',
    "x.ijv": 'format="text"',
    "x.mtx": 'format="mm"',
    "x.npy": 'format="binary"',
    "z.ijv": 'format="text"',
}


def test_write_from_a_distributed_matrix_leaves_the_local_files(tmp_path, dask_scheduler, monkeypatch):
    """The data files and .mtd of a distributed matrix's write are the local write's, byte for byte
    (the .mtd's creation time fixed), in every format; the written files read back distributed."""
    import lafuse.runtime.io.writers as writers

    monkeypatch.setattr(writers, "created", lambda: "2026-01-01 00:00:00 UTC")
    body = """
X = rand(rows=23, cols=17, min=-2, max=2, seed=3)
S = rand(rows=23, cols=17, sparsity=0.2, seed=4) * 3
Y = X * (X > 0.5) + S
Z = S * 0
"""
    files = {}
    for where, cfg in (("local", _cfg()), ("dask", _cfg(dask_scheduler))):
        d = tmp_path / where
        d.mkdir()
        text = body + "".join(f'write({"Z" if n.startswith("z") else "Y"}, "{d / n}", {a})\n'
                              for n, a in WRITES.items())
        plan = _plan(text, cfg, ())
        if where == "dask":
            assert len(re.findall(r"^-*DASK rand ", plan, re.M)) == 2, plan
        run_dml(text, cfg=cfg, out=io.StringIO())
        files[where] = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    assert files["local"].keys() == files["dask"].keys() and len(files["local"]) == 13, files["local"].keys()
    for name, data in files["local"].items():
        assert files["dask"][name] == data, name
    back = run_dml(f'A = read("{tmp_path / "dask" / "x.ijv"}")\nB = read("{tmp_path / "dask" / "h.csv"}")\n',
                   outputs=("A", "B"), cfg=_cfg(dask_scheduler), out=io.StringIO())
    _same(back["A"], back["B"], "read back")


def test_the_interpreter_writes_a_distributed_value_it_is_handed(tmp_path, dask_scheduler, monkeypatch):
    """A write that receives a distributed value itself (no collect before it) writes the local
    bytes: the interpreter collects it through the Dask backend."""
    import lafuse.runtime.io.writers as writers
    from lafuse.hops.hop import Hop
    from lafuse.plan.instructions import DASK
    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.io import write_value

    monkeypatch.setattr(writers, "created", lambda: "2026-01-01 00:00:00 UTC")
    m = np.arange(60.0).reshape(12, 5) - 20
    cfg = _cfg(dask_scheduler)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        blocked = comp.backends[DASK].scatter(m)
        interp = Interpreter(comp.compile_text("x = 1", "<test>"), comp, out=io.StringIO())
        hop = Hop("write", "data", params={"slots": ["target", "file", "format"]})
        interp.special("write", hop, [blocked, str(tmp_path / "d.csv"), "csv"], {})
    write_value(m, str(tmp_path / "l.csv"), {"format": "csv"})
    assert (tmp_path / "d.csv").read_bytes() == (tmp_path / "l.csv").read_bytes()
    assert (tmp_path / "d.csv.mtd").read_bytes() == (tmp_path / "l.csv.mtd").read_bytes()


def test_auto_sends_rand_and_read_over_the_budget_to_dask(tmp_path):
    """Under ``auto`` a rand or read that does not fit the memory budget is a DASK instruction when
    its dims are known (a read's from its metadata); poisson rand, seq and a read of unknown dims stay
    local."""
    p = tmp_path / "m.csv"
    run_dml(f'write(matrix(1, rows=30, cols=20), "{p}", format="csv")', cfg=_cfg(), out=io.StringIO())
    q = tmp_path / "nomtd.csv"
    q.write_text("1,2\n3,4\n")
    text = f"""
A = rand(rows=300, cols=200, seed=1)
B = rand(rows=300, cols=200, pdf="poisson", seed=1)
C = read("{p}")
D = read("{q}", format="csv")
E = seq(1, 1000)
"""
    cfg = cfgmod.Config(codegen=False, background=False, memory_budget=1e-12)
    plan = _plan(text, cfg, ("A", "B", "C", "D", "E"))
    assert re.search(r"^-*DASK rand .*\[300,200,", plan, re.M), plan
    assert re.search(r"^-*CP rand .*\[300,200,", plan, re.M), plan
    assert re.search(r"^-*DASK pread .*\[30,20,", plan, re.M), plan
    assert re.search(r"^-*CP pread .*\[-1,-1,", plan, re.M), plan
    assert re.search(r"^-*CP seq ", plan, re.M), plan
