"""DML source text -> AST (``lafuse.lang.ast``) with spans, and script files read as text.

Why a cache in front of the parser: lark's import, its tables and the parse take ~0.13 s of every
start, more than the rest of a small script's compilation. The AST of a parsed script is kept in
the plan-cache directory, signed like every file there (``lafuse.cachedir``: checked directory,
per-user HMAC key; a file whose tag does not verify is ignored), keyed by the text, the path its
spans name, the front end's sources and the installed lark. A script run before then never imports
lark. At most ``cachedir.PARSED_AST[2]`` are kept (least recently used removed); ``lafuse cache clear`` removes
them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys

from lafuse import cachedir
from lafuse.errors import DMLSyntaxError
from lafuse.lang import ast as A
from lafuse.lang.escapes import unescape

__all__ = ["parse", "parse_file", "read_source", "unescape"]

_HERE = os.path.dirname(__file__)
_STAMP_FILES = ("ast.py", "escapes.py", "grammar.py", "parser.py", "dml.lark")
MAX_CACHED_TEXT = 1 << 20  # bytes; longer scripts are parsed every time


@functools.lru_cache(maxsize=1)
def _stamp() -> bytes:
    """What an AST depends on besides the text: the front end's sources, lark's installed files
    (found without importing lark) and the Python that pickles."""
    import importlib.util  # deferred: ~2 ms, only to find the cached parse module

    h = hashlib.sha256(sys.version.encode())
    for name in _STAMP_FILES:
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(f.read())
    spec = importlib.util.find_spec("lark")
    if spec is not None and spec.origin:
        st = os.stat(spec.origin)
        h.update(f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.digest()


def _cache_name(text: str, path: str) -> str:
    h = hashlib.sha256(_stamp())
    for part in (path, text):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    prefix, suffix, _ = cachedir.PARSED_AST
    return f"{prefix}{h.hexdigest()[:32]}{suffix}"


def _cached(name: str) -> A.Script | None:
    payload = cachedir.load_file(name)
    if payload is None:
        return None
    try:
        script = pickle.loads(payload)  # noqa: S301 - our own file, its HMAC tag verified
    except Exception:  # noqa: BLE001 - not loadable: parsed (and stored) again
        return None
    return script if isinstance(script, A.Script) else None


def _store(name: str, script: A.Script) -> None:
    try:
        payload = pickle.dumps(script, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an AST too deep to pickle: the next run parses again
        return
    cachedir.store_file(name, payload, *cachedir.PARSED_AST)


def parse(text: str, path: str = "<string>") -> A.Script:
    cacheable = len(text) <= MAX_CACHED_TEXT and os.environ.get("LAFUSE_AST_CACHE", "1") != "0"
    name = _cache_name(text, path) if cacheable else ""
    if cacheable:
        script = _cached(name)
        if script is not None:
            return script
    from lafuse.lang.grammar import parse_text  # deferred: the grammar and lark, only on a parse-cache miss

    script = parse_text(text, path)
    if cacheable:
        _store(name, script)
    return script


def read_source(path: str, what: str = "script") -> str:
    """The text of a DML file. A file that cannot be read (missing, a directory, no permission) or
    that is not UTF-8 is an error that names it, and for bad bytes where they are."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DMLSyntaxError(f"cannot read {what} '{path}': {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DMLSyntaxError(f"cannot read {what} '{path}': it is not UTF-8 text (byte 0x{data[e.start]:02x} at "
                             f"line {line}, byte {col} of the line)") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it (universal newlines)


def parse_file(path: str) -> A.Script:
    return parse(read_source(path), path)
