"""Session fixtures: generated inputs and SystemDS reference results computed in parallel."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from . import corpus, sds

# The machine has 2 cores; each JVM is mostly single-threaded for these tiny scripts.
JVM_WORKERS = 2


class ReferenceResults:
    """SystemDS results for the corpus, computed on first use for every collected script at once."""

    def __init__(self, names: list[str], inputs_dir: Path, workdir: Path, scripts_dir: Path = corpus.SCRIPTS_DIR):
        self._names = names
        self._scripts_dir = scripts_dir
        self._inputs_dir = inputs_dir
        self._workdir = workdir
        self._lock = threading.Lock()
        self._futures: dict[str, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def _submit(self, pool: ThreadPoolExecutor, name: str) -> None:
        sc = corpus.load_script(self._scripts_dir / name)
        self._futures[name] = pool.submit(corpus.run_reference, sc, self._inputs_dir, self._workdir / sc.stem)

    def get(self, name: str) -> sds.SdsResult:
        with self._lock:
            if self._pool is None:
                # fail early and clearly when java or the systemds package is missing
                sds.java_executable()
                sds.systemds_home()
                self._pool = ThreadPoolExecutor(max_workers=JVM_WORKERS, thread_name_prefix="systemds")
                for n in self._names:
                    self._submit(self._pool, n)
            if name not in self._futures:
                self._submit(self._pool, name)
            fut = self._futures[name]
        return fut.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _collected_scripts(session: pytest.Session, param: str = "script_name") -> list[str]:
    names: list[str] = []
    for item in session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and param in cs.params and cs.params[param] not in names:
            names.append(cs.params[param])
    return names


@pytest.fixture(scope="session")
def inputs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return corpus.generate_inputs(tmp_path_factory.mktemp("conformance_inputs"))


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest, inputs_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    refs = ReferenceResults(_collected_scripts(request.session), inputs_dir,
                            tmp_path_factory.mktemp("systemds_runs"))
    yield refs
    refs.close()


@pytest.fixture(scope="session")
def algo_reference(request: pytest.FixtureRequest, inputs_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """SystemDS's results for the algorithm drivers (``algorithms/*.dml``)."""
    refs = ReferenceResults(_collected_scripts(request.session, "algo_name"), inputs_dir,
                            tmp_path_factory.mktemp("systemds_algo_runs"), corpus.ALGORITHMS_DIR)
    yield refs
    refs.close()
