"""Live conformance: every corpus script must print and write what Apache SystemDS 3.4.0 does.

``test_systemds_reference`` checks the reference side alone (each script runs cleanly on SystemDS, or stops
as declared); ``test_lafuse_matches_systemds`` runs ``python -m lafuse run`` and compares stdout and every
written matrix with :mod:`compare`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import compare, corpus, sds

SCRIPT_NAMES = [p.name for p in corpus.all_scripts()]
MIN_SCRIPTS = 60


def _stop_message(ref: sds.SdsResult) -> str:
    for line in (ref.error or "").splitlines():
        if line.startswith("DMLScriptException -- "):
            return line.split(" -- ", 1)[1]
    raise AssertionError(f"SystemDS did not stop with a DMLScriptException:\n{ref.error}\n{ref.raw_stdout}")


def _reference_failure(sc: corpus.Script, ref: sds.SdsResult) -> str:
    return (f"SystemDS failed on {sc.name} (rc={ref.returncode}):\n{ref.error}\n"
            f"--- stdout:\n{ref.raw_stdout[-3000:]}\n--- stderr:\n{ref.stderr[-2000:]}")


def test_corpus_size():
    assert len(SCRIPT_NAMES) >= MIN_SCRIPTS, f"only {len(SCRIPT_NAMES)} scripts in {corpus.SCRIPTS_DIR}"


def test_script_names_unique_and_numbered():
    numbers = [n.split("_", 1)[0] for n in SCRIPT_NAMES]
    assert len(numbers) == len(set(numbers)), "two scripts share a number"
    assert all(re.fullmatch(r"\d{3}_[a-z0-9_]+\.dml", n) for n in SCRIPT_NAMES)


# Every native builtin the core scripts call (dml-semantics §1 names the core set), the extra builtins the corpus promises, and the script
# builtins of the core set must be called somewhere in the corpus (guards against losing coverage).
REQUIRED_CALLS = """
abs aggregate append as.integer as.matrix as.scalar atan cbind ceil colMaxs colMeans colMins colSums contains
cumsum diag eigen exp ifelse isNaN list log max mean min ncol nrow order rbind removeEmpty replace round
rowIndexMax rowIndexMin rowMaxs rowMins rowSums seq solve sqrt sum t table tan xor matrix print rand Rand stop
cumprod cummin cummax rev inv cholesky svd var sd median quantile outer toString time length castAsScalar
as.double as.logical ifdef floor sin cos asin acos sinh cosh tanh sign isInf isNA prod trace rowMeans rowProds
colProds rowVars colVars rowSds colSds lower.tri upper.tri det qr lu sample bitwAnd as.frame read write assert
als alsCG alsDS lm lmCG lmDS lmPredict normalize normalizeApply scale kmeans kmeansPredict pnmf pca
steplm naiveBayes dist outlier sigmoid getAccuracy confusionMatrix glm l2svm l2svmPredict
multiLogReg multiLogRegPredict cdf icdf pnorm qnorm pt qt pf qf pchisq qchisq pexp qexp
""".split()

REQUIRED_SYNTAX = {
    "source ... as ns": r"^source\(\"lib/[a-z]+\.dml\"\) as [a-z]+",
    "ns::f": r"[a-z]+::[a-z]+\(",
    "parfor with options": r"parfor \(\w+ in [^)]*, check = 0",
    "+=": r"\+=",
    "printf-style print": r"print\(\"[^\"]*%[0-9.]*[dfs]",
    "single-quoted string": r"'[^']*'",
    "multi-assignment": r"^\[\w+, \w+",
    "else if": r"else if",
    "while": r"^\s*while \(",
    "0x0 matrix": r"matrix\(0, rows=0, cols=0\)",
    "byrow=FALSE": r"byrow=FALSE",
    "dotted argument name": r"index\.return=",
    "$ argument": r"\$[a-z]+",
    "continuation line starting with an operator": r"^\s+[-+*] ",
}


def test_corpus_covers_inventory():
    texts = [p.read_text() for p in corpus.all_scripts()] + [
        p.read_text() for p in (corpus.SCRIPTS_DIR / "lib").glob("*.dml")]
    text = "\n".join(texts)
    missing = [f for f in REQUIRED_CALLS if not re.search(r"(?<![\w.])" + re.escape(f) + r" ?\(", text)]
    assert not missing, f"builtins never called by the corpus: {missing}"
    missing = [k for k, rx in REQUIRED_SYNTAX.items() if not re.search(rx, text, re.M)]
    assert not missing, f"constructs missing from the corpus: {missing}"


def test_directives_parse():
    loaded = [corpus.load_script(corpus.SCRIPTS_DIR / n) for n in SCRIPT_NAMES]
    assert any(s.outputs for s in loaded), "no script writes a matrix"
    assert any(s.inputs for s in loaded), "no script reads a generated input"
    assert any(s.expect_stop for s in loaded), "no script exercises stop()"
    for s in loaded:
        text = s.path.read_text()
        for k in list(s.inputs) + list(s.outputs):
            assert f"${k}" in text, f"{s.name}: directive for ${k} but the script never uses it"
        if s.expect_stop:
            assert "stop(" in text and "UNREACHABLE" in text, f"{s.name}: stop script without sentinel"


@pytest.mark.parametrize("script_name", SCRIPT_NAMES)
def test_systemds_reference(script_name: str, reference):
    """The reference side: SystemDS runs the script cleanly (or stops where the script says it does)."""
    sc = corpus.load_script(corpus.SCRIPTS_DIR / script_name)
    ref = reference.get(script_name)
    if sc.expect_stop:
        msg = _stop_message(ref)
        assert msg, "empty stop message"
        assert not any("UNREACHABLE" in x for x in ref.stdout_lines)
        return
    assert ref.ok, _reference_failure(sc, ref)
    assert ref.stdout_lines, f"{script_name} prints nothing"
    for k in sc.outputs:
        p = ref.outputs[k]
        assert p.exists(), f"SystemDS did not write ${k} ({p})"
        m = compare.read_matrix(p, sc.outputs[k])
        assert m.values.ndim == 2


def _check_outputs(sc: corpus.Script, ref: sds.SdsResult, res: corpus.LafuseResult) -> list[str]:
    problems = []
    for k, fmt in sc.outputs.items():
        d = compare.compare_matrix_files(ref.outputs[k], res.outputs[k], fmt, what=f"output ${k} ({fmt})")
        if d:
            problems.append(d)
    return problems


@pytest.mark.parametrize("script_name", SCRIPT_NAMES)
def test_lafuse_matches_systemds(script_name: str, reference, inputs_dir: Path, tmp_path: Path):
    sc = corpus.load_script(corpus.SCRIPTS_DIR / script_name)
    ref = reference.get(script_name)
    res = corpus.run_lafuse(sc, inputs_dir, tmp_path)
    where = f"command: {' '.join(res.command)}\n(cwd {sc.path.parent})"
    if sc.expect_stop:
        msg = _stop_message(ref)
        n = len(ref.stdout_lines)
        diff = compare.compare_lines(ref.stdout_lines, res.stdout_lines[:n], what="stdout before stop()")
        assert diff is None, f"{diff}\n{where}"
        assert not any("UNREACHABLE" in x for x in res.stdout_lines), (
            f"lafuse kept running after stop():\n{chr(10).join(res.stdout_lines)}\n{where}")
        combined = "\n".join(res.stdout_lines[n:]) + "\n" + res.stderr
        assert msg in combined, (
            f"stop message {msg!r} not reported by lafuse (SystemDS 3.4.0 prints it and exits with 0)\n"
            f"--- lafuse stdout after the script's lines:\n{chr(10).join(res.stdout_lines[n:])}\n"
            f"--- lafuse stderr:\n{res.stderr[-3000:]}\n{where}")
        return
    assert ref.ok, _reference_failure(sc, ref)
    assert res.returncode == 0, (
        f"lafuse exited with {res.returncode}\n--- stderr:\n{res.stderr[-4000:]}\n"
        f"--- stdout:\n{chr(10).join(res.stdout_lines[-40:])}\n{where}")
    problems = []
    diff = compare.compare_lines(ref.stdout_lines, res.stdout_lines)
    if diff:
        problems.append(diff)
    problems.extend(_check_outputs(sc, ref, res))
    assert not problems, "\n\n".join(problems) + f"\n{where}"
