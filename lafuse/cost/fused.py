"""Costs of fusion plans (paper 000 sec. 4.3, Eq. 4): T = T_write + max(T_read, T_compute) per
operator, fused or basic, summed over a plan.

A fused operator reads each distinct input once (side inputs of a sparse-safe operator only at
the main input's non-zeros), computes every covered operation per iterated cell (non-zeros for
sparsity-exploiting operators), writes only its output and pays one dispatch. Basic operators
are priced by the instruction cost model (:func:`lafuse.cost.operators.instruction_cost`), so the
unfused and the fused side of every decision come from the same rates.
"""

from __future__ import annotations

import sys

from lafuse.cost import constants as K
from lafuse.cost.operators import TRANSCENDENTAL, TRIG, instruction_cost, kernel_slowdown, mem_times, meta
from lafuse.cost.profile import HardwareProfile
from lafuse.hops import cplan as C
from lafuse.hops.hop import Hop


def basic_cost(h: Hop, prof: HardwareProfile, hints: dict[str, float] | None = None) -> float:
    if h.kind in ("literal", "data") or h.op in ("tread", "twrite") or h.params.get("read_through"):
        return 0.0  # (a transpose read through by its product: hops.patterns.foldable_transposes)
    try:
        return instruction_cost(h.op, h, prof, hints=hints).compute
    except Exception:  # an operator the instruction model does not know: its dispatch only
        return prof.matrix_op_overhead


def chain_saving(outer: Hop, parts: list[Hop], prof: HardwareProfile,
                 hints: dict[str, float] | None = None) -> float:
    """Seconds the ``mmchain`` instruction saves against pricing its operators one by one: an unfused
    ``t(X) %*% (w * (X %*% v))`` (marked by fusion.optimizer from hops.patterns.mmchains: ``outer`` the
    product, ``parts`` its inner product and ``*``) scans X once. Without it the optimizer priced the
    unfused chain at two scans and fused GLM's CG step into a row kernel: 2.35 s against 2.02 s
    unfused at 1e6 x 100 (make bench-full)."""
    try:
        chain = instruction_cost("mmchain", outer, prof, hints=hints).compute
    except Exception:  # (as basic_cost: an operator the model does not know)
        return 0.0
    return max(0.0, basic_cost(outer, prof, hints) + sum(basic_cost(p, prof, hints) for p in parts) - chain)


def fused_weight(op: str, exponent: float | None = None) -> float:
    """Cost of one cell of ``op`` inside a generated kernel, in simple operations at FUSED_OP_RATE;
    ``x^2`` is a multiplication (measured: as fast as ``x*x``), other powers a libm call."""
    if op in ("tanh", "sinh"):
        return K.FUSED_WEIGHT_HYPERBOLIC
    if op in TRIG:
        return K.FUSED_WEIGHT_TRIG
    if op in TRANSCENDENTAL:
        return K.FUSED_WEIGHT_TRANSCENDENTAL
    if op in ("/", "%%", "%/%"):
        return K.FUSED_WEIGHT_DIVIDE
    if op == "^":
        return K.WEIGHT_SIMPLE if exponent == 2.0 else K.FUSED_WEIGHT_POW
    if op == "sqrt":
        return K.FUSED_WEIGHT_SQRT
    return K.WEIGHT_SIMPLE


def _exponent(n: C.CNode) -> float | None:
    e = n.children[1] if n.op == "^" and len(n.children) == 2 else None
    return float(e.arg) if e is not None and e.op == "literal" else None  # type: ignore[arg-type]


