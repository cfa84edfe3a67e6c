"""The fusion optimizer, structurally: which fused operators a DAG gets and which basic operators
remain (like SystemDS's heavy-hitter checks), per plan selector; the memo table and the
enumeration statistics. Numerical agreement of fused and unfused runs is in test_fused_exec.py.
"""

from __future__ import annotations

import pytest

from lafuse import config as cfgmod
from lafuse import fusion
from lafuse.compiler import Compiler
from lafuse.fusion import optimizer
from lafuse.fusion.memo import explore
from lafuse.fusion.select import Context, CostBased, interesting_points, partitions
from lafuse.hops import cplan as C
from lafuse.hops.program import GenericBlock, iter_blocks

SELECTORS = ("fuse-all", "fuse-no-redundancy", "cost")

# sizes where fusion clearly pays off (the DAGs are only compiled, never run)
BIG = """
X = rand(rows=100000, cols=1000, seed=1)
Y = rand(rows=100000, cols=1000, seed=2)
Z = rand(rows=100000, cols=1000, seed=3)
v = rand(rows=1000, cols=1, seed=4)
S = rand(rows=20000, cols=20000, sparsity=0.001, seed=5)
U = rand(rows=20000, cols=100, seed=6)
V = rand(rows=20000, cols=100, seed=7)
"""

HINTS = {"S": 20000 * 20000 * 0.001}  # what the runtime tells the optimizer when it lowers the block


def fused(text: str, strategy: str = "cost", stats: fusion.FusionStats | None = None, preamble: str = BIG,
          **cfg_kw):
    """(spoof HOPs, basic HOP labels) of ``text`` after fusion, as a loop body (as in an iterative
    algorithm: one cold kernel compile then pays off for the cost-based selector). The sum-product
    rule is off unless ``sum_product=True``: the templates see the expression as written."""
    cfg = cfgmod.Config(codegen=True, fusion=strategy, **{"sum_product": False, **cfg_kw})
    with cfgmod.using(cfg):
        body = loop_body(text, preamble, cfg)
        dag, _ = fusion.optimize(body.dag, cfg, stats, weight=body.weight, hints=HINTS)
    hops = dag.hops()
    return [h for h in hops if h.kind == "spoof"], [f"{h.label()} [{h.dt}]" for h in hops if h.kind != "spoof"]


def loop_body(text: str, preamble: str, cfg: cfgmod.Config) -> GenericBlock:
    """The block of ``text`` inside a 20-iteration for loop after ``preamble``, compiled with ``cfg``."""
    with cfgmod.using(cfg):
        prog = Compiler(cfg).compile_text(preamble + "for (i in 1:20) {\n" + text + "\n}", "<test>")
    return [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)][-1]


def basic_ops(labels: list[str], *ops: str) -> list[str]:
    """Matrix operators among the remaining basic HOPs (scalar arithmetic is not fusable)."""
    return [lb for lb in labels if any(lb.split(' [')[0].endswith(f"({o})") for o in ops) and "[matrix]" in lb]


@pytest.mark.parametrize("strategy", SELECTORS)
def test_sum_of_products_is_one_cell_operator(strategy):
    spoofs, labels = fused("s = sum(X * Y * Z)\nprint(s)", strategy)
    assert [s.op for s in spoofs] == ["spoofCell"]
    plan = spoofs[0].params["cplan"]
    assert (plan.template, plan.agg, plan.agg_op) == ("cell", C.FULL_AGG, "sum")
    assert not basic_ops(labels, "*", "sum")


@pytest.mark.parametrize("strategy", SELECTORS)
def test_two_aggregates_sharing_x_become_one_multi_aggregate(strategy):
    spoofs, labels = fused("a = sum(X * Y)\nb = sum(X * Z)\nprint(a + b)", strategy)
    assert [s.op for s in spoofs] == ["spoofMA"]
    plan = spoofs[0].params["cplan"]
    assert plan.template == "magg" and len(plan.roots) == 2 and plan.agg_ops == ("sum", "sum")
    # X is read once: it is one input of the one operator
    assert len(spoofs[0].inputs) == 3
    assert not basic_ops(labels, "*", "sum")


@pytest.mark.parametrize("strategy", SELECTORS)
def test_mmchain_is_one_row_operator(strategy):
    """(The cost-based policy weighs it against the unfused chain's one-scan mmchain instruction, see
    the next test; without that instruction it fuses.)"""
    spoofs, labels = fused("w = t(X) %*% (X %*% v)\nprint(sum(w))", strategy, mmchain=False)
    assert [s.op for s in spoofs] == ["spoofRA"]
    plan = spoofs[0].params["cplan"]
    assert plan.template == "row" and plan.agg in (C.COL_AGG, C.COL_AGG_T)
    assert not basic_ops(labels, "%*%")


