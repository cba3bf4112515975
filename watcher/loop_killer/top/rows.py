"""What ``loop-killer top`` shows, as plain data (pure): one ``Row`` per session active in the
window, what needs the person first, the most recent first within."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..engine.budget import short_words
from ..engine.rules import RULE_MANUAL
from ..engine.tool_repeat import TOOL_CALL_RULES
from ..printable import printable
from ..scan.usage import Spent
from ..state.journal import LoopRecord, OutcomeRecord, Record, ToolRecord
from ..state.refused import Refused
from ..state.report import OUTCOME_LABELS, project_label, short_id
from ..state.status import SessionStatus, WatcherHeartbeat

__all__ = ["FINAL_OUTCOMES", "SETTLE", "STOPPED_OUTCOMES", "Attention", "LastDetection", "Limits",
           "Row", "Screen", "Words", "ago_short", "build_screen", "fold_record",
           "money", "project_names", "tokens_text"]

# The loop's turn was ended (its goal cleared, queued to be, or only paused).
STOPPED_OUTCOMES = frozenset({"cleared", "stopped", "stopped_no_goal", "clear_queued",
                              "sent_unconfirmed", "clear_failed"})
# Last words on a detection: a later passing word from another writer never replaces them.
FINAL_OUTCOMES = frozenset({"cleared", "stopped_no_goal", "not_possible", "clear_failed",
                            "continued", "superseded", "none"})
SETTLE = 120.0
"""Seconds a loop stopped is still what a session is doing, while only the stop's own
lines (its summary, the mod's ``/goal clear``) came after it."""


class Attention:
    """Sort ranks: lower needs the person sooner."""

    REFUSED = 0
    RUN = 1  # a re-prompt run, or a clear request waiting for the next Stop hook
    REPEATING = 2
    STOPPED = 3
    WAITING = 4
    WORKING = 5


@dataclass(frozen=True, slots=True)
class Limits:
    same_reply_turns: int = 3
    idle_turns: int = 6
    tool_repeat_block: int = 4


Words = tuple[str, ...]
"""One thing said from the fullest wording to the shortest that still says it: the screen
shows the fullest that fits its column."""


@dataclass(frozen=True, slots=True)
class LastDetection:
    """A session's latest detection (or tool-repeat stop) and what became of it."""

    rule: str
    count: int
    at: float
    what: str = ""  # the call, or the looping answer's first words
    outcome: str = ""  # "" until one is logged
    outcome_at: float = 0.0
    source: str = ""  # who logged the detection: "hook", "watcher", "manual"


def fold_record(known: dict[str, LastDetection], record: Record) -> None:
    """Take one detection-log record (in log order) into ``known``, per session."""
    session_id, rule, at = record.session_id, record.rule, record.at
    if isinstance(record, ToolRecord) and not record.refused:
        known[session_id] = LastDetection(rule, record.count, at, printable(record.call, 80),
                                          source=record.source)
        return
    if isinstance(record, LoopRecord):
        known[session_id] = LastDetection(rule, record.count, at,
                                          printable(record.snippet, 80), source=record.source)
        return
    if not isinstance(record, OutcomeRecord) or not record.outcome:
        return
    outcome = record.outcome
    last = known.get(session_id)
    if last is None or (rule != last.rule and at - last.at > SETTLE):
        # An outcome with no detection before it: the tool-repeat ladder's stop logs one.
        known[session_id] = LastDetection(rule, 0, at, "", outcome, at, record.source)
        return
    if last.outcome in FINAL_OUTCOMES and outcome not in FINAL_OUTCOMES:
        return
    known[session_id] = replace(last, outcome=outcome, outcome_at=at)


@dataclass(frozen=True, slots=True)
class Row:
    session_id: str
    project: str  # the project folder's name, as the transcript's folder is named
    transcript_path: str
    attention: int
    urgency: float  # within a rank: how near its threshold (higher first)
    last_activity: float
    project_text: str  # the project, told apart from the others shown (``project_names``)
    session_text: str
    doing: Words
    turn: str  # the current turn's tokens and cost (``12.3k tok $0.05``)
    total: str  # the session's
    loop: Words  # its last detection, the rule and what became of it


@dataclass(frozen=True, slots=True)
class Screen:
    watcher: str
    watcher_running: bool
    summary: str
    rows: tuple[Row, ...]


def tokens_text(count: int) -> str:
    """``950``, ``12.3k``, ``4.5M``."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def money(usd: float) -> str:  # ``$0``, ``<$0.01``, ``$1.20``, ``$1,234``
    if usd <= 0:
        return "$0"
    if usd < 0.01:
        return "<$0.01"
    return f"${usd:,.2f}" if usd < 1000 else f"${usd:,.0f}"


def _spent_text(figure: Spent | None) -> str:
    return "-" if figure is None else f"{tokens_text(figure.tokens)} tok {money(figure.usd)}"


def ago_short(seconds: float) -> str:
    """``now``, ``42s``, ``7m``, ``3h``: an age for a narrow column."""
    if seconds < 1:
        return "now"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _ago(seconds: float) -> str:  # ``just now``, ``42s ago``
    short = ago_short(seconds)
    return "just now" if short == "now" else f"{short} ago"


def project_names(places: Iterable[str], home: str | None = None) -> dict[str, str]:
    """Each session's folder -> how its row names it: its last part (``service-07``), or,
    where another ends alike, the shortest ending none shares (``…/team-a/api``); a folder
    that is the whole ending of another is named in full (``~/api``)."""
    parts = {place: tuple(part for part in place.split("/") if part) or (place,)
             for place in set(places)}
    names: dict[str, str] = {}
    size = 1
    while len(names) < len(parts):
        endings = Counter(own[-size:] for own in parts.values())
        for place, own in parts.items():
            if place in names:
                continue
            if size < len(own) and endings[own[-size:]] == 1:
                names[place] = own[-1] if size == 1 else "…/" + "/".join(own[-size:])
            elif size >= len(own):
                names[place] = own[-1] if size == 1 and endings[own] == 1 else _whole(place, home)
        size += 1
    return names


def _whole(place: str, home: str | None) -> str:
    home = home.rstrip("/") if home else ""
    return "~" + place[len(home):] if home and place.startswith(home + "/") else place


def _doing(status: SessionStatus, last: LastDetection | None, refused: Refused | None,
           limits: Limits) -> tuple[int, float, Words]:
    """(rank, urgency, words) for what the session is doing."""
    if refused is not None:  # a hook's refusal, logged: never inferred from a count
        return (Attention.REFUSED, float(refused.attempts),
                (f"refused x{refused.attempts}: {printable(refused.call, 60)}",))
    streaks = [s for s in status.tool_repeats
               if isinstance(s, dict) and isinstance(s.get("count"), int)]
    top = max(streaks, key=lambda s: int(s["count"]), default=None)
    call = printable(str(top.get("call", "?")), 60) if top is not None else ""
    count = int(top["count"]) if top is not None else 0
    if count > limits.tool_repeat_block:
        # Results past the refusal: the calls run all the same (no hook is counting them).
        return Attention.REPEATING, float(count), (f"still repeating x{count}: {call}",)
    if status.run_length > 0:
        return _in_run(status, limits)
    if status.pending_request:
        return Attention.RUN, 1.0, ("clear requested: next Stop ends the loop", "clear requested")
    if count >= 2:
        return Attention.REPEATING, float(count), (f"repeating x{count}: {call}",)
    working = status.in_turn
    if (not working and last is not None and last.outcome in STOPPED_OUTCOMES
            and last.outcome_at >= status.last_activity - SETTLE):
        return Attention.STOPPED, 0.0, (f"loop stopped ({last.rule})", "loop stopped")
    if working:
        return Attention.WORKING, 0.0, ("working",)
    return Attention.WAITING, 0.0, ("waiting for you",)


def _in_run(status: SessionStatus, limits: Limits) -> tuple[int, float, Words]:
    urgency = max(status.run_length / limits.idle_turns,
                  status.chain_length / limits.same_reply_turns)
    run = f"run {status.run_length}/{limits.idle_turns}"
    similar = (f", {status.chain_length}/{limits.same_reply_turns} similar"
               if status.chain_length else "")
    if status.pending_request:
        words: Words = (f"re-prompt {run}{similar}; clear requested",
                        f"clear requested; {run}{similar}", f"clear requested; {run}")
    else:
        words = (f"re-prompt {run}{similar}", f"{run}{similar}")
    return Attention.RUN, urgency, words


def _loop_words(last: LastDetection | None, now: float) -> Words:
    """The last detection: its rule, what became of it, how long ago, and the call."""
    if last is None:
        return ("-",)
    rule = "MANUAL clear" if last.rule == RULE_MANUAL else last.rule
    counted = f"{rule} x{last.count}" if last.count else rule
    if last.outcome:
        outcome = OUTCOME_LABELS.get(last.outcome) or last.outcome.replace("_", " ").upper()
    elif last.rule in TOOL_CALL_RULES:  # only a tool-call hook warns the model
        outcome = "WARNED" if last.source == "hook" else "NOT WARNED"
    else:
        outcome = "PENDING"
    said = f"{counted} -> {outcome}"
    dated = f"{said} {_ago(now - (last.outcome_at or last.at))}"
    what = f"{dated}: {last.what}" if last.rule in TOOL_CALL_RULES and last.what else dated
    return tuple(dict.fromkeys((what, dated, said, f"{rule} -> {outcome}")))


def _watcher_line(beat: WatcherHeartbeat | None, now: float) -> str:
    if beat is None:
        # (at most 80 columns: the advice must not be cut)
        return "WATCHER NOT RUNNING: figures from its last run; start loop-killer-watch"
    behind = f"; falling behind by {beat.lag:.1f} s" if beat.lag >= 3.0 else ""
    return (f"watcher running (pid {beat.pid}, {beat.sessions} sessions followed, "
            f"beat {_ago(now - beat.beat_at)}{behind})")


def build_screen(statuses: Iterable[SessionStatus], detections: Mapping[str, LastDetection],
                 spent: Mapping[str, tuple[Spent | None, Spent | None]], *,
                 beat: WatcherHeartbeat | None, limits: Limits, now: float, window: float,
                 home: str | None = None, cwds: Mapping[str, str] | None = None,
                 refused: Mapping[str, Refused] | None = None) -> Screen:
    """The rows of every session whose transcript grew within ``window`` seconds (or with a
    clear request pending), what needs attention first."""
    shown = [s for s in statuses if now - s.last_activity <= window or s.pending_request]
    cwds, refused = cwds or {}, refused or {}
    places = {s.session_id: cwds.get(s.session_id) or project_label(s.project, home) for s in shown}
    names = project_names(places.values(), home)
    rows: list[Row] = []
    for status in shown:
        last = detections.get(status.session_id)
        rank, urgency, doing = _doing(status, last, refused.get(status.session_id), limits)
        figures = status.turn_budget()
        if figures is not None:
            budget = short_words(*figures, now, money)  # the nearest limit before fuller words
            doing = tuple(f"{said} · {limits}" for said in doing for limits in budget) + doing
        turn, total = spent.get(status.session_id, (None, None))
        rows.append(Row(
            session_id=status.session_id, project=status.project,
            transcript_path=status.transcript_path, attention=rank, urgency=urgency,
            last_activity=status.last_activity,
            project_text=printable(names[places[status.session_id]]),
            session_text=short_id(status.session_id), doing=doing,
            turn=_spent_text(turn), total=_spent_text(total), loop=_loop_words(last, now)))
    rows.sort(key=lambda r: (r.attention, -r.urgency, -r.last_activity, r.session_id))
    # (a run of re-prompt answers is no loop until a rule fires: counted apart)
    refusing, running, repeating = (sum(1 for r in rows if r.attention == rank) for rank in (
        Attention.REFUSED, Attention.RUN, Attention.REPEATING))
    hours = window / 3600
    span = f"{hours:g} h" if hours >= 1 else f"{window / 60:g} min"
    summary = (f"{len(rows)} session{'s' if len(rows) != 1 else ''} in {span}: "
               f"{refusing} refused, {running} in a re-prompt run, {repeating} repeating")
    return Screen(_watcher_line(beat, now), beat is not None, summary, tuple(rows))
