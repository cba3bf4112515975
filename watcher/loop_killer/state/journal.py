"""The detection log ``<state>/detections.jsonl``: one JSON line per detection and outcome."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import orjson

from ..engine.tool_repeat import TOOL_CALL_RULES
from .files import append_line, state_folder

__all__ = [
    "DETECTION", "JOURNAL_NAME", "OUTCOME", "REFUSAL", "JournalTail", "LoopRecord", "OutcomeRecord",
    "Record", "ToolRecord", "append", "decode", "encode", "journal_path", "read_recent"]

log = logging.getLogger(__name__)

JOURNAL_NAME = "detections.jsonl"
_TAIL_BYTES = 4 * 1024 * 1024
_ROTATE_BYTES = 32 * 1024 * 1024

# Kinds of records, as the log names them (its ``event``).
DETECTION = "detection"  # a rule fired (by the watcher or a hook), or a clear asked by hand
REFUSAL = "refusal"  # a tool hook refused a call that kept repeating
OUTCOME = "outcome"  # what became of it: cleared / stopped / not possible / nothing


# The field names are the line's keys; a field left None is not written.


@dataclass(frozen=True, slots=True, kw_only=True)
class _Logged:
    """What every record names."""

    event: ClassVar[str]
    session_id: str
    rule: str = ""
    project: str = ""  # the project folder's name (the transcript's folder)
    transcript_path: str = ""
    source: str = ""  # who logged it: "watcher", "hook", "manual"
    at: float = 0.0  # when (seconds since the epoch); ``append`` stamps a record left at 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopRecord(_Logged):
    """A re-prompt loop detected, or a clear asked by hand (rule ``manual``)."""

    event: ClassVar[str] = DETECTION
    answer_uuid: str = ""  # the answer that fired ("" for a clear asked by hand)
    prompt_uuid: str = ""  # the re-prompt it answered
    answer_digest: str = ""
    count: int = 0
    run_length: int = 0
    snippet: str = ""  # the answer's first words
    # The Stop hook's records only: "anchor" (reply N placed by the session's record).
    located_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRecord(_Logged):
    """A tool call repeating: the model warned (``detection``), or the call refused."""

    event: ClassVar[str] = DETECTION
    refused: bool = False  # written as the event: "refusal"
    tool: str = ""
    call: str = ""  # the call's label, as the warning names it
    count: int = 0
    tool_use_id: str = ""
    agent_id: str | None = None  # a subagent's calls: which one
    agent_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeRecord(_Logged):
    """What became of a detection: the turn stopped, the goal cleared, nothing done..."""

    event: ClassVar[str] = OUTCOME
    answer_uuid: str = ""
    outcome: str = ""
    detail: str = ""
    hands: str | None = None  # what acted: "mod", "tmux", "screen", "none"
    evidence: str | None = None  # what proved it
    after_s: float | None = None  # seconds after the detection (the watcher's)
    plan_id: str | None = None  # the mod's plan it settles
    count: int | None = None  # a refused call's attempts, when refusals ended the turn


Record = LoopRecord | ToolRecord | OutcomeRecord
"""One line of the detection log."""

_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool,
                           "str | None": str, "float | None": float, "int | None": int}
_SCHEMA: dict[type, tuple[tuple[str, type, Any], ...]] = {
    kind: tuple((f.name, _KINDS[str(f.type)], f.default) for f in fields(kind)
                if f.name not in ("refused", "event"))
    for kind in (LoopRecord, ToolRecord, OutcomeRecord)
}
_TOOL_KEYS = frozenset(("call", "tool", "tool_use_id"))  # a detection of a tool call
# Older writers' names for a field, read when the field is empty.
_ALIASES = {"outcome": ("result", "status", "action"),
            "detail": ("message", "reason", "note"), "call": ("tool",)}


def encode(record: Record) -> bytes:
    """The log line of ``record`` (newline included); ``at`` stamped when left at 0."""
    event = REFUSAL if isinstance(record, ToolRecord) and record.refused else record.event
    line: dict[str, Any] = {"at": record.at or time.time(), "event": event}
    for name, _kind, _default in _SCHEMA[type(record)]:
        value = getattr(record, name)
        if value is not None and name != "at":
            line[name] = value
    try:
        return orjson.dumps(line) + b"\n"
    except TypeError:  # text from hook input that is not UTF-8 (a lone surrogate)
        return orjson.dumps(_encodable(line)) + b"\n"


def decode(value: object) -> Record | None:
    """The record a decoded JSON line holds (a mistyped field: its default), else None."""
    if not isinstance(value, dict) or not isinstance(value.get("session_id"), str):
        return None
    event = value.get("event")
    kind: type[LoopRecord] | type[ToolRecord] | type[OutcomeRecord]
    if event == OUTCOME:
        kind = OutcomeRecord
    elif event == REFUSAL or (event == DETECTION and (
            value.get("rule") in TOOL_CALL_RULES or not _TOOL_KEYS.isdisjoint(value))):
        kind = ToolRecord
    elif event == DETECTION:
        kind = LoopRecord
    else:
        return None
    found: dict[str, Any] = {}
    for name, want, default in _SCHEMA[kind]:
        found[name] = _typed(value.get(name), want, default)
        for alias in _ALIASES.get(name, ()) if not found[name] else ():
            found[name] = _typed(value.get(alias), want, default)
            if found[name]:
                break
    if kind is ToolRecord:
        found["refused"] = event == REFUSAL
    return kind(**found)


def _typed(value: object, want: type, default: Any) -> Any:
    if isinstance(value, bool) != (want is bool):
        return default
    if want is float and isinstance(value, int):
        return float(value)
    return value if isinstance(value, want) else default


def journal_path(state: Path) -> Path:
    return state / JOURNAL_NAME


def append(state: Path, record: Record) -> None:
    """Append one record (``at`` is stamped when left at 0)."""
    line = encode(record)
    path = journal_path(state)
    try:
        state_folder(state, create=True)
        _rotate_if_large(path)
        append_line(path, line)
    except OSError as error:
        log.error("cannot write the detection log %s: %s", path, error)


def _encodable(value: Any) -> Any:
    """``value`` with anything orjson refuses escaped or as its ``repr``: never lost."""
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
    """The log opened for reading (fd, fstat): no link followed, never blocking."""
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


def _records(lines: list[bytes], *, path: Path, level: int = logging.INFO) -> Iterator[Record]:
    """The records among ``lines``; others skipped (said in one log line, at ``level``)."""
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = decode(orjson.loads(line))
        except orjson.JSONDecodeError:
            record = None
        if record is None:
            skipped += 1
        else:
            yield record
    if skipped:
        log.log(level, "the detection log %s: %d line%s skipped (not a record)", path,
                skipped, "" if skipped == 1 else "s")


def read_recent(state: Path, *, max_bytes: int = _TAIL_BYTES) -> Iterator[Record]:
    """Records from the last ``max_bytes`` of the log, oldest first."""
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
    yield from _records(lines, path=path)


class JournalTail:
    """The records appended to the detection log since the last look, oldest first."""

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

    def read_new(self) -> list[Record]:
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
        records: list[Record] = []
        if key != self.key:
            while self.key is not None:  # the old log's rest, to its end
                offset = self.offset
                records += self._read(_rotated(self.path), self.key)
                if self.offset == offset:
                    break
            self.key, self.offset, self._partial, self._skipping = key, 0, b"", False
        elif info.st_size < self.offset:  # rewritten in place: start it afresh
            self.offset, self._partial, self._skipping = 0, b"", False
        if info.st_size > self.offset:
            records += self._read(self.path, key)
        return records

    def _read(self, path: Path, key: tuple[int, int]) -> list[Record]:
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
        return list(_records(self._lines(data), path=path, level=logging.WARNING))

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