def test_cost_based_leaves_an_mmchain_to_its_one_scan_instruction():
    """The fused row operator and the unfused mmchain instruction both scan X once (measured in make
    bench-full: 43.5 and 41.7 ms over a 1e5 x 1000 X), so a kernel compile buys nothing: the cost-based
    policy keeps the products, which lowering makes one mmchain instruction."""
    cfg = cfgmod.Config(codegen=True, fusion="cost")
    spoofs, labels = fused("w = t(X) %*% (X %*% v)\nprint(sum(w))", "cost")
    assert not spoofs and len(basic_ops(labels, "%*%")) == 2
    with cfgmod.using(cfg):
        body = loop_body("w = t(X) %*% (X %*% v)\nprint(sum(w))", BIG, cfg)
        plan = Compiler(cfg).lower_dag(body.dag, body.weight)
    assert [i.opcode for i in plan.instructions if i.opcode in ("mmchain", "%*%", "spoofRA")] == ["mmchain"]


@pytest.mark.parametrize("strategy", SELECTORS)
def test_sparse_outer_product_is_sparsity_exploiting(strategy):
    spoofs, labels = fused("s = sum(S * log(U %*% t(V) + 1e-15))\nprint(s)", strategy)
    assert [s.op for s in spoofs] == ["spoofOP"]
    plan = spoofs[0].params["cplan"]
    assert plan.template == "outer" and plan.agg == C.FULL_AGG and plan.sparse_safe
    assert not basic_ops(labels, "%*%", "log", "*", "sum")


@pytest.mark.parametrize("strategy", SELECTORS)
def test_wdivmm_is_an_outer_right_mm(strategy):
    spoofs, labels = fused("W = (S / (U %*% t(V) + 1e-15)) %*% V\nprint(sum(W))", strategy)
    ops = [s for s in spoofs if s.op == "spoofOP"]
    assert len(ops) == 1 and ops[0].params["cplan"].agg == C.RIGHT_MM
    assert not basic_ops(labels, "%*%", "/")
    # with the sum-product rule, sum(W) never forms W: sum(Q %*% V) = sum(Q * t(rowSums(V))) (or
    # sum(colSums(Q) * t(rowSums(V)))), which fused operators aggregate
    spoofs, labels = fused("W = (S / (U %*% t(V) + 1e-15)) %*% V\nprint(sum(W))", strategy, sum_product=True)
    assert all(s.params["cplan"].agg != C.RIGHT_MM for s in spoofs)
    assert not basic_ops(labels, "%*%", "/")


def test_outer_needs_a_sparsity_exploiting_multiply():
    # U %*% t(V) + 1 alone is dense: no Outer operator (a Cell one may still fuse the +)
    spoofs, _ = fused("s = sum(U %*% t(V) + 1)\nprint(s)", "fuse-all")
    assert all(s.params["cplan"].template != "outer" for s in spoofs)


def test_fuse_no_redundancy_materializes_shared_intermediates():
    text = "A = X * Y + Z\nb = sum(A)\nc = rowSums(A)\nprint(b + sum(c))"
    spoofs_all, labels_all = fused(text, "fuse-all")
    spoofs_nr, labels_nr = fused(text, "fuse-no-redundancy")
    # fuse-all recomputes A inside both consumers; fuse-no-redundancy computes it once
    assert not basic_ops(labels_all, "*", "+")
    assert len(spoofs_nr) >= 1
    assert all("in0[main]" in repr(s.params["cplan"].root) or s.params["cplan"].template == "magg"
               for s in spoofs_nr)
    covered_nr = [set(s.params["covers"]) for s in spoofs_nr]
    assert all(len(a & b) == 0 for i, a in enumerate(covered_nr) for b in covered_nr[i + 1:])


