"""The conformance corpus: scripts, their header directives, generated inputs and the two runners.

A script is ``scripts/NNN_name.dml``. Header lines of the form ``#@ <directive>`` (anywhere in the file, by
convention at the top) say how to run it:

``#@ nvarg k=v``
    pass ``-nvargs k=v`` (``$k`` in the script) literally.
``#@ input X=A.csv``
    pass ``$X`` = absolute path of the generated input file ``A.csv`` (see ``INPUTS`` below; its ``.mtd``, if
    any, is written next to it).
``#@ output M=csv``
    pass ``$M`` = a fresh output path ``M.csv`` in a per-run directory; after the run the matrix written there
    is compared (formats: ``csv``, ``text``, ``mm``).
``#@ sds-config key=value``
    run SystemDS with ``sysds.key=value`` in a ``-config`` file; only to steer around a documented SystemDS
    bug (the directive is part of the script text, hence of the cache key).
``#@ stop``
    the script is expected to end in ``stop(...)``: SystemDS must report a ``DMLScriptException``; lafuse must
    print the same lines before it, report the same message, and never print a line containing
    ``UNREACHABLE`` (put such a ``print`` after the ``stop``).

Helper scripts for ``source()`` live in ``scripts/lib/`` and are referenced relative to the script's directory
(SystemDS resolves relative source paths against the working directory, and both runners use the script's
directory as working directory).
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import algodata, sds

HERE = Path(__file__).resolve().parent
SCRIPTS_DIR = HERE / "scripts"
ALGORITHMS_DIR = HERE / "algorithms"  # one driver per SystemDS algorithm script (test_algorithms.py)
REPO_ROOT = HERE.parent.parent
OUTPUT_EXT = {"csv": "csv", "text": "txt", "mm": "mtx"}
LAFUSE_TIMEOUT = 600


@dataclass
class Script:
    path: Path
    nvargs: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # nvarg name -> generated input file name
    outputs: dict[str, str] = field(default_factory=dict)  # nvarg name -> format
    expect_stop: bool = False
    sds_config: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        return self.path.stem

    def output_file(self, name: str) -> str:
        return f"{name}.{OUTPUT_EXT[self.outputs[name]]}"

    def arguments(self, inputs_dir: Path, out_dir: Path) -> dict[str, str]:
        args = dict(self.nvargs)
        for k, f in self.inputs.items():
            args[k] = str(inputs_dir / f)
        for k in self.outputs:
            args[k] = str(out_dir / self.output_file(k))
        return args

    def argument_spec(self) -> dict[str, str]:
        """The arguments with placeholders instead of paths (part of the cache key)."""
        args = dict(self.nvargs)
        for k, f in self.inputs.items():
            args[k] = f"<input:{f}>"
        for k in self.outputs:
            args[k] = f"<output:{self.output_file(k)}>"
        return args


def load_script(path: Path) -> Script:
    sc = Script(path)
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line.startswith("#@"):
            continue
        words = shlex.split(line[2:])
        if not words:
            continue
        kind, rest = words[0], words[1:]
        if kind == "stop" and not rest:
            sc.expect_stop = True
            continue
        if kind not in ("nvarg", "input", "output", "sds-config") or len(rest) != 1 or "=" not in rest[0]:
            raise ValueError(f"{path.name}:{no}: bad directive {raw!r}")
        k, v = rest[0].split("=", 1)
        if kind == "nvarg":
            sc.nvargs[k] = v
        elif kind == "sds-config":
            sc.sds_config[k] = v
        elif kind == "input":
            if v not in INPUTS:
                raise ValueError(f"{path.name}:{no}: unknown input {v!r}; known: {sorted(INPUTS)}")
            sc.inputs[k] = v
        else:
            if v not in OUTPUT_EXT:
                raise ValueError(f"{path.name}:{no}: unknown output format {v!r}")
            sc.outputs[k] = v
    return sc


def all_scripts() -> list[Path]:
    return sorted(SCRIPTS_DIR.glob("[0-9][0-9][0-9]_*.dml"))


# ----------------------------------------------------------------------------------------- generated inputs

def _fmt(v: float) -> str:
    return repr(float(v)) if v != int(v) else str(int(v))


def _csv(rows: list[list[float]]) -> str:
    return "".join(",".join(_fmt(v) for v in r) + "\n" for r in rows)


def _mtd(rows: int, cols: int, fmt: str, **extra) -> str:
    parts = [f'"data_type": "{extra.pop("data_type", "matrix")}"', '"value_type": "double"',
             f'"rows": {rows}', f'"cols": {cols}', f'"format": "{fmt}"']
    parts += [f'"{k}": {str(v).lower() if isinstance(v, bool) else repr(v).replace(chr(39), chr(34))}'
              for k, v in extra.items()]
    return "{\n    " + ",\n    ".join(parts) + "\n}\n"


def _features() -> list[list[float]]:
    # 12 x 4, smooth and deterministic, with an exact zero column entry here and there
    return [[round(math.sin(i * 0.7 + j) * 10, 3) if (i + j) % 5 else 0.0 for j in range(1, 5)]
            for i in range(1, 13)]


def _labels() -> list[list[float]]:
    return [[float((i * 7) % 3 + 1)] for i in range(1, 13)]


def _sparse_ijv() -> str:
    entries = [(1, 1, 2.5), (2, 4, -1.0), (4, 2, 3.25), (5, 5, 10.0), (3, 3, 0.125)]
    return "".join(f"{i} {j} {_fmt(v)}\n" for i, j, v in entries)


def _frame_csv() -> str:
    rows = [("id", "name", "score"), (1, "alpha", 2.5), (2, "beta", -1.0), (3, "gamma", 7.25), (4, "delta", 0.0)]
    return "".join(",".join(str(x) for x in r) + "\n" for r in rows)


# file name -> (content, .mtd content or None)
INPUTS: dict[str, Callable[[], tuple[str, str | None]]] = {
    "X.csv": lambda: (_csv(_features()), _mtd(12, 4, "csv", header=False, sep=",")),
    "y.csv": lambda: (_csv(_labels()), _mtd(12, 1, "csv", header=False, sep=",")),
    "nomtd.csv": lambda: ("1,2,3\n4,5,6\n7,8,9.5\n", None),
    "S.txt": lambda: (_sparse_ijv(), _mtd(5, 5, "text")),
    "F.csv": lambda: (_frame_csv(), None),
    # the algorithm drivers' data (algorithms/*.dml), at the test size
    **{name: (lambda name=name: algodata.content(name)) for name in algodata.FILES},
}


def generate_inputs(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, make in INPUTS.items():
        content, mtd = make()
        (directory / name).write_text(content)
        if mtd is not None:
            (directory / (name + ".mtd")).write_text(mtd)
    return directory


# ----------------------------------------------------------------------------------------- runners

def run_reference(sc: Script, inputs_dir: Path, workdir: Path, use_cache: bool | None = None) -> sds.SdsResult:
    """SystemDS's result for a corpus script (through the cache unless CI)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir = workdir / "out"
    out_dir.mkdir(exist_ok=True)
    outputs = {k: out_dir / sc.output_file(k) for k in sc.outputs}
    return sds.run_cached(
        sc.path, sc.arguments(inputs_dir, out_dir), sc.argument_spec(),
        [inputs_dir / f for f in sc.inputs.values()], outputs, workdir, use_cache, sc.sds_config,
    )


