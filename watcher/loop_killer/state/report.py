"""The wording of every line the watcher prints (pure; the time of day is the formatter's)."""

from __future__ import annotations

import re

from ..engine.rules import RULE_MANUAL, rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..printable import display_width, printable, wrap
from .journal import OutcomeRecord, Record, ToolRecord

__all__ = [
    "OUTCOME_LABELS", "ago", "detection_line", "expired_line", "journal_line", "outcome_line",
    "outcome_words", "project_label", "rule_phrase", "session_label", "short_id", "snippet",
    "startup_line", "table", "tool_repeat_line"]

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")

OUTCOME_LABELS = {
    "cleared": "CLEARED",  # the goal_status met:true sentinel: /goal clear ran
    "stopped": "STOPPED",  # the turn was ended (preventedContinuation), loop over
    "continued": "GOING ON",  # more re-prompt answers after the request
    "superseded": "WITHDRAWN",  # a person's prompt came first: request removed
    "none": "NOTHING",  # nothing happened within the timeout
    "not_requested": "NOT SENT",  # the clear request could not be written; nothing came
    # What the Stop hook reports (its own words for outcomes, shown as they come).
    "sent_unconfirmed": "SENT",  # /goal clear typed, no proof seen yet
    "clear_queued": "QUEUED",  # the mod runs /goal clear once the turn has ended
    "stopped_no_goal": "STOPPED",  # no goal to clear: stopping the turn was all
    "not_possible": "PAUSED",  # a goal is set, but nothing here can clear it
    "clear_failed": "FAILED",  # the mod ran /goal clear and it failed: goal only paused
    # What the watcher says of a tool-call warning no refusal followed in time.
    "warned": "WARNED",
}

_GOAL_CLEARED = re.compile(r"goal cleared:\s*(.+)", re.IGNORECASE)
_CLEAR_SAID = "/goal clear: "  # how the mod's report quotes what /goal clear printed


def snippet(text: str, width: int = 80) -> str:
    """``text`` on one line, without control codes, cut to ``width`` characters."""
    return printable(text, width)


def short_id(session_id: str) -> str:
    return session_id[:8]


def session_label(project: str, session_id: str, home: str | None = None) -> str:
    """``goal-same-proj a26ba613``: how log lines name a session."""
    return f"{project_label(project, home)} {short_id(session_id)}"


def project_label(folder: str, home: str | None = None) -> str:
    """A project folder name without the mangled home directory."""
    if home:
        prefix = _NOT_ALNUM.sub("-", home.rstrip("/")) + "-"
        if folder.startswith(prefix) and len(folder) > len(prefix):
            return folder[len(prefix):]
    return folder.lstrip("-") or folder


def detection_line(*, project: str, session_id: str, rule: str, count: int, text: str,
                   requested: bool = True) -> str:
    """The line printed when a rule fires."""
    then = "clear requested" if requested else "no clear request (it could not be written)"
    return (
        f"LOOP      {project}  {short_id(session_id)}  {rule}: {rule_phrase(rule, count)}"
        f"  \"{snippet(text, 72)}\"  -> {then}"
    )


def outcome_line(*, project: str, session_id: str, outcome: str, rule: str, detail: str,
                 count: int = 0, source: str = "watcher") -> str:
    """The line printed when what became of a loop is known."""
    label = OUTCOME_LABELS.get(outcome) or outcome.replace("_", " ").upper()
    by = "" if source == "watcher" else f" ({source})"
    words = outcome_words(outcome, detail, rule=rule, count=count)
    return (f"{label:<9} {project}  {short_id(session_id)}  {printable(rule, 40) or '?'}: "
            f"{words}{by}")


def outcome_words(outcome: str, detail: str, *, rule: str = "", count: int = 0) -> str:
    """What became of a loop, after its label and rule."""
    turn = (f"turn ended after {count} refused attempts" if rule == RULE_TOOL_REPEAT and count
            else "turn ended")
    if outcome == "cleared":
        found = _GOAL_CLEARED.search(detail)
        goal = f" (\"{snippet(found[1], 60)}\")" if found else ""
        return f"{turn}, goal removed{goal}"
    if outcome == "clear_failed":
        said = detail[len(_CLEAR_SAID):] if detail.startswith(_CLEAR_SAID) else ""
        output = f" (\"{snippet(said, 60)}\")" if said else ""
        return f"{turn}, but /goal clear did not work{output}: goal only paused"
    fixed = {
        "stopped": turn,
        "stopped_no_goal": f"{turn}; no goal was set",
        "clear_queued": f"{turn}; the mod runs /goal clear next",
        "sent_unconfirmed": f"{turn}; what /goal clear did is unknown: type it if the goal "
                            "is still set",
        "not_possible": f"{turn}; the goal is left set: type /goal clear",
    }.get(outcome)
    return fixed if fixed is not None else snippet(detail, 160) or outcome


