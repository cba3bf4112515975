"""The judge fed from the transcript, and what counts as work (``TurnWork``): a result new in
the turn, or a waiting call's not yet the same for ``wait_minutes``. In doubt, it is work."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ..light import hex_digest
from .answers import PROMPT_REPROMPT, Answer, AnswerAssembler, PromptKind
from .calls import call_key, is_ignored, is_refusal
from .judge import Detection, Run, RunAnswer
from .masking import result_key
from .pairing import ToolPairing
from .rules import DEFAULT_THRESHOLDS, Thresholds
from .stand_ins import held_size
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

__all__ = ["MAX_HELD_BYTES", "MAX_KEPT", "RunDetector", "TurnWork"]


class RunDetector:
    """Feeds one session's events to its ``Run`` and says when a rule fires (``live=False``:
    never); ``already_fired``: answers (or re-prompts) after which counting restarts."""

    __slots__ = ("_assembler", "_fired", "_run", "answers_seen", "goal", "last_answer",
                 "live", "session_id", "work")

    def __init__(self, session_id: str, *, live: bool = True,
                 already_fired: Collection[str] = (), thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 ignored: frozenset[str] = DEFAULT_IGNORED) -> None:
        self.session_id = session_id
        self.live = live
        self._fired = frozenset(already_fired)  # the empty one is shared: no cost
        self._assembler = AnswerAssembler()
        self._run = Run(thresholds)
        self.last_answer: Answer | None = None
        self.goal: GoalStatus | None = None
        self.answers_seen = 0
        self.work = TurnWork(ignored, wait=thresholds.wait_seconds)

    @property
    def thresholds(self) -> Thresholds:
        return self._run.thresholds

    @thresholds.setter
    def thresholds(self, value: Thresholds) -> None:
        self._run.thresholds = value

    @property
    def run_length(self) -> int:  # (may exceed the answers kept)
        return self._run.length

    @property
    def chain_length(self) -> int:
        return self._run.chain

    @property
    def run(self) -> tuple[RunAnswer, ...]:
        return tuple(self._run.answers)

    @property
    def awaiting(self) -> PromptKind | None:
        return self._assembler.awaiting

    @property
    def answer_started(self) -> bool:
        return self._assembler.answer_started

    def go_live(self, *, already_fired: Collection[str] | None = None) -> None:
        """History is replayed: check the rules from the next answer on."""
        self.live = True
        if already_fired is not None:
            self._fired = frozenset(already_fired)

    def step(self, event: Event) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """The answers one event completed and the detections they caused."""
        if isinstance(event, GoalStatus):
            self.goal = event
        # It may first complete the answer in progress: count that in its own run...
        result = self._count(self._assembler.feed(event))
        if isinstance(event, Discard):
            self.work.close(judge=False)  # a void answer's results were seen all the same
        self.work.feed(event)  # (its calls and results belong to the next answer)
        if isinstance(event, TurnStart):
            self._run.reset()  # ...then a person's prompt ends the run at once
        return result

    def step_flush(self) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """Caught up with the file: count a reply marked final."""
        return self._count(self._assembler.flush())

    def step_finish(self) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        """The transcript is over: count the answer in progress."""
        return self._count(self._assembler.finish())

    def feed(self, event: Event) -> list[Detection]:
        return list(self.step(event)[1])

    def flush(self) -> list[Detection]:
        return list(self.step_flush()[1])

    def finish(self) -> list[Detection]:
        return list(self.step_finish()[1])

    def _count(self, answers: list[Answer]) -> tuple[tuple[Answer, ...], tuple[Detection, ...]]:
        if not answers:
            return (), ()
        judged: list[Answer] = []  # with whether their work was new
        detections: list[Detection] = []
        for answer in answers:
            detection = self.add_answer(answer)
            judged.append(self.last_answer or answer)
            if detection is not None:
                detections.append(detection)
        return tuple(judged), tuple(detections)

    def add_answer(self, answer: Answer) -> Detection | None:
        self.answers_seen += 1
        # (results are keyed only for an answer to a re-prompt that used a tool)
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
            answer.prompt_uuid and answer.prompt_uuid in self._fired):
            run.reset()  # it fired before
            return None
        if not self.live:
            return None
        detection = run.check(self.session_id)
        if detection:
            run.reset()
        return detection

    def check(self) -> Detection | None:
        return self._run.check(self.session_id)

    def would_fire_with_one_more(self) -> bool:
        return self._run.could_fire()


# A call, its result, when the result came (0: unknown or not timed), whether the call waits.
_Done = tuple[ToolCall, ToolResult, float, bool]

MAX_KEPT = 4096  # results remembered per turn, the oldest forgotten first
MAX_HELD_BYTES = 1 << 20  # contents waiting to be keyed; past it the oldest are keyed


class TurnWork:
    """The results seen in one scope's turn, and whether an answer added a new one."""

    __slots__ = ("_held", "_ignored", "_open_calls", "_pairing", "_pending", "_seen",
                 "_this_answer", "_wait", "_waited_last")

    def __init__(self, ignored: frozenset[str] = DEFAULT_IGNORED, *,
                 wait: float = WAIT_MINUTES * 60) -> None:
        self._ignored = ignored
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
            # Timed only if it waits (itself, or right after a call that does).
            itself = waits(call.name, call.input)
            waiting, self._waited_last = self._waited_last or itself, itself
            now = (event_seconds(event) or 0.0) if waiting else 0.0
            self._this_answer.append((call, result, now, waiting))

    def close(self, *, judge: bool) -> bool | None:
        """The answer is complete (or void); with ``judge``, whether its work was new."""
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
        return not first or not last or last - first < self._wait

    def _hold(self, item: _Done) -> None:
        self._pending.append(item)
        self._held += held_size(item[1].content)
        while self._pending and (self._held > MAX_HELD_BYTES or len(self._pending) > MAX_KEPT):
            self._key_oldest()

    def _key_oldest(self) -> None:
        call, result, now, _ = self._pending.pop(0)
        self._held -= held_size(result.content)
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
    """The digest of a call with its masked result; None for a refusal (nothing ran)."""
    content, is_error = result.content, result.is_error
    if isinstance(content, UnreadResult):
        content, is_error = content.read()
    if is_refusal(content, is_error=is_error):
        return None
    keyed = call_key(call.name, call.input, result.cwd)
    return hex_digest(f"{keyed}\x00{result_key(content, is_error=is_error)}", 24)

