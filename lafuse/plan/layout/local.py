"""The local catalogue (paper 002 §3 on one machine) and the plan stage that searches it.

Formats: dense, CSR, CSC, and ``any`` (a value whose format is decided when it is computed: nnz
unknown at planning). Only a sparse value has a choice: CSR and CSC hold the same non-zeros, so
choosing between them changes speed, not values; dense against sparse is not a choice here, since
a structural zero of a sparse operand annihilates NaN/Inf in ``*`` and in products (lafuse.formats)
and a dense form of the same value could give other results.

Implementations, each with a type-specification function and a cost fitted by ``lafuse calibrate``
(cost.fit.LOCAL_IMPLS; the analytical model where nothing was measured):

* products by operand format (CSR or CSC left operand times dense, dense times CSR or CSC, reading
  an operand transposed in place: a CSR matrix read transposed is a CSC one), and the unfused chain
  t(X) %*% (w * (X %*% v)) (both of its products on X's format);
* right indexing: a row slice is cheap on CSR and dear on CSC, a column slice the other way round;
* transpose: of CSC it is a CSR matrix as it is, of CSR a conversion;
* aggregates and dimension reads take either; every other operator takes CSR (its kernels' form).

Transformations: CSR <-> CSC. A variable's value read in a loop that does not assign it can be
converted once and kept with the value (``hold``): the conversion is amortized over the loop's
iterations (the block's ``held`` reads, hops.program.Dag.held), and the runtime keeps the converted
form with the value (runtime.local.backend: held conversions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lafuse.cost import constants as K
from lafuse.cost.fit import local_features, random_bytes
from lafuse.formats import CSC, CSR, DENSE, default_format
from lafuse.hops.hop import MATRIX
from lafuse.plan.instructions import LOCAL, Instruction
from lafuse.plan.layout.graph import Annotation, Catalogue, Graph, Impl, MType, Problem, Transform
from lafuse.plan.layout.search import Row, explain, optimize, render
from lafuse.sparse import sp

ANY = "any"  # decided when the value is computed (its non-zeros unknown when planned)
FORMATS = (DENSE, CSR, CSC, ANY)
SPARSE = (CSR, CSC)
AGGREGATES = frozenset({"sum", "colSums", "rowSums", "nnz"})
DIMS = frozenset({"nrow", "ncol", "length"})
# a frontier step's joint table at planning time (4 formats: 8 entangled results); a plan more entangled
# keeps the default formats rather than spend planning time (the search's cost grows with it)
PLAN_MAX_JOINT_CELLS = 4 ** 8
MAX_SOLVED = 256  # problems whose answers are kept (per process)
_SOLVED: dict[tuple, tuple[Problem, Annotation | None, float]] = {}
LAYOUT_MIN_GAIN = 0.05  # relative: a plan's formats change only for a saving beyond this (and K.LAYOUT_MIN_SAVING)


def _flip(fmt: str) -> str:
    return {CSR: CSC, CSC: CSR}.get(fmt, fmt)


def _class(m: MType) -> str:
    """The format the default rule gives a value of type ``m``, as the kernels produce it."""
    return ANY if m.nnz < 0 or m.rows < 0 or m.cols < 0 else default_format(m.rows, m.cols, m.nnz)


class Prices:
    """Seconds of a local implementation's run: its fitted cost (the hardware profile's) where
    ``lafuse calibrate`` measured it, else the analytical model over the same features."""

    def __init__(self, prof: Any):
        self.prof = prof

    def __call__(self, name: str, m: float, k: float, n: float, nnz: float) -> float:
        feats = local_features(name, m, k, n, max(nnz, 0.0))
        fitted = self.prof.fitted_cost(name)
        if fitted is not None:
            return max(fitted.predict(feats), 0.0)
        flops, _, nbytes, blocks = feats
        if name == "mm-dense-dense":
            work = flops / self.prof.blas_flops
        elif name.startswith("mm-"):  # a traversal of the sparse operand's non-zeros per column of the
            # other, and the rows of a large dense operand it reads or writes at random
            work = flops / (2.0 * self.prof.sparse_rate) + random_bytes(name, m, k, n, nnz) / self.prof.mem_read_bw
        else:  # conversions, transposes and slices move their bytes
            work = nbytes / self.prof.mem_read_bw
        return work + (blocks - 1.0) * K.SPARSE_SEGMENT_TIME + self.prof.matrix_op_overhead


def _nnz(m: MType) -> float:
    return float(m.nnz) if m.nnz >= 0 else float(max(m.rows, 0)) * float(max(m.cols, 0))


def _mm_cost(price: Prices, a: MType, fa: str, b: MType, fb: str) -> float:
    """A product of ``a`` in ``fa`` by ``b`` in ``fb`` (the formats as the kernel sees them, after
    reading an operand transposed)."""
    m, k, n = float(a.rows), float(a.cols), float(b.cols)
    if fa in SPARSE and fb in SPARSE:  # SciPy's sparse product works in CSR: a CSC operand converted
        extra = sum(price("to-csc", x.cols, x.rows, 0, _nnz(x)) for x, f in ((a, fa), (b, fb)) if f == CSC)
        return extra + price("mm-csr-dense", m, k, _nnz(b) / max(k, 1.0), _nnz(a))
    if fa in SPARSE:
        return price(f"mm-{fa}-dense", m, k, n, _nnz(a))
    if fb in SPARSE:
        return price(f"mm-dense-{fb}", m, k, n, _nnz(b))
    if fa == ANY or fb == ANY:
        return price("mm-csr-dense", m, k, n, _nnz(a))
    return price("mm-dense-dense", m, k, n, 0.0)


def _slice_cost(price: Prices, x: MType, fmt: str, out: MType) -> float:
    """Right indexing ``out`` (its dims) out of ``x`` in ``fmt``: along the compressed axis only the
    rows (CSR) or columns (CSC) taken are read; across it every row (column) is searched."""
    if fmt not in SPARSE:
        return price("to-dense", out.rows, out.cols, 0, 0) if fmt == DENSE else price(
            "slice-minor", x.rows, x.cols, out.cols, _nnz(x))
    rows, cols = (x.rows, x.cols) if fmt == CSR else (x.cols, x.rows)
    take_major, take_minor = (out.rows, out.cols) if fmt == CSR else (out.cols, out.rows)
    if take_minor >= cols:  # whole rows (CSR) or columns (CSC): only those are read
        return price("slice-major", rows, cols, take_major, _nnz(x))
    if take_major >= rows:  # across the compressed axis: every row (column) searched
        return price("slice-minor", rows, cols, take_minor, _nnz(x))
    # both cut: the taken rows (columns), then a search over them
    part = _nnz(x) * take_major / max(rows, 1)
    return price("slice-major", rows, cols, take_major, _nnz(x)) + price("slice-minor", take_major, cols, take_minor, part)


@dataclass(frozen=True)
class Op:
    """A vertex's operation as the catalogue knows it: its kind (``mm``, ``rix``, ``t``, ``agg``,
    ``dims``, ``hold``, ``other``), a product's transposed reads, a hold's amortizing executions."""
    kind: str
    ta: bool = False
    tb: bool = False
    reps: float = 1.0
    arity: int = 1

    @property
    def name(self) -> str:
        if self.kind == "mm":
            return "mm" + ("T" if self.ta else "N") + ("T" if self.tb else "N")
        if self.kind == "hold":
            return f"hold{self.reps:g}"
        return f"{self.kind}{self.arity}" if self.kind == "other" else self.kind


def catalogue(ops: set[Op], prof: Any) -> Catalogue:
    """The implementations of the operations ``ops`` and the CSR <-> CSC transformations."""
    price = Prices(prof)
    impls: list[Impl] = []
    for op in sorted(ops, key=lambda o: o.name):
        impls += _impls(op, price)
    overhead = prof.matrix_op_overhead  # a conversion is an instruction of its own
    transforms = (
        Transform("csr->csc", lambda m, f: CSC if f == CSR else None,
                  lambda m, f: overhead + price("to-csc", m.rows, m.cols, 0, _nnz(m))),
        Transform("csc->csr", lambda m, f: CSR if f == CSC else None,
                  lambda m, f: overhead + price("to-csc", m.cols, m.rows, 0, _nnz(m))))
    return Catalogue(FORMATS, tuple(impls), transforms)


def _impls(op: Op, price: Prices) -> list[Impl]:
    name = op.name
    if op.kind == "mm":
        def mm_out(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType) -> str | None:
            return _class(m)

        def mm_cost(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType, op: Op = op) -> float:
            (a, fa), (b, fb) = [(MType(x.cols, x.rows, x.nnz), _flip(f)) if t else (x, f)
                                for x, f, t in zip(ms, fs, (op.ta, op.tb))]
            return _mm_cost(price, a, fa, b, fb)

        return [Impl(f"{name}", name, 2, mm_out, mm_cost)]
    if op.kind == "mmchain":  # t(X) %*% (w * (X %*% v)): X by v, then X read transposed by the result
        def chain_out(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType) -> str | None:
            return None if CSC in fs[1:] else _class(m)

        def chain_cost(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType) -> float:
            x, v = ms[0], ms[1]
            q = MType(x.rows, v.cols, x.rows * v.cols)
            xt = MType(x.cols, x.rows, x.nnz)
            return _mm_cost(price, x, fs[0], v, DENSE) + _mm_cost(price, xt, _flip(fs[0]), q, DENSE)

        return [Impl(name, name, op.arity, chain_out, chain_cost)]
    if op.kind == "hold":  # a variable's value: as it is, or converted once and kept with it
        reps = op.reps
        return [Impl("as-stored", name, 1, lambda ms, fs, m: fs[0], lambda ms, fs, m: 0.0),
                Impl("held-csc", name, 1, lambda ms, fs, m: CSC if fs[0] == CSR else None,
                     lambda ms, fs, m: K.HELD_LOOKUP_TIME + price("to-csc", m.rows, m.cols, 0, _nnz(m)) / reps)]

    def out(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType, kind: str = op.kind) -> str | None:
        if kind not in ("rix", "t", "agg", "dims") and CSC in fs:
            return None  # (its kernels take CSR)
        return _class(m)

    def cost(ms: tuple[MType, ...], fs: tuple[str, ...], m: MType, kind: str = op.kind) -> float:
        x, f = ms[0], fs[0]
        if kind == "rix":
            return _slice_cost(price, x, f, m)
        if kind == "t":
            if f == CSC:  # the transposed CSC matrix is a CSR one
                return price("slice-major", x.rows, x.cols, 0, 0)
            return price("transpose-csr", x.rows, x.cols, 0, _nnz(x)) if f in (CSR, ANY) else \
                price("transpose-dense", x.rows, x.cols, 0, 0)
        if kind == "dims":
            return 0.0
        return sum(price("slice-major", y.rows, y.cols, y.rows, _nnz(y)) for y in ms)  # (a pass over each)

    return [Impl(name, name, op.arity, out, cost)]


# ---------------------------------------------------------------- the plan stage
@dataclass
class Layout:
    """What the stage decided for one plan: the problem and its answer (``--explain formats`` lists
    them), each vertex's label, and the cost of the default formats (every sparse value CSR)."""
    problem: Problem
    annotation: Annotation
    labels: dict[int, str]
    default_cost: float
    applied: bool = True  # False: the saving was too small, the plan keeps the default formats

    def rows(self, runner_up: bool = True) -> list[Row]:
        rows = explain(self.problem, self.annotation, runner_up)
        for r in rows:
            r.name = self.labels.get(r.vertex, r.name)
        return rows

    def render(self, runner_up: bool = True) -> str:
        head = (f"formats: estimated {self.annotation.cost:.4g} s against {self.default_cost:.4g} s "
                f"with every sparse value CSR")
        if not self.applied and self.annotation.cost < self.default_cost:
            head += "; a saving this small is not taken: the plan keeps every sparse value CSR"
        return head + "\n" + render(self.rows(runner_up))


