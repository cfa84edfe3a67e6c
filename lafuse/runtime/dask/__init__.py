"""The Dask backend: distributed matrices as blocks held by the workers of a Dask cluster, and the
distributed operators of the physical plan's ``dask`` instructions (plan.exectype decides which).

``cluster.py`` connects to an existing scheduler or starts a LocalCluster the first time a distributed
operator runs; ``blocks.py`` holds the distributed matrix and the block functions the workers run (the
local kernels, so a block computes what the local runtime computes); ``backend.py`` binds instructions.
Each instruction submits its tasks right away, on futures: no task graph spans statements or loop
iterations (a graph built across iterations grows without bound on the scheduler).
"""
