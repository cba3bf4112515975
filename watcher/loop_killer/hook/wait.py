"""Bounded waiting: poll a condition every few milliseconds until it holds or time is up;
and the two small file reads that waiting needs (a size, the bytes after an offset).

The Stop hook waits only after typing ``/goal clear`` into its pane (for the proof line,
at most ``terminal.CONFIRM_TIMEOUT``); nothing else in a hook ever waits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["file_size", "poll", "read_new_bytes"]

T = TypeVar("T")


def poll(
    check: Callable[[], T | None],
    *,
    timeout: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """Call ``check`` until it returns something other than None, or ``timeout`` passes.

    ``check`` runs at least once (also with a zero timeout) and once more at the deadline,
    so a result that arrives during the last sleep is not missed.
    """
    deadline = clock() + max(0.0, timeout)
    while True:
        result = check()
        if result is not None:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            return None
        sleep(min(interval, remaining))


def file_size(path: str) -> int | None:
    """The size of ``path`` in bytes; None when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def read_new_bytes(path: str, offset: int, *, limit: int = 4 * 1024 * 1024) -> bytes:
    """The bytes of ``path`` from ``offset`` (at most ``limit``); b"" when none, unreadable
    or not a regular file (a FIFO is never waited on)."""
    from ..state.files import open_transcript

    try:
        fd = open_transcript(path)
    except OSError:
        return b""
    try:
        size = os.fstat(fd).st_size
        if size <= offset:
            return b""
        return os.pread(fd, min(size - offset, limit), offset)
    except OSError:
        return b""
    finally:
        os.close(fd)
