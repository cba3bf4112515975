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

__all__ = ["COST_STATE", "SIDECHAIN", "as_main_line", "is_cost_state", "may_matter"]

# The type names the engine reads, with any spacing JSON allows around the colon (Claude
# Code writes none). One pass of this pattern is several times faster than parsing.
_TYPE = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(user|assistant|system|attachment)"')
_CONVERSATION = re.compile(rb'"type"[ \t\r\n]*:[ \t\r\n]*"(?:user|assistant|system)"')
_GOAL_STATUS = b"goal_status"

COST_STATE = b'"type":"cost-state"'
"""Claude Code 2.1.33x: the session's running cost, as Claude Code computed it."""

SIDECHAIN = b'"isSidechain":true'
"""A subagent's line (inline in old main transcripts; every line of a subagent's file)."""
_SIDECHAIN_ANY = re.compile(rb'"isSidechain"[ \t\r\n]*:[ \t\r\n]*true')


def may_matter(line: bytes) -> bool:
    """False only when ``parse_line`` would surely give no event for ``line``."""
    found = _TYPE.search(line)
    if found is None:
        return False
    if found.group(1) != b"attachment":
        return True
    # Only goal_status attachments are events (the name must then appear in the line),
    # unless the line's own type is another one, written after a nested "attachment".
    return _GOAL_STATUS in line or _CONVERSATION.search(line, found.end()) is not None


def is_cost_state(line: bytes) -> bool:
    """Whether a line (one ``may_matter`` refused) may be a ``cost-state`` line."""
    return COST_STATE in line


def as_main_line(line: bytes) -> bytes:
    """A subagent's line with its ``isSidechain`` flag cleared, so that ``parse_line``
    reads it as the conversation of its own scope (a subagent's tool calls and results).

    Only a real key can match: inside a JSON string every quote is escaped.
    """
    return _SIDECHAIN_ANY.sub(b'"isSidechain":false', line)