def test_tiny_inputs_stay_unfused_by_cost():
    cfg = cfgmod.Config(codegen=True, fusion="cost")
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text("X = rand(rows=10, cols=10, seed=1)\nY = rand(rows=10, cols=10, seed=2)\n"
                                 "print(sum(X * Y * X))", "<t>")
        b = [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)][-1]
        st = fusion.FusionStats()
        dag, _ = fusion.optimize(b.dag, cfg, st)
    assert not [h for h in dag.hops() if h.kind == "spoof"]
    # either the partition is skipped unenumerated (it cannot pay for loading even a cached kernel)
    # or its best plan is dissolved because compiling it would not pay off
    assert st.select.pruned_cost >= 1 or st.unfused_by_compile_cost >= 1
    # the heuristics fuse regardless of size
    with cfgmod.using(cfg.with_(fusion="fuse-all")):
        dag2, _ = fusion.optimize(b.dag, cfgmod.get())
    assert [h.op for h in dag2.hops() if h.kind == "spoof"] == ["spoofCell"]


def test_plans_are_deterministic():
    text = "A = X * Y\ns = sum(A * Z) + sum(A)\nw = t(X) %*% (X %*% v)\nprint(s + sum(w))"
    runs = []
    for _ in range(3):
        spoofs, labels = fused(text, "cost")
        runs.append(([s.params["cplan"].canonical_key() for s in spoofs], labels))
    assert runs[0] == runs[1] == runs[2]


def test_memo_table_references_and_closing():
    cfg = cfgmod.Config(codegen=True)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(BIG + "s = sum(S * log(U %*% t(V) + 1e-15))\nprint(s)", "<t>")
    b = [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)][-1]
    memo = explore(b.dag.roots)
    byop = {memo.hops[h].op: es for h, es in memo.groups.items()}
    # the outer product opens Outer; log, + and * extend it; sum closes it (closed, valid)
    assert any(e.template == "outer" and not e.closed for e in byop["%*%"])
    assert any(e.template == "outer" and e.closed and e.nrefs == 1 for e in byop["sum"])
    # closed entries without references are pruned (a lone aggregate is no fusion)
    assert all(e.nrefs > 0 for es in memo.groups.values() for e in es if e.closed)


@pytest.mark.parametrize("f,pruned", [("abs", True), ("exp", False)])
def test_mpskipenum_skips_plans_and_matches_exhaustive_search(f, pruned):
    # several shared intermediates: interesting points with materialization choices. Memory-bound
    # (abs), fusing everything is near the best plan, so cost bounds skip plans; compute-bound (exp,
    # recomputed per consumer unless C is materialized), the static bound (every operation once)
    # stays below the best plan's recomputations and the cost skips none (structure still may)
    text = (f"A = X * Y\nB = A + Z\nC = {f}(B)\n"
            "s1 = sum(A * C)\ns2 = sum(B / C)\nr = rowSums(C * A)\nc = colSums(B * C)\n"
            "print(s1 + s2 + sum(r) + sum(c))")
    cfg = cfgmod.Config(codegen=True)
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(BIG + text, "<t>")
    b = [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)][-1]
    from lafuse.cost.profile import HardwareProfile
    from lafuse.fusion.construct import build_plan
    from lafuse.fusion.select import plan_cost

    memo = explore(b.dag.roots)
    order = b.dag.hops()
    prof = HardwareProfile()
    ctx = Context(memo, b.dag.roots, order, prof, hints=HINTS)
    cuts = CostBased().select(ctx)
    assert ctx.stats.points >= 3
    assert (ctx.stats.pruned_cost > 0) == pruned, ctx.stats
    # exhaustive search over every partition's points finds no cheaper plan
    best = sum(plan_cost(build_plan(memo, b.dag.roots, order, cuts), p, prof) for p in partitions(memo))
    import itertools

    for part in partitions(memo):
        pts = interesting_points(memo, part)
        for bits in itertools.product([0, 1], repeat=len(pts)):
            alt = (cuts - set(pts)) | {p for p, x in zip(pts, bits) if x}
            total = sum(plan_cost(build_plan(memo, b.dag.roots, order, frozenset(alt)), q, prof)
                        for q in partitions(memo))
            assert total >= best - 1e-12


def test_stats_count_fused_operators():
    st = fusion.FusionStats()
    fused("s = sum(X * Y * Z)\nprint(s)", "cost", st)
    assert st.dags == 1 and st.fused_ops == 1 and st.memo_entries >= 2


