"""Every rewrite test runs with the DAG validator after each rule application."""

from __future__ import annotations

import pytest

from lafuse.rewrite import driver


@pytest.fixture(autouse=True)
def _validate_every_rewrite():
    old = driver.VALIDATE
    driver.VALIDATE = True
    try:
        yield
    finally:
        driver.VALIDATE = old
