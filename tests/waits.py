"""The one bounded wait of the test suite: poll until something holds, fail after a timeout.

Tests wait for an event (a file written, a line on a screen, a process gone), never for a
fixed time. Imported as ``from waits import wait_for`` (tests/ is on the import path, as
for ``must_run`` and ``transcripts``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 5.0,
             what: str | Callable[[], str] = "condition", *, every: float = 0.005) -> T:
    """Poll ``predicate`` every ``every`` seconds until it returns something truthy, and
    return that. After ``timeout`` seconds (the predicate is tried once more at the end),
    raise TimeoutError saying what was awaited: ``what``, or what it returns when it is a
    function (called then, e.g. for the last screen seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {said}")
        time.sleep(every)
