"""What the watcher tells a person about each loop: one LOOP line, one outcome line (pure), a
passing one only when nothing final follows within ``SETTLE`` s, in the order things happened."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..engine.rules import RULE_MANUAL, RULE_REFUSED_RETRIES, rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT, TOOL_CALL_RULES
from ..printable import printable
from ..state import report
from ..state.journal import LoopRecord, OutcomeRecord, Record, ToolRecord

__all__ = ["FINAL_OUTCOMES", "ORDER_WINDOW", "PASSING_OUTCOMES", "SETTLE", "VERDICTS",
           "InOrder", "Narrator", "Notice", "Said", "tell"]

SETTLE = 8.0
"""Seconds a passing outcome waits for the final one (the mod's bounded wait is 3 s,
typing's 1.5 s)."""

PASSING_OUTCOMES = frozenset({"stopped", "clear_queued", "sent_unconfirmed"})
FINAL_OUTCOMES = frozenset({"cleared", "stopped_no_goal", "not_possible", "clear_failed",
                            "continued", "superseded", "none", "warned"})

ORDER_WINDOW = 1.0  # seconds a line waits for those about earlier things (the log: 0.5 s)
KEPT_LOOPS = 8  # per session: a late record of one of them is still recognised
FORGET_AFTER = 3600.0  # seconds after which a quiet session is forgotten

# What the person is told of each outcome, after "<project>: ".
VERDICTS = {
    "cleared": "loop stopped, goal cleared",
    "stopped_no_goal": "loop stopped; no goal was set",
    "stopped": "loop stopped",
    "clear_queued": "loop stopped; what /goal clear did is not known yet",
    "sent_unconfirmed": "loop stopped; what /goal clear did is unknown: type /goal clear "
                        "if the goal is still set",
    "not_possible": "loop stopped, goal only paused: type /goal clear",
    "clear_failed": "loop stopped, but /goal clear failed: the goal is only paused",
    "continued": "the loop went on after the request to stop it",
    "none": "nothing happened yet; the request to stop the loop is still pending",
    "not_requested": "loop found, but the request to stop it could not be written (see "
                     "the watcher's log)",
}


@dataclass(frozen=True, slots=True)
class Notice:
    """A desktop notification: ``who`` names the project (for a summary of several);
    ``stop``: a stopped loop, else a warning."""

    session_id: str
    who: str
    text: str
    stop: bool = True


@dataclass(frozen=True, slots=True)
class Said:
    """A line for the terminal (None: printed by its writer), and its notification."""

    level: int
    line: str | None
    notice: Notice | None = None
    after: float = 0.0  # told no earlier than this moment (an outcome: after its LOOP line)


class InOrder:
    """Lines held ``window`` seconds, let out by when what they tell happened."""

    def __init__(self, *, window: float = ORDER_WINDOW) -> None:
        self.window = window
        self._held: list[tuple[float, int, Said]] = []
        self._count = 0

    def add(self, at: float, said: Iterable[Said]) -> None:
        for item in said:
            self._held.append((max(at, item.after), self._count, item))
            self._count += 1

    def ready(self, now: float) -> list[Said]:
        due = [held for held in self._held if held[0] <= now - self.window]
        if due:
            self._held = [held for held in self._held if held[0] > now - self.window]
        return [said for _, _, said in sorted(due, key=lambda held: held[:2])]

    def drain(self) -> list[Said]:
        held, self._held = self._held, []
        return [said for _, _, said in sorted(held, key=lambda item: item[:2])]


def _kind(rule: str) -> str:
    return "tool" if rule in TOOL_CALL_RULES else "reprompt"


@dataclass(slots=True)
class _Loop:
    keys: set[str]
    who: str  # the project, as lines name it
    rule: str = ""
    count: int = 0
    told: str = ""  # "": no outcome said yet; "passing" or "final"
    told_kind: str = ""
    passing: tuple[str, str, str] | None = None  # (kind, line, source) waiting to be said
    due_at: float = 0.0
    call: str = ""  # a tool loop's call (its label)
    kind: str = "reprompt"  # or "tool": a tool call repeating
    at: float = 0.0  # when it was detected: its outcome is told after its LOOP line


@dataclass(slots=True)
class _Session:
    loops: list[_Loop] = field(default_factory=list)  # oldest first; the last is current
    refused_call: str = ""  # the last call refused in this session
    refusals: int = 0  # calls refused since its last tool-repeat warning
    last_at: float = 0.0


def _keys(values: Iterable[object]) -> set[str]:
    return {value for value in values if isinstance(value, str) and value}


class Narrator:
    """Per session, the loops being told; one thread."""

    def __init__(self, *, settle: float = SETTLE) -> None:
        self.settle = settle
        self._sessions: dict[str, _Session] = {}

    def detection(self, session_id: str, keys: Iterable[object], *, who: str, rule: str, count: int,
                  line: str | None, now: float, at: float | None = None) -> list[Said]:
        """A rule fired: its LOOP line, unless the loop is known already."""
        said = self._new_loop(session_id, keys, now, who=who, rule=rule, count=count,
                              at=now if at is None else at)
        if said is None:
            return []
        return [*said, Said(logging.WARNING, line)] if line is not None else said

    def warning(self, session_id: str, keys: Iterable[object], *, who: str, call: str,
                text: str, line: str | None, now: float, rule: str = "",
                count: int = 0, at: float | None = None) -> list[Said]:
        """A tool call repeating: its line once, a notification as a warning (its outcome
        comes later: the ladder's stop, or ``warned``)."""
        said = self._new_loop(session_id, keys, now, who=who, rule=rule, count=count,
                              call=call, kind="tool", at=now if at is None else at)
        if said is None:
            return []
        self._sessions[session_id].refusals = 0
        notice = Notice(session_id, who, f"{who}: {text}", stop=False)
        return [*said, Said(logging.WARNING, line, notice)]

    def _new_loop(self, session_id: str, keys: Iterable[object], now: float,
                  **loop: Any) -> list[Said] | None:
        """Open a loop (None: one of its keys names a loop known already); what the last
        one was waiting to say is said first."""
        session = self._session(session_id, now)
        found = _keys(keys)
        if found and any(found & known.keys for known in session.loops):
            return None
        said = self._flush_current(session, session_id)
        self._open(session, _Loop(found, **loop))
        return said

    def refusal(self, session_id: str, *, call: str, line: str, now: float) -> list[Said]:
        """A call refused: said once for the call, counted each time."""
        session = self._session(session_id, now)
        first = session.refusals == 0 or session.refused_call != call
        session.refused_call = call
        session.refusals += 1
        return [Said(logging.INFO, line)] if first else []

    def outcome(self, session_id: str, keys: Iterable[object], *, kind: str, line: str, source: str,
                rule: str = "", who: str, now: float, count: int = 0) -> list[Said]:
        """What became of a loop, from any writer. ``count``: a refused call's attempts,
        when refusals ended the turn."""
        session = self._session(session_id, now)
        found = _keys(keys)
        loop = next((loop for loop in reversed(session.loops) if found & loop.keys), None)
        if loop is None and rule:  # the session's latest loop of the outcome's kind
            loop = next((loop for loop in reversed(session.loops)
                         if loop.kind == _kind(rule)), None)
            if loop is not None and loop.kind == "tool" and loop.told_kind == "warned":
                loop = None  # the ladder's stop after the warning was over: a new loop
        elif loop is None and session.loops:
            loop = session.loops[-1]
        said: list[Said] = []
        if loop is None:  # its detection came before this watcher: a loop of its own
            said = self._flush_current(session, session_id)
            loop = self._open(session, _Loop(found, who, rule, kind=_kind(rule), at=now))
        loop.keys |= found
        if rule and not loop.rule:
            loop.rule = rule
        if rule == RULE_REFUSED_RETRIES and kind != "warned":
            loop.call = loop.call or session.refused_call
            loop.count = count or session.refusals or 1
        if loop.told:
            return said  # one outcome line per loop: later news is in the log alone
        if kind not in FINAL_OUTCOMES and kind in PASSING_OUTCOMES:
            loop.passing = (kind, line, source)  # the latest word on the way
            loop.due_at = now + self.settle
            return said
        loop.told, loop.told_kind, loop.passing = "final", kind, None
        return [*said, self._said(session_id, loop, kind, line)]

    def due(self, now: float) -> list[Said]:
        """Passing outcomes nothing final followed within ``settle`` seconds: said now."""
        said: list[Said] = []
        for session_id, session in list(self._sessions.items()):
            for loop in session.loops:
                if loop.passing is not None and loop.due_at <= now:
                    said.append(self._tell_passing(session_id, loop))
            if now - session.last_at > FORGET_AFTER and not any(
                    loop.passing for loop in session.loops):
                del self._sessions[session_id]
        return said

    def flush(self) -> list[Said]:
        """Everything still waiting, said now (the watcher is stopping)."""
        return [self._tell_passing(session_id, loop)
                for session_id, session in self._sessions.items()
                for loop in session.loops if loop.passing is not None]

    def _session(self, session_id: str, now: float) -> _Session:
        session = self._sessions.setdefault(session_id, _Session())
        session.last_at = now
        return session

    def _open(self, session: _Session, loop: _Loop) -> _Loop:
        session.loops.append(loop)
        del session.loops[:-KEPT_LOOPS]
        return loop

    def _flush_current(self, session: _Session, session_id: str) -> list[Said]:
        if session.loops and session.loops[-1].passing is not None:
            return [self._tell_passing(session_id, session.loops[-1])]
        return []

    def _tell_passing(self, session_id: str, loop: _Loop) -> Said:
        assert loop.passing is not None
        kind, line, _source = loop.passing
        loop.passing, loop.told, loop.told_kind = None, "passing", kind
        return self._said(session_id, loop, kind, line)

    def _said(self, session_id: str, loop: _Loop, kind: str, line: str) -> Said:
        level = logging.WARNING if kind in ("continued", "none", "clear_failed",
                                            "not_possible") else logging.INFO
        verdict = VERDICTS.get(kind)
        if verdict is None:  # superseded (the person spoke), or a kind unknown here
            return Said(level, line, after=loop.at)
        return Said(level, line, Notice(session_id, loop.who,
                                        f"{loop.who}: {verdict} ({self._why(loop)})"),
                    after=loop.at)

    @staticmethod
    def _why(loop: _Loop) -> str:
        if loop.kind == "tool" and loop.call:  # (its notice is the ladder's stop)
            times = f" {loop.count} times" if loop.count > 1 else ""
            return f"{printable(loop.call, 80)} refused{times}"
        if loop.rule and (loop.count or loop.rule == RULE_MANUAL):
            return rule_phrase(loop.rule, loop.count)
        return printable(loop.rule, 40) or "a loop"


def tell(narrator: Narrator, record: Record, *, home: str | None, now: float) -> list[Said]:
    """What to say of a detection-log record (nothing, for most of the watcher's own)."""
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
            session_id, (record.answer_uuid, record.plan_id), kind=record.outcome or "?", line=line,
            source=record.source, rule=record.rule, who=who, now=now, count=record.count or 0)
    return [] if line is None else [Said(logging.INFO, line)]


def _warning(rule: str, call: str, count: int, *, warned: bool) -> str:
    """``Bash: npm test gave the same result 3 times; the model was warned``."""
    shown = printable(call, 80)
    if rule in ("", RULE_TOOL_REPEAT):
        what = f"{shown} gave the same result {count} times"
    else:
        what = f"{shown}: {rule_phrase(rule, count)}"
    return f"{what}; the model was warned" if warned else f"{what} in a row"
