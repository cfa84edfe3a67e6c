"""Name resolution for the HOP builder: compile-time variable info, command-line values, user
functions, sourced namespaces and builtin scripts, and the output types of native builtins."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from lafuse.errors import DMLError, DMLValidationError
from lafuse.hops.hop import BOOLEAN, DOUBLE, FRAME, INT, LIST, MATRIX, SCALAR, STRING, UNKNOWN, Hop
from lafuse.lang import ast as A
from lafuse.lang.builtins import BuiltinSpec
from lafuse.lang.parser import parse, read_source


@dataclass(frozen=True)
class VarInfo:
    dt: str
    vt: str
    rows: int = -1
    cols: int = -1
    nnz: int = -1


def parse_cmdline_value(text: str) -> Any:
    """How SystemDS types a -nvargs/-args value: INT, DOUBLE, BOOLEAN, else STRING."""
    t = text.strip()
    if t in ("TRUE", "FALSE"):
        return t == "TRUE"
    try:
        return int(t)
    except ValueError:
        pass
    try:
        if t.lower() not in ("nan", "inf", "-inf", "infinity", "-infinity"):
            return float(t)
    except ValueError:
        pass
    return t


class FunctionResolver:
    """Finds user functions: the main script's, sourced namespaces', and (later) builtin scripts."""

    def __init__(self, builtin_dirs: list[str] | None = None):
        self.functions: dict[str, A.FunctionDef] = {}  # key "ns::name" or "name"
        self.namespaces: dict[str, str] = {}  # file path -> namespace key
        self.builtin_dirs = builtin_dirs or []
        self.sources: dict[str, str] = {}
        self.builtin_loaded: set[str] = set()
        self.builtin_missing: set[str] = set()

    def add_script(self, script: A.Script, ns: str) -> None:
        for name, f in script.functions.items():
            self.functions[f"{ns}::{name}" if ns else name] = f
            f.file = script.path

    def load_namespace(self, imp: A.Import, base_dir: str, ns_prefix: str) -> None:
        path = imp.path if os.path.isabs(imp.path) else os.path.join(base_dir, imp.path)
        if not os.path.exists(path) and os.path.exists(imp.path):
            path = imp.path
        if not os.path.exists(path):
            raise DMLValidationError(f"cannot find sourced file '{imp.path}'", imp.span)
        try:
            text = read_source(path, "sourced file")
        except DMLError as e:  # at the source() statement
            raise DMLValidationError(e.message, imp.span) from None
        script = parse(text, path)
        self.sources[path] = text
        ns = imp.namespace
        self.namespaces[os.path.abspath(path)] = ns
        self.add_script(script, ns)
        for sub in script.imports:
            self.load_namespace(sub, os.path.dirname(path), ns)

    def lookup(self, name: str, current_ns: str) -> tuple[str, A.FunctionDef] | None:
        if "::" in name:
            f = self.functions.get(name)
            return (name, f) if f else None
        if current_ns:
            key = f"{current_ns}::{name}"
            if key in self.functions:
                return key, self.functions[key]
        if name in self.functions:
            return name, self.functions[name]
        return None

    def load_builtin(self, name: str) -> str | None:
        """Load ``<dir>/<name>.dml`` from the builtin search path (SystemDS's script builtins);
        its functions, helpers included, live in namespace ``builtin:<name>``."""
        ns = f"builtin:{name}"
        if ns in self.builtin_loaded:
            return ns
        if name in self.builtin_missing:
            return None
        for d in self.builtin_dirs:
            path = os.path.join(d, name + ".dml")
            if os.path.exists(path):
                text = read_source(path, "builtin script")
                script = parse(text, path)
                self.sources[path] = text
                self.add_script(script, ns)
                for sub in script.imports:
                    self.load_namespace(sub, os.path.dirname(path), ns)
                self.builtin_loaded.add(ns)
                return ns
        self.builtin_missing.add(name)
        return None

    def dispatch_builtin(self, name: str, first_dt: str) -> tuple[str, A.FunctionDef] | None:
        """SystemDS picks m_<name>, s_<name> or f_<name> by the first argument's data type."""
        ns = self.load_builtin(name)
        if ns is None:
            return None
        pref = {MATRIX: "m_", SCALAR: "s_", FRAME: "f_"}.get(first_dt, "m_")
        for p in (pref, "m_", "s_", "f_", ""):
            key = f"{ns}::{p}{name}"
            if key in self.functions:
                return key, self.functions[key]
        return None


def builtin_out_type(spec: BuiltinSpec, ins: list[Hop]) -> tuple[str, str]:
    """Data and value type of a native builtin call from its catalogue rule and argument types."""
    out = spec.out
    has_m = any(i.dt == MATRIX for i in ins)
    if out == "matrix":
        return MATRIX, DOUBLE
    if out.startswith("scalar:"):
        return SCALAR, {"double": DOUBLE, "int": INT, "bool": BOOLEAN, "string": STRING}[out[7:]]
    if out in ("same", "same_double", "same_bool"):
        if has_m:
            return MATRIX, DOUBLE
        if out == "same_bool":
            return SCALAR, BOOLEAN
        if out == "same_double":
            return SCALAR, DOUBLE
        vts = {i.vt for i in ins}
        return SCALAR, INT if vts == {INT} else (UNKNOWN if UNKNOWN in vts else DOUBLE)
    if out == "agg":
        if len(ins) == 1:
            if ins[0].dt == MATRIX:
                return SCALAR, DOUBLE
            return SCALAR, ins[0].vt
        if has_m:
            return MATRIX, DOUBLE
        if len(ins) > 2:  # SystemDS: max(3, 2, 7) is the DOUBLE 7.0
            return SCALAR, DOUBLE
        vts = {i.vt for i in ins}
        return SCALAR, INT if vts == {INT} else (UNKNOWN if UNKNOWN in vts else DOUBLE)
    if out == "list":
        return LIST, UNKNOWN
    if out == "frame":
        return FRAME, UNKNOWN
    if out == "multi":
        return UNKNOWN, UNKNOWN
    if out == "none":
        return UNKNOWN, UNKNOWN
    # "any": decided by argument types
    name = spec.name
    if name in ("as.scalar", "castAsScalar"):
        return SCALAR, DOUBLE if ins[0].dt == MATRIX else ins[0].vt
    if name == "ifelse":
        if any(i.dt == MATRIX for i in ins):
            return MATRIX, DOUBLE
        b = [ins[1].vt, ins[2].vt]
        if b[0] == b[1]:
            return SCALAR, b[0]
        if STRING in b:
            return SCALAR, STRING
        return SCALAR, DOUBLE if UNKNOWN not in b else UNKNOWN
    if name == "quantile":
        p = ins[1] if len(ins) > 1 else None
        if p is not None and p.dt == MATRIX:
            return MATRIX, DOUBLE
        return SCALAR, DOUBLE
    return UNKNOWN, UNKNOWN
