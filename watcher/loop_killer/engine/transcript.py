"""Turn transcript lines (bytes, as read from disk) into the few events the rules need.

Pure: no files, no clock. ``LineBuffer`` cuts a byte stream into whole lines in linear
time however the bytes arrive; ``parse_line`` classifies one line. Only the MAIN
session's conversation is kept: sidechain (subagent) lines and every bookkeeping line
type (attachments other than ``goal_status``, api-request lines, snapshots, unknown
types, ...) are skipped, and broken lines are counted, never fatal.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

from .rules import is_reprompt

__all__ = [
    "AssistantPart",
    "Discard",
    "Event",
    "GoalStatus",
    "LineBuffer",
    "ParseStats",
    "Reprompt",
    "SystemEntry",
    "ToolResults",
    "TurnStart",
    "is_run_boundary",
    "parse_line",
    "parse_timestamp",
]

# stop_reason values that mean "the model will not say more in this reply".
_NOT_FINAL = (None, "tool_use", "pause_turn")
_INTERRUPTED = "[Request interrupted by user"
_API_ERROR = "API Error"
_LEADING_SPACE = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class Reprompt:
    """A Stop hook refused to end the turn and re-prompted the model."""

    uuid: str
    timestamp: str
    text: str


@dataclass(frozen=True, slots=True)
class TurnStart:
    """Any other user message that starts a turn: it ends the run.

    ``kind`` is ``prompt`` (a person's text or slash command), ``meta`` (an isMeta
    notice such as the /goal kickoff) or ``compact`` (a compaction summary).
    """

    uuid: str
    timestamp: str
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolResults:
    """Tool results coming back: part of the current answer."""

    uuid: str
    timestamp: str


@dataclass(frozen=True, slots=True)
class AssistantPart:
    """One assistant line: one or more content blocks of the reply ``message_id``.

    ``final`` is set when the line carries a final ``stop_reason`` and holds more than
    thinking (2.1.x writes the stop_reason on a reply's thinking line too, before its
    text line).
    """

    message_id: str
    uuid: str
    timestamp: str
    text: str
    used_tool: bool
    final: bool


@dataclass(frozen=True, slots=True)
class Discard:
    """The answer in progress is void: the person interrupted it, or an API error ended it."""

    uuid: str
    timestamp: str
    reason: str  # "interrupted" | "api_error"


@dataclass(frozen=True, slots=True)
class GoalStatus:
    """A ``goal_status`` attachment: goal set, evaluated, or cleared (met + sentinel)."""

    uuid: str
    timestamp: str
    met: bool
    sentinel: bool
    condition: str
    reason: str

    @property
    def cleared(self) -> bool:
        """The proof line that ``/goal clear`` ran."""
        return self.met and self.sentinel


@dataclass(frozen=True, slots=True)
class SystemEntry:
    """A system line (stop_hook_summary, turn_duration, ...): a reply before it is complete."""

    uuid: str
    timestamp: str
    subtype: str


Event = Reprompt | TurnStart | ToolResults | AssistantPart | Discard | GoalStatus | SystemEntry


@dataclass(slots=True)
class ParseStats:
    """How many lines were read and why the skipped ones were skipped."""

    lines: int = 0
    events: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def count(self, event: Event | None, reason: str) -> None:
        self.lines += 1
        if event is None:
            self.skipped[reason] += 1
        else:
            self.events += 1

    @property
    def broken(self) -> int:
        """Lines that were not valid JSON objects of the expected shape."""
        return self.skipped["bad_json"] + self.skipped["wrong_shape"]


class LineBuffer:
    """Cuts a byte stream into whole lines; keeps the partial last line for later.

    Linear in the bytes fed, however a long line is split across chunks: a chunk is
    scanned once for newlines, and a partial line grows in one amortised buffer.
    """

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = bytearray()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished last line held back."""
        return len(self._partial)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the lines completed by ``chunk`` (without their newlines)."""
        newline = chunk.find(b"\n")
        if newline < 0:
            self._partial += chunk
            return []
        if self._partial:
            self._partial += chunk[:newline]
            first = bytes(self._partial)
            self._partial = bytearray()
        else:
            first = chunk[:newline]
        lines = [first]
        start = newline + 1
        while (newline := chunk.find(b"\n", start)) >= 0:
            lines.append(chunk[start:newline])
            start = newline + 1
        self._partial += chunk[start:]
        return lines

    def reset(self) -> None:
        """Forget a partial line (after a truncation, say)."""
        self._partial = bytearray()


def _load(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # Bytes that are not UTF-8 (a tool's raw output) must not lose the line: decode
        # leniently and try once more; anything still broken is a bad line.
        try:
            return orjson.loads(line.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None


def _text_of(content: Any) -> str | None:
    """The text of a message's content (a string, or text blocks joined); None if odd."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts)


