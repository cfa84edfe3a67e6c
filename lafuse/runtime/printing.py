"""Text rendering of DML values, byte-for-byte like SystemDS 3.4.0 on Java 17.

Why a port of Java's number formatting instead of Python's: DML output is compared verbatim with
SystemDS output, and the JVM differs from Python in three places that show up in ordinary scripts:

* ``Double.toString`` (string concatenation, ``print(x)``) uses the pre-JDK-19 ``FloatingDecimal``
  algorithm, which is *not* always the shortest round-trip string: ``2^62`` prints as
  ``4.6116860184273879E18`` where Python's ``repr`` gives ``4.611686018427388e+18``. We port that
  algorithm (``_dtoa``) so the digits match Java 17 exactly; the JDK 19+ (Ryu-like) output would
  differ from the values printed here in those rare cases.
* ``toString(M)`` formats cells with ``java.text.DecimalFormat`` (HALF_EVEN on the ``dtoa`` digits,
  with Java's "already rounded" bookkeeping): ``0.0005`` at 3 decimals is ``0.000`` but ``0.0025``
  is ``0.003``.
* ``print("%5.2f", x)`` is ``String.format``, whose ``%f/%e/%g`` round the ``dtoa`` digits HALF_UP:
  ``%.2f`` of ``1.005`` is ``1.01`` in Java and ``1.00`` in C/Python.

All layouts below (trailing line separators, list and frame headers) were checked against
SystemDS 3.4.0 output; see tests/runtime/test_printing.py for the observed strings.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.values import Frame, ListValue, is_matrix
from lafuse.sparse import sp

# ---------------------------------------------------------------------------------------------
# jdk.internal.math.FloatingDecimal.BinaryToASCIIBuffer.dtoa (JDK 17)
# ---------------------------------------------------------------------------------------------

_N_5_BITS = [0] + [(5**i).bit_length() for i in range(1, 27)]  # FloatingDecimal.N_5_BITS
_EXP_SHIFT = 52
_FRACT_HOB = 1 << 52
_SIGNIF_MASK = (1 << 52) - 1


def _wrap(v: int, bits: int) -> int:
    """Two's-complement wrap, because the int/long fast paths of dtoa rely on Java overflow."""
    mask = (1 << bits) - 1
    v &= mask
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(slots=True)
class _Digits:
    """dtoa result: value = 0.d1d2... * 10^dec_exp, plus the flags DigitList uses against double
    rounding (``exact`` is None while not yet computed)."""

    negative: bool
    digits: list[int]
    dec_exp: int
    rounded_up: bool
    exact: bool | None


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    d2 = struct.unpack("<d", struct.pack("<q", (1023 << 52) | (fract_bits & _SIGNIF_MASK)))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + float(bin_exp) * 0.301029995663981
    return math.floor(d)


def _develop_long_digits(negative: bool, dec_exp: int, lvalue: int, insignificant: int) -> _Digits:
    if insignificant:
        pow10 = 10**insignificant
        residue = lvalue % pow10
        lvalue //= pow10
        dec_exp += insignificant
        if residue >= (pow10 >> 1):
            lvalue += 1
    s = str(lvalue)
    stripped = s.rstrip("0")
    return _Digits(negative, [ord(c) - 48 for c in stripped], dec_exp + len(s), False, False)


