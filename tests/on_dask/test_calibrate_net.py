"""``lafuse calibrate``'s worker-to-worker transfer rate (the cuboid cost's network bandwidth,
lafuse.cost.cuboid), measured on the suite's shared LocalCluster, and the profile field it fills."""

from __future__ import annotations

import math

import pytest

from lafuse.calibrate import worker_transfer
from lafuse.cost import cuboid as cb
from lafuse.cost.constants import TASK_MEMORY_FRACTION, WORKER_BASELINE_BYTES
from lafuse.cost.profile import HardwareProfile


def test_a_block_between_two_workers_gives_a_positive_rate(dask_scheduler):
    from distributed import Client

    with Client(dask_scheduler) as c:
        rate = worker_transfer(c, runs=1, mib=8)
        assert math.isfinite(rate) and rate > 1e6  # loopback: far above 1 MB/s


def test_the_profile_rate_is_the_cuboid_clusters_bandwidth():
    prof = HardwareProfile(net_bw=2.5e8, blas_flops=4e10, threads=2)
    cl = cb.cluster_of(prof, workers=2, worker_bytes=384 * 2**20)
    assert (cl.nodes, cl.tasks_per_node, cl.net_bw, cl.compute_bw) == (2, 1, 2.5e8, 2e10)
    assert cl.task_memory == TASK_MEMORY_FRACTION * (384 * 2**20 - WORKER_BASELINE_BYTES)
    # the data the cluster holds meanwhile, spread over the workers, leaves less (a quarter at least)
    held = cb.cluster_of(prof, workers=2, worker_bytes=384 * 2**20, resident=100 * 2**20)
    assert held.task_memory == TASK_MEMORY_FRACTION * (384 * 2**20 - WORKER_BASELINE_BYTES - 50 * 2**20)
    full = cb.cluster_of(prof, workers=2, worker_bytes=384 * 2**20, resident=640 * 2**20)
    assert full.task_memory == TASK_MEMORY_FRACTION * 96 * 2**20
    with pytest.raises(ValueError, match="net_bw"):
        HardwareProfile.from_dict({"net_bw": 0})
