"""Command line: ``lafuse run SCRIPT [options]``, ``lafuse explain``, ``lafuse calibrate`` and ``lafuse cache``.

Errors in a script print ``file:line:col: message``, the source line and a caret, and exit 1;
a Python traceback appears only with ``--debug``.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

# what `import lafuse` loads anyway (the package's face imports the compiler): nothing to defer
from lafuse import config as cfgmod
from lafuse import memory
from lafuse.compiler import Compiler
from lafuse.errors import DMLError, DMLStop
from lafuse.hops.resolver import parse_cmdline_value
from lafuse.lang.parser import parse, read_source
from lafuse.plan.instructions import DASK
from lafuse.runtime import deepstack, handoff, reuse
from lafuse.runtime.interp import Interpreter
from lafuse.stages import ALIASES, PROGRAM_STAGES, STAGES
from lafuse.threads import blas_limited

EXPLAIN_LEVELS = ("hops", "fused", "codegen", "runtime", "formats", "cost", "recompile_hops", "recompile_runtime")


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, with the terminal width read as shutil.get_terminal_size reads it.
    Why: argparse imports shutil for it whenever an argument is added, and shutil's compression
    modules cost ~4 ms of every start, help or not."""

    def __init__(self, prog: str, **kw: Any) -> None:
        if kw.get("width") is None:
            try:
                cols = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                try:
                    cols = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
                except (AttributeError, ValueError, OSError):
                    cols = 80
            kw["width"] = cols - 2
        super().__init__(prog, **kw)


