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
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.sparse import sp
from lafuse.runtime.values import Frame, ListValue, is_matrix

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
    from decimal import Decimal

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


# ---------------------------------------------------------------------------------------------
# java.util.Formatter (String.format) for DML's print("fmt", args...)
# ---------------------------------------------------------------------------------------------

_SPEC = re.compile(r"%(\d+\$)?([-#+ 0,(<]*)?(\d+)?(\.\d+)?([tT])?([a-zA-Z%])")
_VALID_CONV = set("bBhHsScCdoxXeEfgGaA%n")
_FLAG_ORDER = "-^#+ 0,(<"  # java.util.Formatter.Flags.toString order; '^' marks upper case


class _JavaFormatError(Exception):
    def __init__(self, exc: str, msg: str):
        super().__init__(f"{exc}: {msg}")
        self.exc = exc
        self.msg = msg


def _java_class(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "java.lang.Boolean"
    if isinstance(v, (int, np.integer)):
        return "java.lang.Long"
    if isinstance(v, (float, np.floating)):
        return "java.lang.Double"
    return "java.lang.String"


def _java_to_string(v: Any) -> str:
    """Object.toString of the boxed Java value SystemDS hands to String.format."""
    if v is None:
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        return java_double_str(float(v))
    return str(int(v)) if isinstance(v, (int, np.integer)) else str(v)


class _Spec:
    def __init__(self, index: int, flags: str, width: int, precision: int, conv: str, text: str):
        self.index, self.flags, self.width, self.precision = index, flags, width, precision
        self.upper = conv.isupper() and conv not in "%"
        self.conv = conv.lower()
        self.text = text

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def flag_str(self, with_upper: bool = True) -> str:
        fl = self.flags + ("^" if with_upper and self.upper else "")
        return "".join(c for c in _FLAG_ORDER if c in fl)

    def spec_str(self) -> str:
        s = "%" + self.flag_str(with_upper=False)
        if self.index > 0:
            s += f"{self.index}$"
        if self.width != -1:
            s += str(self.width)
        if self.precision != -1:
            s += f".{self.precision}"
        return s + (self.conv.upper() if self.upper else self.conv)

    def mismatch(self, flag: str) -> _JavaFormatError:
        return _JavaFormatError("FormatFlagsConversionMismatchException",
                                f"Conversion = {self.conv}, Flags = {flag}")

    def check(self) -> None:
        """Formatter's parse-time checks, in Java's order (which decides the exception raised)."""
        c, err = self.conv, _JavaFormatError

        def bad(flags: str) -> None:
            for fl in flags:
                if self.has(fl):
                    raise self.mismatch(fl)

        def need_width(flags: str) -> None:
            if self.width == -1 and any(self.has(fl) for fl in flags):
                raise err("MissingFormatWidthException", self.spec_str())

        def no_precision() -> None:
            if self.precision != -1:
                raise err("IllegalFormatPrecisionException", str(self.precision))

        illegal = err("IllegalFormatFlagsException", f"Flags = '{self.flag_str()}'")
        if c in "bhs":
            bad("" if c == "s" else "#")
            need_width("-")
            bad("+ 0,(")
        elif c == "c":
            no_precision()
            bad("#+ 0,(")
            need_width("-")
        elif c in "doxefga":
            need_width("-0")
            if (self.has("+") and self.has(" ")) or (self.has("-") and self.has("0")):
                raise illegal
            if c in "dox":
                no_precision()
            bad({"d": "#", "o": ",", "x": ",", "a": "(,", "e": ",", "g": "#"}.get(c, ""))
        else:
            no_precision()
            if c == "%":
                if self.flags not in ("", "-"):
                    raise illegal
                need_width("-")
            elif self.width != -1:
                raise err("IllegalFormatWidthException", str(self.width))
            elif self.flags:
                raise illegal

    def justify(self, s: str) -> str:
        if self.width == -1 or len(s) >= self.width:
            return s
        pad = " " * (self.width - len(s))
        return s + pad if self.has("-") else pad + s

    def text_out(self, s: str) -> str:
        if self.precision != -1 and self.precision < len(s):
            s = s[: self.precision]
        return self.justify(s.upper() if self.upper else s)

    def magnitude(self, prefix: str, value: str, width: int) -> str:
        """Formatter.localizedMagnitude for the US locale: grouping and zero padding."""
        dot = value.find(".")
        ip, rest = (value, "") if dot < 0 else (value[:dot], value[dot:])
        if self.has(","):
            groups: list[str] = []
            while len(ip) > 3:
                groups.insert(0, ip[-3:])
                ip = ip[:-3]
            ip = ",".join([ip] + groups)
        body = ip + rest
        if width != -1 and self.has("0") and width > len(prefix) + len(body):
            body = "0" * (width - len(prefix) - len(body)) + body
        return prefix + body

    def lead(self, neg: bool) -> str:
        if neg:
            return "(" if self.has("(") else "-"
        return "+" if self.has("+") else (" " if self.has(" ") else "")

    def adjust(self, width: int, neg: bool) -> int:
        return width - 1 if width != -1 and neg and self.has("(") else width

    def render(self, arg: Any) -> str:
        c = self.conv
        if c == "b":
            s = ("true" if arg else "false") if isinstance(arg, (bool, np.bool_)) else \
                ("false" if arg is None else "true")
            return self.text_out(s)
        if c == "s":
            if self.has("#"):
                raise self.mismatch("#")
            return self.text_out(_java_to_string(arg))
        if c == "c":
            raise _JavaFormatError("IllegalFormatConversionException", f"c != {_java_class(arg)}")
        if c in "dox":
            if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, np.integer)):
                raise _JavaFormatError("IllegalFormatConversionException", f"{c} != {_java_class(arg)}")
            return self.justify(self._integer(int(arg)))
        if c in "ah":
            raise _JavaFormatError("UnsupportedFormat", f"conversion '%{self.conv}' is not supported by lafuse")
        if c in "efg":
            if not isinstance(arg, (float, np.floating)):
                raise _JavaFormatError("IllegalFormatConversionException", f"{c} != {_java_class(arg)}")
            return self.justify(self._float(float(arg)))
        raise _JavaFormatError("UnknownFormatConversionException", f"Conversion = '{self.conv}'")

    def _integer(self, v: int) -> str:
        if self.conv == "d":
            neg = v < 0
            s = self.magnitude(self.lead(neg), str(abs(v)), self.adjust(self.width, neg))
            return s + (")" if neg and self.has("(") else "")
        for fl in "( +":
            if self.has(fl):
                raise self.mismatch(fl)
        u = v & 0xFFFFFFFFFFFFFFFF
        digits = format(u, "o" if self.conv == "o" else "x")
        prefix = ("0" if self.conv == "o" else ("0X" if self.upper else "0x")) if self.has("#") else ""
        if self.upper:
            digits = digits.upper()
        if self.has("0"):
            digits = "0" * (self.width - len(prefix) - len(digits)) + digits
        return prefix + digits

    def _float(self, v: float) -> str:
        if math.isnan(v):
            return "NAN" if self.upper else "NaN"
        neg = v < 0 or (v == 0 and math.copysign(1.0, v) < 0)
        lead = self.lead(neg)
        trail = ")" if neg and self.has("(") else ""
        if math.isinf(v):
            return lead + ("INFINITY" if self.upper else "Infinity") + trail
        v = abs(v)
        c, prec = self.conv, self.precision
        e_char = "E" if self.upper else "e"
        if c == "e":
            prec = 6 if prec == -1 else prec
            mant, e_exp, _ = _ffd(v, prec, "e")
            mant = _add_zeros(mant, prec)
            if self.has("#") and prec == 0:
                mant += "."
            exp = "+00" if v == 0.0 or e_exp is None else e_exp
            w = self.adjust(self.width - len(exp) - 1, neg) if self.width != -1 else -1
            return self.magnitude(lead, mant, w) + e_char + exp + trail
        if c == "f":
            prec = 6 if prec == -1 else prec
            mant = _add_zeros(_ffd(v, prec, "f")[0], prec)
            if self.has("#") and prec == 0:
                mant += "."
            return self.magnitude(lead, mant, self.adjust(self.width, neg)) + trail
        # general
        prec = 6 if prec == -1 else (1 if prec == 0 else prec)
        g_mant, g_exp, exp_rounded = ("0", None, 0) if v == 0.0 else _ffd(v, prec, "g")
        prec = prec - 1 if g_exp is not None else prec - (exp_rounded + 1)
        mant = _add_zeros(g_mant, prec)
        if g_exp is not None:
            w = self.adjust(self.width - len(g_exp) - 1, neg) if self.width != -1 else -1
            return self.magnitude(lead, mant, w) + e_char + g_exp + trail
        return self.magnitude(lead, mant, self.adjust(self.width, neg)) + trail


