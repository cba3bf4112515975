"""The judge: one session's trailing run of answers to re-prompts, and the rules over it.

Pure and incremental: feed one event (or one complete answer) at a time; memory is
bounded by the run, not the transcript. The watcher, the Stop hook and the history scan
all decide with this one class.

What counts as work: whether an answer's tool work produced something new in the
person's turn (``TurnWork``). The one definition of *work* for the re-prompt rules, used
by the watcher, the Stop hook and the scan alike (through ``RunDetector``): an answer to
a re-prompt breaks the run only if at least one of its calls gave a result not already
seen with that call in the person's turn (the call keyed as the tool-repeat rule keys
it, its folder included; the result masked as that rule masks it). A refused call is not
work, and neither is a call that gave a result already seen: a ``/goal`` whose model re-
runs the same failing command in every answer is a loop, where a migration that
advances, tests that fail differently or files that change are work.

Waiting is not idling: a call that waits for the world (``waiting.waits``: ``sleep 60 &&
gh pr checks``, a background job's output) giving the same result again is work until its
result has stayed the same for the wait bound (``Thresholds.wait_minutes``, timed by the
lines' timestamps); the answers after the result that reached it are idle.

When in doubt it is work, so that nothing fires by mistake: a call whose result is not
in the transcript (yet), a tool that polls by design (``DEFAULT_IGNORED``, or the
person's list: the one the tool-repeat rule ignores), a result whose earlier copies fell
out of what is remembered.

Results are keyed lazily: most turns have no re-prompt, and their results are never
masked. Memory is bounded by ``MAX_KEPT`` results and ``MAX_HELD_BYTES`` of contents.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

from ..light import hex_digest
from .answers import PROMPT_REPROMPT, Answer, AnswerAssembler, PromptKind
from .calls import call_key, is_ignored, is_refusal
from .judge import Detection, Run, RunAnswer
from .masking import result_key
from .pairing import ToolPairing
from .rules import DEFAULT_THRESHOLDS, Thresholds
from .tool_repeat import DEFAULT_IGNORED, event_seconds
from .transcript import (
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    ToolCall,
    ToolResult,
    TurnStart,
    UnreadResult,
)
from .waiting import WAIT_MINUTES, waits

__all__ = [
    "MAX_HELD_BYTES",
    "MAX_KEPT",
    "RunDetector",
    "TurnWork",
]


class RunDetector:
    """Feeds one session's transcript events to its ``Run`` and says when a rule fires.

    ``live=False`` builds the state without checking the rules (start-up catch-up): a
    run already past a threshold then fires on the next answer fed after ``go_live()``.
    ``already_fired`` holds uuids of answers that fired before, or of the re-prompts
    they answered (``state.records``): counting restarts after them, so nothing fires
    twice across restarts.
    """

    __slots__ = ("_assembler", "_fired", "_run", "answers_seen", "goal", "last_answer",
                 "live", "session_id", "work")

    def __init__(
        self, session_id: str, *, live: bool = True, already_fired: Collection[str] = (),
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        ignored: frozenset[str] = DEFAULT_IGNORED,
    ) -> None:
        self.session_id = session_id
        self.live = live
        self._fired = frozenset(already_fired)  # the empty one is shared: no cost
        self._assembler = AnswerAssembler()
        self._run = Run(thresholds)
        self.last_answer: Answer | None = None
        self.goal: GoalStatus | None = None
        self.answers_seen = 0
        # what the turn's tool work has produced so far
        self.work = TurnWork(ignored, wait=thresholds.wait_seconds)

    @property
    def thresholds(self) -> Thresholds:
        return self._run.thresholds

    @thresholds.setter
    def thresholds(self, value: Thresholds) -> None:
        self._run.thresholds = value

    @property
    def run_length(self) -> int:
        """Answers to re-prompts in the run (may exceed the window kept in memory)."""
        return self._run.length

    @property
    def chain_length(self) -> int:
        """How many trailing answers of the run form a chain of similar answers."""
        return self._run.chain

    @property
    def run(self) -> tuple[RunAnswer, ...]:
        """The most recent answers of the run (at most the larger threshold), oldest
        first."""
        return tuple(self._run.answers)

    @property
    def awaiting(self) -> PromptKind | None:
        """The kind of prompt whose answer is pending (``reprompt``, ``turn``...), if any."""
        return self._assembler.awaiting

    @property
    def answer_started(self) -> bool:
        return self._assembler.answer_started

    def go_live(self, *, already_fired: Collection[str] | None = None) -> None:
        """History is replayed: check the rules from the next answer on; with
        ``already_fired``, what counts as fired before from then on."""
        self.live = True
        if already_fired is not None:
            self._fired = frozenset(already_fired)

    def step(self, event: Event) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """Feed one transcript event; return the answers it completed and the detections
        they caused."""
        if isinstance(event, GoalStatus):
            self.goal = event
        # The event may first complete the answer in progress (stop_reason is null on
        # every line in some versions): count that answer in the run it belongs to...
        result = self._count(self._assembler.feed(event))
        if isinstance(event, Discard):
            self.work.close(judge=False)  # a void answer's results were seen all the same
        self.work.feed(event)  # (its calls and results belong to the next answer)
        if isinstance(event, TurnStart):
            self._run.reset()  # ...then a person's prompt ends the run at once
        return result

    def step_flush(self) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """The reader has caught up with the file: count a reply marked final."""
        return self._count(self._assembler.flush())

    def step_finish(self) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """The transcript is over: count the answer in progress, if any."""
        return self._count(self._assembler.finish())

    def feed(self, event: Event) -> list[Detection]:
        """Feed one transcript event; return the detections it causes."""
        return list(self.step(event)[1])

    def flush(self) -> list[Detection]:
        return list(self.step_flush()[1])

    def finish(self) -> list[Detection]:
        return list(self.step_finish()[1])

    def _count(self, answers: list[Answer]) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        if not answers:
            return (), ()
        judged: list[Answer] = []  # as counted: with whether their work was new
        detections: list[Detection] = []
        for answer in answers:
            detection = self.add_answer(answer)
            judged.append(self.last_answer or answer)
            if detection is not None:
                detections.append(detection)
        return tuple(judged), tuple(detections)

    def add_answer(self, answer: Answer) -> Detection | None:
        """Count one complete answer; return a detection if a rule fires."""
        self.answers_seen += 1
        # Whether its tool work produced anything new matters only to an answer to a
        # re-prompt that used a tool (the results are keyed only then).
        judged = self.work.close(judge=answer.prompt == PROMPT_REPROMPT and answer.used_tool)
        if judged is not None and answer.new_work is None:
            answer = replace(answer, new_work=judged)
        self.last_answer = answer
        run = self._run
        if not answer.in_run:
            run.reset()
            return None
        run.extend(answer.uuid, answer.prompt_uuid, answer.timestamp, answer.text)
        if (answer.uuid and answer.uuid in self._fired) or (
            answer.prompt_uuid and answer.prompt_uuid in self._fired
        ):
            run.reset()  # it fired before
            return None
        if not self.live:
            return None
        detection = run.check(self.session_id)
        if detection:
            run.reset()
        return detection

    def check(self) -> Detection | None:
        """The detection the current run calls for, if any (SAME_REPLY_TURNS first)."""
        return self._run.check(self.session_id)

    def would_fire_with_one_more(self) -> bool:
        """Whether one more answer could reach a threshold (the hook waits only then)."""
        return self._run.could_fire()


_Done = tuple[ToolCall, ToolResult, float, bool]
"""A call, its result, when the result came (seconds since the epoch; 0: unknown or not
timed), and whether the call waits."""


MAX_KEPT = 4096
"""Results remembered per turn (keyed or waiting to be); the oldest are forgotten first."""


MAX_HELD_BYTES = 1 << 20
"""Contents of results waiting to be keyed; past this the oldest are keyed at once."""


class TurnWork:
    """The results seen in one scope's turn, and whether an answer added a new one."""

    __slots__ = ("_held", "_ignored", "_open_calls", "_pairing", "_pending", "_seen",
                 "_this_answer", "_wait", "_waited_last")

    def __init__(self, ignored: frozenset[str] = DEFAULT_IGNORED, *,
                 wait: float = WAIT_MINUTES * 60) -> None:
        self._ignored = ignored  # tools never counted (the settings' list)
        self._wait = wait  # seconds a waiting call's same result is still work
        self._pairing = ToolPairing()
        # digests of (call, result), oldest first -> when first and last seen (0: unknown)
        self._seen: dict[str, tuple[float, float]] = {}
        self._pending: list[_Done] = []  # seen, not keyed yet
        self._this_answer: list[_Done] = []  # the answer in progress
        self._open_calls: set[str] = set()  # its calls still without a result
        self._held = 0
        self._waited_last = False  # the last call waited: the next one does too

    def feed(self, event: Event) -> None:
        """Take one transcript event (a person's prompt starts the turn afresh)."""
        if ToolPairing.starts_afresh(event):
            self._seen.clear()
            self._pending.clear()
            self._this_answer.clear()
            self._open_calls.clear()
            self._held = 0
            self._waited_last = False
        if not ToolPairing.may_pair(event):
            return
        if isinstance(event, AssistantPart):
            self._open_calls.update(call.tool_use_id for call in event.tool_calls)
        for _, call, result in self._pairing.pair(event):
            self._open_calls.discard(call.tool_use_id)
            if is_ignored(call.name, self._ignored):
                self._open_calls.add(call.tool_use_id)  # not counted: always work
                continue
            # Keyed only if a verdict needs it; timed only if it waits (itself, or right
            # after a call that does: ``sleep 60``, then ``gh pr checks 42``).
            itself = waits(call.name, call.input)
            waiting, self._waited_last = self._waited_last or itself, itself
            now = (event_seconds(event) or 0.0) if waiting else 0.0
            self._this_answer.append((call, result, now, waiting))

    def close(self, *, judge: bool) -> bool | None:
        """The answer in progress is complete (or void). With ``judge``: whether its tool
        work produced something new; else None, and its results are only remembered."""
        results, self._this_answer = self._this_answer, []
        unanswered = bool(self._open_calls)
        self._open_calls = set()
        if not judge:
            for item in results:
                self._hold(item)
            return None
        self._key_pending()
        new = unanswered
        for call, result, now, waiting in results:
            digest = _key(call, result)
            if digest is None:
                continue  # loop-killer's own refusal: the call did not run
            seen = self._seen.get(digest)
            if seen is None or (waiting and self._still_waiting(*seen)):
                new = True
            self._remember(digest, now)
        return new

    def _still_waiting(self, first: float, last: float) -> bool:
        """Whether a waiting call whose result was first seen at ``first`` and last at
        ``last`` was still within its bound then (or the times are not known)."""
        return not first or not last or last - first < self._wait

    def _hold(self, item: _Done) -> None:
        self._pending.append(item)
        self._held += _size(item[1].content)
        while self._pending and (self._held > MAX_HELD_BYTES
                                 or len(self._pending) > MAX_KEPT):
            self._key_oldest()

    def _key_oldest(self) -> None:
        call, result, now, _ = self._pending.pop(0)
        self._held -= _size(result.content)
        digest = _key(call, result)
        if digest is not None:
            self._remember(digest, now)

    def _key_pending(self) -> None:
        for call, result, now, _ in self._pending:
            digest = _key(call, result)
            if digest is not None:
                self._remember(digest, now)
        self._pending.clear()
        self._held = 0

    def _remember(self, digest: str, now: float) -> None:
        seen = self._seen.pop(digest, None)
        self._seen[digest] = (seen[0] if seen is not None else now, now)
        if len(self._seen) > MAX_KEPT:
            del self._seen[next(iter(self._seen))]


def _key(call: ToolCall, result: ToolResult) -> str | None:
    """The digest of a call (in its folder) with its masked result; None for a refusal
    (nothing ran)."""
    content, is_error = result.content, result.is_error
    if isinstance(content, UnreadResult):
        content, is_error = content.read()
    if is_refusal(content, is_error=is_error):
        return None
    keyed = call_key(call.name, call.input, result.cwd)
    return hex_digest(f"{keyed}\x00{result_key(content, is_error=is_error)}", 24)


def _size(content: Any) -> int:
    if isinstance(content, UnreadResult):
        return content.size
    return len(content) if isinstance(content, str) else 256