def _has_block(content: Any, block_type: str) -> bool:
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == block_type for block in content
    )


def _starts_with(text: str, prefix: str) -> bool:
    """``text.lstrip().startswith(prefix)`` without copying a long text."""
    start = _LEADING_SPACE.match(text).end()
    return text.startswith(prefix, start)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_line(line: bytes, stats: ParseStats | None = None) -> Event | None:
    """Classify one transcript line; None (with the reason counted in ``stats``) if skipped."""
    event, reason = _classify(line)
    if stats is not None:
        stats.count(event, reason)
    return event


def _classify(line: bytes) -> tuple[Event | None, str]:
    if not line.strip():
        return None, "blank"
    entry = _load(line)
    if entry is None:
        return None, "bad_json"
    if not isinstance(entry, dict):
        return None, "wrong_shape"
    kind = entry.get("type")
    if kind not in ("user", "assistant", "system", "attachment"):
        return None, "other_type"
    if entry.get("isSidechain") is True:
        return None, "sidechain"
    uuid = _str(entry.get("uuid"))
    timestamp = _str(entry.get("timestamp"))
    if kind == "system":
        return SystemEntry(uuid, timestamp, _str(entry.get("subtype"))), ""
    if kind == "attachment":
        return _goal_status(entry, uuid, timestamp)
    message = entry.get("message")
    if not isinstance(message, dict):
        return None, "wrong_shape"
    content = message.get("content")
    if kind == "assistant":
        return _assistant(entry, message, content, uuid, timestamp)
    return _user(entry, content, uuid, timestamp)


def _goal_status(entry: dict, uuid: str, timestamp: str) -> tuple[Event | None, str]:
    attachment = entry.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "goal_status":
        return None, "other_attachment"
    return (
        GoalStatus(
            uuid,
            timestamp,
            met=attachment.get("met") is True,
            sentinel=attachment.get("sentinel") is True,
            condition=_str(attachment.get("condition")),
            reason=_str(attachment.get("reason")),
        ),
        "",
    )


def _assistant(
    entry: dict, message: dict, content: Any, uuid: str, timestamp: str
) -> tuple[Event | None, str]:
    text = _text_of(content)
    if text is None:
        return None, "wrong_shape"
    used_tool = _has_block(content, "tool_use")
    if entry.get("isApiErrorMessage") is True or (
        not used_tool and _starts_with(text, _API_ERROR)
    ):
        return Discard(uuid, timestamp, "api_error"), ""
    message_id = _str(message.get("id")) or uuid
    only_thinking = isinstance(content, list) and bool(content) and all(
        isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking")
        for block in content
    )
    final = message.get("stop_reason") not in _NOT_FINAL and not only_thinking
    return AssistantPart(message_id, uuid, timestamp, text, used_tool, final), ""


def _user(entry: dict, content: Any, uuid: str, timestamp: str) -> tuple[Event | None, str]:
    if _has_block(content, "tool_result"):
        return ToolResults(uuid, timestamp), ""
    text = _text_of(content)
    if text is None:
        return None, "wrong_shape"
    if _starts_with(text, _INTERRUPTED):
        return Discard(uuid, timestamp, "interrupted"), ""
    if is_reprompt(text):
        return Reprompt(uuid, timestamp, text), ""
    if entry.get("isCompactSummary") is True:
        kind = "compact"
    elif entry.get("isMeta") is True:
        kind = "meta"
    else:
        kind = "prompt"
    return TurnStart(uuid, timestamp, kind, text), ""


def parse_timestamp(value: str) -> float | None:
    """Seconds since the epoch of a transcript timestamp (ISO 8601), None if unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00", 1))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def is_run_boundary(event: Event | None) -> bool:
    """True for events before which nothing can matter to the current run.

    Used to read a transcript backwards only as far as the trailing run needs: a turn
    start resets the run, and so does an answer that used a tool.
    """
    return isinstance(event, TurnStart) or (isinstance(event, AssistantPart) and event.used_tool)