def _apply_precision(dec_exp: int, d: list[int], prec: int) -> int:
    """FormattedFloatingDecimal.applyPrecision: HALF_UP on the dtoa digits, in place."""
    n = len(d)
    if prec >= n or prec < 0:
        return dec_exp
    if prec == 0:
        if d[0] >= 5:
            d[0] = 1
            d[1:] = [0] * (n - 1)
            return dec_exp + 1
        d[:] = [0] * n
        return dec_exp
    if d[prec] >= 5:
        i = prec - 1
        while d[i] == 9 and i > 0:
            i -= 1
        if d[i] == 9:
            d[0] = 1
            d[1:] = [0] * (n - 1)
            return dec_exp + 1
        d[i] += 1
        d[i + 1:] = [0] * (n - i - 1)
    else:
        d[prec:] = [0] * (n - prec)
    return dec_exp


def _fill_decimal(prec: int, d: list[int], exp: int) -> str:
    n = len(d)
    ds = "".join(map(str, d))
    if exp > 0:
        if n < exp:
            return ds + "0" * (exp - n)
        t = min(n - exp, prec)
        return ds[:exp] + ("." + ds[exp:exp + t] if t > 0 else "")
    zeros = max(0, min(-exp, prec))
    t = max(0, min(n, prec + exp))
    if zeros > 0:
        return "0." + "0" * zeros + ds[:t]
    if t > 0:
        return "0." + ds[:t]
    return "0"


