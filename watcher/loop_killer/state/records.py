"""One detection record per answer: whoever records a detection first logs it.

The watcher (from the transcript) and the Stop hook (from its tail plus
``last_assistant_message``) may both judge the same answer. Neither waits for the other:
each records the detection with an exclusive create, and only the one whose create
succeeds writes the detection log line (and, for the watcher, the clear request).

* ``<state>/fired/<session>/<key>``: the detection is recorded (tiny JSON: who, rule, when).
* ``<state>/fired/<session>/<key>.acted``: a Stop hook stopped the turn for it. A clear
  request for an answer already acted on is void: the next Stop drops it.

The key is the uuid of the re-prompt the answer answered: the watcher knows it from the
file, and the hook knows it even when the answer itself is not written yet (the
transcript lags behind the Stop hook). Without it, the answer's own uuid.

The keys of a session are also what must never fire again (a restarted watcher, a
detector rebuilt from a tail). Records are removed with the session's transcript by the
watcher's housekeeping.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from .files import create_new, is_plain_id, read_small_file, state_folder

__all__ = [
    "ACTED_SUFFIX",
    "RECORDS_DIR",
    "first_to_act",
    "first_to_record",
    "forget_session",
    "mark_acted",
    "move_session",
    "record_detection",
    "record_key",
    "recorded_and_acted",
    "recorded_keys",
]

RECORDS_DIR = "fired"
ACTED_SUFFIX = ".acted"
_MAX_KEYS = 10_000
"""Most keys read for one session (a session that looped for weeks has a few hundred)."""


def record_key(prompt_uuid: str, answer_uuid: str = "") -> str | None:
    """The record key of an answer: the re-prompt it answered, else its own uuid; None
    when neither is a plain id (then nothing can be recorded)."""
    for candidate in (prompt_uuid, answer_uuid):
        if candidate and is_plain_id(candidate):
            return candidate
    return None


def _folder(state: Path, session_id: str, *, create: bool = False) -> Path:
    """``fired/<session>``, checked (``state_folder``): neither it, ``fired/`` nor the
    state folder is a link. Raises ValueError, NotAFolder, FileNotFoundError."""
    if not is_plain_id(session_id):
        raise ValueError(f"not a plain session id: {session_id!r}")
    return state_folder(state, RECORDS_DIR, session_id, create=create)


def _create(state: Path, session_id: str, name: str, data: bytes) -> bool:
    """Create the record ``name`` exclusively (never through a link); False when it
    exists."""
    return create_new(_folder(state, session_id, create=True) / name, data)


def record_detection(state: Path, session_id: str, key: str, *, source: str, rule: str
                     ) -> bool:
    """Record the detection of the answer ``key``; True for the first recorder only.

    Raises OSError (and ValueError for an unsafe id) when the record cannot be written:
    the caller then logs the detection anyway (a second log line beats a lost one).
    """
    if not is_plain_id(key):
        raise ValueError(f"not a plain record key: {key!r}")
    data = orjson.dumps({"source": source, "rule": rule, "at": time.time()})
    return _create(state, session_id, key, data)


def first_to_record(state: Path, session_id: str, key: str | None, *, source: str, rule: str,
                    on_error: Callable[[Exception], None] | None = None) -> bool:
    """``record_detection``, for a caller deciding whether to log: True when it is the first
    to record ``key``, and also when that cannot be told (no key, or a record that cannot
    be written: one log line too many beats a detection never logged). ``on_error`` is told
    why a record could not be written."""
    if key is None:
        return True
    try:
        return record_detection(state, session_id, key, source=source, rule=rule)
    except (OSError, ValueError) as error:
        if on_error is not None:
            on_error(error)
        return True


def first_to_act(state: Path, session_id: str, key: str) -> bool:
    """``mark_acted`` for a Stop hook about to stop the turn: False only when another hook
    already did; a mark that cannot be written is no reason not to act."""
    try:
        return mark_acted(state, session_id, key)
    except (OSError, ValueError):
        return True


def mark_acted(state: Path, session_id: str, key: str) -> bool:
    """Note that a Stop hook stopped the turn for ``key``; True for the first one only."""
    if not is_plain_id(key):
        raise ValueError(f"not a plain record key: {key!r}")
    return _create(state, session_id, f"{key}{ACTED_SUFFIX}", b"")


def recorded_keys(state: Path, session_id: str, *, acted_only: bool = False) -> set[str]:
    """Every answer (by key) of the session recorded as fired, or (``acted_only``) for
    which a Stop hook stopped the turn; empty when none or unsafe."""
    recorded, acted = recorded_and_acted(state, session_id)
    return acted if acted_only else recorded


def recorded_and_acted(state: Path, session_id: str) -> tuple[set[str], set[str]]:
    """(every answer of the session recorded as fired, those a Stop hook stopped the turn
    for), by key, from one listing of its folder; empty when none or unsafe."""
    recorded: set[str] = set()
    acted: set[str] = set()
    try:
        with os.scandir(_folder(state, session_id)) as entries:
            for entry in entries:
                name = entry.name.removesuffix(ACTED_SUFFIX)
                if not is_plain_id(name):
                    continue
                recorded.add(name)
                if len(name) < len(entry.name):
                    acted.add(name)  # (recorded, and a Stop hook stopped its turn)
                if len(recorded) >= _MAX_KEYS:
                    break
    except (OSError, ValueError):
        return set(), set()
    return recorded, acted


def move_session(state: Path, old: str, new: str) -> int:
    """Move a session's records under another id (its transcript was renamed): copied,
    then the old id's removed; how many were copied. Records the new id already has are
    kept; back under its own id, nothing moves."""
    if old == new:
        return 0
    copied = _copy_session(state, old, new)
    forget_session(state, old)
    return copied


def _copy_session(state: Path, old: str, new: str) -> int:
    try:
        source = _folder(state, old)
        names = os.listdir(source)
        if not is_plain_id(new):
            return 0
    except (OSError, ValueError):
        return 0
    copied = 0
    for name in names:
        if not is_plain_id(name.removesuffix(ACTED_SUFFIX)):
            continue
        try:
            data = read_small_file(source / name, 4096)
            copied += _create(state, new, name, data)
        except OSError:
            continue
    return copied


def forget_session(state: Path, session_id: str) -> int:
    """Remove a session's records (its transcript is gone); how many files went."""
    try:
        if not is_plain_id(session_id):
            return 0
        folder = state_folder(state, RECORDS_DIR) / session_id
        if os.path.islink(folder):
            os.unlink(folder)  # the link goes, never what it points to
            return 0
        names = os.listdir(_folder(state, session_id))
    except OSError:
        return 0
    removed = 0
    for name in names:
        try:
            os.unlink(folder / name)
            removed += 1
        except OSError:
            pass
    with contextlib.suppress(OSError):
        os.rmdir(folder)
    return removed
