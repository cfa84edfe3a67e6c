"""The one typed configuration object. Every knob lives here; CLI flags and a config file map onto it.

Use ``with config.using(codegen=False): ...`` to change knobs for a region of code.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import types
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Config:
    # rewrites
    rewrites: bool = True  # master switch of HOP rewrites
    disabled_rules: tuple[str, ...] = ()  # rule names (see lafuse.rewrite.RULES) switched off
    # sum-product optimization (paper 001 §3, rewrite.sumproduct): aggregation/selection push-down, join
    # elimination and ordering chosen by cost with fusion; off (env LAFUSE_SUM_PRODUCT=0): those
    # expressions stay as written (README "Sum-product optimization")
    sum_product: bool = field(default_factory=lambda: os.environ.get("LAFUSE_SUM_PRODUCT", "1") != "0")
    dynamic_recompile: bool = True  # recompile blocks whose sizes were unknown at compile time
    # execution
    # auto | local | dask: where operators run (plan.exectype): auto sends an operator whose memory need
    # exceeds the budget to Dask, dask every matrix operator with a distributed implementation
    exec_type: str = "auto"
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    parfor_parallel: bool = True
    # executions of a block's plan by the interpreter's loop before it runs as generated straight-line
    # Python (runtime.straight: ~2 us an instruction less; generating costs about one loop run); -1 never
    straight_line_after: int = 2
    memory_budget: float = 0.7  # fraction of ``local_memory`` one in-memory operation may use
    # the memory of this process's operations (SystemDS's driver heap), e.g. "512MiB": with exec_type auto
    # an operation needing more than memory_budget of it runs on Dask; none: the machine's memory
    local_memory: str | None = None
    # an unfused t(X) %*% (X %*% v) or t(X) %*% (w * (X %*% v)) runs as one blocked pass over X
    # (hops.patterns.mmchains, SystemDS's MapMultChain operator) instead of two products
    mmchain: bool = True
    # an unfused sum((X - U %*% V)^2) runs as one instruction that forms the product a block of rows at a
    # time (hops.patterns.squared_losses, SystemDS's wsloss) instead of holding it whole, and an unfused
    # sum(X * g(U %*% V)) over a sparse X as one that evaluates g only at X's non-zeros (sampled_sums)
    squared_loss: bool = True
    # a sparse value's format (CSR or CSC) and the conversions between them chosen by cost for each plan's
    # local operators (plan.layout.local, paper 002's dynamic programming): "dp"; "rule": every sparse
    # value stays CSR, the default rule (lafuse.formats)
    formats: str = "dp"
    # an element-wise result of 256 KiB or more takes the buffer of an operand that dies with it and
    # that nothing else holds (runtime.reuse: NumPy's temporary elision, decided by liveness)
    reuse_buffers: bool = True
    # later stages (kept here so they have one home)
    codegen: bool = True  # operator fusion with generated kernels (paper 000)
    fusion: str = "cost"  # cost | fuse-all | fuse-no-redundancy
    codegen_backend: str = "numba"  # numba | reference (the pure-NumPy CPlan interpreter, for tests)
    # literals of fused operators (paper 001 §4.4): "args" kernel arguments (one kernel serves every
    # value: the most reuse of compiled kernels, a compile costing ~1 s here, codegen.emit.JIT),
    # "constants" specialized into the kernel's source, "cslh" SystemDS's
    # context-sensitive literal handling: constants when a block is first planned, at dynamic
    # recompilation only integer literals (a step size that changes every iteration stays an argument)
    codegen_literals: str = "args"
    # `lafuse run` compiles kernels that would pay off from the disk cache but not cold in a
    # background process after the script (codegen.deferred); env LAFUSE_CODEGEN_DEFER=0 turns it off
    codegen_defer: bool = field(default_factory=lambda: os.environ.get("LAFUSE_CODEGEN_DEFER", "1") != "0")
    # a run that made fusion decisions on the built-in default profile (no `lafuse calibrate` yet) runs
    # `lafuse calibrate --quick` in its background process (codegen.deferred), so later runs decide on
    # this machine's rates; env LAFUSE_AUTO_CALIBRATE=0 turns it off
    auto_calibrate: bool = field(default_factory=lambda: os.environ.get("LAFUSE_AUTO_CALIBRATE", "1") != "0")
    # begin importing Numba (SciPy's sparse module) on a background thread at launch when the script's
    # last run used kernels (sparse values) (feedback.prestart); env LAFUSE_NUMBA_PRESTART=0 turns it off
    numba_prestart: bool = field(default_factory=lambda: os.environ.get("LAFUSE_NUMBA_PRESTART", "1") != "0")
    # weigh fusion candidates by the block executions earlier runs observed, and record them (feedback.observed)
    fusion_observed: bool = field(default_factory=lambda: os.environ.get("LAFUSE_FUSION_OBSERVED", "1") != "0")
    # reuse an earlier run's cost-based decision for a DAG where nothing it rests on changed
    # (feedback.decisions), and its sum-product regions without a candidate plan (feedback.sumproduct);
    # env LAFUSE_FUSION_REUSE=0 turns it off
    fusion_reuse: bool = field(default_factory=lambda: os.environ.get("LAFUSE_FUSION_REUSE", "1") != "0")
    # the one switch of every background job `lafuse run` may leave after it exits (deferred kernel
    # compiles, automatic calibration; codegen.deferred): `--no-background` or env LAFUSE_BACKGROUND=0
    background: bool = field(default_factory=lambda: os.environ.get("LAFUSE_BACKGROUND", "1") != "0")
    # bound of the on-disk plan cache (kernels and Numba's files of them); beyond it the least recently
    # used kernels are evicted (lafuse.cachefiles); 0: no bound
    cache_max_bytes: int = 256 << 20
    # Dask (runtime.dask): an existing scheduler's address (tcp://host:port) or scheduler file; none: a
    # LocalCluster of ``workers`` processes with one thread and ``worker_memory`` each, started when a
    # distributed operator first runs; ``block_size``: rows and columns of a distributed matrix's blocks
    scheduler: str | None = None
    workers: int = 2
    worker_memory: str | None = None  # e.g. "2GiB"; none: the machine's memory shared by the workers
    block_size: int = 1000
    # --exec dask: matrix operators of fewer cells (their largest matrix) stay here, as scalars do
    dask_min_cells: int = 4
    # a distributed product's strategy forced (plan.mmstrategy.METHODS: tsmm, mapmmchain, mapmm_l, mapmm_r,
    # zipmm, cpmm, rmm) where it applies to the product's shape, else SystemDS's rules; none: the rules
    mm_method: str | None = None
    # a distributed outer-product fused operator's kind (plan.fusedstrategy, paper 004): "cost" chooses the
    # cuboid operator's (P, Q, R) by its cost model; "bfo" broadcasts U and V to one task per worker, "rfo"
    # replicates their panels to each block of X, "cfo" is the cuboid operator at the searched (P, Q, R)
    dist_fused: str = "cost"
    # a cuboid operator's cost counts the shuffle of its R partial products (cost.cuboid.aggregation)
    # beside paper 004's consolidation bytes; False: the paper's Eq. 2 alone, which leaves a k-split
    # tied with a point that moves the same inputs and no partial products
    dist_shuffle_cost: bool = True
    # an outer-product cuboid operator runs at the replication corner (I, J, 1) instead of the model's
    # (P, Q, R) when, where its inputs lie, the corner moves fewer bytes between workers
    # (runtime.dask.fused_outer.choose); False: always the model's point
    dist_fewest_bytes: bool = True
    # builtin script search path (dml-semantics §1): lafuse/builtins first, then these
    builtin_dirs: tuple[str, ...] = ()
    # False drops lafuse/builtins from the path, so scripts written for SystemDS (e.g. its own
    # scripts/builtin directory given as builtin_dirs) resolve each other rather than lafuse's versions
    lafuse_builtins: bool = True
    # diagnostics
    # the live progress line of a run that lasts over 2 s, on a terminal only (runtime.progress;
    # --quiet, env LAFUSE_PROGRESS=0)
    progress: bool = field(default_factory=lambda: os.environ.get("LAFUSE_PROGRESS", "1") != "0")
    progress_after: float = 2.0  # s a run lasts before the progress line shows
    stats: bool = False
    stats_top: int = 10
    # --stats measures each distributed fused operator's bytes (runtime.dask.fused_outer.measured): it
    # waits for the operator's inputs and for the operator, so operators run one at a time (a loop
    # of ten operators took 0.35 s more a step); False keeps the other statistics at full speed
    stats_fused_bytes: bool = True
    explain: str | None = None  # hops | runtime | recompile_hops | recompile_runtime
    debug: bool = False
    # test aid: compare every HOP's predicted dims/nnz with the runtime value's (env LAFUSE_CHECK_METADATA=1)
    check_metadata: bool = field(default_factory=lambda: os.environ.get("LAFUSE_CHECK_METADATA") == "1")

    def with_(self, **kw: Any) -> Config:
        return replace(self, **kw)

    @staticmethod
    def from_file(path: str, base: Config | None = None) -> Config:
        """A JSON object whose keys are field names (``{"rewrites": false}``); every value is
        checked against its field's type and choices, so a typo fails here, naming the key, rather
        than deep inside a run."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a config file holds a JSON object ({{\"key\": value, ...}}), "
                             f"not a {type(data).__name__}")
        names = {f.name for f in fields(Config)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{path}: unknown config keys {unknown}; known: {sorted(names)}")
        return replace(base or Config(), **{k: check_value(k, v, path) for k, v in data.items()})


# fields with a fixed set of values, and numeric fields with their lower bound (inclusive unless
# the bound is exclusive, as for the memory budget: a fraction of memory must be positive)
CHOICES: dict[str, tuple[Any, ...]] = {
    "exec_type": ("auto", "local", "dask"),
    "fusion": ("cost", "fuse-all", "fuse-no-redundancy"),
    "codegen_backend": ("numba", "reference"),
    "codegen_literals": ("args", "constants", "cslh"),
    "explain": (None, "hops", "fused", "codegen", "runtime", "formats", "cost", "recompile_hops", "recompile_runtime"),
    "dist_fused": ("cost", "bfo", "rfo", "cfo"),  # (plan.fusedstrategy.KINDS)
    "formats": ("dp", "rule"),  # (plan.layout.local, or lafuse.formats' rule alone)
    "mm_method": (None, "tsmm", "mapmmchain", "mapmm_l", "mapmm_r", "zipmm", "cpmm", "rmm"),  # (mmstrategy.METHODS)
}
_LOWER: dict[str, tuple[float, bool]] = {"threads": (1, True), "stats_top": (0, True), "memory_budget": (0, False),
                                        "cache_max_bytes": (0, True), "workers": (1, True), "block_size": (1, True),
                                        "dask_min_cells": (1, True), "progress_after": (0, True)}


def check_value(key: str, value: Any, where: str = "config") -> Any:
    """``value`` converted to field ``key``'s type, or a ValueError that names key, value and type."""
    f = next(f for f in fields(Config) if f.name == key)
    typ = str(f.type)

    def bad(expect: str) -> ValueError:
        return ValueError(f"{where}: '{key}' must be {expect}, not {json.dumps(value)}")

    if typ == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if typ in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (typ == "int" and not
                                                                              float(value).is_integer()):
            raise bad("an integer" if typ == "int" else "a number")
        if value != value or value in (float("inf"), float("-inf")):
            raise bad("a finite number")
        lo, inclusive = _LOWER.get(key, (float("-inf"), True))
        if value < lo or (value == lo and not inclusive):
            raise bad(f"{'at least' if inclusive else 'greater than'} {lo:g}")
        value = int(value) if typ == "int" else float(value)
    elif typ.startswith("tuple"):
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise bad("a list of strings")
        value = tuple(value)
    elif typ.startswith("str"):
        if not (isinstance(value, str) or (value is None and "None" in typ)):
            raise bad("a string")
    if key in CHOICES and value not in CHOICES[key]:
        raise bad("one of " + ", ".join(json.dumps(c) for c in CHOICES[key]))
    return value


_current: list[Config] = [Config()]


def get() -> Config:
    return _current[-1]


@contextlib.contextmanager
def using(cfg: Config | None = None, **kw: Any):
    base = cfg or get()
    _current.append(replace(base, **kw) if kw else base)
    try:
        yield _current[-1]
    finally:
        _current.pop()


def user_file(env: str, xdg: str, home_dir: str, *parts: str) -> Path:
    """A per-user path: ``$env`` if set, else ``$xdg/lafuse/<parts>``, else ``~/<home_dir>/lafuse/<parts>``
    (the XDG base-directory convention; the plan cache, the hardware profile, the cache key)."""
    given = os.environ.get(env)
    if given:
        return Path(given)
    base = os.environ.get(xdg)
    return (Path(base) if base else Path.home() / home_dir).joinpath("lafuse", *parts)


def profile_path() -> Path:
    """The hardware profile (cost.profile): $LAFUSE_PROFILE, else $XDG_CACHE_HOME/lafuse/profile.json,
    else ~/.cache/lafuse/profile.json. Here rather than in cost.profile, whose import builds the
    profile's record type: a replayed fusion decision (feedback.decisions) keys on the file alone."""
    return user_file("LAFUSE_PROFILE", "XDG_CACHE_HOME", ".cache", "profile.json")


def codegen_cache_dir() -> Path:
    """The on-disk plan cache of generated kernels: $LAFUSE_CODEGEN_CACHE, else
    $XDG_CACHE_HOME/lafuse/codegen, else ~/.cache/lafuse/codegen. Here rather than in lafuse.codegen,
    whose import starts Numba: the optimizer probes the cache before deciding to load it."""
    return user_file("LAFUSE_CODEGEN_CACHE", "XDG_CACHE_HOME", ".cache", "codegen")


def options(**knobs: Any) -> contextlib.AbstractContextManager[Config]:
    """``with lf.config(codegen=False, fusion="fuse-all"): ...``: the Python API's way to set knobs for a
    region of code, each checked as a config file's (a typo or a bad value fails here, naming it).
    ``scheduler`` also takes a ``distributed.Client`` (its scheduler's address)."""
    names = {f.name for f in fields(Config)}
    unknown = sorted(set(knobs) - names)
    if unknown:
        raise TypeError(f"lf.config: unknown option(s) {unknown}; known: {sorted(names)}")
    sched = knobs.get("scheduler")
    if sched is not None and not isinstance(sched, str):
        address = getattr(getattr(sched, "scheduler", None), "address", None)
        if not isinstance(address, str):
            raise TypeError(f"lf.config: scheduler must be an address or a distributed.Client, not "
                            f"{type(sched).__name__}")
        knobs["scheduler"] = address
    checked = {k: check_value(k, list(v) if isinstance(v, tuple) else v, "lf.config") for k, v in knobs.items()}
    return using(**checked)


class _CallableModule(types.ModuleType):
    """This module, callable: ``lf.config(**knobs)`` is ``options(**knobs)``."""

    def __call__(self, **knobs: Any) -> contextlib.AbstractContextManager[Config]:
        return options(**knobs)


sys.modules[__name__].__class__ = _CallableModule
