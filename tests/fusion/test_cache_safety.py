"""The plan cache trusts nothing it reads from disk (lafuse.cachedir, lafuse.cachefiles,
lafuse.codegen.integrity): tampered kernel sources and Numba files never run, an unsafe directory is
not used, corrupt state files (profile, run feedback) cost one warning and never a run; the cache's
size bound, ``lafuse cache info|clear`` and the one switch of background jobs.

Runs are in-process (``cli.main``), each as a new process would start: the memory plan cache, the
directory checks and the once-per-process warnings are reset before it. One kernel is compiled for the
module and shared (a cold compile costs seconds); a test that damages it leaves it repaired.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest

from lafuse import background, cachedir, cachefiles, cli, codegen, fusion
from lafuse import config as cfgmod
from lafuse.codegen import deferred
from lafuse.cost import profile
from lafuse.feedback import decisions, observed, prestart
from lafuse.runtime import handoff

from .conftest import PROFILE

SCRIPT = "X = rand(rows=50, cols=40, seed=1)\nY = rand(rows=50, cols=40, seed=2)\nprint(sum(X * Y * 2))\n"
FUSE = ("--fusion", "fuse-all")
# a cost-based candidate (unfused: it pays only from the disk cache) whose block runs 20 times
LOOP = "".join(f"{v} = rand(rows=1000, cols=1000, seed={i})\n" for i, v in enumerate("XYZ")) + \
    "s = 0\nfor (i in 1:20) {\n  s = s + sum(X * Y * Z)\n}\nprint(s)\n"


def _run(script: str, *args: str) -> tuple[int, str, str]:
    codegen.clear_memory_cache()  # as in a new process: kernels come from the disk cache
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["run", "-s", script, *args])
    return rc, out.getvalue(), err.getvalue()


def run(*args: str) -> tuple[int, str, str]:
    return _run(SCRIPT, *args)


def value(out: str) -> float:
    return float(out.strip().splitlines()[-1])


class Payload:
    """A pickle that, when loaded, creates ``path`` (what a planted cache file could do)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A plan cache with the kernel of SCRIPT, compiled once; the key file beside it, not in it."""
    base = tmp_path_factory.mktemp("cache_safety")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAFUSE_CODEGEN_CACHE", str(base / "cache"))
        mp.setenv("LAFUSE_CACHE_KEY", str(base / "key" / "cache.key"))
        mp.setenv("LAFUSE_PROFILE", str(PROFILE))
        cachedir.forget()
        rc, plain, _ = run("--no-codegen")
        assert rc == 0
        rc, fused, err = run(*FUSE)
        assert rc == 0 and err == ""
        cache = base / "cache"
        [src] = cache.glob("k_*.py")
        yield SimpleNamespace(cache=cache, key=base / "key" / "cache.key", want=value(plain), src=src,
                              source=src.read_text(), pycache=cache / "__pycache__")
    cachedir.forget()


@pytest.fixture(autouse=True)
def new_process(shared, monkeypatch):
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(shared.cache))
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(shared.key))
    monkeypatch.setattr(cachedir, "_WARNED", set())
    monkeypatch.setattr(profile, "_cached", {})
    monkeypatch.setattr(observed, "_loaded", {})
    cachedir.forget()
    yield
    cachedir.forget()


def renew() -> None:
    """What the next process would start with."""
    cachedir.forget()
    cachedir._WARNED.clear()
    profile._cached.clear()
    observed._loaded.clear()


def warnings(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert all(ln.startswith("lafuse: warning: ") for ln in lines), err
    return lines


def assert_correct(shared, rc: int, out: str) -> None:
    assert rc == 0
    assert value(out) == pytest.approx(shared.want, rel=1e-12)


def numba_files(shared) -> list[Path]:
    return sorted(shared.pycache.glob(f"{shared.src.stem}.*"))


# ------------------------------------------------------------------------------ tampered files

@pytest.mark.parametrize("damage", ["payload", "truncated", "empty"])
def test_a_modified_kernel_source_never_runs_and_is_rewritten(shared, tmp_path, damage):
    marker = tmp_path / "MARKER"
    text = {"payload": f"open({str(marker)!r}, 'w').close()\n" + shared.source,
            "truncated": shared.source[: len(shared.source) // 2], "empty": ""}[damage]
    shared.src.write_text(text)
    rc, out, err = run(*FUSE)
    assert_correct(shared, rc, out)
    [w] = warnings(err)
    assert f"cached kernel {shared.src} differs from its generated source" in w
    assert not marker.exists()
    assert shared.src.read_text() == shared.source and numba_files(shared)
    renew()
    hits = codegen.cache_stats()["disk_hits"]
    rc, out, err = run(*FUSE)  # the next run loads the repaired kernel, no cleanup by hand
    assert_correct(shared, rc, out)
    assert err == "" and codegen.cache_stats()["disk_hits"] == hits + 1


@pytest.mark.parametrize("target,damage", [("nbi", "payload"), ("nbc", "payload"), ("nbi", "truncated")])
def test_modified_numba_cache_files_are_never_loaded(shared, tmp_path, target, damage):
    marker = tmp_path / "MARKER"
    [path] = [p for p in numba_files(shared) if p.suffix == f".{target}"]
    raw = path.read_bytes()
    path.write_bytes(pickle.dumps(Payload(marker)) if damage == "payload" else raw[: len(raw) // 2])
    rc, out, err = run(*FUSE)
    assert_correct(shared, rc, out)
    [w] = warnings(err)
    assert str(path) in w and "not signed by this user's lafuse" in w and "recompiling" in w
    assert not marker.exists()
    assert path.exists() and path.read_bytes() != pickle.dumps(Payload(marker))  # written anew, signed
    renew()
    hits = codegen.cache_stats()["disk_hits"]
    rc, out, err = run(*FUSE)
    assert_correct(shared, rc, out)
    assert err == "" and codegen.cache_stats()["disk_hits"] == hits + 1


def test_numba_files_signed_under_another_key_are_not_loaded(shared, tmp_path, monkeypatch):
    # a cache copied from another account (or machine): its signatures do not verify under this key
    other = tmp_path / "cache"
    shutil.copytree(shared.cache, other)
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(other))
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(tmp_path / "other.key"))
    rc, out, err = run(*FUSE)
    assert_correct(shared, rc, out)
    [w] = warnings(err)
    assert "not signed by this user's lafuse" in w
    assert (tmp_path / "other.key").stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------------------ unsafe directories

def _plant(d: Path, shared, marker: Path) -> Path:
    """A payload kernel under the real kernel's name, and a payload Numba index of it."""
    (d / "__pycache__").mkdir(parents=True, exist_ok=True)
    src = d / shared.src.name
    src.write_text(f"open({str(marker)!r}, 'w').close()\n" + shared.source)
    for p in numba_files(shared):
        (d / "__pycache__" / p.name).write_bytes(pickle.dumps(Payload(marker)))
    return src


