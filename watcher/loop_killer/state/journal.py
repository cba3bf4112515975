"""The detection log: one JSON line per detection and per outcome, across all sessions.

``<state>/detections.jsonl``, appended with one ``write`` per line (O_APPEND), so the
watcher and several Stop hooks can add to it at once. Read back only from its tail, so
start-up never grows with history.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .paths import ensure_private_dir

__all__ = ["JOURNAL_NAME", "append", "fired_answers", "journal_path", "read_recent"]

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
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as error:
        log.error("cannot write the detection log %s: %s", path, error)


def _rotate_if_large(path: Path) -> None:
    try:
        if path.stat().st_size > _ROTATE_BYTES:
            os.replace(path, path.with_suffix(".jsonl.1"))
    except FileNotFoundError:
        pass


def read_recent(state: Path, *, max_bytes: int = _TAIL_BYTES) -> Iterator[dict[str, Any]]:
    """Records from the last ``max_bytes`` of the log, oldest first; broken lines skipped."""
    path = journal_path(state)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return
    except OSError as error:
        log.warning("cannot read the detection log %s: %s", path, error)
        return
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first one is cut
    for line in lines:
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record


def fired_answers(state: Path) -> dict[str, set[str]]:
    """Per session, the uuids of answers that already fired (so they never fire again)."""
    fired: dict[str, set[str]] = {}
    for record in read_recent(state):
        if record.get("event") != DETECTION:
            continue
        session, uuid = record.get("session_id"), record.get("answer_uuid")
        if isinstance(session, str) and isinstance(uuid, str) and uuid:
            fired.setdefault(session, set()).add(uuid)
    return fired