def test_function_bodies_weigh_as_often_as_their_call_sites():
    """A helper called in a loop runs once per iteration: its blocks (and the loops in them) carry
    the call site's weight, so a kernel in it is amortized over those calls (alsCG's CG half-step)."""
    text = """
    half = function(Matrix[Double] A) return (Matrix[Double] B) {
      B = A * 2
      for (j in 1:3) { B = B + A }
    }
    main = function(Matrix[Double] X) return (Matrix[Double] Y) {
      Y = X
      for (i in 1:5) { Y = half(Y) }
    }
    Z = main(rand(rows=10, cols=10))
    print(sum(Z))
    """
    comp = Compiler(cfgmod.Config(codegen=False))
    prog = comp.compile_text(text, "<w>")
    weights = {key: sorted({b.weight for b in iter_blocks(fp.blocks) if isinstance(b, GenericBlock)})
               for key, fp in prog.functions.items()}
    main_key = next(k for k in weights if k.endswith("main"))
    half_key = next(k for k in weights if k.endswith("half"))
    # for loops with constant bounds weigh their iteration count: 5 calls, 3 iterations in each
    assert weights[main_key] == [1.0, 5.0]
    assert weights[half_key] == [5.0, 15.0]


def test_fused_cost_counts_every_operation_of_the_cplan():
    # regression: every CNode's operation is priced (once only the last node of a row plan was, and
    # cell plans had no compute at all), so a longer chain of exp costs more than a short one
    from lafuse.cost.fused import fused_cost
    from lafuse.cost.profile import load

    prof = load()  # the fixed profile (conftest)

    def cost(text: str) -> float:
        spoofs, _ = fused(text, "fuse-all")
        assert len(spoofs) == 1, text
        h = spoofs[0]
        return fused_cost(h.params["cplan"], h.inputs, h if h.dt == "matrix" else None, prof)

    one = cost("s = sum(exp(X))\nprint(s)")
    three = cost("s = sum(exp(exp(exp(X))))\nprint(s)")
    assert three > 2.5 * one  # compute-bound: 3 x 1e8 exp against one read of 800 MB
    # a row plan's vector operations over X's rows, on top of the same matrix-vector products
    row1 = cost("r = t(X) %*% (X %*% v)\nprint(sum(r))")
    row3 = cost("r = t(X) %*% ((abs(X) * 2 + X) %*% v)\nprint(sum(r))")
    assert row3 > 1.2 * row1


def test_fused_cost_prices_the_lookups_of_csr_side_inputs():
    """A cell kernel that iterates every cell searches each CSR side input's row for every cell's
    column: colSums(D - S) with S sparse costs more than with S dense, although it reads less
    (without FUSED_CSR_SEEK_TIME the model fused multiLogReg's colSums(P - Yind) into a loss)."""
    from lafuse.cost.fused import fused_cost
    from lafuse.cost.profile import load

    pre = BIG + "D = rand(rows=20000, cols=20000, seed=8)\nE = rand(rows=20000, cols=20000, seed=9)\n"
    costs = []
    for side in ("S", "E"):
        spoofs, _ = fused(f"r = colSums(D - {side})\nprint(as.scalar(r[1, 7]))", "fuse-all", preamble=pre)
        assert len(spoofs) == 1 and spoofs[0].params["cplan"].template == "cell"
        h = spoofs[0]
        costs.append(fused_cost(h.params["cplan"], h.inputs, h, load(), HINTS))
    assert costs[0] > 2 * costs[1]


def _operators(node: C.CNode, seen: set[int]) -> int:
    if id(node) in seen or node.op in ("input", "literal"):
        return 0
    seen.add(id(node))
    return 1 + sum(_operators(c, seen) for c in node.children)


