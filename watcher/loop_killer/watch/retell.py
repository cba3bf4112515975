"""A detection-log record retold to the ``Narrator`` (pure): what the hooks, the mod and
``loop-killer clear`` logged reaches the terminal and notifications like our own lines.
"""

from __future__ import annotations

import logging

from ..engine.rules import rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..printable import printable
from ..state import report
from ..state.journal import LoopRecord, OutcomeRecord, Record, ToolRecord
from .narrate import Narrator, Said

__all__ = ["tell"]


def tell(narrator: Narrator, record: Record, *, home: str | None, now: float) -> list[Said]:
    """What to say of one record of the detection log (nothing, for most of the
    watcher's own)."""
    session_id = record.session_id or "?"
    who = report.project_label(record.project, home) if record.project else "?"
    if isinstance(record, ToolRecord) and not record.refused and record.call:
        # a tool call repeating: a warning
        return narrator.warning(session_id, (record.tool_use_id,), who=who, call=record.call,
                                text=_warning(record.rule, record.call, record.count,
                                              warned=record.source == "hook"),
                                line=report.journal_line(record, home), now=now,
                                rule=record.rule, count=record.count, at=record.at or now)
    if record.source == "watcher":
        return []
    line = report.journal_line(record, home)
    if isinstance(record, LoopRecord):
        return narrator.detection(
            session_id, (record.answer_uuid, record.prompt_uuid), who=who,
            rule=record.rule, count=record.count, line=line, now=now, at=record.at or now)
    if isinstance(record, ToolRecord) and record.refused and line is not None:
        return narrator.refusal(session_id, call=record.call, line=line, now=now)
    if isinstance(record, OutcomeRecord) and line is not None:
        return narrator.outcome(
            session_id, (record.answer_uuid, record.plan_id), kind=record.outcome or "?",
            line=line, source=record.source, rule=record.rule, who=who, now=now,
            count=record.count or 0)
    return [] if line is None else [Said(logging.INFO, line)]


def _warning(rule: str, call: str, count: int, *, warned: bool) -> str:
    """``Bash: npm test gave the same result 3 times; the model was warned``."""
    shown = printable(call, 80)
    if rule in ("", RULE_TOOL_REPEAT):
        what = f"{shown} gave the same result {count} times"
    else:
        what = f"{shown}: {rule_phrase(rule, count)}"
    return f"{what}; the model was warned" if warned else f"{what} in a row"
