"""The hook's own detection: the transcript's tail plus this reply, judged by the engine.

``read_tail`` (I/O) reads only as much of the transcript as its trailing run needs
(``tailing.find_run_start``) and parses it; ``judge`` (pure) decides whether this reply,
counted exactly once, makes a rule fire.

Where is this reply (reply N, whose text is ``last_assistant_message``)? Measured on
Claude Code 2.1.250 and 2.1.328, headless and in the TUI, when the Stop hook for reply N
reads the transcript it finds one of:

* A: reply N is not written yet. The file ends with the re-prompt reply N answers (and
  that Stop's ``stop_hook_summary`` after it, where the version writes one).
* B: reply N is written, and so is the NEXT re-prompt: the Stop hooks run in parallel and
  Claude Code writes a blocking hook's re-prompt as soon as that hook answers, while ours is
  still running. No ``stop_hook_summary`` follows that re-prompt yet (it waits for every hook,
  ours included).
* C: reply N is (partly) written after its re-prompt, nothing after it.

When replies are identical, A and B look alike but for what follows the last re-prompt. So
B is taken when nothing like a ``stop_hook_summary`` follows the last re-prompt while the
tail shows this version writes them; where the tail shows no summary at all (2.1.250
headless), when that re-prompt was written after this hook started (``spawn_time``). The
engine counts every answer before reply N with ``live=False`` (nothing fires on history)
and reply N itself, built from ``last_assistant_message``, live.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..engine import (
    Answer,
    AssistantPart,
    Detection,
    Discard,
    Event,
    GoalStatus,
    Reprompt,
    RunDetector,
    SystemEntry,
    ToolResults,
    TurnStart,
    parse_line,
    parse_timestamp,
    text_digest,
)
from ..engine.detector import PROMPT_NONE, PROMPT_REPROMPT, PROMPT_TURN
from ..tailing import find_run_start, iter_lines_backwards

__all__ = [
    "MAX_FORWARD_BYTES",
    "SPAWN_MARGIN",
    "Judgement",
    "Tail",
    "TailEvent",
    "judge",
    "last_goal_status",
    "last_prompt_time",
    "read_tail",
    "tail_from_bytes",
]

MAX_FORWARD_BYTES = 64 * 1024 * 1024
"""Never parse more than this much of a tail (a run of huge answers is cut at the front)."""

SPAWN_MARGIN = 0.15
"""A re-prompt written later than this many seconds before the hook started is this
Stop's own (case B). Reply N's API round trip (hundreds of ms at least) separates it from
the previous Stop's re-prompt."""

_SUMMARY = "stop_hook_summary"


@dataclass(frozen=True, slots=True)
class TailEvent:
    """One parsed line of the tail, with where it sits in the file."""

    start: int
    end: int  # just past its newline
    event: Event


@dataclass(frozen=True, slots=True)
class Tail:
    """The end of a transcript, from the start of its trailing run."""

    path: str
    start: int
    end: int  # just past the last whole line read (a line being written is left out)
    events: tuple[TailEvent, ...]


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the tail plus this reply says."""

    detection: Detection | None
    reply_in_file: bool  # reply N is (at least partly) in the transcript
    reply_end: int | None  # offset just past reply N's last line, when it is in the file
    reply_uuid: str  # "" when reply N is not in the file
    prompt_uuid: str  # the re-prompt reply N answers, when known
    case: str  # "A" | "B" | "C" | "lagged" (see the module docstring) | "turn"
    goal: GoalStatus | None  # the last goal_status in the tail
    run_length: int  # the run after reply N (0 after a firing)
    chain_length: int

    @property
    def goal_set(self) -> bool:
        """A goal is set and neither met nor cleared, as far as the tail shows."""
        return self.goal is not None and not self.goal.met


# -- reading (I/O) ------------------------------------------------------------------------


def read_tail(path: str, *, max_forward: int = MAX_FORWARD_BYTES) -> Tail:
    """Read and parse the transcript's trailing run. Raises OSError when unreadable."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = find_run_start(handle, size)
        cut = False
        if size - start > max_forward:
            start, cut = size - max_forward, True
        handle.seek(start)
        data = handle.read(size - start)
    return tail_from_bytes(data, start=start, path=path, first_is_partial=cut)


