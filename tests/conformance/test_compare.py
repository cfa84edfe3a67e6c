"""Unit tests of the comparison logic and of SystemDS stdout parsing (no JVM needed)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from . import compare, corpus, sds

# ----------------------------------------------------------------------------------------------- tokens


def test_tokenize_splits_numbers_and_text():
    toks = compare.tokenize("x=1.5 y=-3 z=1.0E-7 w=Infinity v=NaN")
    nums = [t.text for t in toks if t.is_number]
    text = [t.text for t in toks if not t.is_number]
    assert nums == ["1.5", "-3", "1.0E-7", "Infinity", "NaN"]
    assert text == ["x=", " y=", " z=", " w=", " v="]
    assert [t.kind for t in toks if t.is_number] == ["float", "int", "float", "special", "special"]


def test_tokenize_negative_infinity_and_values():
    toks = compare.tokenize("-Infinity 1.0E-7")
    assert toks[0].text == "-Infinity" and toks[0].value == -math.inf
    assert toks[2].value == pytest.approx(1e-7)


@pytest.mark.parametrize("a,b", [
    ("21.0", "21.000000000000004"),
    ("0.30000000000000004", "0.3"),
    ("1.0E-7", "1.0000000000000002E-7"),
    ("NaN", "NaN"),
    ("Infinity", "Infinity"),
    ("-Infinity", "-Infinity"),
    ("0.0", "1.0E-13"),  # absolute floor near zero
    ("-0.000", "0.000"),
    ("1.000 2.000", "1.000 2.000"),
    ("sum = 3", "sum = 3"),
])
def test_lines_that_match(a, b):
    assert compare.compare_line(a, b) is None
    assert compare.compare_line(b, a) is None


@pytest.mark.parametrize("a,b,reason", [
    ("3", "3.0", "spelling"),  # INT vs DOUBLE printing (dml-semantics §4)
    ("1.0E-7", "1e-07", "exponent"),  # Java vs Python spelling
    ("21.0", "21.00001", "beyond"),
    ("NaN", "0.0", "spelling"),
    ("Infinity", "-Infinity", "Infinity"),
    ("Infinity", "inf", "text"),
    ("TRUE", "True", "text"),
    ("a b", "a  b", "text"),
    ("x=1", "x=2", "integer"),
    ("1.000 2.000", "1.000", "continues"),
    ("1.0", "1.0 ", "continues"),
    ("0.0", "1.0E-11", "beyond"),
])
def test_lines_that_differ(a, b, reason):
    r = compare.compare_line(a, b)
    assert r is not None and reason in r, r


def test_close_tolerances():
    assert compare.close(1.0, 1.0 + 1e-10)
    assert not compare.close(1.0, 1.0 + 1e-8)
    assert compare.close(1e-13, -1e-13)
    assert not compare.close(1e-11, 0.0)
    assert compare.close(math.nan, math.nan)
    assert not compare.close(math.nan, 1.0)
    assert compare.close(math.inf, math.inf)
    assert not compare.close(math.inf, 1e308)
    assert compare.close(1e300, 1e300 * (1 + 1e-12))


# ------------------------------------------------------------------------------------------------ lines


def test_compare_lines_equal_outputs():
    assert compare.compare_lines(["a 1", "2.0", ""], ["a 1", "2.0000000000000004", ""]) is None


def test_compare_lines_reports_first_difference():
    exp = ["first", "value 1.5", "third", "fourth"]
    act = ["first", "value 1.6", "third", "fourth"]
    report = compare.compare_lines(exp, act)
    assert report is not None
    assert "line 2" in report
    assert "'value 1.5'" in report and "'value 1.6'" in report
    assert "-value 1.5" in report and "+value 1.6" in report  # the unified diff


def test_compare_lines_missing_and_extra_lines():
    report = compare.compare_lines(["a", "b"], ["a"])
    assert report is not None and "line 2" in report and "<end of output>" in report
    report = compare.compare_lines(["a"], ["a", "extra"])
    assert report is not None and "lafuse has extra lines" in report


def test_compare_lines_blank_line_matters():
    assert compare.compare_lines(["1.000 2.000", ""], ["1.000 2.000"]) is not None


# --------------------------------------------------------------------------------------------- matrices


def _write(path: Path, text: str, mtd: str | None = None) -> Path:
    path.write_text(text)
    if mtd is not None:
        path.with_name(path.name + ".mtd").write_text(mtd)
    return path


def test_read_csv_with_java_spellings(tmp_path: Path):
    p = _write(tmp_path / "a.csv", "1.0,NaN,Infinity\n-Infinity,1.0E-7,0\n")
    m = compare.read_matrix(p, "csv")
    assert m.values.shape == (2, 3)
    assert np.isnan(m.values[0, 1]) and m.values[0, 2] == np.inf and m.values[1, 0] == -np.inf
    assert m.values[1, 1] == pytest.approx(1e-7) and m.values[1, 2] == 0


def test_read_text_ijv_uses_mtd_dims(tmp_path: Path):
    p = _write(tmp_path / "b.txt", "1 4 4.0\n2 2 8.0\n", '{"data_type": "matrix", "rows": 5, "cols": 6}')
    m = compare.read_matrix(p, "text")
    assert m.shape_known and m.values.shape == (5, 6)
    assert m.values[0, 3] == 4 and m.values[1, 1] == 8 and m.values.sum() == 12


def test_read_text_all_zero_marker(tmp_path: Path):
    p = _write(tmp_path / "z.txt", "0 0 0\n", '{"rows": 3, "cols": 2}')
    m = compare.read_matrix(p, "text")
    assert m.values.shape == (3, 2) and not m.values.any()


def test_read_matrix_market(tmp_path: Path):
    p = _write(tmp_path / "c.mtx", "%%MatrixMarket matrix coordinate real general\n6 6 2\n2 2 464.0\n6 2 576.0\n")
    m = compare.read_matrix(p, "mm")
    assert m.values.shape == (6, 6) and m.values[1, 1] == 464 and m.values[5, 1] == 576
    z = _write(tmp_path / "z.mtx", "%%MatrixMarket matrix coordinate real general\n3 2 0\n0 0 0\n")
    assert compare.read_matrix(z, "mm").values.shape == (3, 2)


def test_read_csv_directory_of_parts(tmp_path: Path):
    d = tmp_path / "parts.csv"
    d.mkdir()
    (d / "0-m-00000").write_text("1,2\n")
    (d / "0-m-00001").write_text("3,4\n")
    (d / "_SUCCESS").write_text("")
    m = compare.read_matrix(d, "csv")
    assert m.values.tolist() == [[1, 2], [3, 4]]


def test_read_missing_output_raises(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        compare.read_matrix(tmp_path / "nope.csv", "csv")


def test_compare_matrices_values_and_shape():
    a = np.array([[1.0, np.nan], [np.inf, 1e-13]])
    assert compare.compare_matrices(a, a + np.array([[1e-12, 0], [0, 0]])) is None
    r = compare.compare_matrices(a, np.array([[1.0, np.nan], [np.inf, 1.0]]))
    assert r is not None and "[2,2]" in r and "1 of 4 cells" in r
    r = compare.compare_matrices(np.zeros((2, 3)), np.zeros((3, 2)))
    assert r is not None and "shape" in r and "2x3" in r and "3x2" in r
    assert compare.compare_matrices(np.array([[np.inf]]), np.array([[-np.inf]])) is not None


def test_compare_text_matrices_with_inferred_dims(tmp_path: Path):
    e = _write(tmp_path / "e.txt", "1 1 2.0\n", '{"rows": 3, "cols": 3}')
    a = _write(tmp_path / "a.txt", "1 1 2.0\n")  # no .mtd: dims inferred, padded with zeros
    assert compare.compare_matrix_files(e, a, "text") is None
    b = _write(tmp_path / "b.txt", "1 1 2.0\n3 3 1.0\n")
    r = compare.compare_matrix_files(e, b, "text")
    assert r is not None and "[3,3]" in r


def test_compare_matrix_files_reports_unreadable_output(tmp_path: Path):
    e = _write(tmp_path / "e.csv", "1,2\n")
    r = compare.compare_matrix_files(e, tmp_path / "missing.csv", "csv")
    assert r is not None and "cannot read the lafuse output" in r


# ---------------------------------------------------------------------------------- SystemDS stdout parsing


def test_parse_stdout_strips_statistics_trailer():
    raw = "7\n1.000 2.000\n\nSystemDS Statistics:\nTotal execution time:\t\t0.090 sec.\n\n"
    lines, err = sds.parse_stdout(raw)
    assert lines == ["7", "1.000 2.000", ""]
    assert err is None


def test_parse_stdout_stop_after_statistics():
    raw = ("before\nSystemDS Statistics:\nTotal execution time:\t\t0.003 sec.\n\n\x1b[31m\n"
           "An Error Occurred : \n       DMLScriptException -- bad value: 3\n\x1b[0m\n")
    lines, err = sds.parse_stdout(raw)
    assert lines == ["before"]
    assert err == "DMLScriptException -- bad value: 3"
    res = sds.SdsResult(lines, 0, "", err)
    assert not res.ok and res.error_messages() == ["bad value: 3"]


def test_parse_stdout_compile_error_without_statistics():
    raw = "\x1b[31m\nAn Error Occurred : \n        LanguageException -- ERROR: x.dml [line 4:6] -> f(1)\n\x1b[0m\n"
    lines, err = sds.parse_stdout(raw)
    assert lines == []
    assert err is not None and err.startswith("LanguageException -- ")


def test_parse_stdout_keeps_script_blank_lines_and_drops_log_noise():
    raw = "a\n\n26/11/22 03:04:07 WARN util.NativeCodeLoader: Unable\nb\nSystemDS Statistics:\n"
    lines, _ = sds.parse_stdout(raw)
    assert lines == ["a", "", "b"]


# ---------------------------------------------------------------------------------------- cache and corpus


def test_cache_key_depends_on_script_args_and_inputs(tmp_path: Path):
    s = tmp_path / "s.dml"
    s.write_text("print(1)\n")
    inp = tmp_path / "in.csv"
    inp.write_text("1,2\n")
    k1 = sds.cache_key(s, {"X": "<input:in.csv>"}, [inp])
    assert k1 == sds.cache_key(s, {"X": "<input:in.csv>"}, [inp])
    assert k1 != sds.cache_key(s, {"X": "<input:other.csv>"}, [inp])
    inp.write_text("1,3\n")
    k2 = sds.cache_key(s, {"X": "<input:in.csv>"}, [inp])
    assert k2 != k1
    s.write_text("print(2)\n")
    assert sds.cache_key(s, {"X": "<input:in.csv>"}, [inp]) != k2


def test_ci_mode_from_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CI", "true")
    assert sds.ci_mode()
    monkeypatch.setenv("CI", "false")
    assert not sds.ci_mode()
    monkeypatch.delenv("CI")
    assert not sds.ci_mode()


def test_directives_and_arguments(tmp_path: Path):
    p = tmp_path / "900_x.dml"
    p.write_text("#@ nvarg k=3\n#@ input X=X.csv\n#@ output M=mm\n#@ stop\nprint($k)\n")
    sc = corpus.load_script(p)
    assert sc.nvargs == {"k": "3"} and sc.inputs == {"X": "X.csv"} and sc.outputs == {"M": "mm"}
    assert sc.expect_stop
    args = sc.arguments(Path("/in"), Path("/out"))
    assert args == {"k": "3", "X": "/in/X.csv", "M": "/out/M.mtx"}
    assert sc.argument_spec() == {"k": "3", "X": "<input:X.csv>", "M": "<output:M.mtx>"}
    bad = tmp_path / "901_y.dml"
    bad.write_text("#@ input X=unknown.csv\n")
    with pytest.raises(ValueError, match="unknown input"):
        corpus.load_script(bad)


def test_generated_inputs_are_deterministic(tmp_path: Path):
    a = corpus.generate_inputs(tmp_path / "a")
    b = corpus.generate_inputs(tmp_path / "b")
    for name in corpus.INPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes()
    x = compare.read_matrix(a / "X.csv", "csv")
    assert x.values.shape == (12, 4)


def test_lafuse_command_shape():
    cmd = corpus.lafuse_command(Path("/s/001_x.dml"), {"k": "1", "out": "/o/M.csv"})
    assert cmd[1:5] == ["-m", "lafuse", "run", "/s/001_x.dml"]
    assert cmd[5] == "--builtins" and Path(cmd[6]).is_dir()  # SystemDS's scripts, extracted from its jar
    assert cmd[7] == "--no-lafuse-builtins"  # SystemDS's scripts call each other, not lafuse's library
    assert cmd[8:] == ["--nvargs", "k=1", "out=/o/M.csv"]
    assert "--nvargs" not in corpus.lafuse_command(Path("/s/a.dml"), {})
