"""The catalogue of native DML builtins: names, parameter lists, defaults and HOP kinds.

Why one table: the validator (arity, named arguments), the HOP builder (kind, output data type)
and the runtime (kernel lookup by name) must agree on how a call's arguments are normalized.
Calls are normalized to the positional order of ``params``; an absent optional parameter is
passed to the kernel as its default (``None`` where the kernel decides).

Output data types: ``out`` is one of
  "matrix", "scalar:double", "scalar:int", "scalar:bool", "scalar:string", "list", "frame",
  "same"      (matrix if any matrix input, else scalar; numeric value type by promotion),
  "same_double" (like "same" but a scalar result is DOUBLE: sqrt, exp, round, ...),
  "agg"       (matrix input -> DOUBLE scalar; two or more inputs -> like "same"),
  "multi"     (several outputs, only in multi-assignment: eigen, svd, ...),
  "none"      (statement only: print, stop, write),
  "any"       (decided at run time: as.scalar on lists, ifelse, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

REQUIRED = object()  # marks a parameter without a default


@dataclass(frozen=True)
class BuiltinSpec:
    name: str
    params: tuple[tuple[str, object], ...]  # (name, default or REQUIRED), positional order
    kind: str  # HOP kind: unary, binary, ternary, agg_unary, reorg, nary, param_builtin, datagen, builtin, matmult
    out: str
    varargs: bool = False  # accepts any number of positional arguments (cbind, min, print, list)
    nout: int = 1  # number of outputs (multi-assignment builtins)
    # parameters the kernel reads only as dense arrays (LAPACK): the physical plan converts a CSR
    # operand there with an explicit instruction (plan.build)
    dense: tuple[str, ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.params)


def _s(name, params, kind, out, varargs=False, nout=1, dense=()):
    ps = []
    for p in params:
        if isinstance(p, tuple):
            ps.append(p)
        else:
            ps.append((p, REQUIRED))
    return BuiltinSpec(name, tuple(ps), kind, out, varargs, nout, tuple(dense))


_X = ["target"]  # canonical name of the single main input

_UNARY_MATH = [
    "abs", "exp", "sqrt", "round", "ceil", "floor", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "sign",
]
_UNARY_SAME: list[str] = []  # SystemDS types abs(-4) as DOUBLE too (prints 4.0)
_UNARY_BOOL = ["isNaN", "isInf", "isNA"]

_FULL_AGG = ["sum", "mean", "prod", "var", "sd", "trace", "median"]
_ROWCOL_AGG = [
    "rowSums", "colSums", "rowMeans", "colMeans", "rowMaxs", "colMaxs", "rowMins", "colMins",
    "rowProds", "colProds", "rowVars", "colVars", "rowSds", "colSds", "rowIndexMax", "rowIndexMin",
]
_CUMAGG = ["cumsum", "cumprod", "cummin", "cummax"]
_LAPACK = ["solve", "inv", "cholesky", "det", "eigen", "svd", "qr", "lu"]

# Operator families, named once: size inference (hops.sizes), validation (hops.validate), the cost
# model (cost.operators), the fused-operator templates and the physical plan read these sets
FULL_AGGS = frozenset(_FULL_AGG)  # matrix -> scalar (min and max also as element-wise n-ary forms)
ROW_AGGS = frozenset(n for n in _ROWCOL_AGG if n.startswith("row"))  # n x m -> n x 1
COL_AGGS = frozenset(n for n in _ROWCOL_AGG if n.startswith("col"))  # n x m -> 1 x m
CUM_AGGS = frozenset(_CUMAGG)  # n x m -> n x m
# unary operators with f(0) == 0: the zeros of a sparse input stay zero
ZERO_PRESERVING_UNARY = frozenset({"u-", "abs", "sqrt", "round", "floor", "ceil", "sign", "sin", "tan", "asin",
                                   "atan", "sinh", "tanh"})
ROUNDING = frozenset({"round", "ceil", "floor"})  # zero-preserving, but they can turn non-zeros into zeros too
LAPACK = frozenset(_LAPACK)  # factorizations and solvers: dense operands (BuiltinSpec.dense), O(n^3)

SPECS: dict[str, BuiltinSpec] = {}


def _add(spec: BuiltinSpec, *aliases: str) -> None:
    SPECS[spec.name] = spec
    for a in aliases:
        SPECS[a] = BuiltinSpec(a, spec.params, spec.kind, spec.out, spec.varargs, spec.nout, spec.dense)


for _n in _UNARY_MATH:
    _add(_s(_n, _X, "unary", "same_double"))
for _n in _UNARY_SAME:
    _add(_s(_n, _X, "unary", "same"))
for _n in _UNARY_BOOL:  # SystemDS: isNaN(2) is the DOUBLE 0.0
    _add(_s(_n, _X, "unary", "same_double"))
_add(_s("log", ["target", ("base", None)], "unary", "same_double"))
for _n in _FULL_AGG:
    _add(_s(_n, _X, "agg_unary", "scalar:double"))
for _n in _ROWCOL_AGG + _CUMAGG:
    _add(_s(_n, _X, "agg_unary", "matrix"))
_add(_s("min", ["target"], "agg_unary", "agg", varargs=True))
_add(_s("max", ["target"], "agg_unary", "agg", varargs=True))
_add(_s("quantile", ["target", "p", ("weights", None)], "builtin", "any"))
_add(_s("nrow", _X, "unary", "scalar:int"))
_add(_s("ncol", _X, "unary", "scalar:int"))
_add(_s("length", _X, "unary", "scalar:int"))

# reorganization and restructuring
_add(_s("t", _X, "reorg", "matrix"))
_add(_s("rev", _X, "reorg", "matrix"))
_add(_s("diag", _X, "reorg", "matrix"))
_add(_s("cbind", ["target"], "nary", "matrix", varargs=True), "append")
_add(_s("rbind", ["target"], "nary", "matrix", varargs=True))
_add(_s("order", ["target", ("by", 1), ("decreasing", False), ("index.return", False)], "reorg", "matrix"))
_add(_s("removeEmpty", ["target", "margin", ("select", None), ("empty.return", True)], "param_builtin", "matrix"))
_add(_s("replace", ["target", "pattern", "replacement"], "param_builtin", "matrix"))
_add(_s("table", ["target", "target2", ("weights", None), ("rows", None), ("cols", None)], "param_builtin", "matrix"))
_add(_s("aggregate", ["target", "groups", ("fn", "sum"), ("ngroups", None), ("weights", None)], "param_builtin", "matrix"))
_add(_s("outer", ["target", "target2", "op"], "builtin", "matrix"))
_add(_s("contains", ["target", "pattern"], "param_builtin", "scalar:bool"))
_add(_s("lower.tri", ["target", ("diag", False), ("values", False)], "param_builtin", "matrix"))
_add(_s("upper.tri", ["target", ("diag", False), ("values", False)], "param_builtin", "matrix"))

# linear algebra
_add(_s("solve", ["target", "target2"], "binary", "matrix", dense=("target", "target2")))
_add(_s("inv", _X, "unary", "matrix", dense=_X))
_add(_s("cholesky", _X, "unary", "matrix", dense=_X))
_add(_s("det", _X, "unary", "scalar:double", dense=_X))
_add(_s("eigen", _X, "builtin", "multi", nout=2, dense=_X))
_add(_s("svd", _X, "builtin", "multi", nout=3, dense=_X))
_add(_s("qr", _X, "builtin", "multi", nout=2, dense=_X))
_add(_s("lu", _X, "builtin", "multi", nout=3, dense=_X))

# data generation (parser-level DataExpressions in SystemDS)
_add(_s("matrix", ["data", "rows", "cols", ("byrow", True)], "datagen", "matrix"))
_add(_s("rand", [("rows", 1), ("cols", 1), ("min", 0.0), ("max", 1.0), ("sparsity", 1.0),
                 ("pdf", "uniform"), ("seed", -1), ("lambda", 1.0)], "datagen", "matrix"), "Rand")
_add(_s("seq", ["from", "to", ("incr", None)], "datagen", "matrix"))
_add(_s("sample", ["range", "size", ("replace", False), ("seed", -1)], "datagen", "matrix"))

# ternary / n-ary scalar-matrix
_add(_s("ifelse", ["target", "target2", "target3"], "ternary", "any"))
_add(_s("xor", ["target", "target2"], "binary", "same_bool"))
_add(_s("bitwAnd", ["target", "target2"], "binary", "same"))

# casts
_add(_s("as.scalar", _X, "unary", "any"), "castAsScalar")
_add(_s("as.matrix", _X, "unary", "matrix"))
_add(_s("as.double", _X, "unary", "scalar:double"))
_add(_s("as.integer", _X, "unary", "scalar:int"))
_add(_s("as.logical", _X, "unary", "scalar:bool"))
_add(_s("as.frame", _X, "unary", "frame"))
_add(_s("as.list", _X, "unary", "list"))

# probability distributions (scalar in, DOUBLE out; kernels_dist)
_DIST_PARAMS = [("mean", None), ("sd", None), ("df", None), ("df1", None), ("df2", None), ("rate", None),
                ("lower.tail", True)]
_add(_s("cdf", ["target", "dist", *_DIST_PARAMS], "param_builtin", "scalar:double"))
_add(_s("icdf", ["target", "dist", *_DIST_PARAMS], "param_builtin", "scalar:double"))
for _short, _ps in (("norm", [("mean", 0.0), ("sd", 1.0)]), ("t", ["df"]), ("chisq", ["df"]),
                    ("f", ["df1", "df2"]), ("exp", [("rate", 1.0)])):
    for _pre in ("p", "q"):
        _add(_s(_pre + _short, ["target", *_ps, ("lower.tail", True)], "param_builtin", "scalar:double"))

# strings, lists, IO and side effects
_add(_s("toString", ["target", ("rows", 100), ("cols", 100), ("decimal", 3), ("sparse", False),
                     ("sep", " "), ("linesep", "\n")], "param_builtin", "scalar:string"))
_add(_s("print", ["target"], "builtin", "none", varargs=True))
_add(_s("stop", [("target", "")], "builtin", "none"))
_add(_s("assert", ["target"], "builtin", "none"))
_add(_s("time", [], "builtin", "scalar:int"))
_add(_s("list", [], "nary", "list", varargs=True))
_add(_s("read", ["target", ("format", None), ("header", None), ("sep", None), ("rows", None), ("cols", None),
                 ("data_type", None), ("value_type", None), ("fill", None), ("default", None),
                 ("naStrings", None), ("na.strings", None), ("schema", None)], "data", "any"))
_add(_s("write", ["target", "file", ("format", "text"), ("header", False), ("sep", ","),
                  ("rows_in_block", None), ("description", ""), ("sparse", None)], "data", "none"))
_add(_s("exists", _X, "unary", "scalar:bool"))

# statement-level builtins that never produce a value
STATEMENT_ONLY = {"print", "stop", "write", "assert"}

# builtins whose result depends on more than their inputs; never CSE'd, folded or moved
NONDETERMINISTIC = {"rand", "Rand", "sample", "time", "read"}


def lookup(name: str) -> BuiltinSpec | None:
    return SPECS.get(name)