def _fill_scientific(prec: int, d: list[int], exp: int) -> tuple[str, str]:
    t = max(0, min(len(d) - 1, prec))
    mant = str(d[0]) + ("." + "".join(map(str, d[1:1 + t])) if t > 0 else "")
    sign, e = ("-", -exp + 1) if exp <= 0 else ("+", exp - 1)
    return mant, sign + (f"{e:02d}")


def _ffd(v: float, prec: int, form: str) -> tuple[str, str | None, int]:
    """FormattedFloatingDecimal: (mantissa, exponent or None, rounded exponent) for %f, %e or %g."""
    r = _dtoa(v, compatible=False)
    d = list(r.digits)
    if form == "f":
        exp = _apply_precision(r.dec_exp, d, r.dec_exp + prec)
        return _fill_decimal(prec, d, exp), None, exp - 1
    exp = _apply_precision(r.dec_exp, d, prec + 1 if form == "e" else prec)
    if form == "e" or exp - 1 < -4 or exp - 1 >= prec:
        mant, e = _fill_scientific(prec if form == "e" else prec - 1, d, exp)
        return mant, e, exp - 1
    return _fill_decimal(prec - exp, d, exp), None, exp - 1


def _add_zeros(mant: str, prec: int) -> str:
    dot = mant.find(".")
    out_prec = 0 if dot < 0 else len(mant) - dot - 1
    if out_prec >= prec:
        return mant
    return mant + ("." if dot < 0 else "") + "0" * (prec - out_prec)


