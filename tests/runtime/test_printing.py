"""Printing must match SystemDS 3.4.0 byte for byte.

Every expected string below was observed from SystemDS 3.4.0 (``print``/``toString`` in a DML
script run with ``-exec singlenode`` on OpenJDK 17) or, where marked, from Java 17 itself
(``Double.toString``, ``DecimalFormat``, ``String.format``: the exact calls SystemDS makes).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from lafuse.errors import DMLRuntimeError
from lafuse.runtime.printing import decimal_format, dml_str, java_double_str, java_format, to_string
from lafuse.runtime.values import Frame, ListValue

NAN, INF = float("nan"), float("inf")

# ------------------------------------------------------------------------- Double.toString

# print(a + " " + b + ...) in SystemDS 3.4.0
SDS_CONCAT = [(22.0, "22.0"), (1e-7, "1.0E-7"), (0.001, "0.001"), (1e7, "1.0E7"), (1234567.0, "1234567.0"),
              (-0.0, "-0.0"), (5.608845687280561e-6, "5.608845687280561E-6"), (NAN, "NaN"), (INF, "Infinity"),
              (-INF, "-Infinity"), (4.5, "4.5"), (1 / 3, "0.3333333333333333"), (1e7, "1.0E7"),
              (2.0**62, "4.6116860184273879E18"), (1e23, "9.999999999999999E22"),
              (2.0**63, "9.223372036854776E18"), (0.0007, "7.0E-4"), (3.0, "3.0")]

# Java 17 Double.toString
JAVA_TOSTRING = [(5e-324, "4.9E-324"), (1.7976931348623157e308, "1.7976931348623157E308"),
                 (2.2250738585072014e-308, "2.2250738585072014E-308"), (0.0005, "5.0E-4"),
                 (1e-5, "1.0E-5"), (123456789.0, "1.23456789E8"), (1e21, "1.0E21"), (-2.5, "-2.5"),
                 (2.0**-20, "9.5367431640625E-7"), (1234.5678, "1234.5678"), (0.9995, "0.9995")]


@pytest.mark.parametrize("x,expected", SDS_CONCAT + JAVA_TOSTRING)
def test_java_double_str(x, expected):
    assert java_double_str(x) == expected


def test_java_double_str_is_not_always_shortest():
    # the JDK<19 algorithm: Python's shortest repr differs, SystemDS prints Java 17's digits
    assert repr(2.0**62) == "4.611686018427388e+18"
    assert java_double_str(2.0**62) == "4.6116860184273879E18"


def test_dml_str_scalars():
    # print(3); print(TRUE); print(3.0); print("s") in SystemDS 3.4.0
    assert dml_str(3) == "3"
    assert dml_str(True) == "TRUE"
    assert dml_str(False) == "FALSE"
    assert dml_str(3.0) == "3.0"
    assert dml_str("s") == "s"
    assert dml_str(np.float64(0.5)) == "0.5"
    assert dml_str(np.int64(4611686018427387904)) == "4611686018427387904"


# ------------------------------------------------------------------------- DecimalFormat / toString

# Java 17 DecimalFormat (grouping off) with min=max fraction digits, and the default pattern (-1)
JAVA_DECIMAL = [  # x, decimal=-1, 0, 1, 3
    (2.0**62, "4611686018427387900", "4611686018427387900", "4611686018427387900.0", "4611686018427387900.000"),
    (5e-324, "0", "0", "0.0", "0.000"),
    (0.9995, "1", "1", "1.0", "1.000"),
    (99.5, "99.5", "100", "99.5", "99.500"),
    (999.9996, "1000", "1000", "1000.0", "1000.000"),
    (2.675, "2.675", "3", "2.7", "2.675"),
    (0.125, "0.125", "0", "0.1", "0.125"),
    (0.0025, "0.003", "0", "0.0", "0.003"),
    (0.0005, "0", "0", "0.0", "0.000"),
    (0.0007, "0.001", "0", "0.0", "0.001"),
    (-2.5, "-2.5", "-2", "-2.5", "-2.500"),
    (1234.5678, "1234.568", "1235", "1234.6", "1234.568"),
]


@pytest.mark.parametrize("x,dm1,d0,d1,d3", JAVA_DECIMAL)
def test_decimal_format(x, dm1, d0, d1, d3):
    assert [decimal_format(x, d) for d in (-1, 0, 1, 3)] == [dm1, d0, d1, d3]


X9 = np.array([[1.23456, -2.5, 0], [-0.0001, 1e20, 1e-7], [0.0005, 0.0015, 2.5]])


def test_tostring_default_layout():
    # X = matrix("1 2 3 4 5 6", rows=2, cols=3); print(toString(X)): no trailing space, "\n" after
    # every row (print adds one more)
    x = np.arange(1.0, 7.0).reshape(2, 3)
    assert to_string(x) == "1.000 2.000 3.000\n4.000 5.000 6.000\n"
    assert dml_str(x) == "1.000 2.000 3.000\n4.000 5.000 6.000\n"  # print(X) is toString(X)
    assert to_string(sp.csr_array(x)) == to_string(x)


def test_tostring_rounding_and_decimals():
    assert to_string(X9) == ("1.235 -2.500 0.000\n-0.000 100000000000000000000.000 0.000\n"
                             "0.000 0.002 2.500\n")
    assert to_string(X9, decimal=1) == "1.2 -2.5 0.0\n-0.0 100000000000000000000.0 0.0\n0.0 0.0 2.5\n"
    assert to_string(X9, decimal=0) == "1 -2 0\n-0 100000000000000000000 0\n0 0 2\n"
    assert to_string(X9, decimal=5) == ("1.23456 -2.50000 0.00000\n-0.00010 100000000000000000000.00000 0.00000\n"
                                        "0.00050 0.00150 2.50000\n")
    assert to_string(X9, decimal=-1) == "1.235 -2.5 0\n-0 100000000000000000000 0\n0 0.002 2.5\n"
    # toString(matrix("0.0007 0.0025 2.675 99.5 999.9996", 1, 5))
    assert to_string(np.array([[0.0007, 0.0025, 2.675, 99.5, 999.9996]])) == "0.001 0.003 2.675 99.500 1000.000\n"


def test_tostring_sparse_sep_and_truncation():
    assert to_string(X9, sparse=True) == ("1 1 1.235\n1 2 -2.500\n2 1 -0.000\n2 2 100000000000000000000.000\n"
                                          "2 3 0.000\n3 1 0.000\n3 2 0.002\n3 3 2.500\n")
    assert to_string(sp.csr_array(X9), sparse=True) == to_string(X9, sparse=True)
    assert to_string(X9, sep=",", linesep="|") == ("1.235,-2.500,0.000|-0.000,100000000000000000000.000,0.000|"
                                                    "0.000,0.002,2.500|")
    assert to_string(X9, rows=2, cols=1) == "1.235\n-0.000\n"
    y = np.arange(1.0, 10.0).reshape(3, 3)
    assert to_string(y, sparse=True, sep=", ", linesep=";") == (
        "1, 1, 1.000;1, 2, 2.000;1, 3, 3.000;2, 1, 4.000;2, 2, 5.000;2, 3, 6.000;3, 1, 7.000;3, 2, 8.000;"
        "3, 3, 9.000;")
    assert to_string(y, rows=0) == ""
    assert to_string(y, rows=-1, cols=-5) == "1.000 2.000 3.000\n4.000 5.000 6.000\n7.000 8.000 9.000\n"


def test_tostring_special_values_and_shapes():
    w = np.array([[INF, -INF, NAN], [-INF, INF, INF], [INF, INF, INF]])  # X / 0 of X9
    assert to_string(w) == "Infinity -Infinity NaN\n-Infinity Infinity Infinity\nInfinity Infinity Infinity\n"
    assert to_string(np.array([[-0.0, -0.0]])) == "0.000 0.000\n"
    assert to_string(-X9) == ("-1.235 2.500 0.000\n0.000 -100000000000000000000.000 -0.000\n"
                              "-0.000 -0.002 -2.500\n")
    assert to_string(np.zeros((0, 0))) == ""
    assert to_string(np.zeros((0, 3))) == ""
    assert to_string(np.zeros((3, 0))) == "0.000\n0.000\n0.000\n"
    assert to_string(np.zeros((2, 2)), sparse=True) == ""
    # SystemDS 3.4.0 dies with ArrayIndexOutOfBoundsException on toString(X, cols=0)
    with pytest.raises(DMLRuntimeError, match="cols=0"):
        to_string(np.ones((3, 3)), cols=0)


def test_print_truncates_to_100x100():
    text = to_string(np.ones((150, 120)))
    lines = text.split("\n")
    assert len(lines) == 101 and lines[-1] == ""
    assert all(len(ln.split(" ")) == 100 for ln in lines[:-1])


def test_tostring_scalars():
    assert to_string(3.5) == "3.5"
    assert to_string("abc") == "abc"


# ------------------------------------------------------------------------- lists and frames

def test_list_printing():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    expected = "List containing:\n[1, \nMatrix:\n1.000 2.000 3.000\n4.000 5.000 6.000\n]"
    assert dml_str(ListValue([1, x])) == expected
    assert to_string(ListValue([1, x])) == expected
    assert dml_str(ListValue([1, 2], ["a", "b"])) == "List containing:\n[1, 2]"
    assert dml_str(ListValue([3.0, 1e-7, False, "x", 5])) == "List containing:\n[3.0, 1.0E-7, FALSE, x, 5]"
    assert dml_str(ListValue([])) == "List containing:]"
    nested = ListValue([2.5, True, "s", ListValue([3, np.ones((1, 1))])], ["a", "b", "c", "d"])
    assert dml_str(nested) == "List containing:\n[2.5, TRUE, s, List containing:\n[3, \nMatrix:\n1.000\n]]"
    two = ListValue([np.ones((2, 2)), np.full((2, 2), 2.0)])
    assert to_string(two, rows=1, decimal=1, sep=",") == (
        "List containing:\n[\nMatrix:\n1.0,1.0\n, \nMatrix:\n2.0,2.0\n]")
    # nested lists get rows and cols swapped (SystemDS quirk): rows=1, cols=2 prints 2 rows x 1 col
    inner = ListValue([ListValue([np.ones((3, 2))])])
    assert to_string(inner, rows=1, cols=2) == "List containing:\n[List containing:\n[\nMatrix:\n1.000\n1.000\n]]"


def test_list_print_truncates_matrices():
    text = dml_str(ListValue([np.ones((150, 1))]))
    assert text.count("1.000\n") == 100


def test_frame_printing():
    f = Frame(columns=[[1, 3], [2, 4]], schema=["INT32", "INT32"])
    assert dml_str(f) == "# FRAME: nrow = 2, ncol = 2\n# C1 C2\n# INT32 INT32\n1 2\n3 4\n"
    assert to_string(f, rows=1, cols=1, sep=",", linesep="|") == "# FRAME: nrow = 2, ncol = 2|#,C1|#,INT32|1|"
    g = Frame(columns=[[1, -3], [2.5, 0.0], [True, False], ["ab c", None]],
              schema=["INT64", "FP64", "BOOLEAN", "STRING"], names=["x", "y", "z", "w"])
    assert dml_str(g) == ("# FRAME: nrow = 2, ncol = 4\n# x y z w\n# INT64 FP64 BOOLEAN STRING\n"
                          "1 2.500 TRUE ab c\n-3 0.000 FALSE null\n")


# ------------------------------------------------------------------------- String.format

def test_java_format_observed_in_systemds():
    assert java_format("a %d b %5.2f c %s d %s e %s", [3, 2.5, "x", True, 1.5]) == "a 3 b  2.50 c x d true e 1.5"
    assert java_format("%s %s", [2, 1e-7]) == "2 1.0E-7"
    assert java_format("%b %b %x %e %E %g %%n%n|", [True, 0, 255, 12345.678, 0.000123, 0.0001]) == (
        "true true ff 1.234568e+04 1.230000E-04 0.000100000 %n\n|")
    assert java_format("%-6d|%+d|%06.2f|%,d|%(d|%#x|% d", [42, 5, -3.14159, 1234567, -12, 255, 7]) == (
        "42    |+5|-03.14|1,234,567|(12)|0xff| 7")
    assert java_format("%s", [1]) == "1"
    assert java_format("%5s|%-5s|%.2s", ["ab", "cd", "xyz"]) == "   ab|cd   |xy"
    assert java_format("%.1f %.2f %.0f %.0f %.3e", [0.25, 1.005, 2.5, 3.5, 12345.6785]) == "0.3 1.01 3 4 1.235e+04"
    assert java_format("%f %e %g %g %g", [INF, -INF, NAN, 1e-5, 123456789.0]) == (
        "Infinity -Infinity NaN 1.00000e-05 1.23457e+08")


# Java 17 String.format
JAVA_FORMAT = [
    ("%2$s %1$s", [1, 2], "2 1"),
    ("%s %<s %s", [1, 2], "1 1 2"),
    ("%d%%", [5], "5%"),
    ("x%ny", [1], "x\ny"),
    ("%1$s %s %s", [7, 8], "7 7 8"),
    ("%.2f %.2f", [1.005, 2.675], "1.01 2.68"),
    ("%10.3e|%-10.2e|", [12345.678, -0.000123], " 1.235e+04|-1.23e-04 |"),
    ("%,.3f", [-1234567.891], "-1,234,567.891"),
    ("%,d", [-1234567], "-1,234,567"),
    ("%(,.2f", [-1234.5], "(1,234.50)"),
    ("%08.2f", [NAN], "     NaN"),
    ("%+.1e", [9.96], "+1.0e+01"),
    ("%.0e", [9.5], "1e+01"),
    ("%g", [0.0001], "0.000100000"),
    ("%g", [9.999995e-05], "0.000100000"),
    ("%g", [999999.5], "1.00000e+06"),
    ("%.3g", [1e10], "1.00e+10"),
    ("%#.0f", [3.0], "3."),
    ("%#.0e", [3.0], "3.e+00"),
    ("%#x %#o", [-1, 8], "0xffffffffffffffff 010"),
    ("%X", [-255], "FFFFFFFFFFFFFF01"),
    ("%-5%|", [1], "%    |"),
    ("%5%|", [1], "    %|"),
    ("%S %B", ["abc", False], "ABC FALSE"),
    ("%.2s|%5.1s|", ["hello", "xyz"], "he|    x|"),
    ("%b", [0], "true"),
    ("%e", [5e-324], "4.900000e-324"),
    ("%.3f", [0.0005], "0.001"),
    ("%.1f", [0.05], "0.1"),
    ("%.1f", [0.95], "1.0"),
    ("%.0f", [0.5], "1"),
    ("%e", [2.0**62], "4.611686e+18"),
    ("%.2f", [1e23], "99999999999999990000000.00"),
    ("%g", [0.0025], "0.00250000"),
    ("%.3g", [0.0005], "0.000500"),
    ("%.3g", [999.9996], "1.00e+03"),
    ("%012.3f", [-2.5], "-0000002.500"),
    ("%012.3f", [0.0005], "00000000.001"),
    ("%f", [-0.0], "-0.000000"),
]


@pytest.mark.parametrize("fmt,args,expected", JAVA_FORMAT)
def test_java_format(fmt, args, expected):
    assert java_format(fmt, args) == expected


@pytest.mark.parametrize("fmt,args,exc,detail", [
    # observed from SystemDS 3.4.0: print("%d", 2.5) and print("%f", 3) fail at run time
    ("%d", [2.5], "IllegalFormatConversionException", "d != java.lang.Double"),
    ("%d", [2.0], "IllegalFormatConversionException", "d != java.lang.Double"),
    ("%f", [3], "IllegalFormatConversionException", "f != java.lang.Long"),
    ("%s and %s", [1], "MissingFormatArgumentException", "Format specifier '%s'"),
    # Java 17 String.format
    ("%d", [True], "IllegalFormatConversionException", "d != java.lang.Boolean"),
    ("%c", [65], "IllegalFormatConversionException", "c != java.lang.Long"),
    ("abc%", [1], "UnknownFormatConversionException", "Conversion = '%'"),
    ("%q", [1], "UnknownFormatConversionException", "Conversion = 'q'"),
    ("%0$s", [1], "IllegalFormatArgumentIndexException", "Illegal format argument index = 0"),
    ("%<s", [1], "MissingFormatArgumentException", "Format specifier '%<s'"),
    ("%-d", [1], "MissingFormatWidthException", "%-d"),
    ("%.2d", [1], "IllegalFormatPrecisionException", "2"),
    ("%#d", [1], "FormatFlagsConversionMismatchException", "Conversion = d, Flags = #"),
    ("%+ X", [1], "IllegalFormatFlagsException", "Flags = '^+ '"),
    ("%(,%", [1], "IllegalFormatFlagsException", "Flags = ',('"),
    ("%--5d", [1], "DuplicateFormatFlagsException", "Flags = '-'"),
])
def test_java_format_errors(fmt, args, exc, detail):
    with pytest.raises(DMLRuntimeError) as ei:
        java_format(fmt, args)
    assert exc in str(ei.value) and detail in str(ei.value)


def test_java_format_rejects_non_scalars():
    # SystemDS 3.4.0 fails with a ClassCastException on print("%s", X)
    with pytest.raises(DMLRuntimeError, match="only scalars"):
        java_format("%s", [np.ones((2, 2))])


def test_java_format_type_error_explains_the_fix():
    with pytest.raises(DMLRuntimeError, match="as.integer"):
        java_format("%d", [2.5])


def test_formats_are_consistent_on_many_values():
    # a cheap self-check of the dtoa port: digits of %.17e must denote the same double
    rng = np.random.default_rng(7)
    for x in rng.standard_normal(300) * 10.0 ** rng.integers(-30, 30, 300):
        x = float(x)
        assert float(java_double_str(x)) == x
        assert math.isclose(float(java_format("%.16e", [x])), x, rel_tol=1e-15)
