"""The detection log: one JSON line per detection and per outcome, across all sessions.

``<state>/detections.jsonl``, appended with one ``write`` per line (O_APPEND), so the
watcher and several Stop hooks can add to it at once. This module is its one reader:
``read_recent`` (and ``fired``) read back only the log's tail, so start-up never grows
with history; ``JournalTail`` follows what is appended, as the watcher does to learn
what the Stop hooks logged. Every read is bounded, refuses links and FIFOs, never blocks.
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
from .paths import state_folder

__all__ = [
    "JOURNAL_NAME",
    "Fired",
    "JournalTail",
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
    try:
        line = orjson.dumps(record) + b"\n"
    except TypeError:  # text from hook input that is not UTF-8 (a lone surrogate)
        line = orjson.dumps(_encodable(record)) + b"\n"
    path = journal_path(state)
    try:
        state_folder(state, create=True)
        _rotate_if_large(path)
        append_line(path, line)
    except OSError as error:
        log.error("cannot write the detection log %s: %s", path, error)


def _encodable(value: Any) -> Any:
    """``value`` with text that UTF-8 cannot hold escaped (``\\ud800``, visibly), and
    anything else orjson refuses given as its ``repr``: the record is written, not lost."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_encodable(str(key)): _encodable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(item) for item in value]
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**64:
        return value
    return _encodable(repr(value))


def _rotated(path: Path) -> Path:
    return path.with_suffix(".jsonl.1")


def _rotate_if_large(path: Path) -> None:
    try:
        if path.stat().st_size > _ROTATE_BYTES:
            os.replace(path, _rotated(path))
    except FileNotFoundError:
        pass


def _open_log(path: Path) -> tuple[int, os.stat_result]:
    """The log opened for reading (fd, fstat): no link followed, never blocking.
    Raises FileNotFoundError, or OSError (with a reason) for anything but a file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd, info


def _records(lines: list[bytes], containing: bytes = b"") -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines``; blank, broken and non-object lines skipped."""
    for line in lines:
        if not line.strip() or (containing and containing not in line):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record


def read_recent(
    state: Path, *, max_bytes: int = _TAIL_BYTES, containing: bytes = b""
) -> Iterator[dict[str, Any]]:
    """Records from the last ``max_bytes`` of the log, oldest first; broken lines skipped.

    With ``containing``, only lines holding those bytes are parsed (a cheap filter).
    """
    path = journal_path(state)
    try:
        state_folder(state)
        fd, info = _open_log(path)
    except FileNotFoundError:
        return
    except OSError as error:
        log.warning("cannot read the detection log %s: %s", path, error)
        return
    try:
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
    yield from _records(lines, containing)


class JournalTail:
    """The records appended to the detection log since the last look, oldest first.

    Reads at most ``max_bytes`` per look (the rest comes on the next), holds back a
    half-written last line, and follows a rotation: the rest of the old log is read
    before the new one. A line longer than ``max_bytes`` is dropped, once said.
    """

    def __init__(self, state: Path, *, max_bytes: int = _TAIL_BYTES) -> None:
        self.path = journal_path(state)
        self.max_bytes = max_bytes
        self.key: tuple[int, int] | None = None  # (st_dev, st_ino) of the log followed
        self.offset = 0  # bytes of it read
        self._partial = b""
        self._skipping = False  # inside a line too long to keep: drop up to its end
        self._error = ""  # the last read error logged (each one said once)

    def skip_to_end(self) -> None:
        """Start from what is appended from now on."""
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            self.key, self.offset = None, 0
        else:
            self.key, self.offset = (info.st_dev, info.st_ino), info.st_size
        self._partial, self._skipping = b"", False

    def read_new(self) -> list[dict[str, Any]]:
        try:
            state_folder(self.path.parent)  # never read through a linked state folder
            info = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return []
        except OSError as error:
            self._failed(error)
            return []
        if not stat.S_ISREG(info.st_mode):  # a link or a FIFO planted there: never read
            self._failed(OSError("not a regular file"))
            return []
        key = (info.st_dev, info.st_ino)
        records: list[dict[str, Any]] = []
        if key != self.key:
            if self.key is not None:
                records = self._read(_rotated(self.path), self.key)  # the old log's rest
            self.key, self.offset, self._partial, self._skipping = key, 0, b"", False
        elif info.st_size < self.offset:  # rewritten in place: start it afresh
            self.offset, self._partial, self._skipping = 0, b"", False
        if info.st_size > self.offset:
            records += self._read(self.path, key)
        return records

    def _read(self, path: Path, key: tuple[int, int]) -> list[dict[str, Any]]:
        """The records in the next bytes of the log at ``path``, if it is ``key``."""
        try:
            fd, info = _open_log(path)
        except FileNotFoundError:
            return []
        except OSError as error:
            self._failed(error)
            return []
        try:
            if (info.st_dev, info.st_ino) != key or info.st_size <= self.offset:
                return []
            data = os.pread(fd, min(info.st_size - self.offset, self.max_bytes), self.offset)
        except OSError as error:
            self._failed(error)
            return []
        finally:
            os.close(fd)
        self._error = ""
        self.offset += len(data)
        return list(_records(self._lines(data)))

    def _lines(self, data: bytes) -> list[bytes]:
        """The whole lines ``data`` completes; a too long partial line is dropped."""
        first = data.find(b"\n")
        if first < 0:
            if not self._skipping:
                self._partial += data
                if len(self._partial) > self.max_bytes:
                    log.warning("the detection log %s holds a line over %d bytes: skipped",
                                self.path, self.max_bytes)
                    self._partial, self._skipping = b"", True
            return []
        head = b"" if self._skipping else self._partial + data[:first]
        self._skipping = False
        lines = [head, *data[first + 1:].split(b"\n")]
        self._partial = lines.pop()
        return lines

    def _failed(self, error: OSError) -> None:
        text = str(error)
        if text != self._error:
            log.warning("cannot read the detection log %s: %s", self.path, text)
            self._error = text


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

