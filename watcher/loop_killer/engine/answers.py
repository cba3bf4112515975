"""Transcript events grouped into API replies (by ``message.id``) and replies into answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from .rules import text_digest
from .transcript import (
    STOP_HOOK_SUMMARY,
    TURN_DURATION,
    AssistantPart,
    Discard,
    Event,
    Reprompt,
    SystemEntry,
    ToolResults,
    TurnStart,
)

__all__ = ["PROMPT_NONE", "PROMPT_REPROMPT", "PROMPT_TURN", "Answer", "AnswerAssembler",
           "PromptKind"]

PromptKind = Literal["reprompt", "turn", "none"]  # "none": read from mid-answer

PROMPT_REPROMPT: Final = "reprompt"
PROMPT_TURN: Final = "turn"
PROMPT_NONE: Final = "none"


@dataclass(frozen=True, slots=True)
class Answer:
    """All the model said between two prompts; ``text``: its last reply's with any text."""

    prompt: PromptKind
    prompt_uuid: str
    uuid: str  # the answer's last assistant line
    timestamp: str
    text: str
    used_tool: bool
    message_ids: tuple[str, ...] = ()  # the API replies it is made of, in order
    new_work: bool | None = None

    @property
    def digest(self) -> str:
        return text_digest(self.text)

    @property
    def in_run(self) -> bool:
        """It answers a re-prompt and did no work (``new_work``; unjudged, no tool used)."""
        did_work = self.used_tool if self.new_work is None else self.new_work
        return self.prompt == PROMPT_REPROMPT and not did_work


@dataclass(slots=True)
class _Reply:
    message_id: str
    texts: list[str] = field(default_factory=list)
    used_tool: bool = False
    uuid: str = ""
    timestamp: str = ""
    final: bool = False  # a line said the model stopped: complete once caught up


class AnswerAssembler:
    """An answer is complete when a reply without tool use completes, or at the next prompt. A
    re-prompt right after the Stop of the one before answers an empty reply (2.1.250-2.1.332)."""

    __slots__ = ("_last_id", "_last_timestamp", "_last_uuid", "_message_ids", "_prompt",
                 "_prompt_uuid", "_reply", "_started", "_stop_over", "_texts", "_used_tool")

    def __init__(self) -> None:
        self._prompt: PromptKind | None = None
        self._prompt_uuid = ""
        self._reply: _Reply | None = None
        self._texts: list[str] = []
        self._message_ids: list[str] = []
        self._used_tool = False
        self._started = False  # the answer to the current prompt has begun
        self._stop_over = False  # the Stop that wrote the current re-prompt has ended
        self._last_uuid = ""  # of the answer's last complete reply
        self._last_timestamp = ""
        self._last_id = ""  # message id of the last complete reply

    @property
    def awaiting(self) -> PromptKind | None:  # (the prompt whose answer is pending)
        return self._prompt

    @property
    def answer_started(self) -> bool:
        return self._started

    def feed(self, event: Event) -> list[Answer]:
        """The answers one event completes (usually none or one)."""
        if isinstance(event, AssistantPart):
            return self._assistant(event)
        if isinstance(event, (Reprompt, TurnStart)):
            if isinstance(event, TurnStart) and self._wordless():
                self._reset()  # the turn is over: such an answer completed at its Stop
                self._reply = None
            answer = self._close_answer()
            if answer is None and isinstance(event, Reprompt):
                answer = self._unanswered(event)
            self._prompt = PROMPT_REPROMPT if isinstance(event, Reprompt) else PROMPT_TURN
            self._prompt_uuid = event.uuid
            self._stop_over = False
            return [answer] if answer else []
        if isinstance(event, (ToolResults, SystemEntry)):
            answer = self._close_reply()
            stop = (isinstance(event, SystemEntry) and event.subtype == STOP_HOOK_SUMMARY
                    and not event.prevented_continuation)
            ended = isinstance(event, SystemEntry) and event.subtype == TURN_DURATION
            if (stop or ended) and answer is None and self._wordless():
                answer = self._emit()
            if stop:
                self._stop_over = True  # a re-prompt next answers nothing
            return [answer] if answer else []
        if isinstance(event, Discard):
            self._reset()
            self._reply = None
            self._prompt = None
        return []

    def finish(self) -> list[Answer]:  # (the transcript is over)
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
                # (starts mid-answer, or the model spoke again: it can only break a run)
                self._prompt, self._prompt_uuid = PROMPT_NONE, ""
            self._reply = _Reply(part.message_id)
            self._started = True
        reply = self._reply
        if part.text:
            reply.texts.append(part.text)
        reply.used_tool = reply.used_tool or part.used_tool
        reply.uuid, reply.timestamp = part.uuid, part.timestamp
        # (2.1.x writes a final stop_reason on every line of a reply: complete at ``flush``)
        reply.final = reply.final or part.final
        return done

    def flush(self) -> list[Answer]:
        """Caught up with the file: complete a reply marked final."""
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
        if reply.texts:
            self._texts = reply.texts  # the answer's words are its last reply's with any
        self._message_ids.append(reply.message_id)
        self._used_tool = self._used_tool or reply.used_tool
        if reply.used_tool:
            return None  # the model goes on after the tool results
        if not self._texts:  # (Claude Code nudges before the Stop: complete at its summary)
            return None
        return self._emit()

    def _close_answer(self) -> Answer | None:
        answer = self._close_reply()
        if answer is None and self._started:
            answer = self._emit()
        return answer

    def _wordless(self) -> bool:
        """An answer has begun with no text and no tool call so far."""
        return self._started and not self._texts and not self._used_tool and (
            self._reply is None or not (self._reply.texts or self._reply.used_tool))

    def _unanswered(self, reprompt: Reprompt) -> Answer | None:
        """The empty answer to the re-prompt before ``reprompt``, if it got one."""
        if self._prompt != PROMPT_REPROMPT or self._started or not self._stop_over:
            return None
        return Answer(prompt=PROMPT_REPROMPT, prompt_uuid=self._prompt_uuid, uuid="",
                      timestamp=reprompt.timestamp, text="", used_tool=False)

    def _emit(self) -> Answer:
        answer = Answer(self._prompt or PROMPT_NONE, self._prompt_uuid, self._last_uuid,
                        self._last_timestamp, "\n".join(self._texts), self._used_tool,
                        tuple(self._message_ids))
        self._reset()
        self._prompt = None
        return answer

    def _reset(self) -> None:
        self._texts = []
        self._message_ids = []
        self._used_tool = False
        self._started = False