@pytest.mark.parametrize("case", ["world-writable", "group-writable", "pycache-group-writable", "read-only",
                                  "foreign-owned"])
def test_an_unsafe_cache_directory_is_not_used(shared, tmp_path, monkeypatch, case):
    marker = tmp_path / "MARKER"
    d = tmp_path / "shared"
    src = _plant(d, shared, marker)
    planted = src.read_text()
    reason = {"world-writable": "writable by all users (mode 0777)",
              "group-writable": "writable by its group (mode 0770)",
              "pycache-group-writable": "its __pycache__ is writable by its group (mode 0775)",
              "read-only": "read-only (mode 0555)",
              "foreign-owned": "owned by uid "}[case]
    if case == "foreign-owned":
        if os.geteuid() == 0:
            os.chown(d, 65534, 65534)
        else:  # not root: the check sees another user's uid as this process's
            monkeypatch.setattr(cachedir, "_euid", lambda: os.geteuid() + 1)
            monkeypatch.setattr(cachedir, "_PRIVATE", [])  # the key fails too: a fresh private cache
    else:
        os.chmod(d / "__pycache__" if case.startswith("pycache") else d,
                 {"world-writable": 0o777, "group-writable": 0o770, "pycache-group-writable": 0o775,
                  "read-only": 0o555}[case])
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))
    try:
        for _ in range(2):  # the next run, too: no cleanup needed
            rc, out, err = run(*FUSE)
            assert_correct(shared, rc, out)
            [w] = warnings(err)
            assert f"plan cache {d} not used: {reason}" in w and "private temporary directory" in w
            assert not marker.exists() and src.read_text() == planted  # not even read into its place
            renew()
        info = io.StringIO()
        with redirect_stdout(info):
            assert cli.main(["cache", "info"]) == 0
        assert f"safety check: FAILED: {reason}" in info.getvalue()
    finally:
        os.chmod(d, 0o700)


# ------------------------------------------------------------------------------ corrupt state files