def _op_of(ins: Instruction, nmat: int) -> Op:
    h, op = ins.hop, ins.opcode
    if h.kind == "matmult" and ins.chain is None and ins.opcode not in ("wsloss", "sampledsum") and nmat == 2:
        ta, tb = ins.transposed or (False, False)
        return Op("mm", ta, tb, arity=2)
    if ins.chain is not None and nmat >= 2:
        return Op("mmchain", arity=nmat)
    if op == "rix" and nmat == 1 and h.dt == MATRIX:
        return Op("rix")
    if op in ("t", "r'") and nmat == 1:
        return Op("t")
    if op in AGGREGATES and nmat == 1:
        return Op("agg")
    if op in DIMS and nmat == 1:
        return Op("dims")
    return Op("other", arity=nmat)


def _mtype(h: Any) -> MType:
    return MType(int(h.rows), int(h.cols), int(h.nnz))


def _value_format(v: Any) -> tuple[str, int] | None:
    """The format and non-zeros of a variable's value (a symbol table's), or None if not a matrix here."""
    if sp.issparse(v):
        return (CSR if v.format == "csr" else CSC if v.format == "csc" else ANY), int(v.nnz)
    if hasattr(v, "shape") and getattr(v, "ndim", 0) == 2 and not isinstance(v, type):
        return DENSE, -1
    return None


