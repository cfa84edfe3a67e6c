"""One thread budget (``Config.threads``) for the whole run: kernel pools, parfor, and BLAS.

Why BLAS too: unfused ``%*%`` calls OpenBLAS, which starts its own threads (one per core by
default) whatever lafuse's ``threads`` says; a user who asks for one thread (a batch job beside
others, or bit-reproducible products) must get one. BLAS splits some products differently by
thread count, so their last bits depend on it: measured here on 20000x300 operands, ``X %*% Y``
(300x200) differed in 26% of the cells (at most 6.1e-16 relative) and ``t(X) %*% w`` in 1.3% (6.1e-15)
between one and two BLAS threads, while ``X %*% v`` and ``t(X) %*% X`` were bit-identical.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def blas_limited(threads: int) -> Iterator[None]:
    """Cap BLAS at ``threads`` for the block (threadpoolctl scans the loaded libraries, ~50 ms, so
    only when the budget is below the machine's core count, which BLAS uses by default)."""
    if threads >= (os.cpu_count() or 1):
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield
