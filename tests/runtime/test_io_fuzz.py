"""Fuzzing the readers: damaged csv/text/mm/npy files and ``.mtd`` files, read by ``lafuse run``, must give
exit code 0 or 1 (a result or a clear error), never an internal error or a Python traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lafuse import cli
from lafuse.runtime.io import write_value

BASE = np.array([[1.5, 0.0, -2.0], [0.0, 0.0, 3.25], [np.nan, 1e-7, 0.0], [4.0, 5.0, 6.0]])
KINDS = {"csv": "m.csv", "text": "m.txt", "mm": "m.mtx", "npy": "m.npy", "npz": "m.npz"}
JSON_VALUES = st.one_of(st.integers(-3, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                        st.text(max_size=4), st.none(), st.booleans(), st.lists(st.integers(0, 5), max_size=2))
HEADER_NUMBER = st.one_of(st.integers(-2, 12), st.integers(10**6, 10**12), st.sampled_from(["x", "", "1.5", "-0"]))


def _write_base(d: str, kind: str) -> str:
    path = os.path.join(d, KINDS[kind])
    if kind == "npz":
        import scipy.sparse as sp

        write_value(sp.csr_array(np.nan_to_num(BASE)), path, {"format": "binary"})
    else:
        write_value(BASE, path, {"format": kind})
    return path


@st.composite
def damage(draw):
    """(kind, which file, mutation, its parameters)."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    # lafuse's .mtd (with the data check, which catches most damage before any parser sees it),
    # SystemDS's (without it) or none: the parsers must cope on their own
    meta = "none" if kind == "mm" else draw(st.sampled_from(["lafuse", "systemds", "none"]))
    target = draw(st.sampled_from(["data", "data", "mtd"])) if meta != "none" else "data"
    how = draw(st.sampled_from(["flip", "truncate", "insert", "swap", "numbers"]))
    return {"kind": kind, "meta": meta, "target": target, "how": how, "at": draw(st.floats(0, 1)),
            "bytes": draw(st.binary(min_size=1, max_size=6)), "junk": draw(st.sampled_from(
                [b"", b"\n", b",", b" ", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"NaN", b"1e999", b"\"", b"0 0 0\n"])),
            "numbers": draw(st.lists(HEADER_NUMBER, min_size=3, max_size=3)),
            "json_key": draw(st.sampled_from(["rows", "cols", "nnz", "format", "sep", "header", "data_type",
                                              "value_type", "description", "naStrings", "default", "bogus"])),
            "json_value": draw(JSON_VALUES)}


def _mutate(raw: bytes, d: dict, is_mtd: bool, kind: str) -> bytes:
    n = len(raw)
    k = min(int(d["at"] * n), max(n - 1, 0))
    how = d["how"]
    if how == "flip" and n:
        return raw[:k] + bytes([raw[k] ^ (d["bytes"][0] or 1)]) + raw[k + 1:]
    if how == "truncate":
        return raw[:k]
    if how == "insert":
        return raw[:k] + (d["junk"] or d["bytes"]) + raw[k:]
    if how == "swap":
        lines = raw.split(b"\n")
        if len(lines) > 2:
            i = k % (len(lines) - 1)
            lines[i], lines[-1 - i] = lines[-1 - i], lines[i]
        return b"\n".join(lines)
    # "numbers": wrong header/metadata numbers
    a, b, c = (str(x) for x in d["numbers"])
    if is_mtd:
        try:
            obj = json.loads(raw)
        except ValueError:
            return raw
        obj[d["json_key"]] = d["json_value"]
        return json.dumps(obj).encode()
    if kind == "mm":
        return re.sub(rb"\n\d+ \d+ \d+\n", f"\n{a} {b} {c}\n".encode(), raw, count=1)
    if kind == "npy":
        return re.sub(rb"'shape': \([^)]*\)", f"'shape': ({a}, {b})".encode(), raw, count=1)
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damage())
def test_damaged_files_give_a_result_or_a_clear_error(d):
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_base(tmp, d["kind"])
        if d["meta"] == "none" and os.path.exists(path + ".mtd"):
            os.remove(path + ".mtd")
        elif d["meta"] == "systemds":
            with open(path + ".mtd") as f:
                mtd = json.load(f)
            del mtd["description"]
            with open(path + ".mtd", "w") as f:
                json.dump(mtd, f, indent=4)
        victim = path + ".mtd" if d["target"] == "mtd" else path
        with open(victim, "rb") as f:
            raw = f.read()
        with open(victim, "wb") as f:
            f.write(_mutate(raw, d, d["target"] == "mtd", d["kind"]))
        conf = os.path.join(tmp, "budget.json")
        with open(conf, "w") as f:
            json.dump({"memory_budget": 0.02}, f)  # fuzzed sizes must not take the machine's memory
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["run", "--no-codegen", "--config", conf, "-s", "X = read($X); print(sum(X))",
                           "--nvargs", f"X={path}"])
    assert rc in (0, 1), (rc, err.getvalue())
    assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue(), err.getvalue()
    if rc == 0:
        assert re.fullmatch(r"-?[\d.E-]+|NaN|-?Infinity", out.getvalue().strip()), out.getvalue()
    else:
        assert err.getvalue().strip(), "an error exit says why"
