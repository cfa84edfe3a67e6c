"""Every conformance script runs identically with and without rewrites, with the DAG validator on
after every rule application and over every compiled and recompiled program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lafuse.config import Config
from tests.conformance import corpus
from tests.rewrite.harness import compare_outputs, run_capture

SCRIPTS = corpus.all_scripts()


@pytest.fixture(scope="module")
def inputs_dir(tmp_path_factory) -> Path:
    return corpus.generate_inputs(tmp_path_factory.mktemp("inputs"))


def _run(sc: corpus.Script, cfg: Config, inputs: Path, out: Path, monkeypatch) -> tuple[str, str | None]:
    out.mkdir(parents=True, exist_ok=True)
    args = {k: _typed(v) for k, v in sc.arguments(inputs, out).items()}
    monkeypatch.chdir(sc.path.parent)
    res = run_capture(sc.path.read_text(), cfg, args, str(sc.path))
    return res.output, res.error


def _typed(v: str):
    from lafuse.hops.resolver import parse_cmdline_value

    return parse_cmdline_value(v)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_same_with_and_without_rewrites(path: Path, inputs_dir: Path, tmp_path: Path, monkeypatch):
    sc = corpus.load_script(path)
    on_out, on_err = _run(sc, Config(), inputs_dir, tmp_path / "on", monkeypatch)
    off_out, off_err = _run(sc, Config(rewrites=False), inputs_dir, tmp_path / "off", monkeypatch)
    assert on_err == off_err, f"error with rewrites: {on_err!r}; without: {off_err!r}"
    if on_err is not None:
        # a failing run: rewrites may move a pure computation (and so the error) past a print, so
        # only the lines both runs printed are compared
        n = min(len(on_out.splitlines()), len(off_out.splitlines()))
        on_out, off_out = "\n".join(on_out.splitlines()[:n]), "\n".join(off_out.splitlines()[:n])
    compare_outputs(on_out, off_out, abs_tol=1e-12)  # as the SystemDS comparison: reassociation near 0
    for k, fmt in sc.outputs.items():
        a, b = tmp_path / "on" / sc.output_file(k), tmp_path / "off" / sc.output_file(k)
        assert a.exists() == b.exists()
        if a.exists():
            if fmt == "csv":
                x = np.loadtxt(a, delimiter=",", ndmin=2)
                y = np.loadtxt(b, delimiter=",", ndmin=2)
                np.testing.assert_allclose(x, y, rtol=1e-9, equal_nan=True)
            else:
                assert a.read_text().split() == b.read_text().split() or _close_text(a, b)


def _close_text(a: Path, b: Path) -> bool:
    ta, tb = a.read_text().split(), b.read_text().split()
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            if x != y:
                return False
            continue
        if not np.isclose(fx, fy, rtol=1e-9, equal_nan=True):
            return False
    return True
