"""The live progress line: on a terminal (a pseudo-terminal here) a run that lasts over progress_after shows
the statement running and the loop's iteration, and leaves no line behind; ``--quiet`` and a run whose
output is not a terminal show nothing."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from lafuse.runtime import progress

# ~1.5 s of work in a loop of 500 iterations (a product each), the line shown after 0.2 s
SCRIPT = """X = rand(rows=350, cols=350, seed=1) / 350
Y = X
for (i in 1:500) {
  Y = tanh(Y %*% X) + X
}
print("done " + (sum(Y) > 0))
"""


def _on_terminal(tmp_path, *flags: str) -> str:
    script = tmp_path / "long.dml"
    script.write_text(SCRIPT)
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"progress_after": 0.2}')
    flags = ("--config", str(cfg), *flags)
    main, sub = pty.openpty()
    env = {**os.environ, "LAFUSE_BACKGROUND": "0", "COLUMNS": "120", "TERM": "xterm"}
    env.pop("LAFUSE_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "lafuse", "run", str(script), "--no-codegen", *flags],
                            stdin=sub, stdout=sub, stderr=sub, env=env, close_fds=True)
    os.close(sub)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(main)
    assert proc.returncode == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_a_long_run_shows_where_it_is_on_a_terminal(tmp_path):
    out = _on_terminal(tmp_path)
    assert "done TRUE" in out
    assert "lines 4" in out, out[-2000:]  # the loop body's statement
    assert "for i " in out and "/500" in out, out[-2000:]  # its iteration, of 500


def test_quiet_shows_nothing(tmp_path):
    out = _on_terminal(tmp_path, "--quiet")
    assert "done TRUE" in out and "/300" not in out


def test_nothing_when_output_is_not_a_terminal(tmp_path):
    script = tmp_path / "long.dml"
    script.write_text(SCRIPT)
    res = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--no-codegen"], capture_output=True,
                         text=True, env={**os.environ, "LAFUSE_BACKGROUND": "0"}, timeout=300)
    assert res.returncode == 0 and res.stdout == "done TRUE\n" and res.stderr == ""


def test_the_line_names_loops_and_tasks():
    p = progress.RunProgress()
    assert p.text() == "starting"
    p.where = "lines 4-6"
    p.loops = [["for", "i", 3, 10], ["while", "", 2, None]]
    p.tasks = "Dask matmul: tasks 2 running"
    assert p.text() == "lines 4-6 | for i 3/10 | while iteration 2 | Dask matmul: tasks 2 running"