@pytest.mark.parametrize("content,why", [("0", "not a JSON object of rates but int"),
                                         ('"x"', "not a JSON object of rates but str"),
                                         ("[]", "not a JSON object of rates but list"),
                                         ("{not json", "not JSON"),
                                         ('{"mem_read_bw": 0}', "mem_read_bw is 0, not a positive number"),
                                         ('{"elementwise_rate": "x"}', 'elementwise_rate is "x", not a positive'),
                                         ('{"threads": 1.5}', "threads is 1.5, not a positive number")])
def test_a_corrupt_hardware_profile_falls_back_to_the_defaults(shared, tmp_path, monkeypatch, content, why):
    path = tmp_path / "profile.json"
    path.write_text(content)
    monkeypatch.setenv("LAFUSE_PROFILE", str(path))
    # in a loop: the cost policy reads the profile where fusion might pay (a small block run once never
    # reaches the optimizer, compiler.fusion_cannot_pay)
    looped = SCRIPT.replace("print(sum(X * Y * 2))", "for (i in 1:2) {\n  s = sum(X * Y * 2)\n}\nprint(s)")
    for _ in range(2):  # every run warns while the file is there, none fails
        rc, out, err = _run(looped, "--fusion", "cost")
        assert_correct(shared, rc, out)
        [w] = warnings(err)
        assert f"ignoring the hardware profile {path}: {why}" in w and "built-in defaults" in w
        renew()
    # the background job after such a run calibrates into it as if it were missing (replacing it)
    assert handoff.calibrate_later(cfgmod.Config(codegen=True, auto_calibrate=True)) == path


_UNFUSED: dict[str, str] = {}  # script -> output of its unfused run


@pytest.mark.parametrize("name", [observed.FILE, prestart.FILE])
@pytest.mark.parametrize("content", [b"\x00\xffgarbage", b"[1, 2]", b'{"k": "x"}', b'{"k": {"runs": "x"}}'])
def test_corrupt_run_feedback_is_deleted_and_rebuilt(shared, monkeypatch, name, content):
    monkeypatch.setenv("LAFUSE_FUSION_OBSERVED" if name == observed.FILE else "LAFUSE_NUMBA_PRESTART", "1")
    path = shared.cache / name
    path.write_bytes(content)
    # observed.json is read by cost-based decisions on a candidate in a loop, prestart.json at launch
    script, policy = (LOOP, ("--fusion", "cost")) if name == observed.FILE else (SCRIPT, FUSE)
    if script not in _UNFUSED:
        # an unfused run does not read observed.json; it reads prestart.json (SciPy's sparse module is
        # begun from it) unless the background imports are off, as for this reference run
        with monkeypatch.context() as m:
            m.setenv("LAFUSE_NUMBA_PRESTART", "0")
            rc, _UNFUSED[script], _ = _run(script, "--no-codegen")
        assert rc == 0 and path.read_bytes() == content
    want = _UNFUSED[script]
    for i in range(2):  # the next run: no warning, no cleanup by hand
        rc, out, err = _run(script, *policy)
        assert rc == 0 and value(out) == pytest.approx(value(want), rel=1e-12)
        if i == 0:
            [w] = warnings(err)
            assert f"run feedback {path} is corrupt" in w and "deleted, rebuilt by later runs" in w
        else:
            assert err == ""
        assert isinstance(json.loads(path.read_text()), dict)  # rebuilt by the run
        renew()


# ------------------------------------------------------------------------------ size bound, info, clear

def _fake_kernel(d: Path, stem: str, size: int, used: float) -> list[Path]:
    (d / "__pycache__").mkdir(parents=True, exist_ok=True)
    files = [d / f"{stem}.py", d / "__pycache__" / f"{stem}.kernel-6.py311.nbi",
             d / "__pycache__" / f"{stem}.kernel-6.py311.1.nbc"]
    for p, n in zip(files, (100, 100, size - 200)):
        p.write_bytes(b"x" * n)
        os.utime(p, (used, used))
    return files


