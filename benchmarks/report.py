"""Regenerate the benchmark report (``docs/benchmarks.md`` and its plots) from a results JSON of ``suite.py``.

The report is derived entirely from the JSON so that the numbers in the documentation can always be traced
back to one recorded run, and so that a report can be rebuilt (new layout, fixed typo) without re-running
hours of benchmarks. It contains: how the run was produced (command, date, commit, machine, read
bandwidths) and how to read the numbers; the micro-benchmark operation times of every system next to the
bandwidth limit, and the same as ratios to NumPy; per data size, the algorithm times, the whole-process wall
times of lafuse and SystemDS, and ratios to NumPy; the compile overhead of lafuse with a cold and a warm plan
and kernel cache; and bar charts of all of these.

Runs fail in parts (a system missing, a timeout, a wrong result), so every number may be null or missing:
such cells print ``-`` rather than stopping the report, skipped systems show their reason as a footnote,
and failing result checks are flagged in the cell so that a fast but wrong time is never read as a win.

Usage: ``python benchmarks/report.py [JSON] [--out docs/benchmarks.md] [--plots-dir docs/benchmarks]``
(default JSON: the newest ``benchmarks/results/bench-*.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_OUT = HERE.parent / "docs" / "benchmarks.md"
DEFAULT_PLOTS = HERE.parent / "docs" / "benchmarks"
BASELINE = "numpy"
SIZE_ORDER = ("small", "large")
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
COMPILE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("dags", "DAGs optimized"), ("fused_ops", "fused ops"), ("cplans", "CPlans"),
    ("memo_entries", "memo entries"), ("partitions", "partitions"), ("points", "points"),
    ("plans_total", "plans total"), ("plans_evaluated", "plans evaluated"), ("pruned_cost", "pruned cost"),
    ("pruned_structural", "pruned structure"), ("optimizer_s", "optimizer s"),
    ("kernels_compiled", "kernels compiled"), ("compile_s", "compile s"),
    ("kernel_max_s", "slowest kernel s"), ("disk_hits", "disk hits"),
    ("mem_hits", "mem hits"), ("load_s", "load s"), ("numba_import_s", "Numba import s"),
    ("deferred", "deferred"), ("wall_s", "wall s"),
)


def num(x: Any) -> float | None:
    """Failed runs leave nulls, strings or NaN where a number belongs; all of them read as "no number"."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def sig3(x: Any, scale: float = 1.0) -> str:
    """Three significant digits, never scientific notation, so columns of times stay comparable by eye."""
    v = num(x)
    if v is None:
        return "-"
    r = float(f"{v * scale:.3g}")
    if r == 0 or abs(r) >= 100:
        return f"{r:.0f}"
    return f"{r:.{2 - math.floor(math.log10(abs(r)))}f}"


def count(x: Any) -> str:
    v = num(x)
    return "-" if v is None else (str(int(v)) if v == int(v) else sig3(v))