def _dtoa(x: float, compatible: bool = True) -> _Digits:
    """Port of FloatingDecimal.getBinaryToASCIIConverter(x, compatible); x finite."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    negative = bits < 0
    fract_bits = bits & _SIGNIF_MASK
    bin_exp = (bits >> 52) & 0x7FF
    if bin_exp == 0:
        if fract_bits == 0:
            return _Digits(negative, [0], 0, False, False)
        leading = 64 - fract_bits.bit_length()
        shift = leading - (63 - _EXP_SHIFT)
        fract_bits <<= shift
        bin_exp = 1 - shift
        n_significant = 64 - leading
    else:
        fract_bits |= _FRACT_HOB
        n_significant = _EXP_SHIFT + 1
    bin_exp -= 1023

    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = _EXP_SHIFT + 1 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if -21 <= bin_exp <= 62 and n_tiny_bits < 27 and n_fract_bits + _N_5_BITS[n_tiny_bits] < 64 \
            and n_tiny_bits == 0:
        p2 = bin_exp - n_significant - 1  # insignificantDigitsForPow2: decimal digits of 2^p2, less one
        insignificant = len(str(1 << p2)) - 1 if bin_exp > n_significant and 1 < p2 < 64 else 0
        if bin_exp >= _EXP_SHIFT:
            fract_bits <<= bin_exp - _EXP_SHIFT
        else:
            fract_bits >>= _EXP_SHIFT - bin_exp
        return _develop_long_digits(negative, 0, fract_bits, insignificant)

    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5 = b5
    m2 = b2 - n_significant
    fract_bits >>= tail_zeros
    b2 -= n_fract_bits - 1
    common2 = min(b2, s2)
    b2 -= common2
    s2 -= common2
    m2 -= common2
    if n_fract_bits == 1:
        m2 -= 1
    if m2 < 0:
        b2 -= m2
        s2 -= m2
        m2 = 0

    digits: list[int] = []
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    force_more = not compatible or dec_exp < -3 or dec_exp >= 8
    # Java picks int, long or FDBigInteger arithmetic by size; the int/long paths may overflow
    # (and test ``b + m > tens`` strictly), the big-integer path tests ``>=``. Reproduce both.
    w = 0 if b_bits >= 64 or ten_s_bits >= 64 else (32 if b_bits < 32 and ten_s_bits < 32 else 64)

    def wrap(v: int) -> int:
        return _wrap(v, w) if w else v

    b = wrap(wrap(fract_bits) * 5**b5 << b2)
    s = wrap(5**s5 << s2)
    m = wrap(5**m5 << m2)
    tens = wrap(s * 10)
    first = True
    while True:
        q = b // s
        b = wrap(10 * (b % s))
        m = wrap(m * 10)
        if m > 0 or first:
            low = b < m
            high = (wrap(b + m) > tens) if w else (b + m >= tens)
        else:  # the long arithmetic overflowed: Java stops here
            low = high = True
        if first:
            first = False
            if q == 0 and not high:
                dec_exp -= 1
            else:
                digits.append(q)
            if force_more:
                low = high = False
        else:
            digits.append(q)
        if low or high:
            break
    low_diff = wrap(wrap(b << 1) - tens)
    exact = b == 0

    res = _Digits(negative, digits, dec_exp + 1, False, exact)
    if high:
        if low:
            if low_diff == 0:
                if digits[-1] & 1:
                    _roundup(res)
            elif low_diff > 0:
                _roundup(res)
        else:
            _roundup(res)
    return res


def _roundup(r: _Digits) -> None:
    d = r.digits
    i = len(d) - 1
    while d[i] == 9 and i > 0:
        d[i] = 0
        i -= 1
    if d[i] == 9:  # carry out of the top digit: Java does not flag this as "rounded up"
        r.dec_exp += 1
        d[0] = 1
        return
    d[i] += 1
    r.rounded_up = True


def _fast_range(ax: float) -> bool:
    """Where Python's shortest repr equals Java's plain-notation Double.toString.

    Checked against the ported dtoa on ~3 million doubles in [1e-3, 1e7) (random bits, rounded
    decimals, powers of two and their neighbours) without a difference; outside this range Java
    switches to E-notation and its forced second digit makes non-shortest output possible.
    """
    return 1e-3 <= ax < 1e7


def _compat_digits(ax: float) -> _Digits:
    """dtoa(ax, compatible=True) for ax > 0, via repr in the fast range (flags filled lazily)."""
    if _fast_range(ax):
        ip, _, fp = repr(ax).partition(".")
        raw = ip + fp
        stripped = raw.lstrip("0")
        digits = [ord(c) - 48 for c in stripped]
        r = _Digits(False, digits, len(ip) - (len(raw) - len(stripped)) if ip != "0" else
                    -(len(fp) - len(fp.lstrip("0"))), False, False)
        r.exact = None
        return r
    return _dtoa(ax)


def _flags(r: _Digits, ax: float) -> tuple[bool, bool]:
    """(rounded_up, exact) of dtoa; for repr digits, compare them with the exact binary value."""
    if r.exact is not None:
        return r.rounded_up, r.exact
    from decimal import Decimal  # deferred: only for this formatting path

    exact_val = Decimal(ax)
    shown = Decimal("0." + "".join(map(str, r.digits))).scaleb(r.dec_exp)
    return shown > exact_val, shown == exact_val


def java_double_str(x: float) -> str:
    """Java 17 ``Double.toString``; the pre-JDK-19 digits, so occasionally not the shortest."""
    x = float(x)
    if x == 0.0 or _fast_range(abs(x)):
        return repr(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    r = _dtoa(x)
    sign = "-" if r.negative else ""
    ds = "".join(map(str, r.digits))
    e = r.dec_exp
    n = len(ds)
    if 0 < e < 8:
        if n <= e:
            return f"{sign}{ds}{'0' * (e - n)}.0"
        return f"{sign}{ds[:e]}.{ds[e:]}"
    if -3 < e <= 0:
        return f"{sign}0.{'0' * -e}{ds}"
    mant = ds[0] + "." + (ds[1:] if n > 1 else "0")
    return f"{sign}{mant}E{e - 1}"


# ---------------------------------------------------------------------------------------------
# java.text.DecimalFormat (grouping off), as used by SystemDS DataConverter.toString
# ---------------------------------------------------------------------------------------------

def _digitlist_fixed(x: float, max_frac: int) -> tuple[list[int], int]:
    """DigitList.set(neg, x, max_frac, fixedPoint=true): rounded digits and decimalAt."""
    r = _compat_digits(x)
    d = list(r.digits)
    if d == [0]:
        return [], 0
    at = r.dec_exp

    def round_up_needed(pos: int) -> bool:
        if pos >= len(d):
            return False
        if d[pos] > 5:
            return True
        if d[pos] == 5:
            if pos == len(d) - 1:
                rounded_up, exact = _flags(r, x)
                if exact:
                    return pos > 0 and d[pos - 1] % 2 == 1
                return not rounded_up
            return any(d[pos + 1:])
        return False

    if -at > max_frac:
        return [], 0
    if -at == max_frac:  # JDK 17 decides this before trailing zeros are dropped ("5.0E-4" -> 0.000)
        return ([1], at + 1) if round_up_needed(0) else ([], 0)
    while len(d) > 1 and d[-1] == 0:
        d.pop()
    keep = max_frac + at
    if 0 <= keep < len(d):
        if round_up_needed(keep):
            i = keep - 1
            while i >= 0 and d[i] == 9:
                i -= 1
            if i < 0:
                d, at, keep = [1], at + 1, 1
            else:
                d[i] += 1
                keep = i + 1
        d = d[:keep]
        while len(d) > 1 and d[-1] == 0:
            d.pop()
    return d, at


def decimal_format(x: float, decimal: int = -1) -> str:
    """One cell of ``toString``: DecimalFormat with min = max fraction digits = ``decimal``, or the
    default pattern (0..3 fraction digits) when ``decimal`` < 0; NaN/Inf as Double.toString."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return java_double_str(x)
    min_frac, max_frac = (decimal, decimal) if decimal >= 0 else (0, 3)
    negative = x < 0 or (x == 0 and math.copysign(1.0, x) < 0)
    if x.is_integer() and abs(x) < 2.0**53:  # exact integers need no rounding: skip dtoa
        body = str(abs(int(x)))
        frac = "0" * min_frac
    else:
        d, at = _digitlist_fixed(abs(x), max_frac)
        if not d:
            body, frac = "0", "0" * min_frac
        else:
            ds = "".join(map(str, d))
            body = (ds[:at] + "0" * (at - len(ds))) if at > 0 else "0"
            frac = ("0" * -at + ds) if at <= 0 else ds[at:]
            frac = frac[:max_frac] + "0" * (min_frac - len(frac))
    return ("-" if negative else "") + body + ("." + frac if frac else "")


