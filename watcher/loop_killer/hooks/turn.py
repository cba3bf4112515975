"""The Stop hook's judgement of reply N from its input and the session's record, never from a
transcript that may not hold reply N yet. A twin hook for the same reply counts nothing."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.judge import Detection, Run
from ..engine.transcript import GoalStatus, TurnStart, parse_line, parse_timestamp
from ..state import session as store
from ..state.files import open_transcript
from ..state.tailing import iter_lines_backwards

if TYPE_CHECKING:
    from ..engine.transcript import Event
    from ..state.config import Settings

__all__ = ["Judged", "goal_set", "judge", "prompt_time"]

TWIN_MARGIN = 0.015  # saved later than this before this process started: a twin's

_TAIL = 8 * 1024 * 1024  # the transcript's bytes read back for a prompt or a goal


@dataclass(frozen=True, slots=True)
class Judged:
    """What the record says of reply N."""

    detection: Detection | None
    reprompts: int  # the turn's re-prompts answered so far
    started_at: float | None  # when the turn began (if known)
    twin: bool = False  # another hook already judged this very reply


def boot_clock() -> float:
    """Seconds on a clock nobody sets (Linux: since boot, suspend included)."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


def judge(state: str, session_id: str, *, prompt_id: str, message: str, settings: Settings,
          transcript_path: str, spawn_time: float | None, need_start: bool = False) -> Judged:
    """Count reply N (it answers a re-prompt) in the turn's run; OSError: judge nothing."""
    path = store.state_path(state, session_id)
    read_start = None  # the turn's start, read once a turn, out of the lock every hook waits for
    if need_start and _started(store.turn_of(store.load(path)), prompt_id) is None:
        read_start = prompt_time(transcript_path)
    with store.locked(state):
        kept = store.load(path)
        turn = store.turn_of(kept)
        marked = store.take_work_marker(path)  # (always taken: a stale one is no work)
        work = turn.get("work") is True or marked
        if turn.get("prompt") not in (prompt_id, None):
            turn = {}  # a new turn (its calls' work stays: when in doubt, work)
        stops = turn.get("stops")
        stops = stops if isinstance(stops, int) and stops >= 0 else 0
        started = _started(turn, prompt_id)
        started = read_start if started is None else started
        run = Run.from_state(turn.get("run"), settings.thresholds)
        if _twin(turn.get("at"), spawn_time):
            return Judged(None, stops, started, twin=True)
        stops += 1
        detection = None
        if work:
            run.reset()
        else:
            run.extend(f"{prompt_id}:{stops}", prompt_id,
                       time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), message)
            detection = run.check(session_id)
            if detection is not None:
                run.reset()  # the run starts afresh after the answer that fired
        store.save_turn(path, store.with_turn(kept, {
            "prompt": prompt_id, "stops": stops, "started_at": started, "run": run.to_state(),
            "seen": store.seen_of(turn), "at": boot_clock(), "judged_at": time.time()}))
    return Judged(detection, stops, started)


def _started(turn: dict[str, object], prompt_id: str) -> float | None:
    """When the turn began, as its record keeps it (None: not kept, or another turn's)."""
    started = turn.get("started_at")
    if turn.get("prompt") not in (prompt_id, None) or isinstance(started, bool) \
            or not isinstance(started, (int, float)):
        return None
    return float(started)


def _twin(at: object, spawn_time: float | None) -> bool:
    """Saved after this hook process started: by another hook for this same reply."""
    if spawn_time is None or isinstance(at, bool) or not isinstance(at, (int, float)):
        return False
    now = boot_clock()
    started = now - (time.time() - spawn_time)
    return started - TWIN_MARGIN < at <= now  # (later than now: before a restart)


def prompt_time(path: str) -> float | None:
    """When the person's last prompt (or slash command) was written; None if unknown."""
    try:
        prompt = _last_event(path, b'"user"', lambda event: isinstance(event, TurnStart)
                             and event.kind == "prompt", _TAIL)
    except OSError:
        return None
    return parse_timestamp(prompt.timestamp) if isinstance(prompt, TurnStart) else None


def goal_set(path: str) -> bool | None:
    """Whether a goal is set (neither met nor cleared); None when it cannot be told."""
    try:
        goal = _last_event(path, b"goal_status", lambda event: isinstance(event, GoalStatus), _TAIL)
    except OSError:
        return None
    return isinstance(goal, GoalStatus) and not goal.met


def _last_event(path: str, needle: bytes, wanted: Callable[[Event], bool], limit: int
                ) -> Event | None:
    """The last event within ``limit`` bytes of the end that ``wanted`` accepts (OSError)."""
    with os.fdopen(open_transcript(path), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        for _, line in iter_lines_backwards(handle, size, limit=limit):
            if needle in line:
                event = parse_line(line)
                if event is not None and wanted(event):
                    return event
    return None
