"""Which transcript lines can matter, decided from their bytes before any parsing: sure as
JSON escapes a quote in a string, keys are unescaped and no object holds a key twice."""

from __future__ import annotations

import re
from collections.abc import Callable

from .transcript import Event, ParseStats, ToolResult, ToolResults, UnreadResult, parse_line

__all__ = ["COST", "COST_STATE", "KEEP", "RESULT", "SKIP", "may_be_subagents", "may_matter",
           "one_result", "skim_line", "skim_span", "skipped_reason", "sort_line", "unread_result"]

# The type names the engine reads (and cost-state), with any spacing JSON allows.
_TYPE = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(user|assistant|system|attachment|cost-state)"')
_CONVERSATION = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(?:user|assistant|system)"')
_GOAL_STATUS = b"goal_status"

COST_STATE = b'"type":"cost-state"'  # Claude Code 2.1.33x: the session's running cost

_SIDECHAIN = re.compile(rb'"isSidechain"[ \t\r\n]*:[ \t\r\n]*true')


def may_be_subagents(line: bytes) -> bool:
    """False when the line is surely not a subagent's (``isSidechain`` true)."""
    return _SIDECHAIN.search(line) is not None


_HEAD_WITHIN = 16384  # the top-level keys before a line's type are short (ids, paths)

# What ``sort_line`` says of a line: skip it; skip it, but it may be a ``cost-state``
# line; keep it; keep it, and it starts like one tool result (``one_result``).
SKIP, COST, KEEP, RESULT = 0, 1, 2, 3
_TOP_TYPES = {b"user": KEEP, b"assistant": KEEP, b"system": KEEP, b"cost-state": COST}


def _top_type(line: bytes, start: int, end: int) -> tuple[bytes, int] | None:
    """The line's own ``type`` and where its value ends, when its first is top-level."""
    if line.startswith(b'{"type":"', start, end):
        first = start + 1  # the first key (Claude Code's bookkeeping lines)
    else:
        first = line.find(b'"type":"', start, min(end, start + _HEAD_WITHIN))
        # (after a comma: its quote opens a key; a key ending in an escaped quote and
        # "type" holds the same bytes, after a backslash)
        if first < 0 or line[start] != 123 or line[first - 1] != 44 or \
                line.find(b"{", start + 1, first) >= 0 or line.find(b"[", start + 1, first) >= 0:
            return None
    value_end = line.find(b'"', first + 8, end)
    return (line[first + 8:value_end], value_end) if value_end > 0 else None


def sort_line(line: bytes, start: int = 0, end: int | None = None) -> int:
    """``KEEP`` (``RESULT``: like one tool result) unless ``parse_line`` would surely give no
    event for ``line[start:end]``; then ``COST`` if it may be a ``cost-state`` line, else SKIP."""
    end = len(line) if end is None else end
    top = _top_type(line, start, end)
    if top is not None:  # (most lines)
        if top[0] == b"attachment":
            return KEEP if line.find(_GOAL_STATUS, start, end) >= 0 else SKIP
        if top[0] == b"user" and line.startswith(_RESULT_HEAD, top[1] - 12, end):
            return RESULT
        return _TOP_TYPES.get(top[0], SKIP)
    cost = SKIP
    found = _TYPE.search(line, start, end)
    while found is not None and found.group(1) == b"cost-state":
        cost = COST
        found = _TYPE.search(line, found.end(), end)
    if found is None:
        return cost
    if found.group(1) != b"attachment":
        return KEEP
    # Only goal_status attachments are events, unless the line's own type comes after.
    if line.find(_GOAL_STATUS, start, end) >= 0 or \
            _CONVERSATION.search(line, found.end(), end) is not None:
        return KEEP
    return COST if cost or line.find(COST_STATE, start, end) >= 0 else SKIP


def may_matter(line: bytes) -> bool:
    """False only when ``parse_line`` would surely give no event for ``line``."""
    return sort_line(line) >= KEEP


