"""Running a multi-product fused operator's nodes (hops.mmplan) on pieces of its values: the local
kernel of each node (runtime.local.kernels, the one the unfused plan calls) on the region of its
arguments that its own region takes. The distributed operator's tasks (runtime.dask.fused_mm.run_task)
call this on their pieces; the local backend calls it with every value whole.

A value comes with the region it holds (block ranges). An argument held over a larger region than a
node takes is sliced to it, so one piece may serve two readers. An aggregate of the main product's
values takes the piece it is given: its partial result is the task's, and the operator adds them.
"""

from __future__ import annotations

from typing import Any

from lafuse.hops import mmplan as M
from lafuse.runtime.local.kernels import KERNELS, bind_args
from lafuse.runtime.local.kernels_common import is_mat

Held = tuple[Any, "M.Region | None"]  # a value and the region it holds (None: a scalar)


def take(value: Any, have: M.Region | None, want: M.Region, bs: int) -> Any:
    """``value`` (holding region ``have``) cut to region ``want``."""
    if have is None or have == want or not is_mat(value):
        return value
    r0, c0 = (want[0] - have[0]) * bs, (want[2] - have[2]) * bs
    r1 = min((want[1] - have[0]) * bs, value.shape[0])
    c1 = min((want[3] - have[2]) * bs, value.shape[1])
    return value[r0:r1, c0:c1]


def evaluate(plan: M.MMPlan, bs: int, members: frozenset[int] | set[int], regions: dict[int, M.Region],
             env: dict[int, Held], target: int) -> Any:
    """The value of ``target`` (held, cut to its region), computing the ``members`` that ``regions``
    names at their regions from ``env`` (inputs and given nodes, by reference). A value is dropped
    after its last reader: a task's pieces are large, and the worker's memory is shared."""
    pieced = plan.dependents | {plan.main}
    todo = [k for k in sorted(members) if k not in env and k in regions]
    uses: dict[int, int] = {target: 1}
    for k in todo:
        for a in plan.nodes[k].args:
            uses[a] = uses.get(a, 0) + 1
    for k in todo:
        n, reg = plan.nodes[k], regions[k]
        args = []
        for pos, a in enumerate(n.args):
            v, have = env[a]
            if not (n.op in M.AGGREGATES and a in pieced):  # (an aggregate of the main product's piece)
                v = take(v, have, M.arg_region(plan, k, pos, reg, bs), bs)
            args.append(v)
            uses[a] -= 1
            if not uses[a]:
                del env[a]
        env[k] = (bind_args(n.op, n.slots, KERNELS[n.op])(*args), reg if n.dt == M.MATRIX else None)
        del args
    value, have = env[target]
    return take(value, have, regions[target], bs)


def whole(plan: M.MMPlan, bs: int, inputs: tuple[Any, ...]) -> Any:
    """The operator's result from its inputs whole (the local backend; the tests' unpieced run)."""
    env: dict[int, Held] = {-1 - p: (v, M.whole(d, bs) if d[2] == M.MATRIX else None)
                            for p, (v, d) in enumerate(zip(inputs, plan.inputs))}
    out = plan.nodes[plan.out]
    regions = M.need(plan, {plan.out: M.whole((out.rows, out.cols, out.dt), bs)}, set(range(len(plan.nodes))), bs)
    return evaluate(plan, bs, set(range(len(plan.nodes))), regions, env, plan.out)