@pytest.mark.parametrize("strategy", ["fuse-all", "cost"])
def test_a_long_cellwise_chain_is_cut_into_fused_operators_of_bounded_length(strategy):
    """Numba's compile time grows faster than linearly with a kernel's length, so no fused operator
    covers more than MAX_FUSED_OPS operators: a chain of 300 operators becomes several fused ones, and
    no unfused cell-wise operator is left between them."""
    from lafuse.fusion.memo import MAX_FUSED_OPS

    n = 150
    assert 2 * n > 4 * MAX_FUSED_OPS  # the chain needs several operators
    text = "".join(f"X{i + 1} = X{i} * 0.5 + 1\n" for i in range(n)) + f"s = sum(X{n})\nprint(s)"
    spoofs, labels = fused(text, strategy, preamble=BIG + "X0 = X\n")
    sizes = [_operators(r, set()) for s in spoofs for r in s.params["cplan"].all_roots()]
    assert len(spoofs) >= -(-2 * n // MAX_FUSED_OPS)
    assert max(sizes) <= MAX_FUSED_OPS and sum(sizes) >= 2 * n
    assert not basic_ops(labels, "*", "+", "sum")


SMALL_ONCE = [
    "X = rand(rows=10, cols=10, seed=1)\nprint(sum(X %*% t(X)))",
    "X = rand(rows=50, cols=40, seed=1)\nY = rand(rows=50, cols=40, seed=2)\n"
    "print(sum(exp(X * Y + 1) / (1 + X)) + sum(rowSums(X * Y)))",
    "X = rand(rows=300, cols=50, seed=1)\nv = rand(rows=50, cols=1, seed=2)\nprint(sum(t(X) %*% (X %*% v)))",
    "X = rand(rows=2000, cols=2, seed=1)\nprint(sum((X - 1) ^ 2) + max(abs(X)))",
]


@pytest.mark.parametrize("text", SMALL_ONCE)
def test_small_blocks_run_once_skip_the_optimizer_only_where_it_would_not_fuse(text):
    """compiler.fusion_cannot_pay skips the cost-based optimizer for small blocks run once; on each such
    block the optimizer itself, asked anyway, fuses nothing (the skip changes no decision)."""
    from lafuse.compiler import fusion_cannot_pay

    cfg = cfgmod.Config(codegen=True, fusion="cost")
    with cfgmod.using(cfg):
        comp = Compiler(cfg)
        prog = comp.compile_text(text, "<test>")
        blocks = [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)]
        skipped = [b for b in blocks if fusion_cannot_pay(b.dag, b.weight, cfg)]
        assert skipped
        for b in skipped:
            dag, _ = fusion.optimize(b.dag, cfg, weight=b.weight)
            assert not [h for h in dag.hops() if h.kind == "spoof"]
        # not skipped: a loop body, the same block under a heuristic policy, unknown sizes, large data
        loop = comp.compile_text("X = rand(rows=10, cols=10, seed=1)\nfor (i in 1:3) {\n  X = X * 2 + 1\n}\n"
                                 "print(sum(X))", "<test>")
        body = [b for b in iter_blocks(loop.blocks) if isinstance(b, GenericBlock) and b.weight > 1]
        assert body and not any(fusion_cannot_pay(b.dag, b.weight, cfg) for b in body)
    for b in skipped:
        assert not fusion_cannot_pay(b.dag, b.weight, cfgmod.Config(codegen=True, fusion="fuse-all"))
    big = Compiler(cfg).compile_text(BIG + "print(sum(X * Y * Z))", "<test>")
    assert not any(fusion_cannot_pay(b.dag, b.weight, cfg) for b in iter_blocks(big.blocks)
                   if isinstance(b, GenericBlock))


