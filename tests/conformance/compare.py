"""Tolerant comparison of two DML runs: printed lines and written matrices.

Lines are compared token by token. A line is split into numbers and the text between them:

* text must match exactly (including whitespace);
* numbers match when ``|a - b| <= max(RTOL * max(|a|, |b|), ATOL)``, with ``RTOL = 1e-9`` and ``ATOL = 1e-12``
  (the absolute floor only matters for values near zero); ``NaN`` equals ``NaN``; ``Infinity`` and
  ``-Infinity`` only equal themselves;
* the *kind* of a number must match: an integer spelling (``3``) never equals a double spelling (``3.0``),
  because SystemDS prints INT64 and FP64 scalars differently (dml-semantics §4);
* when both spellings use an exponent, the exponent marker must agree (Java prints ``1.0E-7``, never ``1e-07``).

Numbers are recognised in Java's spellings: ``12``, ``-0.5``, ``1.0E-7``, ``Infinity``, ``-Infinity``, ``NaN``.
Python spellings such as ``inf`` or ``nan`` are text, so they show up as mismatches.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RTOL = 1e-9
ATOL = 1e-12

_NUM = re.compile(r"[-+]?(?:Infinity|NaN|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)")
_INT = re.compile(r"[-+]?\d+")


@dataclass(frozen=True)
class Token:
    text: str
    is_number: bool
    value: float = 0.0
    kind: str = "text"  # "int", "float", "special" (NaN/Infinity) or "text"


def _number_token(s: str) -> Token:
    if s.lstrip("+-") in ("Infinity", "NaN"):
        return Token(s, True, float(s), "special")
    if _INT.fullmatch(s):
        return Token(s, True, float(int(s)), "int")
    return Token(s, True, float(s), "float")


def tokenize(line: str) -> list[Token]:
    """Split a line into alternating text and number tokens."""
    out: list[Token] = []
    pos = 0
    for m in _NUM.finditer(line):
        if m.start() > pos:
            out.append(Token(line[pos:m.start()], False))
        out.append(_number_token(m.group()))
        pos = m.end()
    if pos < len(line):
        out.append(Token(line[pos:], False))
    return out


def close(a: float, b: float, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Scalar tolerance rule shared by lines and matrices."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(rtol * max(abs(a), abs(b)), atol)


def _exp_marker(s: str) -> str | None:
    for c in "eE":
        if c in s:
            return c
    return None


def compare_tokens(exp: Token, act: Token, rtol: float = RTOL) -> str | None:
    """None when the two tokens match, else a short reason."""
    if exp.text == act.text:
        return None
    if not exp.is_number or not act.is_number:
        return f"text {exp.text!r} != {act.text!r}"
    if exp.kind != act.kind:
        return f"number spelling differs: {exp.text} ({exp.kind}) vs {act.text} ({act.kind})"
    if exp.kind == "special":
        return f"{exp.text} != {act.text}"
    if exp.kind == "int":
        return None if int(exp.text) == int(act.text) else f"integer {exp.text} != {act.text}"
    em, am = _exp_marker(exp.text), _exp_marker(act.text)
    if em and am and em != am:
        return f"exponent spelling differs: {exp.text} vs {act.text}"
    if not close(exp.value, act.value, rtol):
        return f"number {exp.text} != {act.text} (beyond rtol={rtol}, atol={ATOL})"
    return None


def compare_line(expected: str, actual: str, rtol: float = RTOL) -> str | None:
    """None when the lines match, else the reason for the first difference."""
    if expected == actual:
        return None
    te, ta = tokenize(expected), tokenize(actual)
    for a, b in zip(te, ta):
        r = compare_tokens(a, b, rtol)
        if r is not None:
            return r
    if len(te) != len(ta):
        extra = te[len(ta):] if len(te) > len(ta) else ta[len(te):]
        side = "SystemDS" if len(te) > len(ta) else "lafuse"
        return f"{side} line continues with {''.join(t.text for t in extra)!r}"
    return None


def _clip(s: str, n: int = 300) -> str:
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


def compare_lines(
    expected: list[str], actual: list[str], what: str = "stdout",
    expected_name: str = "SystemDS", actual_name: str = "lafuse", rtol: float = RTOL,
) -> str | None:
    """Compare two outputs line by line. None if they match, else a readable report with a diff."""
    n = max(len(expected), len(actual))
    for i in range(n):
        e = expected[i] if i < len(expected) else None
        a = actual[i] if i < len(actual) else None
        if e is None or a is None:
            reason = f"{expected_name if a is None else actual_name} has extra lines"
        else:
            reason = compare_line(e, a, rtol)
            if reason is None:
                continue
        w = max(len(expected_name), len(actual_name)) + 1
        report = [
            f"{what} differs at line {i + 1} ({expected_name}: {len(expected)} lines, "
            f"{actual_name}: {len(actual)} lines): {reason}",
            f"  {(expected_name + ':').ljust(w)} {_clip(repr(e)) if e is not None else '<end of output>'}",
            f"  {(actual_name + ':').ljust(w)} {_clip(repr(a)) if a is not None else '<end of output>'}",
            "diff (first 80 lines):",
        ]
        diff = difflib.unified_diff(expected, actual, expected_name, actual_name, lineterm="", n=2)
        report.extend(_clip(x) for x, _ in zip(diff, range(80)))
        return "\n".join(report)
    return None


# ---------------------------------------------------------------------------------------------- matrices

def _data_files(path: Path) -> list[Path]:
    """A written matrix is a file, or (in distributed writers) a directory of part files."""
    if path.is_dir():
        return sorted(
            p for p in path.iterdir()
            if p.is_file() and not p.name.startswith((".", "_")) and not p.name.endswith((".crc", ".mtd"))
        )
    return [path]


def _read_lines(path: Path) -> list[str]:
    lines: list[str] = []
    for f in _data_files(path):
        lines.extend(f.read_text().splitlines())
    return lines


def read_mtd(path: Path) -> dict | None:
    mtd = path.with_name(path.name + ".mtd")
    if not mtd.is_file():
        return None
    try:
        return json.loads(mtd.read_text())
    except json.JSONDecodeError:
        return None


def _parse_value(s: str) -> float:
    s = s.strip()
    if s == "":
        return 0.0
    return float(s)  # float() accepts Java's Infinity, -Infinity, NaN, 1.0E-7


@dataclass
class MatrixData:
    values: np.ndarray
    shape_known: bool  # False when dims were inferred from the largest index (text format without .mtd)


def read_matrix(path: str | Path, fmt: str) -> MatrixData:
    """Read a matrix written in SystemDS's csv, text (ijv) or mm (Matrix Market) format."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"output {path} was not written")
    fmt = fmt.lower()
    if fmt == "csv":
        mtd = read_mtd(path) or {}
        sep = mtd.get("sep", ",")
        lines = [x for x in _read_lines(path) if x.strip() != ""]
        if mtd.get("header"):
            lines = lines[1:]
        rows = [[_parse_value(c) for c in x.split(sep)] for x in lines]
        if rows and len({len(r) for r in rows}) != 1:
            raise ValueError(f"{path}: ragged csv rows")
        ncol = len(rows[0]) if rows else int(mtd.get("cols", 0))
        arr = np.array(rows, dtype=float).reshape(len(rows), ncol)
        return MatrixData(arr, True)
    if fmt in ("text", "ijv"):
        entries = []
        for x in _read_lines(path):
            parts = x.split()
            if not parts:
                continue
            i, j, v = int(parts[0]), int(parts[1]), _parse_value(parts[2])
            if i == 0 or j == 0:  # SystemDS writes "0 0 0" for an all-zero matrix
                continue
            entries.append((i, j, v))
        mtd = read_mtd(path)
        if mtd and "rows" in mtd and "cols" in mtd:
            shape, known = (int(mtd["rows"]), int(mtd["cols"])), True
        else:
            shape = (max((e[0] for e in entries), default=0), max((e[1] for e in entries), default=0))
            known = False
        arr = np.zeros(shape)
        for i, j, v in entries:
            arr[i - 1, j - 1] = v
        return MatrixData(arr, known)
    if fmt in ("mm", "matrixmarket"):
        lines = _read_lines(path)
        if not lines or not lines[0].startswith("%%MatrixMarket"):
            raise ValueError(f"{path}: missing %%MatrixMarket header")
        header = lines[0].lower().split()
        body = [x for x in lines[1:] if x.strip() and not x.startswith("%")]
        dims = [int(v) for v in body[0].split()]
        if "array" in header:
            r, c = dims[0], dims[1]
            vals = [_parse_value(x) for x in body[1:]]
            return MatrixData(np.array(vals, dtype=float).reshape(c, r).T, True)
        r, c = dims[0], dims[1]
        arr = np.zeros((r, c))
        for x in body[1:]:
            parts = x.split()
            i, j = int(parts[0]), int(parts[1])
            if i == 0 or j == 0:  # SystemDS writes "0 0 0" after the size line of an all-zero matrix
                continue
            v = _parse_value(parts[2]) if len(parts) > 2 else 1.0
            arr[i - 1, j - 1] = v
            if "symmetric" in header and i != j:
                arr[j - 1, i - 1] = v
        return MatrixData(arr, True)
    raise ValueError(f"unsupported matrix format {fmt!r}")


