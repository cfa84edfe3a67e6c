"""Run one of SystemDS's codegen test cases (``cases.CASES``) on SystemDS and on lafuse.

The Java tests (``cases.py`` says which, and how they run) compare each script's output with R and assert
which fused operators ran. Here SystemDS 3.4.0 is the value reference, run live on the vendored script
(``scripts/``, byte for byte from apache/systemds, see ``PROVENANCE.md``) with the case's codegen
configuration; lafuse runs the same script in this process with ``fusion="fuse-all"`` and the case's
rewrite setting, so its statistics say which fused operators ran and which unfused operators remain.

Inputs the Java tests write with ``TestUtils.generateTestMatrix`` (uniform in ``[min, max)``, a cell
non-zero with probability ``sparsity``) are generated here with NumPy from the case's seed and written as
SystemDS text (ijv) with a ``.mtd``: both systems read the same file, so the values need not be Java's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import sds
from .cases import Case, Input

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"

# APICodegenTest#testCodegenJMLCTest's script: a string literal in APICodegenTest.java (Apache License 2.0,
# see scripts/LICENSE), run through JMLC with X bound in memory in place of the read
JMLC_SCRIPT = 'X = read("/tmp");R = colSums(X/rowSums(X));write(R, "tmp2")'

# Scripts that need a builtin lafuse does not implement (yet): their cases are not run for values or kinds;
# ``test_unsupported_cases_still_fail`` checks that each one still fails in lafuse for the reason given, so
# the list cannot go stale.
UNSUPPORTED: dict[str, tuple[str, str]] = {  # script -> (reason, text the lafuse error must contain)
    "RowConv2DTest": ("conv2d, bias_add and list literals ([pad, pad]) are not implemented", "unexpected '['"),
    "rowAggPattern44": ("max_pool and list literals ([stride, stride]) are not implemented", "unexpected '['"),
    "rowAggPattern46": ("conv2d and list literals ([pad, pad]) are not implemented", "unexpected '['"),
    "cellwisetmpl25": ("bias_add (a DNN builtin) is not implemented", "bias_add"),
    "cellwisetmpl26": ("bias_multiply (a DNN builtin) is not implemented", "bias_multiply"),
    "rowAggPattern43": ("bias_add (a DNN builtin) is not implemented", "bias_add"),
}

# Scripts whose values lafuse computes right but whose fused-operator assertions it does not meet yet, with
# why (the test checks the values, then expects the kind check to fail, and fails once it passes so the
# entry goes): each names a fusion feature lafuse lacks
KNOWN_GAPS: dict[str, str] = {
}

# Scripts where SystemDS 3.4.0 *with codegen* computes a wrong value: their reference runs with codegen off
SYSTEMDS_CODEGEN_WRONG: dict[str, str] = {
    "rmseDist2": "SystemDS's fused operators give S3 = S4 = 0 (codegen off, and lafuse: 3.375E10 like S and S2); "
                 "the script's chained test S == S2 == S3 == S4, i.e. ((S == S2) == S3) == S4, then holds by "
                 "accident, so SystemDS writes S where the correct run prints 'Test FAILED!' and writes nothing",
}

# SystemDS opcodes a case requires fused away -> the lafuse instruction opcodes that compute the same thing
# unfused (lafuse names an instruction by its HOP operator, SystemDS by its instruction opcode)
LAFUSE_OPCODES: dict[str, tuple[str, ...]] = {
    "tsmm": ("%*%", "tsmm"),
    "ba+*": ("%*%",),
    "uamin": ("min",),
    "uamax": ("max",),
    "uacmin": ("colMins",),
    "uack+": ("colSums",),
    "uark+": ("rowSums",),
    "replace": ("replace",),
    "xor": ("xor",),
    "seq": ("seq",),
    "min": ("min",),
    "nmin": ("min",),
    "!=": ("!=",),
    "rightIndex": ("rix",),
    "cbind": ("cbind",),
    "maxpooling": ("max_pool",),
    "conv2d": ("conv2d",),
}


def case_id(case: Case) -> str:
    return case.test.split("#", 1)[1]


# ------------------------------------------------------------------------------------------ inputs

def generate(inp: Input) -> np.ndarray:
    """A matrix like ``TestUtils.generateTestMatrix(rows, cols, min, max, sparsity, seed)``."""
    rng = np.random.default_rng(inp.seed)
    keep = rng.random((inp.rows, inp.cols)) <= inp.sparsity
    vals = rng.random((inp.rows, inp.cols)) * (inp.max - inp.min) + inp.min
    return np.where(keep, vals, 0.0)


def write_text_matrix(a: np.ndarray, path: Path) -> None:
    """SystemDS text format (1-based ``i j v`` per non-zero) and its ``.mtd``."""
    i, j = np.nonzero(a)
    with open(path, "w") as f:
        for r, c in zip(i.tolist(), j.tolist()):
            f.write(f"{r + 1} {c + 1} {float(a[r, c])!r}\n")
    mtd = {"data_type": "matrix", "value_type": "double", "rows": a.shape[0], "cols": a.shape[1],
           "nnz": int(len(i)), "format": "text"}
    Path(str(path) + ".mtd").write_text(json.dumps(mtd, indent=1))


def write_inputs(case: Case, directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for inp in case.inputs:
        p = directory / f"{inp.name}_{inp.rows}x{inp.cols}_{inp.sparsity}_{inp.seed}.txt"
        if not p.exists():
            write_text_matrix(generate(inp), p)
        paths[inp.name] = p
    return paths


def arguments(case: Case, inputs: dict[str, Path], out_dir: Path) -> tuple[list[str], dict[str, Path]]:
    """The case's positional arguments with real paths, and its output name -> path."""
    args, outputs = [], {}
    for a in case.args:
        m = re.fullmatch(r"\{(in|out):(\w+)\}", a)
        if m is None:
            args.append(a)
        elif m.group(1) == "in":
            args.append(str(inputs[m.group(2)]))
        else:
            outputs[m.group(2)] = out_dir / m.group(2)
            args.append(str(outputs[m.group(2)]))
    return args, outputs


