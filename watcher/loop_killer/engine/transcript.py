"""Transcript lines (bytes) into the few events the rules need (pure): ``parse_line``. Only
the main session's conversation is kept; a reply's token counts are read too (``usage_of``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import orjson

from .rules import is_reprompt, leading_space

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform  # (typing's from Python 3.11 on)
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorator: decorator

_Class = TypeVar("_Class", bound=type)


@dataclass_transform(frozen_default=True)
def record(cls: _Class) -> _Class:
    """A frozen dataclass to the type checker, a plain (five times faster) one at run time."""
    return dataclass(slots=True, unsafe_hash=True)(cls)  # type: ignore[return-value]


__all__ = ["AssistantPart", "Discard", "Event", "GoalStatus", "MAX_COUNT", "STOP_HOOK_SUMMARY",
           "TURN_DURATION", "ParseStats", "Reprompt", "SystemEntry", "ToolCall", "ToolResult",
           "ToolResults", "TurnKind", "TurnStart", "UnreadResult", "Usage", "assistant_event",
           "is_count", "is_run_boundary", "parse_line", "parse_timestamp", "reply_of",
           "typed_by_person", "usage_of", "user_text_event"]


@record
class Usage:
    """A reply's token counts, and how it was served (a sum keeps that where all agree)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    cache_creation_1h: int = 0  # (cache writes kept an hour: billed higher)
    speed: str = ""
    inference_geo: str = ""

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_creation

    @property
    def prompt(self) -> int:  # (the request's input, cached or not: picks a long-prompt price)
        return self.input + self.cache_read + self.cache_creation

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.output + other.output,
                     self.cache_read + other.cache_read, self.cache_creation + other.cache_creation,
                     self.cache_creation_1h + other.cache_creation_1h,
                     self.speed if self.speed == other.speed else "",
                     self.inference_geo if self.inference_geo == other.inference_geo else "")

    def to_dict(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_creation": self.cache_creation, "total": self.total}


MAX_COUNT = 10**12  # more tokens than any reply ever had (sums must fit 64 bits)


def is_count(value: Any) -> bool:
    """Whether ``value`` is a token count as a reply can have one (not a bool, a float)."""
    return type(value) is int and 0 <= value <= MAX_COUNT


def usage_of(input_tokens: Any, output_tokens: Any, cache_read: Any, cache_creation: Any,
             split: Any, speed: Any, inference_geo: Any) -> Usage:
    """A reply's ``usage`` from its fields as written (None where absent)."""
    # (the checks written out: a scan makes one of these per reply line)
    created = cache_creation if type(cache_creation) is int \
        and 0 <= cache_creation <= MAX_COUNT else 0
    hour: Any = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else \
        getattr(split, "ephemeral_1h_input_tokens", None)  # (a dict, or a typed line's)
    one_hour = min(hour, created) if is_count(hour) else 0  # (never more than all, as billed)
    return Usage(
        input_tokens if type(input_tokens) is int and 0 <= input_tokens <= MAX_COUNT else 0,
        output_tokens if type(output_tokens) is int and 0 <= output_tokens <= MAX_COUNT else 0,
        cache_read if type(cache_read) is int and 0 <= cache_read <= MAX_COUNT else 0, created,
        one_hour, "fast" if speed == "fast" else "", "us" if inference_geo == "us" else "")


NOT_FINAL = (None, "tool_use", "pause_turn")  # stop_reasons: the reply goes on
_INTERRUPTED = "[Request interrupted by user"
# Claude Code's isMeta nudge after a reply showing nothing (2.1.250-2.1.332): the answer goes on.
_NO_OUTPUT_NUDGE = "[Your previous response had no visible output"
# System subtypes: the end of a Stop's hook run (not written by 2.1.250 headless), of a turn.
STOP_HOOK_SUMMARY, TURN_DURATION = "stop_hook_summary", "turn_duration"
_API_ERROR = "API Error"
SYNTHETIC_MODEL = "<synthetic>"  # the model of a reply Claude Code wrote itself (API error)


@record
class _Line:  # what every event but a reply's part starts with
    uuid: str
    timestamp: str


@record
class Reprompt(_Line):
    """A Stop hook refused to end the turn and re-prompted the model."""

    text: str


# A person's text or slash command; an isMeta notice (the /goal kickoff); a compaction.
TurnKind = Literal["prompt", "meta", "compact"]


@record
class TurnStart(_Line):
    """Any other user message that starts a turn: it ends the run."""

    kind: TurnKind
    text: str


@record
class ToolResult:
    """One ``tool_result`` block: what a tool call gave back."""

    tool_use_id: str
    content: Any  # as written, or an UnreadResult
    is_error: bool  # (with an UnreadResult: not known until it is read)
    cwd: str = ""  # the session's folder when the result came back ("" unknown)
    # A file-changing call's file states (``edits.states_of_result``), not compared.
    move: tuple[str, str] | None = field(default=None, compare=False)


class UnreadResult:
    """A tool result left unread in its line until something must compare it."""

    __slots__ = ("source", "tool_use_id")

    BROKEN: Final = "\x00loop-killer: unreadable tool result line"  # (its line did not parse)

    def __init__(self, source: bytes | Callable[[], bytes], tool_use_id: str) -> None:
        self.source = source
        self.tool_use_id = tool_use_id

    @property
    def size(self) -> int:  # (bytes held in memory: none when it reads its line again)
        return len(self.source) if isinstance(self.source, bytes) else 0

    def _entry(self) -> Any:  # (its line, decoded; None if unreadable)
        try:
            line = self.source if isinstance(self.source, bytes) else self.source()
        except OSError:
            return None
        return _load(line)

    def read(self) -> tuple[Any, bool]:  # (content, is_error)
        entry = self._entry()
        message = entry.get("message") if isinstance(entry, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for result in _tool_results(content):
            if result.tool_use_id == self.tool_use_id:
                return result.content, result.is_error
        return self.BROKEN, True

    def read_move(self) -> tuple[str, str] | None:  # (``ToolResult.move``)
        entry = self._entry()
        from .edits import states_of_result
        return states_of_result(entry.get("toolUseResult")) if isinstance(entry, dict) else None


@record
class ToolResults(_Line):
    results: tuple[ToolResult, ...] = ()


@record
class ToolCall:
    tool_use_id: str
    name: str
    input: Any  # the JSON value as written (usually an object)


@record
class AssistantPart:
    """One assistant line. ``final``: a final ``stop_reason`` on more than thinking."""

    message_id: str
    uuid: str
    timestamp: str
    text: str
    used_tool: bool
    final: bool
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    model: str = ""


@record
class Discard(_Line):
    """The answer in progress is void: the person interrupted it, or an API error ended it."""

    reason: Literal["interrupted", "api_error"]


@record
class GoalStatus(_Line):
    """A ``goal_status`` attachment: goal set, evaluated, or cleared."""

    met: bool
    sentinel: bool
    condition: str
    reason: str

    @property
    def cleared(self) -> bool:  # (the proof line that /goal clear ran)
        return self.met and self.sentinel


@record
class SystemEntry(_Line):
    """A system line (stop_hook_summary, turn_duration, ...): a reply before it is complete."""

    subtype: str
    prevented_continuation: bool = False  # a stop_hook_summary of a Stop that ended the turn


Event = Reprompt | TurnStart | ToolResults | AssistantPart | Discard | GoalStatus | SystemEntry


@dataclass(slots=True)
class ParseStats:
    """How many lines were read and why the skipped ones were skipped."""

    lines: int = 0
    events: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def count(self, event: Event | None, reason: str) -> None:
        self.lines += 1
        if event is None:
            self.skipped[reason] += 1
        else:
            self.events += 1

    @property
    def broken(self) -> int:
        return self.skipped["bad_json"] + self.skipped["wrong_shape"]


def _load(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # (bytes that are not UTF-8, a tool's raw output, must not lose the line)
        try:
            return orjson.loads(line.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None


def _blocks(content: list[Any] | str) -> Iterator[tuple[Any, Any, Any, Any, Any]] | str:
    return content if isinstance(content, str) else (
        (block.get("type"), block.get("text"), block.get("id"), block.get("name"),
         block.get("input")) if isinstance(block, dict) else (None,) * 5 for block in content)


def _tool_results(content: Any, cwd: str = "") -> tuple[ToolResult, ...]:
    if not isinstance(content, list):
        return ()
    return tuple(ToolResult(_str(block.get("tool_use_id")), block.get("content"),
                            block.get("is_error") is True, cwd)
                 for block in content
                 if isinstance(block, dict) and block.get("type") == "tool_result")


def _starts_with(text: str, prefix: str) -> bool:
    """``text.lstrip().startswith(prefix)`` without copying a long text."""
    return text.startswith(prefix, leading_space(text))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_line(line: bytes, stats: ParseStats | None = None, *, subagent: bool = False
               ) -> Event | None:
    """One line's event; None (the reason counted in ``stats``) if skipped."""
    event, reason = _classify(line, subagent)
    if stats is not None:
        stats.count(event, reason)
    return event


def _classify(line: bytes, subagent: bool = False) -> tuple[Event | None, str]:
    if not line or line.isspace():  # (no copy of a long line)
        return None, "blank"
    entry = _load(line)
    if entry is None:
        return None, "bad_json"
    if not isinstance(entry, dict):
        return None, "wrong_shape"
    kind = entry.get("type")
    if kind not in ("user", "assistant", "system", "attachment"):
        return None, "other_type"
    if not subagent and entry.get("isSidechain") is True:
        return None, "sidechain"
    uuid = _str(entry.get("uuid"))
    timestamp = _str(entry.get("timestamp"))
    if kind == "system":
        return SystemEntry(uuid, timestamp, _str(entry.get("subtype")),
                           entry.get("preventedContinuation") is True), ""
    if kind == "attachment":
        return _goal_status(entry, uuid, timestamp)
    message = entry.get("message")
    if not isinstance(message, dict):
        return None, "wrong_shape"
    content = message.get("content")
    if kind == "assistant":
        return _assistant(entry, message, content, uuid, timestamp)
    return _user(entry, content, uuid, timestamp)


def _goal_status(entry: dict[str, Any], uuid: str, timestamp: str) -> tuple[Event | None, str]:
    attachment = entry.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "goal_status":
        return None, "other_attachment"
    return GoalStatus(uuid, timestamp, met=attachment.get("met") is True,
                      sentinel=attachment.get("sentinel") is True,
                      condition=_str(attachment.get("condition")),
                      reason=_str(attachment.get("reason"))), ""


THINKING = ("thinking", "redacted_thinking")  # blocks that are never a reply's text


def _assistant(entry: dict[str, Any], message: dict[str, Any], content: Any, uuid: str,
               timestamp: str) -> tuple[Event | None, str]:
    if not isinstance(content, (list, str)):
        return None, "wrong_shape"
    text, calls, only_thinking = reply_of(_blocks(content))
    usage = message.get("usage")
    get = usage.get if isinstance(usage, dict) else None
    return assistant_event(uuid, timestamp, text, calls, only_thinking,
                           api_error=entry.get("isApiErrorMessage"),
                           message_id=message.get("id"), stop_reason=message.get("stop_reason"),
                           model=message.get("model"), usage=None if get is None else usage_of(
                               get("input_tokens"), get("output_tokens"),
                               get("cache_read_input_tokens"),
                               get("cache_creation_input_tokens"), get("cache_creation"),
                               get("speed"), get("inference_geo")))


def reply_of(blocks: Iterable[tuple[Any, Any, Any, Any, Any]] | str
             ) -> tuple[str, tuple[ToolCall, ...], bool]:
    """A message's text, tool calls, and whether it is all thinking, from its blocks."""
    if isinstance(blocks, str):
        return blocks, (), False
    texts: list[str] = []
    calls: list[ToolCall] = []
    only_thinking: bool | None = None  # None until a block is seen
    for kind, block_text, tool_use_id, name, tool_input in blocks:
        if kind in THINKING:
            if only_thinking is None:
                only_thinking = True
            continue
        only_thinking = False
        if kind == "text":
            if isinstance(block_text, str):
                texts.append(block_text)
        elif kind == "tool_use":
            calls.append(ToolCall(_str(tool_use_id), _str(name), tool_input))
    return ((texts[0] if len(texts) == 1 else "\n".join(texts)), tuple(calls),
            only_thinking is True)


def assistant_event(uuid: str, timestamp: str, text: str, calls: tuple[ToolCall, ...],
                    only_thinking: bool, *, api_error: Any, message_id: Any, stop_reason: Any,
                    usage: Usage | None, model: Any) -> tuple[Event, str]:
    """An assistant line's event, from its reply (``reply_of``) and its message's fields."""
    # (the model's own reply may begin "API Error": only Claude Code's is one)
    if api_error is True or (not calls and model == SYNTHETIC_MODEL
                             and _starts_with(text, _API_ERROR)):
        return Discard(uuid, timestamp, "api_error"), ""
    final = not only_thinking and stop_reason not in NOT_FINAL
    return AssistantPart(_str(message_id) or uuid, uuid, timestamp, text, bool(calls), final,
                         calls, usage, _str(model)), ""


def _user(entry: dict[str, Any], content: Any, uuid: str, timestamp: str
          ) -> tuple[Event | None, str]:
    results = _tool_results(content, _str(entry.get("cwd")))
    if results:
        use_result = entry.get("toolUseResult")
        if len(results) == 1 and isinstance(use_result, dict) and "originalFile" in use_result:
            from .edits import states_of_result  # (an edit's line: its file's states)

            results = (replace(results[0], move=states_of_result(use_result)),)
        return ToolResults(uuid, timestamp, results), ""
    if not isinstance(content, (list, str)):
        return None, "wrong_shape"
    return user_text_event(uuid, timestamp, reply_of(_blocks(content))[0],
                           compact=entry.get("isCompactSummary"), meta=entry.get("isMeta"),
                           typed=typed_by_person(entry.get("promptSource"), entry.get("origin")))


def typed_by_person(prompt_source: Any, origin: Any) -> bool:
    """A user line that says a person typed it (2.1.328 on); a re-prompt never does."""
    return prompt_source == "typed" or (isinstance(origin, dict) and origin.get("kind") == "human")


def user_text_event(uuid: str, timestamp: str, text: str, *, compact: Any, meta: Any,
                    typed: bool = False) -> tuple[Event | None, str]:
    """A user line's event from its text (a person's ``typed`` text is no re-prompt)."""
    if _starts_with(text, _INTERRUPTED):
        return Discard(uuid, timestamp, "interrupted"), ""
    if meta is True and text.startswith(_NO_OUTPUT_NUDGE):
        return None, "no_output_nudge"
    if not typed and is_reprompt(text):
        return Reprompt(uuid, timestamp, text), ""
    kind: TurnKind = "compact" if compact is True else "meta" if meta is True else "prompt"
    return TurnStart(uuid, timestamp, kind, text), ""


def parse_timestamp(value: str) -> float | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00", 1))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def is_run_boundary(event: Event | None) -> bool:
    """True for events before which nothing can matter to the current run."""
    return isinstance(event, TurnStart)

