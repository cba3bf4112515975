"""How far behind the watcher's thread is: ``Pace`` keeps the longest a hint or unread
bytes waited, says when past ``BEHIND_LAG`` and when caught up (``release_memory`` then).
"""

from __future__ import annotations

import gc

from ..state import report
from ..state.status import BEHIND_LAG

__all__ = ["BEHIND_REPEAT", "Pace", "release_memory"]

BEHIND_REPEAT = 60.0  # seconds between two lines saying the watcher is still behind


class Pace:
    """The longest a hint waited to be taken, or bytes written waited to be read, between
    two beats, and what to log of it (pure)."""

    __slots__ = ("_said_at", "behind_since", "events", "lag")

    def __init__(self) -> None:
        self.lag = 0.0
        self.events = 0  # events the hints taken since the last beat stood for
        self.behind_since: float | None = None
        self._said_at = 0.0

    def took(self, waited: float, events: int) -> None:
        self.lag = max(self.lag, waited)
        self.events += events

    def unread_for(self, seconds: float) -> None:
        self.lag = max(self.lag, seconds)

    def beat(self, now: float, *, interval: float, unread_files: int
             ) -> tuple[float, str | None, bool]:
        """(the lag since the last beat, a line to log or None, whether the watcher just
        caught up); starts the next interval."""
        lag, events = self.lag, self.events
        self.lag, self.events = 0.0, 0
        if lag >= BEHIND_LAG:
            if self.behind_since is None:
                self.behind_since = self._said_at = now
            elif now - self._said_at < BEHIND_REPEAT:
                return lag, None, False
            self._said_at = now
            return lag, report.behind_line(lag=lag, events=events, seconds=interval,
                                           unread_files=unread_files,
                                           for_seconds=now - self.behind_since), False
        if self.behind_since is not None:
            took, self.behind_since = now - self.behind_since, None
            return lag, report.caught_up_line(took), True
        return lag, None, False


def release_memory() -> None:
    """Give back what a flood took: collect cycles, then (glibc) return the freed heap."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator gives back on its own
        pass
