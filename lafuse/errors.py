"""Errors that name a DML source position.

Every user-facing error renders as ``file:line:col: message`` followed by the source line and a
caret, so the CLI never needs a Python traceback to explain a mistake in a script.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A region of DML source: 1-based line and column, end inclusive-exclusive."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<unknown>", 0, 0)


class DMLError(Exception):
    """Base class of all errors a DML script can cause."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span

    def with_span(self, span: Span | None) -> DMLError:
        if self.span is None and span is not None:
            self.span = span
        return self

    def render(self, sources: dict[str, str] | None = None) -> str:
        """One ``file:line:col: message`` line, then the source line and a caret when known."""
        if self.span is None or self.span.line <= 0:
            return f"{self.kind}: {self.message}"
        head = f"{self.span}: {self.kind}: {self.message}"
        text = (sources or {}).get(self.span.file)
        if text is None:
            try:
                with open(self.span.file, encoding="utf-8", errors="replace") as f:  # never fail to report
                    text = f.read()
            except OSError:
                return head
        lines = text.splitlines()
        if not 1 <= self.span.line <= len(lines):
            return head
        src = lines[self.span.line - 1].rstrip("\n").expandtabs(1)
        width = 1
        if self.span.end_line == self.span.line and self.span.end_col > self.span.col:
            width = self.span.end_col - self.span.col
        caret = " " * (self.span.col - 1) + "^" + "~" * (width - 1)
        return f"{head}\n    {src}\n    {caret}"

    def __str__(self) -> str:
        return f"{self.span}: {self.message}" if self.span else self.message


class DMLSyntaxError(DMLError):
    kind = "syntax error"


class DMLValidationError(DMLError):
    kind = "validation error"


class DMLSizeError(DMLValidationError):
    """A dimension conflict found only because sizes were known at compile time. In a function body
    compiled with call-site sizes (IPA) it may sit in a branch those sizes make dead, so the body is
    rebuilt with unknown sizes instead (SystemDS validates functions without IPA sizes)."""


class DMLRuntimeError(DMLError):
    kind = "runtime error"


class DMLStop(DMLError):
    """Raised by ``stop(msg)``: the script asked to end with an error."""

    kind = "stop"
