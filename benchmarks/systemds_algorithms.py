"""SystemDS's own algorithm scripts, unmodified, on lafuse and on SystemDS 3.4.0: agreement and wall time.

Runs every driver of ``tests/conformance/algorithms/`` (one per script of the 25-script core set, plus the
3 they call) on the same generated inputs (``tests/conformance/algodata.py``) at a chosen row count,
once per side per repetition, interleaved. For each driver it reports the largest relative difference
over everything the two runs print and write (``compare.max_rel_diff``: element-wise relative, cells a
million times below the matrix's largest measured against that floor) and the whole-process wall time of
``lafuse run ...`` and of ``java ... DMLScript -f ... -exec singlenode`` (JVM start included; lafuse's
Python start included). The tests check agreement at 200 rows; this measures it at any size.

    .venv/bin/python benchmarks/systemds_algorithms.py [--rows 10000] [--reps 1] [--only kmeans pnmf]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conformance import algodata, compare, corpus, sds  # noqa: E402
from conformance.test_algorithms import UNORDERED_STDOUT, ZERO_BELOW, script_of  # noqa: E402


def max_diff(sc: corpus.Script, ref_lines: list[str], ref_out: Path, lines: list[str], out: Path) -> float:
    if sc.name in UNORDERED_STDOUT:
        ref_lines, lines = sorted(ref_lines), sorted(lines)
    worst = compare.max_rel_diff_lines(ref_lines, lines)
    for k, fmt in sc.outputs.items():
        e = compare.read_matrix(ref_out / sc.output_file(k), fmt).values
        a = compare.read_matrix(out / sc.output_file(k), fmt).values
        worst = max(worst, compare.max_rel_diff(e, a, ZERO_BELOW.get(sc.name, 0.0)))
    return worst


def run_pair(sc: corpus.Script, inputs: Path, work: Path) -> tuple[float, float, float]:
    """(max relative difference, lafuse seconds, SystemDS seconds) of one interleaved pair of runs."""
    sds_out, laf_out = work / "sds" / "out", work / "laf" / "out"
    sds_out.mkdir(parents=True, exist_ok=True)
    laf_out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ref = sds.run_systemds(sc.path, sc.arguments(inputs, sds_out), work / "sds", sc.sds_config)
    t_sds = time.perf_counter() - t0
    if not ref.ok:
        raise RuntimeError(f"SystemDS failed on {sc.name}: {ref.error}")
    t0 = time.perf_counter()
    res = corpus.run_lafuse_file(sc.path, sc.arguments(inputs, laf_out))
    t_laf = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"lafuse failed on {sc.name}: {res.stderr[-2000:]}")
    return max_diff(sc, ref.stdout_lines, sds_out, res.stdout_lines, laf_out), t_laf, t_sds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10000, help="rows of the feature matrix (ratings: rows/2 x 30)")
    ap.add_argument("--reps", type=int, default=1, help="interleaved repetitions per driver (median reported)")
    ap.add_argument("--only", nargs="*", default=None, help="driver names (without .dml) to run")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    a = ap.parse_args(argv)
    names = sorted(p.stem for p in corpus.ALGORITHMS_DIR.glob("*.dml"))
    if a.only:
        names = [n for n in names if n in a.only]
    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    rows: list[tuple[str, ...]] = []
    table = Table(title=f"SystemDS's scripts, unmodified: lafuse vs SystemDS 3.4.0 ({a.rows} rows, "
                        f"median of {a.reps})")
    for col in ("driver", "script", "max rel diff", "lafuse s", "SystemDS s", "lafuse/SystemDS"):
        table.add_column(col, justify="left" if col in ("driver", "script") else "right")
    with tempfile.TemporaryDirectory() as d:
        inputs = algodata.write_all(Path(d) / "inputs", a.rows)
        for n in names:
            sc = corpus.load_script(corpus.ALGORITHMS_DIR / f"{n}.dml")
            diffs, tl, ts = [], [], []
            for r in range(a.reps):
                with console.status(f"{n} ({r + 1}/{a.reps})"):
                    dm, t_laf, t_sds = run_pair(sc, inputs, Path(d) / f"{n}-{r}")
                diffs.append(dm)
                tl.append(t_laf)
                ts.append(t_sds)
            ml, ms = statistics.median(tl), statistics.median(ts)
            rows.append((n, script_of(n + ".dml"), f"{max(diffs):.1e}", f"{ml:.2f}", f"{ms:.2f}", f"{ml / ms:.2f}"))
            table.add_row(*rows[-1])
    console.print(table)
    if a.markdown:
        print("| driver | script | max rel diff | lafuse s | SystemDS s | lafuse/SystemDS |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
