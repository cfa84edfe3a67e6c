"""Low-level reading of text data files: bytes, lines, csv cells and Java's number syntax."""

from __future__ import annotations

import io
import os
import re
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError

_JAVA_DEC = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_JAVA_HEX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?")
INT = re.compile(r"[+-]?\d+")
BOM = b"\xef\xbb\xbf"
NUMERIC_BYTES = b"0123456789.eE+-\n"


def parse_java_double(s: str) -> float:
    """``Double.parseDouble``: trims, accepts NaN/Infinity, f/d suffixes and hex; not ``inf``/``1_0``."""
    t = s.strip(" \t\r\n\x0b\x0c\x00")
    if _JAVA_DEC.fullmatch(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t.replace("Infinity", "inf"))
    m = _JAVA_HEX.fullmatch(t)
    if m:
        v = float.fromhex("0x" + m.group(2))
        return -v if m.group(1) == "-" else v
    raise ValueError(f"For input string: \"{s}\"")


def parse_long(text: str, shown: str) -> int:
    """Java ``Long.parseLong`` acceptance (no spaces, no decimal point), with its message."""
    if not INT.fullmatch(text):
        raise ValueError(f"For input string: \"{shown}\"")
    return int(text)


def part_files(path: str) -> list[str]:
    """The part files of a directory written by a distributed run, in order ('.'/'_' names skipped:
    Hadoop's _SUCCESS and .crc files, lafuse's temporaries)."""
    return [os.path.join(path, p) for p in sorted(os.listdir(path))
            if not p.startswith((".", "_")) and os.path.isfile(os.path.join(path, p))]


def file_size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(p) for p in part_files(path))
    return os.path.getsize(path)


def read_raw(path: str) -> bytes:
    """The bytes of a file, or the concatenated part files of a directory (each ending in a newline)."""
    if not os.path.exists(path):
        raise DMLRuntimeError(f"read input file does not exist: {path}")
    try:
        if os.path.isdir(path):
            chunks = []
            for p in part_files(path):
                with open(p, "rb") as f:
                    c = strip_bom(f.read())
                chunks.append(c if c.endswith(b"\n") or not c else c + b"\n")
            return b"".join(chunks)
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DMLRuntimeError(f"cannot read '{path}': {e.strerror or e}") from None


def strip_bom(raw: bytes) -> bytes:
    """A UTF-8 byte order mark (which some editors put first) is not part of the first cell."""
    return raw[3:] if raw.startswith(BOM) else raw


def decode(path: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DMLRuntimeError(f"{path}:{line}: the file is not UTF-8 text ({e.reason} at byte {e.start})") from None


def lines(text: str) -> list[str]:
    """Java BufferedReader line splitting (\\n, \\r\\n, \\r); no empty line after a final newline."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    out = text.split("\n")
    if out and out[-1] == "":
        out.pop()
    return out


def split_csv(line: str, sep: str) -> list[str]:
    """Split one csv line; double-quoted cells may contain the separator ("" escapes a quote)."""
    if '"' not in line:
        return line.split(sep)
    out, cur, i, n, quoted = [], [], 0, len(line), False
    while i < n:
        c = line[i]
        if quoted:
            if c == '"':
                if i + 1 < n and line[i + 1] == '"':
                    cur.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                cur.append(c)
        elif c == '"':
            quoted = True
        elif line.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def safe_numeric_text(text: str, sep: str) -> bool:
    """True when Python's float() can only accept what Java's parseDouble accepts, cell by cell."""
    extra = "".join(sorted(set(sep) - set("0123456789.eE+- \t")))
    return re.search(r"[^0-9.eE+\- \t\n\r" + re.escape(extra) + "]", text) is None


def pandas_table(body: bytes, sep: str, dtype: Any) -> Any:
    """``body`` parsed by pandas' C parser (no header, no NA strings), or None if it rejects it."""
    import pandas as pd  # deferred: pandas (~120 ms), only for CSV/text files

    try:
        return pd.read_csv(io.BytesIO(body), sep=sep, header=None, dtype=dtype, na_filter=False, engine="c")
    except (ValueError, TypeError, OverflowError, MemoryError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def writeable(a: np.ndarray) -> np.ndarray:
    """pandas' copy-on-write hands out read-only views; matrices lafuse reads are ordinary writeable
    arrays, whatever reader made them."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a if a.flags.writeable else a.copy()
