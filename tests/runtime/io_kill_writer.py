"""The writer of test_io_safety's interrupted-write test, as a fork server: it imports lafuse once and,
per request, forks a child that overwrites one file again and again with two matrices in turn (``b``
first, then ``a``, ...) through lafuse's writer, and SIGKILLs the child after the requested delay.
A fresh interpreter per kill would spend ~0.7 s importing lafuse; a fork costs milliseconds, and the
child is still a separate process killed by a real SIGKILL at an arbitrary point of its write.

Requests on stdin, one JSON object a line: ``{"path", "fmt", "a", "b", "delay"}`` (``a``, ``b``: .npy
files holding the matrices); the answer is one line ``killed N`` once the child is dead, N being the
writes it completed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

from lafuse.runtime.io import write_value


def _writer(path: str, fmt: str, mats: list[np.ndarray], done_fd: int) -> None:
    k = 0
    while True:
        write_value(mats[(k + 1) % 2], path, {"format": fmt})
        k += 1
        os.write(done_fd, b".")


def main() -> None:
    for line in sys.stdin:
        req = json.loads(line)
        mats = [np.load(req["a"]), np.load(req["b"])]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into this loop
            code = 0
            try:
                os.close(r)
                _writer(req["path"], req["fmt"], mats, w)
            except BaseException as e:  # noqa: BLE001 - reported to the test through the exit code
                print(f"writer failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                code = 3
            finally:
                os._exit(code)
        os.close(w)
        time.sleep(float(req["delay"]))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        done = 0
        while chunk := os.read(r, 65536):
            done += len(chunk)
        os.close(r)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print(f"killed {done}" if killed else f"exited {os.WEXITSTATUS(status)} {done}", flush=True)


if __name__ == "__main__":
    main()
