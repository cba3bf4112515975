"""What the watcher publishes: its heartbeat and each session's status, written atomically."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ..engine.budget import Budget, TurnUse, read_figures
from .files import is_plain_id, read_json_object, state_folder, write_private_file

__all__ = [
    "BEHIND_LAG", "HEARTBEAT_INTERVAL", "HEARTBEAT_STALE", "SessionStatus", "WatcherHeartbeat",
    "falling_behind", "read_heartbeat", "read_session_status", "session_status_path",
    "written_statuses", "watcher_alive", "write_heartbeat", "write_session_status"]

HEARTBEAT_INTERVAL = 2.0
HEARTBEAT_STALE = 10.0  # an older heartbeat means no live watcher

STATUS_VERSION = 1


@dataclass(frozen=True, slots=True)
class WatcherHeartbeat:
    pid: int
    started_at: float
    beat_at: float
    root: str
    sessions: int = 0
    polling: bool = False
    version: int = STATUS_VERSION
    lag: float = 0.0  # the longest a file-system event waited, since the last beat (s)
    waiting: int = 0  # events come in while the watcher was busy, not yet handled


BEHIND_LAG = 3.0  # events waiting this long (s): the watcher is falling behind


def falling_behind(beat: WatcherHeartbeat) -> str | None:
    """What ``loop-killer status`` says of a watcher falling behind; None when it is not."""
    if beat.lag < BEHIND_LAG:
        return None
    return f"falling behind: file events waited up to {beat.lag:.1f} s ({beat.waiting} waiting)"


@dataclass(frozen=True, slots=True)
class SessionStatus:
    session_id: str
    transcript_path: str
    project: str
    offset: int  # bytes of the transcript read (whole lines only)
    run_length: int
    chain_length: int
    awaiting: str | None  # a PromptKind: "reprompt" when a re-prompt's answer is pending
    last_answer_uuid: str
    last_answer_digest: str
    last_activity: float  # when the transcript last grew
    updated_at: float
    goal: dict[str, Any] | None = None
    pending_request: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # Calls giving the same result again in the person's turn: {"call", "count"}, newest last.
    tool_repeats: list[dict[str, Any]] = field(default_factory=list)
    version: int = STATUS_VERSION

    @property
    def in_turn(self) -> bool:
        """An answer is pending or on its way: the person's turn goes on."""
        return self.awaiting is not None or bool(self.extra.get("answer_in_progress"))

    def turn_budget(self) -> tuple[Budget, TurnUse] | None:
        """The limits and the live turn's use of them, as published; else None."""
        return read_figures(self.extra.get("budget")) if self.in_turn else None


_Record = TypeVar("_Record", "WatcherHeartbeat", "SessionStatus")


def _build(kind: type[_Record], raw: dict[str, Any] | None) -> _Record | None:
    """``kind(**raw)`` when every field has the declared type, else None."""
    if raw is None or raw.get("version") != STATUS_VERSION:
        return None
    hints = {f.name: f for f in fields(kind)}
    raw = {name: value for name, value in raw.items() if name in hints}  # newer fields
    for name, value in raw.items():
        declared = hints[name].type
        expected = _TYPES.get(declared) if isinstance(declared, str) else None
        if expected is None:
            continue
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            return None
    try:
        return kind(**raw)
    except TypeError:
        return None


# The annotations of the two records (strings, under postponed evaluation) -> types.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
    "str | None": (str, type(None)), "dict[str, Any] | None": (dict, type(None)),
    "dict[str, Any]": (dict,), "list[dict[str, Any]]": (list,)}


def heartbeat_path(state: Path) -> Path:
    return state / "watcher.json"


def write_heartbeat(state: Path, beat: WatcherHeartbeat) -> None:
    state_folder(state, create=True)  # never written through a linked state folder
    write_private_file(heartbeat_path(state), orjson.dumps(asdict(beat)))


def read_heartbeat(state: Path) -> WatcherHeartbeat | None:
    try:
        state_folder(state)
    except OSError:
        return None
    return _build(WatcherHeartbeat, read_json_object(heartbeat_path(state)))


def watcher_alive(state: Path, *, now: float | None = None) -> WatcherHeartbeat | None:
    """The heartbeat of a live watcher, or None when none is running."""
    beat = read_heartbeat(state)
    if beat is None:
        return None
    now = time.time() if now is None else now
    if now - beat.beat_at > HEARTBEAT_STALE:
        return None
    try:
        os.kill(beat.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, someone else's
    return beat


def session_status_path(state: Path, session_id: str) -> Path:
    if not is_plain_id(session_id):
        raise ValueError(f"not a plain session id: {session_id!r}")
    return state / "status" / f"{session_id}.json"


def written_statuses(state: Path) -> list[tuple[str, float]]:
    """(session id, when last written) of every session status file."""
    try:
        folder = state_folder(state, "status")
        entries = list(os.scandir(folder))
    except (OSError, ValueError):
        return []
    found = []
    for entry in entries:
        name = entry.name
        if not name.endswith(".json") or not is_plain_id(name[:-5]):
            continue
        try:
            found.append((name[:-5], entry.stat(follow_symlinks=False).st_mtime))
        except OSError:
            continue
    return found


def write_session_status(state: Path, status: SessionStatus) -> None:
    path = session_status_path(state, status.session_id)
    state_folder(state, "status", create=True)
    write_private_file(path, orjson.dumps(asdict(status)))


def read_session_status(state: Path, session_id: str) -> SessionStatus | None:
    try:
        path = session_status_path(state, session_id)
        state_folder(state, "status")
    except (OSError, ValueError):
        return None
    return _build(SessionStatus, read_json_object(path))
