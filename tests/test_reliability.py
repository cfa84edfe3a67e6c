"""What a user gets for a bad command line, a bad config file, a bad Python input or an operation
beyond the memory budget: a message naming the fault and exit code 1 (never an internal error),
or the correct result."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import lafuse
from lafuse import config as cfgmod
from lafuse import memory
from lafuse.cli import main
from lafuse.errors import DMLRuntimeError


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own exits (usage errors, --version)
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


# ------------------------------------------------------------------ command line

def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("lafuse ") and out.split()[1][0].isdigit()


def test_script_file_and_inline_text_together_is_an_error(capsys, tmp_path: Path):
    f = tmp_path / "a.dml"
    f.write_text('print("from the file")')
    code, out, err = run_cli(capsys, "run", str(f), "-s", 'print("inline")')
    assert code == 1 and out == ""
    assert "not both" in err and str(f) in err


def test_no_script_is_an_error(capsys):
    code, _, err = run_cli(capsys, "run")
    assert code == 1 and "give a script path or -s" in err


@pytest.mark.parametrize("argv, message", [
    (["--stats", "-3"], "argument --stats: expected a non-negative integer, got -3"),
    (["--stats", "many"], "argument --stats: expected a non-negative integer, got 'many'"),
    (["--threads", "0"], "argument --threads: expected an integer of at least 1, got 0"),
    (["--fusion", "bogus"], "argument --fusion: invalid choice: 'bogus'"),
    (["--explain", "everything"], "argument --explain: invalid choice: 'everything'"),
])
def test_bad_options_exit_1_naming_the_option(capsys, argv, message):
    code, out, err = run_cli(capsys, "run", "-s", "print(1)", *argv)
    assert code == 1 and out == "" and message in err


def test_unknown_command_exits_1(capsys):
    code, _, err = run_cli(capsys, "frobnicate")
    assert code == 1 and "invalid choice: 'frobnicate'" in err


def test_missing_builtins_directory_is_an_error(capsys, tmp_path: Path):
    missing = tmp_path / "no_such_dir"
    code, out, err = run_cli(capsys, "run", "-s", "print(1)", "--builtins", str(missing))
    assert code == 1 and out == "" and f"builtin directory '{missing}' does not exist" in err
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"builtin_dirs": [str(missing)]}))
    code, out, err = run_cli(capsys, "run", "-s", "print(1)", "--config", str(cfg))
    assert code == 1 and f"builtin directory '{missing}' does not exist" in err


def test_threads_option_runs_with_that_budget(capsys):
    code, out, _ = run_cli(capsys, "run", "-s", "X = matrix(seq(1, 6), rows=2, cols=3)\nprint(sum(X %*% t(X)))",
                           "--threads", "1")
    assert code == 0 and out == "155.0\n"


def test_thread_budget_caps_blas():
    from threadpoolctl import threadpool_info

    from lafuse.threads import blas_limited

    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS is loaded
    with blas_limited(1):
        inside = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert inside and all(n == 1 for n in inside)


def test_taken_ranges_run_once_each_and_a_failure_waits_for_the_rest():
    """threads.run_taken: every range exactly once, on one thread or several, and a range that
    raises raises in the caller only after the other ranges ran (they write into the caller's
    arrays), whichever thread took it."""
    import time

    from lafuse.threads import run_taken

    cuts = [0, 3, 4, 9, 9, 15]
    for t in (1, 2, 3):
        seen = np.zeros(15, dtype=int)

        def mark(lo, hi, out):
            out[lo:hi] += 1

        run_taken(mark, cuts, t, seen)
        assert seen.tolist() == [1] * 15
    def fail_first(lo, hi, done):
        if lo == 0:
            raise ValueError("range 0")
        time.sleep(0.01)
        done.append(lo)

    for _ in range(5):
        done: list[int] = []
        with pytest.raises(ValueError, match="range 0"):
            run_taken(fail_first, cuts, 2, done)
        assert sorted(done) == [3, 4, 9, 9]


# ------------------------------------------------------------------ config files

@pytest.mark.parametrize("content, message", [
    ({"threads": "many"}, "'threads' must be an integer, not \"many\""),
    ({"threads": 0}, "'threads' must be at least 1, not 0"),
    ({"threads": 1.5}, "'threads' must be an integer, not 1.5"),
    ({"fusion": "bogus"}, "'fusion' must be one of \"cost\", \"fuse-all\", \"fuse-no-redundancy\", not \"bogus\""),
    ({"codegen": "yes"}, "'codegen' must be true or false, not \"yes\""),
    ({"memory_budget": 0}, "'memory_budget' must be greater than 0, not 0"),
    ({"memory_budget": -1.5}, "'memory_budget' must be greater than 0, not -1.5"),
    ({"disabled_rules": "cse"}, "'disabled_rules' must be a list of strings, not \"cse\""),
    ({"exec_type": "spark"}, "'exec_type' must be one of \"auto\", \"local\", \"dask\", not \"spark\""),
    ({"stats_top": -2}, "'stats_top' must be at least 0, not -2"),
    ({"no_such_knob": 1}, "unknown config keys ['no_such_knob']"),
    ([1, 2], "a config file holds a JSON object"),
])
def test_bad_config_values_exit_1_naming_the_key(capsys, tmp_path: Path, content, message):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(content))
    code, out, err = run_cli(capsys, "run", "-s", "print(1)", "--config", str(cfg))
    assert code == 1 and out == ""
    assert err.startswith(f"lafuse: bad config: {cfg}") and message in err


def test_config_file_that_is_not_json_or_missing(capsys, tmp_path: Path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"threads": 2,\n "codegen": tru}')
    code, _, err = run_cli(capsys, "run", "-s", "print(1)", "--config", str(cfg))
    assert code == 1 and f"{cfg}:2:13: not valid JSON" in err
    cfg.write_bytes(b'{"threads": "\xff"}')
    code, _, err = run_cli(capsys, "run", "-s", "print(1)", "--config", str(cfg))
    assert code == 1 and "not UTF-8" in err
    code, _, err = run_cli(capsys, "run", "-s", "print(1)", "--config", str(tmp_path / "none.json"))
    assert code == 1 and "cannot read config file" in err and "No such file" in err


def test_good_config_values_are_converted(tmp_path: Path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"threads": 2.0, "memory_budget": 1, "disabled_rules": ["a"], "explain": None}))
    c = cfgmod.Config.from_file(str(cfg))
    assert (c.threads, c.memory_budget, c.disabled_rules, c.explain) == (2, 1.0, ("a",), None)
    assert type(c.threads) is int and type(c.memory_budget) is float


# ------------------------------------------------------------------ Python inputs

def test_numpy_scalars_are_scalars():
    r = lafuse.run_dml("X = matrix(0, rows=n, cols=2)\nr = nrow(X)\ny = f * 2\nb = !t\nz = a + 1",
                       inputs={"n": np.int64(3), "f": np.float32(1.5), "t": np.bool_(True), "a": np.array(4.0)},
                       outputs=["r", "y", "b", "z"])
    assert r == {"r": 3, "y": 3.0, "b": False, "z": 5.0}
    assert type(r["r"]) is int and type(r["b"]) is bool


@pytest.mark.parametrize("value, message", [
    (np.ones((2, 2, 2)), "input 'X' has 3 dimensions (2, 2, 2); lafuse matrices are 2-D"),
    (np.ones((2, 2)) * (1 + 2j), "input 'X' holds complex values"),
    (np.array(["2020-01-01", "2021-01-01"], dtype="datetime64[D]"), "input 'X' holds datetime values"),
    (np.array([1, 2], dtype="timedelta64[s]"), "input 'X' holds timedelta values"),
    (np.array(["1.5", "2"]), "input 'X' holds string values"),
    (np.array([{"a": 1}], dtype=object), "input 'X' holds object values"),
    (np.ma.masked_array([1.0, 2.0], mask=[False, True]), "input 'X' is a masked array"),
    (sp.csr_array(np.eye(3) * 1j), "input 'X' holds complex values"),
    ([[1.0, 2.0], [3.0]], "input 'X' is not a rectangular array"),
    (np.complex128(1 + 1j), "input 'X' holds complex values"),
])
def test_inputs_that_cannot_be_matrices_are_refused(value, message):
    with pytest.raises(ValueError) as e:
        lafuse.run_dml("s = sum(X)", inputs={"X": value}, outputs=["s"])
    assert message in str(e.value)


def test_unsupported_input_type_is_a_type_error():
    with pytest.raises(TypeError, match="input 'X': cannot pass a value of type object"):
        lafuse.run_dml("s = X", inputs={"X": object()}, outputs=["s"])


def test_real_inputs_of_every_kind_keep_their_values():
    pd = pytest.importorskip("pandas")
    ins = {"B": np.array([[True, False]]), "I": np.array([[1, 2]], dtype=np.int32),
           "U": np.array([[3, 4]], dtype=np.uint8), "F": np.array([[0.5, 1.5]], dtype=np.float32),
           "D": pd.DataFrame({"a": [1, 2], "b": [3.5, 4.0]}), "O": np.array([1, 2.5], dtype=object),
           "S": sp.csr_array(np.array([[0, 2], [3, 0]], dtype=np.int64)), "L": [1.0, 2.0, 3.0]}
    r = lafuse.run_dml("b = sum(B)\ni = sum(I)\nu = sum(U)\nf = sum(F)\nd = sum(D)\no = sum(O)\ns = sum(S)\n"
                       "l = nrow(L)", inputs=ins, outputs=list("biufdosl"))
    assert r == {"b": 1.0, "i": 3.0, "u": 7.0, "f": 2.0, "d": 10.5, "o": 3.5, "s": 5.0, "l": 3}


# ------------------------------------------------------------------ memory budget

def test_operation_beyond_the_memory_budget_stops_before_allocating(capsys, tmp_path: Path):
    """The sizes are known when the block is lowered: the error names the statement; the statements
    before it ran."""
    script = tmp_path / "big.dml"
    script.write_text('print("before")\nX = matrix(1, rows=100000, cols=100000)\nprint(sum(X))\n')
    code, out, err = run_cli(capsys, "run", str(script))
    assert code == 1 and out == "before\n"
    assert f"{script}:2:5: runtime error: 'matrix' with a 100000x100000 result needs 80 GB, beyond the " \
           f"memory budget of" in err
    assert "raise memory_budget in a --config file" in err


def test_memory_budget_from_config_decides(capsys, tmp_path: Path):
    script = tmp_path / "mm.dml"
    script.write_text("X = rand(rows=2000, cols=50, seed=3)\nY = X %*% t(X)\nprint(nrow(Y) + sum(Y > 1e9))\n")
    budget = 20e6 / memory.physical_memory()  # 20 MB: X (0.8 MB) fits, Y (32 MB, with X and t(X) 33.6 MB) does not
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"memory_budget": budget}))
    # (--exec local: under auto an operator beyond the budget that Dask implements runs there instead,
    # tests/on_dask/test_distributed.py)
    code, out, err = run_cli(capsys, "run", str(script), "--config", str(cfg), "--exec", "local")
    assert code == 1 and f"{script}:2:7: runtime error: '%*%' with a 2000x2000 result needs 33.6 MB" in err
    cfg.write_text(json.dumps({"memory_budget": budget * 4}))  # Y > 1e9 beside Y: 64 MB
    code, out, err = run_cli(capsys, "run", str(script), "--config", str(cfg), "--exec", "local")
    assert code == 0 and out == "2000.0\n", err


def test_sizes_known_only_at_run_time_are_guarded_at_the_allocation(capsys):
    """``s`` is computed in the same block, so the guard in the kernel itself stops the allocation."""
    code, out, err = run_cli(capsys, "run", "-s",
                             "v = rand(rows=3, cols=1, min=1, max=1)\ns = as.integer(sum(v) * 30000)\n"
                             "X = matrix(1, rows=s, cols=s)\nprint(sum(X))", "--no-codegen")
    assert code == 1 and "<inline>:3:5: runtime error: 'matrix' with a 90000x90000 result needs 64.8 GB" in err
    code, out, err = run_cli(capsys, "run", "-s", "print(sum(seq(1, 1e12)))")
    assert code == 1 and "'seq' with" in err and "needs 8 TB" in err


def test_empty_and_sparse_results_of_huge_dimensions_fit():
    """A 1e6 x 1e6 matrix of zeros is an empty CSR (8 MB of row pointers), as in SystemDS."""
    r = lafuse.run_dml("X = matrix(0, rows=1000000, cols=1000000)\nY = X * 2\ns = sum(Y)\nn = nrow(Y)",
                       outputs=["s", "n"])
    assert r == {"s": 0.0, "n": 1000000}


def test_memory_budget_in_python_api():
    with cfgmod.using(memory_budget=1e6 / memory.physical_memory(), exec_type="local"):  # 1 MB; auto: Dask
        with pytest.raises(DMLRuntimeError) as e:
            lafuse.run_dml("X = rand(rows=1000, cols=1000)\ns = sum(X)", outputs=["s"])
    assert "'rand' with a 1000x1000 result needs 8 MB, beyond the memory budget of 1 MB" in str(e.value)


def test_zero_keeping_operators_are_estimated_by_their_operands_nonzeros(capsys, tmp_path: Path):
    """``X != 0`` has exactly X's non-zeros (known across blocks: the loop below reads W with them),
    ``X > 0``, ``X ^ 2``, ``abs(X)`` at most X's (hops.sizes.nnz_bound): over a 1e5 x 1e5 X with 3
    non-zeros none of them is estimated as its 80 GB dense form, so the script runs within the
    budget and prints what it computes."""
    data = tmp_path / "x.txt"
    data.write_text("1 2 1.5\n7 7 2.0\n100000 1 -1.0\n")
    (tmp_path / "x.txt.mtd").write_text(json.dumps({"data_type": "matrix", "value_type": "double",
                                                    "rows": 100000, "cols": 100000, "nnz": 3, "format": "text"}))
    script = tmp_path / "s.dml"
    script.write_text(f'X = read("{data}")\nW = X != 0\ns = 0\nfor (i in 1:2) {{\n'
                      '  Z = (X > 0) * W + X ^ 2 + abs(X) / 2\n  s = s + sum(Z)\n}\nprint(s)\n')
    code, plan, err = run_cli(capsys, "explain", str(script), "--until", "plan", "--no-codegen")
    assert (code, err) == (0, "") and "DASK" not in plan, plan  # (auto sends what is over budget to Dask)
    assert re.search(r"^-+CP tread W +-> _r\d+ \[100000,100000,3\]", plan, re.M), plan
    code, out, err = run_cli(capsys, "run", str(script), "--no-codegen", "--exec", "local")
    # (X > 0) * W: 2; X ^ 2: 2.25 + 4 + 1; abs(X) / 2: 2.25; twice
    assert (code, err) == (0, "") and out == "23.0\n"


def test_huge_sparse_products_are_estimated_by_their_nonzeros(capsys, tmp_path: Path):
    """Worst-case non-zeros (hops.sizes.nnz_bound), not dense cells, for products of sparse matrices of
    unknown result sparsity: 1e5 x 1e5 with 3 non-zeros, whose dense forms would be 80 GB each."""
    data = tmp_path / "x.txt"
    data.write_text("1 2 1.5\n7 7 2.0\n100000 1 -1.0\n")
    (tmp_path / "x.txt.mtd").write_text(json.dumps({"data_type": "matrix", "value_type": "double",
                                                    "rows": 100000, "cols": 100000, "nnz": 3, "format": "text"}))
    script = tmp_path / "s.dml"
    script.write_text(f'X = read("{data}")\nY = t(X) %*% X\nZ = Y * X + t(X)\nprint(sum(Z) + sum(Y))\n')
    code, out, err = run_cli(capsys, "run", str(script), "--no-codegen")
    # Y: 2.25 at (2,2), 4 at (7,7), 1 at (1,1); Y * X: 8 at (7,7); t(X) sums to 2.5
    assert (code, err) == (0, "") and out == "17.75\n"
