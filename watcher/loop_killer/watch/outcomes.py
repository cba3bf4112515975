"""What became of a detection (pure): the first of the goal cleared, the turn stopped, a
person's prompt first (the request withdrawn), or at the timeout whether the loop went on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..engine.transcript import parse_timestamp

__all__ = ["HISTORY_AGE", "HOOKS_WORD", "OUTCOME_TIMEOUT", "Outcome", "OutcomeKind",
           "PendingOutcome", "at_deadline", "is_historic"]

OUTCOME_TIMEOUT = 60.0  # seconds after a detection at which the watcher says its outcome
HISTORY_AGE = 600.0
"""A loop found in the history a file appeared with (a copy, a fork) fires only if its
last answer is younger than this."""

OutcomeKind = Literal["cleared", "stopped", "continued", "superseded", "none", "not_requested",
                      "warned"]


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: OutcomeKind
    detail: str


@dataclass(frozen=True, slots=True)
class PendingOutcome:
    answer_uuid: str
    rule: str  # a Rule, or a rule another writer of the detection log named
    detected_at: float  # seconds since the epoch
    deadline: float  # monotonic seconds
    stopped: bool = False  # "stopped" was reported; still waiting for a clear
    requested: bool = True  # a clear request was written for it (or a hook acted on it)
    key: str | None = None  # its record key (``state.records``): did a Stop hook act on it?
    hook_acted: bool = False  # a Stop hook fired on it by itself (its detection was logged)


HOOKS_WORD = frozenset({"stopped", "cleared"})
"""Outcomes a Stop hook that acted logs itself: the watcher logs them only for a loop no
Stop hook acted on."""


def at_deadline(pending: PendingOutcome, *, more_answers: int, request_pending: bool,
                timeout: float) -> Outcome | None:
    """The outcome to report when the timeout passes (None if already reported)."""
    if pending.stopped:
        return None
    if more_answers:
        plural = "s" if more_answers != 1 else ""
        return Outcome("continued", f"{more_answers} more re-prompt answer{plural} came "
                                    "after the request")
    if not pending.requested:
        return Outcome("not_requested", f"no change within {timeout:.0f} s, and no clear "
                                        "request could be written")
    if not request_pending:
        return Outcome("stopped", "the request was taken and no re-prompt followed")
    return Outcome("none", f"no change within {timeout:.0f} s; the request is still "
                           "pending")


def is_historic(timestamp: str, now: float, *, max_age: float = HISTORY_AGE) -> bool:
    """Whether an answer written at ``timestamp`` is too old to act on (unknown: no)."""
    moment = parse_timestamp(timestamp)
    return moment is not None and now - moment > max_age
