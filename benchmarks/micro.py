"""Micro-benchmarks of paper 000 Figure 8 and paper 001 Tables 1-2: their data and workloads.

* ``cell3`` / ``cell3-sparse``  ``sum(X*Y*Z)``, dense, and sparse (0.1)            (cell template)
* ``magg`` / ``magg-sparse``    ``sum(X*Y)`` and ``sum(X*Z)`` together               (multi-aggregate)
* ``mmchain``                   ``t(X) %*% (X %*% v)``, X dense                        (row template)
* ``mmchain-V2``                ``t(X) %*% (X %*% V)``, V of 2 columns
* ``mmchain-sparse``            ``t(X) %*% (X %*% v)``, X sparse (0.05)
* ``outer-log``                 ``sum(X * log(U %*% t(V) + 1e-15))``, X sparse 1e-3  (outer-product)
* ``wdivmm-<sparsity>``         ``(X / (U %*% t(V) + 1e-15)) %*% V`` at X sparsity 1e-4, 1e-3, 1e-2
                                (paper 001 Table 1: 10K x 10K, rank 100)
"""

from __future__ import annotations

import os
import time
from typing import Any

import fusion_kernels as fk
import numpy as np
import scipy.sparse as sp
from harness import DataSet, Workload, csr

EPS = 1e-15
OUTER_SPARSITY = (1e-4, 1e-3, 1e-2)

# data set -> (full size, quick size); sizes are (rows, cols) or, for "outer-*", (n, rank)
DATASETS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "dense3": ((20000, 1000), (4000, 1000)),
    "sparse3": ((20000, 1000), (4000, 1000)),
    "mmchain": ((100000, 1000), (10000, 1000)),
    "mmchain-sparse": ((200000, 1000), (40000, 1000)),
    **{f"outer-{s:.0e}": ((10000, 100), (5000, 100)) for s in OUTER_SPARSITY},
}


def generate(name: str, quick: bool) -> DataSet:
    full, small = DATASETS[name]
    rows, cols = small if quick else full
    rng = np.random.default_rng(sorted(DATASETS).index(name) + 11)
    t0 = time.perf_counter()
    if name == "dense3":
        arrays = {k: rng.random((rows, cols)) for k in "XYZ"}
    elif name == "sparse3":
        arrays = {k: csr(sp.random_array((rows, cols), density=0.1, format="csr", rng=rng)) for k in "XYZ"}
    elif name == "mmchain":
        arrays = {"X": rng.random((rows, cols)), "v": rng.random((cols, 1)), "V": rng.random((cols, 2))}
    elif name == "mmchain-sparse":
        arrays = {"X": csr(sp.random_array((rows, cols), density=0.05, format="csr", rng=rng)),
                  "v": rng.random((cols, 1))}
    else:
        n, k = rows, cols
        arrays = {"X": csr(sp.random_array((n, n), density=float(name[6:]), format="csr", rng=rng)),
                  "U": rng.random((n, k)), "V": rng.random((n, k))}
    return DataSet(name, arrays, gen_time=time.perf_counter() - t0)


def _chunks() -> int:
    return max(2, 4 * (os.cpu_count() or 1))


def _nb_csr3(kernel: Any) -> Any:
    def run(a: dict) -> Any:
        X, Y, Z = a["X"], a["Y"], a["Z"]
        return kernel(X.shape[0], *fk.csr_parts(X), *fk.csr_parts(Y), *fk.csr_parts(Z))
    return run


def _nb_mmchain(a: dict) -> np.ndarray:
    return fk.mmchain(a["X"], np.ascontiguousarray(a["v"][:, 0]), _chunks())


def _nb_mmchain_sparse(a: dict) -> np.ndarray:
    X = a["X"]
    return fk.mmchain_csr(X.shape[0], X.shape[1], *fk.csr_parts(X), np.ascontiguousarray(a["v"][:, 0]), _chunks())


def _nb_outer_log(a: dict) -> float:
    X = a["X"]
    return fk.outer_log_sum(X.shape[0], *fk.csr_parts(X), a["U"], a["V"], EPS)


def _nb_outer_div(a: dict) -> np.ndarray:
    X = a["X"]
    return fk.outer_div_mm(X.shape[0], *fk.csr_parts(X), a["U"], a["V"], EPS)


