"""Group transcript events into answers and keep each session's trailing run.

Pure and incremental: feed one event at a time (O(1) amortised, memory bounded by the
run, not the transcript), or a whole transcript with ``detect_transcript``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from .rules import (
    IDLE_TURNS,
    RULE_IDLE,
    RULE_SAME,
    SAME_REPLY_TURNS,
    could_fire,
    similar,
    similarity,
    text_digest,
    words,
)
from .transcript import (
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    LineBuffer,
    ParseStats,
    Reprompt,
    SystemEntry,
    ToolResults,
    TurnStart,
    parse_line,
)

__all__ = [
    "Answer",
    "AnswerAssembler",
    "Detection",
    "RunDetector",
    "SessionReader",
    "detect_transcript",
]

# What an answer was an answer to.
PROMPT_REPROMPT = "reprompt"
PROMPT_TURN = "turn"
PROMPT_NONE = "none"  # the transcript (or the part read) starts inside an answer


@dataclass(frozen=True, slots=True)
class Answer:
    """Everything the model said between one user prompt and the next."""

    prompt: str  # PROMPT_REPROMPT | PROMPT_TURN | PROMPT_NONE
    prompt_uuid: str
    uuid: str  # the answer's last assistant line
    timestamp: str
    text: str
    used_tool: bool

    @property
    def digest(self) -> str:
        return text_digest(self.text)


@dataclass(slots=True)
class _Reply:
    message_id: str
    texts: list[str] = field(default_factory=list)
    used_tool: bool = False
    uuid: str = ""
    timestamp: str = ""
    final: bool = False  # a line said the model stopped: complete once caught up


class AnswerAssembler:
    """Groups assistant lines into replies (by ``message.id``) and replies into answers.

    A reply is complete when a line carries a final ``stop_reason`` and the reader has
    caught up with the file (``flush``), or when the next
    user or system entry arrives (``stop_reason`` is null on every line in some
    versions). An answer is complete when a reply without tool use completes, or when
    the next prompt arrives. Interrupted and API-error answers are dropped whole.
    """

    __slots__ = (
        "_last_id",
        "_last_timestamp",
        "_last_uuid",
        "_prompt",
        "_prompt_uuid",
        "_reply",
        "_started",
        "_texts",
        "_used_tool",
    )

    def __init__(self) -> None:
        self._prompt: str | None = None
        self._prompt_uuid = ""
        self._reply: _Reply | None = None
        self._texts: list[str] = []
        self._used_tool = False
        self._started = False  # the answer to the current prompt has begun
        self._last_uuid = ""  # of the answer's last complete reply
        self._last_timestamp = ""
        self._last_id = ""  # message id of the last complete reply

    @property
    def awaiting(self) -> str | None:
        """The kind of prompt whose answer is pending or in progress, if any."""
        return self._prompt

    @property
    def answer_started(self) -> bool:
        return self._started

    def feed(self, event: Event) -> list[Answer]:
        """Feed one event; return the answers it completes (usually none or one)."""
        if isinstance(event, AssistantPart):
            return self._assistant(event)
        if isinstance(event, (Reprompt, TurnStart)):
            answer = self._close_answer()
            self._prompt = PROMPT_REPROMPT if isinstance(event, Reprompt) else PROMPT_TURN
            self._prompt_uuid = event.uuid
            return [answer] if answer else []
        if isinstance(event, (ToolResults, SystemEntry)):
            answer = self._close_reply()
            return [answer] if answer else []
        if isinstance(event, Discard):
            self._reset()
            self._reply = None
            self._prompt = None
        return []

    def finish(self) -> list[Answer]:
        """The transcript is over: complete whatever answer is in progress."""
        answer = self._close_answer()
        return [answer] if answer else []

    def _assistant(self, part: AssistantPart) -> list[Answer]:
        done: list[Answer] = []
        if self._reply is not None and self._reply.message_id != part.message_id:
            answer = self._close_reply()
            if answer:
                done.append(answer)
        if self._reply is None:
            if part.message_id == self._last_id:
                return done  # a stray line of a reply already complete
            if not self._started and self._prompt is None:
                # No prompt we know of: the part read starts mid-answer, or the model
                # spoke again after its answer. Such an answer can only break a run.
                self._prompt, self._prompt_uuid = PROMPT_NONE, ""
            self._reply = _Reply(part.message_id)
            self._started = True
        reply = self._reply
        if part.text:
            reply.texts.append(part.text)
        reply.used_tool = reply.used_tool or part.used_tool
        reply.uuid, reply.timestamp = part.uuid, part.timestamp
        # A final stop_reason may sit on every line of a reply (2.1.x writes one line per
        # block, all at once, when the reply is done): the reply is complete once the
        # reader has caught up with what is written (``flush``), not at its first line.
        reply.final = reply.final or part.final
        return done

    def flush(self) -> list[Answer]:
        """The reader has caught up with the file: complete a reply marked final."""
        if self._reply is not None and self._reply.final:
            answer = self._close_reply()
            return [answer] if answer else []
        return []

    def _close_reply(self) -> Answer | None:
        reply = self._reply
        if reply is None:
            return None
        self._reply = None
        self._last_id = reply.message_id
        self._last_uuid, self._last_timestamp = reply.uuid, reply.timestamp
        self._texts.extend(reply.texts)
        self._used_tool = self._used_tool or reply.used_tool
        if reply.used_tool:
            return None  # the model goes on after the tool results
        return self._emit()

    def _close_answer(self) -> Answer | None:
        answer = self._close_reply()
        if answer is None and self._started:
            answer = self._emit()
        return answer

    def _emit(self) -> Answer:
        answer = Answer(
            prompt=self._prompt or PROMPT_NONE,
            prompt_uuid=self._prompt_uuid,
            uuid=self._last_uuid,
            timestamp=self._last_timestamp,
            text="\n".join(self._texts),
            used_tool=self._used_tool,
        )
        self._reset()
        self._prompt = None
        return answer

    def _reset(self) -> None:
        self._texts = []
        self._used_tool = False
        self._started = False


@dataclass(frozen=True, slots=True)
class RunAnswer:
    """An answer in the run, with what the rules need to compare it."""

    uuid: str
    prompt_uuid: str
    timestamp: str
    text: str
    words: frozenset[str]
    similarity_to_previous: float | None  # None for the first answer of the run


@dataclass(frozen=True, slots=True)
class Detection:
    """A rule fired: the run of answers that crossed a threshold."""

    session_id: str
    rule: str  # RULE_SAME | RULE_IDLE
    answers: tuple[RunAnswer, ...]  # the answers involved, oldest first
    similarities: tuple[float, ...]  # between consecutive answers involved
    run_length: int  # answers in the run when it fired

    @property
    def count(self) -> int:
        return len(self.answers)

    @property
    def answer_uuid(self) -> str:
        """The uuid of the answer that fired (the last one)."""
        return self.answers[-1].uuid

    @property
    def first_timestamp(self) -> str:
        return self.answers[0].timestamp

    @property
    def last_timestamp(self) -> str:
        return self.answers[-1].timestamp

    def to_dict(self, *, max_text: int = 2000) -> dict[str, Any]:
        """A JSON-ready summary (texts cut to ``max_text`` characters)."""
        return {
            "session_id": self.session_id,
            "rule": self.rule,
            "count": self.count,
            "run_length": self.run_length,
            "answer_uuid": self.answer_uuid,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "similarities": [round(s, 4) for s in self.similarities],
            "answers": [
                {"uuid": a.uuid, "timestamp": a.timestamp, "text": a.text[:max_text]}
                for a in self.answers
            ],
        }


class RunDetector:
    """Keeps one session's trailing run and says when a rule fires.

    ``live=False`` builds the state without checking the rules (start-up catch-up): a
    run already past a threshold then fires on the next answer fed after ``go_live()``.
    ``already_fired`` holds uuids of answers that fired before, or of the re-prompts
    they answered (from the detection log): counting restarts after them, so nothing
    fires twice across restarts.
    """

    __slots__ = (
        "_assembler",
        "_chain",
        "_fired",
        "_run",
        "_run_length",
        "answers_seen",
        "goal",
        "last_answer",
        "live",
        "session_id",
    )

    def __init__(
        self, session_id: str, *, live: bool = True, already_fired: Collection[str] = ()
    ) -> None:
        self.session_id = session_id
        self.live = live
        self._fired = set(already_fired)
        self._assembler = AnswerAssembler()
        self._run: deque[RunAnswer] = deque(maxlen=IDLE_TURNS)
        self._run_length = 0
        self._chain = 0
        self.last_answer: Answer | None = None
        self.goal: GoalStatus | None = None
        self.answers_seen = 0

    @property
    def run_length(self) -> int:
        """Answers to re-prompts in the run (may exceed the window kept in memory)."""
        return self._run_length

    @property
    def chain_length(self) -> int:
        """How many trailing answers of the run form a chain of similar answers."""
        return self._chain

    @property
    def run(self) -> tuple[RunAnswer, ...]:
        """The most recent answers of the run (at most IDLE_TURNS), oldest first."""
        return tuple(self._run)

    @property
    def awaiting(self) -> str | None:
        """The kind of prompt whose answer is pending (``reprompt``, ``turn``...), if any."""
        return self._assembler.awaiting

    @property
    def answer_started(self) -> bool:
        return self._assembler.answer_started

    def go_live(self) -> None:
        self.live = True

    def feed(self, event: Event) -> list[Detection]:
        """Feed one transcript event; return the detections it causes."""
        if isinstance(event, GoalStatus):
            self.goal = event
        detections = []
        # The event may first complete the answer in progress (stop_reason is null on
        # every line in some versions): count that answer in the run it belongs to...
        for answer in self._assembler.feed(event):
            detection = self.add_answer(answer)
            if detection:
                detections.append(detection)
        if isinstance(event, TurnStart):
            self._reset()  # ...then a person's prompt ends the run at once
        return detections

    def flush(self) -> list[Detection]:
        """The reader has caught up with the file: count a reply marked final."""
        detections = [self.add_answer(answer) for answer in self._assembler.flush()]
        return [d for d in detections if d]

    def finish(self) -> list[Detection]:
        """The transcript is over: count the answer in progress, if any."""
        detections = [self.add_answer(answer) for answer in self._assembler.finish()]
        return [d for d in detections if d]

    def add_answer(self, answer: Answer) -> Detection | None:
        """Count one complete answer; return a detection if a rule fires."""
        self.answers_seen += 1
        self.last_answer = answer
        if answer.prompt != PROMPT_REPROMPT or answer.used_tool:
            self._reset()
            return None
        answer_words = words(answer.text)
        previous = self._run[-1] if self._run else None
        score = None
        if previous is not None:
            score = similarity(previous.words, answer_words)
            if similar(previous.text, previous.words, answer.text, answer_words):
                self._chain += 1
            else:
                self._chain = 1
        else:
            self._chain = 1
        self._run.append(
            RunAnswer(answer.uuid, answer.prompt_uuid, answer.timestamp, answer.text,
                      answer_words, score)
        )
        self._run_length += 1
        if (answer.uuid and answer.uuid in self._fired) or (
            answer.prompt_uuid and answer.prompt_uuid in self._fired
        ):
            self._reset()  # it fired before (the hook may know it by its re-prompt only)
            return None
        if not self.live:
            return None
        detection = self.check()
        if detection:
            self._fired.add(answer.uuid)
            self._reset()
        return detection

    def check(self) -> Detection | None:
        """The detection the current run calls for, if any (SAME_REPLY_TURNS first)."""
        if self._chain >= SAME_REPLY_TURNS:
            involved = tuple(self._run)[-SAME_REPLY_TURNS:]
            return self._detection(RULE_SAME, involved)
        if self._run_length >= IDLE_TURNS:
            return self._detection(RULE_IDLE, tuple(self._run)[-IDLE_TURNS:])
        return None

    def would_fire_with_one_more(self) -> bool:
        """Whether one more answer could reach a threshold (the hook waits only then)."""
        return could_fire(self._run_length, self._chain)

    def _detection(self, rule: str, involved: tuple[RunAnswer, ...]) -> Detection:
        scores = tuple(
            a.similarity_to_previous for a in involved[1:] if a.similarity_to_previous is not None
        )
        return Detection(self.session_id, rule, involved, scores, self._run_length)

    def _reset(self) -> None:
        self._run.clear()
        self._run_length = 0
        self._chain = 0


class SessionReader:
    """Bytes of one session transcript in, detections out (any chunking)."""

    __slots__ = ("_lines", "detector", "stats")

    def __init__(self, detector: RunDetector) -> None:
        self.detector = detector
        self.stats = ParseStats()
        self._lines = LineBuffer()

    @property
    def pending_bytes(self) -> int:
        return self._lines.pending_bytes

    def feed(self, chunk: bytes) -> list[Detection]:
        detections: list[Detection] = []
        for line in self._lines.feed(chunk):
            detections.extend(self.feed_line(line))
        detections.extend(self.detector.flush())
        return detections

    def feed_line(self, line: bytes) -> list[Detection]:
        event = parse_line(line, self.stats)
        return self.detector.feed(event) if event is not None else []

    def reset_partial(self) -> None:
        self._lines.reset()


def detect_transcript(
    data: bytes | Iterable[bytes], session_id: str = "", *, finish: bool = False
) -> list[Detection]:
    """All detections in a whole transcript (bytes, or chunks of it)."""
    reader = SessionReader(RunDetector(session_id))
    chunks = [data] if isinstance(data, (bytes, bytearray)) else data
    detections: list[Detection] = []
    for chunk in chunks:
        detections.extend(reader.feed(bytes(chunk)))
    if reader.pending_bytes:
        detections.extend(reader.feed(b"\n"))  # a last line without its newline
    if finish:
        detections.extend(reader.detector.finish())
    return detections
