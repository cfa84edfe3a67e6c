"""Java ``String.format`` (java.util.Formatter) for DML's ``print("fmt", args...)``.

Split from printing.py, whose Java 17 double-to-digits port it reuses; DML INT arguments are
formatted as Java Long and DOUBLE as Double, as SystemDS passes them.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.printing import _dtoa, java_double_str
from lafuse.runtime.values import is_matrix

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
