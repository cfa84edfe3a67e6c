"""parfor loop-dependency analysis (hops.parfor_deps): every case below was run on SystemDS 3.4,
which accepts or rejects it the same way (its message: "PARFOR loop dependency analysis:
inter-iteration (loop-carried) dependencies detected for variable(s): R."). Accepted loops must
also compute what SystemDS printed."""

from __future__ import annotations

import pytest

from lafuse.compiler import run_text
from lafuse.errors import DMLValidationError

R4 = "R = matrix(0, rows=4, cols=1)\n"
R44 = "R = matrix(0, rows=4, cols=4)\n"
R8 = "R = matrix(0, rows=8, cols=1)\n"

ACCEPTED = [
    (R4 + "parfor (i in 1:4) { R[i,1] = i }\nprint(sum(R))", "10.0"),
    (R44 + "parfor (i in 1:4) { for (j in 1:4) { R[i,j] = i * j } }\nprint(sum(R))", "100.0"),
    (R44 + "parfor (i in 1:4) { for (j in 1:4) { R[j,i] = i * j } }\nprint(sum(R))", "100.0"),
    (R44 + "parfor (i in 1:4) { parfor (j in 1:4) { R[i,j] = i * j } }\nprint(sum(R))", "100.0"),
    (R44 + "parfor (i in 1:4) { R[,i] = matrix(i, rows=4, cols=1) }\nprint(sum(R))", "40.0"),
    (R44 + "parfor (i in 1:4) { R[i,] = matrix(i, rows=1, cols=4) }\nprint(sum(R))", "40.0"),
    (R8 + "parfor (i in 1:4) { R[2*i,1] = i; R[2*i-1,1] = -i }\nprint(sum(R))", "0.0"),
    ("R = matrix(0, rows=12, cols=1)\nparfor (i in 1:4) { R[3*i,1] = i; R[3*i-1,1] = i }\nprint(sum(R))", "20.0"),
    (R4 + "parfor (i in 1:4) { R[i,1] = as.scalar(R[i,1]) + i }\nprint(sum(R))", "10.0"),
    (R4 + "parfor (i in 1:4) { v = i * 2; R[i,1] = v }\nprint(sum(R))", "20.0"),
    (R4 + "parfor (i in 1:4) { T = matrix(i, rows=2, cols=2); R[i,1] = sum(T) }\nprint(sum(R))", "40.0"),
    (R4 + "parfor (i in 1:4) { v = 0; for (j in 1:i) { v = v + j }; R[i,1] = v }\nprint(sum(R))", "20.0"),
    ("x = 5\nparfor (i in 1:4) { y = x + i }\nprint(x)", "5"),
    # a matrix summed into with += is a result (SystemDS merges by addition)
    ("S = matrix(0, rows=2, cols=2)\nparfor (i in 1:4) { S += matrix(i, rows=2, cols=2) }\nprint(sum(S))", "40.0"),
    # a read through a nested loop's variable passes (SystemDS's bounds test accepts it)
    ("R = matrix(0, rows=1, cols=4)\nparfor (i in 1:4) { for (j in 1:4) { x = as.scalar(R[1,j]) }; R[1,i] = 1 }\n"
     "print(sum(R))", "4.0"),
    # check=0 switches the analysis off
    (R4 + "parfor (i in 1:4, check=0) { R[1,1] = 7 }\nprint(sum(R))", "7.0"),
]

REJECTED = [  # script, variables, line:col of the reported access
    (R4 + "parfor (i in 1:4) { R[1,1] = i }", "R", "2:21"),
    ("s = 0\nparfor (i in 1:4) { s = s + i }", "s", "2:21"),
    ("s = 0\nparfor (i in 1:4) { s += i }", "s", "2:21"),
    ("y = 0\nparfor (i in 1:4) { y = i * 2; print(y) }", "y", "2:21"),
    ("s = 0\nparfor (i in 1:4) { if (i > 2) { s = i } }\nprint(s)", "s", "2:34"),
    ("R = matrix(0, rows=5, cols=1)\nparfor (i in 1:4) { R[i+1,1] = R[i,1] + 1 }", "R", "2:21"),
    ("R = matrix(0, rows=5, cols=1)\nparfor (i in 1:4) { R[i,1] = as.scalar(R[i+1,1]) }", "R", "2:21"),
    (R4 + "parfor (i in 1:4) { x = sum(R); R[i,1] = x + i }", "R", "2:29"),
    (R4 + "parfor (i in 1:4) { R = R + 1 }", "R", "2:21"),
    (R44 + "parfor (i in 1:4) { for (j in 1:4) { R[j,1] = i * j } }", "R", "2:38"),
    (R8 + "parfor (i in 1:4) { R[i:(i+1),1] = matrix(i, rows=2, cols=1) }", "R", "2:21"),
    (R8 + "parfor (i in 1:4) { R[(2*i-1):(2*i),1] = matrix(i, rows=2, cols=1) }", "R", "2:21"),
    (R4 + "k = 2\nparfor (i in 1:4) { R[k,1] = i }", "R", "3:21"),
    (R4 + "parfor (i in 1:4) { k = i; R[k,1] = i }", "R", "2:28"),
    ("R = matrix(0, rows=12, cols=1)\nparfor (i in 1:4) { R[2*i,1] = i; R[i,1] = i }", "R", "2:21"),
    ("R = matrix(0, rows=1, cols=4)\nparfor (i in 1:4) { x = as.scalar(R[1,5-i]); R[1,i] = x + 1 }", "R", "2:35"),
    # the inner loop writes one cell in all its iterations
    ("R = matrix(0, rows=1, cols=4)\nparfor (i in 1:4) { parfor (j in 1:4) { R[1,i] = 1 } }", "R", "2:41"),
    ("s = 0\nR = matrix(0, rows=4, cols=1)\nparfor (i in 1:4) { s = i; R[1,1] = s }", "s, R", "3:21"),
]


@pytest.mark.parametrize("text,printed", ACCEPTED)
def test_independent_loops_run(text, printed):
    out, _ = run_text(text + "\n")
    assert out.splitlines()[-1] == printed


@pytest.mark.parametrize("text,names,where", REJECTED)
def test_loop_carried_dependencies_are_rejected_where_they_are(text, names, where):
    with pytest.raises(DMLValidationError) as ei:
        run_text(text + "\n", "p.dml")
    e = ei.value
    assert e.message == ("parfor loop dependency analysis: inter-iteration (loop-carried) dependencies "
                         f"detected for variable(s): {names}; ensure the iterations are independent "
                         "(check=0 turns this check off)")
    assert f"{e.span.line}:{e.span.col}" == where


def test_a_dependency_is_reported_with_exit_1(capsys, tmp_path):
    from lafuse import cli

    path = tmp_path / "p.dml"
    path.write_text("s = 0\nparfor (i in 1:4) { s = s + i }\nprint(s)\n", encoding="utf-8")
    assert cli.main(["run", str(path), "--no-codegen"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0].startswith(f"{path}:2:21: validation error: parfor loop dependency analysis")
    assert err.splitlines()[2] == "    " + " " * 20 + "^~~~~~~~~"