@dataclass
class LafuseResult:
    stdout_lines: list[str]
    returncode: int
    stderr: str
    outputs: dict[str, Path]
    command: list[str]


def lafuse_command(script: Path, nvargs: dict[str, str]) -> list[str]:
    cmd = [sys.executable, "-m", "lafuse", "run", str(script), "--builtins", str(sds.builtin_scripts_dir()),
           "--no-lafuse-builtins"]
    if nvargs:
        cmd.append("--nvargs")
        cmd.extend(f"{k}={v}" for k, v in nvargs.items())
    return cmd


def run_lafuse_file(script: Path, nvargs: dict[str, str], cwd: Path | None = None) -> LafuseResult:
    """Run ``python -m lafuse run script --nvargs k=v ...``; cwd defaults to the script's directory."""
    cmd = lafuse_command(script, nvargs)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if x)
    proc = subprocess.run(cmd, cwd=cwd or script.parent, capture_output=True, text=True, env=env,
                          timeout=LAFUSE_TIMEOUT)
    lines = proc.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return LafuseResult(lines, proc.returncode, proc.stderr, {}, cmd)


def run_lafuse(sc: Script, inputs_dir: Path, workdir: Path) -> LafuseResult:
    """Run lafuse's CLI on a corpus script, with the script's directory as working directory."""
    out_dir = workdir / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    res = run_lafuse_file(sc.path, sc.arguments(inputs_dir, out_dir))
    res.outputs = {k: out_dir / sc.output_file(k) for k in sc.outputs}
    return res
