"""Waiting on a condition in tests: poll until it holds, failing the test at a deadline.

Not for: fixed pauses. A test that waits for an event names the event as a condition here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.05) -> T:
    """The first truthy value `condition()` returns; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(poll_s)