def fused_cost(plan: C.CPlan, inputs: list[Hop], out: Hop | None, prof: HardwareProfile,
               hints: dict[str, float] | None = None) -> float:
    """Seconds one execution of the fused operator is expected to take (without compilation)."""
    metas = [meta(h, hints) for h in inputs]
    nodes = C.postorder(plan)
    main_pos = next((int(n.arg) for n in nodes if n.op == "input" and n.access == C.MAIN), 0)  # type: ignore[call-overload]
    main = metas[main_pos]
    density = min(1.0, main.nz / main.cells) if main.matrix and main.cells > 0 else 1.0
    row_len = _row_lengths(nodes, metas, main.cols) if plan.template == "row" else {}
    sparse_nodes = _row_sparse_nodes(plan, nodes, row_len) if plan.template == "row" and main.sparse else None
    exploit = plan.template == "outer" or (plan.sparse_safe and main.sparse and
                                          (plan.template != "row" or sparse_nodes is not None))
    scale = density if exploit else 1.0
    read = 0.0
    for pos, m in enumerate(metas):
        if not m.matrix:
            continue
        if pos == main_pos:
            read += m.bytes
        elif m.cells >= main.cells * 0.5:  # cell-aligned side input: touched where the main is
            read += m.bytes * (scale if not m.sparse else 1.0)
        else:
            read += m.bytes
    cells = main.cells * scale
    op_cells = 0.0  # cells computed, each weighted by its operation's price
    row_cells = 0.0  # cells of a row plan's vector nodes, unweighted (each one stored and loaded)
    dots = 1 if plan.agg == C.COL_AGG_B1_T else 0  # BLAS products over the main (block bodies)
    flops = 0.0
    vecops = 0 if plan.agg in (C.NO_AGG, C.FULL_AGG, C.COL_AGG) else 1  # the per-row outer product
    # in a row plan over a CSR main, only the nodes that keep the main row's sparsity are computed at its
    # non-zeros; the others (e.g. the row of U %*% t(V) in W * (U %*% t(V))) have their full length
    # in every row. Before, the whole plan was priced at the non-zeros: ALS-CG's t(W * (U %*% t(V)) - X)
    # %*% U over a 1% dense W was estimated to save 0.04 s a run and took seconds a call
    at_nz = sparse_nodes if sparse_nodes is not None else set()
    row_flops = 0.0  # vecmat products of per-row vectors, at BLAS-like speed
    for n in nodes:
        if n.op == "input" and n.access in (C.MAIN, C.CELL):
            vecops += 1  # a row kernel takes a row view of each MAIN/CELL input per row
        if n.op in ("input", "literal"):
            continue
        vecops += 1
        if n.op == "uv":
            flops += 2.0 * metas[int(n.children[0].arg)].cols  # type: ignore[call-overload]
        elif n.op == "vecmat":
            b = metas[int(n.children[1].arg)]  # type: ignore[call-overload]
            row_flops += main.rows * (scale if id(n.children[0]) in at_nz else 1.0) * 2.0 * b.rows * b.cols
            dots += 1
        elif plan.template == "row":  # over the node's vector per row; a per-row scalar is its vecop
            # (in a transposed block body a loop over the rows like any other node)
            length = row_len.get(id(n), 0.0)
            length = max(length, 1.0) if plan.narrow else length
            op_cells += main.rows * (scale if id(n) in at_nz else 1.0) * length * fused_weight(n.op, _exponent(n))
            row_cells += main.rows * length
        else:
            op_cells += cells * fused_weight(n.op, _exponent(n))
    # the transposed block body runs only while the inputs it reads cell by cell have at most
    # NARROW_ROW_COLS columns (a run-time condition, runner_row.dense_mode); wider, a narrow plan runs
    # its per-row body (KMeans' D <= rowMins(D) over X 1e6 x 50 priced as the block body: 0.05 s a
    # call estimated, 0.31 s measured)
    transposed = plan.template == "row" and plan.narrow and not main.sparse and \
        all(metas[i].cols <= C.NARROW_ROW_COLS for i in C.cell_read_inputs(plan) if i < len(metas))
    if transposed:
        # the transposed block body (codegen.gen_row_block): each BLAS product passes over the main's
        # block, and each node is a loop over the block's rows that stores its values and loads its
        # operands' at about the rate of an unfused element-wise operation on cached data. Measured
        # on multiLogReg's products over X 1e6 x 10 and n x 2 nodes (2 threads): colSums of T (1
        # product, 5 nodes) 8.7 ms, model 9.5; t(X) %*% T (2 products) 12.1 ms, model 13.0; T * 2
        # written out (1 product, 6 nodes) 10.3 ms, model 12.2
        compute = dots * mem_times(prof, main.bytes, 0.0)[0] + op_cells / fused_op_rate(prof) + \
            row_cells / prof.elementwise_rate
    elif plan.template == "row":
        # vector operations run over the row's cells, matrix-vector work per row. A dense main runs the
        # block body (BLAS per block) unless a CELL input is CSR: the row-major block reads CELL inputs
        # in place, so with a CSR one the per-row body runs, which looks each cell of it up
        # (csr_seek) and accumulates t(P) %*% Q as one outer product per row in a scalar loop
        csr_cells = len([n for n in nodes if n.op == "input" and n.access == C.CELL
                         and metas[int(n.arg)].sparse])  # type: ignore[call-overload]
        block = not main.sparse and csr_cells == 0 and not plan.narrow  # (a kernel has one block form)
        per_row = K.FUSED_ROW_BLOCK_VECOP_TIME if block else K.FUSED_ROW_VECOP_TIME
        # vecmat per block through BLAS, per row in the primitives' scalar loops (an operation per FLOP)
        mm_rate = prof.blas_flops / 4.0 if block else fused_op_rate(prof)
        compute = op_cells / fused_op_rate(prof) + row_flops / mm_rate + \
            main.rows * vecops * per_row * kernel_slowdown(prof)
        if plan.agg == C.COL_AGG_B1_T and plan.root2 is not None:
            outer = 2.0 * main.rows * scale * max(row_len.get(id(plan.root), 1.0), 1.0) * \
                max(row_len.get(id(plan.root2), 1.0), 1.0)
            compute += outer / mm_rate
        if not main.sparse and csr_cells:
            compute += main.cells * csr_cells * K.FUSED_CSR_SEEK_TIME * kernel_slowdown(prof)
    else:
        if plan.mm >= 0:
            flops += 2.0 * metas[plan.mm].cols
        compute = op_cells / fused_op_rate(prof) + cells * flops / (prof.blas_flops / 4.0)
        if plan.template != "outer" and not exploit:  # every cell looks up each CSR input
            csr = {int(n.arg) for n in nodes if n.op == "input" and n.access in (C.MAIN, C.CELL)  # type: ignore[call-overload]
                   and metas[int(n.arg)].sparse}  # type: ignore[call-overload]
            compute += cells * len(csr) * K.FUSED_CSR_SEEK_TIME * kernel_slowdown(prof)
    if exploit and main.sparse:
        compute += main.nz / prof.sparse_rate
    write = meta(out, hints).bytes if out is not None and out.dt == "matrix" else 0.0
    t_read, t_write = mem_times(prof, read, write)
    return prof.matrix_op_overhead + t_write + max(t_read, compute)


