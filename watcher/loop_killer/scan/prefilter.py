"""Which transcript lines can matter, decided from their bytes before any parsing.

Most of a history's bytes are lines no rule reads: file snapshots, API request records,
progress lines, attachments other than ``goal_status``. Parsing them is most of the cost
of a scan, so they are skipped here, by a byte pattern that never changes a result: a
line is skipped only when its top-level ``type`` cannot be one whose lines the engine's
``parse_line`` turns into an event (``user``, ``assistant``, ``system``, or an
``attachment`` holding a ``goal_status``): the line must then hold ``"type":"user"`` (or
assistant, system, attachment; with any spacing JSON allows). The one assumption: keys and these type names are written without ``\\u`` escapes, as
every JSON writer does.
"""

from __future__ import annotations

import re

__all__ = ["COST", "COST_STATE", "KEEP", "SIDECHAIN", "SKIP", "as_main_line",
           "may_matter", "sort_line"]

# The type names the engine reads, with any spacing JSON allows around the colon (Claude
# Code writes none), and the cost-state type: one pass of this pattern over a line (several
# times faster than parsing it) sorts it.
_TYPE = re.compile(
    rb'"type"[ \t\r\n]*:[ \t\r\n]*"(user|assistant|system|attachment|cost-state)"')
_CONVERSATION = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(?:user|assistant|system)"')
_GOAL_STATUS = b"goal_status"

COST_STATE = b'"type":"cost-state"'
"""Claude Code 2.1.33x: the session's running cost, as Claude Code computed it."""

SIDECHAIN = b'"isSidechain":true'
"""A subagent's line (inline in old main transcripts; every line of a subagent's file)."""
_SIDECHAIN_ANY = re.compile(rb'"isSidechain"[ \t\r\n]*:[ \t\r\n]*true')


SKIP, COST, KEEP = 0, 1, 2
"""What ``sort_line`` says of a line: skip it; skip it, but it may be a ``cost-state`` line;
keep it (parse it)."""


def sort_line(line: bytes) -> int:
    """``KEEP`` unless ``parse_line`` would surely give no event for ``line``; then ``COST``
    if it may be a ``cost-state`` line, else ``SKIP``."""
    cost = SKIP
    found = _TYPE.search(line)
    while found is not None and found.group(1) == b"cost-state":
        cost = COST
        found = _TYPE.search(line, found.end())
    if found is None:
        return cost
    if found.group(1) != b"attachment":
        return KEEP
    # Only goal_status attachments are events (the name must then appear in the line),
    # unless the line's own type is another one, written after a nested "attachment".
    if _GOAL_STATUS in line or _CONVERSATION.search(line, found.end()) is not None:
        return KEEP
    return COST if cost or COST_STATE in line else SKIP


def may_matter(line: bytes) -> bool:
    """False only when ``parse_line`` would surely give no event for ``line``."""
    return sort_line(line) == KEEP


def as_main_line(line: bytes) -> bytes:
    """A subagent's line with its ``isSidechain`` flag cleared, so that ``parse_line``
    reads it as the conversation of its own scope (a subagent's tool calls and results).

    Only a real key can match: inside a JSON string every quote is escaped.
    """
    return _SIDECHAIN_ANY.sub(b'"isSidechain":false', line)