class _ArgParser(argparse.ArgumentParser):
    """argparse with lafuse's exit codes: a bad command line is the user's error (exit 1), like a
    bad script; exit 2 is kept for lafuse's own bugs."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _count(text: str, least: int = 0) -> int:
    """An integer argument of at least ``least`` (``--stats N``, ``--threads N``)."""
    what = "a non-negative integer" if least == 0 else f"an integer of at least {least}"
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
    if n < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {n}")
    return n


def _positive(text: str) -> int:
    return _count(text, 1)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # deferred: ~9 ms, --version only

    try:
        return f"lafuse {version('lafuse')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "lafuse (not installed)"


class _VersionAction(argparse.Action):
    """--version, looked up only when asked (importlib.metadata costs ~40 ms of every start)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(_version())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog="lafuse", description="Compile and run DML programs.",
                   epilog="exit codes: 0 success, 1 an error in the script, its input files or the "
                          "command line (the message names the place), 2 an internal error of lafuse "
                          "(please report it), 130 interrupted")
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_ArgParser)
    for name in ("run", "explain"):
        r = sub.add_parser(name, help="run a DML script" if name == "run" else "print a plan without running")
        r.add_argument("script", nargs="?", help="path of the .dml script")
        r.add_argument("-s", dest="inline", help="inline script text instead of a file")
        r.add_argument("--nvargs", nargs="*", default=[], metavar="K=V", help="named arguments ($K)")
        r.add_argument("--args", nargs="*", default=[], metavar="V", help="positional arguments ($1, $2, ...)")
        r.add_argument("--stats", nargs="?", const=10, type=_count, metavar="N",
                       help="print timing and the top N heavy-hitter instructions")
        r.add_argument("--explain", nargs="?", const="hops", choices=EXPLAIN_LEVELS,
                       help="print the HOP DAGs or the runtime plan; formats: each plan's format choice "
                            "(implementation, formats, conversions, cost, runner-up) as the run builds it")
        r.add_argument("--config", help="JSON config file (keys of lafuse.config.Config)")
        r.add_argument("--builtins", action="append", default=[], metavar="DIR",
                       help="extra directory of builtin .dml scripts (searched after lafuse's own)")
        r.add_argument("--no-lafuse-builtins", action="store_true",
                       help="leave lafuse's own builtin library off the search path (e.g. to run "
                            "SystemDS's scripts/builtin unmodified via --builtins)")
        r.add_argument("--no-rewrites", action="store_true", help="switch off HOP rewrites")
        r.add_argument("--codegen", action=argparse.BooleanOptionalAction, default=None,
                       help="operator fusion with generated Numba kernels (default: on)")
        r.add_argument("--fusion", choices=("cost", "fuse-all", "fuse-no-redundancy"),
                       help="fusion plan selection (default: cost)")
        r.add_argument("--formats", choices=cfgmod.CHOICES["formats"],
                       help="sparse formats: dp (CSR or CSC and the conversions chosen by cost for each plan, "
                            "paper 002) or rule (every sparse value CSR) (default: dp)")
        r.add_argument("--dist-fused", choices=cfgmod.CHOICES["dist_fused"], dest="dist_fused",
                       help="distributed outer-product fused operators: cost (the cuboid operator at the "
                            "(P,Q,R) its cost model chooses), or forced bfo (broadcast), rfo (replication), "
                            "cfo (default: cost)")
        r.add_argument("--threads", type=_positive, metavar="N",
                       help="threads for kernels, parfor and BLAS (default: one per core)")
        r.add_argument("--exec", choices=cfgmod.CHOICES["exec_type"], dest="exec_type",
                       help="where operators run: auto sends an operator whose memory estimate exceeds the "
                            "budget to Dask, dask every matrix operator Dask implements, local none "
                            "(default: auto)")
        r.add_argument("--scheduler", metavar="ADDR",
                       help="an existing Dask scheduler (tcp://host:port or a scheduler file); default: a "
                            "local cluster started when a distributed operator first runs")
        r.add_argument("--workers", type=_positive, metavar="N", help="worker processes of the local cluster "
                                                                       "(default: 2)")
        r.add_argument("--worker-memory", metavar="SIZE", help="memory limit of each local worker, e.g. 2GiB")
        r.add_argument("--local-memory", metavar="SIZE",
                       help="memory of this process's operations, e.g. 512MiB (SystemDS's driver heap): under "
                            "--exec auto an operation needing more than memory_budget (0.7) of it runs on Dask "
                            "(default: the machine's memory)")
        r.add_argument("--debug", action="store_true", help="show Python tracebacks")
        if name == "run":
            r.add_argument("--quiet", action="store_true",
                           help="no live progress line (shown on a terminal once a run lasts 2 s: the "
                                "statement's lines, loop iterations, Dask tasks)")
            r.add_argument("--no-background", action="store_true",
                           help="start no background process after the run: no deferred kernel compiles, no "
                                "automatic calibration (for CI and batch jobs; also env LAFUSE_BACKGROUND=0 "
                                "or config background=false)")
        if name == "explain":
            r.add_argument("--until", default="sizes", choices=(*STAGES, "cost", *ALIASES), metavar="STAGE",
                           help="stop after this stage of the compilation chain and print its result: "
                                "parse (the AST), build (HOP DAGs as built), liveness (dead assignments "
                                "removed), rewrite (after the rewrites), sizes (after size propagation; the "
                                "default), fuse (after operator fusion), plan (the physical plan: "
                                "instructions, execution types, formats), lower (bound to code: fused "
                                "operators' CPlans and generated kernel source); or cost (the plan with "
                                "# C=[io, compute] estimates and block totals). Earlier names: "
                                + ", ".join(f"{k}={v}" for k, v in ALIASES.items()))
            r.add_argument("--format", default="text", choices=("text", "dot", "svg", "png"),
                           help="text (the default), or a picture of the program at that stage: its HOP "
                                "DAGs up to sizes, its physical plans from fuse on (fused operators as "
                                "clusters), as Graphviz dot source, svg or png (svg and png need Graphviz's "
                                "dot program)")
            r.add_argument("-o", dest="output", metavar="FILE",
                           help="write the picture to FILE (png needs it; dot and svg go to the standard "
                                "output without it)")
    c = sub.add_parser("calibrate", help="measure this machine's rates for the cost model and save them")
    c.add_argument("--quick", action="store_true", help="a faster, less accurate measurement (about 1-3 s)")
    c.add_argument("--output", metavar="PATH",
                   help="profile file to write (default: $LAFUSE_PROFILE, else ~/.cache/lafuse/profile.json)")
    c.add_argument("--show", action="store_true", help="print the current profile without measuring")
    k = sub.add_parser("cache", help="show, clear or warm the on-disk plan cache of generated kernels")
    k.add_argument("action", choices=("info", "clear", "warm"),
                   help="info: where it is, whether runs use it, what it holds; clear: remove its kernels; "
                        "warm: compile the primitives generated kernels share (make install does it)")
    k.add_argument("--all", action="store_true",
                   help="clear: also the run feedback (observed.json, prestart.json, decisions.json, sumproduct.json) and the hardware profile")
    k.add_argument("--config", help="JSON config file (for cache_max_bytes)")
    return p


