"""Shared test setup: every run (in-process and the CLI subprocesses the tests start) checks
predicted metadata against runtime metadata and validates every HOP DAG after each rewrite."""

from __future__ import annotations

import os

os.environ.setdefault("LAFUSE_CHECK_METADATA", "1")
os.environ.setdefault("LAFUSE_VALIDATE", "1")