# A user line whose content opens on one tool result block, as Claude Code writes it.
_RESULT_HEAD = b'"type":"user","message":{"role":"user","content":[{"tool_use_id":"'
_RESULT_ID = re.compile(rb'([!#-\[\]-~]{1,256})","type":"tool_result",')


def one_result(line: bytes, start: int = 0, end: int | None = None) -> tuple[str, bool] | None:
    """``(tool_use_id, sidechain)`` when the bytes alone say it is one tool result, else None."""
    end = len(line) if end is None else end
    top = _top_type(line, start, end)
    if top is None or top[0] != b"user":
        return None
    head = top[1] - 12  # where '"type":"user' starts
    if not line.startswith(_RESULT_HEAD, head, end):
        return None
    found = _RESULT_ID.match(line, head + len(_RESULT_HEAD), end)
    if found is None or line.find(b'"tool_use_id"', found.end(), end) >= 0:
        return None
    tool_use_id = found.group(1).decode()
    flags = line.count(b'"isSidechain"', start, head)
    if flags == 0:  # (Claude Code writes it before the message, if at all)
        return (tool_use_id, False) if line.find(b'"isSidechain"', head, end) < 0 else None
    flag = line.find(b'"isSidechain"', start, head)
    if flags > 1 or line[flag - 1] != 44:  # (not a key of its own: see _top_type)
        return None
    value = line[flag + 13: flag + 19]
    if value[:5] == b":true":
        return tool_use_id, True
    return (tool_use_id, False) if value == b":false" else None


def unread_result(line: bytes, start: int = 0, end: int | None = None,
                  source: Callable[[], bytes] | None = None) -> tuple[ToolResults, bool] | None:
    """The event of a lone tool result (``one_result``), content unread, and whether it is a
    subagent's; None when only parsing can tell. Copies the line unless ``source`` gives it."""
    told = one_result(line, start, end)
    if told is None:
        return None
    tool_use_id, sidechain = told
    cwd = _lone_cwd(line, start, len(line) if end is None else end)
    if cwd is None:
        return None
    unread = UnreadResult(source or line[start:end], tool_use_id)
    return ToolResults("", "", (ToolResult(tool_use_id, unread, False, cwd),)), sidechain


_CWD_KEY = b'"cwd":"'


def _lone_cwd(line: bytes, start: int, end: int) -> str | None:
    """The line's ``cwd`` ("" when none); None when only parsing can tell."""
    found = line.find(_CWD_KEY, start, end)
    if found < 0:
        return ""
    value_start = found + len(_CWD_KEY)
    value_end = line.find(b'"', value_start, end)
    if (line[found - 1] != 44 or value_end < 0
            or line.find(_CWD_KEY, value_end, end) >= 0
            or line.find(b"\\", value_start, value_end) >= 0):
        return None
    try:
        return line[value_start:value_end].decode()
    except UnicodeDecodeError:
        return None


def skim_line(line: bytes, stats: ParseStats | None = None) -> Event | None:
    """``parse_line`` for whole sessions: lines that cannot matter are skipped unparsed."""
    return skim_span(line, 0, len(line), stats)


def skim_span(buffer: bytes, start: int, end: int, stats: ParseStats | None = None
              ) -> Event | None:  # (``buffer[start:end]`` is copied only to be parsed)
    if sort_line(buffer, start, end) < KEEP:
        if stats is not None:
            stats.count(None, skipped_reason(buffer, start, end))
        return None
    return parse_line(buffer[start:end], stats)


def skipped_reason(line: bytes, start: int = 0, end: int | None = None) -> str:
    """Why a line ``sort_line`` skips goes unread: ``other_type``, ``blank`` or ``bad_json``."""
    end = len(line) if end is None else end
    if start < end and line[start] == 123:
        return "other_type"  # (most lines: no copy of a long one)
    head = line[start:end].lstrip()[:1]
    return "other_type" if head == b"{" else "blank" if not head else "bad_json"
