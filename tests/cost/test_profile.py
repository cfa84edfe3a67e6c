"""The hardware profile file (round trip, strict keys, fallback, $LAFUSE_PROFILE) and calibration
(physically sane rates; ``lafuse calibrate`` writes a loadable profile). No timing assertions beyond
physical bounds: the rates depend on the machine."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lafuse.calibrate import calibrate
from lafuse.cost import profile
from lafuse.cost.profile import HardwareProfile

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test sees a fresh load cache and a profile path under tmp_path, never ~/.cache."""
    path = tmp_path / "cache" / "profile.json"
    monkeypatch.setenv("LAFUSE_PROFILE", str(path))
    monkeypatch.setattr(profile, "_cached", {})
    return path


def test_json_round_trip(tmp_path: Path):
    prof = dataclasses.replace(HardwareProfile(), mem_read_bw=1.5e10, blas_flops=3e11, threads=8,
                               source="calibrated 2024-01-02")
    p = profile.save(prof, tmp_path / "sub" / "p.json")
    assert p == tmp_path / "sub" / "p.json" and p.is_file()
    assert profile.load(p) == prof
    assert HardwareProfile.from_dict(json.loads(prof.to_json())) == prof
    assert not (tmp_path / "sub" / "p.tmp").exists()  # written through a temp file, then renamed


def test_partial_file_keeps_defaults_for_missing_keys(tmp_path: Path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"sparse_rate": 1e9}))
    prof = profile.load(p)
    assert prof.sparse_rate == 1e9
    assert prof.mem_read_bw == HardwareProfile().mem_read_bw


def test_unknown_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown hardware profile keys.*mem_bw"):
        HardwareProfile.from_dict({"mem_bw": 1e9})


def test_file_with_unknown_keys_falls_back_to_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"mem_read_bw": 1e10, "typo_rate": 1.0}))
    assert profile.load(p) == HardwareProfile()
    assert "typo_rate" in capsys.readouterr().err


def test_corrupt_file_falls_back_to_defaults_with_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    p = tmp_path / "p.json"
    p.write_text("{not json")
    assert profile.load(p) == HardwareProfile()
    err = capsys.readouterr().err
    assert "ignoring the hardware profile" in err and str(p) in err


def test_missing_file_gives_defaults_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert profile.load(tmp_path / "absent.json") == HardwareProfile()
    assert capsys.readouterr().err == ""


def test_env_var_names_the_profile(isolated_profile: Path):
    assert profile.profile_path() == isolated_profile
    prof = dataclasses.replace(HardwareProfile(), csv_read_rate=1234.0)
    assert profile.save(prof) == isolated_profile  # default path = $LAFUSE_PROFILE
    assert profile.load() == prof


def test_xdg_cache_home_without_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LAFUSE_PROFILE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert profile.profile_path() == tmp_path / "xdg" / "lafuse" / "profile.json"


def test_save_refreshes_the_cache(tmp_path: Path):
    p = tmp_path / "p.json"
    assert profile.load(p) == HardwareProfile()  # cached: defaults
    prof = dataclasses.replace(HardwareProfile(), elementwise_rate=7e8)
    profile.save(prof, p)
    assert profile.load(p) == prof


# physical sanity bounds: (lower, upper) per rate
BOUNDS = {
    "mem_read_bw": (1e8, 1e12),  # bytes/s
    "mem_write_bw": (1e8, 1e12),  # bytes/s
    "blas_flops": (1e8, 1e14),  # FLOP/s
    "elementwise_rate": (1e6, 1e11),  # cells/s
    "transcendental_rate": (1e6, 1e11),  # cells/s
    "sparse_rate": (1e6, 1e11),  # nnz/s
    "instruction_overhead": (1e-9, 1e-2),  # s per instruction
    "csv_read_rate": (1e3, 1e9),  # cells/s
    "csv_write_rate": (1e3, 1e9),  # cells/s
    "binary_read_bw": (1e7, 1e12),  # bytes/s
}


def check_sane(prof: HardwareProfile) -> None:
    for name, (lo, hi) in BOUNDS.items():
        v = getattr(prof, name)
        assert isinstance(v, float) and math.isfinite(v) and lo < v < hi, (name, v)
    assert prof.codegen_compile_time == HardwareProfile().codegen_compile_time  # not measured yet
    assert prof.threads >= 1
    assert prof.source.startswith("calibrated 20")


def test_quick_calibration_gives_sane_rates():
    steps: list[tuple[str, int, int]] = []
    prof = calibrate(quick=True, progress=lambda name, done, total: steps.append((name, done, total)))
    check_sane(prof)
    assert HardwareProfile.from_dict(json.loads(prof.to_json())) == prof
    # the format optimizer's local implementations, each fitted to its runs (paper 002 §7)
    from lafuse.cost.fit import LOCAL_IMPLS, local_features

    assert [name for name, _ in prof.fitted] == sorted(LOCAL_IMPLS)
    for name, f in prof.fitted:
        assert f.samples >= 5 and math.isfinite(f.r2) and 0 <= f.median_rel_error < 10, (name, f)
        assert all(c >= 0 for c in f.coef) and f.coef[1] == 0.0  # (local: no network bytes)
        assert 0 < f.predict(local_features(name, 1000, 1000, 100, 1e4)) < 10, name
    dones = [d for _, d, _ in steps]
    assert dones == sorted(dones) and dones[0] == 0 and dones[-1] == steps[-1][2]


