"""What the steps of a followed session mean to the watcher, and what it does about them: a
detection is the Stop hook's where it judges, else the watcher's (record, request, log)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..engine.judge import Detection
from ..engine.rules import Rule, text_digest
from ..engine.tool_repeat import TOOL_CALL_RULES
from ..engine.transcript import STOP_HOOK_SUMMARY, GoalStatus, SystemEntry, parse_timestamp
from ..printable import printable
from ..state import journal, records, report
from ..state.files import request_waiting
from ..state.inbox import ClearRequest, InvalidRequest, discard_request, peek_request, write_request
from ..state.session import hooks_judge
from .narrate import InOrder, Narrator, Notice, Said
from .tool_repeats import hooks_keep_counts
from .tracked import Tracked

__all__ = ["HISTORY_AGE", "HOOKS_WORD", "OUTCOME_TIMEOUT", "Outcome", "OutcomeKind",
           "PendingOutcome", "Responder", "at_deadline", "is_historic"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")


# -- what became of a detection (pure)

OUTCOME_TIMEOUT = 60.0  # seconds after a detection at which the watcher says its outcome
HISTORY_AGE = 600.0
"""A loop found in the history a file appeared with (a copy, a fork) fires only if its
last answer is younger than this."""

OutcomeKind = Literal["cleared", "stopped", "continued", "superseded", "none", "not_requested",
                      "warned"]


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: OutcomeKind
    detail: str


@dataclass(frozen=True, slots=True)
class PendingOutcome:
    answer_uuid: str
    rule: str  # a Rule, or a rule another writer of the detection log named
    detected_at: float  # seconds since the epoch
    deadline: float  # monotonic seconds
    stopped: bool = False  # "stopped" was reported; still waiting for a clear
    requested: bool = True  # a clear request was written for it (or a hook acted on it)
    key: str | None = None  # its record key (``state.records``): did a Stop hook act on it?
    hook_acted: bool = False  # a Stop hook fired on it by itself (its detection was logged)


HOOKS_WORD = frozenset({"stopped", "cleared"})
"""Outcomes a Stop hook that acted logs itself: the watcher logs them only for a loop no
Stop hook acted on."""


def at_deadline(pending: PendingOutcome, *, more_answers: int, request_pending: bool,
                timeout: float) -> Outcome | None:
    """The outcome to report when the timeout passes (None if already reported)."""
    if pending.stopped:
        return None
    if more_answers:
        plural = "s" if more_answers != 1 else ""
        return Outcome("continued", f"{more_answers} more re-prompt answer{plural} came "
                                    "after the request")
    if not pending.requested:
        return Outcome("not_requested", f"no change within {timeout:.0f} s, and no clear "
                                        "request could be written")
    if not request_pending:
        return Outcome("stopped", "the request was taken and no re-prompt followed")
    return Outcome("none", f"no change within {timeout:.0f} s; the request is still pending")


def is_historic(timestamp: str, now: float, *, max_age: float = HISTORY_AGE) -> bool:
    """Whether an answer written at ``timestamp`` is too old to act on (unknown: no)."""
    moment = parse_timestamp(timestamp)
    return moment is not None and now - moment > max_age


HOOK_JUDGED_WITHIN = 30 * 60.0
"""Seconds before a looping answer was written within which its session's Stop hook must
have judged a reply for the watcher to leave the loop to it."""


class Responder:
    """Acts on detections, prompts and outcomes for every session; one thread."""

    def __init__(self, state: Path, *, home: str | None, history_age: float,
                 outcome_timeout: float = OUTCOME_TIMEOUT) -> None:
        self.state = state
        self.home = home
        self.history_age = history_age
        self.outcome_timeout = outcome_timeout
        # path -> the session and the detection whose outcome is followed
        self.watching: dict[str, tuple[Tracked, PendingOutcome]] = {}
        self.settled: set[str] = set()  # paths whose last detection's loop was seen to end
        self.held: list[_Held] = []  # outcomes for the next tick, in the order found
        # (session, subagent or "") -> a tool-call warning awaiting its outcome, until when
        # (monotonic), and whether the tool-call hooks counted its calls (they warn, refuse)
        self.warnings: dict[tuple[str, str], tuple[journal.ToolRecord, float, bool]] = {}
        self.narrator = Narrator()
        self.order = InOrder()
        self.notify: Callable[[Notice], None] | None = None  # desktop notifications

    def _ask_stop(self, tracked: Tracked, request: ClearRequest,
                  record: journal.LoopRecord) -> bool:
        """Write the clear request and log the loop; whether the request was written."""
        try:
            write_request(self.state, request)
            requested = True
        except (OSError, InvalidRequest) as error:
            log.error("%s: cannot write the clear request: %s", self.name(tracked), error)
            requested = False
        journal.append(self.state, record)
        return requested

    def name(self, tracked: Tracked) -> str:
        return report.session_label(tracked.project, tracked.session_id, self.home)

    def pending_of(self, tracked: Tracked) -> PendingOutcome | None:
        followed = self.watching.get(tracked.path)
        return followed[1] if followed is not None else None

    def on_detection(self, tracked: Tracked, detection: Detection, position: int,
                     now: float) -> None:
        session_id = tracked.session_id
        answer = detection.answers[-1]
        key = records.record_key(answer.prompt_uuid, answer.uuid)
        if position <= tracked.history_end and is_historic(answer.timestamp, now,
                                                           max_age=self.history_age):
            log.info("%s: not firing on an old loop (answer of %s) found in a file that "
                     "appeared with its history", self.name(tracked), answer.timestamp)
            # Recorded, so that a detector rebuilt from the tail counts afresh after it.
            self._record(tracked, key, detection, source="history")
            return
        # A hook that judged one of the turn's replies lately judges this one too.
        written = parse_timestamp(answer.timestamp) or time.time()
        if hooks_judge(str(self.state), session_id, since=written - HOOK_JUDGED_WITHIN) or \
                not self._record(tracked, key, detection, source="watcher"):
            # The session's Stop hook judges its replies, or acted on this one first.
            log.info("%s: answer %s is the Stop hook's to act on", self.name(tracked), answer.uuid)
            self.follow(tracked, detection.answer_uuid, detection.rule)
            return
        request = ClearRequest(
            session_id=session_id, rule=detection.rule, count=detection.count,
            run_length=detection.run_length, answer_uuid=detection.answer_uuid,
            answer_digest=text_digest(answer.text), transcript_path=tracked.path,
            created_at=time.time(), source="watcher", prompt_uuid=answer.prompt_uuid)
        requested = self._ask_stop(tracked, request, journal.LoopRecord(
            session_id=session_id, answer_uuid=detection.answer_uuid,
            prompt_uuid=answer.prompt_uuid, answer_digest=request.answer_digest,
            rule=detection.rule, count=detection.count, run_length=detection.run_length,
            project=tracked.project, transcript_path=tracked.path,
            snippet=report.snippet(answer.text, 200), source="watcher"))
        who = report.project_label(tracked.project, self.home)
        at = parse_timestamp(answer.timestamp) or time.time()  # when it was written
        self.say(self.narrator.detection(
            session_id, (answer.uuid, answer.prompt_uuid, detection.answer_uuid), who=who,
            rule=detection.rule, count=detection.count, now=time.time(), at=at,
            line=report.detection_line(project=who, session_id=session_id,
                                       rule=detection.rule, count=detection.count,
                                       text=answer.text, requested=requested)), at=at)
        self._pending(tracked, detection.answer_uuid, detection.rule, now, requested=requested,
                      key=key)

    def on_limit(self, tracked: Tracked, rule: Rule, count: int, words: str, key: str,
                 now: float) -> None:
        """A turn reached a limit only the watcher sees (``words``: which, for the notice): a
        clear request, as for a loop (``key``, the turn's, is recorded: never asked twice)."""
        session_id = tracked.session_id
        if not records.first_to_record(self.state, session_id, key, source="watcher", rule=rule):
            return
        request = ClearRequest(
            session_id=session_id, rule=rule, count=count, run_length=0,
            answer_uuid=key, answer_digest="", transcript_path=tracked.path,
            created_at=time.time(), source="watcher", detail=words)
        requested = self._ask_stop(tracked, request, journal.LoopRecord(
            session_id=session_id, answer_uuid=key, rule=rule, count=count, run_length=0,
            project=tracked.project, transcript_path=tracked.path, snippet=words, source="watcher"))
        who = report.project_label(tracked.project, self.home)
        then = "clear requested" if requested else "no clear request (it could not be written)"
        self.say(self.narrator.detection(
            session_id, (key,), who=who, rule=rule, count=count,
            now=time.time(), line=(f"LOOP      {who}  {report.short_id(session_id)}  "
                                   f"{rule}: {words}  -> {then}")))
        self._pending(tracked, key, rule, now, requested=requested)

    def warn_limit(self, tracked: Tracked, rule: str, words: str, near: str) -> None:
        """A turn nears a limit (``words``: which; ``near``: the notification's phrase)."""
        who = report.project_label(tracked.project, self.home)
        events.warning("%-9s %s  %s  near its limit: %s", rule, who,
                       report.short_id(tracked.session_id), printable(words, 160))
        if self.notify is not None:
            self.notify(Notice(tracked.session_id, who,
                               f"{who}: {near} ({printable(words, 160)})", stop=False))

    def _record(self, tracked: Tracked, key: str | None, detection: Detection, *,
                source: str) -> bool:
        """Record the detection; True when this watcher is the first (or cannot tell)."""

        def cannot(error: Exception) -> None:
            log.warning("%s: cannot record the detection (%s); acting on it anyway",
                        self.name(tracked), error)

        return records.first_to_record(self.state, tracked.session_id, key, source=source,
                                       rule=detection.rule, on_error=cannot)

    def on_prompt(self, tracked: Tracked) -> None:
        there = request_waiting(self.state, tracked.session_id)
        waiting = peek_request(self.state, tracked.session_id) if there else None
        withdrawn = there and discard_request(
            self.state, tracked.session_id, "superseded by a new prompt",
            transcript_path=tracked.path)
        if self.pending_of(tracked) is not None:
            if withdrawn:
                self.resolve(tracked, Outcome("superseded",
                                              "a new prompt came first; request removed"))
            else:
                self.resolve(tracked, None)
        elif withdrawn and tracked.path in self.settled:  # housekeeping: that loop is over anyway
            log.info("%s: removed a clear request left over from a loop that ended",
                     self.name(tracked))
        elif withdrawn:
            self._hold(tracked, (), Outcome("superseded",
                                            "a new prompt came first; request removed"),
                       waiting.rule if waiting is not None else "")

    def on_status(self, tracked: Tracked, event: GoalStatus | SystemEntry) -> None:
        pending = self.pending_of(tracked)
        if pending is None:
            return
        if isinstance(event, GoalStatus):
            if event.cleared:
                self.resolve(tracked, Outcome(
                    "cleared", f"goal cleared: {report.snippet(event.condition, 60)}"))
        elif (event.subtype == STOP_HOOK_SUMMARY and not pending.stopped
              and event.prevented_continuation):
            self.resolve(tracked, Outcome("stopped", "the turn was stopped"), final=False)

    def follow(self, tracked: Tracked, answer_uuid: str, rule: str) -> None:
        """Follow what becomes of a detection the Stop hook acted on."""
        pending = self.pending_of(tracked)
        if pending is not None and not pending.stopped:
            return
        self._pending(tracked, answer_uuid, rule, time.time(), hook_acted=True)
        detector = tracked.detector
        goal = detector.goal if detector is not None else None
        if goal is not None and goal.cleared:
            self.resolve(tracked, Outcome(
                "cleared", f"goal cleared: {report.snippet(goal.condition, 60)}"))

    def _pending(self, tracked: Tracked, answer_uuid: str, rule: str, now: float, *,
                 requested: bool = True, key: str | None = None, hook_acted: bool = False) -> None:
        pending = self.pending_of(tracked)
        if pending is not None and not pending.stopped:
            self.resolve(tracked, Outcome("continued", "it fired again before any stop"))
        self.watching[tracked.path] = (tracked, PendingOutcome(
            answer_uuid, rule, now, time.monotonic() + self.outcome_timeout,
            requested=requested, key=key, hook_acted=hook_acted))
        self.settled.discard(tracked.path)

    def resolve(self, tracked: Tracked, outcome: Outcome | None, *, final: bool = True) -> None:
        pending = self.pending_of(tracked)
        if pending is None:
            return
        if outcome is not None and outcome.kind in ("cleared", "stopped"):
            self.settled.add(tracked.path)
        if outcome is not None and not (outcome.kind in HOOKS_WORD and (pending.hook_acted or (
                pending.key is not None and pending.key in records.recorded_keys(
                    self.state, tracked.session_id, acted_only=True)))):
            journal.append(self.state, journal.OutcomeRecord(
                session_id=tracked.session_id, answer_uuid=pending.answer_uuid,
                rule=pending.rule, outcome=outcome.kind, detail=outcome.detail,
                after_s=round(time.time() - pending.detected_at, 3), project=tracked.project,
                transcript_path=tracked.path, source="watcher"))
        if outcome is not None:
            self._hold(tracked, (pending.answer_uuid,), outcome, pending.rule)
        if final:
            del self.watching[tracked.path]
        else:
            self.watching[tracked.path] = (tracked, replace(pending, stopped=True))

    def on_record(self, record: journal.Record) -> None:
        """A detection-log record: follow the tool-call warnings to their outcome (a
        refusal puts the timeout off; the ladder's stop is the outcome)."""
        session_id = record.session_id
        if isinstance(record, journal.ToolRecord):
            scope = (session_id, record.agent_id or "")
            if not record.refused:
                self._warned(scope)  # an earlier warning of the same calls is over
                self.warnings[scope] = (record, time.monotonic() + self.outcome_timeout,
                                        hooks_keep_counts(self.state, session_id))
            elif scope in self.warnings:
                warning, _, counted = self.warnings.pop(scope)
                self.warnings[scope] = (warning, time.monotonic() + self.outcome_timeout, counted)
        elif (isinstance(record, journal.OutcomeRecord) and record.rule in TOOL_CALL_RULES
              and record.outcome != "warned"):
            # The ladder's stop names the refused attempt: the session's latest warning.
            latest = next((scope for scope in reversed(self.warnings)
                           if scope[0] == session_id), None)
            if latest is not None:
                del self.warnings[latest]

    def _warned(self, scope: tuple[str, str]) -> None:
        """A tool-call warning ended without a refusal."""
        followed = self.warnings.pop(scope, None)
        if followed is None:
            return
        session_id = scope[0]
        warning, _, counted = followed
        outcome = Outcome("warned", f"no call was refused within {self.outcome_timeout:.0f} s")
        if not counted:
            outcome = Outcome("none", "no tool-call hook counted its calls (plugin not "
                                      "loaded?), so the model got no warning")
        journal.append(self.state, journal.OutcomeRecord(
            session_id=session_id, answer_uuid=warning.tool_use_id, rule=warning.rule,
            outcome=outcome.kind, detail=outcome.detail,
            after_s=round(time.time() - warning.at, 3) if warning.at else None,
            project=warning.project, transcript_path=warning.transcript_path, source="watcher"))
        who = report.project_label(warning.project, self.home) if warning.project else "?"
        self.held.append(_Held(session_id, (warning.tool_use_id,), outcome.kind, warning.rule,
                               who, self._outcome_line(who, session_id, outcome,
                                                       warning.rule)))

    def forget(self, tracked: Tracked) -> None:
        self.watching.pop(tracked.path, None)
        self.settled.discard(tracked.path)

    def tick(self, monotonic_now: float) -> None:
        """Show the outcome lines held, then report those whose timeout passed."""
        try:
            self._expire(monotonic_now)
        finally:
            self.show_held()

    def show_held(self) -> None:
        """Tell the outcomes held, in the order found, then the passing ones due."""
        held, self.held = self.held, []
        now = time.time()
        for item in held:
            self.say(self.narrator.outcome(
                item.session_id, item.keys, kind=item.kind, line=item.line, source="watcher",
                rule=item.rule, who=item.who, now=now), at=item.at)
        self.say(self.narrator.due(now))
        self.release(now)

    def _hold(self, tracked: Tracked, keys: tuple[str, ...], outcome: Outcome, rule: str) -> None:
        who = report.project_label(tracked.project, self.home)
        self.held.append(_Held(tracked.session_id, keys, outcome.kind, rule, who,
                               self._outcome_line(who, tracked.session_id, outcome, rule)))

    @staticmethod
    def _outcome_line(who: str, session_id: str, outcome: Outcome, rule: str) -> str:
        return report.outcome_line(project=who, session_id=session_id, outcome=outcome.kind,
                                   rule=rule, detail=outcome.detail)

    def say(self, said: Iterable[Said], *, at: float | None = None) -> None:
        """Hold each line to be let out in order: ``at``, when what it tells happened."""
        self.order.add(time.time() if at is None else at, said)

    def release(self, now: float | None = None) -> None:
        """Print the lines whose turn has come (all without ``now``); notify."""
        for item in self.order.drain() if now is None else self.order.ready(now):
            if item.line is not None:
                events.log(item.level, item.line)
            if item.notice is not None and self.notify is not None:
                self.notify(item.notice)

    def close(self) -> None:
        self.show_held()
        self.say(self.narrator.flush())
        self.release()

    def _expire(self, monotonic_now: float) -> None:
        for scope, (_, deadline, _counted) in list(self.warnings.items()):
            if deadline <= monotonic_now:
                self._warned(scope)
        for tracked, pending in list(self.watching.values()):
            if pending.deadline > monotonic_now:
                continue
            detector = tracked.detector
            outcome = at_deadline(
                pending, more_answers=detector.run_length if detector is not None else 0,
                request_pending=request_waiting(self.state, tracked.session_id),
                timeout=self.outcome_timeout)
            self.resolve(tracked, outcome)


@dataclass(slots=True)
class _Held:
    """An outcome the watcher found, told at the next tick."""

    session_id: str
    keys: tuple[str, ...]
    kind: str
    rule: str
    who: str
    line: str
    at: float = field(default_factory=time.time)  # when it was found
