"""Building the physical plan of one HOP DAG (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lafuse import memory
from lafuse.formats import CSR, DENSE, default_format, format_bytes
from lafuse.hops import sizes
from lafuse.hops.cplan import dense_inputs
from lafuse.hops.hop import DOUBLE, MATRIX, Hop
from lafuse.hops.patterns import (
    REUSES_OPERAND,
    SQUARED_LOSS_BLOCK_BYTES,
    foldable_transposes,
    mmchains,
    sampled_sums,
    squared_losses,
)
from lafuse.hops.program import Dag
from lafuse.lang.builtins import SPECS
from lafuse.plan import exectype, fusedstrategy, mmstrategy
from lafuse.plan.instructions import DASK, LOCAL, Instruction, Plan
from lafuse.sparse import sp

# NumPy's own threshold for eliding temporaries (NPY_MIN_ELIDE_BYTES): below it a new array comes
# from the allocator's cache and the run-time checks of an in-place result (runtime.reuse) would
# cost more than they save
REUSE_MIN_BYTES = 256 * 1024
REUSE_MIN_CELLS = REUSE_MIN_BYTES // 8


def build(dag: Dag, chains: bool = True, reuse_buffers: bool = True, exec_mode: str = "auto",
          cluster: exectype.ClusterShape | Callable[[], exectype.ClusterShape] | None = None,
          squared_loss: bool = True, formats: str = "rule", held: dict[str, float] | None = None,
          st: dict[str, Any] | None = None) -> Plan:
    """The plan of ``dag``: one instruction per HOP that is not a literal, a variable write, a
    transpose its product reads in place or part of an ``mmchain`` (``chains``); registers freed by
    their last reader; with ``reuse_buffers``, element-wise results that may take a dying operand's
    buffer; each operator's execution type by ``exec_mode`` (plan.exectype), a distributed one's block
    size and product strategy by ``cluster`` (plan.mmstrategy; a function is asked only when an
    operator may be distributed: asking an existing scheduler connects a client to it); a ``convert`` instruction
    before an operator that reads an operand only as a dense array (dense_operands) which the default
    format rule predicts CSR (an operand whose format is decided at run time is densified by the
    kernel, as before). ``formats`` "dp": sparse values' formats (CSR or CSC) and conversions chosen by
    cost (plan.layout.local; ``held``: variables read in loops that do not assign them, with the
    executions a kept conversion is amortized over; ``st``: the symbol table, their stored formats)."""
    budget = memory.budget_bytes()
    order = dag.hops()
    users: dict[int, list[Hop]] = {}
    for h in order:
        for i in h.inputs:
            users.setdefault(i.id, []).append(h)
    reg: dict[int, int] = {}
    constants: dict[int, Any] = {}
    instrs: list[Instruction] = []
    writes: list[tuple[str, int]] = []
    folded = foldable_transposes(order, users, dag)
    chain = mmchains(order, users, dag, folded) if chains else {}
    bounds: dict[int, float] = {}
    for h in order:
        bounds[h.id] = sizes.nnz_bound(h, bounds)
    losses = _local(squared_losses(order, users, dag, folded), exec_mode, budget, bounds) if squared_loss else {}
    sampled = _local(sampled_sums(order, users, dag, folded), exec_mode, budget, bounds) if squared_loss else {}
    absorbed = {a for c in chain.values() for a in c.absorbed} | \
        {a for c in [*losses.values(), *sampled.values()] for a in c.absorbed}
    fmt_of: dict[int, str | None] = {}  # predicted format of each matrix register
    converted: dict[int, int] = {}  # register -> the register of its dense conversion
    on_dask: set[int] = set()  # HOPs whose instruction runs on Dask
    nregs = len(order)
    for h in order:
        r = len(reg)
        reg[h.id] = r
        if h.id in folded or h.id in absorbed:  # read through by its product, or part of a chain
            continue
        if h.kind == "literal":
            constants[r] = h.value
            continue
        args = [reg[i.id] for i in h.inputs]
        if h.op == "twrite":
            writes.append((h.name or "", args[0]))
            continue
        ins = Instruction(h.op, h, args, r, cast=scalar_cast(h))
        if h.id in chain:
            c = chain[h.id]
            ins.opcode = "mmchain"
            ins.reads = [c.x, c.v] + ([c.w] if c.w is not None else [])
            ins.args = [reg[i.id] for i in ins.reads]
            ins.chain = (c.w_first, c.transposed)
        elif h.id in losses or h.id in sampled:
            sl = losses.get(h.id) or sampled[h.id]
            ins.opcode = "wsloss" if h.id in losses else "sampledsum"
            ins.reads = [sl.x, sl.u, sl.v]
            ins.args = [reg[i.id] for i in ins.reads]
            ins.transposed = sl.transposed
            ins.pattern = sampled.get(h.id)
        elif h.kind == "matmult" and any(i.id in folded for i in h.inputs):
            ins.transposed = (h.inputs[0].id in folded, h.inputs[1].id in folded)
            ins.reads = [i.inputs[0] if i.id in folded else i for i in h.inputs]
            ins.args = [reg[i.id] for i in ins.reads]
        if h.dt == "matrix":
            ins.need = operation_bytes(h, bounds)
            ins.over_budget = ins.need > budget
            if h.rows >= 0 and h.cols >= 0 and h.nnz >= 0:
                ins.out_fmt = default_format(h.rows, h.cols, h.nnz)
        elif ins.opcode in ("wsloss", "sampledsum"):  # its operands and a block (never the product whole)
            ins.need = _operands_bytes(ins.reads or [], bounds) + SQUARED_LOSS_BLOCK_BYTES
        elif any(i.dt == MATRIX for i in h.inputs):  # (a scalar out of matrices: an aggregate may not fit)
            ins.need = operation_bytes(h, bounds)
        if h.op == "lix":
            ins.inplace = _inplace_candidate(h, users, dag)
        transitive = bool(on_dask) and exec_mode == "auto" and _follows_distributed(ins, on_dask, users)
        if h.kind == "cuboid" or transitive or exectype.may_distribute(ins.need, budget, exec_mode):
            shape = (cluster() if callable(cluster) else cluster) or exectype.ClusterShape()
            if h.kind == "cuboid":  # (fusion.fuseme made it for the cluster)
                ins.exec_type = DASK
            else:
                ok = exectype.distributable(ins)
                ins.exec_type = DASK if transitive and ok else exectype.choose(ins.need, budget, exec_mode, ok,
                                                                               _cells(h), shape.min_cells)
            if ins.exec_type == DASK:
                _distribute(ins, shape)
                on_dask.add(h.id)
        fmt_of[r] = ins.out_fmt
        for k in dense_operands(ins):
            a = ins.args[k]
            if fmt_of.get(a) != CSR:
                continue
            if a not in converted:
                converted[a] = nregs
                nregs += 1
                src = ins.reads[k] if ins.reads is not None else h.inputs[k]
                instrs.append(_convert(src, a, converted[a], DENSE, ins.exec_type, bounds, budget))
            ins.args[k] = converted[a]
        instrs.append(ins)
    result = reg[dag.roots[0].id] if dag.roots else -1
    layout = None
    if formats == "dp" and _may_be_sparse(instrs, st):
        from lafuse.cost import profile  # deferred: the format search, only for a plan with a sparse value
        from lafuse.plan.layout import local

        instrs, nregs, layout = local.choose(instrs, nregs, profile.load(), convert_instruction, held, st)
    # (under auto a plan whose operators all stay here moves nothing; under dask a variable may be distributed)
    if exec_mode == "dask" or any(i.exec_type != LOCAL for i in instrs):
        instrs, writes, result, nregs = _moves(instrs, writes, result, nregs, {reg[h.id]: h for h in order},
                                               exec_mode == "dask", budget)
    # liveness: last reader of each register
    last: dict[int, int] = {}
    for pos, ins in enumerate(instrs):
        for a in ins.args:
            last[a] = pos
    keep = {r for _, r in writes}
    for a, pos in last.items():
        if a not in keep and a not in constants:
            instrs[pos].free.append(a)
    if reuse_buffers:
        for ins in instrs:
            ins.reuse = _reuse_operand(ins)
    plan = Plan(instrs, nregs, constants, writes, result)
    plan.layout = layout
    return plan


def _may_be_sparse(instrs: list[Instruction], st: dict[str, Any] | None) -> bool:
    """Whether a value of the plan is predicted CSR or is a variable stored CSR (the format search
    has nothing to choose otherwise)."""
    for ins in instrs:
        if ins.out_fmt == CSR:
            return True
        if st is not None and ins.opcode == "tread" and _stored_csr(st.get(ins.hop.name or "")):
            return True
    return False


def _stored_csr(v: Any) -> bool:
    return bool(sp.issparse(v)) and v.format == CSR


def _follows_distributed(ins: Instruction, on_dask: set[int], users: dict[int, list[Hop]]) -> bool:
    """SystemDS's transitive rule for products (AggBinaryOp): a product that fits here still runs
    distributed when an operand is a distributed result that only it reads, rather than collecting
    that operand to multiply it here."""
    h = ins.hop
    if h.kind != "matmult" and ins.chain is None:
        return False
    return any(i.id in on_dask and len(users.get(i.id, ())) == 1 for i in (ins.reads or h.inputs))


def _local(found: dict[int, Any], exec_mode: str, budget: float, bounds: dict[int, float]) -> dict[int, Any]:
    """The squared losses and sampled sums (hops.patterns: ``x``, ``u``, ``v`` their operands) that
    run as one instruction here: every one under ``local``, none under ``dask`` (the cluster runs
    the operators), and under ``auto`` those whose operands fit the budget; a larger X leaves the
    operators to the cluster, each beyond the budget on its own (``bounds``: every HOP's nnz_bound)."""
    if not found or exec_mode == "dask":
        return {}
    if exec_mode == "local":
        return found
    return {key: p for key, p in found.items() if _operands_bytes([p.x, p.u, p.v], bounds) <= budget}


def _operands_bytes(hops: list[Hop], bounds: dict[int, float]) -> float:
    """Bytes of the distinct matrices ``hops`` (worst-case non-zeros where unknown) and a scalar result."""
    operands = {i.id: i for i in hops if i.dt == MATRIX}.values()
    return 8.0 + sum(sizes.bounded_bytes(i, bounds) for i in operands)


def _distribute(ins: Instruction, cluster: exectype.ClusterShape) -> None:
    """A distributed instruction's block size, and a product's strategy (plan.mmstrategy)."""
    ins.block = cluster.block_size
    if ins.hop.kind == "matmult" or ins.chain is not None:
        ins.method = mmstrategy.choose(ins, cluster)
    elif ins.hop.kind == "cuboid" or (ins.cplan is not None and ins.cplan.template == "outer"):
        ins.dist = fusedstrategy.choose(ins, cluster)


def _cells(h: Hop) -> float:
    """The size --exec dask compares with its minimum: the operation's largest matrix; for right
    indexing its result (a slice reads only the cells it returns: a small slice of a distributed
    matrix is taken here from its collected copy, which the Dask backend keeps, rather than by a task
    and a gather per slice)."""
    mats = [h] if h.op == "rix" else [h, *h.inputs]
    return max((float(i.rows) * float(i.cols) for i in mats if i.dt == MATRIX and i.rows >= 0 and i.cols >= 0),
               default=-1.0)


def _moves(instrs: list[Instruction], writes: list[tuple[str, int]], result: int, nregs: int,
           hop_of: dict[int, Hop], keep: bool, budget: float = float("inf")
           ) -> tuple[list[Instruction], list[tuple[str, int]], int, int]:
    """``scatter`` and ``collect`` instructions where a value crosses execution types: a local matrix
    a distributed operator reads is scattered once, a distributed matrix a local instruction (or the
    interpreter, as a predicate's ``result``) reads is collected once. ``keep`` (--exec dask):
    variables keep distributed values from block to block, so a matrix variable read may be either
    (ANYWHERE): its readers get a move that passes a value already where they run; else (auto) a
    block's distributed results are collected before its variable writes, except one larger than the
    ``budget`` (collecting it would not fit): that variable stays distributed, as SystemDS keeps an
    RDD-backed variable, and every later operator reading it holds more than the budget too, so it
    runs on Dask or stops at the budget."""
    where: dict[int, str] = {}
    moved: dict[tuple[int, str], int] = {}
    out: list[Instruction] = []

    def at(a: int, et: str) -> int:
        if where.get(a, LOCAL) == et or hop_of.get(a) is None or hop_of[a].dt != MATRIX:
            return a
        nonlocal nregs
        key = (a, et)
        if key not in moved:
            moved[key] = nregs
            # both run on the distributed side's backend: it scatters, and it gathers
            src = DASK if where[a] == ANYWHERE else where[a]  # (a collect passes a local value as it is)
            out.append(_move("scatter" if et != LOCAL else "collect", hop_of[a], a, nregs,
                             et if et != LOCAL else src))
            where[nregs] = et
            nregs += 1
        return moved[key]

    for ins in instrs:
        if ins.opcode not in SHAPE_ONLY:  # (reads dims only: a distributed value knows them)
            ins.args = [at(a, ins.exec_type) for a in ins.args]
        out.append(ins)
        if ins.hop.dt == MATRIX:
            where[ins.out] = ANYWHERE if keep and ins.opcode in PASS_THROUGH else ins.exec_type
            hop_of[ins.out] = ins.hop
    if not keep:
        writes = [(name, r if where.get(r) == DASK and _bytes(hop_of[r]) > budget else at(r, LOCAL))
                  for name, r in writes]
    if result >= 0:
        result = at(result, LOCAL)
    return out, writes, result, nregs


def _bytes(h: Hop) -> float:
    return sizes.output_bytes(h.rows, h.cols, h.nnz) if h.dt == MATRIX else 0.0


ANYWHERE = "anywhere"  # (_moves) a variable's value: local or distributed
PASS_THROUGH = frozenset({"tread", "fcall", "get", "lrix"})  # results that are values stored elsewhere
SHAPE_ONLY = frozenset({"nrow", "ncol", "length"})  # read an operand's dims, wherever it is


def _move(op: str, src: Hop, arg: int, out: int, exec_type: str) -> Instruction:
    """An instruction that moves register ``arg`` (the value of ``src``): ``scatter`` to the cluster of
    ``exec_type``, ``collect`` from it into this process; both are that backend's work."""
    ins = Instruction(op, _sized_copy(op, "data", src), [arg], out, exec_type=exec_type)
    ins.need = sizes.output_bytes(src.rows, src.cols, src.nnz)
    return ins


def _sized_copy(op: str, kind: str, src: Hop, params: dict[str, Any] | None = None) -> Hop:
    """The HOP of an instruction the plan adds (a move or a conversion): ``src``'s value with its
    sizes, under another operation."""
    h = Hop(op, kind, [src], MATRIX, DOUBLE, src.span, params)
    h.rows, h.cols, h.nnz = src.rows, src.cols, src.nnz
    return h


def dense_operands(ins: Instruction) -> list[int]:
    """Argument positions ``ins`` reads only as dense arrays: a fused operator's vector, whole-matrix
    and factor inputs (hops.cplan.dense_inputs) and the LAPACK operands of the catalogue
    (BuiltinSpec.dense)."""
    h = ins.hop
    if h.kind == "spoof":
        return sorted(p for p in dense_inputs(h.params["cplan"]) if p < len(ins.args))
    spec = SPECS.get(ins.opcode)
    if spec is None or not spec.dense or ins.reads is not None:
        return []
    slots = h.params.get("slots") or spec.param_names
    return [k for k, s in enumerate(slots[:len(ins.args)]) if s in spec.dense]


def convert_instruction(src: Hop, arg: int, out: int, fmt: str) -> Instruction:
    """A local conversion of register ``arg`` (the value of ``src``) into ``fmt`` (plan.layout.local)."""
    return _convert(src, arg, out, fmt, LOCAL, {src.id: float(src.nnz)}, memory.budget_bytes())


def _convert(src: Hop, arg: int, out: int, fmt: str, exec_type: str, bounds: dict[int, float],
             budget: float) -> Instruction:
    """The instruction that turns register ``arg`` (holding the value of ``src``) into ``fmt``: its HOP
    is a copy of ``src``'s sizes whose format is fixed (params ``format``, read by the cost model)."""
    c = _sized_copy("convert", "reorg", src, {"format": fmt})
    bounds[c.id] = bounds.get(src.id, -1.0)
    ins = Instruction("convert", c, [arg], out, out_fmt=fmt, exec_type=exec_type)
    nnz = bounds[c.id] if bounds[c.id] >= 0 else float(src.rows) * float(src.cols)
    ins.need = format_bytes(fmt, src.rows, src.cols, nnz) + sizes.output_bytes(src.rows, src.cols, int(min(nnz, 2.0**62)))
    ins.over_budget = ins.need > budget
    return ins


def scalar_cast(h: Hop) -> type | None:
    """The type a scalar result is coerced to: its inferred value type. SystemDS: print(ifelse(c, 7,
    2.5)) prints 7, but y = ifelse(...) makes y a DOUBLE."""
    if h.dt == "scalar" and h.op not in ("tread", "get", "fcall", "pread") and (
            h.op != "ifelse" or h.params.get("assigned")):
        return {"double": float, "int": int}.get(h.vt)
    return None


def _reuse_operand(ins: Instruction) -> int:
    """The argument whose buffer an element-wise result may take, or -1: an operation whose dense
    kernel is one ufunc (hops.patterns.REUSES_OPERAND) over a matrix operand that dies with it, of
    the result's shape (or of unknown dims: the run-time check in runtime.reuse decides), not a
    variable's value; one register read twice (``D * D``) counts at the first position."""
    h = ins.hop
    if (h.op not in REUSES_OPERAND or ins.reads is not None or ins.over_budget or h.dt != "matrix" or ins.exec_type != LOCAL
            or len(ins.args) != len(h.inputs) or len(ins.args) not in (1, 2)):
        return -1
    if h.rows >= 0 and h.cols >= 0 and h.rows * h.cols < REUSE_MIN_CELLS:
        return -1
    a = ins.args
    same = len(a) == 2 and a[0] == a[1]
    out_dims = (h.rows, h.cols)
    for k, (r, i) in enumerate(zip(a, h.inputs)):
        dead = r in ins.free and (a.count(r) == 1 or (same and k == 0)) and i.dt == "matrix" and i.op != "tread"
        if dead and ((i.rows, i.cols) == out_dims or min(out_dims) < 0 or min(i.rows, i.cols) < 0):
            return k
    return -1


def _inplace_candidate(h: Hop, users: dict[int, list[Hop]], dag: Dag) -> bool:
    """``X[i, j] = v`` where X is read from variable V, nothing else in the block reads that
    value, and the result only goes back to V: the old value of V is dead after this
    instruction, so it can be updated in place (the runtime still checks that no other variable
    or caller shares the array)."""
    base = h.inputs[0]
    if base.op != "tread" or len(users.get(base.id, [])) != 1:
        return False
    outs = users.get(h.id, [])
    others = [u for u in outs if not (u.op == "twrite" and u.name == base.name)]
    return not others and any(u.op == "twrite" for u in outs) and h.id not in {r.id for r in dag.roots}


def operation_bytes(h: Hop, bounds: dict[int, float]) -> float:
    """Memory of ``h``'s operation: its output and its (distinct) inputs, by the sizes known when the
    DAG was planned (actual sizes after a dynamic recompilation) and worst-case non-zeros where they
    are unknown (``bounds``: sizes.nnz_bound of every HOP so far); -1 when the output's dims are
    unknown. An input of unknown dims counts 0: the guard errs towards running."""
    if h.dt != MATRIX:
        out = 8.0
    else:
        out = sizes.bounded_bytes(h, bounds)
    if out < 0:
        return -1.0
    seen: set[int] = set()
    total = out
    for i in h.inputs:
        if i.id not in seen and i.dt == "matrix" and i.rows >= 0 and i.cols >= 0:
            seen.add(i.id)
            total += sizes.bounded_bytes(i, bounds)
    return total
