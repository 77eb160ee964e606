"""Waiting for what a test or a benchmark expects to happen: one poll loop for all."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough for a promotion, a run and a status write on a loaded 2-core machine.
DEADLINE = 90.0


class WaitTimeout(AssertionError):
    """What was waited for did not happen in time (an assertion: the test fails)."""


def wait_for(what: str, check: Callable[[], T | None], *, timeout: float = DEADLINE,
             interval: float = 0.2) -> T:
    """Poll ``check`` until it returns something truthy and return that; after
    ``timeout`` seconds fail naming ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what} "
                              f"(last: {last!r})")
        time.sleep(interval)