def cell_text(s: Any) -> str:
    """Free text from the JSON (errors, data descriptions) must not break the markdown table."""
    return " ".join(str(s).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


class Footnotes:
    """Skip reasons and errors are long and repeat across cells; numbering them once keeps tables narrow."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        text = cell_text(text)
        if text not in self.texts:
            self.texts.append(text)
        return str(self.texts.index(text) + 1).translate(SUPERSCRIPT)

    def lines(self) -> list[str]:
        notes = [f"{str(i + 1).translate(SUPERSCRIPT)} {t}  " for i, t in enumerate(self.texts)]
        return [""] + notes if notes else []


def label(report: dict[str, Any], key: str) -> str:
    return str((report.get("system_labels") or {}).get(key) or key)


def entry(bench: dict[str, Any], key: str) -> dict[str, Any]:
    e = (bench.get("systems") or {}).get(key)
    return e if isinstance(e, dict) else {}


def failed_check(e: dict[str, Any]) -> str:
    """The result check of a wrong or failed run ("" for a good, unchecked or skipped one)."""
    check = e.get("check")
    return check.strip() if isinstance(check, str) and check.strip() not in ("", "ok", "-") else ""


def flag(e: dict[str, Any], notes: Footnotes) -> str:
    """A wrong or missing result must be visible next to its time, not only in a log."""
    check = failed_check(e)
    out = ""
    if check:
        if check.upper().startswith("MISMATCH"):
            out = " ⚠ " + cell_text(check)
        else:
            short = check.split(":")[0].strip()
            out = " ⚠ " + cell_text(short) + (notes.mark(check) if short != check else "")
    if e.get("note"):
        out += notes.mark(str(e["note"]))
    return out


def time_cell(e: dict[str, Any], notes: Footnotes, scale: float, med: str = "op_median",
              lo: Any = None, hi: Any = None) -> str:
    if e.get("skipped"):
        return "n/a" + notes.mark(str(e["skipped"]))
    if lo is None and hi is None:
        lo, hi = e.get("op_min"), e.get("op_max")
    text = sig3(e.get(med), scale)
    if text != "-" and num(lo) is not None and num(hi) is not None and num(lo) != num(hi):
        text += f" ({sig3(lo, scale)}–{sig3(hi, scale)})"
    return text + flag(e, notes)


def ratio_cell(value: Any, base: float | None) -> str:
    v = num(value)
    return "-" if v is None or not base else sig3(v / base)


def limit_cell(bench: dict[str, Any], scale: float) -> str:
    profile, measured = bench.get("bandwidth_limit"), bench.get("bandwidth_limit_measured")
    return f"{sig3(profile, scale)} / {sig3(measured, scale)}"


def ratio_table(report: dict[str, Any], benches: list[dict[str, Any]], systems: list[str],
                first: Callable[[dict[str, Any]], str], notes: Footnotes, what: str) -> list[str]:
    """Ratios make systems comparable across benchmarks of very different sizes; NumPy is the baseline
    every reader knows."""
    if BASELINE not in systems:
        return ["", "_No NumPy times in this run, so no ratios._"]
    rows = []
    for b in benches:
        base = num(entry(b, BASELINE).get("op_median"))
        row = [first(b)]
        for key in systems:
            e = entry(b, key)
            if e.get("skipped"):
                row.append("n/a" + notes.mark(str(e["skipped"])))
                continue
            row.append(ratio_cell(e.get("op_median"), base) + (" ⚠" if failed_check(e) else ""))
        row.append(ratio_cell(b.get("bandwidth_limit"), base))
        rows.append(row)
    header = [what] + [label(report, k) for k in systems] + ["bandwidth limit"]
    return ["", f"Times as x of {label(report, BASELINE)} (lower is better):", ""] + table(header, rows)


def colors(systems: list[str]) -> dict[str, Any]:
    """One color per system in every plot, so a reader can follow a system from chart to chart."""
    cmap = colormaps["tab10" if len(systems) <= 10 else "tab20"]
    return {k: cmap(i % cmap.N) for i, k in enumerate(systems)}


def bar_plot(path: Path, groups: list[str], series: list[tuple[str, Any, list[float | None]]],
             ylabel: str, title: str, log: bool = True,
             limits: list[tuple[float | None, float | None]] | None = None) -> bool:
    """Bars only for values that exist (a missing bar reads as "did not run", a zero bar as "free"); the
    bandwidth limit per group is a tick across the group, the floor no system can beat."""
    present: list[list[tuple[str, Any, float]]] = [
        [(name, color, v) for name, color, vals in series
         if (v := vals[g]) is not None and (v > 0 or not log)] for g in range(len(groups))]
    if not any(present):
        return False
    fig = Figure(figsize=(12, 5.5))
    ax = fig.add_subplot()
    width = min(0.2, 0.84 / max(len(p) for p in present))
    for g, bars in enumerate(present):
        left = g - width * max(len(bars), 1) / 2
        for i, (_, color, v) in enumerate(bars):
            drawn = ax.bar(left + width * (i + 0.5), v, width, color=color)
            if not log:  # few bars on a linear scale: the value itself is the point, and zero is visible
                ax.bar_label(drawn, [sig3(v)], padding=2)
        for value, solid in zip(limits[g] if limits else (), (True, False)):
            if value is not None and (value > 0 or not log):
                ax.hlines(value, left - 0.03, g + (g - left) + 0.03, colors="black" if solid else "dimgray",
                          linestyles="solid" if solid else "dotted", linewidth=2)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    if log:
        ax.set_yscale("log")
        ticks = [v for lim in limits or [] for v in lim if v is not None and v > 0]
        lows = [v for bars in present for _, _, v in bars] + ticks
        ax.set_ylim(bottom=min(lows) / 1.6)  # room below the lowest bar or limit tick
        # plain numbers at 1, 2, 5 x 10^k instead of matplotlib's 2x10^1 mantissa labels
        plain = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "125" else "")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    tilt = len(groups) > 6
    ax.set_xticks(range(len(groups)), groups, rotation=20 if tilt else 0, ha="right" if tilt else "center",
                  rotation_mode="anchor")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.set_axisbelow(True)
    used = {name for bars in present for name, _, _ in bars}
    handles: list[Any] = [Patch(color=c, label=n) for n, c, _ in series if n in used]
    if limits:
        handles += [Line2D([], [], color="black", lw=2, label="bandwidth limit (profile)"),
                    Line2D([], [], color="dimgray", lw=2, ls=":", label="bandwidth limit (measured)")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2 if tilt else -0.12),
              ncol=min(5, len(handles)), frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    # no Software/date chunks: the same JSON gives byte-identical PNGs, so regenerating shows no diff
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    return True


def time_plot(report: dict[str, Any], benches: list[dict[str, Any]], systems: list[str], path: Path,
              scale: float, unit: str, title: str) -> bool:
    def scaled(x: Any) -> float | None:
        v = num(x)
        return None if v is None else v * scale

    cmap = colors(systems)
    series = [(label(report, k), cmap[k], [None if entry(b, k).get("skipped")
                                           else scaled(entry(b, k).get("op_median")) for b in benches])
              for k in systems]
    limits = [(scaled(b.get("bandwidth_limit")), scaled(b.get("bandwidth_limit_measured"))) for b in benches]
    groups = [str(b.get("algorithm") or b.get("name") or "?") for b in benches]
    return bar_plot(path, groups, series, unit, title, limits=limits)


class Doc:
    """Markdown lines plus paths made relative to the markdown file, so the docs work wherever they are
    checked out or rendered (GitHub, a local viewer)."""

    def __init__(self, out: Path, plots_dir: Path) -> None:
        self.out, self.plots_dir = out, plots_dir
        self.lines: list[str] = []

    def rel(self, target: Path) -> str:
        return Path(os.path.relpath(target.resolve(), self.out.resolve().parent)).as_posix()

    def plot(self, name: str, alt: str, make: Callable[[Path], bool]) -> None:
        path = self.plots_dir / name
        if make(path):
            self.lines += ["", f"![{alt}]({self.rel(path)})"]

    def regenerate(self, json_path: Path) -> str:
        """The command that rewrites this file, with paths from the repository root (where make runs)."""
        def repo(p: Path) -> str:
            return Path(os.path.relpath(p.resolve(), HERE.parent)).as_posix()
        if any(repo(p).startswith("..") for p in (json_path, self.out, self.plots_dir)):
            return "python benchmarks/report.py JSON --out MARKDOWN --plots-dir DIR"  # outside the repository
        default = (self.out.resolve(), self.plots_dir.resolve()) == (DEFAULT_OUT, DEFAULT_PLOTS)
        return (f"python benchmarks/report.py {repo(json_path)}"
                + ("" if default else f" --out {repo(self.out)} --plots-dir {repo(self.plots_dir)}"))


def header(doc: Doc, report: dict[str, Any], json_path: Path) -> None:
    m = report.get("machine") or {}
    libs = [f"{name} {m[k]}" for k, name in (("python", "Python"), ("numpy", "NumPy"), ("numba", "Numba"),
                                            ("jax", "JAX"), ("numexpr", "numexpr"), ("systemds", "SystemDS"))
            if m.get(k)]
    missing = [name for k, name in (("jax", "JAX"), ("numexpr", "numexpr"), ("systemds", "SystemDS"))
               if k in m and not m.get(k)]
    profile = report.get("profile")
    bw, source = (list(profile) + [None, None])[:2] if isinstance(profile, list | tuple) else (None, None)
    reps, inner = report.get("reps", "-"), report.get("inner", "-")
    micro_reps = report.get("micro_reps", reps)

    def plural(n: Any) -> str:
        return f"{n} round" + ("" if n == 1 else "s")

    small_reps = report.get("small_reps", reps)
    large_reps = report.get("large_reps", reps)
    if micro_reps == reps == small_reps == large_reps:
        rounds = plural(reps)
    elif small_reps == reps == large_reps:
        rounds = f"{plural(micro_reps)} (micro-benchmarks), {plural(reps)} (algorithms)"
    elif large_reps == reps:
        rounds = (f"{plural(micro_reps)} (micro-benchmarks), {plural(small_reps)} (algorithms' small size), "
                  f"{plural(reps)} (their large size and every SystemDS run)")
    else:
        rounds = (f"{plural(micro_reps)} (micro-benchmarks), {plural(small_reps)} (algorithms' small size), "
                  f"{plural(large_reps)} (their large size), {plural(reps)} (every SystemDS run)")
    doc.lines += [
        "# Benchmarks", "",
        f"Generated by `benchmarks/report.py` from [`{json_path.name}`]({doc.rel(json_path)}); do not edit "
        f"by hand, rerun `{doc.regenerate(json_path)}` instead.", "",
        f"- command: `{report.get('command') or '-'}`"
        + (" (quick: reduced sizes)" if report.get("quick") else ""),
        f"- started: {report.get('started') or '-'}, commit `{report.get('commit') or '-'}`, "
        f"total {sig3(report.get('total_seconds'))} s, {rounds}, {inner} inner iterations per micro-benchmark process",
        f"- machine: {count(m.get('cpus'))} CPUs, " + ", ".join(libs)
        + (f" (not installed: {', '.join(missing)})" if missing else "") + f"; {m.get('platform') or '-'}",
        f"- read bandwidth: {sig3(bw, 1e-9)} GB/s (lafuse hardware profile, {source or 'unknown source'}), "
        f"{sig3(report.get('measured_read_bw'), 1e-9)} GB/s measured (parallel Numba read pass)", "",
        f"**How to read.** Times are medians of the samples from {rounds}, interleaved (each round runs every system "
        "once, in turn), with (min–max) when the samples spread. Micro-benchmarks time the operation "
        f"inside the DML script for lafuse and SystemDS ({inner} iterations per process, the first one "
        "excluded) and in-process after one warm-up call for NumPy, numexpr, JAX and Numba. Algorithms "
        "time the algorithm inside the script (`time()` around it, one run per process); for lafuse and "
        "SystemDS the whole-process wall time (start-up, compilation, reading the data) is given as well. "
        "The NumPy/SciPy twin of an algorithm is timed the same way, one run in a process of its own after "
        "reading the same files (`benchmarks/numpy_twin.py`): a fresh process touches its memory for the "
        "first time, which a warm process does not; its in-process time after a warm-up call (as JAX's) is "
        "the column NumPy/SciPy warm, in-process. "
        "Each lafuse fusion policy runs every benchmark once untimed first (fuse-all's run, with an empty "
        "plan and kernel cache, is the cold row of the compile-overhead table), so the timed runs show the "
        "state from a script's second run on; lafuse's timed runs go without `--stats` (an untimed run "
        "with it gives the heavy hitters); JAX's compilation is in its warm-up call. "
        "The bandwidth limit is the bytes that must be read (× passes for algorithms) over the read "
        "bandwidth, with the profile's bandwidth / the measured one. Ratios are x of NumPy (time / NumPy "
        "time, lower is better). ⚠ marks a result that does not match NumPy's or a failed run; n/a marks a "
        "system that cannot run the benchmark, with the reason below the table.",
    ]


def wall_table(report: dict[str, Any], benches: list[dict[str, Any]], systems: list[str],
               first: Callable[[dict[str, Any]], str], notes: Footnotes, what: str, work: str) -> list[str]:
    """What a user waits for: lafuse's and SystemDS's whole process, start-up and compilation included."""
    walled = [k for k in systems if k.startswith(("lafuse", "systemds"))
              or any(num(entry(b, k).get("wall_median")) is not None for b in benches)]
    if not walled:
        return []

    def wall(e: dict[str, Any]) -> str:
        walls = [w for w in (num(x) for x in e.get("walls") or []) if w is not None]
        lo, hi = (min(walls), max(walls)) if walls else (None, None)
        return time_cell(e, notes, 1.0, "wall_median", lo, hi)

    return (["", f"Whole-process wall time in s (start-up, compilation, reading the data, {work}):", ""]
            + table([what] + [label(report, k) for k in walled],
                    [[first(b)] + [wall(entry(b, k)) for k in walled] for b in benches]))


def micro_section(doc: Doc, report: dict[str, Any], benches: list[dict[str, Any]],
                  systems: list[str]) -> None:
    notes = Footnotes()
    rows = [[cell_text(b.get(f) or "-") for f in ("name", "expr", "data")]
            + [time_cell(entry(b, k), notes, 1e3) for k in systems] + [limit_cell(b, 1e3)] for b in benches]
    doc.lines += ["", "## Micro-benchmarks", "", "Operation time in ms:", ""]
    doc.lines += table(["benchmark", "expression", "data"] + [label(report, k) for k in systems]
                       + ["bandwidth limit (profile / measured)"], rows)
    doc.lines += wall_table(report, benches, systems, lambda b: cell_text(b.get("name") or "-"), notes,
                            "benchmark", "the iterations")
    doc.lines += ratio_table(report, benches, systems, lambda b: cell_text(b.get("name") or "-"), notes,
                             "benchmark")
    doc.lines += notes.lines()
    doc.plot("micro.png", "micro-benchmark times", lambda p: time_plot(
        report, benches, systems, p, 1e3, "operation time (ms, log)", "Micro-benchmarks"))


def algorithm_section(doc: Doc, report: dict[str, Any], size: str, benches: list[dict[str, Any]],
                      systems: list[str]) -> None:
    notes = Footnotes()

    def name(b: dict[str, Any]) -> str:
        return cell_text(b.get("algorithm") or b.get("name") or "-")

    rows = [[name(b), cell_text(b.get("data") or "-")] + [time_cell(entry(b, k), notes, 1.0) for k in systems]
            + [limit_cell(b, 1.0), count(b.get("passes"))] for b in benches]
    doc.lines += ["", f"## Algorithms, {size or 'unsized'} data", "", "Algorithm time in s:", ""]
    doc.lines += table(["algorithm", "data"] + [label(report, k) for k in systems]
                       + ["bandwidth limit (profile / measured)", "passes"], rows)
    doc.lines += wall_table(report, benches, systems, name, notes, "algorithm", "the algorithm")
    doc.lines += ratio_table(report, benches, systems, name, notes, "algorithm")
    doc.lines += notes.lines()
    slug = size or "unsized"
    doc.plot(f"algorithms-{slug}.png", f"algorithm times, {slug} data", lambda p: time_plot(
        report, benches, systems, p, 1.0, "algorithm time (s, log)", f"Algorithms, {slug} data"))


def compile_section(doc: Doc, report: dict[str, Any], rows: list[dict[str, Any]], systems: list[str]) -> None:
    bench_order = list(dict.fromkeys(str(r.get("benchmark") or "-") for r in rows))
    caches = {"cold": 0, "warm": 1}

    def key(r: dict[str, Any]) -> tuple[int, int, int, str]:
        s = str(r.get("system") or "-")
        return (bench_order.index(str(r.get("benchmark") or "-")),
                systems.index(s) if s in systems else len(systems), caches.get(str(r.get("cache")), 2), s)

    rows = sorted(rows, key=key)
    notes = Footnotes()

    def first(r: dict[str, Any]) -> list[str]:
        error = " ⚠" + notes.mark(str(r["error"])) if r.get("error") else ""
        return [cell_text(r.get("benchmark") or "-"), cell_text(label(report, str(r.get("system") or "-"))),
                cell_text(r.get("cache") or "-") + error]

    cells = [first(r) + [sig3(r.get(k)) if k.endswith("_s") else count(r.get(k)) for k, _ in COMPILE_COLUMNS]
             for r in rows]
    doc.lines += ["", "## Compile overhead", "",
                  "Cold: lafuse fuse-all's first run of the benchmark, with an empty plan and kernel cache "
                  "(it compiles every kernel it fuses; slowest kernel: the longest cold compile of one of them). Warm: the next runs of fuse-all and of the "
                  "cost-based policy (untimed, with `--stats`), which load those kernels from the disk cache (or, for the cost-based "
                  "one, leave operators unfused where a kernel would not pay). The partitions, interesting "
                  "points and plans columns count the plan enumeration (paper 000 Figure 12). Times in s."]
    doc.lines += [""] + table(["benchmark", "system", "cache"] + [h for _, h in COMPILE_COLUMNS], cells)
    doc.lines += notes.lines()
    pairs = list(dict.fromkeys((str(r.get("benchmark") or "-"), str(r.get("system") or "-")) for r in rows))
    one_system = len({s for _, s in pairs}) == 1

    def values(cache: str) -> list[float | None]:
        found = {(str(r.get("benchmark") or "-"), str(r.get("system") or "-")): num(r.get("compile_s"))
                 for r in rows if r.get("cache") == cache}
        return [found.get(p) for p in pairs]

    groups = [b if one_system else f"{b}\n{label(report, s)}" for b, s in pairs]
    series = [("cold cache", "tab:blue", values("cold")), ("warm cache", "tab:orange", values("warm"))]
    doc.plot("compile.png", "kernel compile time, cold and warm cache", lambda p: bar_plot(
        p, groups, series, "compile time (s)", "Kernel compile time", log=False))


POLICIES = ("lafuse", "lafuse-fuse-all", "lafuse-fuse-no-redundancy")  # the fixed ones (lafuse: no codegen)
COST = "lafuse-cost"


def per_round(e: dict[str, Any], med: str) -> list[float] | None:
    """A system's time in each round, in round order: its wall time, or the median of the round's
    in-script samples (one process per round; every process gives the same number of samples, in
    the order the rounds ran). None when a round is missing or the samples do not split evenly."""
    walls = [w for w in (num(x) for x in e.get("walls") or []) if w is not None]
    if med == "wall_median":
        return walls or None
    ops = [o for o in (num(x) for x in e.get("op_samples") or []) if o is not None]
    if not walls or not ops or len(ops) % len(walls):
        return None
    k = len(ops) // len(walls)
    return [statistics.median(ops[i:i + k]) for i in range(0, len(ops), k)]


def paired_ratio(mine: dict[str, Any], other: dict[str, Any], med: str) -> float | None:
    """The median over rounds of ``mine``'s time over ``other``'s in the same round: the rounds run the
    systems back to back, so a slow spell of the machine weighs on both (on the 2-core VM the benchmarks
    run on, a memory-bound kernel's time swings by ~20% over seconds, within one process and single-
    threaded too: magg-sparse, fuse-all, 40 vs 48 ms an iteration), where the ratio of the two medians
    takes each system's slow rounds separately."""
    a, b = per_round(mine, med), per_round(other, med)
    if not a or not b or len(a) != len(b):
        return None
    return statistics.median(x / max(y, 1e-12) for x, y in zip(a, b, strict=True))


POLICY_BOUND = 1.1  # the cost-based policy's time over the best fixed policy's the report counts rows within


def policy_section(doc: Doc, report: dict[str, Any], benches: list[dict[str, Any]]) -> None:
    """The cost-based policy against the best of the fixed ones, per benchmark, by the time measured
    inside the script and by the whole process: the policy weighs whole-process time (a kernel's load
    and Numba's start are paid outside the timed loop), so both are shown; each as the ratio of the
    medians and as the median of the rounds' ratios (paired_ratio)."""
    rows = []
    within = {"medians": [0, 0], "paired": [0, 0]}  # in-script rows within POLICY_BOUND x: [held, counted]
    for b in benches:
        cost = entry(b, COST)
        if not cost or cost.get("skipped"):
            continue
        cells = [cell_text(b.get("name") or "-")]
        for med in ("op_median", "wall_median"):
            fixed = {k: num(entry(b, k).get(med)) for k in POLICIES}
            fixed = {k: v for k, v in fixed.items() if v is not None and not failed_check(entry(b, k))}
            mine = num(cost.get(med))
            if not fixed or mine is None:
                cells += ["-", "-", "-"]
                continue
            best = min(fixed, key=lambda k: fixed[k])
            warn = " ⚠" if failed_check(cost) else ""
            ratio = mine / max(fixed[best], 1e-12)
            pair = paired_ratio(cost, entry(b, best), med)
            if med == "op_median":
                for kind, x in (("medians", ratio), ("paired", pair)):
                    if x is not None:
                        within[kind][0] += x <= POLICY_BOUND
                        within[kind][1] += 1
            cells += [cell_text(label(report, best)), sig3(ratio) + warn,
                      "-" if pair is None else sig3(pair) + warn]
        rows.append(cells)
    if not rows:
        return
    doc.lines += ["", "## Cost-based policy against the best fixed policy", "",
                  "The best of lafuse without codegen, fuse-all and fuse-no-redundancy (by median), and the "
                  "cost-based time as x of it (lower is better; below 1 the cost-based policy beat all three), "
                  "by the time inside the script and by the whole process: the ratio of the two medians, and "
                  "paired, the median over the rounds of the round's ratio (each round runs the policies back "
                  "to back, so a slow spell of the machine weighs on both; a row whose policies run the same "
                  "kernels has its paired ratio near 1 where the medians can differ by the machine's swings).",
                  ""]
    doc.lines += table(["benchmark", "best fixed (in script)", "cost-based x", "paired x",
                        "best fixed (whole process)", "cost-based x", "paired x"], rows)
    (m_ok, m_n), (p_ok, p_n) = within["medians"], within["paired"]
    doc.lines += ["", f"In script, the cost-based policy is within {POLICY_BOUND}x of the best fixed one on "
                  f"{m_ok} of {m_n} rows by the ratio of medians and on {p_ok} of {p_n} paired."]


def render(report: dict[str, Any], json_path: Path, out: Path, plots_dir: Path) -> None:
    """Entry point for ``suite.py``: write the markdown and the PNGs for one run."""
    if report.get("schema") not in (None, 1):
        print(f"report.py: schema {report.get('schema')!r} is newer than 1; rendering what it knows",
              file=sys.stderr)
    benches = [b for b in report.get("benchmarks") or [] if isinstance(b, dict)]
    systems = [str(s) for s in report.get("systems") or []]
    for b in benches:  # systems the list forgot still get a column, after the listed ones
        systems += [k for k in b.get("systems") or {} if k not in systems]
    doc = Doc(out, plots_dir)
    header(doc, report, json_path)
    micro = [b for b in benches if b.get("group") != "algorithm"]
    if micro:
        micro_section(doc, report, micro, systems)
    algos = [b for b in benches if b.get("group") == "algorithm"]
    sizes = list(dict.fromkeys([s for s in SIZE_ORDER if any(b.get("size") == s for b in algos)]
                               + [str(b.get("size") or "") for b in algos]))
    for size in sizes:
        algorithm_section(doc, report, size, [b for b in algos if str(b.get("size") or "") == size], systems)
    python_api_section(doc, algos)
    policy_section(doc, report, benches)
    compile_rows = [r for r in report.get("compile") or [] if isinstance(r, dict)]
    if compile_rows:
        compile_section(doc, report, compile_rows, systems)
    startup = [r for r in report.get("startup") or [] if isinstance(r, dict)]
    if startup:
        startup_section(doc, startup)
    if isinstance(report.get("distributed"), dict):
        distributed_section(doc, report["distributed"])
    if isinstance(report.get("cuboid"), dict):
        cuboid_section(doc, report["cuboid"])
    layout_rows = [r for r in report.get("layout") or [] if isinstance(r, dict)]
    if layout_rows:
        layout_section(doc, layout_rows)
    fmt_rows = [r for r in report.get("formats") or [] if isinstance(r, dict)]
    if fmt_rows:
        formats_section(doc, fmt_rows)
    sp_rows = [r for r in report.get("sumproduct") or [] if isinstance(r, dict)]
    if sp_rows:
        sumproduct_section(doc, sp_rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(doc.lines) + "\n", encoding="utf-8")


def python_api_section(doc: Doc, algos: list[dict[str, Any]]) -> None:
    """Each algorithm written with the Python API (benchmarks/python_api.py) against its DML, both with
    the default cost-based fusion, both one timed run a process after the inputs are read."""
    rows = []
    for b in algos:
        by = b.get("systems") or {}
        py, dml = entry(b, "lafuse-python"), entry(b, "lafuse-cost")
        if not py or py.get("skipped") or not dml:
            continue
        tp, td = num(py.get("op_median")), num(dml.get("op_median"))
        rows.append([cell_text(b.get("algorithm") or b.get("name") or "-"), cell_text(b.get("size") or "-"),
                     sig3(tp), sig3(td), sig3(tp / td if tp and td else None),
                     cell_text((by.get("lafuse-python") or {}).get("check") or "-")])
    if not rows:
        return
    doc.lines += ["", "## Python API against DML", "",
                  "The algorithms written with `import lafuse as lf` (`benchmarks/python_api.py`: statement for "
                  "statement the DML, its loops staged with `lf.fori_loop`, so the DML's plans; built and "
                  "compiled before the timed region, as `lafuse run` compiles a script before its first "
                  "`time()`) against the same algorithm in DML, both cost-based, each one run in a process of "
                  "its own; seconds (median), and Python / DML. `lf.compile` also waits for the background import "
                  "the script's last run needed (SciPy's sparse module, Numba), which a DML run's timed region "
                  "may begin with: KMeans and PNMF are faster from Python for that.", ""]
    doc.lines += table(["algorithm", "size", "Python API s", "DML s", "Python / DML", "check"], rows)


def startup_section(doc: Doc, rows: list[dict[str, Any]]) -> None:
    doc.lines += ["", "## Start-up", "",
                  "Whole-process wall time of `lafuse run` on a small script and of `python -c \"import numpy\"`, "
                  "run in turn after warm-up runs (warm bytecode and plan cache; `benchmarks/startup.py`); "
                  "the ratio is the median of the pairwise ratios.", ""]
    doc.lines += table(["script", "lafuse ms", "import numpy ms", "ratio", "pairs"],
                       [[str(r.get("script")), sig3(r.get("lafuse_median"), 1e3), sig3(r.get("numpy_import_median"), 1e3),
                         sig3(r.get("ratio_median")), count(r.get("runs"))] for r in rows])


def sumproduct_section(doc: Doc, rows: list[dict[str, Any]]) -> None:
    """Sum-product optimization on against off (benchmarks/sumproduct.py, paper 001 §3)."""
    doc.lines += ["", "## Sum-product optimization on and off", "",
                  "`benchmarks/sumproduct.py`: each row in one process, config `sum_product` on and off in turn "
                  "after a warm-up of each, default cost-based fusion, every run compiling its script (the rule's "
                  "costings included); median seconds, the ratio off / on (above 1: the rewrite pays), the rewrites "
                  "that fired (paper 001's categories, the written and the chosen expression).", ""]
    doc.lines += table(["benchmark", "on ms", "off ms", "off / on", "runs", "check", "rewrites"],
                       [[str(r.get("name")), sig3(r.get("on_s"), 1e3), sig3(r.get("off_s"), 1e3), sig3(r.get("ratio")),
                         count(r.get("reps")), str(r.get("check")),
                         "; ".join(str(x).replace("|", "\\|") for x in r.get("rewrites") or []) or "none"]
                        for r in rows])


def _pqr(x: Any) -> str:
    return "(" + ",".join(str(v) for v in x) + ")" if isinstance(x, list) else "-"


def cuboid_section(doc: Doc, sec: dict[str, Any]) -> None:
    """FuseME's (P, Q, R) search time and its modelled communication at the paper's cluster scale
    (benchmarks/cuboid_model.py): model output beside the paper's published figures."""
    s = sec.get("search") or {}
    rows = [r for r in sec.get("rows") or [] if isinstance(r, dict)]
    doc.lines += ["", "## FuseME's cuboid operator: (P,Q,R) search and modelled communication (model output)", "",
                  "`benchmarks/cuboid_model.py` (lafuse.cost.cuboid, paper 004 §3.3). The pruned search over a "
                  f"{count(s.get('cells'))}-cell multiplication space took {sig3(s.get('search_s'), 1e3)} ms "
                  f"(median of 20; {count(s.get('search_points'))} points costed) against "
                  f"{sig3(s.get('brute_force_s'))} s for the brute force ({count(s.get('brute_force_points'))} points), "
                  f"same choice {_pqr(s.get('pqr'))}: {'yes' if s.get('equal') else 'NO'}.", "",
                  "Communication the model gives `X * log(U %*% t(V) + eps)` on paper 004's Table 3 data at its "
                  "cluster (8 workers x 12 tasks, 10 GB per task, 1 Gbps, 546 GFLOPS; cells and non-zeros at 8 bytes): "
                  "BFO at T = N x 12 tasks, RFO, and CFO at the searched (P,Q,R) (its R - 1 partial-product shuffle "
                  "apart), beside the paper's published optimum and BFO/CFO ratio. This is model output, not a "
                  "measurement; the paper's byte counts do not follow its own formula, so compare trends.", ""]
    doc.lines += table(["data (X n x n, U, V n x k)", "nodes", "(P,Q,R) model", "published", "BFO GB", "RFO GB",
                        "CFO GB", "CFO shuffle GB", "BFO / CFO", "published BFO / CFO", "BFO memory per task GB"],
                       [[str(r.get("data")), count(r.get("nodes")), _pqr(r.get("pqr")), _pqr(r.get("published_pqr")),
                         sig3(r.get("bfo_bytes"), 1e-9), sig3(r.get("rfo_bytes"), 1e-9), sig3(r.get("cfo_bytes"), 1e-9),
                         sig3(r.get("cfo_aggregation_bytes"), 1e-9),
                         sig3((num(r.get("bfo_bytes")) or 0) / (num(r.get("cfo_bytes")) or 1)),
                         sig3(r.get("published_bfo_ratio")),
                         sig3(r.get("bfo_memory_bytes"), 1e-9) + (" (over 10)" if (num(r.get("bfo_memory_bytes")) or 0)
                                                                 > (num(r.get("task_memory_bytes")) or 0) else "")]
                        for r in rows])


def _mmss(x: Any) -> str:
    v = num(x)
    return "Fail" if v is None else f"{int(v) // 60}:{int(v) % 60:02d}"


def layout_section(doc: Doc, rows: list[dict[str, Any]]) -> None:
    """The format-choice searches' optimization times (benchmarks/layout_search.py) beside paper 002's
    Fig. 13."""
    doc.lines += ["", "## Format choice: optimization time of the searches (paper 002, model only)", "",
                  "`benchmarks/layout_search.py` (lafuse.plan.layout): the paper's matrix-multiply chains "
                  "(Tree, DAG1, DAG2 at scales 1-4; inputs 20,000 x 20,000 single blocks, 10 workers) over its "
                  "three format sets, optimized by the tree DP (Tree) or the frontier DP (DAG1, DAG2), median "
                  "of 3; brute force at scale 1 where run. Beside them the paper's Fig. 13 (M:SS; its "
                  "implementation in SimSQL's optimizer, its catalogue). Both searches are exact: where both "
                  "ran, the costs must agree.", ""]
    doc.lines += table(["formats", "graph", "scale", "DP ms", "paper DP", "brute force s", "paper brute force",
                        "same cost"],
                       [[f"{r.get('formats')} ({count(r.get('n_formats'))})", str(r.get("shape")), count(r.get("scale")),
                         sig3(r.get("dp_s"), 1e3), _mmss(r.get("published_dp_s")),
                         sig3(r.get("brute_s")) if "brute_s" in r else "-", _mmss(r.get("published_brute_s")),
                         ("yes" if r.get("equal") else "NO") if "equal" in r else "-"] for r in rows])


FORMAT_GOAL = 1.05  # the chosen formats may be at most 5% slower than the better of the two rules


def formats_section(doc: Doc, rows: list[dict[str, Any]]) -> None:
    """The format choice's plans against the two rules (benchmarks/formats_local.py, paper 002 §8)."""
    doc.lines += ["", "## Format choice: chosen formats against the threshold and tiling rules (paper 002)", "",
                  "`benchmarks/formats_local.py`: each workload in one process, three configurations in turn after "
                  "a warm-up of each, every run compiling its script: `formats` \"dp\" (the plan stage's dynamic "
                  "programming over dense/CSR/CSC, plan.layout.local), \"rule\" (today's threshold rule: every "
                  "sparse value CSR) and \"tile\" (every operator on the embedded Dask cluster in 1000 x 1000 "
                  "blocks; one run, two orders of magnitude slower at these sizes, not run on the slicing loops: "
                  "`-`); median seconds and each rule's time over the chosen plan's (above 1: the choice is "
                  f"faster). Goal: never more than {FORMAT_GOAL - 1:.0%} slower than the better rule.", ""]
    cols = [k[:-2] for k in ("dp_s", "rule_s", "tile_s") if any(k in r for r in rows)]
    body = []
    for r in rows:
        best = min(((num(r.get(f"{c}_s")) or float("inf")) for c in cols if c != "dp"), default=float("inf"))
        dp = num(r.get("dp_s")) or float("inf")
        verdict = "met" if dp <= FORMAT_GOAL * best else "MISSED"
        body.append([str(r.get("name")), str(r.get("data")), *[sig3(r.get(f"{c}_s"), 1e3) for c in cols],
                     *[sig3(r.get(f"{c}_over_dp")) for c in cols if c != "dp"], count(r.get("reps")),
                     "; ".join(r.get("conversions") or []) or "none", str(r.get("check")), verdict])
    doc.lines += table(["workload", "data", *[f"{c} ms" for c in cols], *[f"{c} / dp" for c in cols if c != "dp"],
                        "runs", "conversions chosen", "check", "goal"], body)


DIST_SYSTEMS = ("lafuse-local", "lafuse-hybrid", "lafuse-dask", "dask-array", "sds-spark", "sds-hybrid")
DIST_LAFUSE = ("lafuse-hybrid", "lafuse-dask")


def _mb(x: Any) -> str:
    v = num(x)
    return "-" if v is None else sig3(v / 1e6)


def distributed_section(doc: Doc, sec: dict[str, Any]) -> None:
    """The distributed section (benchmarks/dist_section.py): per workload and size (fits / spills),
    the warm median of each system with its first run, lafuse on Dask against each of the others, the
    bytes moved between workers, spilled bytes and tasks, and a verdict against the goal."""
    rows = [r for r in sec.get("rows") or [] if isinstance(r, dict)]
    if not rows:
        return
    labels = sec.get("system_labels") or {}
    systems = [k for k in DIST_SYSTEMS if any(k in (r.get("systems") or {}) for r in rows)]
    mine = str(sec.get("mine") or "lafuse-dask")  # the goal's column (results of before --exec auto ran)
    notes = Footnotes()

    def lab(k: str) -> str:
        return cell_text(labels.get(k) or k)

    def name(r: dict[str, Any]) -> str:
        return f"{cell_text(r.get('title') or r.get('workload') or '-')}, {cell_text(r.get('size') or '-')}"

    def sys_entry(r: dict[str, Any], k: str) -> dict[str, Any]:
        e = (r.get("systems") or {}).get(k)
        return e if isinstance(e, dict) else {}

    def tcell(e: dict[str, Any]) -> str:
        if e.get("skipped"):
            return "n/a" + notes.mark(str(e["skipped"]))
        text = sig3(e.get("time"))
        if num(e.get("warm_median")) is not None and num(e.get("first")) is not None:
            text += f" ({sig3(e.get('first'))})"
        return text + flag(e, notes)

    limit = num(sec.get("memory_limit_bytes"))
    doc.lines += [
        "", "## Distributed: lafuse on Dask", "",
        f"`benchmarks/dist_section.py` (in `{report_command(sec)}`): one Dask cluster of "
        f"{sec.get('workers', '-')} worker processes x {sec.get('threads_per_worker', '-')} thread, "
        f"{cell_text(sec.get('worker_memory') or '-')} each ({_mb(limit)} MB in all), shared by every row. "
        "Fits: the unfused plan's working set (inputs and the dense intermediates it holds at its peak) "
        "well under the workers' memory; spills: 2-3x their total. Each system runs the algorithm "
        "several times in one process: the time is the median of the runs after the first (s), the "
        "first run in parentheses (compilation, JIT, Spark context); a time without parentheses is a "
        "process's only run (the spilling rows of make bench: one run each), first-run costs included. lafuse and dask.array scatter their "
        "inputs from their process inside the timed region; SystemDS reads its binary files inside it. "
        "SystemDS runs on a local Spark master in its own JVM "
        f"(`-exec spark` with -Xmx{cell_text((sec.get('sds_heaps') or {}).get('spark', '-'))}, "
        f"`-exec hybrid` with -Xmx{cell_text((sec.get('sds_heaps') or {}).get('hybrid', '-'))}). "
        + (f"lafuse on Dask runs as a user runs it on a cluster: `--exec auto --scheduler ADDR --local-memory "
           f"{cell_text(sec['lafuse_local_memory'])}`, this process given the memory SystemDS's hybrid mode "
           "gets as its heap, so an operator runs here or on the workers by the same rule as there; "
           "`--exec dask` sends every matrix operator to the workers, as `-exec spark` does. "
           if sec.get("lafuse_local_memory") else "")
        + "⚠ marks a result that differs from lafuse local's or a failed run. "
        "Goal: lafuse on Dask faster than SystemDS on Spark (both modes) and than dask.array on every "
        "row, and within 2x of lafuse local where the data fits.", ""]
    head = ["workload", "data", "working set MB (x limit)"] + [lab(k) for k in systems]
    cells = []
    for r in rows:
        ws = r.get("working_set_bytes")
        cells.append([name(r), cell_text(r.get("shape_str") or "-") + (f"; {cell_text(r['note'])}" if r.get("note") else ""),
                      f"{_mb(ws)} ({sig3(r.get('working_set_x_limit'))})"]
                     + [tcell(sys_entry(r, k)) for k in systems])
    doc.lines += ["Time in s, warm median (first run), or the only run:", ""] + table(head, cells)
    others = [k for k in systems if k != mine]
    forced = any(r.get("verdict_forced") for r in rows)
    ratio_rows = []
    for r in rows:
        me = sys_entry(r, mine)
        base = num(me.get("time")) if not failed_check(me) else None
        row = [name(r)]
        for k in others:
            e = sys_entry(r, k)
            t = num(e.get("time"))
            row.append("-" if base is None or t is None or failed_check(e) else sig3(base / max(t, 1e-12)))
        ratio_rows.append(row + [cell_text(r.get("verdict") or "-")]
                          + ([cell_text(r.get("verdict_forced") or "-")] if forced else []))
    doc.lines += ["", f"{lab(mine)} time as x of each system's (below 1: lafuse on Dask faster; goal: "
                  "below 1 against dask.array and SystemDS, at most 2 against lafuse local where the data fits)"
                  + ("; the last column holds `--exec dask` against the systems that run everything distributed "
                     "(SystemDS -exec spark, dask.array)" if forced else "") + ":",
                  ""] + table(["workload"] + [lab(k) for k in others] + ["verdict"]
                              + (["verdict of --exec dask"] if forced else []), ratio_rows)

    def ccell(e: dict[str, Any], k: str) -> str:
        c = e.get("counts") or {}
        if e.get("skipped") or not c:
            return "-"
        if str(e.get("check") or "").startswith("ERROR"):
            return "failed" + (" (a worker restarted)" if c.get("restarted") else "")
        if k.startswith("sds"):
            if not num(c.get("spark_started")):
                return "no Spark job"
            return (f"{_mb(c.get('shuffle_write_bytes'))} / {_mb(c.get('disk_spilled_bytes'))} / "
                    f"{count(c.get('tasks'))}")
        if k.startswith("lafuse") and not num(c.get("tasks")) and not num(c.get("submitted")):
            return "no Dask task"
        text = f"{_mb(c.get('moved_bytes'))} / {_mb(c.get('spilled_bytes'))} / {count(c.get('tasks'))}"
        if c.get("restarted"):
            text += " ⚠ worker restarted"
        return text

    counted = [k for k in systems if k != "lafuse-local"]
    doc.lines += ["", "Per run: MB moved between workers / MB spilled to disk / tasks. Dask: from the "
                  "workers' counters (worker-to-worker fetches in their transfer logs; the client's scatters "
                  "and gathers are not in them), spill as the workers' disk-write bytes, tasks executed. "
                  "SystemDS: from Spark's event log, shuffle bytes written / disk bytes spilled / tasks "
                  "(broadcasts are not in it; hybrid mode often starts no Spark job). Each is the process's "
                  "total over its runs, divided by the runs.", ""]
    mine_lafuse = [k for k in DIST_LAFUSE if k in systems]

    def scattered(r: dict[str, Any], k: str) -> str:
        c = sys_entry(r, k).get("counts") or {}
        return _mb(c.get("scattered_bytes")) if num(c.get("scattered_bytes")) is not None else "-"

    doc.lines += table(["workload"] + [lab(k) for k in counted] + [f"{lab(k)}: MB scattered from the client"
                                                                    for k in mine_lafuse],
                       [[name(r)] + [ccell(sys_entry(r, k), k) for k in counted]
                        + [scattered(r, k) for k in mine_lafuse] for r in rows])
    tops = [(name(r), lab(k), cell_text("; ".join(str(x) for x in sys_entry(r, k).get("top") or [])))
            for r in rows for k in mine_lafuse if sys_entry(r, k).get("top")]
    if tops:
        doc.lines += ["", "lafuse, heavy hitters (instruction x count) and its `--stats` Dask line "
                      "(over all runs of the process):", ""] + table(["workload", "run", "top instructions"],
                                                                     [list(t) for t in tops])
    met = sum(1 for r in rows if str(r.get("verdict") or "").startswith("met"))
    doc.lines += ["", f"Goal met on {met} of {len(rows)} rows"
                  + (f" ({lab(mine)}); `--exec dask` faster than SystemDS -exec spark and dask.array on "
                     f"{sum(1 for r in rows if str(r.get('verdict_forced') or '').startswith('met'))} of "
                     f"{len(rows)}" if forced else "")
                  + f"; section time {sig3(sec.get('seconds'))} s."]
    fuseme_table(doc, rows, lab, name, sys_entry)
    memory_table(doc, sec.get("fuseme_memory"), lab)
    doc.lines += notes.lines()


FUSEME = ("lafuse-cost", "lafuse-bfo", "lafuse-rfo", "lafuse-cfo", "lafuse-unfused", "dask-array", "sds-spark",
          "sds-spark-codegen")


def fuseme_table(doc: Doc, rows: list[dict[str, Any]], lab: Callable[[str], str], name: Callable[..., str],
                 entry: Callable[..., dict[str, Any]]) -> None:
    """Paper 004's operators forced on the rows that ran them (dist_section.FUSEME_SYSTEMS): time, bytes
    moved between workers against the cuboid model's estimate, the operator and its (P,Q,R)."""
    rows = [r for r in rows if r.get("verdict_fuseme")]
    if not rows:
        return

    def cell(r: dict[str, Any], k: str) -> str:
        e = entry(r, k)
        if not e:
            return "-"
        if e.get("error") or e.get("time") is None:
            return "failed"
        c = e.get("counts") or {}
        if k.startswith("sds"):
            return f"{sig3(e.get('time'))} s, {_mb(c.get('shuffle_write_bytes'))} MB shuffled"
        text = f"{sig3(e.get('time'))} s, {_mb(c.get('moved_bytes'))} MB"
        if c.get("operator"):
            worker = c.get("worker_model_bytes")
            text += (f" (model {_mb(c.get('model_bytes'))} MB" + (f", worker model {_mb(worker)} MB" if worker is not None
                                                                   else "") + f"; {c['operator']})")
        if str(e.get("check") or "ok") != "ok":
            text += " ⚠ " + cell_text(str(e.get("check")))
        return text

    doc.lines += ["", "### Paper 004's distributed fused operators, forced", "",
                  "`--exec dask --fusion fuse-all --dist-fused KIND` (cost: the cuboid model's choice; bfo, rfo, "
                  "cfo forced) and the plan unfused on Dask (`--no-codegen`), beside dask.array and SystemDS "
                  "-exec spark from the rows above: warm median time, MB moved between workers per run (the "
                  "workers' counters) and, for a fused operator, paper 004's estimate of what its consolidation "
                  "moves (every input block counted as sent to each task, as on Spark), the worker-level model "
                  "of the placement it ran (each value once to each worker that reads it and does not hold it: "
                  "Dask's workers keep what they fetched) and the operator and (P,Q,R). Goals: CFO moves no more than "
                  "min(BFO, RFO), the cost-chosen operator within 10% of the fastest forced one, every forced "
                  "operator faster than SystemDS -exec spark (codegen off and on).", ""]
    doc.lines += table(["workload"] + [lab(k) for k in FUSEME] + ["verdict"],
                       [[name(r)] + [cell(r, k) for k in FUSEME] + [cell_text(str(r.get("verdict_fuseme")))]
                        for r in rows])


def memory_table(doc: Doc, row: dict[str, Any] | None, lab: Callable[[str], str]) -> None:
    """Paper 004's memory case (benchmarks/fuseme_memory.py): BFO against CFO where U and V whole do
    not fit a task's budget."""
    if not row:
        return

    def cell(e: dict[str, Any]) -> str:
        if e.get("error"):
            return "failed: " + cell_text(str(e["error"])[:120])
        c = e.get("counts") or {}
        text = f"{sig3(e.get('time'))} s"
        if c.get("operator"):
            text += (f", {_mb(c.get('moved_bytes'))} MB moved, {_mb(c.get('spilled_bytes'))} MB spilled "
                     f"({c['operator']}; model {_mb(c.get('model_bytes'))} MB, worker model "
                     f"{_mb(c.get('worker_model_bytes'))} MB)")
        if str(e.get("check") or "ok") != "ok":
            text += " ⚠ " + cell_text(str(e.get("check")))
        return text

    systems = row.get("systems") or {}
    doc.lines += ["", "### Paper 004's memory case: U and V beyond a task's budget", "",
                  f"`benchmarks/fuseme_memory.py`: {cell_text(row.get('title'))}, {cell_text(row.get('shape_str'))}, "
                  f"{row.get('workers')} workers of {row.get('worker_memory')}; per run (second of {row.get('runs')}): "
                  "time, MB moved between workers and spilled to disk (the workers' counters, the inputs' read "
                  "included). Goal: BFO fails or spills more than CFO, CFO completes with the local result.", ""]
    doc.lines += table([lab(k) for k in systems] + ["verdict"],
                       [[cell(e) for e in systems.values()] + [cell_text(str(row.get("verdict")))]])


def report_command(sec: dict[str, Any]) -> str:
    return cell_text(sec.get("command") or "make bench")


def newest_results() -> Path:
    found = sorted(RESULTS.glob("bench-*.json"))
    if not found:
        raise SystemExit(f"report.py: no bench-*.json in {RESULTS}; run `make bench` or name a JSON file")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="?", type=Path,
                    help="results JSON (default: the newest benchmarks/results/bench-*.json)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown (default: docs/benchmarks.md)")
    ap.add_argument("--plots-dir", type=Path, default=DEFAULT_PLOTS,
                    help="PNG directory (default: docs/benchmarks)")
    args = ap.parse_args(argv)
    json_path: Path = args.json or newest_results()
    report = json.loads(json_path.read_text(encoding="utf-8"))
    render(report, json_path, args.out, args.plots_dir)
    print(f"wrote {args.out} and plots in {args.plots_dir} from {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