def tool_repeat_line(*, project: str, session_id: str, call: str, count: int, refused: bool = False,
                     source: str = "watcher", rule: str = RULE_TOOL_REPEAT) -> str:
    """The line printed when a call repeats, or its next attempt is refused."""
    by = "" if source == "watcher" else f" ({source})"
    if rule != RULE_TOOL_REPEAT:
        said = (f"not made: it would be {rule_phrase(rule, count)}" if refused
                else rule_phrase(rule, count))
        return (f"{'REFUSED' if refused else 'LOOP':<9} {project}  {short_id(session_id)}  "
                f"{printable(rule, 40)}: {snippet(call, 80)} {said}{by}")
    if refused:
        return (f"{'REFUSED':<9} {project}  {short_id(session_id)}  {RULE_TOOL_REPEAT}: "
                f"{snippet(call, 80)} not run again after {count} identical results{by}")
    return (f"LOOP      {project}  {short_id(session_id)}  {RULE_TOOL_REPEAT}: "
            f"{snippet(call, 80)} gave the same result {count} times in a row{by}")


def expired_line(*, project: str, session_id: str, rule: str, age: float, why: str) -> str:
    """The line printed when a clear request no Stop hook took is removed."""
    return (f"{'EXPIRED':<9} {project}  {short_id(session_id)}  {rule} request made "
            f"{ago(age)} was never taken ({why}): removed")


def startup_line(*, root: str, sessions: int, projects: int, runs: int, seconds: float,
                 bytes_read: int, polling: bool, waiting: bool) -> str:
    if waiting:
        return f"waiting for {root} to appear (nothing to watch yet)"
    how = "polling" if polling else "watching"
    runs_text = f", {runs} in a re-prompt run" if runs else ""
    return (
        f"{how} {root}: {sessions} session{'s' if sessions != 1 else ''} in {projects} "
        f"project{'s' if projects != 1 else ''}{runs_text}; caught up in "
        f"{seconds * 1000:.0f} ms ({bytes_read / 1e6:.1f} MB read)"
    )


def behind_line(*, lag: float, events: int, seconds: float, unread_files: int,
                for_seconds: float) -> str:
    """The line logged while the watcher falls behind a flood of writes."""
    rate = events / seconds if seconds > 0 else 0.0
    unread = (f", {unread_files} file{'s' if unread_files != 1 else ''} with bytes left "
              f"to read" if unread_files else "")
    since = f" for {for_seconds:.0f} s" if for_seconds >= 1 else ""
    return (f"falling behind{since}: file events or bytes written waited up to {lag:.1f} s "
            f"({rate:,.0f} events/s{unread}); loops are caught that much later")


def caught_up_line(seconds: float) -> str:
    """The line logged once the watcher has caught up again."""
    return f"caught up again after {seconds:.0f} s behind"


def journal_line(record: Record, home: str | None = None) -> str | None:
    """A line for a detection-log record someone else wrote; None if not worth one."""
    session_id = record.session_id or "?"
    project = project_label(record.project, home) if record.project else "?"
    source = record.source or "?"
    if isinstance(record, OutcomeRecord):
        outcome = record.outcome or "?"
        return outcome_line(project=project, session_id=session_id, outcome=outcome,
                            rule=record.rule, detail=record.detail or outcome,
                            count=record.count or 0, source=source)
    if isinstance(record, ToolRecord):
        return tool_repeat_line(
            project=project, session_id=session_id, call=record.call or "?",
            count=record.count, refused=record.refused, source=source, rule=record.rule)
    if record.rule == RULE_MANUAL:
        return (f"ASKED     {project}  {short_id(session_id)}  MANUAL: clear asked by hand "
                f"({source})")
    rule = record.rule or "?"
    return (
        f"LOOP      {project}  {short_id(session_id)}  {rule}: {rule_phrase(rule, record.count)}"
        + (f"  \"{snippet(record.snippet, 72)}\"" if record.snippet else "") + f" ({source})"
    )


def ago(seconds: float) -> str:
    """``12 s ago``, ``3 min ago``, ``2 h ago``, ``4 d ago`` (``just now`` under a second)."""
    if seconds < 1:
        return "just now"
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} d ago"


def table(header: list[str], rows: list[list[str]], width: int | None = None) -> list[str]:
    """Left-aligned columns, two spaces apart (given a ``width``, narrowed to fit)."""
    header = [printable(cell) for cell in header]
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(display_width(row[i]) for row in [header, *rows]) for i in range(len(header))]
    if width is not None:
        widths = _fitted(widths, width - 2 * (len(widths) - 1))
    lines = []
    for row in [header, *rows]:
        pieces = [wrap(cell, size, indent=0) for cell, size in zip(row, widths, strict=True)]
        for k in range(max(len(piece) for piece in pieces)):
            lines.append("  ".join(_padded(piece[k] if k < len(piece) else "", size)
                                   for piece, size in zip(pieces, widths, strict=True)
                                   ).rstrip())
    return lines


def _padded(text: str, size: int) -> str:
    return text + " " * (size - display_width(text))


_NARROWEST = 12  # a column is never narrowed below this (or its natural width)


def _fitted(widths: list[int], room: int) -> list[int]:
    """``widths`` with the widest narrowed until they fit ``room``."""
    widths = list(widths)
    excess = sum(widths) - room
    while excess > 0:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= _NARROWEST:
            break
        second = max((w for i, w in enumerate(widths) if i != widest), default=0)
        # Down to the next widest at once; level with it, one column at a time.
        step = max(1, min(excess, widths[widest] - max(second, _NARROWEST)))
        widths[widest] -= step
        excess -= step
    return widths