def tail_from_bytes(
    data: bytes, *, start: int = 0, path: str = "", first_is_partial: bool = False
) -> Tail:
    """Parse ``data`` (the file's bytes from ``start``) into a Tail; pure."""
    events: list[TailEvent] = []
    position = 0
    end = 0
    if first_is_partial:
        newline = data.find(b"\n")
        position = len(data) if newline < 0 else newline + 1
        end = position
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            break  # a last line without its newline is still being written
        line = data[position:newline]
        event = parse_line(line)
        if event is not None:
            events.append(TailEvent(start + position, start + newline + 1, event))
        position = newline + 1
        end = position
    return Tail(path=path, start=start, end=start + end, events=tuple(events))


def last_prompt_time(path: str, *, limit: int = 8 * 1024 * 1024) -> float | None:
    """When the last prompt typed by a person (or a slash command) was written, if found
    within the last ``limit`` bytes; None when unknown."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        for _, line in iter_lines_backwards(handle, size, limit=limit):
            if b'"user"' not in line:
                continue
            event = parse_line(line)
            if isinstance(event, TurnStart) and event.kind == "prompt":
                return parse_timestamp(event.timestamp)
    return None


def last_goal_status(path: str, *, limit: int = 8 * 1024 * 1024) -> GoalStatus | None:
    """The last ``goal_status`` line within the last ``limit`` bytes, if any."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        for _, line in iter_lines_backwards(handle, size, limit=limit):
            if b"goal_status" not in line:
                continue
            event = parse_line(line)
            if isinstance(event, GoalStatus):
                return event
    return None


# -- judging (pure) ------------------------------------------------------------------------


def judge(
    tail: Tail,
    *,
    session_id: str,
    message: str | None,
    stop_hook_active: bool,
    spawn_time: float | None = None,
    already_fired: Collection[str] = (),
) -> Judgement:
    """Whether reply N (``message``) fires, counting it exactly once.

    ``stop_hook_active`` (from the hook input) says reply N answers a re-prompt even when
    the transcript does not show that re-prompt yet. ``spawn_time`` is when this hook's
    process started (seconds since the epoch), used only where the tail cannot tell case A
    from case B by itself; unknown, B is assumed (counting reply N once too few rather than
    once too many).
    """
    events = tail.events
    goal = _last_goal(events)
    located = _locate(events, message=message, stop_hook_active=stop_hook_active,
                      spawn_time=spawn_time)
    detector = RunDetector(session_id, live=False, already_fired=already_fired)
    _feed(detector, (item.event for item in events[: located.feed_until]))
    detector.go_live()
    parts = [item for item in events[located.parts_from : located.parts_until]
             if isinstance(item.event, AssistantPart)]
    used_tool = any(
        isinstance(item.event, ToolResults)
        or (isinstance(item.event, AssistantPart) and item.event.used_tool)
        for item in events[located.parts_from : located.parts_until]
    )
    last_part = parts[-1].event if parts else None
    if message is None and not parts:
        # Nothing to count: the reply is neither in the input nor in the file.
        return Judgement(None, False, None, "", located.prompt_uuid, located.case, goal,
                         detector.run_length, detector.chain_length)
    text = message if message is not None else _answer_text(parts)
    answer = Answer(
        prompt=located.prompt_kind,
        prompt_uuid=located.prompt_uuid,
        uuid=last_part.uuid if isinstance(last_part, AssistantPart) else "",
        timestamp=last_part.timestamp if isinstance(last_part, AssistantPart) else "",
        text=text,
        used_tool=used_tool,
    )
    detection = detector.add_answer(answer)
    return Judgement(
        detection=detection,
        reply_in_file=bool(parts),
        reply_end=parts[-1].end if parts else None,
        reply_uuid=answer.uuid,
        prompt_uuid=located.prompt_uuid,
        case=located.case,
        goal=goal,
        run_length=detector.run_length,
        chain_length=detector.chain_length,
    )


@dataclass(frozen=True, slots=True)
class _Located:
    feed_until: int  # events before this index are history (fed with live=False)
    parts_from: int  # reply N's lines, when in the file: events[parts_from:parts_until]
    parts_until: int
    prompt_kind: str
    prompt_uuid: str
    case: str