Convert = Callable[[Any, int, int, str], Instruction]  # (source HOP, register, new register, format)


def choose(instrs: list[Instruction], nregs: int, prof: Any, convert: Convert, held: dict[str, float] | None = None,
           st: dict[str, Any] | None = None) -> tuple[list[Instruction], int, Layout | None]:
    """The plan's instructions with the chosen conversions inserted (and the new register count), and
    what was decided; the instructions unchanged (Layout None) where no sparse value meets an operator
    that a format choice could change. ``held``: variables read in loops that do not assign them, and
    the executions a conversion kept with the value is amortized over; ``st``: the symbol table when
    the runtime plans the block (a variable's format as stored); ``convert`` makes a conversion's
    instruction (plan.build's)."""
    held = held or {}
    producer: dict[int, Instruction] = {}
    fmt: dict[int, str] = {}
    types: dict[int, MType] = {}
    for ins in instrs:
        if ins.hop.dt != MATRIX:
            continue
        producer[ins.out] = ins
        f = ins.out_fmt or ANY
        types[ins.out] = _mtype(ins.hop)
        if ins.opcode == "tread" and st is not None and ins.hop.name in st:
            got = _value_format(st[ins.hop.name])
            if got is not None:
                f = got[0]
                rows, cols = st[ins.hop.name].shape
                types[ins.out] = MType(int(rows), int(cols), got[1])
        fmt[ins.out] = f
    sparse = {r for r, f in fmt.items() if f == CSR}
    if not sparse:
        return instrs, nregs, None
    users = [ins for ins in instrs if ins.exec_type == LOCAL and any(a in sparse for a in ins.args)]
    if not any(_op_of(u, _matrix_args(u, producer)).kind in ("mm", "mmchain", "rix", "t") for u in users):
        return instrs, nregs, None
    g = Graph()
    vert: dict[int, int] = {}  # register -> its vertex
    labels: dict[int, str] = {}
    owner: dict[int, Instruction] = {}  # operation vertex -> its instruction
    holds: dict[int, tuple[int, float]] = {}  # hold vertex -> (register, executions it amortizes over)
    ops: set[Op] = set()

    def source(r: int) -> int:
        if r not in vert:
            ins = producer.get(r)
            m = types.get(r, MType(-1, -1))
            vert[r] = g.source(m, fmt.get(r, ANY), name=f"_r{r}")
            labels[vert[r]] = _label(ins, r) if ins is not None else f"_r{r}"
        return vert[r]

    reading = {id(u) for u in users}
    for ins in instrs:
        if id(ins) not in reading:
            if ins.out in sparse:
                source(ins.out)
            continue
        margs = [a for a in ins.args if a in producer]
        op = _op_of(ins, len(margs))
        args = []
        for a in margs:
            v = source(a)
            read = producer.get(a)
            reps = held.get(read.hop.name or "", 1.0) if read is not None and read.opcode == "tread" else 1.0
            if reps > 1.0 and fmt.get(a) == CSR:  # (a hold per use: each may keep the CSC form or not)
                hop = Op("hold", reps=reps)
                ops.add(hop)
                v = g.add(hop.name, g.vertices[v].m, v, name=f"hold _r{a}")
                labels[v] = f"{labels[vert[a]]} held"
                holds[v] = (a, reps)
            args.append(v)
        ops.add(op)
        m = _mtype(ins.hop) if ins.hop.dt == MATRIX else MType(1, 1, 1)
        v = g.add(op.name, m, *args, name=f"_r{ins.out}")
        labels[v] = _label(ins, ins.out)
        owner[v] = ins
        if ins.hop.dt == MATRIX:
            vert[ins.out] = v
    # a block planned again (a recompilation, another compile of the script) poses the same problem:
    # its answer is kept, keyed by the graph, the profile and the cost functions
    key = (tuple(g.vertices), prof, Prices.__call__, _mm_cost, _slice_cost)
    solved = _SOLVED.get(key)
    if solved is None:
        pb = Problem(g, catalogue(ops, prof))
        try:
            ann: Annotation | None = optimize(pb, PLAN_MAX_JOINT_CELLS)
        except ValueError:  # (a frontier too entangled for the DP: the default formats stay)
            ann = None
        solved = (pb, ann, _default_cost(pb) if ann is not None and ann.feasible else math.inf)
        if len(_SOLVED) >= MAX_SOLVED:
            _SOLVED.pop(next(iter(_SOLVED)))
        _SOLVED[key] = solved
    pb, ann, base = solved
    if ann is None or not ann.feasible:
        return instrs, nregs, None
    if base - ann.cost < max(K.LAYOUT_MIN_SAVING, LAYOUT_MIN_GAIN * base):
        # (a saving within the model's error or an instruction's dispatch keeps the default formats)
        return instrs, nregs, Layout(pb, ann, labels, base, applied=False)
    instrs, nregs = _apply(instrs, nregs, g, ann, owner, holds, producer, {v: r for r, v in vert.items()}, convert)
    return instrs, nregs, Layout(pb, ann, labels, base)