def close_array(a: np.ndarray, b: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> np.ndarray:
    """Element-wise version of :func:`close`."""
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(a) & np.isnan(b)
        inf = np.isinf(a) | np.isinf(b)
        diff = np.abs(a - b)
        tol = np.maximum(rtol * np.maximum(np.abs(a), np.abs(b)), atol)
        ok = np.where(inf, a == b, diff <= tol)
    return both_nan | (ok & ~np.isnan(a) & ~np.isnan(b))


def compare_matrices(
    expected: MatrixData | np.ndarray, actual: MatrixData | np.ndarray, what: str = "matrix",
    expected_name: str = "SystemDS", actual_name: str = "lafuse", rtol: float = RTOL,
) -> str | None:
    """None when shapes and values match (same tolerance as lines), else a readable report."""
    e = expected if isinstance(expected, MatrixData) else MatrixData(np.asarray(expected, float), True)
    a = actual if isinstance(actual, MatrixData) else MatrixData(np.asarray(actual, float), True)
    ev, av = e.values, a.values
    if e.shape_known and a.shape_known:
        if ev.shape != av.shape:
            return f"{what}: shape differs: {expected_name} {ev.shape[0]}x{ev.shape[1]}, " \
                   f"{actual_name} {av.shape[0]}x{av.shape[1]}"
    elif ev.shape != av.shape:
        # dims inferred from the largest written index: pad with the zeros the ijv format leaves out
        r, c = max(ev.shape[0], av.shape[0]), max(ev.shape[1], av.shape[1])
        ev = np.pad(ev, ((0, r - ev.shape[0]), (0, c - ev.shape[1])))
        av = np.pad(av, ((0, r - av.shape[0]), (0, c - av.shape[1])))
    ok = close_array(ev, av, rtol)
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    lines = [f"{what}: {len(bad)} of {ev.size} cells differ (rtol={rtol}, atol={ATOL}); first ones:"]
    for i, j in bad[:8]:
        lines.append(f"  [{i + 1},{j + 1}] {expected_name}={ev[i, j]!r} {actual_name}={av[i, j]!r}")
    return "\n".join(lines)


def compare_matrix_files(expected: Path, actual: Path, fmt: str, what: str = "matrix",
                         rtol: float = RTOL) -> str | None:
    try:
        e = read_matrix(expected, fmt)
    except (OSError, ValueError) as ex:
        return f"{what}: cannot read the SystemDS output {expected}: {ex}"
    try:
        a = read_matrix(actual, fmt)
    except (OSError, ValueError) as ex:
        return f"{what}: cannot read the lafuse output {actual}: {ex}"
    return compare_matrices(e, a, what, rtol=rtol)


# ------------------------------------------------------------------------- measured differences

TINY_FRACTION = 1e-6


def max_rel_diff(expected: np.ndarray, actual: np.ndarray, zero_below: float = 0.0) -> float:
    """Largest element-wise relative difference ``|a - b| / max(|a|, |b|, floor)``.

    ``floor = TINY_FRACTION * max|expected|``: a cell a million times smaller than the matrix's largest one
    (typically a rounding-level residue such as a centered mean of 1e-17) is measured against that floor
    instead of itself, so noise around zero does not read as a 100% difference. NaN vs NaN and equal
    infinities count as 0; any other NaN/Inf mismatch, or a shape mismatch, is ``inf``. Cells where both
    sides are at most ``zero_below`` in magnitude count as equal (for outputs that are rounding residues)."""
    e, a = np.asarray(expected, float), np.asarray(actual, float)
    if e.shape != a.shape:
        return math.inf
    if e.size == 0:
        return 0.0
    special = ~np.isfinite(e) | ~np.isfinite(a)
    if np.any(special & ~((np.isnan(e) & np.isnan(a)) | (e == a))):
        return math.inf
    keep = ~special & ~((np.abs(e) <= zero_below) & (np.abs(a) <= zero_below))
    e, a = e[keep], a[keep]
    if e.size == 0:
        return 0.0
    floor = max(TINY_FRACTION * float(np.max(np.abs(e))), ATOL)
    return float(np.max(np.abs(e - a) / np.maximum(np.maximum(np.abs(e), np.abs(a)), floor)))


def max_rel_diff_lines(expected: list[str], actual: list[str]) -> float:
    """Largest relative difference between corresponding printed numbers; as in :func:`close`, numbers
    within ``ATOL`` of each other count as equal (e.g. objective reductions of 1e-7 that differ by 1e-14);
    ``inf`` when the lines do not pair up token by token."""
    if len(expected) != len(actual):
        return math.inf
    worst = 0.0
    for le, la in zip(expected, actual):
        te, ta = tokenize(le), tokenize(la)
        if len(te) != len(ta):
            return math.inf
        for x, y in zip(te, ta):
            if x.is_number != y.is_number or (not x.is_number and x.text != y.text):
                return math.inf
            if x.is_number and x.text != y.text and abs(x.value - y.value) > ATOL:
                worst = max(worst, max_rel_diff(np.array([x.value]), np.array([y.value])))
    return worst
