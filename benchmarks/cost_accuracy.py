"""Cost-model accuracy: the analytical estimate of each program in ``cost_programs/`` against its
measured execution time, for the whole program and for its heavy-hitter opcodes.

    .venv/bin/python benchmarks/cost_accuracy.py [--only NAME ...] [--reps 3] [--warmup 1]
                                                 [--hh-min-share 0.05] [--data-dir DIR]
                                                 [--blas-threads N] [--plain-total] [--markdown]

For every program (``benchmarks/cost_programs/NAME.dml``, all of them unless ``--only`` names some):

* inputs: the files the programs read are generated first (``io_csv``'s 200000x10 CSV with its
  ``.mtd``, written by ``np.savetxt``) in a temporary directory, or in ``--data-dir`` (kept and
  reused on the next run); programs that write get a path in that directory (``$out``);
* estimate: ``lafuse.explain.estimate_file(path, nvargs)`` -> ``est.total`` seconds and
  ``est.by_opcode`` (opcode -> seconds); if the estimator cannot be imported the harness says
  "estimator not available" and reports NaN, so the rest of it still runs;
* measure: the program is compiled like ``lafuse run`` does (``Compiler``, then ``Interpreter``)
  and only ``Interpreter.run`` is timed (parsing and compilation excluded; lazy lowering of blocks
  and dynamic recompilation happen while running and are included, as in ``--stats``). Each of
  ``--reps`` runs (default 3) compiles afresh; the program's time and each opcode's time are the
  medians over the runs, after ``--warmup`` untimed runs (default 1). The estimate is made after the
  warm-up and before the timed runs, so it prices the process state they see: the first run of a
  process also pays one-off imports (scipy.sparse, ~0.2 s) and first-touch page faults of memory
  beyond the process's peak, which the cost model charges only when they are still ahead. The Stats object's
  per-instruction cost estimate is switched off, so cost-model work is not timed. The Stats
  bookkeeping itself is timed (two clock reads and a record per instruction: about a third of an
  interpreter-bound loop like ``scalar_loop``); ``--plain-total`` takes each program's time from
  extra runs without Stats instead (the per-opcode times still come from instrumented runs);
* report: a table of estimated s, measured s (median and min-max), est/measured, and for the top 3
  measured opcodes (``fcall ...`` left out: its time includes the callee's body) their measured
  seconds and est/measured ratios; a program PASSes when its whole-program ratio lies in
  [0.5, 2] and each judged heavy hitter's in [1/3, 3]. Heavy hitters below ``--hh-min-share`` of
  the program's measured time (default 5%) are shown in brackets and not judged: at a few
  milliseconds their ratio is timer noise. Exit status 0 when every program passes, else 1.

The measurements need an idle machine: with another process busy on one of the 2 cores, BLAS
calls that use both threads stall (0.1 s spikes on a 201x201 ``solve`` were seen), so the
harness prints the load average and warns when it is high. ``--blas-threads 1`` (threadpoolctl)
makes the measurements far steadier on a shared machine, but it is then not the configuration the
cost model's profile was calibrated on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS_DIR = Path(__file__).resolve().parent / "cost_programs"
sys.path.insert(0, str(ROOT))

# the suite, in the order of the task list; any other .dml in PROGRAMS_DIR runs after these
ORDER = ("dense_elementwise", "matmult_heavy", "sparse_ops", "linreg_ds", "linreg_cg", "kmeans_loop",
         "io_csv", "io_write", "scalar_loop", "while_loop")

WHOLE_BAND = (0.5, 2.0)
HH_BAND = (1 / 3, 3.0)
TOP_HH = 3

# ------------------------------------------------------------------------------------ inputs

CSV_INPUTS = {"io_csv_X": (200_000, 10, 101)}  # name -> (rows, cols, seed)


def write_csv_matrix(path: Path, rows: int, cols: int, seed: int) -> None:
    """A uniform [0, 1) matrix as headerless CSV plus its SystemDS ``.mtd``."""
    X = np.random.default_rng(seed).random((rows, cols))
    np.savetxt(path, X, delimiter=",")
    mtd = {"data_type": "matrix", "value_type": "double", "rows": rows, "cols": cols,
           "format": "csv", "header": False, "sep": ","}
    Path(str(path) + ".mtd").write_text(json.dumps(mtd), encoding="utf-8")


def ensure_csv(data_dir: Path, name: str) -> Path:
    rows, cols, seed = CSV_INPUTS[name]
    path = data_dir / f"{name}.csv"
    mtd = Path(str(path) + ".mtd")
    if path.is_file() and mtd.is_file():
        try:
            m = json.loads(mtd.read_text(encoding="utf-8"))
            if (m.get("rows"), m.get("cols")) == (rows, cols):
                return path  # reuse (--data-dir)
        except ValueError:
            pass
    t0 = time.perf_counter()
    write_csv_matrix(path, rows, cols, seed)
    print(f"  generated {path.name} ({rows}x{cols}, {path.stat().st_size / 1e6:.1f} MB) "
          f"in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


# program name -> its $-arguments, given the data directory (inputs are generated on demand)
NVARGS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "io_csv": lambda d: {"X": str(ensure_csv(d, "io_csv_X"))},
    "io_write": lambda d: {"out": str(d / "io_write_Y.csv")},
}


def program_names() -> list[str]:
    found = {p.stem for p in PROGRAMS_DIR.glob("*.dml")}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


# ------------------------------------------------------------------------------ estimate

@dataclass
class Estimate:
    total: float = math.nan
    by_opcode: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def estimate(path: Path, nvargs: dict[str, Any], cfg: Any) -> Estimate:
    from lafuse import config as cfgmod

    try:
        from lafuse.explain import estimate_file
    except ImportError:
        return Estimate(error="estimator not available")
    try:
        with cfgmod.using(cfg):
            est = estimate_file(str(path), nvargs)
        return Estimate(float(est.total), {str(k): float(v) for k, v in dict(est.by_opcode).items()})
    except Exception as e:  # one program's failure should not end the benchmark
        return Estimate(error=f"estimator failed: {type(e).__name__}: {e}")


# ------------------------------------------------------------------------------- measure

@dataclass
class Measurement:
    times: list[float]
    op_time: dict[str, float]  # opcode -> median seconds over the runs
    op_count: dict[str, int]
    output: str

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _quiet_stats() -> Any:
    from lafuse.runtime.stats import Stats

    class QuietStats(Stats):
        """Stats without the per-instruction cost estimate (computed inside the timed span of an
        instruction's first execution), so measured times hold no cost-model work."""

        def estimate(self, ins: Any, args: Any = None) -> float:
            return 0.0

    return QuietStats()


def run_once(text: str, path: Path, nvargs: dict[str, Any], cfg: Any,
             instrumented: bool = True) -> tuple[float, Any, str]:
    """Compile (untimed) and run (timed) once: (execution seconds, Stats or None, printed output).
    ``instrumented=False`` runs without Stats, as ``lafuse run`` without ``--stats`` does."""
    from lafuse import config as cfgmod
    from lafuse.compiler import Compiler
    from lafuse.runtime.interp import Interpreter

    out = io.StringIO()
    with cfgmod.using(cfg if instrumented else cfg.with_(stats=False)), contextlib.redirect_stdout(out):
        stats = _quiet_stats() if instrumented else None
        comp = Compiler(cfgmod.get(), nvargs, [], stats, explain_out=out)
        prog = comp.compile_text(text, str(path))
        interp = Interpreter(prog, comp, out=out, stats=stats)
        t0 = time.perf_counter()
        interp.run()
        elapsed = time.perf_counter() - t0
    if stats is not None:
        stats.exec_time = elapsed
    return elapsed, stats, out.getvalue()


def measure(path: Path, nvargs: dict[str, Any], cfg: Any, reps: int, warmup: int,
            plain_total: bool = False) -> Measurement:
    """``plain_total``: the program's time comes from extra runs without Stats (interleaved with the
    instrumented ones, which still give the per-opcode times), free of the per-instruction timing
    and bookkeeping that ``--stats`` adds (about a third more time on an interpreter-bound loop)."""
    text = path.read_text(encoding="utf-8")
    for _ in range(warmup):
        run_once(text, path, nvargs, cfg)
    times: list[float] = []
    per_op: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    output = ""
    for r in range(reps):
        t, stats, output = run_once(text, path, nvargs, cfg)
        if plain_total:
            t, _, _ = run_once(text, path, nvargs, cfg, instrumented=False)
        times.append(t)
        for op in set(per_op) | set(stats.op_time):  # an opcode missing from a run counts 0 there
            per_op.setdefault(op, [0.0] * r).append(stats.op_time.get(op, 0.0))
        counts = dict(stats.op_count)
    return Measurement(times, {op: statistics.median(v) for op, v in per_op.items()}, counts, output)


# -------------------------------------------------------------------------------- report

@dataclass
class Row:
    name: str
    est: Estimate
    meas: Measurement | None
    error: str | None = None
    # (opcode, measured s, estimated s, judged?)
    hh: list[tuple[str, float, float, bool]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        if self.meas is None or self.meas.median <= 0:
            return math.nan
        return self.est.total / self.meas.median

    def whole_ok(self) -> bool | None:
        r = self.ratio
        return None if math.isnan(r) else WHOLE_BAND[0] <= r <= WHOLE_BAND[1]

    def hh_ok(self) -> bool | None:
        judged = [(m, e) for _, m, e, j in self.hh if j]
        if any(math.isnan(e) for _, e in judged):
            return None
        return all(HH_BAND[0] <= e / m <= HH_BAND[1] for m, e in judged if m > 0)

    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        w, h = self.whole_ok(), self.hh_ok()
        if w is None or h is None:
            return "n/a"
        return "PASS" if w and h else "FAIL"


def heavy_hitters(meas: Measurement, est: Estimate, min_share: float) -> list[tuple[str, float, float, bool]]:
    ops = sorted(((op, t) for op, t in meas.op_time.items() if not op.startswith("fcall ")),
                 key=lambda kv: -kv[1])[:TOP_HH]
    total = meas.median
    out = []
    for op, t in ops:
        e = math.nan if est.error else est.by_opcode.get(op, 0.0)  # an opcode the model leaves out: 0
        out.append((op, t, e, total > 0 and t >= min_share * total))
    return out


def _f(x: float, fmt: str = ".3f") -> str:
    return "nan" if math.isnan(x) else format(x, fmt)


def _ratio(e: float, m: float) -> float:
    return e / m if m > 0 and not math.isnan(e) else math.nan


def table_rows(rows: list[Row]) -> list[list[str]]:
    out = []
    for r in rows:
        if r.meas is None:
            out.append([r.name, _f(r.est.total), "-", "-", "-", *["-"] * TOP_HH, r.verdict()])
            continue
        cells = []
        for op, m, e, judged in r.hh:
            c = f"{op} {m:.3f}s x{_f(_ratio(e, m), '.2f')}"
            cells.append(c if judged else f"[{c}]")
        cells += ["-"] * (TOP_HH - len(cells))
        spread = f"{min(r.meas.times):.3f}-{max(r.meas.times):.3f}"
        out.append([r.name, _f(r.est.total), _f(r.meas.median), spread, _f(r.ratio, ".2f"), *cells, r.verdict()])
    return out


HEADERS = ["program", "est s", "measured s", "min-max s", "est/meas",
           *[f"heavy hitter {i} (meas, est/meas)" for i in range(1, TOP_HH + 1)], "verdict"]


def print_rich(rows: list[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for h in HEADERS:
        table.add_column(h, justify="left" if h == "program" or h.startswith("heavy") else "right")
    style = {"PASS": "green", "FAIL": "red", "ERROR": "red", "n/a": "yellow"}
    for cells in table_rows(rows):
        v = cells[-1]
        table.add_row(*(Text(c) for c in cells[:-1]), Text(v, style=style[v]))
    Console(width=200).print(table)


def print_markdown(rows: list[Row]) -> None:
    print("| " + " | ".join(HEADERS) + " |")
    print("|" + "---|" * len(HEADERS))
    for cells in table_rows(rows):
        print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")


def summary(rows: list[Row]) -> list[str]:
    lines = []
    measured = [r for r in rows if r.meas is not None]
    lo, hi = WHOLE_BAND
    whole = [(r.name, r.whole_ok()) for r in measured]
    bad = [n for n, ok in whole if ok is False]
    unknown = [n for n, ok in whole if ok is None]
    ok_n = sum(1 for _, ok in whole if ok)
    failed = [r.name for r in rows if r.meas is None]
    state = "FAIL" if failed else "n/a" if unknown else ("PASS" if not bad else "FAIL")
    lines.append(f"whole-program ratios within [{lo:g}, {hi:g}]: {ok_n}/{len(whole)} -> {state}"
                 + (f" (outside: {', '.join(bad)})" if bad else "")
                 + (f" (no estimate: {', '.join(unknown)})" if unknown else ""))
    judged = [(r.name, op, _ratio(e, m)) for r in measured for op, m, e, j in r.hh if j]
    bad_hh = [f"{n}:{op} x{_f(x, '.2f')}" for n, op, x in judged
              if not math.isnan(x) and not HH_BAND[0] <= x <= HH_BAND[1]]
    nan_hh = [1 for _, _, x in judged if math.isnan(x)]
    state = "FAIL" if failed else "n/a" if nan_hh else ("PASS" if not bad_hh else "FAIL")
    lines.append(f"heavy hitters within [1/3, 3]: {len(judged) - len(bad_hh) - len(nan_hh)}/{len(judged)} "
                 f"-> {state}" + (f" (outside: {', '.join(bad_hh)})" if bad_hh else ""))
    for r in rows:
        why = ""
        if r.error:
            why = f"  ({r.error})"
        elif r.est.error:
            why = f"  ({r.est.error})"
        lines.append(f"  {r.verdict():5} {r.name}{why}")
    return lines


# ---------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME", help="programs (without .dml) to run")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per program (median reported)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed runs per program before the estimate and the timed runs")
    ap.add_argument("--hh-min-share", type=float, default=0.05,
                    help="judge a heavy hitter only if it takes at least this share of the program's time")
    ap.add_argument("--data-dir", help="directory for generated inputs and outputs (kept; default: temporary)")
    ap.add_argument("--blas-threads", type=int, default=None, metavar="N",
                    help="limit BLAS to N threads while measuring (threadpoolctl; the estimate is unchanged)")
    ap.add_argument("--plain-total", action="store_true",
                    help="take each program's time from extra runs without Stats (no per-instruction timing)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    a = ap.parse_args(argv)
    if a.reps < 1:
        ap.error("--reps must be at least 1")

    names = program_names()
    if a.only:
        unknown = [n for n in a.only if n not in names]
        if unknown:
            ap.error(f"unknown program(s) {', '.join(unknown)}; have: {', '.join(names)}")
        names = [n for n in names if n in a.only]

    from lafuse import config as cfgmod

    cfg = cfgmod.Config().with_(stats=True)
    load1 = os.getloadavg()[0]
    blas = f", BLAS limited to {a.blas_threads} thread(s)" if a.blas_threads is not None else ""
    print(f"cost-model accuracy: {len(names)} program(s), median of {a.reps} run(s), {cfg.threads} threads"
          f"{blas}, load average {load1:.2f}", flush=True)
    if load1 > 0.5 * (os.cpu_count() or 1):
        print("  warning: the machine is busy; measured times (BLAS calls especially) will be noisy",
              flush=True)

    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        if a.data_dir:
            data_dir = Path(a.data_dir)
            data_dir.mkdir(parents=True, exist_ok=True)
        else:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lafuse_cost_")))
        if a.blas_threads is not None:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=a.blas_threads, user_api="blas"))
        for n in names:
            path = PROGRAMS_DIR / f"{n}.dml"
            nvargs = NVARGS[n](data_dir) if n in NVARGS else {}
            try:
                # warm-up first, then the estimate: it is made for the process state the timed runs
                # see (imports loaded, memory touched by the warm-up) and before any timed run
                for _ in range(a.warmup):
                    run_once(path.read_text(encoding="utf-8"), path, nvargs, cfg)
                est = estimate(path, nvargs, cfg)
                if est.error:
                    print(f"  {n}: {est.error}", flush=True)
                meas = measure(path, nvargs, cfg, a.reps, 0, a.plain_total)
            except Exception as e:
                msg = f"{type(e).__name__}: {e}"
                rows.append(Row(n, est, None, error=f"run failed: {msg}"))
                print(f"  {n}: run failed: {msg}", flush=True)
                continue
            row = Row(n, est, meas, hh=heavy_hitters(meas, est, a.hh_min_share))
            rows.append(row)
            last = meas.output.strip().splitlines()[-1] if meas.output.strip() else ""
            print(f"  {n}: est {_f(est.total)} s, measured {meas.median:.3f} s "
                  f"({', '.join(f'{t:.3f}' for t in meas.times)})  | {last[:100]}", flush=True)

    how = "runs without Stats" if a.plain_total else "instrumented runs"
    title = f"Cost model: estimated vs measured execution time (median of {a.reps} {how})"
    print_rich(rows, title)
    for line in summary(rows):
        print(line)
    if a.markdown:
        print()
        print_markdown(rows)
    return 0 if rows and all(r.verdict() == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
