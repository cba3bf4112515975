"""A session's status file (``<state>/status/<session>.json``), written only when it changed."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..engine.rules import text_digest
from ..state import report
from ..state.files import request_waiting
from ..state.status import SessionStatus, read_session_status, write_session_status
from .tracked import Published, Tracked

__all__ = ["publish", "unpublish_request"]

log = logging.getLogger("loop_killer.watch")


def publish(state: Path, tracked: Tracked, now: float, *, unless_on_disk: bool = False,
            home: str | None = None, budget: dict[str, Any] | None = None) -> Published:
    """Write the session's status if anything in it changed; returns what it says now."""
    seen = tracked.published
    reader = tracked.reader
    if reader is None:  # dormant: its status on disk still says what it was
        return seen
    detector = reader.detector
    last = detector.last_answer
    answer_uuid = last.uuid if last is not None else ""
    if last is not None and seen.answer_uuid != answer_uuid:
        seen = Published(seen.key, answer_uuid, text_digest(last.text), now)
    digest = seen.digest if last is not None else ""
    goal = detector.goal
    pending_request = request_waiting(state, tracked.session_id)
    streaks = tuple((label, count) for _call, label, count in tracked.tool_streaks)
    key = (reader.offset, detector.run_length, detector.chain_length, detector.awaiting,
           answer_uuid, digest, pending_request, goal, streaks,
           None if budget is None else tuple(sorted((k, str(v)) for k, v in budget.items())))
    if key == seen.key:
        return seen
    status = SessionStatus(
        session_id=tracked.session_id, transcript_path=tracked.path, project=tracked.project,
        offset=reader.offset, run_length=detector.run_length,
        chain_length=detector.chain_length, awaiting=detector.awaiting,
        last_answer_uuid=answer_uuid, last_answer_digest=digest,
        last_activity=tracked.last_activity, updated_at=now,
        goal=None if goal is None else {
            "met": goal.met, "sentinel": goal.sentinel, "cleared": goal.cleared,
            "condition": goal.condition, "reason": goal.reason, "uuid": goal.uuid,
        },
        pending_request=pending_request,
        tool_repeats=[{"call": label, "count": count} for label, count in streaks],
        extra={
            "answers_seen": detector.answers_seen,
            "would_fire_with_one_more": detector.would_fire_with_one_more(),
            "last_answer_seen_at": seen.seen_at,
            "last_answer_timestamp": last.timestamp if last is not None else "",
            "answer_in_progress": detector.answer_started, "pending_bytes": reader.pending_bytes,
            "broken_lines": reader.stats.broken, "watcher_pid": os.getpid(),
            **({"budget": budget} if budget is not None else {}),
        },
    )
    if unless_on_disk:
        previous = read_session_status(state, tracked.session_id)
        if previous is not None and _comparable(previous) == _comparable(status):
            return replace(seen, key=key)
    if not _write(state, tracked, status, home):
        return seen
    return replace(seen, key=key)


def unpublish_request(state: Path, tracked: Tracked, now: float, *, home: str | None = None
                      ) -> Published:
    """The request is gone: the status must not say it is pending."""
    if tracked.reader is not None:
        return publish(state, tracked, now, home=home)
    previous = read_session_status(state, tracked.session_id)
    if previous is not None and previous.pending_request:
        _write(state, tracked, replace(previous, pending_request=False, updated_at=now), home)
    return replace(tracked.published, key=None)


def _write(state: Path, tracked: Tracked, status: SessionStatus, home: str | None) -> bool:
    try:
        write_session_status(state, status)
    except (OSError, ValueError) as error:
        log.error("%s: cannot write its status: %s",
                  report.session_label(tracked.project, tracked.session_id, home), error)
        return False
    return True


def _comparable(status: SessionStatus) -> tuple[Any, ...]:
    """What a Stop hook or ``loop-killer status`` reads in a session status."""
    return (status.transcript_path, status.offset, status.run_length, status.chain_length,
            status.awaiting, status.last_answer_uuid, status.last_answer_digest,
            status.pending_request, status.goal, status.tool_repeats)