def _nvargs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise SystemExit(f"lafuse: --nvargs expects name=value, got '{it}'")
        k, v = it.split("=", 1)
        out[k.lstrip("$")] = parse_cmdline_value(v)
    return out


def main(argv: list[str] | None = None) -> int:
    """Runs the command on a deep thread (runtime.deepstack: deeply nested and recursive scripts);
    Ctrl-C still ends it with 130."""
    try:
        return deepstack.call(_main, argv)
    except KeyboardInterrupt:  # a second Ctrl-C while the first one unwinds the run
        return 130


def entry() -> NoReturn:
    """The ``lafuse`` command (and ``python -m lafuse``): :func:`main`, then an exit that skips the
    interpreter's teardown. Why: a normal exit finalizes every module and object, work that only
    frees memory the system takes back anyway: 17 ms of ``lafuse run`` on ``print(1)`` (and 12 ms of
    ``python -c "import numpy"``'s 91), measured with farm-bench, 25 pairs, ``os._exit`` against
    ``sys.exit``. What an exit must do still happens, in Python's order: non-daemon threads are
    joined, the atexit functions run (a private plan cache is removed, logging flushed), and the
    output streams are flushed."""
    rc = main()
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (output piped into head) or a closed stream
            pass
    os._exit(rc)


def _main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    if ns.cmd in ("run", "calibrate"):  # calibrate measures the heap that runs use
        memory.tune_malloc()
    if ns.cmd == "calibrate":
        return _calibrate(ns)
    if ns.cmd == "cache":
        return _cache(ns)
    cfg = _load_config(ns.config)
    if cfg is None:
        return 1
    missing = [d for d in (*cfg.builtin_dirs, *ns.builtins) if not os.path.isdir(d)]
    if missing:
        print(f"lafuse: builtin directory '{missing[0]}' does not exist (--builtins or builtin_dirs)",
              file=sys.stderr)
        return 1
    cfg = cfg.with_(
        stats=ns.stats is not None or cfg.stats,
        stats_top=ns.stats or cfg.stats_top,
        explain=ns.explain or cfg.explain,
        debug=ns.debug,
        builtin_dirs=tuple(cfg.builtin_dirs) + tuple(os.path.abspath(d) for d in ns.builtins),
        rewrites=cfg.rewrites and not ns.no_rewrites,
        lafuse_builtins=cfg.lafuse_builtins and not ns.no_lafuse_builtins,
        codegen=cfg.codegen if ns.codegen is None else ns.codegen,
        fusion=ns.fusion or cfg.fusion,
        threads=ns.threads or cfg.threads,
        exec_type=ns.exec_type or cfg.exec_type,
        dist_fused=ns.dist_fused or cfg.dist_fused,
        formats=ns.formats or cfg.formats,
        scheduler=ns.scheduler or cfg.scheduler,
        workers=ns.workers or cfg.workers,
        worker_memory=ns.worker_memory or cfg.worker_memory,
        local_memory=ns.local_memory or cfg.local_memory,
        background=cfg.background and not getattr(ns, "no_background", False),
        progress=cfg.progress and not getattr(ns, "quiet", False),
    )
    for flag, size in (("--local-memory", cfg.local_memory), ("--worker-memory", cfg.worker_memory)):
        try:
            if size is not None:
                memory.parse_bytes(size)
        except ValueError as e:
            print(f"lafuse: {flag}: {e}", file=sys.stderr)
            return 1
    if ns.cmd == "explain":
        ns.until = ALIASES.get(ns.until, ns.until)
        cfg = cfg.with_(explain={"fuse": "fused", "plan": "runtime", "lower": "codegen", "cost": "cost"}.get(
            ns.until, "hops"))
    if ns.inline is None and ns.script is None:
        print("lafuse: give a script path or -s 'script text'", file=sys.stderr)
        return 1
    if ns.inline is not None and ns.script is not None:
        print(f"lafuse: give a script path or -s 'script text', not both (got '{ns.script}' and -s)",
              file=sys.stderr)
        return 1
    sources: dict[str, str] = {}
    try:
        with cfgmod.using(cfg):
            return _run(ns, cfg, _nvargs(ns.nvargs), [parse_cmdline_value(a) for a in ns.args], sources)
    except DMLStop as e:
        sys.stdout.flush()
        msg = e.message
        print(f"{e.span}: {msg}" if e.span and e.span.line else msg, file=sys.stderr)
        return 1
    except DMLError as e:
        sys.stdout.flush()
        if cfg.debug:
            import traceback  # deferred: only for --debug's traceback

            traceback.print_exc()
        print(e.render(sources), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except RecursionError:  # deeper than even a deep thread's stack (runtime.deepstack): the script's size
        sys.stdout.flush()
        if cfg.debug:
            raise
        print(f"lafuse: {ns.script if ns.inline is None else '<inline>'}: the script is nested too deeply "
              f"(Python's limit of {sys.getrecursionlimit()} frames was reached)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except Exception as e:  # an internal error: say so plainly, with a traceback only on request
        sys.stdout.flush()
        if cfg.debug:
            raise
        print(f"lafuse: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)\n"
              f"lafuse: this is a bug in lafuse, not in your script; please report it with the script and "
              f"the output of --debug", file=sys.stderr)
        return 2


def _run(ns: argparse.Namespace, cfg: cfgmod.Config, nvargs: dict[str, Any], pos: list[Any],
         sources: dict[str, str]) -> int:
    stats = None
    if cfg.stats:
        from lafuse.runtime.stats import Stats  # deferred: --stats only

        stats = Stats()
    comp = Compiler(cfg, nvargs, pos, stats)
    if ns.inline is not None:
        text, path = ns.inline, "<inline>"
    else:
        path = ns.script
        try:
            text = read_source(path)
        except DMLError as e:  # missing, a directory, unreadable, not UTF-8: named, no location
            print(f"lafuse: {e.message}", file=sys.stderr)
            return 1
    sources[path] = text
    prestart = ns.cmd == "run" and cfg.numba_prestart  # background imports (feedback.prestart)
    if prestart:
        handoff.prestart_at_launch(text, cfg)
    picture = ns.cmd == "explain" and ns.format != "text"
    if picture and ns.until == "parse":
        print("lafuse: explain --format draws HOP DAGs or plans: give --until build or a later stage "
              "(parse has no DAG)", file=sys.stderr)
        return 1
    if picture and ns.format == "png" and ns.output is None:
        print("lafuse: explain --format png writes a binary file: give -o FILE", file=sys.stderr)
        return 1
    if ns.cmd == "explain" and ns.until == "parse":
        script = parse(text, path)
        for s in script.statements:
            print(s)
        for fd in script.functions.values():
            print(fd)
        return 0
    until = ns.until if ns.cmd == "explain" and ns.until in PROGRAM_STAGES else "sizes"
    prog = comp.compile_text(text, path, until=until)
    sources.update(prog.sources)
    if picture:
        return _picture(ns, prog, comp, path)
    if cfg.explain in ("hops", "runtime", "fused", "codegen") or (cfg.explain == "formats" and ns.cmd == "explain"):
        from lafuse.explain import explain_program  # deferred: EXPLAIN only

        print(explain_program(prog, cfg.explain, comp), flush=True)
    elif cfg.explain == "cost":
        from lafuse.cost.program import estimate_program  # deferred: --stats and --explain cost only

        print("\n".join(estimate_program(prog, comp, render=True).lines), flush=True)
    if ns.cmd == "explain":
        return 0
    interp = Interpreter(prog, comp, stats=stats)
    reused = tuple(reuse.DONE)
    t0 = time.perf_counter()
    try:
        with blas_limited(cfg.threads):
            interp.run()
    finally:
        if stats is not None:
            stats.exec_time = time.perf_counter() - t0
            # priced after the run: a static block's plan is the one that ran (Block.plan), fused once
            # per run; blocks that did not run are planned here; no measured time enters the estimate
            from lafuse.cost.program import estimate_program  # deferred: --stats and --explain cost only

            est = estimate_program(prog, comp)
            stats.estimated_total, stats.estimate_exact = est.total, est.total_cost.exact
            stats.fusion = comp.fusion_stats
            stats.dask = getattr(comp.backends.get(DASK), "counters", None)
            stats.reused = (reuse.DONE[0] - reused[0], reuse.DONE[1] - reused[1])
            sys.stdout.flush()
            print(stats.render(cfg.stats_top), flush=True)
        handoff.run_ended(cfg)
        if prestart:
            handoff.record_kernels_used([text], cfg)
    return 0


def _picture(ns: argparse.Namespace, prog: Any, comp: Compiler, path: str) -> int:
    """``explain --format dot|svg|png``: the program's picture at ``--until``, to ``-o`` (written whole
    or not at all) or the standard output."""
    from lafuse.explain import program_graph  # deferred: pictures only
    from lafuse.plan import dot

    source = program_graph(prog, ns.until, comp, f"{path} after {ns.until}")
    try:
        data = dot.render(source, ns.format)
    except dot.GraphvizMissing as e:
        print(f"lafuse: {e}", file=sys.stderr)
        return 1
    if ns.output is None:
        sys.stdout.write(data.decode())
        return 0
    try:
        from pathlib import Path

        from lafuse.cachedir import write_user_file

        write_user_file(Path(ns.output), data)
    except OSError as e:
        print(f"lafuse: cannot write {ns.output}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


# field -> unit, in the order the table shows them (what each rate measures: lafuse.calibrate)
_PROFILE_UNITS = {
    "mem_read_bw": "bytes/s",
    "mem_write_bw": "bytes/s",
    "cache_bw": "bytes/s",
    "cache_bytes": "bytes",
    "blas_flops": "FLOP/s",
    "elementwise_rate": "cells/s",
    "transcendental_rate": "cells/s",
    "sparse_rate": "nnz/s",
    "instruction_overhead": "s/instr",
    "matrix_op_overhead": "s/instr",
    "rand_rate": "cells/s",
    "transpose_rate": "cells/s",
    "rowagg_rate": "cells/s",
    "csv_read_rate": "cells/s",
    "csv_write_rate": "cells/s",
    "binary_read_bw": "bytes/s",
    "first_touch_bw": "bytes/s",
    "codegen_compile_time": "s/kernel",
    "numba_import_time": "s/process",
    "numba_first_load": "s/process",
}


def _profile_table(prof: Any, title: str) -> Any:
    from rich.table import Table  # deferred: rich (~10 ms), only for this subcommand

    from lafuse.cost.profile import HardwareProfile  # deferred: the calibrate subcommand only

    default = HardwareProfile()
    t = Table(title=title, caption=f"threads: {prof.threads}   source: {prof.source}\n"
                                   f"(codegen_compile_time keeps its default; --stats reports each kernel's measured cold compile;\n"
                                   f"--quick keeps the numba_* defaults)")
    t.add_column("rate", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column("default", justify="right", no_wrap=True)
    t.add_column("value/default", justify="right", no_wrap=True)
    t.add_column("unit", no_wrap=True)
    for name, unit in _PROFILE_UNITS.items():
        v, d = getattr(prof, name), getattr(default, name)
        t.add_row(name, f"{v:.3g}", f"{d:.3g}", f"{v / d:.2f}" if d else "-", unit)
    return t


def _fitted_table(prof: Any) -> Any:
    """The fitted cost functions of the local implementations (cost.fit) and how well each fits."""
    # deferred: rich (~10 ms), only for this subcommand
    from rich import box
    from rich.table import Table

    t = Table(title="fitted costs of the format optimizer's local implementations (paper 002 §7)",
              caption="seconds = s/FLOP x FLOPs + s/byte x bytes + s/block x blocks (a call; a CSR row, a CSC "
                      "column); R² and the median relative error (rel. err.) of the fit on the runs it was fitted "
                      "to; stale: fitted over older feature definitions, the analytical model prices it until "
                      "`lafuse calibrate` runs again", box=box.SIMPLE_HEAD)
    for col in ("implementation", "runs", "R²", "rel. err.", "s/FLOP", "s/byte", "s/block"):
        t.add_column(col, justify="left" if col == "implementation" else "right", no_wrap=True)
    for name, f in prof.fitted:
        flop, _net, byte, call = f.coef
        t.add_row(name + ("" if f.current else " (stale)"), str(f.samples), f"{f.r2:.3f}", f"{f.median_rel_error:.0%}",
                  f"{flop:.3g}", f"{byte:.3g}", f"{call:.3g}")
    return t


def _print_profile(out: Any, prof: Any, title: str) -> None:
    """A profile's rates, then its fitted costs (or that there are none)."""
    out.print(_profile_table(prof, title))
    if prof.fitted:
        out.print(_fitted_table(prof))
    else:
        out.print("fitted costs: none (the analytical model prices the format optimizer's implementations; "
                  "`lafuse calibrate` fits them)", markup=False)


def _calibrate(ns: argparse.Namespace) -> int:
    from rich.console import Console  # deferred: rich (~10 ms), only for this subcommand

    from lafuse.cost import profile  # deferred: only when a profile is looked at

    path = Path(ns.output) if ns.output else profile.profile_path()
    out = Console(highlight=False)
    if ns.show:
        state = "" if path.is_file() else " (no file: built-in defaults)"
        _print_profile(out, profile.load(path), "lafuse hardware profile")
        out.print(f"profile: {path}{state}", markup=False, emoji=False, soft_wrap=True)
        return 0
    # deferred: rich, only for calibrate's progress
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from lafuse.calibrate import calibrate  # deferred: the calibrate subcommand only

    t0 = time.perf_counter()
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("calibrating", total=1)

            def report(step: str, done: int, total: int) -> None:
                bar.update(task, description=f"measuring {step}", completed=done, total=total)

            prof = calibrate(quick=ns.quick, progress=report)
        saved = profile.save(prof, path)
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        print(f"lafuse: calibration failed: {e}", file=sys.stderr)
        return 1
    _print_profile(out, prof, f"lafuse hardware profile ({time.perf_counter() - t0:.1f} s{', quick' if ns.quick else ''})")
    out.print(f"saved to {saved}", markup=False, emoji=False, soft_wrap=True)
    return 0


def _load_config(path: str | None) -> cfgmod.Config | None:
    """The configuration of ``--config PATH`` (the defaults without one), or None after saying on
    stderr why the file cannot be used."""
    try:
        return cfgmod.Config.from_file(path) if path else cfgmod.Config()
    except OSError as e:
        print(f"lafuse: cannot read config file '{path}': {e.strerror or e}", file=sys.stderr)
    except ValueError as e:
        print(f"lafuse: bad config: {e}", file=sys.stderr)
    return None


def _cache(ns: argparse.Namespace) -> int:
    """``lafuse cache info|clear|warm`` (lafuse.cachefiles, lafuse.warm)."""
    from lafuse import cachefiles  # deferred: the cache subcommand only

    cfg = _load_config(ns.config)
    if cfg is None:
        return 1
    if ns.action == "warm":
        from lafuse.warm import warm  # deferred: the cache subcommand only

        n, dt = warm()
        print(f"compiled {n} kernels in {dt:.1f} s; their primitives stay in Numba's cache")
        return 0
    if ns.action == "info":
        print("\n".join(cachefiles.info(cfg.cache_max_bytes)))
        return 0
    try:
        n, other = cachefiles.clear(ns.all)
    except OSError as e:
        print(f"lafuse: cache not cleared: {e}", file=sys.stderr)
        return 1
    print(f"removed {n} kernels from {cfgmod.codegen_cache_dir()}"
          + (f" and {', '.join(sorted(other))}" if other else ""))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
