"""Error reporting end to end: every script in tests/malformed/ has exactly one mistake, and
``lafuse run`` must report it as ``file:line:col: kind: message``, then the source line and a
caret under the column, exit with status 1, and print no Python traceback (unless --debug).

Each script's first line states what is expected::

    # expect: LINE:COL: KIND: MESSAGE-FRAGMENT

KIND is ``syntax error``, ``validation error``, ``runtime error`` or ``stop``. Any following
``# stdout: TEXT`` lines are the lines the script prints before the error, in order; without them
the script must print nothing (every error before run time stops the program before it starts).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from lafuse.errors import DMLError, DMLSyntaxError
from lafuse.lang.parser import parse

MALFORMED = Path(__file__).parent / "malformed"
SCRIPTS = sorted(MALFORMED.glob("[0-9][0-9]_*.dml"))
KINDS = ("syntax error", "validation error", "runtime error", "stop")
_EXPECT = re.compile(r"# expect: (\d+):(\d+): (" + "|".join(KINDS) + r"): (.+)")


@dataclass(frozen=True)
class Expect:
    line: int
    col: int
    kind: str
    fragment: str
    stdout: tuple[str, ...]


def expectation(path: Path) -> Expect:
    lines = path.read_text(encoding="utf-8").splitlines()
    m = _EXPECT.fullmatch(lines[0].rstrip())
    assert m, f"{path.name}: first line must be '# expect: LINE:COL: KIND: MESSAGE', got {lines[0]!r}"
    out = []
    for ln in lines[1:]:
        if not ln.startswith("# stdout: "):
            break
        out.append(ln[len("# stdout: "):])
    return Expect(int(m[1]), int(m[2]), m[3], m[4], tuple(out))


def run(name: str, *extra: str) -> subprocess.CompletedProcess:
    """``python -m lafuse run NAME`` inside tests/malformed (so the reported path is NAME)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run([sys.executable, "-m", "lafuse", "run", name, *extra], cwd=MALFORMED, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results() -> dict[str, subprocess.CompletedProcess]:
    """All scripts, run once and concurrently (each run is a fresh interpreter)."""
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return dict(zip((p.name for p in SCRIPTS), pool.map(lambda p: run(p.name), SCRIPTS)))


def test_corpus_covers_every_kind_of_error():
    kinds = [expectation(p).kind for p in SCRIPTS]
    assert len(SCRIPTS) >= 40
    assert kinds.count("syntax error") >= 15
    assert kinds.count("validation error") >= 15
    assert kinds.count("runtime error") + kinds.count("stop") >= 4
    assert "stop" in kinds


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_malformed_script_reports_one_located_error(path: Path, results):
    exp = expectation(path)
    r = results[path.name]
    report = f"\n--- stdout:\n{r.stdout}--- stderr:\n{r.stderr}"
    assert r.returncode == 1, report
    assert "Traceback" not in r.stderr, report
    assert r.stdout.splitlines() == list(exp.stdout), report
    err = r.stderr.splitlines()
    assert err, report
    where = f"{path.name}:{exp.line}:{exp.col}: "
    if exp.kind == "stop":
        # as in SystemDS: the script's own message, on stderr (here also with its location)
        assert re.fullmatch(re.escape(where) + r"(stop: )?" + r".*" + re.escape(exp.fragment) + r".*", err[0]), report
        return
    head = where + exp.kind + ": "
    assert err[0].startswith(head), f"expected the first line to start with {head!r}" + report
    message = err[0][len(head):]
    assert exp.fragment in message, f"expected {exp.fragment!r} in the message" + report
    assert "\n" not in message and message.strip() == message and message, report
    # the source line, then a caret (and tildes for the token's width) under the column
    src = path.read_text(encoding="utf-8").splitlines()[exp.line - 1].expandtabs(1)
    assert len(err) == 3, report
    assert err[1] == "    " + src, report
    assert re.fullmatch(" " * (4 + exp.col - 1) + r"\^~*", err[2]), report
    assert len(err[2]) - 4 <= len(src) + 1, report


def test_debug_shows_a_traceback():
    r = run("30_undefined_variable.dml", "--debug")
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "DMLValidationError" in r.stderr
    assert "30_undefined_variable.dml:3:9: validation error: undefined variable 'y'" in r.stderr


def test_debug_shows_a_traceback_for_runtime_errors():
    r = run("70_runtime_index_out_of_bounds.dml", "--debug")
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "70_runtime_index_out_of_bounds.dml:7:17: runtime error:" in r.stderr


def test_without_debug_there_is_no_traceback_even_for_runtime_errors(results):
    for name, r in results.items():
        assert "Traceback" not in r.stderr, name
        assert 'File "' not in r.stderr, name


# ---------------------------------------------------------------- syntax errors, in process

_INTERNAL = re.compile(r"__ANON|\$END|\b(RPAR|LPAR|RSQB|LSQB|RBRACE|LBRACE|NAME|CMD_NAMED|CMD_POS|ADDOP|MULOP|"
                       r"CMPOP|OROP|ANDOP|MMOP|MODOP|POWOP|_SEMI|COMMA|COLON|EQUAL|INT|FLOAT|STRING)\b")


@pytest.mark.parametrize("text,line,col,message", [
    ("x = (1 + 2\n", 1, 11, "unexpected end of file, expected ')' to close '(' at 1:5"),
    ("x = f(1,)\n", 1, 9, "unexpected ')', expected an expression"),
    ("x = y[1,2\n", 1, 10, "expected ']' to close '[' at 1:6"),
    ("if (x) {\n  y = 1\n", 2, 8, "expected '}' to close '{' at 1:8"),
    ("x = 1\n}\n", 2, 1, "unexpected '}' without a matching '{'"),
    ("print(\"a\" \"b\")\n", 1, 11, "unexpected string \"b\", expected ')', ',' or an operator"),
    ("for (i in 1:3 {}\n", 1, 15, "unexpected '{', expected ')', ',' or an operator"),
    ("x = a b\n", 1, 8, "unexpected end of file, expected '=', '<-', '+=', '(' or '['"),
    ("in = 3\n", 1, 1, "'in' is a reserved word"),
    ("TRUE = 3\n", 1, 1, "'TRUE' is a reserved word"),
    ("x = 1 /* open\n", 1, 7, "unterminated block comment"),
    ("s = \"a /* b\" + 'c'\ny = ]\n", 2, 5, "unexpected ']' without a matching '['"),
    ("# it's fine\nx = (1 + \"(\"\n", 2, 13, "expected ')' to close '(' at 2:5"),
])
def test_syntax_error_messages(text, line, col, message):
    with pytest.raises(DMLSyntaxError) as ei:
        parse(text, "t.dml")
    e = ei.value
    assert (e.span.line, e.span.col) == (line, col), e.render({"t.dml": text})
    assert message in e.message, e.message


def _mutants(text: str):
    """Broken variants of a valid script: truncated, one character deleted, one bracket doubled."""
    step = max(1, len(text) // 40)
    for i in range(0, len(text), step):
        yield text[:i]
        yield text[:i] + text[i + 1:]
        if text[i] in "()[]{}":
            yield text[:i] + text[i] + text[i:]


def test_syntax_errors_never_crash_or_leak_parser_internals():
    corpus = sorted((Path(__file__).parent / "conformance" / "scripts").glob("*.dml"))[:8]
    assert corpus
    n = 0
    for path in corpus:
        for text in _mutants(path.read_text(encoding="utf-8")):
            try:
                parse(text, "m.dml")
            except DMLError as e:
                n += 1
                assert not _INTERNAL.search(e.message), (e.message, text)
                lines = text.splitlines() or [""]
                assert e.span is not None and 1 <= e.span.line <= max(1, len(lines)), (e.message, text)
                assert 1 <= e.span.col <= len(lines[e.span.line - 1]) + 1, (e.message, text)
                rendered = e.render({"m.dml": text})
                assert rendered.startswith(f"m.dml:{e.span.line}:{e.span.col}: ")
    assert n > 50


# ---------------------------------------------------------------- located errors, in process

def run_in_process(capsys, tmp_path: Path, text: str, *extra: str) -> tuple[int, str, list[str]]:
    """``lafuse run`` on a script written to tmp_path, in this process (no interpreter start-up)."""
    from lafuse import cli

    path = tmp_path / "s.dml"
    path.write_text(text, encoding="utf-8")
    rc = cli.main(["run", str(path), "--no-codegen", *extra])
    out, err = capsys.readouterr()
    return rc, out, [ln.replace(str(path), "s.dml") for ln in err.splitlines()]


@pytest.mark.parametrize("text,where,message,caret", [
    # an index that is out of bounds only at run time, inside a while predicate
    ("X = matrix(1, rows=3, cols=2)\ni = 1\nwhile (as.scalar(X[i, 1]) > 0) { i = i + 1 }\n",
     "3:18", "runtime error: Invalid values for matrix indexing: [4:4,1:1] must be within matrix dimensions [3,2]",
     "^~~~~~~"),
    ("L = list(\"abc\", 3)\nx = as.scalar(L[1])\nif (x) { print(1) }\n",
     "3:5", "runtime error: if predicate must be a boolean or number, got the string 'abc'", "^"),
    ("L = list(matrix(1, rows=2, cols=2), 3)\nx = L[1]\nwhile (x) { print(1) }\n",
     "3:8", "runtime error: while predicate must be a boolean or number, got a list", "^"),
    ("L = list(\"abc\", 3)\nx = as.scalar(L[1])\nfor (i in 1:x) { print(i) }\n",
     "3:13", "runtime error: for loop end must be a number, got the string 'abc'", "^"),
    ("L = list(3, \"7x\")\ny = as.scalar(L[2])\nfor (i in y:3) { print(i) }\n",
     "3:11", "runtime error: for loop start must be a number, got the string '7x'", "^"),
    ("x = 0 / 0\nfor (i in seq(1, 5, x)) { print(i) }\n",
     "2:21", "runtime error: for loop increment must be a finite number, got NaN", "^"),
    # a constant index out of bounds: the caret under the index where it is used, not assigned
    ("X = matrix(1, rows=3, cols=2)\ni = 4\ny = X[i, 1]\nprint(toString(y))\n",
     "3:7", "validation error: row index 4 is out of bounds for 'X' with 3 rows", "^"),
    ("X = matrix(1, rows=3, cols=2)\nj = 2\ny = X[j:5, 1]\nprint(toString(y))\n",
     "3:9", "validation error: row index 5 is out of bounds for 'X' with 3 rows", "^"),
], ids=["while-index", "if-string", "while-list", "for-string", "for-start", "for-nan", "index-var",
        "index-range"])
def test_runtime_errors_in_predicates_and_bounds_are_located(capsys, tmp_path, text, where, message, caret):
    rc, out, err = run_in_process(capsys, tmp_path, text)
    assert rc == 1, err
    assert err[0] == f"s.dml:{where}: {message}", err
    line, col = map(int, where.split(":"))
    assert err[1] == "    " + text.splitlines()[line - 1]
    assert err[2] == " " * (3 + col) + caret
    assert "Traceback" not in "\n".join(err)


F_SIG = ("f = function(Matrix[Double] A, Double scale = 1.0, Double shift = 0.0) return (Double s) {\n"
         "  s = sum(A) * scale\n  if (shift != 0) { s = s + shift }\n}\nA = matrix(1, rows=2, cols=2)\n")


@pytest.mark.parametrize("call,col,message", [
    ("f(A, 0.5, scale=2)", 17, "parameter 'scale' of 'f' is given twice: by position (argument 2) and by name"),
    ("f(A, shift=2, 0.5)", 21, "parameter 'shift' of 'f' is given twice: by name and by position (argument 3)"),
    ("f(A, scale=1, scale=2)", 21, "parameter 'scale' of 'f' is named twice"),
    ("f(A, foo=2)", 12, "function 'f' has no parameter 'foo'"),
    ("f(A, 1, 2, 3)", 18, "function 'f' takes 3 arguments but 4 were given"),
    ("f(shift=1, scale=2)", 7, "call of 'f' is missing required argument(s): A"),
])
def test_mixed_call_errors(capsys, tmp_path, call, col, message):
    rc, out, err = run_in_process(capsys, tmp_path, F_SIG + f"print({call})\n")
    assert (rc, out) == (1, "")
    assert err[0] == f"s.dml:6:{col}: validation error: {message}"


def test_mixed_calls_bind_by_position_and_name(capsys, tmp_path):
    """Also for a function with control flow, which SystemDS 3.4 does not inline and so rejects
    mixed calls to; defaults fill what is not given (lafuse applies user-function defaults)."""
    calls = ["f(A, scale=0.5)", "f(A, shift=1, scale=0.5)", "f(A, 0.5, shift=2)", "f(A=A, 0.5, 2)", "f(A)"]
    rc, out, err = run_in_process(capsys, tmp_path, F_SIG + "".join(f"print({c})\n" for c in calls))
    assert (rc, err) == (0, [])
    assert out.split() == ["2.0", "3.0", "4.0", "4.0", "4.0"]


# ---------------------------------------------------------------- script files that cannot be read

def test_script_files_that_cannot_be_read_are_named(capsys, tmp_path, monkeypatch):
    from lafuse import cli
    from lafuse.lang import parser

    latin = tmp_path / "latin1.dml"
    latin.write_bytes(b'x = 1\nprint("caf\xe9")\n')
    folder = tmp_path / "folder.dml"
    folder.mkdir()
    locked = tmp_path / "locked.dml"
    locked.write_text("print(1)\n", encoding="utf-8")
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads anything: have open() fail as it does for everyone else
        real = open

        def deny(path, *a, **k):
            if str(path) == str(locked):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *a, **k)

        monkeypatch.setattr(parser, "open", deny, raising=False)
    expected = {
        latin: "it is not UTF-8 text (byte 0xe9 at line 2, byte 11 of the line)",
        folder: "Is a directory",
        locked: "Permission denied",
        tmp_path / "missing.dml": "No such file or directory",
    }
    for path, why in expected.items():
        assert cli.main(["run", str(path)]) == 1
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"lafuse: cannot read script '{path}': {why}\n")


