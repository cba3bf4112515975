"""A detection-log record, retold to the ``Narrator`` (pure): what the Stop hook, the tool
hooks, the mod and ``loop-killer clear`` logged reaches the watcher's terminal and the
desktop notifications through the same door as the watcher's own lines.

The watcher's own records are said where they happen (``respond``, ``tool_repeats``);
of those, only a tool-repeat detection comes back through here, for its notification
(``tool_repeats`` printed its line).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..engine.rules import rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..printable import printable
from . import report
from .narrate import Narrator, Said

__all__ = ["tell"]


def tell(narrator: Narrator, record: Mapping[str, Any], *, home: str | None, now: float
         ) -> list[Said]:
    """What to say of one record of the detection log (nothing, for most of the
    watcher's own)."""
    event, source = record.get("event"), _text(record, "source")
    session_id = _text(record, "session_id") or "?"
    who = report.project_label(_text(record, "project"), home) if _text(record, "project") \
        else "?"
    rule = _text(record, "rule")
    call = _text(record, "call", "tool")
    count = _count(record)
    if event == "detection" and call:  # a tool call repeating: a warning
        line = None if source == "watcher" else report.journal_line(record, home)
        return narrator.warning(session_id, (record.get("tool_use_id"),), who=who, call=call,
                                text=_warning(rule, call, count, warned=source == "hook"),
                                line=line, now=now)
    if source == "watcher":
        return []
    line = report.journal_line(record, home)
    if event == "detection":
        return narrator.detection(
            session_id, (record.get("answer_uuid"), record.get("prompt_uuid")), who=who,
            rule=rule, count=count, line=line, now=now)
    if event == "refusal" and line is not None:
        return narrator.refusal(session_id, call=call, line=line, now=now)
    if event == "outcome" and line is not None:
        return narrator.outcome(
            session_id, (record.get("answer_uuid"), record.get("plan_id")),
            kind=_text(record, "outcome") or "?", line=line, source=source, rule=rule,
            who=who, now=now)
    return [] if line is None else [Said(logging.INFO, line)]


def _warning(rule: str, call: str, count: int, *, warned: bool) -> str:
    """``Bash: npm test gave the same result 3 times; the model was warned``."""
    shown = printable(call, 80)
    if rule in ("", RULE_TOOL_REPEAT):
        what = f"{shown} gave the same result {count} times"
    else:
        what = f"{shown}: {rule_phrase(rule, count)}"
    return f"{what}; the model was warned" if warned else f"{what} in a row"


def _text(record: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = record.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _count(record: Mapping[str, Any]) -> int:
    count = record.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) else 0
