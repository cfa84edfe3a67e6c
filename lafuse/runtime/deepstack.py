"""Run compilation and execution on a thread with a large stack and a raised recursion limit.

Why: the parser's tree transformer, the HOP builder, DAG walks, rewrites and the interpreter are
recursive, so Python's default limit (1,000 frames on an 8 MB stack) let a DML recursion of ~140
calls, a 1,000-term ``+`` expression, or a 300-deep nested ``if`` die with RecursionError. SystemDS
compiles such scripts (its Java threads have deep stacks). Rewriting every pass with explicit stacks
would touch the whole compiler; instead :func:`call` runs the work on a thread whose stack is big
enough for :data:`RECURSION_LIMIT` frames, and raises the limit while such a thread runs.

Measured on CPython 3.11: a frame costs 0.5-1.5 KB of C stack where the recursion passes through C
(``map``, ``sorted(key=...)``, lark's transformer), so the stack is sized at 4 KB a frame and a
too-deep script ends in RecursionError, never in a segmentation fault. A DML call level takes about
7 frames, a term of a long expression about 3 (``tests/test_limits.py`` checks 10,000 of each).
The stack is virtual memory: only pages a deep recursion touches are used.

Ctrl-C: only the main thread receives signals; while it waits for a worker, a KeyboardInterrupt
there is passed on to every deep thread (the worker and parfor's pool threads) as an asynchronous
exception, and the main thread waits for them to unwind (their ``finally`` blocks run), so
callers see the same KeyboardInterrupt as before. A second Ctrl-C stops waiting.

The recursion limit is interpreter-wide: while a deep call runs, other threads of the process
(e.g. an application calling :func:`lafuse.run_dml` from several threads) also run with the raised
limit on their own, smaller stacks.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

STACK_BYTES = 1 << 30  # wanted stack of a deep thread (virtual; halved until the system grants it)
MIN_STACK_BYTES = 32 << 20
RESEND_INTERRUPT = 2.0  # s a deep thread may take to unwind after Ctrl-C before it is interrupted again
BYTES_PER_FRAME = 4096  # C stack a Python frame may take, with margin (measured: up to ~1.5 KB)
FRAMES_PER_CALL = 12  # Python frames per DML function call level (measured ~7), with margin

_lock = threading.Lock()
_local = threading.local()
_threads: set[threading.Thread] = set()  # live deep threads, to pass Ctrl-C on to
_active = 0  # deep threads running: the raised recursion limit is restored when none is left
_saved_limit = 0
_stack_bytes = 0  # the stack size the system granted (0: no deep thread started yet)


def stack_bytes() -> int:
    """The stack size deep threads get: STACK_BYTES, or the largest half of it the system allowed
    when the first deep thread started (-1: none, the platform's default stack)."""
    return _stack_bytes or STACK_BYTES


def _start_deep(target: Callable[[], None]) -> threading.Thread | None:
    """Start a deep thread, halving the stack until the system grants it (no probe thread: a
    trivial run pays for one thread start only); None if not even MIN_STACK_BYTES is granted."""
    global _stack_bytes
    size = stack_bytes()
    while size > 0:
        _stack_bytes = size  # before the start: the thread sizes its recursion limit by it
        try:
            return _start(target, size)
        except (RuntimeError, ValueError, MemoryError):  # "can't start new thread": no such mapping
            size = size // 2 if size > MIN_STACK_BYTES else -1
    _stack_bytes = -1
    return None


def recursion_limit() -> int:
    """The Python recursion limit of a deep thread."""
    size = stack_bytes()
    return max(size // BYTES_PER_FRAME, sys.getrecursionlimit()) if size > 0 else sys.getrecursionlimit()


def max_call_depth() -> int:
    """The deepest DML function-call nesting that fits on the current thread's stack."""
    limit = getattr(_local, "limit", 0) or sys.getrecursionlimit()
    return max(limit // FRAMES_PER_CALL, 10)


def is_deep() -> bool:
    return bool(getattr(_local, "limit", 0))


def _start(target: Callable[[], None], size: int) -> threading.Thread:
    with _lock:
        old = threading.stack_size()
        threading.stack_size(size)
        try:
            t = threading.Thread(target=target, name="lafuse", daemon=True)
            t.start()
        finally:
            threading.stack_size(old)
    return t


def _enter() -> None:
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
        _active += 1
        want = recursion_limit()
        if sys.getrecursionlimit() < want:
            sys.setrecursionlimit(want)
        _threads.add(threading.current_thread())
    _local.limit = want


def _leave() -> None:
    global _active
    _local.limit = 0
    with _lock:
        _threads.discard(threading.current_thread())
        _active -= 1
        if _active == 0 and _saved_limit:
            try:
                sys.setrecursionlimit(_saved_limit)
            except RecursionError:  # pragma: no cover - only if this thread is itself that deep
                pass


class _Worker:
    """A deep thread kept for later calls. Why not a thread a call: each compute of the Python API is
    a call, and its matrix operations ran slower on a new thread than inline or on a reused one (GLM
    5000 x 100, five iterations, single runs in fresh processes: 24-41 ms on a fresh thread, 15-19
    ms on a reused one, 15-16 ms inline); what a thread sets up on first use (a malloc arena, for
    one) is the likely cost, not measured apart."""

    def __init__(self) -> None:
        self.job: Callable[[], None] | None = None
        self.ready = threading.Event()
        self.thread = _start_deep(self._loop)

    def _loop(self) -> None:
        while True:
            try:
                self.ready.wait()
                self.ready.clear()
                job, self.job = self.job, None
                if job is not None:
                    job()
            except BaseException:  # an interrupt sent for a call that already ended: wait for the next
                continue

    def run(self, job: Callable[[], None]) -> None:
        self.job = job
        self.ready.set()


_idle: list[_Worker] = []  # deep threads waiting for a call


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a deep thread; its result or exception comes back unchanged.
    On a deep thread already (nested calls, parfor workers) it is called directly. Deep threads are
    kept and reused: calls from several threads at once each get one."""
    if is_deep() or stack_bytes() < 0:  # (< 0: the system grants no larger stack: default limits)
        return fn(*args, **kwargs)
    box: dict[str, Any] = {}
    done = threading.Event()

    def body() -> None:
        _enter()
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller as it is
            box["error"] = e
        finally:
            try:
                _leave()
            finally:  # even if an interrupt lands here: the caller must not wait forever
                done.set()

    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
        if worker.thread is None:
            return fn(*args, **kwargs)
    worker.run(body)
    _wait(done)
    if done.is_set():  # (not after a second Ctrl-C stopped the wait: the worker may still run)
        with _lock:
            _idle.append(worker)
    if "error" in box:
        err = box.pop("error")
        try:
            raise err
        finally:
            del err
    return box["value"]


def _wait(done: threading.Event) -> None:
    """Not Thread.join: a KeyboardInterrupt inside join() marks a running thread as stopped
    (CPython 3.11 releases the thread's state lock on the way out), so a second join returns early."""
    try:
        done.wait()
    except KeyboardInterrupt:
        previous = sys.unraisablehook
        sys.unraisablehook = _quiet_interrupts(previous)
        try:
            _interrupt_until(done)
        finally:
            sys.unraisablehook = previous


def _quiet_interrupts(previous: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An unraisable-exception hook that drops the KeyboardInterrupts sent to the deep threads which
    land in a ``__del__`` or a weakref callback (Python would print "Exception ignored in ..." with a
    traceback: a Dask future released on the deep thread; the interrupt is sent again, see
    ``_interrupt_until``) and passes everything else to ``previous``."""
    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous(unraisable)

    return hook


def _interrupt_until(done: threading.Event) -> None:
    """Interrupt the deep threads until the waited one is done. A second Ctrl-C stops waiting (the
    daemon thread dies at exit); otherwise the worker unwinds (finally blocks run) and leaves its own
    outcome, KeyboardInterrupt or a result, in the box. The interrupt is sent again while the worker
    runs on: Python drops an exception raised in a __del__ or a weakref callback, so one landing
    there is lost (seen under Dask, where futures are released on the deep thread: 1 of 40
    interrupted runs of a distributed loop went on; none of 180 with the interrupt sent again)."""
    interrupt_all()
    while not done.wait(RESEND_INTERRUPT):
        interrupt_all()


def interrupt_all() -> None:
    """Raise KeyboardInterrupt in every deep thread (at its next bytecode)."""
    import ctypes  # only here: a run that is not interrupted does not load it

    with _lock:
        idents = [t.ident for t in _threads if t.is_alive() and t.ident is not None]
    for ident in idents:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(KeyboardInterrupt))


def parallel_map(fn: Callable[[Any], T], items: list[Any], workers: int) -> list[T]:
    """``[fn(x) for x in items]`` on up to ``workers`` deep threads (parfor's iterations). After an
    item fails no new one starts, and the exception of the first failed item (in order) is raised
    once all threads ended."""
    results: list[Any] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    nxt = iter(range(len(items)))
    take = threading.Lock()

    def worker() -> None:
        _enter()
        try:
            while not errors:  # after a failure (or Ctrl-C) no thread starts another item
                with take:
                    i = next(nxt, None)
                if i is None:
                    return
                try:
                    results[i] = fn(items[i])
                except BaseException as e:  # handed to the caller as it is
                    errors[i] = e
        except BaseException as e:  # an interrupt between two items
            errors.setdefault(-1, e)
        finally:
            _leave()

    threads = []
    for _ in range(max(1, min(workers, len(items)))):
        t = _start_deep(worker) if stack_bytes() > 0 else None
        threads.append(t or _start(worker, 0))
    for t in threads:
        t.join()
    if errors:
        raise errors[min(errors)]
    return results
