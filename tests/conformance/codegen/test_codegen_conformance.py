"""SystemDS's own codegen tests as a conformance suite (``cases.py``, scripts vendored in ``scripts/``).

For every single-node case of SystemDS's codegen JUnit classes:

* values: lafuse's printed lines and outputs (``fusion="fuse-all"``, the case's rewrite setting) equal SystemDS
  3.4.0's, run live on the same script and input files with the case's codegen configuration (a cell agrees
  to a relative 1e-9 or to the Java test's absolute tolerance);
* kinds: the fused operators the Java test asserts ran (``fused_any``: one of them), the operators it
  requires fused away did not run (``absent``, mapped to lafuse's opcodes by ``harness.LAFUSE_OPCODES``),
  and where the test allows one fused operator class only, one ran.

Cases whose scripts need builtins lafuse lacks are listed in ``harness.UNSUPPORTED`` with the reason, and a
test checks that they still fail for that reason. Scripts whose kind assertions lafuse does not meet yet are
``harness.KNOWN_GAPS`` (values checked; the kind check is an expected failure that must keep failing). The two
cases SystemDS's suite marks ``@Ignore`` run for their values only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lafuse.errors import DMLError

from .. import compare
from . import harness
from .cases import CASES, IGNORED_IN_JAVA, Case

RUN = [harness.case_id(c) for c in CASES if c.script not in harness.UNSUPPORTED and c.config]
UNSUPPORTED = [harness.case_id(c) for c in CASES if c.script in harness.UNSUPPORTED]
BY_ID = {harness.case_id(c): c for c in CASES}
RTOL = 1e-9


def _check_kinds(case: Case, run: harness.LafuseRun) -> list[str]:
    problems = []
    ops = {op for op, n in run.op_count.items() if n}
    if case.fused_any and not any(s in op for op in ops for s in case.fused_any):
        problems.append(f"no fused operator of kind {case.fused_any[0]} ran")
    for sds_op in case.absent:
        if sds_op.startswith("spoof"):
            left = sorted(op for op in ops if sds_op in op)
        else:
            left = sorted(op for op in ops if op in harness.LAFUSE_OPCODES.get(sds_op, (sds_op,)))
        if left:
            problems.append(f"{sds_op} must be fused away, but ran as {left}")
    if case.single:
        kinds = {k for op, k in run.fused if case.single in op}
        if len(kinds) > 1:
            problems.append(f"{len(kinds)} distinct fused operators containing {case.single!r} ran; "
                            "the test allows one")
    return problems


@pytest.mark.parametrize("case_id", RUN)
def test_codegen_case(case_id: str, codegen_reference, codegen_inputs: Path, tmp_path: Path):
    case = BY_ID[case_id]
    ref = codegen_reference.get(case)
    assert ref.ok, f"SystemDS failed on {case.script}:\n{ref.error}\n{ref.raw_stdout[-3000:]}"
    inputs = harness.write_inputs(case, codegen_inputs)
    run = harness.run_lafuse(case, inputs, tmp_path)
    problems = []
    diff = compare.compare_lines(ref.stdout_lines, run.printed.splitlines(), rtol=RTOL)
    if diff:
        problems.append(f"printed lines differ: {diff}")
    for name, kind in case.outputs.items():
        if not ref.outputs[name].exists():  # the script chose not to write it (rmseDist2's self-check)
            if run.outputs[name].exists():
                problems.append(f"output {name}: SystemDS did not write it, lafuse did")
            continue
        expected = harness.read_output(ref.outputs[name], kind)
        actual = harness.read_output(run.outputs[name], kind)
        if not harness.close(expected, actual, RTOL, case.tolerance):
            problems.append(f"output {name}: max relative difference {harness.max_difference(expected, actual):.3g}"
                            f" (shapes {expected.shape} {actual.shape}); SystemDS {expected.ravel()[:4]}, "
                            f"lafuse {actual.ravel()[:4]}")
    where = f"{case.test} ({case.script}.dml, rewrites={case.rewrites})"
    ran = f"\n  lafuse ran: {dict(sorted(run.op_count.items()))}"
    assert not problems, f"{where}:\n  " + "\n  ".join(problems) + ran
    if case.test in IGNORED_IN_JAVA:  # @Ignore: SystemDS's suite does not hold SystemDS to these kind
        return                         # assertions, so only the values are checked
    kinds = _check_kinds(case, run)
    if case.script in harness.KNOWN_GAPS and (case.fused_any or case.absent or case.single):
        assert kinds, f"{where}: fuses as the Java test asserts now; remove it from harness.KNOWN_GAPS"
        pytest.xfail(f"{harness.KNOWN_GAPS[case.script]} ({'; '.join(kinds)})")
    assert not kinds, f"{where}:\n  " + "\n  ".join(kinds) + ran


def test_jmlc_case(tmp_path: Path):
    """APICodegenTest runs ``X = read(..); R = colSums(X/rowSums(X)); write(R, ..)`` through JMLC, which binds
    X in memory in place of the read and asserts a row-wise fused operator; lafuse's Python API does the
    same (the read statement replaced by the binding), and R is checked against NumPy."""
    case = next(c for c in CASES if not c.config)
    stmts = [s for s in harness.JMLC_SCRIPT.split(";") if s.strip()]
    assert stmts[0].replace(" ", "").startswith('X=read('), stmts
    body = ";".join(s for s in stmts[1:] if not s.strip().startswith("write("))
    X = harness.generate(case.inputs[0])
    from lafuse import config as cfgmod
    from lafuse.compiler import Compiler
    from lafuse.runtime.interp import Interpreter
    from lafuse.runtime.stats import Stats
    from lafuse.runtime.values import as_matrix_value

    cfg = cfgmod.get().with_(fusion="fuse-all", codegen_defer=False, background=False, fusion_observed=False,
                             fusion_reuse=False)
    stats = Stats()
    with cfgmod.using(cfg):
        comp = Compiler(cfg, stats=stats)
        bound = {"X": as_matrix_value(X)}
        prog = comp.compile_text(body, "<jmlc>", bound, ("R",))
        st = Interpreter(prog, comp, stats=stats).run(dict(bound))
    R = np.asarray(st["R"].to_numpy() if hasattr(st["R"], "to_numpy") else st["R"])
    terms = X / X.sum(axis=1, keepdims=True)  # a row sum near zero makes large terms that cancel: the
    # column sums agree to the terms' scale, not to their own
    np.testing.assert_allclose(R, terms.sum(axis=0, keepdims=True), rtol=RTOL, atol=RTOL * np.abs(terms).max())
    assert any(case.fused_any[0] in op for op in stats.op_count), stats.op_count


@pytest.mark.parametrize("case_id", UNSUPPORTED)
def test_unsupported_cases_still_fail(case_id: str, codegen_inputs: Path, tmp_path: Path):
    case = BY_ID[case_id]
    reason, needle = harness.UNSUPPORTED[case.script]
    with pytest.raises(DMLError) as ei:
        harness.run_lafuse(case, harness.write_inputs(case, codegen_inputs), tmp_path)
    assert needle in str(ei.value), f"{case.script}: listed as unsupported ({reason}), but failed with: {ei.value}"


def test_manifest_is_complete():
    """Every vendored script is used by a case, and every case is either run or listed as unsupported."""
    used = {c.script for c in CASES}
    used.discard(next(c.script for c in CASES if not c.config))  # the JMLC case's script is a Java string
    vendored = {p.stem for p in harness.SCRIPTS.glob("*.dml")}
    assert used == vendored, (sorted(vendored - used), sorted(used - vendored))
    assert len(RUN) + len(UNSUPPORTED) + 1 == len(CASES)  # + the JMLC case
