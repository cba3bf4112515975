"""One detection record per answer, ``<state>/fired/<session>/<key>``: whoever creates it first
logs the detection. ``<key>.acted``: a Stop hook stopped the turn (no clear request)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from .files import create_new, is_plain_id, read_small_file, state_folder

__all__ = [
    "ACTED_SUFFIX", "RECORDS_DIR", "first_to_act", "first_to_record", "forget_session",
    "mark_acted", "move_session", "record_detection", "record_key", "recorded_keys"]

RECORDS_DIR = "fired"
ACTED_SUFFIX = ".acted"
_MAX_KEYS = 10_000  # most keys read for one session (weeks of looping: a few hundred)


def record_key(prompt_uuid: str, answer_uuid: str = "") -> str | None:
    """The record key of an answer: the re-prompt it answered, else its own uuid."""
    for candidate in (prompt_uuid, answer_uuid):
        if candidate and is_plain_id(candidate):
            return candidate
    return None


def _folder(state: Path, session_id: str, *, create: bool = False) -> Path:
    """``fired/<session>``, checked (``state_folder``)."""
    if not is_plain_id(session_id):
        raise ValueError(f"not a plain session id: {session_id!r}")
    return state_folder(state, RECORDS_DIR, session_id, create=create)


def _create(state: Path, session_id: str, name: str, data: bytes) -> bool:
    """Create the record ``name`` exclusively; False when it exists."""
    return create_new(_folder(state, session_id, create=True) / name, data)


def record_detection(state: Path, session_id: str, key: str, *, source: str, rule: str) -> bool:
    """Record the detection of the answer ``key``; True for the first only."""
    if not is_plain_id(key):
        raise ValueError(f"not a plain record key: {key!r}")
    data = orjson.dumps({"source": source, "rule": rule, "at": time.time()})
    return _create(state, session_id, key, data)


def first_to_record(state: Path, session_id: str, key: str | None, *, source: str, rule: str,
                    on_error: Callable[[Exception], None] | None = None) -> bool:
    """``record_detection``, but True when that cannot be told (``on_error``: why)."""
    if key is None:
        return True
    try:
        return record_detection(state, session_id, key, source=source, rule=rule)
    except (OSError, ValueError) as error:
        if on_error is not None:
            on_error(error)
        return True


def first_to_act(state: Path, session_id: str, key: str) -> bool:
    """``mark_acted``; True also when the mark cannot be written."""
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
    """The session's recorded answers' keys (``acted_only``: the turns stopped)."""
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
                    acted.add(name)
                if len(recorded) >= _MAX_KEYS:
                    break
    except (OSError, ValueError):
        return set()
    return acted if acted_only else recorded


def move_session(state: Path, old: str, new: str) -> int:
    """Move a session's records under another id (its transcript was renamed)."""
    if old == new:
        return 0
    copied = 0
    try:
        source = _folder(state, old)
        names = os.listdir(source) if is_plain_id(new) else []
    except (OSError, ValueError):
        names = []
    for name in names:
        if not is_plain_id(name.removesuffix(ACTED_SUFFIX)):
            continue
        try:
            copied += _create(state, new, name, read_small_file(source / name, 4096))
        except OSError:
            continue
    forget_session(state, old)
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
