"""Parser: DML's syntax traps (newline-insensitive statements, `[` opening a multi-assignment) parse as SystemDS parses them."""

from __future__ import annotations

import pytest

from lafuse.errors import DMLSyntaxError
from lafuse.lang import ast as A
from lafuse.lang.parser import parse, unescape


def stmts(text: str) -> list[A.Stmt]:
    return parse(text).statements


def test_newline_does_not_end_statement_before_operator():
    (s,) = stmts("x = 1\n  - 2\n")
    assert isinstance(s, A.Assign) and isinstance(s.expr, A.BinOp) and s.expr.op == "-"


def test_semicolon_before_else_and_braceless_bodies():
    (s,) = stmts('if (1 < 2) print("a");\nelse if (2 < 3) print("b");\nelse print("c")')
    assert isinstance(s, A.If)
    assert isinstance(s.else_body[0], A.If)
    assert isinstance(s.else_body[0].else_body[0], A.CallStmt)


def test_braceless_else_takes_one_statement():
    # kmeans: `else C_old = C; C = C_new;` -- the second assignment is unconditional
    (w,) = stmts("while (FALSE) { if (TRUE) x = 1 else C_old = C; C = C_new; }")
    body = w.body
    assert isinstance(body[0], A.If) and len(body[0].else_body) == 1
    assert isinstance(body[1], A.Assign) and body[1].target.name == "C"


def test_precedence():
    (s,) = stmts("y = -2^2")
    e = s.expr
    assert isinstance(e, A.UnOp) and isinstance(e.operand, A.BinOp) and e.operand.op == "^"
    (s,) = stmts("y = !1 > 2")
    assert isinstance(s.expr, A.UnOp) and s.expr.op == "!" and s.expr.operand.op == ">"
    (s,) = stmts("y = 2 * 3 %% 2")
    assert s.expr.op == "*" and s.expr.right.op == "%%"
    (s,) = stmts("y = A %*% A^2")
    assert s.expr.op == "%*%" and s.expr.right.op == "^"
    (s,) = stmts("y = a | b & c")
    assert s.expr.op == "|" and s.expr.right.op == "&"
    (s,) = stmts("y = 2^3^2")
    assert s.expr.op == "^" and s.expr.right.op == "^"  # right-associative


def test_dotted_names_and_named_args():
    (s,) = stmts("o = order(target=X, by=1, decreasing=TRUE, index.return=TRUE)")
    assert [a.name for a in s.expr.args] == ["target", "by", "decreasing", "index.return"]
    (s,) = stmts("v = as.scalar(X[1, 1])")
    assert s.expr.name == "as.scalar"


def test_function_forward_reference_and_defaults():
    sc = parse("y = f(1)\nf = function(Double a, Matrix[Double] M = matrix(0, rows=0, cols=0))"
               " return (Double b) { b = a }")
    assert "f" in sc.functions
    f = sc.functions["f"]
    assert [p.name for p in f.params] == ["a", "M"]
    assert f.params[1].type_name == "matrix" and isinstance(f.params[1].default, A.Call)
    assert f.outputs[0].value_type == "double"


def test_multi_assign_after_statement_ending_in_paren_and_bracket():
    ss = stmts("x = f(1)\n[a, b] = g(2)\ny = X[1,2]\n[c, d] = g(3)")
    assert [type(s).__name__ for s in ss] == ["Assign", "MultiAssign", "Assign", "MultiAssign"]


def test_multi_assign_after_identifier_and_blank_or_comment_lines():
    ss = stmts("x = Z\n\n  \n[a, b] = g(2)\ny = W\n# note\n\n[c, d] = g(3)\nz = V\r\n\r\n[e, f] = g(4)")
    assert [type(s).__name__ for s in ss] == ["Assign", "MultiAssign", "Assign", "MultiAssign", "Assign",
                                             "MultiAssign"]
    (s,) = stmts("x = Z\n\n[1, 2]")  # not followed by '=': still indexing of Z
    assert isinstance(s, A.Assign)


def test_multi_assign_equals_on_next_line():
    (s,) = stmts("[a,\n b]\n = f(1)")
    assert isinstance(s, A.MultiAssign) and [t.name for t in s.targets] == ["a", "b"]


def test_strings_and_escapes():
    (s,) = stmts("s = 'it''s'" if False else "s = 'a\\tb\\n'")
    assert s.expr.value == "a\tb\n"
    assert unescape('x\\"y\\\\') == 'x"y\\\\'  # SystemDS keeps a doubled backslash


def test_plus_equals_and_ranges_and_parfor_options():
    ss = stmts("x += 2\nfor (i in 3:1) {}\nparfor (j in 1:10, check=0, par=4) { z = j }\n"
               "for (k in seq(1, 10, 2)) {}")
    assert ss[0].accumulate
    assert isinstance(ss[1], A.For) and ss[1].start.value == 3 and ss[1].stop.value == 1
    assert ss[2].parallel and set(ss[2].options) == {"check", "par"}
    assert ss[3].incr.value == 2


def test_source_namespace_and_cmdline_args():
    ss = stmts('source("lib/x.dml") as ns\ny = ns::f($a, ifdef($b, 2), $1)')
    assert isinstance(ss[0], A.Import) and ss[0].namespace == "ns"
    call = ss[1].expr
    assert call.name == "ns::f"
    assert isinstance(call.args[0].value, A.CmdArg) and call.args[0].value.name == "a"
    assert call.args[2].value.name == "1"


def test_whitespace_between_name_and_bracket_or_paren():
    ss = stmts("scale_lambda [m_ext, 1] = 0\nv = t (colSums (X))")
    assert ss[0].target.indexed and ss[1].expr.name == "t"


def test_numbers():
    ss = stmts("a = 1e-7\nb = 0.000001\nc = 3\nd = .5\ne = 2E3")
    assert [type(s.expr.value) for s in ss] == [float, float, int, float, float]


def test_comments():
    ss = stmts("# c1\nx = 1 # trailing\n/* block\ncomment */ y = 2")
    assert len(ss) == 2


@pytest.mark.parametrize("text,line,col", [
    ("x = (1 + 2\n", 1, 11),
    ("x = 1 +\n", 1, 8),
    ("if (x) { y = 1\n", 1, 15),
    ("x = 3 $ 4", 1, 7),
    ("y = [1, 2]", 1, 5),
])
def test_syntax_errors_have_positions(text, line, col):
    with pytest.raises(DMLSyntaxError) as ei:
        parse(text, "t.dml")
    sp = ei.value.span
    assert (sp.line, sp.col) == (line, col), ei.value.render({"t.dml": text})


def test_spans_are_recorded():
    (s,) = stmts("\n\n  z = foo + 1")
    assert s.span.line == 3 and s.target.span.col == 3
    assert s.expr.span.line == 3


def test_not_may_open_any_operand_like_antlr_precedence_climbing():
    # SystemDS: X + !A > B is X + !(A > B) (checked on 3.4: [1 2] + !([3 0] > [2 5]) = [1 3])
    (s,) = stmts("y = x + !a > b")
    assert s.expr.op == "+" and s.expr.right.op == "!" and s.expr.right.operand.op == ">"
    (s,) = stmts("y = !a & b")
    assert s.expr.op == "&" and s.expr.left.op == "!"
