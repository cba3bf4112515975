"""Whether a session has a call refused now: its refusal mark, and a hook's refusals since."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .journal import Record, ToolRecord

__all__ = ["CLOCK_SLACK", "Refused", "hook_refusals", "refused_now"]

CLOCK_SLACK = 1.0  # seconds a refusal logged may seem to precede its mark (two clocks)


@dataclass(frozen=True, slots=True)
class Refused:
    """A session's last refused call, and how many times in a row it was refused."""

    call: str
    attempts: int
    at: float | None


def hook_refusals(records: Iterable[Record]) -> dict[str, list[ToolRecord]]:
    """Per session, the refusals a hook logged, oldest first."""
    found: dict[str, list[ToolRecord]] = {}
    for record in records:
        if isinstance(record, ToolRecord) and record.refused and record.source == "hook":
            found.setdefault(record.session_id, []).append(record)
    return found


def refused_now(state: Path, session_id: str, refusals: list[ToolRecord]) -> Refused | None:
    """The session's refused call while the hooks' mark is there; else None."""
    from .session import refusal_marker, state_path

    try:
        info = os.lstat(refusal_marker(state_path(state, session_id)))
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    since = [r for r in refusals if not r.at or r.at >= info.st_mtime - CLOCK_SLACK]
    if not since:
        return None
    last = since[-1]
    # The log holds one record per refused call; its attempts are the hooks' own count.
    from . import session as store
    from .config import Settings

    try:
        attempts = store.counter(store.load(state_path(state, session_id)), store.MAIN,
                                 Settings()).refused
    except (OSError, ValueError):
        attempts = 1
    return Refused(last.call, max(1, attempts), last.at or None)
