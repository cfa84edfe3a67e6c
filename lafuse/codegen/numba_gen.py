"""CPlan -> Python source of a Numba kernel, one skeleton per template (paper 000 sec. 2).

The generated source depends only on the plan's canonical form (inputs by canonical slot,
literals as the ``lits`` argument), so every plan with the same canonical hash shares it.

Every template's kernel takes ``mode`` (which formats its inputs come in: dense, CSR, ...) and
branches on it; :func:`specialize` pins one mode, so Numba compiles one branch (cache.ByMode).
"""

from __future__ import annotations

from lafuse.codegen.gen_cell import generate_cell
from lafuse.codegen.gen_outer import generate_outer
from lafuse.codegen.gen_row import generate_row
from lafuse.hops.cplan import CPlan


def generate(plan: CPlan, key: str | None = None) -> str:
    key = key or plan.canonical_key()[0]
    if plan.template in ("cell", "magg"):
        return generate_cell(plan, key)
    if plan.template == "outer":
        return generate_outer(plan, key)
    if plan.template == "row":
        return generate_row(plan, key)
    raise ValueError(f"unknown template {plan.template!r}")


_SIGNATURE = "def kernel(b0, b1, mode, "


def specialize(source: str, mode: int) -> str:
    """``source`` with ``mode`` pinned to a constant: Numba prunes the branches of the other modes
    before typing them (its dead-branch pruning follows a variable assigned once from a constant),
    so a kernel compiles only the code its inputs' formats run. Measured on the cell kernel of
    ``sum(X * Y * Z + i)``: 2.0 s cold with its two modes, 1.0 s pinned to the dense one."""
    if source.count(_SIGNATURE) != 1:
        raise ValueError("generated kernel source without its (b0, b1, mode, ...) signature")
    head, rest = source.split(_SIGNATURE)
    sig, body = rest.split("\n", 1)
    return f"{head}def kernel(b0, b1, mode_, {sig}\n    mode = {int(mode)}  # pinned (numba_gen.specialize)\n{body}"


# the modes each template's runner passes (runner.run_cell, runner_row.run_row, runner_outer.run_outer):
# 0 dense; cell 1 CSR inputs read by flag, 2 a CSR main's non-zeros, 3 their intersection; row 1 a CSR
# main densified per row, 2 its non-zeros, 3/5/6 a dense main's block body (its small products by BLAS,
# by loops, decided per product: gen_row_block.BLOCK_MODES), 4 its mmchain loop (mode 0: its per-row
# body); outer 1 a CSR main
MODES = {"cell": (0, 1, 2, 3), "magg": (0, 1, 2, 3), "row": (0, 1, 2, 3, 4, 5, 6), "outer": (0, 1)}
