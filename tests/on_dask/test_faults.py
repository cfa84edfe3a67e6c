"""Faults and memory on the Dask backend: a worker killed mid-script (the result is the local one:
lost blocks are recomputed from their lineage, scattered blocks included), a task that cannot fit
its worker's memory (a located error naming ``--worker-memory``), a working set twice the workers'
memory (it spills and completes), Ctrl-C (no process left behind), and the ``--stats`` lines that
report what the workers did. Each test that needs its own cluster starts it (the session's shared
one stays intact) and checks that none of its processes outlives it."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lafuse.runtime.dask import cluster

psutil = pytest.importorskip("psutil")  # (a dependency of distributed)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "lafuse", "run"]
QUIET = ["--no-codegen", "--no-background"]


@contextlib.contextmanager
def own_cluster(memory_limit: str = "1GiB"):
    """A LocalCluster of two one-thread worker processes, closed afterwards with none left."""
    from distributed import LocalCluster

    from lafuse.runtime.dask import cluster as lafuse_cluster

    before = {p.pid for p in multiprocessing.active_children()}
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                     dashboard_address=None, memory_limit=memory_limit, silence_logs=logging.CRITICAL)
    try:
        yield c
    finally:
        lafuse_cluster.close()
        c.close()
        left = {p.pid for p in multiprocessing.active_children() if p.is_alive()} - before
        assert not left, f"worker processes left behind: {left}"


def run_cli(args: list[str], env: dict[str, str] | None = None, interrupt_after_line: int = 0,
            timeout: float = 240) -> tuple[int, str, str]:
    """``lafuse run ARGS`` in its own session; every process it starts (the local cluster's workers)
    is recorded while it runs, and none may be alive once it has exited. ``interrupt_after_line``:
    Ctrl-C as a terminal sends it (SIGINT to the process group) after that many lines of output."""
    # SIGINT at its default in the run, as a terminal's foreground job has it: a test suite started in the
    # background of a non-interactive shell (`make test &`) has SIGINT ignored, which the run would
    # inherit (Python keeps an ignored SIGINT ignored), and Ctrl-C would do nothing (tests/test_limits.py)
    p = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            with contextlib.suppress(psutil.Error):
                seen.update(c.pid for c in psutil.Process(p.pid).children(recursive=True))
            done.wait(0.05)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    out_lines: list[str] = []
    try:
        if interrupt_after_line:
            assert p.stdout is not None
            while len(out_lines) < interrupt_after_line:
                line = p.stdout.readline()
                assert line, "the run ended before it printed enough"
                out_lines.append(line)
            os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
    finally:
        done.set()
        w.join()
        if p.poll() is None:  # (a failed test: no run left running either)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    deadline = time.monotonic() + 10
    alive = seen
    while alive and time.monotonic() < deadline:  # (an exited parent's children are reaped by init)
        alive = {q for q in alive if psutil.pid_exists(q) and psutil.Process(q).status() != psutil.STATUS_ZOMBIE}
        time.sleep(0.1)
    assert not alive, f"processes of the run left behind: {alive}"
    return p.returncode, "".join(out_lines) + out, err


# ---------------------------------------------------------------- a worker killed mid-script

LOOP = """
X = A
for (i in 1:8) {
  X = (X %*% B) * 0.5 + A * 0.25
  print(sum(X))
}
s = sum(X)
"""


def test_a_worker_killed_mid_script_leaves_the_result_as_it_was():
    """A script in a loop that waits on the cluster every iteration; after the third iteration the
    worker holding scattered blocks of A is killed (SIGKILL, by pid). Its nanny starts a new one; the
    scheduler reruns what the dead one held (A's blocks from the tasks that carry them, X from its
    lineage), and the results equal the local run's."""
    from distributed import Client

    from lafuse import config as cfgmod
    from lafuse.compiler import run_dml

    rng = np.random.default_rng(7)
    inputs = {"A": rng.random((40, 30)), "B": rng.random((30, 30)) / 30}
    local = run_dml(LOOP, inputs=inputs, outputs=("s",), cfg=cfgmod.Config(codegen=False, background=False))
    with own_cluster() as c, Client(c.scheduler_address) as probe:
        pids = probe.run(os.getpid)
        killed: dict[str, object] = {}

        class Out:
            lines: list[str] = []

            def write(self, text: str) -> int:
                self.lines.append(text)
                if "".join(self.lines).count("\n") == 3 and not killed:  # (the third print's: no wait runs)
                    held = probe.has_what()
                    victim = max(held, key=lambda a: len(held[a]))
                    killed.update(pid=pids[victim], held=len(held[victim]))
                    os.kill(pids[victim], signal.SIGKILL)
                return len(text)

            def flush(self) -> None:
                pass

        cfg = cfgmod.Config(exec_type="dask", scheduler=c.scheduler_address, block_size=7, codegen=False,
                            background=False)
        out = Out()
        dist = run_dml(LOOP, inputs=inputs, outputs=("s",), cfg=cfg, out=out)
        assert killed and killed["held"], killed  # (X's blocks: their lineage reaches A's scattered ones)
        np.testing.assert_allclose(dist["s"], local["s"], rtol=1e-9)
        printed = [float(x) for x in "".join(out.lines).split()]
        assert len(printed) == 8
        deadline = time.monotonic() + 60  # the nanny's new worker joins (no timing asserted: a bound)
        while time.monotonic() < deadline and len(cluster.workers(probe)) < 2:
            time.sleep(0.2)
        now = set(probe.run(os.getpid).values())
        assert len(now) == 2 and killed["pid"] not in now

        # a scattered block held only by the killed worker comes back (client.scatter's would be lost)
        from lafuse.runtime.dask.backend import DaskBackend

        be = DaskBackend(cfg)
        m = rng.random((20, 20))
        x = be.scatter(m)
        be.gather(list(x.blocks.values()))
        pids = probe.run(os.getpid)
        holders = probe.who_has(list(x.blocks.values()))
        victim = max(pids, key=lambda a: sum(a in h for h in holders.values()))
        assert any(victim in h for h in holders.values())
        os.kill(pids[victim], signal.SIGKILL)
        np.testing.assert_array_equal(be.collect(x), m)


# ---------------------------------------------------------------- memory

def test_a_task_beyond_its_workers_memory_is_a_located_error(tmp_path):
    """An outer product whose one output block (6000x6000, 275 MiB) cannot fit a worker of 250 MB:
    each worker that runs it passes its limit and is restarted, the scheduler gives up
    (KilledWorker), and the run stops with the product's place, ``--worker-memory`` and exit 1; no
    traceback, no process left."""
    p = tmp_path / "outer.dml"
    p.write_text("u = matrix(seq(1, 6000), rows=6000, cols=1) / 6000\nC = u %*% t(u)\nprint(toString(C[1:2, 1:2]))\n")
    conf = tmp_path / "c.json"
    # (sum_product off: it would select C[1:2, 1:2] from u before the product, which then fits)
    conf.write_text('{"block_size": 6000, "sum_product": false}')
    # (one retry instead of three: each retry is a worker killed and restarted)
    rc, out, err = run_cli([str(p), *QUIET, "--exec", "dask", "--worker-memory", "250MB", "--config", str(conf)],
                           env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})
    assert rc == 1, (out, err)
    assert re.search(rf"^{re.escape(str(p))}:2:7: runtime error: the distributed operator '%\*%'.* ran out of "
                     r"memory on the Dask workers: its task was tried on 2 workers .*raise --worker-memory "
                     r"\(now 250MB", err, re.M), err
    assert "C = u %*% t(u)" in err and "Traceback" not in err, err


