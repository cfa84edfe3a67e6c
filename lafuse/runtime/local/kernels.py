"""The local kernel table: ``KERNELS[name](*args)`` for every builtin and operator the interpreter
runs without special handling.

Calling convention (shared with lafuse.runtime.local.backend.bind_args): arguments arrive in the
positional order of ``SPECS[name].params`` with absent optional arguments already filled with
their declared default (``None`` means the kernel decides); varargs builtins receive all
positional arguments. Operators use their DML spelling (``"+"``, ``"%*%"``, ``"u-"``, ``"!"``),
indexing uses ``"rix"``, ``"lix"`` and ``"lrix"``. Kernels never mutate their inputs.

The implementations live in the kernels_* modules; this module only assembles the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lafuse.lang.builtins import REQUIRED, SPECS
from lafuse.runtime.local import kernels_agg as agg
from lafuse.runtime.local import kernels_datagen as datagen
from lafuse.runtime.local import kernels_dist as dist
from lafuse.runtime.local import kernels_elementwise as ew
from lafuse.runtime.local import kernels_linalg as la
from lafuse.runtime.local import kernels_reorg as reorg
from lafuse.runtime.local.kernels_common import to_dml_string

KERNELS: dict[str, Callable[..., Any]] = {}

# operators
for _op in ("+", "-", "*", "/", "^", "%%", "%/%", "<", "<=", ">", ">=", "==", "!=", "&", "|"):
    KERNELS[_op] = ew.make_binary(_op)
KERNELS["&&"] = KERNELS["&"]
KERNELS["||"] = KERNELS["|"]
KERNELS["%*%"] = la.k_matmult
KERNELS["mmchain"] = la.k_mmchain  # t(X) %*% (w * (X %*% v)), a physical operator (hops.patterns.mmchains)
KERNELS["wsloss"] = la.k_wsloss  # sum((X - U %*% V)^2), a physical operator (hops.patterns.squared_losses)
KERNELS["sampledsum"] = la.k_sampled_sum  # sum(X * g(U %*% V)) at X's non-zeros (hops.patterns.sampled_sums)
KERNELS["u-"] = ew.make_unary("u-")
KERNELS["!"] = ew.make_unary("!")

# unary math
for _op in ("exp", "sqrt", "abs", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
            "ceil", "floor", "round", "sign", "isNaN", "isNA", "isInf"):
    KERNELS[_op] = ew.make_unary(_op)
KERNELS["log"] = ew.k_log

# probability distributions
KERNELS["cdf"] = dist.k_cdf
KERNELS["icdf"] = dist.k_icdf
for _short in dist.R_STYLE:
    for _pre in ("p", "q"):
        KERNELS[_pre + _short] = dist.make_r_style(_pre, _short)

# aggregates
KERNELS.update({
    "sum": agg.k_sum, "mean": agg.k_mean, "prod": agg.k_prod, "var": agg.k_var, "sd": agg.k_sd,
    "trace": agg.k_trace, "median": agg.k_median, "quantile": agg.k_quantile,
    "min": agg.k_min, "max": agg.k_max, "aggregate": agg.k_aggregate, "table": agg.k_table,
})
KERNELS.update(agg.ROWCOL)

# metadata, reorganization, indexing, casts
KERNELS.update({
    "nrow": reorg.k_nrow, "ncol": reorg.k_ncol, "length": reorg.k_length,
    "t": reorg.k_t, "rev": reorg.k_rev, "diag": reorg.k_diag,
    "cbind": reorg.k_cbind, "rbind": reorg.k_rbind, "append": reorg.k_append,
    "order": reorg.k_order, "removeEmpty": reorg.k_remove_empty, "replace": reorg.k_replace,
    "contains": reorg.k_contains, "lower.tri": reorg.k_lower_tri, "upper.tri": reorg.k_upper_tri,
    "rix": reorg.k_rix, "lix": reorg.k_lix, "lrix": reorg.k_lrix,
    "as.scalar": reorg.k_as_scalar, "castAsScalar": reorg.k_as_scalar, "as.matrix": reorg.k_as_matrix,
    "as.double": reorg.k_as_double, "as.integer": reorg.k_as_integer, "as.logical": reorg.k_as_logical,
})

# element-wise ternary/binary builtins
KERNELS.update({
    "ifelse": ew.k_ifelse, "xor": ew.k_xor, "bitwAnd": ew.k_bitwand, "outer": ew.k_outer,
})

# linear algebra
KERNELS.update({
    "solve": la.k_solve, "inv": la.k_inv, "cholesky": la.k_cholesky, "det": la.k_det,
    "eigen": la.k_eigen, "svd": la.k_svd, "qr": la.k_qr, "lu": la.k_lu,
})

# data generation
KERNELS.update({
    "matrix": datagen.k_matrix, "rand": datagen.k_rand, "Rand": datagen.k_rand,
    "seq": datagen.k_seq, "sample": datagen.k_sample,
})

__all__ = ["KERNELS", "to_dml_string"]


def bind_args(op: str, slots: tuple[str, ...] | None, kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``kernel`` so it receives arguments in the catalogue's positional order with defaults."""
    spec = SPECS.get(op)
    if spec is None or slots is None or spec.varargs or op == "list":
        return kernel
    pnames = spec.param_names
    if tuple(slots) == pnames:
        return kernel
    where = {s: i for i, s in enumerate(slots)}
    plan: list[tuple[bool, Any]] = []
    for p, d in spec.params:
        if p in where:
            plan.append((True, where[p]))
        else:
            plan.append((False, None if d is REQUIRED else d))

    def call(*args: Any) -> Any:
        return kernel(*[args[v] if is_arg else v for is_arg, v in plan])

    return call
