"""``parse_line`` for the history scan: a line decoded into typed structures that name only
the fields the engine reads (msgspec), instead of a dict of every value in it.

The decoder skips every other field (snapshots, tool inputs' neighbours, thinking, usage's
extras) without building it, and leaves a tool result's content raw: the scan hands a
result on unread (``UnreadResult``) until its call repeats. ``typed_event`` gives the event
``parse_line`` gives, with a tool result's content unread; when a line does not fit the
structures (not a JSON object, a field of an unexpected type, bytes that are not UTF-8) it
says so and the caller parses the line with ``parse_line``: odd lines keep their meaning.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .rules import is_reprompt
from .transcript import _API_ERROR as API_ERROR
from .transcript import _INTERRUPTED as INTERRUPTED
from .transcript import (
    NOT_FINAL,
    THINKING,
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    Reprompt,
    SystemEntry,
    ToolCall,
    ToolResult,
    ToolResults,
    TurnKind,
    TurnStart,
    UnreadResult,
    Usage,
    _starts_with,
)

__all__ = ["LEAN", "NOT_TYPED", "Line", "ReadAgain", "typed_event"]

# Field names are the transcript's own (camelCase), hence no renaming.


class _Usage(msgspec.Struct):
    input_tokens: Any = None
    output_tokens: Any = None
    cache_read_input_tokens: Any = None
    cache_creation_input_tokens: Any = None
    cache_creation: Any = None
    speed: Any = None
    inference_geo: Any = None


class _Block(msgspec.Struct):
    type: str | None = None  # (parse_line compares it with a set: it must be hashable)
    text: Any = None
    id: Any = None
    name: Any = None
    input: Any = None
    tool_use_id: Any = None
    content: msgspec.Raw = msgspec.Raw(b"null")  # a tool result's: read if its call repeats


class _Message(msgspec.Struct):
    id: Any = None
    model: Any = None
    content: str | list[_Block] | None = None
    stop_reason: Any = None
    usage: _Usage | None = None


class _Attachment(msgspec.Struct):
    type: Any = None
    met: Any = None
    sentinel: Any = None
    condition: Any = None
    reason: Any = None


class Line(msgspec.Struct):
    """A transcript line's fields that the engine (and the scan) read."""

    type: Any = None
    uuid: Any = None
    timestamp: Any = None
    isSidechain: Any = None
    isMeta: Any = None
    isCompactSummary: Any = None
    isApiErrorMessage: Any = None
    subtype: Any = None
    preventedContinuation: Any = None
    cwd: Any = None
    sessionId: Any = None
    requestId: Any = None
    totalCostUSD: Any = None
    message: _Message | None = None
    attachment: _Attachment | None = None


_DECODE = msgspec.json.Decoder(Line).decode
NOT_TYPED: Any = object()
"""What ``typed_event`` gives for a line that does not fit ``Line``: parse it instead."""

LEAN = "lean"
"""The reason ``typed_event(..., lean=True)`` gives for a system line or an attachment."""

ReadAgain = Any
"""The line's bytes, or how to read them again (``UnreadResult``'s source)."""


def typed_event(line: bytes | memoryview, source: ReadAgain | None = None, *,
                subagent: bool = False, lean: bool = False
                ) -> tuple[Event | None, str, Line] | Any:
    """(event, reason skipped, the decoded line) as ``parse_line(line, subagent=...)``
    gives the event and reason, a tool result's content left unread (read again from
    ``source``; a copy of the line without it); ``NOT_TYPED`` when only ``parse_line``
    can tell. ``lean``: a system line or an attachment gives no event (reason
    ``LEAN``): the scan's first pass (``scan.lean``) reads replies, prompts, re-prompts,
    calls and results alone."""
    try:
        entry = _DECODE(line)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return NOT_TYPED
    kind = entry.type
    if kind not in ("user", "assistant", "system", "attachment"):
        return None, "other_type", entry
    if not subagent and entry.isSidechain is True:
        return None, "sidechain", entry
    if lean and (kind == "system" or kind == "attachment"):
        return None, LEAN, entry
    uuid = _str(entry.uuid)
    timestamp = _str(entry.timestamp)
    if kind == "system":
        return SystemEntry(uuid, timestamp, _str(entry.subtype),
                           entry.preventedContinuation is True), "", entry
    if kind == "attachment":
        attachment = entry.attachment
        if attachment is None or attachment.type != "goal_status":
            return None, "other_attachment", entry
        return GoalStatus(uuid, timestamp, met=attachment.met is True,
                          sentinel=attachment.sentinel is True,
                          condition=_str(attachment.condition),
                          reason=_str(attachment.reason)), "", entry
    message = entry.message
    if message is None:
        return None, "wrong_shape", entry
    if kind == "assistant":
        return *_assistant(entry, message, uuid, timestamp), entry
    user = _user(entry, message.content, uuid, timestamp,
                 bytes(line) if source is None else source)
    return NOT_TYPED if user is NOT_TYPED else (*user, entry)


def _assistant(entry: Line, message: _Message, uuid: str, timestamp: str
               ) -> tuple[Event | None, str]:
    content = message.content
    calls: list[ToolCall] = []
    only_thinking = False
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts: list[str] = []
        only_thinking = bool(content)
        for block in content:
            kind = block.type
            if kind in THINKING:
                continue
            only_thinking = False
            if kind == "text":
                if isinstance(block.text, str):
                    texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(_str(block.id), _str(block.name), block.input))
        text = texts[0] if len(texts) == 1 else "\n".join(texts)
    else:
        return None, "wrong_shape"
    if entry.isApiErrorMessage is True or (not calls and _starts_with(text, API_ERROR)):
        return Discard(uuid, timestamp, "api_error"), ""
    final = not only_thinking and message.stop_reason not in NOT_FINAL
    return AssistantPart(_str(message.id) or uuid, uuid, timestamp, text, bool(calls), final,
                         tuple(calls), _usage(message.usage), _str(message.model)), ""


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
        text = "\n".join(block.text for block in content
                         if block.type == "text" and isinstance(block.text, str))
    elif isinstance(content, str):
        text = content
    else:
        return None, "wrong_shape"
    if _starts_with(text, INTERRUPTED):
        return Discard(uuid, timestamp, "interrupted"), ""
    if is_reprompt(text):
        return Reprompt(uuid, timestamp, text), ""
    turn: TurnKind = ("compact" if entry.isCompactSummary is True else
                      "meta" if entry.isMeta is True else "prompt")
    return TurnStart(uuid, timestamp, turn, text), ""


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _usage(usage: _Usage | None) -> Usage | None:
    if usage is None:
        return None
    cache_creation = _count(usage.cache_creation_input_tokens)
    split = usage.cache_creation
    one_hour = min(_count(split.get("ephemeral_1h_input_tokens")), cache_creation) \
        if isinstance(split, dict) else 0
    return Usage(_count(usage.input_tokens), _count(usage.output_tokens),
                 _count(usage.cache_read_input_tokens), cache_creation, one_hour,
                 "fast" if usage.speed == "fast" else "",
                 "us" if usage.inference_geo == "us" else "")


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