# ---------------------------------------------------------------------------------------------
# DML scalars and toString
# ---------------------------------------------------------------------------------------------

def dml_str(v: Any) -> str:
    """How ``print(v)`` and ``"s" + v`` render a value: INT plain, DOUBLE via Double.toString,
    BOOLEAN as TRUE/FALSE; matrices, frames and lists as ``toString`` with its defaults."""
    if isinstance(v, (bool, np.bool_)):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return java_double_str(float(v))
    if isinstance(v, str):
        return v
    if is_matrix(v) or isinstance(v, (Frame, ListValue)):
        return to_string(v)
    if v is None:
        return "null"
    raise DMLRuntimeError(f"cannot convert a value of type {type(v).__name__} to a string")


def to_string(v: Any, rows: int = 100, cols: int = 100, decimal: int = 3, sparse: bool = False,
              sep: str = " ", linesep: str = "\n") -> str:
    """DML ``toString``: every row (and every sparse cell line) ends with ``linesep``."""
    rows, cols, decimal, sparse = int(rows), int(cols), int(decimal), bool(sparse)
    if is_matrix(v):
        return _matrix_to_string(v, rows, cols, decimal, sparse, sep, linesep)
    if isinstance(v, Frame):
        return _frame_to_string(v, rows, cols, decimal, sep, linesep)
    if isinstance(v, ListValue):
        return _list_to_string(v, rows, cols, decimal, sparse, sep, linesep)
    if v is None or isinstance(v, (bool, int, float, str, np.generic)):
        return dml_str(v)
    raise DMLRuntimeError(f"toString only converts matrices, frames, lists or scalars, not {type(v).__name__}")