def _np_outer_log(a: dict) -> float:
    U, V, X = a["U"], a["V"], a["X"]
    return float(X.multiply(np.log(U @ V.T + EPS)).sum())


def _np_outer_div(a: dict) -> Any:
    U, V, X = a["U"], a["V"], a["X"]
    return (X / (U @ V.T + EPS)) @ V


def _jax_dense(expr: Any) -> Any:
    def build(jax: Any, a: dict) -> Any:
        f = jax.jit(expr)
        args = [jax.device_put(a[k]) for k in sorted(a)]
        return lambda: jax.block_until_ready(f(*args))
    return build


def jax_coo(jax: Any, X: sp.csr_array) -> tuple[Any, Any, Any]:
    """(rows, cols, values) of a sparse matrix on the device: JAX's way to a sparse product is a gather over
    the non-zeros and a segment sum (jax.experimental.sparse is not used)."""
    coo = X.tocoo()
    return (jax.device_put(coo.row.astype(np.int32)), jax.device_put(coo.col.astype(np.int32)),
            jax.device_put(coo.data))


def _jax_outer(div: bool) -> Any:
    def build(jax: Any, a: dict) -> Any:
        jnp = jax.numpy
        n = a["X"].shape[0]
        rows, cols, vals = jax_coo(jax, a["X"])
        U, V = jax.device_put(a["U"]), jax.device_put(a["V"])

        def f_log(rows: Any, cols: Any, vals: Any, U: Any, V: Any) -> Any:
            return jnp.sum(vals * jnp.log(jnp.sum(U[rows] * V[cols], axis=1) + EPS))

        def f_div(rows: Any, cols: Any, vals: Any, U: Any, V: Any) -> Any:
            w = vals / (jnp.sum(U[rows] * V[cols], axis=1) + EPS)
            return jax.ops.segment_sum(w[:, None] * V[cols], rows, num_segments=n)

        f = jax.jit(f_div if div else f_log)
        return lambda: jax.block_until_ready(f(rows, cols, vals, U, V))
    return build


def _jax_mmchain_sparse(jax: Any, a: dict) -> Any:
    n, m = a["X"].shape
    rows, cols, vals = jax_coo(jax, a["X"])
    v = jax.device_put(a["v"][:, 0])

    def f(rows: Any, cols: Any, vals: Any, v: Any) -> Any:
        q = jax.ops.segment_sum(vals * v[cols], rows, num_segments=n)
        return jax.ops.segment_sum(vals * q[rows], cols, num_segments=m)[:, None]

    g = jax.jit(f)
    return lambda: jax.block_until_ready(g(rows, cols, vals, v))


SPARSE_JAX = "n/a (sparse): jax.numpy has no sparse matrices, and an element-wise product of sparse matrices " \
             "has no gather/segment-sum form"
SPARSE_NUMEXPR = "n/a (sparse): numexpr evaluates dense arrays only"
OUTER_NUMPY = "dense U@V.T"


def _outer_bytes(a: dict) -> int:
    """X in CSR, and the rows of U and V its non-zeros touch (at 1e-4, a third of them)."""
    X, k = a["X"], a["U"].shape[1]
    rows, cols = int(np.count_nonzero(np.diff(X.indptr))), int(np.unique(X.indices).size)
    return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) + 8 * int(k) * (rows + cols)


def _wdivmm(s: float) -> Workload:
    return Workload(f"wdivmm-{s:.0e}", f"(X / (U %*% t(V) + 1e-15)) %*% V, X sparse {s:g}", f"outer-{s:.0e}",
                    ["X", "U", "V"], "R = (X / (U %*% t(V) + 1e-15)) %*% V", "matrix", numpy=_np_outer_div,
                    numba=_nb_outer_div, jax=_jax_outer(True), jax_note="gather over nnz(X)",
                    numpy_note=OUTER_NUMPY, numexpr_note=SPARSE_NUMEXPR, needed_bytes=_outer_bytes,
                    out_shape=lambda ds: (ds.arrays["X"].shape[0], ds.arrays["V"].shape[1]))