def argument_spec(case: Case) -> list[str]:
    """The arguments with placeholders for paths (part of the reference's cache key)."""
    return [f"<{a[1:-1]}>" if a.startswith("{") else a for a in case.args]


# ------------------------------------------------------------------------------------------ outputs

def read_output(path: Path, kind: str) -> np.ndarray:
    """A written matrix (text/ijv, a file or a directory of part files) or scalar, as a 2-D array."""
    if not path.exists():
        raise FileNotFoundError(f"{path} was not written")
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_"))
                   and not p.name.endswith((".crc", ".mtd"))) if path.is_dir() else [path]
    text = " ".join(f.read_text() for f in files)
    if kind == "scalar":
        v = text.strip()
        return np.array([[float(v) if v not in ("TRUE", "FALSE") else float(v == "TRUE")]])
    mtd = json.loads(Path(str(path) + ".mtd").read_text())
    out = np.zeros((int(mtd["rows"]), int(mtd["cols"])))
    tok = np.array(text.split(), dtype=object)
    if tok.size:
        ijv = tok.reshape(-1, 3)
        i, j = ijv[:, 0].astype(np.int64), ijv[:, 1].astype(np.int64)
        v = np.array([float(x) for x in ijv[:, 2]])  # float() reads Java's Infinity/NaN spellings
        keep = (i > 0) & (j > 0)  # SystemDS writes "0 0 0" for an all-zero matrix
        out[i[keep] - 1, j[keep] - 1] = v[keep]
    return out


# ------------------------------------------------------------------------------------------ runners

def run_reference(case: Case, inputs: dict[str, Path], workdir: Path) -> sds.SdsResult:
    """SystemDS's result for a case (through the conformance cache unless CI), with the case's config.

    The reference does not depend on the rewrite flag (an optimizer switch), so the rewrite and no-rewrite
    cases of one script share it: callers key it by script and arguments."""
    workdir.mkdir(parents=True, exist_ok=True)
    args, outputs = arguments(case, inputs, workdir / "out")
    (workdir / "out").mkdir(exist_ok=True)
    if case.script in SYSTEMDS_CODEGEN_WRONG:
        return sds.run_cached(SCRIPTS / f"{case.script}.dml", {}, {}, list(inputs.values()), outputs, workdir,
                              config={"codegen.enabled": "false"}, args=args, args_spec=argument_spec(case))
    config = SCRIPTS / case.config if case.config else None
    return sds.run_cached(SCRIPTS / f"{case.script}.dml", {}, {}, list(inputs.values()), outputs, workdir,
                          args=args, args_spec=argument_spec(case), config_file=config)


@dataclass
class LafuseRun:
    outputs: dict[str, Path]
    op_count: dict[str, int]
    fused: list[tuple[str, str]]  # (opcode, kernel identity) of each fused instruction that ran
    printed: str


def run_lafuse(case: Case, inputs: dict[str, Path], workdir: Path, fusion: str = "fuse-all") -> LafuseRun:
    """Run the script in this process (``lafuse run`` with the same arguments, minus the process)."""
    import io

    from lafuse import config as cfgmod
    from lafuse.compiler import Compiler
    from lafuse.hops.resolver import parse_cmdline_value
    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats

    (workdir / "out").mkdir(parents=True, exist_ok=True)
    args, outputs = arguments(case, inputs, workdir / "out")
    cfg = cfgmod.get().with_(fusion=fusion, rewrites=case.rewrites, codegen=True, codegen_defer=False,
                             background=False, fusion_observed=False, fusion_reuse=False, stats=True)
    stats = Stats()
    buf = io.StringIO()
    path = SCRIPTS / f"{case.script}.dml"
    with cfgmod.using(cfg):
        comp = Compiler(cfg, {}, [parse_cmdline_value(a) for a in args], stats)
        prog = comp.compile_text(path.read_text(), str(path))
        Interpreter(prog, comp, out=buf, stats=stats).run()
    fused = [(ins.opcode, _kernel_identity(ins)) for ins in stats.ran if ins.opcode.startswith("spoof")]
    return LafuseRun(outputs, stats.op_count, fused, buf.getvalue())


def _kernel_identity(ins: Any) -> str:
    """What makes two fused instructions the same operator class (SystemDS: one generated class)."""
    cplan = ins.hop.params.get("cplan")
    return repr(getattr(cplan, "key", None) or id(ins.hop))


def close(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float) -> bool:
    """Same shape, and each cell within ``rtol`` relative or ``atol`` absolute (the Java test's eps, which
    residues of rounding such as rowAggPattern15's ``Y3 - Y3 * rowSums(Y3)`` only meet absolutely)."""
    from .. import compare

    if expected.shape != actual.shape:
        return False
    return bool(compare.close_array(expected, actual, rtol, max(atol, compare.ATOL)).all())


def max_difference(expected: np.ndarray, actual: np.ndarray) -> float:
    from .. import compare

    if expected.shape != actual.shape:
        return math.inf
    return compare.max_rel_diff(expected, actual)
