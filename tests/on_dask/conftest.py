"""One LocalCluster for every distributed test (two worker processes, one thread each, loopback,
no dashboard), closed at the end of the session with no worker process left behind. A test that
needs more workers scales it up and back (``dask_cluster``)."""

from __future__ import annotations

import logging
import multiprocessing

import pytest


@pytest.fixture(scope="session")
def dask_cluster():
    from distributed import LocalCluster

    from lafuse.runtime.dask import cluster as lafuse_cluster

    before = {p.pid for p in multiprocessing.active_children()}
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                     dashboard_address=None, memory_limit="1GiB", silence_logs=logging.ERROR)
    try:
        yield c
    finally:
        lafuse_cluster.close()
        c.close()
        left = {p.pid for p in multiprocessing.active_children() if p.is_alive()} - before
        assert not left, f"worker processes left behind: {left}"


@pytest.fixture(scope="session")
def dask_scheduler(dask_cluster):
    return dask_cluster.scheduler_address
