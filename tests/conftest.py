"""Shared test setup: every in-process run checks predicted metadata against runtime metadata."""

from __future__ import annotations

import os

os.environ.setdefault("LAFUSE_CHECK_METADATA", "1")
