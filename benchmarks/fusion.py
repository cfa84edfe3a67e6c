"""Operator fusion, side by side: lafuse (codegen off, and each fusion policy) against NumPy/SciPy,
numexpr, JAX, hand-written Numba kernels, SystemDS 3.4 (codegen off and on) and the bandwidth limit.

Workloads: ``micro.py`` (``--quick`` shrinks them so the whole run takes a few minutes). This script runs
the micro-benchmarks alone and prints a table per workload; ``suite.py`` (``make bench``) runs them with
the algorithms and writes the report.

Data is generated once per data set with NumPy (seeded) and written to a temporary directory: ``.npy`` /
``.npz`` (with ``.mtd``) for lafuse, and CSV (dense) or MatrixMarket (sparse) text that one SystemDS run
converts to SystemDS binary, so every system computes on the same numbers and SystemDS's timed runs do
not parse text.

Operation time: lafuse and SystemDS run one DML script per process that repeats the operation ``--inner``
times, each time between two ``time()`` calls (the operation sits in an ``if`` block of its own, so the
``time()`` calls cannot be reordered around it, and its result is printed every time); the first iteration
of each process is reported separately (JIT, kernel compilation) and the median, minimum and maximum are
taken over the other ones. In-process systems (NumPy, numexpr, JAX, Numba) are warmed up once and then
timed ``--inner`` times. Each of ``--reps`` rounds runs every system once, in turn (interleaved). The
whole-process wall time of lafuse and SystemDS (start-up, compilation, read, ``--inner`` iterations) is
reported too. The bandwidth limit is the bytes of the inputs (as NumPy/SciPy hold them, CSR for sparse)
over the read bandwidth of ``lafuse calibrate``'s hardware profile (``--profile PATH``, else
``$LAFUSE_PROFILE`` or the default location; uncalibrated defaults say so), and again over the bandwidth a
parallel Numba read pass reaches on this machine (the profile's figure can be lower than what two
threads read, so a kernel may beat the first "limit").

Why the ``if`` block: lafuse orders ``time()`` freely within a basic block (observed: ``t1 - t0`` comes
out negative around a plain statement), SystemDS does not; the block boundary orders both.

Every result is checked against NumPy's (relative 1e-8; matrix results by their sum and sum of squares).

    .venv/bin/python benchmarks/fusion.py [--quick] [--reps N] [--inner K] [--only NAME ...]
        [--no-systemds] [--with-jax] [--with-numexpr] [--profile PATH] [--json PATH] [--markdown]

JAX and numexpr are optional: missing ones are reported as "not installed" unless ``--with-jax`` /
``--with-numexpr`` let the script ``pip install`` them into the running environment.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import (
    REL_TOL,
    ROOT,
    DataSet,
    SystemResult,
    _plain,
    _profile,
    bench_workload,
    comparison_modules,
    machine,
    measured_read_bw,
    result_check,
    systemds_runner,
    write_lafuse,
    write_systemds,
)
from micro import WORKLOADS, generate


def _ms(t: float | None) -> str:
    return "-" if t is None else (f"{t * 1e3:.1f}" if t < 10 else f"{t * 1e3:.0f}")


def rows_of(systems: list[SystemResult], extra: dict[str, Any], ref: tuple[float, ...]) -> list[dict[str, str]]:
    by = {s.name: s.summary() for s in systems}
    nb = by.get("numba", {}).get("op_median")
    lc = by.get("lafuse-cost", {}).get("op_median")
    rows = []
    for s in systems:
        d = by[s.name]
        med = d["op_median"]
        check = d["check"] = result_check(d, ref, REL_TOL)
        rng = "-" if med is None else f"{_ms(d['op_min'])}-{_ms(d['op_max'])}"
        rows.append({
            "system": s.name, "op ms": _ms(med) if not s.skipped else "-", "min-max": rng,
            "first ms": _ms(min(d["first"])) if d["first"] else "-",
            "wall s": "-" if d["wall_median"] is None else f"{d['wall_median']:.2f}",
            "x numba": f"{med / nb:.2f}" if med and nb else "-",
            "x lafuse-cost": f"{med / lc:.2f}" if med and lc else "-",
            "check": check, "notes": s.skipped or "; ".join(x for x in (d["note"], " ".join(d["top"])) if x)})
    bl = extra["bandwidth_limit"]
    rows.append({"system": "bandwidth limit", "op ms": _ms(bl), "min-max": "-", "first ms": "-", "wall s": "-",
                 "x numba": f"{bl / nb:.2f}" if bl and nb else "-",
                 "x lafuse-cost": f"{bl / lc:.2f}" if bl and lc else "-", "check": "-",
                 "notes": f"{extra['bytes_read_once'] / 1e6:.0f} MB at {extra['read_bw'] / 1e9:.1f} GB/s "
                          f"(hardware profile: {extra['profile']})"})
    bm = extra["bandwidth_limit_measured"]
    rows.append({"system": "bandwidth (measured)", "op ms": _ms(bm), "min-max": "-", "first ms": "-", "wall s": "-",
                 "x numba": f"{bm / nb:.2f}" if nb else "-", "x lafuse-cost": f"{bm / lc:.2f}" if lc else "-",
                 "check": "-", "notes": f"at {extra['measured_read_bw'] / 1e9:.1f} GB/s, a parallel Numba read "
                                        f"pass over 400 MB on this machine"})
    return rows


COLUMNS = ["system", "op ms", "min-max", "first ms", "wall s", "x numba", "x lafuse-cost", "check", "notes"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes in all; make bench)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved rounds (default 3, quick 2)")
    ap.add_argument("--inner", type=int, default=None,
                    help="timed iterations per process / round (default 4, quick 3); the first of a process is "
                         "reported apart")
    ap.add_argument("--only", action="append", default=None, metavar="NAME",
                    help=f"workload(s) to run: {', '.join(w.name for w in WORKLOADS)} (repeatable, or comma list)")
    ap.add_argument("--no-systemds", action="store_true", help="leave SystemDS out")
    ap.add_argument("--with-jax", action="store_true", help="pip install jax into this environment if missing")
    ap.add_argument("--with-numexpr", action="store_true", help="pip install numexpr if missing")
    ap.add_argument("--sds-heap", default=None, help="SystemDS JVM -Xmx (default 4g, full sizes 12g)")
    ap.add_argument("--profile", default=None, help="hardware profile JSON of lafuse calibrate (sets "
                                                    "LAFUSE_PROFILE for this run and its lafuse processes)")
    ap.add_argument("--json", default=None, help="where to write the results "
                                                 "(default benchmarks/results/fusion-<timestamp>.json)")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    a = ap.parse_args(argv)
    a.reps = a.reps or (2 if a.quick else 3)
    a.inner = max(2, a.inner or (3 if a.quick else 4))
    only = {n for x in a.only for n in x.split(",")} if a.only else None
    workloads = [w for w in WORKLOADS if only is None or w.name in only]
    if only and len(workloads) != len(only):
        ap.error(f"unknown workload(s) {sorted(only - {w.name for w in WORKLOADS})}")

    if a.profile:
        os.environ["LAFUSE_PROFILE"] = str(Path(a.profile).resolve())
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    with console.status("read bandwidth"):
        a.measured_bw = measured_read_bw()
    mods = comparison_modules(a.with_numexpr, a.with_jax)
    java, java_note = systemds_runner(a.no_systemds, a.sds_heap or ("4g" if a.quick else "12g"))
    out_json = Path(a.json) if a.json else ROOT / "results" / f"fusion-{datetime.now():%Y%m%d-%H%M%S}.json"
    report: dict[str, Any] = {
        "quick": a.quick, "reps": a.reps, "inner": a.inner, "started": datetime.now().isoformat(timespec="seconds"),
        "machine": machine(mods, java),
        "measured_read_bw": a.measured_bw, "profile": _profile(), "workloads": {},
    }
    t_start = time.perf_counter()
    md: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lafuse-fusion-") as d:
        tmp = Path(d)
        datasets: dict[str, DataSet] = {}
        for w in workloads:
            with console.status(f"{w.name}: data") as status:
                if w.data not in datasets:
                    ds = generate(w.data, a.quick)
                    write_lafuse(ds, tmp)
                    if java is not None:
                        status.update(f"{w.name}: data for SystemDS (text, converted to binary)")
                        write_systemds([ds], tmp, java)
                    datasets[w.data] = ds
                ds = datasets[w.data]
                systems, extra = bench_workload(w, ds, a, tmp, java, java_note, mods, status.update)
            np_runs = [r for s in systems if s.name == "numpy" for r in s.runs if r.results]
            ref = np_runs[0].results if np_runs else ()
            rows = rows_of(systems, extra, ref)
            report["workloads"][w.name] = {
                "expr": w.expr, **extra, "reference": list(ref),
                "systems": {s.name: s.summary() for s in systems}, "table": rows}
            title = (f"{w.name}: {w.expr} -- {extra['data']}; op time median of {a.reps} rounds x "
                     f"{a.inner - 1} warm iterations (in-process: x {a.inner})")
            table = Table(title=title, title_justify="left")
            for c in COLUMNS:
                table.add_column(c, justify="left" if c in ("system", "check", "notes") else "right",
                                 overflow="fold")
            for r in rows:
                style = "bold red" if r["check"].startswith(("MISMATCH", "ERROR", "no result")) else None
                table.add_row(*[r[c] for c in COLUMNS], style=style)
            console.print(table)
            md += [f"\n**{title}**\n", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
            md += ["| " + " | ".join(r[c].replace("|", "/") for c in COLUMNS) + " |" for r in rows]
    report["total_seconds"] = time.perf_counter() - t_start
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(report, indent=1, default=_plain))
    if a.markdown:
        print("\n".join(md))
    bad = [(w, r["system"]) for w, v in report["workloads"].items() for r in v["table"]
           if r["check"].startswith(("MISMATCH", "no result"))]
    console.print(f"total {report['total_seconds']:.0f} s; results in {out_json}")
    if bad:
        console.print(f"[bold red]RESULT MISMATCH: {bad}[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

