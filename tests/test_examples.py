"""Every example in examples/ runs from a fresh checkout and passes its own quality check (the examples end in
``stop(...)`` when the fitted model is bad), and every algorithm of lafuse's library has one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.dml"))
# algorithms whose example is folded into another one (prediction and evaluation helpers)
FOLDED = {"l2svmPredict": "l2svm", "lmDS": "lm", "lmCG": "lm", "lmPredict": "lm", "lmPredictStats": "lm",
          "multiLogRegPredict": "multiLogReg", "kmeansPredict": "kmeans", "scale": "pca",
          "normalizeApply": "normalize", "getAccuracy": "multiLogReg", "confusionMatrix": "multiLogReg",
          "sigmoid": "multiLogReg", "glmPredict": "glm"}


def test_every_library_algorithm_has_an_example():
    names = {p.stem for p in EXAMPLES}
    library = sorted(p.stem for p in (REPO / "lafuse" / "builtins").glob("*.dml"))
    assert library, "lafuse/builtins is empty"
    missing = [n for n in library if n not in names and FOLDED.get(n) not in names]
    assert not missing, f"no example for {missing}"
    for n, host in FOLDED.items():
        if n in library and n not in names:
            assert f"{n}(" in (REPO / "examples" / f"{host}.dml").read_text(), f"examples/{host}.dml lacks {n}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path: Path):
    r = subprocess.run([sys.executable, "-m", "lafuse", "run", str(path)], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    assert r.returncode == 0, f"{path.name} failed:\n{r.stderr[-3000:]}\n{r.stdout[-2000:]}"
    assert r.stdout.strip(), f"{path.name} prints nothing"
