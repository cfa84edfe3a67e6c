"""CPlan -> Python source of a Numba kernel, one skeleton per template (paper 000 sec. 2).

The generated source depends only on the plan's canonical form (inputs by canonical slot,
literals as the ``lits`` argument), so every plan with the same canonical hash shares it.
"""

from __future__ import annotations

from lafuse.fusion.cplan import CPlan


def generate(plan: CPlan, key: str | None = None) -> str:
    key = key or plan.canonical_key()[0]
    if plan.template in ("cell", "magg"):
        from lafuse.codegen.gen_cell import generate_cell

        return generate_cell(plan, key)
    if plan.template == "outer":
        from lafuse.codegen.gen_outer import generate_outer

        return generate_outer(plan, key)
    if plan.template == "row":
        from lafuse.codegen.gen_row import generate_row

        return generate_row(plan, key)
    raise ValueError(f"unknown template {plan.template!r}")