def test_lru_eviction_keeps_the_cache_under_its_bound(tmp_path):
    a, b, c = (_fake_kernel(tmp_path, f"k_{n}", 6000, t) for n, t in (("a", 1.0e9), ("b", 1.1e9), ("c", 1.2e9)))
    cachefiles.touch(a[0])  # a used now: b is the least recently used
    assert a[0].stat().st_mtime == 1e9  # Numba's stamp of the source stays
    assert cachefiles.evict(tmp_path, 13000) == 1
    assert not any(p.exists() for p in b) and all(p.exists() for p in a + c)
    assert cachefiles.evict(tmp_path, 7000, keep="k_c") == 1  # c was just compiled: a goes
    assert not any(p.exists() for p in a) and all(p.exists() for p in c)
    assert sum(k.bytes for k in cachefiles.kernels(tmp_path).values()) <= 7000
    assert cachefiles.evict(tmp_path, 0) == 0  # 0: no bound


def test_a_cold_compile_evicts_the_least_recently_used_kernel(shared, tmp_path, monkeypatch):
    d = tmp_path / "cache"
    shutil.copytree(shared.cache, d)
    old = cachefiles.kernels(d)[shared.src.stem]
    for p in old.files:
        os.utime(p, (1e9, p.stat().st_mtime))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"cache_max_bytes": 2 * old.bytes - 1}))
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))
    rc, out, err = _run(SCRIPT.replace("X * Y * 2", "X * Y * Y"), *FUSE, "--config", str(cfg))
    assert rc == 0 and err == ""
    left = cachefiles.kernels(d)
    assert shared.src.stem not in left and len(left) == 1  # the new kernel replaced the old one
    assert not any(p.exists() for p in old.files)
    assert sum(k.bytes for k in left.values()) <= 2 * old.bytes - 1


def test_cache_info_and_clear(shared, tmp_path, monkeypatch):
    d = tmp_path / "cache"
    shutil.copytree(shared.cache, d)
    prof = tmp_path / "profile.json"
    shutil.copy(PROFILE, prof)
    for name in cachefiles.RUN_FEEDBACK:
        (d / name).unlink(missing_ok=True)
    (d / observed.FILE).write_text("{}")
    (d / f".deferred_{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid()}))  # a running job
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))
    monkeypatch.setenv("LAFUSE_PROFILE", str(prof))

    def cache(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = cli.main(["cache", *args])
        return rc, out.getvalue(), err.getvalue()

    rc, out, _ = cache("info")
    size = sum(k.bytes for k in cachefiles.kernels(d).values())
    assert rc == 0
    assert f"plan cache: {d}\n" in out and "safety check: passed" in out and f"key file: {shared.key}" in out
    assert f"kernels: 1, {cachefiles._human(size)} (size bound 256.0 MB" in out
    assert "last used: oldest " in out and f"background jobs pending: 1 (pids {os.getpid()})" in out
    asts = len(list(d.glob("ast_*.pickle")))  # the parsed scripts of the runs that filled the cache
    codes = len(list(d.glob("code_*.marshal")))  # and their loops' plans' generated code
    assert asts >= 1 and f"parsed scripts: {asts}, " in out and f"compiled plan code: {codes}, " in out
    rc, out, _ = cache("clear")
    removed = sorted([f"{asts} parsed scripts"] + ([f"{codes} compiled plan codes"] if codes else []))
    assert rc == 0 and out == f"removed 1 kernels from {d} and {', '.join(removed)}\n"
    assert not list(d.glob("k_*")) and not list((d / "__pycache__").glob("k_*")) and not list(d.glob("ast_*"))
    assert not list(d.glob("code_*"))
    assert prof.exists() and (d / observed.FILE).exists()  # kept without --all
    assert (d / f".deferred_{os.getpid()}.json").exists()  # the running job's marker too
    assert "kernels: 0, 0 B" in cache("info")[1]
    (d / decisions.FILE).write_text("{}")  # an earlier run's cost-based decisions
    rc, out, _ = cache("clear", "--all")
    removed = ", ".join(sorted([observed.FILE, decisions.FILE, prof.name]))
    assert rc == 0 and out == f"removed 0 kernels from {d} and {removed}\n"
    assert not prof.exists() and not (d / observed.FILE).exists() and not (d / decisions.FILE).exists()
    if os.geteuid() == 0:  # another user's directory is not cleared
        os.chown(d, 65534, 65534)
        rc, out, err = cache("clear")
        assert rc == 1 and out == "" and err == f"lafuse: cache not cleared: {d} is owned by uid 65534, " \
                                                "not by this user: not clearing it\n"


# ------------------------------------------------------------------------------ background jobs

def test_no_background_switch_starts_no_background_job(shared, tmp_path, monkeypatch):
    asked: list[tuple[dict, object]] = []
    monkeypatch.setattr(deferred, "spawn", lambda plans, calibrate=None: asked.append((plans, calibrate)))
    monkeypatch.setenv("LAFUSE_PROFILE", str(tmp_path / "absent.json"))  # uncalibrated: asks to calibrate
    monkeypatch.setenv("LAFUSE_AUTO_CALIBRATE", "1")
    monkeypatch.setenv("LAFUSE_CODEGEN_DEFER", "1")
    off = tmp_path / "off.json"
    off.write_text(json.dumps({"background": False}))
    for args, env in ((("--no-background",), "1"), ((), "0"), (("--config", str(off)), "1"), ((), "1")):
        monkeypatch.setenv("LAFUSE_BACKGROUND", env)
        monkeypatch.setitem(fusion.DEFERRED, "k", "a deferred plan")
        rc, out, err = run("--fusion", "cost", *args)
        assert_correct(shared, rc, out)
        assert not fusion.DEFERRED  # handed on or dropped, never left for a later run
    # only the last run (no switch) asked for its job
    assert asked == [({"k": "a deferred plan"}, tmp_path / "absent.json")]
    help_text = io.StringIO()
    with redirect_stdout(help_text), pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    assert e.value.code == 0
    assert "--no-background" in help_text.getvalue() and "LAFUSE_BACKGROUND=0" in help_text.getvalue()


def test_the_job_goes_over_stdin_and_only_a_json_marker_is_written(shared, tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))
    started: list[SimpleNamespace] = []

    class Pipe(io.BytesIO):
        def close(self):  # keep the bytes readable
            pass

    class Proc:
        pid = 4242

        def __init__(self, argv, **kw):
            self.stdin = Pipe()
            self.argv, self.kw = argv, kw
            started.append(self)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess, "Popen", Proc)
    assert deferred.spawn({}, None) is None  # nothing to do: no process
    deferred.spawn({"k": "plan"}, tmp_path / "p.json")
    [p] = started
    assert p.argv[1:] == ["-m", "lafuse.background", "--job"] and p.kw["stdin"] == subprocess.PIPE
    assert pickle.loads(p.stdin.getvalue()) == {"plans": ["plan"], "calibrate": str(tmp_path / "p.json"),
                                                "cache_max_bytes": 256 << 20}
    marker = d / ".deferred_4242.json"
    assert json.loads(marker.read_text())["pid"] == 4242 and not marker.stat().st_mode & stat.S_IXUSR
    assert sorted(q.name for q in d.iterdir() if q.is_file()) == [marker.name]  # no pickle on disk
    assert background.main([str(marker)]) == 2  # the old pickle-file argument is gone