def _limit(n: int, limit: int) -> int:
    return n if limit < 0 else min(limit, n)


def _matrix_to_string(m: Any, rows: int, cols: int, decimal: int, sparse: bool, sep: str,
                      linesep: str) -> str:
    nr, nc = m.shape
    rl, cl = _limit(nr, rows), _limit(nc, cols)
    cache: dict[float, str] = {}

    def fmt(x: float) -> str:
        s = cache.get(x)
        if s is None:
            s = cache[x] = decimal_format(x, decimal)
        return s

    out: list[str] = []
    if sparse:
        if sp.issparse(m):
            c = sp.csr_array(m)[:rl, :cl].tocsr()
            c.sort_indices()
            for i in range(c.shape[0]):
                lo, hi = c.indptr[i], c.indptr[i + 1]
                for j, x in zip(c.indices[lo:hi], c.data[lo:hi]):
                    if x != 0.0:
                        out.append(f"{i + 1}{sep}{j + 1}{sep}{fmt(float(x))}{linesep}")
        else:
            a = np.asarray(m)[:rl, :cl]
            for i, j in zip(*np.nonzero(a)):
                out.append(f"{i + 1}{sep}{j + 1}{sep}{fmt(float(a[i, j]))}{linesep}")
        return "".join(out)
    if rl == 0:
        return ""
    if cl == 0:
        if nc > 0:  # SystemDS 3.4.0 reads cell (i, -1) here and dies
            raise DMLRuntimeError("toString: cols=0 is not supported for a matrix with columns "
                                  "(SystemDS fails with ArrayIndexOutOfBoundsException)")
        return (fmt(0.0) + linesep) * rl  # a 0-column block reads as 0 in SystemDS
    block = m[:rl, :cl]
    a = block.toarray() if sp.issparse(block) else np.asarray(block)
    a = a + 0.0  # -0.0 prints as 0 in the dense layout
    for row in a.tolist():
        out.append(sep.join(fmt(x) for x in row))
        out.append(linesep)
    return "".join(out)


def _frame_cell(x: Any, vtype: str, decimal: int) -> str:
    if x is None:
        return "null"
    if vtype == "FP64" and isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return decimal_format(float(x), decimal)
    if isinstance(x, (bool, np.bool_)):
        return "TRUE" if x else "FALSE"
    if isinstance(x, (float, np.floating)):
        return java_double_str(float(x))
    return str(x)


def _frame_to_string(f: Frame, rows: int, cols: int, decimal: int, sep: str, linesep: str) -> str:
    nr, nc = f.shape
    rl, cl = _limit(nr, rows), _limit(nc, cols)
    names = list(f.names) if f.names else [f"C{j + 1}" for j in range(nc)]
    out = [f"# FRAME: nrow = {nr}, ncol = {nc}{linesep}",
           "#" + sep + sep.join(names[:cl]) + linesep,
           "#" + sep + sep.join(f.schema[:cl]) + linesep]
    for i in range(rl):
        out.append(sep.join(_frame_cell(f.columns[j][i], f.schema[j], decimal) for j in range(cl)))
        out.append(linesep)
    return "".join(out)


def _list_to_string(lst: ListValue, rows: int, cols: int, decimal: int, sparse: bool, sep: str,
                    linesep: str) -> str:
    # SystemDS passes (cols, rows) to nested lists, so the matrices inside a nested list are cut
    # to rows=cols and cols=rows; reproduced because it is observable output.
    out = ["List containing:\n["]
    for x in lst.items:
        if is_matrix(x):
            out.append("\nMatrix:\n" + _matrix_to_string(x, rows, cols, decimal, sparse, sep, linesep))
        elif isinstance(x, Frame):
            out.append("\n" + _frame_to_string(x, rows, cols, decimal, sep, linesep))
        elif isinstance(x, ListValue):
            out.append(_list_to_string(x, cols, rows, decimal, sparse, sep, linesep))
        else:
            out.append(dml_str(x))
        out.append(", ")
    s = "".join(out)
    return s[:-2] + "]"  # an empty list loses "\n[" here, as in SystemDS


from lafuse.runtime.javaformat import java_format  # noqa: E402  (re-export; javaformat imports this module)

__all__ = ["decimal_format", "dml_str", "java_double_str", "java_format", "to_string"]