def _matrix_args(ins: Instruction, producer: dict[int, Instruction]) -> int:
    return sum(1 for a in ins.args if a in producer)


def _label(ins: Instruction, r: int) -> str:
    h = ins.hop
    what = f" {h.name}" if h.name else ""
    return f"_r{r} {ins.opcode}{what}"


def _default_cost(pb: Problem) -> float:
    """The cost with no conversion: every operation on the formats its arguments have (holds keep)."""
    g = pb.graph
    fmt = {i: str(v.fmt) for i, v in enumerate(g.vertices) if v.op == "source"}
    total = 0.0
    for v in g.operations():
        vx = g.vertices[v]
        fs = tuple(fmt[a] for a in vx.args)
        ms = tuple(g.vertices[a].m for a in vx.args)
        best = math.inf
        for impl in pb.cat.impls:
            if impl.op != vx.op or impl.name == "held-csc":
                continue
            out = impl.out(ms, fs, vx.m)
            if out is not None:
                c = float(impl.cost(ms, fs, vx.m))
                if c < best:
                    best, fmt[v] = c, out
        if best == math.inf:
            return math.inf
        total += best
    return total


def _apply(instrs: list[Instruction], nregs: int, g: Graph, ann: Annotation, owner: dict[int, Instruction],
           holds: dict[int, tuple[int, float]], producer: dict[int, Instruction],
           vert_reg: dict[int, int], convert: Convert) -> tuple[list[Instruction], int]:
    """Conversion instructions where the annotation transforms an edge or holds a CSC form, each
    register converted once per target format, placed right before its first reader."""
    before: dict[int, list[Instruction]] = {}  # id(instruction) -> conversions to run before it
    made: dict[tuple[int, str, bool], int] = {}
    swaps: dict[int, dict[int, int]] = {}  # id(reader) -> {argument position: the converted register}
    for v, ins in owner.items():
        vx = g.vertices[v]
        at = [i for i, r in enumerate(ins.args) if r in producer]  # (vertex argument j is ins.args[at[j]])
        for j, a in enumerate(vx.args):
            chain = ann.transforms.get((v, j), ())
            held = a in holds and ann.impl[a] == "held-csc"
            if not chain and not held:
                continue
            reg, kept = (holds[a][0], True) if a in holds else (vert_reg[a], False)
            target = CSC if held else None
            if chain:
                target = CSC if chain[-1] == "csr->csc" else CSR
                if held and target == CSR:  # (converted back: the stored CSR is read as it is)
                    target, kept = None, False
            if target is None:
                continue
            key = (reg, target, kept)
            if key not in made:
                made[key] = nregs
                nregs += 1
                src = producer[reg].hop
                c = convert(src, reg, made[key], target)
                if kept:  # (Instruction.held; the cost model prices the conversion over these executions)
                    c.hop.params["held"] = holds[a][1]
                before.setdefault(id(ins), []).append(c)
            swaps.setdefault(id(ins), {})[at[j]] = made[key]
    out: list[Instruction] = []
    for ins in instrs:
        out += before.get(id(ins), [])
        sw = swaps.get(id(ins))
        if sw:
            ins.args = [sw.get(i, r) for i, r in enumerate(ins.args)]
        out.append(ins)
    return out, nregs


__all__ = ["ANY", "FORMATS", "PLAN_MAX_JOINT_CELLS", "Layout", "catalogue", "choose"]
