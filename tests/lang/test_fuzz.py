"""Fuzzing the front end: random token streams and mutated valid scripts run through
``lafuse.cli.main(["run", "-s", text, "--no-codegen"])`` in this process. Whatever the text, the run
must end with exit 0 (it ran) or 1 (a reported error of the script), never with a traceback, an
internal error (exit 2) or a hang.

A mutated script may loop forever (a deleted ``i = i + 1``): each run has a time budget, after which
it is interrupted like a Ctrl-C (exit 130). Such runs are counted, not silently dropped: at most a
few per cent of the examples may time out.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lafuse import cli
from lafuse.runtime import deepstack

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "conformance" / "scripts").glob("*.dml")) + sorted((ROOT / "examples").glob("*.dml"))
TEXTS = [p.read_text(encoding="utf-8") for p in CORPUS]
BUDGET_S = 3.0

KEYWORDS = ["if", "else", "while", "for", "parfor", "in", "function", "return", "source", "as", "TRUE", "FALSE",
            "setwd", "ifdef"]
OPERATORS = ["+", "-", "*", "/", "^", "%%", "%/%", "%*%", "==", "!=", "<", "<=", ">", ">=", "!", "&", "|", "&&",
             "||", "=", "<-", "+=", ":", ",", ";", "\n", "$a", "$1"]
BRACKETS = ["(", ")", "[", "]", "{", "}"]
NAMES = ["x", "y", "X", "f", "i", "M", "L", "print", "sum", "matrix", "rand", "seq", "nrow", "t", "as.scalar",
         "list", "toString", "cbind", "rowSums", "stop", "Matrix", "Double", "Integer", "String", "Boolean", "NaN",
         "Inf", "rows", "cols", "target"]
NUMBERS = ["0", "1", "2", "3", "-1", "0.5", "1e3", "1e-300", "1e308", "99999999999999999999", ".5", "7."]
STRINGS = ['"a"', "'b'", '"%d"', '""', '"\\n"', '"x\\"y"']
TOKENS = KEYWORDS + OPERATORS + BRACKETS + NAMES + NUMBERS + STRINGS

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z][A-Za-z0-9_.]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?'
                    r"|%\*%|%/%|%%|<-|<=|>=|==|!=|&&|\|\||\+=|\s+|.", re.S)

outcomes: dict[str, int] = {"ran": 0, "error": 0, "timeout": 0}


@contextmanager
def time_budget(seconds: float) -> Iterator[list[int]]:
    """Interrupt the run's deep threads (as Ctrl-C does) after ``seconds``."""
    fired: list[int] = []

    def on_alarm(signum: int, frame: object) -> None:
        fired.append(1)
        deepstack.interrupt_all()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_script(text: str, capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    with time_budget(BUDGET_S) as fired:
        rc = cli.main(["run", "-s", text, "--no-codegen"])
    out, err = capfd.readouterr()
    report = f"\n--- script:\n{text}\n--- exit {rc}, stderr:\n{err}"
    assert "Traceback" not in err, report
    assert "internal error" not in err, report
    if fired and rc == 130:
        outcomes["timeout"] += 1
        return
    assert rc in (0, 1), report
    outcomes["ran" if rc == 0 else "error"] += 1
    if rc == 1:
        assert err.strip(), report  # an error says what it is


def mutate(text: str, edits: list[tuple[int, int, int]]) -> str:
    """Token-level edits: 0 delete, 1 duplicate, 2 swap with the next, 3 replace by a random token,
    4 delete one byte inside the token (splits words, strings, operators), 5 replace a number by
    another (NaN and Inf included) or a name by another: scripts that still parse, so that the later
    stages see odd values (this found the NaN/Inf conversions below)."""
    toks = _TOKEN.findall(text)
    for kind, pos, pick in edits:
        if not toks:
            break
        i = pos % len(toks)
        if kind == 0:
            del toks[i]
        elif kind == 1:
            toks.insert(i, toks[i])
        elif kind == 2 and i + 1 < len(toks):
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
        elif kind == 3:
            toks[i] = TOKENS[pick % len(TOKENS)]
        elif kind == 4 and toks[i]:
            j = pick % len(toks[i])
            toks[i] = toks[i][:j] + toks[i][j + 1:]
        elif kind == 5:
            k = next((k for k in range(i, len(toks)) if toks[k][:1].isalnum()), None)
            if k is not None:
                pool = NUMBERS + ["NaN", "Inf"] if toks[k][0].isdigit() else NAMES
                toks[k] = pool[pick % len(pool)]
    return "".join(toks)


@pytest.fixture(scope="module", autouse=True)
def _few_timeouts():
    yield
    total = sum(outcomes.values())
    assert outcomes["timeout"] <= max(2, total // 20), outcomes


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a mutated script writes lands here
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40))
def test_random_token_streams(capfd, tokens):
    run_script(" ".join(tokens), capfd)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(range(len(TEXTS))),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=4))
def test_mutated_scripts(capfd, which, edits):
    run_script(mutate(TEXTS[which], edits), capfd)


def test_the_corpus_is_there():
    assert len(TEXTS) >= 100
    assert mutate("x = 1 + 2", [(2, 2, 0)]) == "x  =1 + 2"  # '=' swapped with the blank after it


# ---------------------------------------------------------------- what the fuzzing found

@pytest.mark.parametrize("text,first_line", [
    # a NaN / Inf loop bound known at compile time (the loop-weight estimate converted it to int)
    ("for (i in 1:NaN) { print(i) }\n", "s.dml:1:13: runtime error: for loop end must be a finite number, got NaN"),
    ("for (i in Inf:2) { print(i) }\n",
     "s.dml:1:11: runtime error: for loop start must be a finite number, got Infinity"),
    # a NaN / Inf index known at compile time (the bounds check and the size inference converted it)
    ("X = matrix(1, rows=3, cols=2)\ny = X[(Inf + 1):3, ]\nprint(toString(y))\n",
     "s.dml:2:12: validation error: row index Infinity is out of bounds for 'X' with 3 rows"),
    ("X = matrix(1, rows=3, cols=2)\ny = X[1:NaN, 1]\nprint(toString(y))\n",
     "s.dml:2:9: validation error: row index NaN is out of bounds for 'X' with 3 rows"),
    # size inference of seq() with an infinite bound (the run reports it)
    ("X = matrix(seq(1, Inf * 2), 2, 2)\nprint(toString(X))\n",
     "s.dml:1:12: runtime error: Invalid seq parameters: (1.0, Infinity, 1.0)"),
    # rand() with Inf rows is 2^63-1 rows: stopped by the memory budget before drawing (was a hang)
    ("x = rand(rows=Inf, cols=2)\nprint(toString(x))\n",
     "s.dml:1:5: runtime error: 'rand' with a 9223372036854775807x2 result needs 1.48e+08 TB, beyond the memory budget"),
])
def test_non_finite_constants_are_errors_of_the_script(capsys, tmp_path, text, first_line):
    path = tmp_path / "s.dml"
    path.write_text(text, encoding="utf-8")
    rc = cli.main(["run", str(path), "--no-codegen"])
    out, err = capsys.readouterr()
    assert (rc, out) == (1, "")
    assert err.splitlines()[0].startswith(first_line.replace("s.dml", str(path)))