def _parse_format(fmt: str) -> list[str | _Spec]:
    parts: list[str | _Spec] = []
    i, n = 0, len(fmt)
    while i < n:
        j = fmt.find("%", i)
        if j < 0:
            parts.append(fmt[i:])
            break
        if j > i:
            parts.append(fmt[i:j])
        if j + 1 >= n:
            raise _JavaFormatError("UnknownFormatConversionException", "Conversion = '%'")
        ch = fmt[j + 1]
        if ch in _VALID_CONV:
            spec = _Spec(0, "", -1, -1, ch, fmt[j:j + 2])
            if spec.conv in "%n":
                spec.index = -2
            parts.append(spec)
            i = j + 2
            continue
        m = _SPEC.match(fmt, j)
        if m is None:
            raise _JavaFormatError("UnknownFormatConversionException", f"Conversion = '{ch}'")
        idx_s, flags, width_s, prec_s, dt, conv = m.groups()
        flags = flags or ""
        for k, fl in enumerate(flags):
            if fl in flags[:k]:
                raise _JavaFormatError("DuplicateFormatFlagsException", f"Flags = '{fl}'")
        index = 0
        if idx_s:
            index = int(idx_s[:-1])
            if index <= 0:
                raise _JavaFormatError("IllegalFormatArgumentIndexException",
                                       f"Illegal format argument index = {index}")
        if "<" in flags:
            index = -1
        if dt:
            raise _JavaFormatError("UnsupportedFormat", f"date/time conversion '{m.group(0)}' is not supported")
        if conv not in _VALID_CONV:
            raise _JavaFormatError("UnknownFormatConversionException", f"Conversion = '{conv}'")
        spec = _Spec(index, flags, int(width_s) if width_s else -1,
                     int(prec_s[1:]) if prec_s else -1, conv, m.group(0))
        if spec.conv in "%n":
            spec.index = -2
        spec.check()
        parts.append(spec)
        i = m.end()
    return parts


def java_format(fmt: str, args: list[Any]) -> str:
    """``String.format(fmt, args)`` with DML scalars boxed as Long/Double/Boolean/String.

    SystemDS hands ``print("fmt", a, b)`` straight to String.format, so a type mismatch such as
    ``%d`` with a DOUBLE is a runtime error there (IllegalFormatConversionException) and here.
    Supported: flags ``-#+ 0,(<``, width, precision, ``n$`` indices and the conversions
    ``b s d o x e f g % n`` (and their upper-case forms); ``%a``, ``%h`` and ``%t`` raise instead,
    since no DML script has a use for them. ``%c`` fails as in SystemDS (a Long is no char).
    """
    for a in args:
        if not (a is None or isinstance(a, (bool, int, float, str, np.generic))):
            raise DMLRuntimeError(f"print format \"{fmt}\": only scalars can be formatted, not "
                                  f"{'a matrix' if is_matrix(a) else type(a).__name__}; use toString() first")
    try:
        out: list[str] = []
        last = -1
        ordinary = -1
        for p in _parse_format(fmt):
            if isinstance(p, str):
                out.append(p)
                continue
            if p.index == -2:
                out.append("\n" if p.conv == "n" else p.justify("%"))
                continue
            if p.index == -1:
                pos = last
            elif p.index == 0:
                ordinary += 1
                pos = last = ordinary
            else:
                pos = last = p.index - 1
            if pos < 0 or pos >= len(args):
                raise _JavaFormatError("MissingFormatArgumentException", f"Format specifier '{p.spec_str()}'")
            out.append(p.render(args[pos]))
        return "".join(out)
    except _JavaFormatError as e:
        hint = ""
        if e.exc == "IllegalFormatConversionException":
            hint = (" (%d/%o/%x need an INT argument, %e/%f/%g a DOUBLE; "
                    "use as.integer() or as.double() to convert)")
        raise DMLRuntimeError(f"print format \"{fmt}\": {e.exc}: {e.msg}{hint}") from None
