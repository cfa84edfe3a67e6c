"""Session fixtures: generated inputs and SystemDS's results for the collected codegen cases, computed
two JVMs at a time as soon as the first case asks for one."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from .. import sds
from . import harness
from .cases import CASES, Case

JVM_WORKERS = 2
BY_ID = {harness.case_id(c): c for c in CASES}


def reference_key(case: Case) -> tuple:
    """Cases that differ only in lafuse-side settings (the rewrite flag) share one SystemDS run."""
    return case.script, case.args, case.inputs, case.config


class References:
    def __init__(self, cases: list[Case], inputs_dir: Path, workdir: Path):
        self._cases, self._inputs_dir, self._workdir = cases, inputs_dir, workdir
        self._lock = threading.Lock()
        self._futures: dict[tuple, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def _submit(self, case: Case) -> None:
        key = reference_key(case)
        if key not in self._futures:
            assert self._pool is not None
            inputs = harness.write_inputs(case, self._inputs_dir)
            work = self._workdir / f"{case.script}-{len(self._futures)}"
            self._futures[key] = self._pool.submit(harness.run_reference, case, inputs, work)

    def get(self, case: Case) -> sds.SdsResult:
        with self._lock:
            if self._pool is None:
                sds.java_executable()  # fail early and clearly when java or systemds is missing
                sds.systemds_home()
                self._pool = ThreadPoolExecutor(max_workers=JVM_WORKERS, thread_name_prefix="systemds")
                for c in self._cases:
                    self._submit(c)
            self._submit(case)
            fut = self._futures[reference_key(case)]
        return fut.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def codegen_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("codegen_inputs")


@pytest.fixture(scope="session")
def codegen_reference(request: pytest.FixtureRequest, codegen_inputs: Path,
                      tmp_path_factory: pytest.TempPathFactory):
    collected = []
    for item in request.session.items:
        cs = getattr(item, "callspec", None)
        if (cs is not None and cs.params.get("case_id") in BY_ID
                and getattr(item, "originalname", "") == "test_codegen_case"):
            collected.append(BY_ID[cs.params["case_id"]])
    refs = References(collected, codegen_inputs, tmp_path_factory.mktemp("codegen_systemds"))
    yield refs
    refs.close()
