"""SystemDS's own algorithm scripts, unmodified, run by lafuse and by SystemDS 3.4.0: the results must agree.

Each ``algorithms/<name>.dml`` driver reads generated data (``algodata.py``), calls one script builtin with
every argument named (SystemDS leaks named arguments between calls, dml-semantics §5(b)) and writes every output.
lafuse runs it with ``--builtins <SystemDS's scripts/builtin, extracted from the installed jar>
--no-lafuse-builtins``, so the exact shipped scripts execute. Every written matrix and every printed number
must agree to ``RTOL`` (relative; see ``compare.max_rel_diff`` for how cells near zero are measured).
The random algorithms (kmeans, pnmf, alsCG, als, alsDS) agree exactly because lafuse's ``rand`` reproduces
SystemDS's generator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import compare, corpus

RTOL = 1e-8

# the core set (dml-semantics §1): the 25 SystemDS builtin scripts lafuse runs unmodified and the 3 they call
CORE = """l2svm l2svmPredict lm lmDS lmCG lmPredict multiLogReg multiLogRegPredict glm kmeans kmeansPredict pnmf
alsCG als pca autoencoder_2layer steplm naiveBayes scale normalize dist outlier sigmoid getAccuracy
confusionMatrix""".split()
TRANSITIVE = ["lmPredictStats", "alsDS", "normalizeApply"]

# SystemDS runs kmeans' parfor over runs in parallel workers whose prints interleave nondeterministically, so
# its lines are compared as a sorted list (every number still has to agree)
UNORDERED_STDOUT = {"kmeans.dml"}
# dist's diagonal is sqrt(rowSums(X^2) + t(rowSums(X^2)) - 2 X %*% t(X)) at a rounding residue of about 1e-15,
# i.e. 0 or ~3e-8 depending on how the matrix product rounds (BLAS vs SystemDS's Java kernels); cells of both
# results below this bound count as zero
ZERO_BELOW = {"dist.dml": 1e-6}
# glm's per-iteration trace prints log_l_change and rho = log_l_change / predicted change: differences of
# log-likelihoods of ~1e2 that agree to ~1e-12 near convergence, so reassociating a sum (fused operators,
# blocked compensated sums) moves them by ~1e-4 relative while every result of the fit agrees to ~1e-15;
# those trace lines are compared at this tolerance (all other lines and outputs at RTOL)
TRACE_RTOL = {"glm.dml": ("Iter #", 1e-3), "glm_binomial.dml": ("Iter #", 1e-3)}

ALGO_NAMES = sorted(p.name for p in corpus.ALGORITHMS_DIR.glob("*.dml"))


def script_of(driver: str) -> str:
    """The SystemDS script a driver exercises (``glm_binomial.dml`` -> ``glm``)."""
    stem = driver.removesuffix(".dml")
    return stem.split("_")[0] if stem not in CORE + TRANSITIVE else stem


def test_every_core_and_transitive_script_has_a_driver():
    covered = {script_of(n) for n in ALGO_NAMES}
    assert covered >= set(CORE + TRANSITIVE), f"missing drivers: {sorted(set(CORE + TRANSITIVE) - covered)}"
    for n in ALGO_NAMES:
        text = (corpus.ALGORITHMS_DIR / n).read_text()
        assert f"{script_of(n)}(" in text, f"{n} does not call {script_of(n)}"


def compare_run(sc: corpus.Script, ref, res: corpus.LafuseResult) -> tuple[list[str], float]:
    """Problems found (empty when they agree) and the largest relative difference over all outputs."""
    problems = []
    ref_lines, lines = ref.stdout_lines, res.stdout_lines
    if sc.name in UNORDERED_STDOUT:
        ref_lines, lines = sorted(ref_lines), sorted(lines)
    if sc.name in TRACE_RTOL and len(ref_lines) == len(lines):
        prefix, loose = TRACE_RTOL[sc.name]
        traced = [i for i, ln in enumerate(ref_lines) if ln.startswith(prefix)]
        for i in traced:
            reason = compare.compare_line(ref_lines[i], lines[i], loose)
            if reason:
                problems.append(f"stdout line {i + 1}: {reason}")
        keep = [i for i in range(len(ref_lines)) if i not in set(traced)]
        ref_lines, lines = [ref_lines[i] for i in keep], [lines[i] for i in keep]
    diff = compare.compare_lines(ref_lines, lines, rtol=RTOL)
    if diff:
        problems.append(diff)
    worst = compare.max_rel_diff_lines(ref_lines, lines)
    for k, fmt in sc.outputs.items():
        e = compare.read_matrix(ref.outputs[k], fmt).values
        a = compare.read_matrix(res.outputs[k], fmt).values
        d = compare.max_rel_diff(e, a, ZERO_BELOW.get(sc.name, 0.0))
        worst = max(worst, d)
        if d > RTOL:
            problems.append(compare.compare_matrices(e, a, f"output ${k}", rtol=RTOL)
                            or f"output ${k}: max relative difference {d:.3g} > {RTOL}")
    return problems, worst


@pytest.mark.parametrize("algo_name", ALGO_NAMES)
def test_systemds_script_matches(algo_name: str, algo_reference, inputs_dir: Path, tmp_path: Path):
    sc = corpus.load_script(corpus.ALGORITHMS_DIR / algo_name)
    ref = algo_reference.get(algo_name)
    assert ref.ok, f"SystemDS failed on {algo_name}:\n{ref.error}\n{ref.raw_stdout[-3000:]}\n{ref.stderr[-2000:]}"
    for k in sc.outputs:
        assert ref.outputs[k].exists(), f"SystemDS did not write ${k}"
    res = corpus.run_lafuse(sc, inputs_dir, tmp_path)
    where = f"command: {' '.join(res.command)}"
    assert res.returncode == 0, f"lafuse failed (rc={res.returncode}):\n{res.stderr[-4000:]}\n{where}"
    problems, worst = compare_run(sc, ref, res)
    assert not problems, "\n\n".join(problems) + f"\n(max relative difference {worst:.3g})\n{where}"
    assert worst <= RTOL
