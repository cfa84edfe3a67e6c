"""Shared helpers of the rewrite tests: compile and run a script, collect HOP facts, compare outputs.

Golden ``.expected`` format (one fact per line, ``#`` starts a comment):

    present: LABEL[:dt] [count=N]     a HOP with this label (``h.label()``: ``ba(%*%)``, ``r(t)``,
                                      ``LiteralOp 5``, ``TRead X``) exists; exactly N of them if given;
                                      ``:matrix`` / ``:scalar`` restricts to that data type
    absent: LABEL[:dt]                no such HOP
    chain: ((A B) C)                  a maximal matrix-multiply tree with this parenthesization exists;
                                      leaves are named by TRead/TWrite variable, ``t(X)`` for a
                                      transposed named leaf, else by label
    blocks: if=0 while=0 generic=2    number of blocks of each kind (main program, all depths)
    nvargs: name=value ...            command-line arguments for the script
    output: TEXT                      a line the rewritten run prints (exact)

A directive with the suffix ``@recompile`` (``present@recompile: ...``) looks at the DAGs produced by
dynamic recompilation during the run instead of the statically compiled program (main program and
compiled functions).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lafuse import config as cfgmod
from lafuse.compiler import Compiler
from lafuse.hops.hop import Hop, walk
from lafuse.hops.program import (
    Dag,
    ForBlock,
    GenericBlock,
    IfBlock,
    Program,
    WhileBlock,
    block_dags,
    iter_blocks,
)
from lafuse.hops.resolver import parse_cmdline_value
from lafuse.hops.validate import validate_dag, validate_program
from lafuse.rewrite.mmchain import render
from lafuse.runtime.local.backend import evaluate_literals
from lafuse.runtime.local.kernels import KERNELS


class RecordingCompiler(Compiler):
    """A compiler that keeps the DAGs dynamic recompilation produced (and validates them)."""

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.recompiled: list[Dag] = []

    def rewrite_dag(self, dag: Dag, dynamic: bool = False, known: dict[str, Any] | None = None,
                    hints: dict[str, float] | None = None) -> None:
        super().rewrite_dag(dag, dynamic=dynamic, known=known, hints=hints)
        if known is not None:
            validate_dag(dag, known)
            self.recompiled.append(dag)


@dataclass
class RunResult:
    output: str
    symtab: dict[str, Any]
    program: Program | None
    recompiled: list[Dag] = field(default_factory=list)
    error: str | None = None  # first line of the error the run ended with (run_capture only)


def run(text: str, cfg: cfgmod.Config, nvargs: dict[str, Any] | None = None, path: str = "<test>") -> RunResult:
    """Compile (validating the program) and run; errors propagate."""
    res = _run(text, cfg, nvargs, path, capture=False)
    return res


def run_capture(text: str, cfg: cfgmod.Config, nvargs: dict[str, Any] | None = None,
                path: str = "<test>") -> RunResult:
    """Like ``run``, but a run that fails returns what it printed before and the error's first line.
    AssertionErrors (the validator's) still propagate."""
    return _run(text, cfg, nvargs, path, capture=True)


def _run(text: str, cfg: cfgmod.Config, nvargs: dict[str, Any] | None, path: str, capture: bool) -> RunResult:
    from lafuse.runtime.interp import Interpreter

    buf = io.StringIO()
    prog: Program | None = None
    comp: RecordingCompiler | None = None
    with cfgmod.using(cfg):
        try:
            comp = RecordingCompiler(cfgmod.get(), nvargs or {})
            prog = comp.compile_text(text, path)
            validate_program(prog)
            st = Interpreter(prog, comp, out=buf).run()
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001
            if not capture:
                raise
            msg = str(e).strip().splitlines()
            return RunResult(buf.getvalue(), {}, prog, comp.recompiled if comp else [],
                             f"{type(e).__name__}: {msg[0] if msg else ''}")
    return RunResult(buf.getvalue(), st, prog, comp.recompiled)


def program_dags(prog: Program) -> list[Dag]:
    out: list[Dag] = []
    for blocks in [prog.blocks] + [f.blocks for f in prog.functions.values() if f.blocks]:
        for b in iter_blocks(blocks):
            out.extend(block_dags(b))
    return out


def all_hops(dags: Iterable[Dag]) -> list[Hop]:
    out: list[Hop] = []
    for d in dags:
        out.extend(walk(d.roots))
    return out


def matches(h: Hop, spec: str) -> bool:
    label, _, dt = spec.partition(":") if not spec.startswith("LiteralOp") else (spec, "", "")
    return h.label() == label.strip() and (not dt or h.dt == dt.strip())


def count(hops: list[Hop], spec: str) -> int:
    return sum(1 for h in hops if matches(h, spec))


def _dag_chains(d: Dag) -> list[str]:
    names: dict[int, str] = {}
    for r in d.roots:
        if r.op == "twrite" and r.inputs:
            names.setdefault(id(r.inputs[0]), r.name or "?")
    hops = walk(d.roots)
    users: dict[int, list[Hop]] = {}
    for h in hops:
        for i in h.inputs:
            users.setdefault(id(i), []).append(h)

    def leaf_name(h: Hop) -> str:
        if h.op == "tread":
            return h.name or "?"
        if id(h) in names:
            return names[id(h)]
        if h.kind == "reorg" and h.op == "t":
            return f"t({leaf_name(h.inputs[0])})"
        return h.label()

    def rec(x: Hop, top: bool, leaves: list[str]) -> Any:
        xu = users.get(id(x), [])
        if x.kind == "matmult" and (top or (len(xu) == 1 and id(x) not in names)):
            return (rec(x.inputs[0], False, leaves), rec(x.inputs[1], False, leaves))
        leaves.append(leaf_name(x))
        return len(leaves) - 1

    out: list[str] = []
    for h in hops:
        if h.kind != "matmult":
            continue
        us = users.get(id(h), [])
        if len(us) == 1 and us[0].kind == "matmult" and id(h) not in names:
            continue  # inner node of a larger tree
        leaves: list[str] = []
        tree = rec(h, True, leaves)
        out.append(render(tree, leaves))
    return out


def chains(dags: Iterable[Dag]) -> list[str]:
    """Renderings of every maximal matrix-multiply tree."""
    return [c for d in dags for c in _dag_chains(d)]


def block_counts(prog: Program) -> dict[str, int]:
    c = {"generic": 0, "if": 0, "while": 0, "for": 0}
    for b in iter_blocks(prog.blocks):
        if isinstance(b, GenericBlock):
            c["generic"] += 1
        elif isinstance(b, IfBlock):
            c["if"] += 1
        elif isinstance(b, WhileBlock):
            c["while"] += 1
        elif isinstance(b, ForBlock):
            c["for"] += 1
    return c


# ------------------------------------------------------------------ output comparison

# the runtime's evaluator of scalar operations over literals, as a compiler hands it to the rewrites
EVALUATE = partial(evaluate_literals, kernels=KERNELS)


def cost(cfg: cfgmod.Config):
    """The DAG cost with fusion the compiler injects into the rewrites (Ctx.cost) under ``cfg``."""
    return Compiler(cfg).dag_cost
_NUM = re.compile(r"^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|Infinity|NaN|inf|nan)$")
_INT = re.compile(r"^[-+]?\d+$")


def _num(tok: str) -> float:
    t = tok.replace("Infinity", "inf")
    return float(t)


def close(a: float, b: float, rel: float = 1e-9, abs_tol: float = 0.0) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def compare_outputs(got: str, want: str, rel: float = 1e-9, abs_tol: float = 0.0) -> None:
    """Line by line, token by token: numbers within ``rel`` (and the same INT/DOUBLE formatting: an INT
    printed as ``5`` must not become ``5.0``), everything else exactly."""
    gl, wl = got.splitlines(), want.splitlines()
    assert len(gl) == len(wl), f"{len(gl)} lines printed with rewrites, {len(wl)} without:\n{got}\n---\n{want}"
    for n, (g, w) in enumerate(zip(gl, wl), 1):
        gt, wt = g.split(), w.split()
        assert len(gt) == len(wt), f"line {n}: {g!r} vs {w!r}"
        for a, b in zip(gt, wt):
            if _NUM.match(a) and _NUM.match(b):
                assert bool(_INT.match(a)) == bool(_INT.match(b)), f"line {n}: INT/DOUBLE typing differs: {a} vs {b}"
                assert close(_num(a), _num(b), rel, abs_tol), f"line {n}: {a} vs {b}"
            else:
                assert a == b, f"line {n}: {g!r} vs {w!r}"


# ------------------------------------------------------------------ golden expectations

@dataclass
class Expect:
    kind: str  # present | absent | chain | blocks | output
    arg: str
    count: int | None = None
    recompile: bool = False


def parse_expected(text: str) -> tuple[list[Expect], dict[str, Any]]:
    facts: list[Expect] = []
    nvargs: dict[str, Any] = {}
    for raw in text.splitlines():
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        key, _, arg = s.partition(":")
        key = key.strip()
        if key.removesuffix("@recompile") == "output":
            arg = raw.split(":", 1)[1]
            arg = arg[1:] if arg.startswith(" ") else arg
        else:
            arg = arg.split("#", 1)[0].strip()
        recompile = key.endswith("@recompile")
        key = key.removesuffix("@recompile")
        if key == "nvargs":
            for kv in arg.split():
                k, _, v = kv.partition("=")
                nvargs[k] = parse_cmdline_value(v)
            continue
        cnt = None
        m = re.search(r"\s+count=(\d+)$", arg)
        if m:
            cnt = int(m.group(1))
            arg = arg[: m.start()]
        if key not in ("present", "absent", "chain", "blocks", "output"):
            raise ValueError(f"unknown directive {key!r} in {raw!r}")
        facts.append(Expect(key, arg, cnt, recompile))
    return facts, nvargs


def check_facts(facts: list[Expect], res: RunResult) -> list[str]:
    """The facts that do not hold (empty when all do)."""
    bad: list[str] = []
    static_dags = program_dags(res.program)
    for f in facts:
        dags = res.recompiled if f.recompile else static_dags
        where = "recompiled DAGs" if f.recompile else "compiled program"
        if f.recompile and not dags:
            bad.append(f"{f.kind}: no block was recompiled")
            continue
        hops = all_hops(dags)
        if f.kind == "present":
            n = count(hops, f.arg)
            if (f.count is None and n == 0) or (f.count is not None and n != f.count):
                want = f"count={f.count}" if f.count is not None else "at least one"
                bad.append(f"present: {f.arg}: {n} in the {where}, expected {want}")
        elif f.kind == "absent":
            n = count(hops, f.arg)
            if n:
                bad.append(f"absent: {f.arg}: {n} in the {where}")
        elif f.kind == "chain":
            cs = chains(dags)
            if f.arg not in cs:
                bad.append(f"chain: {f.arg} not among {cs}")
        elif f.kind == "blocks":
            got = block_counts(res.program)
            for kv in f.arg.split():
                k, _, v = kv.partition("=")
                if got.get(k) != int(v):
                    bad.append(f"blocks: {k}={got.get(k)}, expected {v}")
        elif f.kind == "output":
            if f.arg not in res.output.splitlines():
                bad.append(f"output: line {f.arg!r} not printed")
    return bad


def raw_fixture_dags(fixtures: Any) -> list[Dag]:
    """The DAGs of every golden fixture under ``fixtures`` compiled without rewrites (where the rules
    have their matches), with the DAGs dynamic recompilation produced."""
    cfg = cfgmod.Config(rewrites=False, codegen=False)
    out: list[Dag] = []
    for p in sorted(fixtures.glob("*.dml")):
        _, nvargs = parse_expected(p.with_suffix(".expected").read_text())
        res = run_capture(p.read_text(), cfg, nvargs, str(p))
        if res.program is not None:
            out += program_dags(res.program) + res.recompiled
    return out
