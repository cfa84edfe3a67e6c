"""Precompiling the code generator's primitives (``lafuse cache warm``, run by ``make install``).

Why: the generated kernels call the Numba primitives of :mod:`lafuse.codegen.prims`, which Numba
compiles for each signature a kernel calls them with and caches beside their source, as Python
caches bytecode. A fresh installation compiled them in its first fused script: the first kernel of
each template then took 2-4 s cold instead of 0.7-1.4 s. This runs small scripts that fuse every
template in each input mode (dense and CSR main inputs, the row template's block and per-row bodies,
the outer template's products), so the primitives are compiled once at installation. The kernels
themselves go to a throwaway plan cache: only the shared primitives stay.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

# (script, the variable it computes); each runs twice: over dense inputs and over CSR ones (density 0.05)
SCRIPTS: tuple[tuple[str, str], ...] = (
    ("r = sum(X * Y * Z)", "r"),  # cell, full aggregate
    ("R = X * Y + Z", "R"),  # cell, no aggregate
    ("R = rowSums(X * Y)", "R"),  # cell, row aggregate
    ("R = colSums(X * Y)", "R"),  # cell, column aggregate
    ("a = sum(X * Y)\nb = sum(X * Z)\nr = a + b", "r"),  # multi-aggregate
    ("R = t(X) %*% (X %*% v)", "R"),  # row, mmchain (mode 4 over a dense X)
    ("R = t(X) %*% (X %*% V)", "R"),  # row, block body
    ("R = t(X) %*% (w * (X %*% V))", "R"),  # row, block body with a row vector
    ("R = rowSums(X * (X %*% V2))", "R"),  # row, row aggregate
    ("r = sum(X * log(U %*% t(V3) + 1e-15))", "r"),  # outer, full aggregate
    ("R = (X / (U %*% t(V3) + 1e-15)) %*% V3", "R"),  # outer, right product
    ("R = t(t(U) %*% (X / (U %*% t(V3) + 1e-15)))", "R"),  # outer, left product
)
ROWS, COLS, RANK = 300, 40, 4


def _inputs(sparse: bool) -> dict[str, Any]:
    import numpy as np  # deferred: `lafuse cache warm` only
    import scipy.sparse as sp

    rng = np.random.default_rng(7)

    def main() -> Any:
        if sparse:
            return sp.csr_array(sp.random_array((ROWS, COLS), density=0.05, format="csr", rng=rng) + 0.0)
        return rng.random((ROWS, COLS))

    return {"X": main(), "Y": main(), "Z": main(), "v": rng.random((COLS, 1)), "V": rng.random((COLS, 2)),
            "V2": rng.random((COLS, COLS)), "w": rng.random((ROWS, 1)), "U": rng.random((ROWS, RANK)),
            "V3": rng.random((COLS, RANK))}


def warm() -> tuple[int, float]:
    """(kernels compiled, seconds): every template and mode compiled once in a throwaway plan cache,
    leaving the primitives in Numba's cache."""
    from lafuse import codegen  # deferred: Numba
    from lafuse import config as cfgmod
    from lafuse.compiler import run_dml

    t0 = time.perf_counter()
    compiled = codegen.cache_stats()["compiled"]
    before = os.environ.get("LAFUSE_CODEGEN_CACHE")
    cfg = cfgmod.Config(codegen=True, fusion="fuse-all", codegen_defer=False, fusion_observed=False)
    with tempfile.TemporaryDirectory(prefix="lafuse-warm-") as d:
        os.environ["LAFUSE_CODEGEN_CACHE"] = d
        try:
            for sparse in (False, True):
                vals = _inputs(sparse)
                for text, output in SCRIPTS:
                    run_dml(text, vals, (output,), cfg=cfg)
        finally:
            if before is None:
                os.environ.pop("LAFUSE_CODEGEN_CACHE", None)
            else:
                os.environ["LAFUSE_CODEGEN_CACHE"] = before
    return int(codegen.cache_stats()["compiled"] - compiled), time.perf_counter() - t0