def test_a_failing_deferred_spawn_removes_its_marker(shared, tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))

    class Broken:
        pid = 4243

        def __init__(self, argv, **kw):
            self.stdin = self

        def write(self, data):
            raise BrokenPipeError("the process died")

        def kill(self):
            self.killed = True

    monkeypatch.setattr(subprocess, "Popen", Broken)
    with pytest.raises(BrokenPipeError):
        deferred.spawn({"k": "plan"})
    assert not list(d.glob(".deferred_*"))


def test_no_background_job_for_a_private_cache(shared, tmp_path, monkeypatch):
    # a run that could not use its cache directory compiles into one removed at exit: nothing to defer to
    d = tmp_path / "open"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(d))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("a background process was started"))
    with redirect_stderr(io.StringIO()) as err:
        assert deferred.spawn({"k": "plan"}) is None
    assert f"plan cache {d} not used" in err.getvalue()


def test_a_key_file_other_users_can_read_is_not_used(shared, tmp_path, monkeypatch):
    key = tmp_path / "cache.key"
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o644)
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(key))
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(tmp_path / "cache"))
    with redirect_stderr(io.StringIO()) as err:
        d = cachedir.usable()
    assert cachedir.is_private(d)
    assert f"the key file {key} is not usable: readable or writable by other users (mode 0644" in err.getvalue()
    assert sys.modules["lafuse.cachedir"].key() != key.read_bytes()


