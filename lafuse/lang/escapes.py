"""String literal escapes as SystemDS applies them (used by the grammar's transformer and by tests)."""

from __future__ import annotations

import re

# SystemDS 3.4 unescapes these; a doubled backslash stays doubled (verified: print("c\\d") prints c\\d)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\\\", '"': '"', "'": "'"}


def unescape(body: str) -> str:
    """String escapes as SystemDS applies them (Java-like, but ``\\\\`` is kept as two backslashes)."""

    def rep(m: re.Match) -> str:
        s = m.group(0)
        if s[1] == "u":
            return chr(int(s[2:], 16))
        return _ESCAPES.get(s[1], s[1])

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", rep, body)
