"""benchmarks/report.py renders docs/benchmarks.md from a results JSON: the published numbers must be the
recorded ones, failures and skips must be visible, and the links must resolve where the markdown lives."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import report  # noqa: E402

SYSTEMS = ["lafuse", "lafuse-cost", "systemds-codegen-on", "numpy", "jax"]
LABELS = {"lafuse": "lafuse no codegen", "lafuse-cost": "lafuse cost-based fusion",
          "systemds-codegen-on": "SystemDS codegen on", "numpy": "NumPy"}  # jax: falls back to the key
JAX_REASON = "n/a (sparse): JAX has no sparse CSR ops"
PNG = b"\x89PNG\r\n\x1a\n"


def sysrun(median: float | None, lo: float | None = None, hi: float | None = None, *, check: str = "ok",
           wall: float | None = None, skipped: str | None = None) -> dict[str, Any]:
    return {"op_median": median, "op_min": lo if lo is not None else median,
            "op_max": hi if hi is not None else median, "op_samples": [], "first": [],
            "wall_median": wall, "walls": [wall] if wall is not None else [], "check": check,
            "skipped": skipped, "note": "", "top": []}


def synthetic() -> dict[str, Any]:
    micro = [
        {"name": "cell3", "group": "micro", "size": "", "algorithm": "", "expr": "sum(X*Y*Z), dense",
         "data": "X 4000x1000", "bandwidth_limit": 0.0021, "bandwidth_limit_measured": 0.0019,
         "bytes_read_once": 96000000, "passes": 1,
         "systems": {"lafuse": sysrun(0.0123, 0.0119, 0.0130, wall=1.9), "lafuse-cost": sysrun(0.0045),
                     "systemds-codegen-on": sysrun(0.02, check="MISMATCH rel 1.2e-03"),
                     "numpy": sysrun(0.03), "jax": sysrun(0.004)}},
        {"name": "cell3-sparse", "group": "micro", "size": "", "algorithm": "", "expr": "sum(X*Y*Z), sparse",
         "data": "X 4000x1000 sparse", "bandwidth_limit": None, "bandwidth_limit_measured": None,
         "systems": {"lafuse": sysrun(None, check="ERROR: killed | timeout"), "lafuse-cost": sysrun(0.0061),
                     "systemds-codegen-on": sysrun(0.008), "numpy": sysrun(0.016),
                     "jax": sysrun(None, check="-", skipped=JAX_REASON)}},
    ]
    algos = [
        {"name": f"l2svm-{size}", "group": "algorithm", "size": size, "algorithm": "L2SVM",
         "expr": "", "data": f"X {n}x100", "bandwidth_limit": 0.05 * k, "bandwidth_limit_measured": 0.04 * k,
         "bytes_read_once": 8000000 * k, "passes": 20,
         "systems": {"lafuse": sysrun(1.234 * k, wall=4.56 * k),
                     "lafuse-cost": sysrun(0.987 * k, wall=3.2 * k),
                     "systemds-codegen-on": sysrun(2.5 * k, wall=7.5 * k), "numpy": sysrun(1.5 * k),
                     "jax": sysrun(0.8 * k)}}
        for size, n, k in (("small", 10000, 1), ("large", 100000, 10))
    ]
    compile_rows = [
        {"benchmark": "l2svm-small", "system": "lafuse-cost", "cache": cache, "dags": 12, "fused_ops": 3,
         "cplans": 5, "memo_entries": 40, "optimizer_s": 0.02, "partitions": 3, "points": 4,
         "plans_total": 20, "plans_evaluated": 9, "pruned_cost": 5, "pruned_structural": 6,
         "kernels_compiled": kc,
         "compile_s": cs, "kernel_max_s": km, "disk_hits": dh, "load_s": 0.0, "mem_hits": 0, "numba_import_s": None,
         "deferred": 1, "wall_s": 3.2}
        for cache, kc, cs, km, dh in (("warm", 0, 0.0, None, 2), ("cold", 2, 1.8, 1.1, 0))  # out of order on purpose
    ]
    return {"schema": 1, "command": "make bench", "quick": True, "reps": 3, "inner": 3,
            "started": "2026-11-24T13:40:00", "total_seconds": 412.0, "commit": "abc1234",
            "machine": {"cpus": 2, "python": "3.11.9", "numpy": "2.4.6", "numba": "0.68.1",
                        "platform": "Linux-test", "jax": "0.10.2", "numexpr": None, "systemds": "3.4.0"},
            "measured_read_bw": 1.2e10, "profile": [9.5e9, "calibrated 2026-11-24"],
            "systems": SYSTEMS, "system_labels": LABELS,
            "benchmarks": micro + algos, "compile": compile_rows,
            "startup": [{"script": "print(1)", "runs": 20, "lafuse_median": 0.2614, "numpy_import_median": 0.1583,
                         "ratio_median": 1.651}]}


def run(tmp: Path, data: dict[str, Any]) -> tuple[str, Path, Path]:
    results = tmp / "benchmarks" / "results"
    results.mkdir(parents=True)
    path = results / "bench-20261124-134000.json"
    path.write_text(json.dumps(data))
    out, plots = tmp / "docs" / "benchmarks.md", tmp / "docs" / "benchmarks"
    assert report.main([str(path), "--out", str(out), "--plots-dir", str(plots)]) == 0
    return out.read_text(encoding="utf-8"), out, plots


def sections(md: str) -> dict[str, str]:
    parts = re.split(r"^## ", md, flags=re.M)
    return {p.split("\n", 1)[0]: p for p in parts[1:]}


@pytest.fixture
def rendered(tmp_path: Path) -> tuple[str, Path, Path]:
    return run(tmp_path, synthetic())


def test_every_table_section_names_every_system(rendered: tuple[str, Path, Path]) -> None:
    md = rendered[0]
    secs = sections(md)
    assert set(secs) == {"Micro-benchmarks", "Algorithms, small data", "Algorithms, large data",
                         "Cost-based policy against the best fixed policy", "Compile overhead", "Start-up"}
    names = [LABELS.get(k, k) for k in SYSTEMS]
    for title in ("Micro-benchmarks", "Algorithms, small data", "Algorithms, large data"):
        header_lines = [ln for ln in secs[title].splitlines() if ln.startswith("| benchmark") or
                        ln.startswith("| algorithm")]
        assert header_lines, title
        for name in names:
            assert f"| {name} |" in header_lines[0], (title, name)
    assert "lafuse cost-based fusion" in secs["Compile overhead"]
    # whole-process wall times only for the systems that have them
    wall = secs["Algorithms, small data"].split("Whole-process wall time")[1].split("\n\n")[1]
    assert "SystemDS codegen on" in wall and "NumPy" not in wall.splitlines()[0]


def test_skips_and_failures_are_visible(rendered: tuple[str, Path, Path]) -> None:
    micro = sections(rendered[0])["Micro-benchmarks"]
    assert JAX_REASON in micro
    error = "ERROR: killed \\| timeout"  # escaped for the markdown table
    marks = dict(re.findall(r"^([¹²³]) (.+?)  $", micro, flags=re.M))
    assert set(marks.values()) == {JAX_REASON, error}  # the full error as a footnote
    by_text = {t: m for m, t in marks.items()}
    assert f"| n/a{by_text[JAX_REASON]} |" in micro
    assert f"| - ⚠ ERROR{by_text[error]} |" in micro
    assert "| 20.0 ⚠ MISMATCH rel 1.2e-03 |" in micro
    assert micro.count(f"{JAX_REASON}") == 1  # the reason is listed once, used in both tables


def test_numbers_are_the_recorded_ones(rendered: tuple[str, Path, Path]) -> None:
    md = rendered[0]
    secs = sections(md)
    micro = secs["Micro-benchmarks"]
    assert "| 12.3 (11.9–13.0) |" in micro  # 0.0123 s in ms, with its range
    assert "| 4.50 |" in micro and "| 2.10 / 1.90 |" in micro and "| - / - |" in micro
    assert "| 0.410 |" in micro  # lafuse ratio: 0.0123 / 0.03
    small, large = secs["Algorithms, small data"], secs["Algorithms, large data"]
    assert "| L2SVM | X 10000x100 | 1.23 | 0.987 | 2.50 | 1.50 | 0.800 | 0.0500 / 0.0400 | 20 |" in small
    assert "| L2SVM | 4.56 | 3.20 | 7.50 |" in small
    assert "| 12.3 | 9.87 | 25.0 | 15.0 | 8.00 |" in large
    comp = secs["Compile overhead"]
    rows = [ln for ln in comp.splitlines() if ln.startswith("| l2svm-small")]
    assert [r.split(" | ")[2] for r in rows] == ["cold", "warm"]
    assert "| 2 | 1.80 | 1.10 | 0 |" in rows[0] and "| 0 | 0 | - | 2 |" in rows[1]
    assert "| - | 1 | 3.20 |" in rows[0]  # null Numba import time, deferred, wall
    assert "9.50 GB/s" in md and "12.0 GB/s" in md and "`abc1234`" in md and "`make bench`" in md


def test_links_are_relative_and_pngs_exist(rendered: tuple[str, Path, Path]) -> None:
    md, out, plots = rendered
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(links) == sorted(f"benchmarks/{n}.png" for n in
                                   ("micro", "algorithms-small", "algorithms-large", "compile"))
    for link in links:
        assert (out.parent / link).is_file()
    json_link = re.search(r"\[`bench-[^`]+`\]\(([^)]+)\)", md)
    assert json_link and json_link.group(1) == "../benchmarks/results/bench-20261124-134000.json"
    assert (out.parent / json_link.group(1)).is_file()
    for name in ("micro", "algorithms-small", "algorithms-large", "compile"):
        data = (plots / f"{name}.png").read_bytes()
        assert len(data) > 1000 and data.startswith(PNG)


def test_regenerating_gives_identical_files(tmp_path: Path, rendered: tuple[str, Path, Path]) -> None:
    md, _, plots = rendered
    md2, _, plots2 = run(tmp_path / "again", synthetic())
    assert md2 == md
    for png in plots.glob("*.png"):
        assert (plots2 / png.name).read_bytes() == png.read_bytes(), png.name


def test_a_mostly_failed_run_still_renders(tmp_path: Path) -> None:
    data = synthetic()
    for b in data["benchmarks"]:
        b["systems"] = {k: {"op_median": None, "check": "no result"} for k in SYSTEMS}
        b["bandwidth_limit"] = None
    data["compile"] = [{"benchmark": "x", "cache": "cold", "error": "lafuse exited 1"}]
    del data["machine"], data["profile"], data["system_labels"]
    md, _, plots = run(tmp_path, data)
    assert "⚠ no result" in md and "| jax |" in md
    assert not (plots / "micro.png").exists()  # nothing to plot, nothing linked
    assert "micro.png" not in md
    assert "| x | - | cold ⚠¹ |" in md and "¹ lafuse exited 1" in md


def test_startup_section_has_the_recorded_medians(rendered: tuple[str, Path, Path]) -> None:
    sec = sections(rendered[0])["Start-up"]
    assert "| print(1) | 261 | 158 | 1.65 | 20 |" in sec and "benchmarks/startup.py" in sec


def test_cost_policy_section_compares_with_the_best_fixed_policy(rendered: tuple[str, Path, Path]) -> None:
    sec = sections(rendered[0])["Cost-based policy against the best fixed policy"]
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in sec.splitlines() if ln.startswith("| ")}
    # in script 0.987 / 1.234, whole process 3.2 / 4.56
    # (no in-script samples recorded: no paired ratio; one wall time a system: paired = ratio of medians)
    assert rows["l2svm-small"] == "| l2svm-small | lafuse no codegen | 0.800 | - | lafuse no codegen | 0.702 | 0.702 |"
    assert rows["cell3"] == "| cell3 | lafuse no codegen | 0.366 | - | - | - | - |"  # no wall time recorded
    assert rows["cell3-sparse"] == "| cell3-sparse | - | - | - | - | - | - |"  # the only fixed policy failed


def test_paired_ratio_takes_each_rounds_ratio() -> None:
    # two rounds (one process each) of three in-script samples; the machine slow in the second round
    mine = {"op_samples": [1.0, 1.1, 3.0, 2.0, 2.2, 2.1], "walls": [5.0, 9.0]}
    other = {"op_samples": [1.0, 1.0, 1.0, 2.0, 2.0, 2.0], "walls": [4.0, 10.0]}
    assert report.per_round(mine, "op_median") == [1.1, 2.1]
    assert report.paired_ratio(mine, other, "op_median") == pytest.approx((1.1 + 1.05) / 2)
    assert report.paired_ratio(mine, other, "wall_median") == pytest.approx((5 / 4 + 9 / 10) / 2)
    # rounds that do not line up (a failed run, uneven samples): no paired ratio
    assert report.paired_ratio(mine, {"op_samples": [1.0] * 6, "walls": [1.0, 1.0, 1.0]}, "wall_median") is None
    assert report.per_round({"op_samples": [1.0] * 5, "walls": [1.0, 1.0]}, "op_median") is None


def test_the_header_names_the_rounds_of_each_kind(tmp_path: Path) -> None:
    data = {**synthetic(), "micro_reps": 9, "small_reps": 9, "large_reps": 5}
    md = run(tmp_path, data)[0]
    assert ("9 rounds (micro-benchmarks), 9 rounds (algorithms' small size), 5 rounds (their large size), "
            "3 rounds (every SystemDS run)") in md


def test_cuboid_section_is_labelled_model_output(tmp_path: Path) -> None:
    """The (P,Q,R) search timing and the modelled communication (benchmarks/cuboid_model.py), from a
    real measure() of the model: the search equals the brute force, and BFO's memory beyond the task's
    is flagged."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import cuboid_model

    data = synthetic()
    data["cuboid"] = {"search": {"cells": 2_000_000, "search_s": 0.0017, "brute_force_s": 3.8, "search_points": 986,
                                 "brute_force_points": 1_999_116, "pqr": [7, 3, 5], "equal": True},
                      "rows": cuboid_model.modelled()}
    md = run(tmp_path, data)[0]
    sec = [v for k, v in sections(md).items() if k.startswith("FuseME's cuboid operator")][0]
    assert "1.70 ms" in sec and "3.80 s" in sec and "same choice (7,3,5): yes" in sec and "model output" in sec
    assert "| n x 2K x n, n=100K | 8 | (8,6,2) | (8,6,2) | 307 | 320 | 22.6 |" in sec
    assert "| n x 2K x n, n=500K | 8 | (8,6,2) | (8,6,2) |" in sec and "16.0 (over 10) |" in sec


def test_layout_section_sets_the_searches_beside_the_paper(tmp_path: Path) -> None:
    """The format-choice searches' times (benchmarks/layout_search.py, a real measure() at scale 1-2
    on the smallest format set): the paper's Fig. 13 figures beside ours, brute force equal to the DP,
    "Fail" where the paper's brute force did not finish."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import layout_search

    rows = layout_search.measure(scales=(1, 2), reps=1, brute=("block",), kinds=("block",))
    assert all(r["equal"] for r in rows if "brute_s" in r) and sum("brute_s" in r for r in rows) == 3
    data = synthetic()
    data["layout"] = rows
    md = run(tmp_path, data)[0]
    sec = [v for k, v in sections(md).items() if k.startswith("Format choice")][0]
    assert "model only" in sec
    assert "| block (10) | dag2 | 1 |" in sec and "| 0:28 | yes |" in sec
    assert "| block (10) | tree | 2 |" in sec and "| - | Fail | - |" in sec