def _locate(
    events: tuple[TailEvent, ...], *, message: str | None, stop_hook_active: bool,
    spawn_time: float | None,
) -> _Located:
    count = len(events)
    k = _last_prompt_index(events, count)
    after_parts = [i for i in range(k + 1, count) if isinstance(events[i].event, AssistantPart)]
    prompt_event = events[k].event if k >= 0 else None

    def not_in_file(case: str, prompt: Event | None) -> _Located:
        # Reply N is not in the file: all of it is history; N answers ``prompt`` (if known).
        if stop_hook_active:
            kind = PROMPT_REPROMPT
        else:
            kind = PROMPT_TURN if isinstance(prompt, TurnStart) else PROMPT_NONE
        uuid = prompt.uuid if isinstance(prompt, Reprompt) else ""
        return _Located(count, count, count, kind, uuid, case)

    if after_parts:
        reprompted = isinstance(prompt_event, Reprompt)
        if stop_hook_active and not reprompted:
            # The file shows an answer to a person's prompt, yet reply N answers a
            # re-prompt: that answer is an earlier one, reply N and its re-prompt lag.
            return not_in_file("lagged", None)
        last_reply = _last_reply(events, after_parts)
        if (stop_hook_active and message is not None and last_reply.final
                and _digest_differs(last_reply.text, message)):
            # A complete answer to the last re-prompt that is not reply N: reply N's own
            # re-prompt and reply N are not written yet.
            return not_in_file("lagged", None)
        kind = _prompt_kind(prompt_event)
        if stop_hook_active:
            kind = PROMPT_REPROMPT
        uuid = getattr(prompt_event, "uuid", "") if prompt_event is not None else ""
        return _Located(k + 1, k + 1, count, kind, uuid, "C")

    if isinstance(prompt_event, Reprompt) and stop_hook_active:
        previous = _last_prompt_index(events, k)
        answer_parts = [i for i in range(previous + 1, k)
                        if isinstance(events[i].event, AssistantPart)]
        earlier = events[previous].event if previous >= 0 else None
        if (answer_parts and isinstance(earlier, Reprompt)
                and _is_own_reprompt(events, k, spawn_time)
                and (message is None
                     or not _digest_differs(_last_reply(events, answer_parts).text, message))):
            return _Located(previous + 1, previous + 1, k, PROMPT_REPROMPT, earlier.uuid, "B")
        return not_in_file("A", prompt_event)
    if stop_hook_active:
        return not_in_file("lagged", None)
    return not_in_file("turn", prompt_event)


def _is_own_reprompt(events: tuple[TailEvent, ...], k: int, spawn_time: float | None) -> bool:
    """Whether the re-prompt at ``k`` was written for THIS Stop (case B), not the last one."""
    if any(_is_summary(events[i].event) for i in range(k + 1, len(events))):
        return False  # that re-prompt's Stop hooks have all finished: it is the previous one
    if any(_is_summary(events[i].event) for i in range(k)):
        return True  # this version writes summaries, and this re-prompt has none yet
    reprompt = events[k].event
    written = parse_timestamp(reprompt.timestamp) if isinstance(reprompt, Reprompt) else None
    if spawn_time is None or written is None:
        return True
    return written >= spawn_time - SPAWN_MARGIN


def _is_summary(event: Event) -> bool:
    return isinstance(event, SystemEntry) and event.subtype == _SUMMARY


def _last_prompt_index(events: tuple[TailEvent, ...], before: int) -> int:
    for i in range(before - 1, -1, -1):
        if isinstance(events[i].event, (Reprompt, TurnStart, Discard)):
            return i
    return -1


def _prompt_kind(event: Event | None) -> str:
    if isinstance(event, Reprompt):
        return PROMPT_REPROMPT
    if isinstance(event, TurnStart):
        return PROMPT_TURN
    return PROMPT_NONE


@dataclass(frozen=True, slots=True)
class _Reply:
    text: str
    final: bool


def _last_reply(events: tuple[TailEvent, ...], indexes: list[int]) -> _Reply:
    """The text of the last API reply among the assistant lines at ``indexes``."""
    last = events[indexes[-1]].event
    assert isinstance(last, AssistantPart)
    texts: list[str] = []
    final = False
    for i in indexes:
        part = events[i].event
        if isinstance(part, AssistantPart) and part.message_id == last.message_id:
            if part.text:
                texts.append(part.text)
            final = final or part.final
    return _Reply("\n".join(texts), final)


def _answer_text(parts: list[TailEvent]) -> str:
    return "\n".join(
        item.event.text for item in parts
        if isinstance(item.event, AssistantPart) and item.event.text
    )


def _digest_differs(text: str, message: str) -> bool:
    return text_digest(text) != text_digest(message)


def _last_goal(events: tuple[TailEvent, ...]) -> GoalStatus | None:
    for item in reversed(events):
        if isinstance(item.event, GoalStatus):
            return item.event
    return None


def _feed(detector: RunDetector, events: Iterable[Event]) -> None:
    for event in events:
        detector.feed(event)
    detector.flush()  # everything before reply N is complete
