"""Past loops of one transcript scope, from the engine's steps and events (pure; nothing here
judges): a run of answers holding a detection, or a streak of identical results of one call that
reached the warning. Avoidable: every reply after the first detection or warning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine.answers import Answer
from ..engine.calls import call_label
from ..engine.edits import FILE_CHANGING_TOOLS, MAX_FILES, edited_file
from ..engine.judge import Detection
from ..engine.reader import Step
from ..engine.rules import rule_phrase
from ..engine.stand_ins import ToolCounts
from ..engine.tool_repeat import RULE_TOOL_REPEAT, ToolRepeat
from ..engine.transcript import AssistantPart, Event, ToolCall, ToolResults, TurnStart
from ..light import digest
from ..state.config import Settings
from .ledger import UsageLedger
from .records import Loop

__all__ = ["MAX_STREAKS", "RepromptLoops", "ToolLoops"]

MAX_STREAKS = 1000  # calls followed at once in a turn (the least recently seen close first)
_LABEL = 80


@dataclass(slots=True)
class _Run:
    answers: list[tuple[str, ...]] = field(default_factory=list)  # message ids per answer
    first_at: str = ""
    last_at: str = ""
    fired_at: int | None = None  # index of the answer at which the first detection fired
    rule: str = ""
    label: str = ""


class RepromptLoops:
    """Re-prompt loops of one main transcript, fed the reader's steps in order."""

    __slots__ = ("_ledger", "_run")

    def __init__(self, ledger: UsageLedger) -> None:
        self._ledger = ledger
        self._run = _Run()

    def step(self, step: Step) -> list[Loop]:
        closed: list[Loop] = []
        detections = list(step.detections)
        for answer in step.answers:
            if not answer.in_run:
                closed.extend(self._close())
                continue
            self._add(answer, _detection_of(answer, detections))
        if detections and self._run.answers and self._run.fired_at is None:
            # (one not paired with its answer: the newest, which the detector judged last)
            self._fire(len(self._run.answers) - 1, detections[0])
        if isinstance(step.event, TurnStart):
            closed.extend(self._close())  # (the detector starts afresh here too)
        return closed

    def finish(self) -> list[Loop]:
        return self._close()

    def _add(self, answer: Answer, detection: Detection | None) -> None:
        run = self._run
        if not run.answers:
            run.first_at = answer.timestamp
        run.answers.append(answer.message_ids)
        run.last_at = answer.timestamp or run.last_at
        if detection is not None and run.fired_at is None:
            self._fire(len(run.answers) - 1, detection)

    def _fire(self, index: int, detection: Detection) -> None:
        run = self._run
        run.fired_at, run.rule = index, detection.rule
        run.label = f"{rule_phrase(detection.rule, detection.count)}: " + " ".join(
            detection.answers[-1].text.split())[:_LABEL]

    def _close(self) -> list[Loop]:
        run, self._run = self._run, _Run()
        if run.fired_at is None:
            return []
        ids = [message_id for answer in run.answers for message_id in answer]
        before = {message_id for answer in run.answers[: run.fired_at + 1] for message_id in answer}
        after = [message_id for answer in run.answers[run.fired_at + 1:]
                 for message_id in answer if message_id not in before]
        return [Loop("reprompt", run.rule, len(run.answers), run.first_at, run.last_at,
                     self._ledger.replies_of(ids), self._ledger.replies_of(after), run.label)]


def _detection_of(answer: Answer, detections: list[Detection]) -> Detection | None:
    """Take from ``detections`` the one this answer caused, if any."""
    for index, detection in enumerate(detections):
        fired = detection.answers[-1]
        if fired.uuid == answer.uuid and fired.prompt_uuid == answer.prompt_uuid:
            return detections.pop(index)
    return None


@dataclass(slots=True)
class _Streak:
    name: str
    tool_input: Any  # the call's input, for its label (made only for a loop)
    first_at: str
    last_at: str = ""
    count: int = 0
    calls: list[tuple[int, str]] = field(default_factory=list)  # (count, message id)
    refused: list[str] = field(default_factory=list)  # message ids of refused attempts


class ToolLoops:
    """Tool-repeat loops of one scope (a session, or one subagent)."""

    __slots__ = ("_block", "_changes", "_counts", "_ledger", "_streaks", "_warn")

    def __init__(self, ledger: UsageLedger, settings: Settings) -> None:
        self._ledger = ledger
        self._warn, self._block = settings.tool_repeat_warn, settings.tool_repeat_block
        self._counts = ToolCounts(settings.tool_counter())
        self._streaks: dict[bytes, _Streak] = {}  # call digest -> its streak, by recency
        # file -> the replies that changed it last (an oscillation's replies), by recency
        self._changes: dict[str, list[str]] = {}

    def feed(self, event: Event) -> list[Loop]:
        closed: list[Loop] = []
        timestamp = event.timestamp if isinstance(event, (AssistantPart, ToolResults)) else ""
        for part, call, repeat in self._counts.feed_paired(event):
            closed.extend(self._count(part, call, repeat, timestamp))
        if isinstance(event, TurnStart) and event.kind == "prompt":
            closed.extend(self.finish())  # (the counter starts afresh)
        return closed

    def finish(self) -> list[Loop]:
        """Close every streak (the turn, or the transcript, is over)."""
        streaks = list(self._streaks.values())
        self._streaks.clear()
        self._changes.clear()
        return [loop for streak in streaks if (loop := self._loop(streak)) is not None]

    def _count(self, part: AssistantPart, call: ToolCall, repeat: ToolRepeat,
               timestamp: str) -> list[Loop]:
        if repeat.count == 0:
            return []  # a tool that polls by design: never counted
        message_id, called_at = part.message_id, part.timestamp
        if call.name in FILE_CHANGING_TOOLS:
            oscillation = self._changed(call, repeat, message_id, called_at or timestamp)
            if oscillation is not None:
                return [oscillation]
        key = digest(repeat.call.encode("utf-8", "surrogatepass"))
        streak = self._streaks.pop(key, None)
        closed: list[Loop] = []
        if streak is not None and repeat.count == streak.count >= self._block:
            # (loop-killer refused the call: no new result, but a reply was spent)
            streak.refused.append(message_id)
        else:
            if streak is None or repeat.count != streak.count + 1:
                if streak is not None and (loop := self._loop(streak)) is not None:
                    closed.append(loop)
                streak = _Streak(call.name, call.input, called_at or timestamp)
            streak.calls.append((repeat.count, message_id))
            streak.count = repeat.count
        streak.last_at = called_at or streak.last_at
        self._streaks[key] = streak
        if len(self._streaks) > MAX_STREAKS:
            oldest = self._streaks.pop(next(iter(self._streaks)))
            if (loop := self._loop(oldest)) is not None:
                closed.append(loop)
        return closed

    def _changed(self, call: ToolCall, repeat: ToolRepeat, message_id: str,
                 at: str) -> Loop | None:
        """Note the reply that changed a file; the loop if that completes an oscillation."""
        path = edited_file(call.input)
        replies = [*self._changes.pop(path, [])[-7:], message_id]
        self._changes[path] = replies
        if len(self._changes) > MAX_FILES:
            del self._changes[next(iter(self._changes))]
        if not repeat.shape:
            return None
        involved = replies[-(repeat.shape_count + 1):]
        return Loop("tool", repeat.shape, repeat.shape_count, at, at,
                    self._ledger.replies_of(involved), self._ledger.replies_of(()),
                    call_label(call.name, call.input, _LABEL))

    def _loop(self, streak: _Streak) -> Loop | None:
        warn = self._warn
        if streak.count < warn:
            return None
        ids = [message_id for _, message_id in streak.calls] + streak.refused
        before = {message_id for count, message_id in streak.calls if count <= warn}
        after = [message_id for count, message_id in streak.calls if count > warn]
        after = [message_id for message_id in after + streak.refused if message_id not in before]
        label = (call_label(streak.name, streak.tool_input, _LABEL)
                 if streak.tool_input is not None else streak.name)
        return Loop("tool", RULE_TOOL_REPEAT, streak.count, streak.first_at, streak.last_at,
                    self._ledger.replies_of(ids), self._ledger.replies_of(after), label)