def _row_sparse_nodes(plan: C.CPlan, nodes: list[C.CNode], row_len: dict[int, float]) -> set[int] | None:
    """The nodes a row kernel computes at a CSR main row's non-zeros (C.row_sparse), or None when it
    runs the densified mode: a plan whose sparse form does not hold, or whose sparse nodes scale the row
    by a vector longer than 1 (the runner's mode-2 condition, with the lengths known here)."""
    try:
        rs = C.row_sparse(nodes, C.row_kinds(nodes), plan.root2)
    except ValueError:
        return None
    if not rs.ok or any(row_len.get(id(x), 0.0) > 1.0 for x in rs.len1):
        return None
    return rs.sparse


def _row_lengths(nodes: list[C.CNode], metas: list, main_cols: float) -> dict[int, float]:
    """Length of each vector node of a row plan (its nodes in postorder) per row (0 for per-row
    scalars), by ``id``: the main row's or a CELL input's row for row views, the matrix's columns
    for ``vecmat``, the longest operand's otherwise."""
    try:
        kinds = C.row_kinds(nodes)  # the code generator's kinds (gen_row.analyze)
    except ValueError:  # not a valid row plan: price every node over the main row
        return {id(n): main_cols for n in nodes}
    out: dict[int, float] = {}
    for n in nodes:  # children before parents
        if kinds.get(id(n)) != "V":
            out[id(n)] = 0.0
        elif n.op == "input":  # a CELL input has the main's rows, not necessarily its columns
            m = metas[int(n.arg)]  # type: ignore[call-overload]
            out[id(n)] = main_cols if n.access == C.MAIN else m.cols if n.access == C.CELL else m.cells
        elif n.op == "vecmat":
            out[id(n)] = metas[int(n.children[1].arg)].cols  # type: ignore[call-overload]
        elif n.op == C.COLRANGE:
            lo, hi = C.colrange_bounds(n)
            out[id(n)] = hi - lo + 1
        else:
            out[id(n)] = max(out[id(c)] for c in n.children)
    return out


def fused_op_rate(prof: HardwareProfile) -> float:
    return K.FUSED_OP_RATE / kernel_slowdown(prof)


def calls_blas(plan: C.CPlan) -> bool:
    """Whether the plan's kernel calls BLAS: a row plan with a matrix product (its block body runs
    ``X %*% B`` and the ``t(P) %*% Q`` accumulation as one BLAS product per block of rows)."""
    return plan.template == "row" and (plan.agg == C.COL_AGG_B1_T
                                       or any(n.op == "vecmat" for n in C.postorder(plan)))


def blas_start(blas: bool) -> float:
    """The import of scipy's BLAS the first BLAS-calling kernel of a process pays (0 once done)."""
    return K.SCIPY_BLAS_IMPORT_TIME if blas and "scipy.linalg.cython_blas" not in sys.modules else 0.0


def numba_start(cached: bool, prof: HardwareProfile, imported: bool = False, blas: bool = False) -> float:
    """Numba's start-up paid by the first kernel of a process: the import of the code generator, less
    when that is done or under way already (a background start, feedback.prestart), and the first
    load's NRT init, or a first compile's LLVM init; with ``blas``, scipy's BLAS too (blas_start)."""
    first = prof.numba_first_load if cached else K.NUMBA_COLD_INIT
    return first + (0.0 if imported else prof.numba_import_time) + blas_start(blas)


def compile_penalty(cached: bool, prof: HardwareProfile, numba_started: bool = True, imported: bool = False,
                    blas: bool = False) -> float:
    """One-time cost of a kernel: its cold compile, or its load from the on-disk plan cache (paper 000
    Table 3: compilation overhead); the first kernel of a process also pays Numba's start-up, and
    the first that calls BLAS (``blas``) scipy's BLAS import."""
    start = blas_start(blas) if numba_started else numba_start(cached, prof, imported, blas)
    return (K.CODEGEN_WARM_LOAD_TIME if cached else prof.codegen_compile_time) + start
