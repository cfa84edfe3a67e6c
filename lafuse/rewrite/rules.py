"""The one ordered list of rewrite rules, in application order.

Names are what ``Config.disabled_rules`` takes; ``Config.rewrites=False`` turns every rule off.
A round runs the DAG rules on the whole DAG and each run of consecutive local rules in one bottom-up
pass, so a HOP's inputs are already rewritten when the HOP is looked at (``nrow(X)`` is a literal
before ``nrow(X) - 1`` is tried). Rounds repeat until nothing changes. The order below decides which
rule wins when several match one HOP, and what a rule can rely on.

Dependencies:

* ``cse`` first: with duplicates merged, ``single_use`` (no other consumer) is exact; two copies of
  ``t(X)`` would each look single-use and get rewritten twice.
* ``fold_sizes`` and ``fold_constants`` before the algebraic rules: a HOP that folds to a literal needs
  no other rule, and the algebraic rules look for literal 1, 0, 2 and finite λ, which often only
  appear after folding (``X * (3 - 2)``, ``X[1:nrow(X), ]``).
* ``remove_mult_by_one`` / ``remove_add_zero`` before ``fold_scalar_into_datagen``:
  ``matrix(1, n, m) * 1`` becomes the matrix itself, not a new one.
* ``remove_double_transpose`` is a cleanup for the transposes that ``sum_product``,
  ``transpose_matmult_vector`` and ``pushdown_transpose_rowcol_agg`` create (``t(t(Y))`` when Y
  already was a transpose); it fires in the next round.
* ``optimize_mmchain`` after the local rules: it needs the chains as they left them (transposes
  moved), and its new products must not be split again.
* ``sum_product`` last: its plans are costed on the sizes the rules folded and on the DAG they
  left, the shared chains already ordered (a region reading one is costed with it). It leaves a
  product chain alone to ``optimize_mmchain`` and does not plan a region again whose sum-product
  plan and sizes it planned before (a local rule's equivalent form of its output is no new plan).
  It subsumes the hand-written pattern rules of aggregation push-down (``sum(λ * X)``, ``sum(X + Y)``,
  ``sum(rowSums(X))``) and selection push-down (``trace(X %*% Y)``, ``diag(X %*% Y)``).
* Block rules run only in ``rewrite_blocks`` (children first, after the predicate DAGs were rewritten);
  ``remove_empty_blocks`` after the two that can leave empty blocks behind.
"""

from __future__ import annotations

from lafuse.rewrite.algebraic import (
    fold_scalar_into_datagen,
    fold_transpose_into_datagen,
    pow2_to_mult,
    pushdown_transpose_rowcol_agg,
    remove_add_zero,
    remove_double_negation,
    remove_double_transpose,
    remove_mult_by_one,
    remove_transpose_under_agg,
    remove_unnecessary_cast,
    remove_unnecessary_rix,
    remove_unnecessary_rowcol_agg,
    simplify_sum_diag,
    transpose_matmult_vector,
)
from lafuse.rewrite.blocks import remove_constant_branch, remove_empty_blocks, remove_false_while
from lafuse.rewrite.core import Rule
from lafuse.rewrite.cse import eliminate_common_subexpressions
from lafuse.rewrite.folding import fold_constants, fold_sizes
from lafuse.rewrite.mmchain import optimize_mmchain
from lafuse.rewrite.sumproduct.rule import sum_product

RULES: tuple[Rule, ...] = (
    # --- DAG: merge duplicates first (exact consumer counts for the rules below)
    eliminate_common_subexpressions,
    # --- local, bottom-up: folding
    fold_sizes,  # dynamic: nrow/ncol/length of known dims
    fold_constants,  # scalar ops on literals, by the runtime kernels
    # --- local: neutral elements, involutions, casts
    remove_mult_by_one,
    remove_add_zero,
    remove_double_negation,
    remove_double_transpose,
    remove_unnecessary_cast,
    remove_unnecessary_rix,  # dynamic
    remove_unnecessary_rowcol_agg,  # dynamic
    # --- local: algebraic simplification
    remove_transpose_under_agg,
    pushdown_transpose_rowcol_agg,
    pow2_to_mult,
    simplify_sum_diag,  # dynamic (square input)
    transpose_matmult_vector,  # dynamic (cheaper only for known dims)
    fold_scalar_into_datagen,
    fold_transpose_into_datagen,
    # --- DAG: matrix-multiply chains, after the local rules settled
    optimize_mmchain,  # dynamic
    # --- DAG: sum-product plans, costed with fusion, on the DAG the rules above settled
    sum_product,  # dynamic
    # --- blocks (rewrite_blocks only)
    remove_constant_branch,
    remove_false_while,
    remove_empty_blocks,  # after the two above, which may leave empty blocks
)

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
assert len(RULES_BY_NAME) == len(RULES), "rule names must be unique"
