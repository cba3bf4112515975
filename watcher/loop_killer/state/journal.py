"""The detection log: one JSON line per detection and per outcome, across all sessions.

``<state>/detections.jsonl``, appended with one ``write`` per line (O_APPEND), so the
watcher and several Stop hooks can add to it at once. Read back only from its tail, so
start-up never grows with history.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .files import append_line
from .paths import ensure_private_dir

__all__ = [
    "JOURNAL_NAME",
    "Fired",
    "append",
    "fired",
    "journal_path",
    "read_recent",
]

log = logging.getLogger(__name__)

JOURNAL_NAME = "detections.jsonl"
_TAIL_BYTES = 4 * 1024 * 1024
_ROTATE_BYTES = 32 * 1024 * 1024

# Kinds of records.
DETECTION = "detection"  # a rule fired (by the watcher or the hook's own detection)
OUTCOME = "outcome"  # what became of it: cleared / stopped / not possible / nothing


def journal_path(state: Path) -> Path:
    return state / JOURNAL_NAME


def append(state: Path, record: dict[str, Any]) -> None:
    """Append one record (``event`` and ``at`` are filled in when missing)."""
    record = {"at": time.time(), **record}
    line = orjson.dumps(record) + b"\n"
    path = journal_path(state)
    try:
        ensure_private_dir(state)
        _rotate_if_large(path)
        append_line(path, line)
    except OSError as error:
        log.error("cannot write the detection log %s: %s", path, error)


def _rotate_if_large(path: Path) -> None:
    try:
        if path.stat().st_size > _ROTATE_BYTES:
            os.replace(path, path.with_suffix(".jsonl.1"))
    except FileNotFoundError:
        pass


def read_recent(
    state: Path, *, max_bytes: int = _TAIL_BYTES, containing: bytes = b""
) -> Iterator[dict[str, Any]]:
    """Records from the last ``max_bytes`` of the log, oldest first; broken lines skipped.

    With ``containing``, only lines holding those bytes are parsed (a cheap filter).
    """
    path = journal_path(state)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as error:
        log.warning("cannot read the detection log %s: %s", path, error)
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            log.warning("the detection log %s is not a regular file", path)
            return
        start = max(0, info.st_size - max_bytes)
        data = os.pread(fd, info.st_size - start, start)
    except OSError as error:
        log.warning("cannot read the detection log %s: %s", path, error)
        return
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first one is cut
    for line in lines:
        if not line.strip() or (containing and containing not in line):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record


@dataclass(slots=True)
class Fired:
    """What already fired in one session: never fire on these again."""

    answers: set[str] = field(default_factory=set)  # uuids of answers that fired
    prompts: set[str] = field(default_factory=set)  # uuids of the re-prompts they answered

    def __contains__(self, uuid: object) -> bool:
        return uuid in self.answers or uuid in self.prompts


def fired(state: Path, session_id: str | None = None) -> dict[str, Fired]:
    """Per session, the answers (and re-prompts answered) that already fired.

    The Stop hook may fire on a reply before it is on disk: it then logs the re-prompt
    the reply answered (``prompt_uuid``) instead of, or besides, the answer's uuid.
    """
    found: dict[str, Fired] = {}
    key = session_id.encode() if session_id else b'"detection"'
    for record in read_recent(state, containing=key):
        session = record.get("session_id")
        if record.get("event") != DETECTION or not isinstance(session, str):
            continue
        if session_id is not None and session != session_id:
            continue
        entry = found.setdefault(session, Fired())
        for name, bucket in (("answer_uuid", entry.answers), ("prompt_uuid", entry.prompts)):
            value = record.get(name)
            if isinstance(value, str) and value:
                bucket.add(value)
    return found