class _Plant:
    """A pickle whose loading writes a marker file: what a planted cache file would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


def test_the_parser_tables_are_cached_signed_in_the_cache_directory(tmp_path, monkeypatch):
    """lark's own cache is a pickle at a predictable name in /tmp; lafuse keeps the tables in the checked
    cache directory, signed, and rebuilds them when the file is not this user's."""
    from lafuse.lang import grammar as parser

    cache = tmp_path / "cache"
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(cache))
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(tmp_path / "key" / "cache.key"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cachedir.forget()
    parser._lark.cache_clear()
    try:
        script = parser.parse_text("x = 1 + 2 * 3\nprint(x)\n", "a.dml")
        files = list(cache.glob("grammar_*.lark"))
        assert len(files) == 1 and not list((tmp_path / "tmp").iterdir())  # nothing in the temp directory
        parser._lark.cache_clear()
        assert str(parser.parse_text("x = 1 + 2 * 3\nprint(x)\n", "a.dml").statements) == str(script.statements)
        marker = tmp_path / "marker"
        payload = pickle.dumps(_Plant(marker))
        for planted in (b"\0" * 32 + payload, payload, b""):  # a wrong tag, no tag, empty
            files[0].write_bytes(planted)
            parser._lark.cache_clear()
            assert str(parser.parse_text("x = 1 + 2 * 3\nprint(x)\n", "a.dml").statements) == str(script.statements)
            assert not marker.exists()
            assert files[0].read_bytes() != planted  # rebuilt and signed again
    finally:
        parser._lark.cache_clear()
        cachedir.forget()


def test_parsed_scripts_are_cached_signed_and_a_cached_run_skips_lark(tmp_path, monkeypatch):
    """The AST cache (lafuse.lang.parser): a second run of a script loads its signed AST and never
    imports lark; a planted or re-tagged pickle is not loaded (its payload never runs) and the script
    is parsed again with the same result; another text or path is another entry."""
    import subprocess
    import sys

    from lafuse.lang import parser

    cache = tmp_path / "cache"
    env = {**os.environ, "LAFUSE_CODEGEN_CACHE": str(cache), "LAFUSE_CACHE_KEY": str(tmp_path / "k" / "cache.key"),
           "LAFUSE_BACKGROUND": "0"}
    script = tmp_path / "s.dml"
    script.write_text("x = 1 + 2 * 3\nprint(x)\n")
    probe = ("import sys\nfrom lafuse import cli\ncli.main(['run', sys.argv[1]])\n"
             "print('lark' in sys.modules)\n")
    outs = [subprocess.run([sys.executable, "-c", probe, str(script)], env=env, capture_output=True, text=True)
            for _ in range(2)]
    assert [o.stdout for o in outs] == ["7\nTrue\n", "7\nFalse\n"], [o.stderr for o in outs]
    files = list(cache.glob("ast_*.pickle"))
    assert len(files) == 1
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(cache))
    monkeypatch.setenv("LAFUSE_CACHE_KEY", str(tmp_path / "k" / "cache.key"))
    cachedir.forget()
    try:
        want = str(parser.parse(script.read_text(), str(script)).statements)
        marker = tmp_path / "marker"
        payload = pickle.dumps(_Plant(marker))
        for planted in (b"\0" * 32 + payload, payload, b"", cachedir.tag("other", payload) + payload):
            files[0].write_bytes(planted)
            assert str(parser.parse(script.read_text(), str(script)).statements) == want
            assert not marker.exists()
            assert files[0].read_bytes() != planted  # parsed and stored again, signed
        assert str(parser.parse("x = 2\nprint(x)\n", str(script)).statements) != want
        assert str(parser.parse(script.read_text(), "other.dml").statements) == want.replace(str(script), "other.dml")
        assert len(list(cache.glob("ast_*.pickle"))) == 3
    finally:
        cachedir.forget()


def test_cache_warm_compiles_every_template_in_a_throwaway_cache(tmp_path, monkeypatch):
    """``lafuse cache warm`` (make install): kernels of the warm-up scripts are compiled (which
    compiles the primitives they call into Numba's cache) in a temporary plan cache, never in the
    user's; two scripts here, dense and CSR: a cell and a row operator in each mode."""
    from lafuse import warm

    user = tmp_path / "cache"
    monkeypatch.setenv("LAFUSE_CODEGEN_CACHE", str(user))
    monkeypatch.setattr(warm, "SCRIPTS", (("r = sum(X * Y * Z)", "r"), ("R = t(X) %*% (X %*% V)", "R")))
    codegen.clear_memory_cache()
    before = codegen.cache_stats()["compiled"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["cache", "warm"]) == 0
    assert codegen.cache_stats()["compiled"] - before == 4, out.getvalue()
    assert out.getvalue().startswith("compiled 4 kernels in ")
    assert os.environ["LAFUSE_CODEGEN_CACHE"] == str(user)
    assert not user.exists() or not any(user.glob("*.py"))