def test_workers_that_cannot_start_within_their_memory_are_a_located_error(monkeypatch):
    """--worker-memory 10MB: a worker process passes that before it holds anything, so its nanny
    restarts it again and again and no task ever runs. The wait notices that no worker runs and
    nothing moves (after STALL_SECONDS, shortened here) and stops at the operator it waits for."""
    from lafuse import config as cfgmod
    from lafuse.compiler import run_dml
    from lafuse.errors import DMLRuntimeError
    from lafuse.runtime.dask import backend

    monkeypatch.setattr(backend, "STALL_SECONDS", 3.0)
    before = {p.pid for p in multiprocessing.active_children()}
    cfg = cfgmod.Config(exec_type="dask", worker_memory="10MB", block_size=7, codegen=False, background=False)
    try:
        with pytest.raises(DMLRuntimeError) as e:
            run_dml("X = matrix(seq(1, 100), rows=10, cols=10)\ns = sum(X * 2)\n", outputs=("s",), cfg=cfg)
    finally:
        cluster.close()
    assert e.value.span is not None and (e.value.span.line, e.value.span.col) == (2, 5), e.value.span
    assert re.search(r"the distributed operator 'sum' cannot run on the Dask cluster: its workers were "
                     r"restarted \d+ times for passing their memory limit .*raise --worker-memory \(now 10MB",
                     e.value.message), e.value.message
    left = {p.pid for p in multiprocessing.active_children() if p.is_alive()} - before
    assert not left, f"worker processes left behind: {left}"