def test_a_small_script_starts_without_the_optimizer(tmp_path):
    """What the skip is for: a small script never imports lafuse.fusion (its result is unchanged)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "s.dml"
    script.write_text(SMALL_ONCE[0] + "\n")
    probe = ("import sys\nfrom lafuse import cli\ncli.main(['run', sys.argv[1]])\n"
             "print('lafuse.fusion' in sys.modules)\n")
    env = {**os.environ, "LAFUSE_BACKGROUND": "0", "LAFUSE_CODEGEN_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", probe, str(script)], env=env, capture_output=True, text=True)
    plain = subprocess.run([sys.executable, "-m", "lafuse", "run", str(script), "--no-codegen"], env=env,
                           capture_output=True, text=True)
    assert out.stdout.splitlines() == [plain.stdout.strip(), "False"], out.stderr


AE_BODY = """Xb = X[((bi - 1) * 256 + 1):min(n, bi * 256), ]
A1 = 1 / (1 + exp(-(Xb %*% W1 + b1)))
A2 = 1 / (1 + exp(-(A1 %*% W2 + b2)))
D3 = (A2 %*% W3 + b3 - Xb) / nrow(Xb)
D2 = (D3 %*% t(W3)) * A2 * (1 - A2)
W3 = W3 - 0.1 * (t(A2) %*% D3)
b2 = b2 - 0.1 * colSums(D2)
W2 = W2 - 0.1 * (t(A1) %*% D2)
print(sum(W3) + sum(W2) + sum(b2))"""
AE_PRE = """X = rand(rows=20000, cols=100, seed=1)
n = nrow(X)
bi = 3
W1 = rand(rows=100, cols=50, seed=2)
W2 = rand(rows=50, cols=10, seed=3)
W3 = rand(rows=10, cols=100, seed=4)
b1 = matrix(0, rows=1, cols=50)
b2 = matrix(0, rows=1, cols=10)
b3 = matrix(0, rows=1, cols=100)
"""
KMEANS_BODY = ("D = -2 * (X %*% t(C)) + t(rowSums(C ^ 2))\nP = D <= rowMins(D)\nP = P / rowSums(P)\n"
               "C = (t(P) %*% X) / t(colSums(P))\nprint(sum(C))")
KMEANS_PRE = "X = rand(rows=100000, cols=50, seed=1)\nC = rand(rows=10, cols=50, seed=2)\n"


@pytest.mark.parametrize("text,pre,parts", [(AE_BODY, AE_PRE, 3), (KMEANS_BODY, KMEANS_PRE, 2),
                                            ("A = X * Y\nB = A + Z\nC = exp(B)\ns1 = sum(A * C)\n"
                                             "r = rowSums(C * A)\nprint(s1 + sum(r))", BIG, 1)])
def test_a_partitions_plan_built_alone_is_its_part_of_the_whole_plan(text, pre, parts):
    # the cost-based enumeration builds only the partition it prices (construct.build_plan's part):
    # the same fused operators and basic HOPs, and the same cost, as the whole plan has there, under
    # random cuts of the memo's references (KMeans: t(P) %*% X looks through the transpose of P, which
    # only the partition reads); and construct.expand's results remembered under earlier cuts are the
    # ones a fresh expansion finds
    import random

    from lafuse.cost.profile import HardwareProfile
    from lafuse.fusion.construct import build_plan
    from lafuse.fusion.select import _refs, plan_cost

    cfg = cfgmod.Config(codegen=True)
    b = loop_body(text, pre, cfg)
    memo = explore(b.dag.roots)
    order = b.dag.hops()
    prof = HardwareProfile()
    refs = sorted(_refs(memo))
    n_parts = parts
    parts = partitions(memo)
    assert len(parts) >= n_parts and refs
    rng = random.Random(5)
    for trial in range(40):
        cuts = frozenset(r for r in refs if rng.random() < (trial % 5) / 5)
        kept = dict(memo.expanded)
        memo.expanded.clear()  # the whole plan expanded afresh; the partitions' from what earlier cuts left
        whole = build_plan(memo, b.dag.roots, order, cuts)
        memo.expanded.update(kept)
        for part in parts:
            alone = build_plan(memo, b.dag.roots, order, cuts, part=part)
            assert {(op.template, op.root.id, frozenset(op.entries)) for op in alone.fused} == \
                {(op.template, op.root.id, frozenset(op.entries)) for op in whole.fused if op.root.id in part}
            assert {h.id for h in alone.basic} == {h.id for h in whole.basic if h.id in part}
            assert plan_cost(alone, part, prof, hints=HINTS) == pytest.approx(plan_cost(whole, part, prof, hints=HINTS))


def test_first_touch_of_intermediates_keeps_a_partition_in_the_enumeration():
    # sum(X ^ 2) run once over X 1e5 x 50: per run, fusing saves less than a kernel load, but the
    # unfused X ^ 2 touches a 40 MB intermediate for the first time (KMeans' final block: 0.17 s
    # measured); the selector's prune (CostBased._cannot_pay) counts that bound, so the partition is
    # enumerated and left to the decision that weighs first touch against compilation
    from lafuse.cost.profile import HardwareProfile

    cfg = cfgmod.Config(codegen=True)
    with cfgmod.using(cfg):
        prog = Compiler(cfg).compile_text("X = rand(rows=100000, cols=50, seed=1)\nprint(sum(X ^ 2))", "<t>")
    b = [b for b in iter_blocks(prog.blocks) if isinstance(b, GenericBlock)][-1]
    # rates of the machine KMeans was measured on (lafuse calibrate), where X ^ 2 costs 0.007 s a run
    prof = HardwareProfile(mem_read_bw=1.6e10, mem_write_bw=1.9e10, cache_bw=4.1e10, elementwise_rate=2.0e9,
                           matrix_op_overhead=6.2e-6, instruction_overhead=8.4e-7, first_touch_bw=4.2e8)
    pruned = {}
    for name, peak in (("without", lambda *a: 0.0), ("with", optimizer.intermediate_peak)):
        memo = explore(b.dag.roots)
        ctx = Context(memo, b.dag.roots, b.dag.hops(), prof, peak=peak)
        cuts = CostBased().select(ctx)
        pruned[name] = (ctx.stats.pruned_cost, len(cuts))
    assert pruned["without"][0] > 0 and pruned["without"][1] > 0  # cut without enumerating
    assert pruned["with"] == (0, 0)  # enumerated: the fused plan is the selector's choice
