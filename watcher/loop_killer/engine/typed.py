"""``parse_line`` for the history scan: a line decoded (msgspec) into typed structures naming
only the fields the engine reads; ``NOT_TYPED`` for a line that ``parse_line`` must read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from .transcript import (
    Event,
    GoalStatus,
    SystemEntry,
    ToolResult,
    ToolResults,
    UnreadResult,
    Usage,
    assistant_event,
    reply_of,
    typed_by_person,
    usage_of,
    user_text_event,
)

__all__ = ["NOT_TYPED", "Line", "Message", "ReadAgain", "TypedUsage", "decode_line",
           "entry_event", "typed_event"]

# Field names are the transcript's own (camelCase). ``gc=False``: a decoded tree holds no
# cycle, and tracking its structs doubled a scan's decoding time.


class _Split(msgspec.Struct, gc=False):  # (cache writes by how long they are kept)
    ephemeral_1h_input_tokens: Any = None


class TypedUsage(msgspec.Struct, gc=False):
    input_tokens: Any = None
    output_tokens: Any = None
    cache_read_input_tokens: Any = None
    cache_creation_input_tokens: Any = None
    cache_creation: _Split | None = None
    speed: Any = None
    inference_geo: Any = None

    def read(self) -> Usage:
        return usage_of(self.input_tokens, self.output_tokens, self.cache_read_input_tokens,
                        self.cache_creation_input_tokens, self.cache_creation, self.speed,
                        self.inference_geo)


class _Block(msgspec.Struct, gc=False):
    type: str | None = None  # (parse_line compares it with a set: it must be hashable)
    text: Any = None
    id: Any = None
    name: Any = None
    input: Any = None
    tool_use_id: Any = None
    content: msgspec.Raw = msgspec.Raw(b"null")  # a tool result's: read if its call repeats


class Message(msgspec.Struct, gc=False):
    id: Any = None
    model: Any = None
    content: str | list[_Block] | None = None
    stop_reason: Any = None
    usage: TypedUsage | None = None


class _Attachment(msgspec.Struct, gc=False):
    type: Any = None
    met: Any = None
    sentinel: Any = None
    condition: Any = None
    reason: Any = None


class Line(msgspec.Struct, gc=False):
    """A transcript line's fields that the engine (and the scan) read."""

    type: Any = None
    uuid: Any = None
    timestamp: Any = None
    isSidechain: Any = None
    isMeta: Any = None
    promptSource: Any = None
    origin: Any = None
    isCompactSummary: Any = None
    isApiErrorMessage: Any = None
    subtype: Any = None
    preventedContinuation: Any = None
    cwd: Any = None
    requestId: Any = None
    totalCostUSD: Any = None
    message: Message | None = None
    attachment: _Attachment | None = None


_DECODE = msgspec.json.Decoder(Line).decode

NOT_TYPED: Any = object()  # ``typed_event``'s for a line that does not fit: parse it instead
ReadAgain = Any  # the line's bytes, or how to read them again (``UnreadResult``'s source)


def typed_event(line: bytes | memoryview, source: ReadAgain | None = None, *,
                subagent: bool = False) -> tuple[Event | None, str, Line] | Any:
    """(event, reason skipped, the decoded line), or ``NOT_TYPED``: use ``parse_line``."""
    entry = decode_line(line)
    if entry is None:
        return NOT_TYPED
    found = entry_event(entry, line if source is None else source, subagent=subagent)
    return NOT_TYPED if found is NOT_TYPED else (*found, entry)


def decode_line(line: bytes | memoryview) -> Line | None:
    try:
        return _DECODE(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def entry_event(entry: Line, source: ReadAgain, *, subagent: bool = False
                ) -> tuple[Event | None, str] | Any:
    """``typed_event`` of a line decoded already."""
    kind = entry.type
    if kind not in ("user", "assistant", "system", "attachment"):
        return None, "other_type"
    if not subagent and entry.isSidechain is True:
        return None, "sidechain"
    uuid = _str(entry.uuid)
    timestamp = _str(entry.timestamp)
    if kind == "system":
        return SystemEntry(uuid, timestamp, _str(entry.subtype),
                           entry.preventedContinuation is True), ""
    if kind == "attachment":
        attachment = entry.attachment
        if attachment is None or attachment.type != "goal_status":
            return None, "other_attachment"
        return GoalStatus(uuid, timestamp, met=attachment.met is True,
                          sentinel=attachment.sentinel is True,
                          condition=_str(attachment.condition), reason=_str(attachment.reason)), ""
    message = entry.message
    if message is None:
        return None, "wrong_shape"
    if kind == "assistant":
        return _assistant(entry, message, uuid, timestamp)
    return _user(entry, message.content, uuid, timestamp,
                 bytes(source) if isinstance(source, memoryview) else source)


def _assistant(entry: Line, message: Message, uuid: str, timestamp: str
               ) -> tuple[Event | None, str]:
    if message.content is None:
        return None, "wrong_shape"
    text, calls, only_thinking = reply_of(_blocks(message.content))
    usage = message.usage
    return assistant_event(uuid, timestamp, text, calls, only_thinking,
                           api_error=entry.isApiErrorMessage, message_id=message.id,
                           stop_reason=message.stop_reason, model=message.model,
                           usage=None if usage is None else usage.read())


def _blocks(content: list[_Block] | str) -> Iterator[tuple[Any, Any, Any, Any, Any]] | str:
    return content if isinstance(content, str) else (
        (block.type, block.text, block.id, block.name, block.input) for block in content)


def _user(entry: Line, content: str | list[_Block] | None, uuid: str, timestamp: str,
          source: ReadAgain) -> tuple[Event | None, str] | Any:
    if isinstance(content, list):
        ids = [_str(block.tool_use_id) for block in content if block.type == "tool_result"]
        if ids:
            if len(set(ids)) < len(ids):
                return NOT_TYPED  # (a result is read again by its call's id: it must be one)
            cwd = _str(entry.cwd)
            return ToolResults(uuid, timestamp, tuple(
                ToolResult(tool_use_id, UnreadResult(source, tool_use_id), False, cwd)
                for tool_use_id in ids)), ""
    if content is None:
        return None, "wrong_shape"
    return user_text_event(uuid, timestamp, reply_of(_blocks(content))[0],
                           compact=entry.isCompactSummary, meta=entry.isMeta,
                           typed=typed_by_person(entry.promptSource, entry.origin))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
