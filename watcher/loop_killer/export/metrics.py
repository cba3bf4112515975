"""Loop figures from the detection log: ``LoopTally`` folds its records into counters (pure),
``MetricsSource`` follows it. Label values are bounded (fixed lists, ``MAX_PROJECT_LABELS``)."""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.budget import LIMIT_MINUTES, LIMITS, Budget
from ..engine.rules import EVERY_RULE, LIMIT_RULES
from ..engine.tool_repeat import RULE_TOOL_REPEAT, TOOL_CALL_RULES
from ..scan.usage import reply_tokens
from ..state.journal import JournalTail, LoopRecord, OutcomeRecord, Record, ToolRecord
from ..state.report import OUTCOME_LABELS, project_label
from ..state.status import read_heartbeat, read_session_status, written_statuses

__all__ = ["BUDGET_LIMIT", "COUNTERS", "LIVE_WITHIN", "MAX_PROJECT_LABELS", "OTHER",
           "SESSION_GAUGES", "STOP_HOOK_BLOCK_CAP", "TURN_GAUGES", "Figure", "Gauges",
           "LiveTurn", "LoopKey", "LoopTally", "MetricsSource", "OutcomeKey", "budget_limits",
           "parse_address", "read_gauges"]

MAX_PROJECT_LABELS = 20  # projects with a label of their own; later ones are ``other``
OTHER = "other"
LIVE_WITHIN = 300.0  # seconds: a session is live when its transcript grew within them
STOP_HOOK_BLOCK_CAP = 8
"""Claude Code ends a turn itself after this many Stop-hook blocks in a row (its default;
a session's ``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``, unseen here, may change it)."""

RULES = frozenset(EVERY_RULE)
OUTCOMES = frozenset({*OUTCOME_LABELS, "warned"})
STOPPED = frozenset({"cleared", "stopped", "stopped_no_goal", "clear_queued",
                     "sent_unconfirmed", "clear_failed"})  # the loop's turn was ended
_REMEMBERED = 10_000  # detections awaiting an outcome, and settled ones, kept at most

LoopKey = tuple[str, str, str]  # rule, kind, project
OutcomeKey = tuple[str, str, str, str]  # rule, kind, outcome, project


@dataclass(frozen=True, slots=True)
class Figure:
    """One metric as both exports name and describe it."""

    name: str  # Prometheus: loop_killer_<name> (a counter's series end in _total)
    otel: str  # OpenTelemetry: loop_killer.<otel>
    field: str  # what it reads: of the LoopTally, the Gauges, a LiveTurn
    unit: str  # OpenTelemetry's
    text: str
    otel_text: str = ""  # OpenTelemetry's description, where shorter than ``text``
    labels: tuple[str, ...] = ()


COUNTERS = (
    Figure("loops", "loops", "loops", "{loop}",
           "Loops loop-killer caught, counted when detected",
           labels=("rule", "kind", "project")),
    Figure("loop_outcomes", "loop_outcomes", "outcomes", "{loop}",
           "Loops counted again when their first outcome is known (a tool-call warning "
           "nothing refused after: outcome warned)",
           labels=("rule", "kind", "outcome", "project")),
    Figure("tool_refusals", "tool_refusals", "refusals", "{call}",
           "Tool calls refused for repeating the same result", labels=("project",)),
    Figure("avoided_tokens", "avoided_tokens", "avoided_tokens", "{token}",
           "Tokens a stopped re-prompt loop would still have spent (its mean tokens per "
           "reply x the replies Claude Code's block cap allowed)",
           "Tokens a stopped re-prompt loop would still have spent",
           labels=("rule", "project")))
SESSION_GAUGES = (
    Figure("sessions_followed", "sessions.followed", "followed", "{session}",
           "Session transcripts the watcher follows"),
    Figure("sessions_live", "sessions.live", "live", "{session}",
           "Sessions whose transcript grew in the last 5 minutes"),
    Figure("sessions_in_run", "sessions.in_run", "in_run", "{session}",
           "Live sessions in a re-prompt run"))