def test_a_sourced_file_that_is_not_utf8_is_an_error_at_the_source_statement(capsys, tmp_path):
    (tmp_path / "lib.dml").write_bytes(b"# \xff\xfe\nf = function() return (Double x) { x = 1 }\n")
    rc, out, err = run_in_process(capsys, tmp_path, f'source("{tmp_path / "lib.dml"}") as L\nprint(L::f())\n')
    assert (rc, out) == (1, "")
    assert err[0] == (f"s.dml:1:1: validation error: cannot read sourced file '{tmp_path / 'lib.dml'}': "
                      "it is not UTF-8 text (byte 0xff at line 1, byte 3 of the line)")


def test_crlf_scripts_read_as_before(capsys, tmp_path):
    rc, out, err = run_in_process(capsys, tmp_path, "x = 1\r\ny = x + 1\r\nprint(y)\r\n")
    assert (rc, out, err) == (0, "2\n", [])


def test_command_line_mistakes_exit_1(capsys, tmp_path):
    from lafuse import cli

    bad = tmp_path / "bad.json"
    bad.write_text('{"rewrites": 1,', encoding="utf-8")
    assert cli.main(["run", "-s", "print(1)", "--config", str(bad)]) == 1
    assert capsys.readouterr().err.startswith(f"lafuse: bad config: {bad}:1:16: not valid JSON: Expecting property name")
    assert cli.main(["run"]) == 1
    assert capsys.readouterr().err == "lafuse: give a script path or -s 'script text'\n"
    with pytest.raises(SystemExit) as ei:
        cli.main(["run", "-s", "print(1)", "--bogus"])
    assert ei.value.code == 1
    assert capsys.readouterr().err.endswith("lafuse: error: unrecognized arguments: --bogus\n")


@pytest.mark.parametrize("extra", [(), ("--stats",), ("--codegen",)])
def test_a_dimension_beyond_floats_is_a_located_error_not_an_internal_one(capsys, tmp_path: Path, extra):
    """``matrix(0, 1e308, 5)``: its size and cost estimates once overflowed converting cell counts to
    floats (found by tests/lang/test_fuzz.py). A dimension saturates at a Java long's maximum, as
    SystemDS casts it; the run stops at the memory budget, at the call."""
    text = "X = matrix(0, 1e308, 5)\nY = X * 2 + 1\nprint(nrow(X))\nprint(sum(Y))\n"
    rc, out, err = run_in_process(capsys, tmp_path, text, *extra)
    assert rc == 1 and out.splitlines()[0] == str(2**63 - 1), (out, err)
    assert any(ln.startswith("s.dml:1:5: runtime error: 'matrix' with a 9223372036854775807x5 result needs")
               and "beyond the memory budget" in ln for ln in err), err
