"""Polling for the tests that wait on a real server or thread."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(done: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Poll ``done`` until it holds; a guard against hanging, not a timing assertion."""
    deadline = time.monotonic() + limit
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)