def test_numba_start_is_measured_in_fresh_runs(tmp_path: Path):
    """The full calibration's last step: a cold run fills a private plan cache, then fresh runs
    report the import and the one load (the quick calibration keeps the defaults)."""
    from lafuse import calibrate as cal

    start = cal._numba_start(str(tmp_path), runs=1)
    assert start is not None
    imported, first = start
    assert 0.01 < imported < 30.0 and 0.0 < first < 30.0
    assert any(p.name.startswith("k_") for p in (tmp_path / "codegen").rglob("*.py"))


def test_numba_start_failure_keeps_the_defaults(tmp_path: Path, monkeypatch, capsys):
    from lafuse import calibrate as cal

    monkeypatch.setattr(cal, "_START_SCRIPT", "print(1 +)\n")  # a run that exits 1
    assert cal._numba_start(str(tmp_path), runs=1) is None
    assert "could not measure Numba's start-up (exit 1)" in capsys.readouterr().err


def test_cli_calibrate_quick_writes_a_loadable_profile(tmp_path: Path, isolated_profile: Path):
    out = tmp_path / "out" / "profile.json"
    r = subprocess.run([sys.executable, "-m", "lafuse", "calibrate", "--quick", "--output", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"saved to {out}" in r.stdout
    assert "mem_read_bw" in r.stdout and "bytes/s" in r.stdout
    check_sane(profile.load(out))
    assert not isolated_profile.exists()  # --output wins over $LAFUSE_PROFILE

    r = subprocess.run([sys.executable, "-m", "lafuse", "calibrate", "--show", "--output", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "calibrated" in r.stdout and "blas_flops" in r.stdout
    assert "fitted costs" in r.stdout and "R²" in r.stdout and "mm-csr-dense" in r.stdout


def test_cli_show_without_a_file_prints_defaults(isolated_profile: Path):
    r = subprocess.run([sys.executable, "-m", "lafuse", "calibrate", "--show"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "default" in r.stdout and "no file" in r.stdout
    assert "fitted costs: none" in r.stdout
    assert not isolated_profile.exists()


def test_fitted_costs_in_a_profile_file_are_checked():
    """The fitted costs round-trip through the file; a file without them (older) still loads; a bad
    entry is refused with the reason (load ignores such a file with a warning, as for a bad rate)."""
    from lafuse.cost.fit import LinearCost

    f = LinearCost((1e-10, 0.0, 2e-11, 1e-6), 0.99, 0.05, 12)
    prof = HardwareProfile(fitted=(("mm-dense-dense", f),))
    assert HardwareProfile.from_dict(json.loads(prof.to_json())) == prof
    assert prof.fitted_cost("mm-dense-dense") == f and prof.fitted_cost("to-csr") is None
    assert HardwareProfile.from_dict({"blas_flops": 1e10}).fitted == ()
    with pytest.raises(ValueError, match="not an object of fitted costs"):
        HardwareProfile.from_dict({"fitted": [1, 2]})
    with pytest.raises(ValueError, match="fitted: .*non-negative"):
        HardwareProfile.from_dict({"fitted": {"x": {"coef": [-1.0], "r2": 1.0, "median_rel_error": 0.0,
                                                    "samples": 3}}})
    with pytest.raises(ValueError, match="fitted: not a fitted cost"):
        HardwareProfile.from_dict({"fitted": {"x": {"coef": [1.0]}}})


def test_a_fit_over_older_feature_definitions_is_stale_and_not_used():
    """A profile calibrated before the features changed (cost.fit.FEATURES_VERSION; version 1 wrote no
    version) still loads, but its fits price nothing: the analytical model does until a calibration."""
    from lafuse.cost.fit import FEATURES_VERSION, LinearCost

    old = {"coef": [1e-10, 0.0, 2e-11, 1e-6], "r2": 0.9, "median_rel_error": 0.1, "samples": 9}
    prof = HardwareProfile.from_dict({"fitted": {"mm-csr-dense": old}})
    f = dict(prof.fitted)["mm-csr-dense"]
    assert f.version == 1 and not f.current and prof.fitted_cost("mm-csr-dense") is None
    new = LinearCost((1e-10, 0.0, 2e-11, 1e-6), 0.9, 0.1, 9)
    assert new.version == FEATURES_VERSION and new.to_dict()["features"] == FEATURES_VERSION
    assert HardwareProfile(fitted=(("mm-csr-dense", new),)).fitted_cost("mm-csr-dense") == new
    with pytest.raises(ValueError, match="feature version"):
        HardwareProfile.from_dict({"fitted": {"x": {**old, "features": 0}}})