OOC = """
A = matrix(seq(1, 16000000), rows=4000, cols=4000) / 16000000
B = A * 2 + 1
C = (A + B) * 0.5
D = C - A / 3
E = D * B
F = E + C
G = F / B
s = sum(A) + sum(B) + sum(C) + sum(D) + sum(E) + sum(F) + sum(G)
print(s)
"""


def test_a_working_set_twice_the_workers_memory_spills_and_completes(tmp_path):
    """Seven live 4000x4000 matrices (854 MiB) on two workers of 200 MB (381 MiB): the workers
    spill to disk, the run prints the local run's sum, and ``--stats`` reports the spilled bytes."""
    p = tmp_path / "ooc.dml"
    p.write_text(OOC)
    conf = tmp_path / "c.json"
    conf.write_text('{"block_size": 500}')
    assert 7 * 4000 * 4000 * 8 >= 2 * (2 * 200e6)  # (the working set: twice the workers' memory)
    local = run_cli([str(p), *QUIET])
    rc, out, err = run_cli([str(p), *QUIET, "--exec", "dask", "--worker-memory", "200MB", "--config", str(conf),
                            "--stats"])
    assert local[0] == 0 and rc == 0, err
    assert float(out.splitlines()[0]) == pytest.approx(float(local[1].splitlines()[0]), rel=1e-9)
    m = re.search(r"^Dask workers: moved between them ([\d.]+) MiB in (\d+) transfers.*, spilled to disk "
                  r"([\d.]+) MiB \(read back ([\d.]+) MiB\)", out, re.M)
    assert m and float(m.group(3)) > 0, out


# ---------------------------------------------------------------- Ctrl-C

def test_ctrl_c_stops_the_run_and_its_local_cluster(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while a distributed loop runs on
    the cluster lafuse started: exit 130, no traceback (the workers leave the signal to lafuse), and
    no worker process left."""
    p = tmp_path / "long.dml"
    p.write_text("X = matrix(seq(1, 400), rows=20, cols=20) / 400\nY = X\nfor (i in 1:100000) {\n"
                 "  Y = (Y %*% X) * 0.5 + X\n  print(sum(Y))\n}\n")
    conf = tmp_path / "c.json"
    conf.write_text('{"block_size": 7}')
    rc, out, err = run_cli([str(p), *QUIET, "--exec", "dask", "--config", str(conf)], interrupt_after_line=3)
    assert rc == 130, (out[-300:], err)
    assert "Traceback" not in err, err


# ---------------------------------------------------------------- --stats

def test_stats_report_worker_transfers_spill_and_time_per_operator(dask_scheduler, tmp_path):
    """A product of matrices whose blocks sit on both workers: --stats reports bytes the workers
    moved between them (> 0), spilled bytes (none here) and worker time per distributed operator,
    the product's strategy among them."""
    p = tmp_path / "mm.dml"
    p.write_text("A = matrix(seq(1, 3600), rows=60, cols=60) / 3600\nB = t(A) + 1\n"
                 "C = A %*% B\nprint(sum(C))\n")
    conf = tmp_path / "c.json"
    conf.write_text('{"block_size": 7, "sum_product": false}')  # (the product as written, not summed away)
    rc, out, err = run_cli([str(p), *QUIET, "--exec", "dask", "--scheduler", dask_scheduler, "--config",
                            str(conf), "--stats"])
    assert rc == 0, err
    first = re.search(r"^Dask: tasks submitted (\d+), scattered to the workers (\d+) blocks", out, re.M)
    assert first and int(first.group(1)) > 0 and int(first.group(2)) > 0, out
    m = re.search(r"^Dask workers: moved between them ([\d.]+) MiB in (\d+) transfers.*, spilled to disk "
                  r"([\d.]+) MiB", out, re.M)
    assert m and float(m.group(1)) > 0 and int(m.group(2)) > 0 and float(m.group(3)) == 0, out
    times = re.search(r"^Dask worker time by operator: (.*)$", out, re.M)
    assert times, out
    per = dict(re.findall(r"(\S+) [\d.]+ sec\. \((\d+) tasks\)", times.group(1)))
    assert {"scatter", "sum"} <= set(per) and set(per) & {"rmm", "cpmm", "mapmm_l", "mapmm_r", "%*%"}, per
    assert sum(int(n) for op, n in per.items() if op != "scatter") == int(first.group(1)), per