TURN_GAUGES = (  # labelled by project and session
    Figure("turn_spend_usd", "turn.spend_usd", "usd", "{USD}",
           "What the live turn has spent (USD, main session and subagents, priced as scan "
           "prices it)", "What the live turn has spent (USD)"),
    Figure("turn_reprompts", "turn.reprompts", "reprompts", "{reprompt}",
           "Re-prompts in the live turn"),
    Figure("turn_duration_minutes", "turn.duration", "minutes", "min",
           "Minutes since the live turn's prompt"))
BUDGET_LIMIT = Figure(
    "budget_limit", "budget.limit", "limits", "{limit}",
    "The budget of a turn, per limit that is on (reprompts, usd, minutes; [budget] in "
    "config.toml)", "The budget of a turn, per limit that is on (reprompts, usd, minutes)",
    labels=("limit",))


@dataclass(frozen=True, slots=True)
class _Pending:
    rule: str
    kind: str
    project: str
    run_length: int
    transcript_path: str


_OUTCOME_SLACK = 2.0  # seconds a loop's last reply may be written after the stop


class LoopTally:
    """Counters from detection-log records, fed in log order."""

    def __init__(self, *, home: str | None = None, max_projects: int = MAX_PROJECT_LABELS,
                 reply_tokens: Callable[..., float] = reply_tokens) -> None:
        self.loops: Counter[LoopKey] = Counter()
        self.outcomes: Counter[OutcomeKey] = Counter()
        self.refusals: Counter[str] = Counter()  # project -> refused calls
        self.avoided_tokens: dict[tuple[str, str], float] = {}  # (rule, project) -> tokens
        self.home = home
        self.max_projects = max_projects
        self.reply_tokens = reply_tokens
        self._projects: dict[str, str] = {}  # folder -> its label
        self._pending: OrderedDict[tuple[str, str], _Pending] = OrderedDict()
        self._settled: OrderedDict[tuple[str, str], None] = OrderedDict()

    def project(self, folder: object) -> str:
        if not isinstance(folder, str) or not folder:
            return OTHER
        label = self._projects.get(folder)
        if label is None:
            if len(self._projects) >= self.max_projects:
                return OTHER
            label = self._projects[folder] = project_label(folder, self.home)[:100] or OTHER
        return label

    def observe(self, record: Record) -> None:
        session = record.session_id
        rule = record.rule if record.rule in RULES else OTHER
        kind = "tool" if rule in TOOL_CALL_RULES else "reprompt"
        project = self.project(record.project)
        if isinstance(record, ToolRecord) and record.refused:
            self.refusals[project] += 1
        elif isinstance(record, (ToolRecord, LoopRecord)):
            key = (session, record.tool_use_id if isinstance(record, ToolRecord)
                   else record.answer_uuid)
            # A new loop under a key an earlier one settled (a Stop hook that stopped a
            # turn before its reply was written names none): its outcome counts anew.
            self._settled.pop(key, None)
            run_length = record.run_length if isinstance(record, LoopRecord) else 0
            self._remember(self._pending, key, _Pending(
                rule, kind, project, run_length or record.count, record.transcript_path))
            self.loops[rule, kind, project] += 1
        else:
            self._outcome(record, rule, kind, project)

    def _outcome(self, record: OutcomeRecord, rule: str, kind: str, project: str) -> None:
        session = record.session_id
        key = (session, record.answer_uuid)
        if key in self._settled:
            return  # a later word on a loop already counted
        pending = self._pending.pop(key, None)
        if pending is None:  # the hook's outcome may name no answer (the ladder's stop
            # names the refused attempt): the session's latest loop of its kind
            key = next((k for k in reversed(self._pending)
                        if k[0] == session and self._pending[k].kind == kind), key)
            pending = self._pending.pop(key, None)
        if pending is None and rule != RULE_TOOL_REPEAT:
            return  # its detection came before the watcher started
        outcome = record.outcome if record.outcome in OUTCOMES else OTHER
        self._remember(self._settled, key, None)
        # (and the key the outcome names: the mod's report names what the stop named)
        self._remember(self._settled, (session, record.answer_uuid), None)
        if pending is None:  # the ladder's stop with no warning awaiting: detected at it
            self.loops[rule, kind, project] += 1
            self.outcomes[rule, kind, outcome, project] += 1
            return
        self.outcomes[pending.rule, pending.kind, outcome, pending.project] += 1
        if (pending.kind == "reprompt" and pending.rule not in LIMIT_RULES and outcome in STOPPED
                and pending.transcript_path):
            left = max(0, STOP_HOOK_BLOCK_CAP - pending.run_length)
            if left:
                # The replies written when the loop was stopped (a scrape may follow a new turn).
                mean = self.reply_tokens(pending.transcript_path, max(1, pending.run_length),
                                         until=record.at + _OUTCOME_SLACK if record.at else None)
                where = (pending.rule, pending.project)
                self.avoided_tokens[where] = self.avoided_tokens.get(where, 0.0) + mean * left

    @staticmethod
    def _remember(table: OrderedDict[tuple[str, str], Any], key: tuple[str, str],
                  value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > _REMEMBERED:
            table.popitem(last=False)


@dataclass(frozen=True, slots=True)
class LiveTurn:
    project: str  # its label (``LoopTally.project``)
    session_id: str
    usd: float
    reprompts: int
    minutes: float | None  # None: when it began is not known


@dataclass(frozen=True, slots=True)
class Gauges:
    followed: int = 0
    live: int = 0
    in_run: int = 0
    turns: tuple[LiveTurn, ...] = ()


def read_gauges(state: Path, now: float, *, live_within: float = LIVE_WITHIN,
                project: Callable[[str], str] = lambda folder: OTHER) -> Gauges:
    """The session gauges from the heartbeat and the status files written lately."""
    beat = read_heartbeat(state)
    live = in_run = 0
    turns: list[LiveTurn] = []
    for session_id, written in written_statuses(state):
        if now - written > live_within:
            continue  # written before: its transcript has not grown since
        status = read_session_status(state, session_id)
        if status is None or now - status.last_activity > live_within:
            continue
        live += 1
        in_run += status.run_length > 0
        figures = status.turn_budget()
        if figures is not None:
            _, use = figures
            minutes = None if use.started_at is None else use.used(LIMIT_MINUTES, now)
            turns.append(LiveTurn(project(status.project), session_id, use.usd,
                                  use.reprompts, minutes))
    return Gauges(beat.sessions if beat is not None else 0, live, in_run, tuple(turns))


def budget_limits(budget: Budget | None) -> dict[str, float]:
    if budget is None:
        return {}
    return {name: budget.limit(name) for name in LIMITS if budget.limit(name) > 0}


class MetricsSource:
    """The tally kept up to date from the detection log, read on demand; thread-safe."""

    def __init__(self, state: Path, *, home: str | None = None,
                 on_record: Callable[[Record], None] | None = None,
                 budget: Budget | None = None) -> None:
        self.state = state
        self.tally = LoopTally(home=home)
        self.limits = budget_limits(budget)  # the watcher's, in force until it restarts
        self.on_record = on_record  # told of each new record (the OpenTelemetry log events)
        self._tail = JournalTail(state)
        self._tail.skip_to_end()
        self.lock = threading.RLock()

    def refresh(self) -> LoopTally:
        """The tally with every record logged until now (hold ``lock`` to read it)."""
        with self.lock:
            for record in self._tail.read_new():
                self.tally.observe(record)
                if self.on_record is not None:
                    self.on_record(record)
            return self.tally

    def gauges(self) -> Gauges:
        with self.lock:  # (labels are handed out by the tally)
            return read_gauges(self.state, time.time(), project=self.tally.project)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464``; ``:9464`` is 127.0.0.1) -> (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: any free port
        raise ValueError(f"{text!r} is not HOST:PORT (such as 127.0.0.1:9464)")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)