WORKLOADS = [
    Workload("cell3", "sum(X*Y*Z), dense", "dense3", ["X", "Y", "Z"], "r = sum(X * Y * Z)", "scalar",
             numpy=lambda a: (a["X"] * a["Y"] * a["Z"]).sum(),
             numba=lambda a: fk.cell3_dense(a["X"], a["Y"], a["Z"]),
             numexpr=lambda ne, a: ne.evaluate("sum(X*Y*Z)", local_dict=a),
             jax=_jax_dense(lambda X, Y, Z: (X * Y * Z).sum())),
    Workload("cell3-sparse", "sum(X*Y*Z), sparse 0.1", "sparse3", ["X", "Y", "Z"], "r = sum(X * Y * Z)",
             "scalar", numpy=lambda a: a["X"].multiply(a["Y"]).multiply(a["Z"]).sum(),
             numba=_nb_csr3(fk.cell3_csr), jax_note=SPARSE_JAX, numexpr_note=SPARSE_NUMEXPR),
    Workload("magg", "sum(X*Y), sum(X*Z)", "dense3", ["X", "Y", "Z"], "r1 = sum(X * Y)\nr2 = sum(X * Z)",
             "scalars", n_out=2, numpy=lambda a: ((a["X"] * a["Y"]).sum(), (a["X"] * a["Z"]).sum()),
             numba=lambda a: fk.magg2_dense(a["X"], a["Y"], a["Z"]),
             numexpr=lambda ne, a: (ne.evaluate("sum(X*Y)", local_dict=a), ne.evaluate("sum(X*Z)", local_dict=a)),
             jax=_jax_dense(lambda X, Y, Z: ((X * Y).sum(), (X * Z).sum()))),
    Workload("magg-sparse", "sum(X*Y), sum(X*Z), sparse 0.1", "sparse3", ["X", "Y", "Z"],
             "r1 = sum(X * Y)\nr2 = sum(X * Z)", "scalars", n_out=2,
             numpy=lambda a: (a["X"].multiply(a["Y"]).sum(), a["X"].multiply(a["Z"]).sum()),
             numba=_nb_csr3(fk.magg2_csr), jax_note=SPARSE_JAX, numexpr_note=SPARSE_NUMEXPR),
    Workload("mmchain", "t(X) %*% (X %*% v)", "mmchain", ["X", "v"], "R = t(X) %*% (X %*% v)", "matrix",
             numpy=lambda a: a["X"].T @ (a["X"] @ a["v"]), numba=_nb_mmchain,
             jax=_jax_dense(lambda X, v: X.T @ (X @ v)), out_shape=lambda ds: (ds.arrays["X"].shape[1], 1)),
    Workload("mmchain-V2", "t(X) %*% (X %*% V), V 2 columns", "mmchain", ["X", "V"], "R = t(X) %*% (X %*% V)",
             "matrix", numpy=lambda a: a["X"].T @ (a["X"] @ a["V"]),
             numba=lambda a: fk.mmchain_mat(a["X"], a["V"], _chunks()),
             jax=_jax_dense(lambda V, X: X.T @ (X @ V)), out_shape=lambda ds: (ds.arrays["X"].shape[1], 2)),
    Workload("mmchain-sparse", "t(X) %*% (X %*% v), X sparse 0.05", "mmchain-sparse", ["X", "v"],
             "R = t(X) %*% (X %*% v)", "matrix", numpy=lambda a: a["X"].T @ (a["X"] @ a["v"]),
             numba=_nb_mmchain_sparse, jax=_jax_mmchain_sparse, jax_note="gather over nnz(X)",
             numexpr_note=SPARSE_NUMEXPR, out_shape=lambda ds: (ds.arrays["X"].shape[1], 1)),
    Workload("outer-log", "sum(X * log(U %*% t(V) + 1e-15)), X sparse 1e-3", "outer-1e-03", ["X", "U", "V"],
             "r = sum(X * log(U %*% t(V) + 1e-15))", "scalar", numpy=_np_outer_log, numba=_nb_outer_log,
             jax=_jax_outer(False), jax_note="gather over nnz(X)", numpy_note=OUTER_NUMPY,
             numexpr_note=SPARSE_NUMEXPR, needed_bytes=_outer_bytes),
    *[_wdivmm(s) for s in OUTER_SPARSITY],
]
