"""The hook's own detection: the transcript's tail plus this reply, judged by the engine.

``read_tail`` (I/O) reads only as much of the transcript as the judgement needs (the
trailing run, back to the anchor or the turn's start); ``judge`` (pure) decides whether
this reply, counted exactly once, makes a rule fire.

Where is this reply (reply N, whose text is ``last_assistant_message``)? Measured on
Claude Code 2.1.250 and 2.1.328, headless and in the TUI, when the Stop hook for reply N
reads the transcript it finds one of:

* A: reply N is not written yet. The file ends with the re-prompt reply N answers (and
  that Stop's ``stop_hook_summary`` after it, where the version writes one).
* B: reply N is written, and so is the NEXT re-prompt: the Stop hooks run in parallel and
  Claude Code writes a blocking hook's re-prompt as soon as that hook answers, while ours is
  still running.
* C: reply N is (partly) written after its re-prompt, nothing after it.
* lagged: not even the re-prompt reply N answers is written yet.

With identical replies A and B look alike. The anchor (``anchor.py``) tells them apart
deterministically: the hook for reply N-1 saved which re-prompt reply N-1 answered, so
reply N answers the FIRST re-prompt after it. Without an anchor from this turn, reply N is
the turn's first answer to a re-prompt: it answers the first re-prompt after the turn's
start. If that re-prompt's answer is in the file, that answer is reply N (B, C); if not,
reply N is only in the hook input (A).

Where the version writes ``stop_hook_summary`` lines, case A is taken only where they
agree (a summary follows that re-prompt: its Stop is over). Only when neither the anchor
nor the turn's start is in the tail, or the file contradicts them (an answer after
"reply N": a hook run that saved nothing), or the summaries disagree, is the old guess
used: a ``stop_hook_summary`` after the last re-prompt means its Stop is over (A), none
while the version writes them means it is this Stop's (B); where the tail shows no
summary at all (2.1.250 headless), the re-prompt's time against this hook's start
(``spawn_time``), B whenever in doubt: reply N is counted once too few rather than twice.

The engine counts every answer before reply N with ``live=False`` (nothing fires on
history) and reply N itself, built from ``last_assistant_message``, live.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

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
from ..engine.answers import PROMPT_NONE, PROMPT_REPROMPT, PROMPT_TURN
from ..tailing import find_run_start, iter_lines_backwards
from .anchor import Anchor

__all__ = [
    "MAX_FORWARD_BYTES",
    "SPAWN_MARGIN",
    "TURN_REACH",
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

TURN_REACH = 8 * 1024 * 1024
"""How far back before the trailing run the hook looks for the turn's start (or its
anchor), when the run starts at an answer that used a tool."""

SPAWN_MARGIN = 0.15
"""Last resort only (no anchor, no turn start in the tail, no summaries): a re-prompt
written later than this many seconds before the hook started is taken as this Stop's own
(case B). Misjudging it errs late, never early."""

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
    anchor: Anchor | None = None  # what to remember for the next reply (None: nothing sure)
    located_by: str = ""  # "anchor" | "turn" | "summary" | "clock" | "tail"

    @property
    def goal_set(self) -> bool:
        """A goal is set and neither met nor cleared, as far as the tail shows."""
        return self.goal is not None and not self.goal.met


# -- reading (I/O) ------------------------------------------------------------------------


def read_tail(
    path: str, *, anchor: Anchor | None = None, max_forward: int = MAX_FORWARD_BYTES
) -> Tail:
    """Read and parse the transcript's trailing run. Raises OSError when unreadable.

    The tail also reaches back to the anchor's line (when known and within
    ``TURN_REACH``), else to the turn's start (when the run starts later, at an answer
    that used a tool), so that ``judge`` finds the re-prompt this reply answers.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = find_run_start(handle, size)
        hint = _anchor_start(handle, anchor, size) if anchor is not None else None
        if hint is not None:
            start = min(start, hint)
        elif start > 0 and not _is_turn_start_at(handle, start):
            turn = _turn_start_before(handle, start)
            if turn is not None:
                start = turn
        cut = False
        if size - start > max_forward:
            start, cut = size - max_forward, True
        handle.seek(start)
        data = handle.read(size - start)
    return tail_from_bytes(data, start=start, path=path, first_is_partial=cut)


def _anchor_start(handle: Any, anchor: Anchor, size: int) -> int | None:
    """The offset of the anchor's line, when it is a line start within reach."""
    offset = anchor.offset
    if not anchor.base or offset < 0 or offset >= size or size - offset > TURN_REACH:
        return None
    if offset > 0:
        handle.seek(offset - 1)
        if handle.read(1) != b"\n":
            return None
    return offset


def _is_turn_start_at(handle: Any, offset: int) -> bool:
    handle.seek(offset)
    line = handle.readline(1024 * 1024)
    return line.endswith(b"\n") and isinstance(parse_line(line), TurnStart)


def _turn_start_before(handle: Any, end: int) -> int | None:
    """The offset of the last turn start before ``end`` (within ``TURN_REACH``), if any."""
    for offset, line in iter_lines_backwards(handle, end, limit=TURN_REACH):
        if b'"user"' in line and isinstance(parse_line(line), TurnStart):
            return offset
    return None


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
    anchor: Anchor | None = None,
) -> Judgement:
    """Whether reply N (``message``) fires, counting it exactly once.

    ``stop_hook_active`` (from the hook input) says reply N answers a re-prompt even when
    the transcript does not show that re-prompt yet. ``anchor`` is what the hook for the
    previous reply saved (see the module docstring); the judgement's own ``anchor`` is what
    to save for the next one. ``spawn_time`` is when this hook's process started (seconds
    since the epoch), used only as the last resort.
    """
    events = tail.events
    goal = _last_goal(events)
    if stop_hook_active:
        located = _locate_active(events, message=message, spawn_time=spawn_time,
                                 anchor=anchor)
    else:
        located = _locate_turn(events)
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
                         detector.run_length, detector.chain_length, located.anchor,
                         located.by)
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
        anchor=located.anchor,
        located_by=located.by,
    )


@dataclass(frozen=True, slots=True)
class _Located:
    feed_until: int  # events before this index are history (fed with live=False)
    parts_from: int  # reply N's lines, when in the file: events[parts_from:parts_until]
    parts_until: int
    prompt_kind: str
    prompt_uuid: str
    case: str
    anchor: Anchor | None = None  # the re-prompt reply N answered, for the next reply
    by: str = ""


_PROMPTS = (Reprompt, TurnStart, Discard)


def _locate_active(
    events: tuple[TailEvent, ...], *, message: str | None, spawn_time: float | None,
    anchor: Anchor | None,
) -> _Located:
    """Reply N answers a re-prompt: find it from the anchor, else guess (erring late)."""
    start = _resolve(events, anchor)
    if start is not None:
        base, skip, by = start
        located = _by_anchor(events, base, skip, by)
        if located is not None and not (located.case == "A" and _unfinished(events)):
            return located
    return _locate_guess(events, message=message, spawn_time=spawn_time)


def _unfinished(events: tuple[TailEvent, ...]) -> bool:
    """The summaries disagree with case A: this version writes them, yet none follows the
    last re-prompt, whose Stop is so still running (it is this Stop's own, B). Only this
    direction is checked: it is the one where trusting the anchor could fire early."""
    last = _last_index(events, Reprompt)
    return (last >= 0 and any(_is_summary(events[i].event) for i in range(last))
            and not any(_is_summary(events[i].event) for i in range(last + 1, len(events))))


def _resolve(events: tuple[TailEvent, ...], anchor: Anchor | None
             ) -> tuple[int, int, str] | None:
    """(index of the base line, re-prompts after it already answered, how) or None.

    The anchor counts only when no turn start follows its line (else it is a previous
    turn's); without one, the last turn start is the base and nothing after it is answered.
    """
    turn = _last_index(events, TurnStart)
    if anchor is not None:
        if anchor.base:
            base = _index_of(events, anchor.base)
            if base >= 0 and base >= turn:
                return base, anchor.skip, "anchor"
        elif turn >= 0 and events[turn].start < anchor.turn_before:
            return turn, anchor.skip, "anchor"
    if turn >= 0:
        return turn, 0, "turn"
    return None


def _by_anchor(events: tuple[TailEvent, ...], base: int, skip: int, by: str
               ) -> _Located | None:
    """Reply N answers the (``skip`` + 1)-th re-prompt after ``base``; None when the file
    contradicts that (the anchor is stale: a hook run that saved nothing)."""
    count = len(events)
    seen = 0
    index = base + 1
    target: tuple[int, int] | None = None
    while index < count:
        event = events[index].event
        if isinstance(event, Reprompt):
            first, last, index = _group(events, index)
            seen += 1
            if seen == skip + 1:
                target = (first, last)
                break
            continue
        if isinstance(event, (TurnStart, Discard)):
            return None  # a turn start after the base, or an answer thrown away
        index += 1
    if target is None:
        if seen < skip:
            return None  # fewer re-prompts than the anchor says were answered
        # Reply N's re-prompt is not written yet, so neither is reply N.
        anchor = _anchor_at(events, base, skip + 1)
        return _Located(count, count, count, PROMPT_REPROMPT, "", "lagged", anchor, by)
    first, last = target
    prompt = events[last]
    anchor = _anchor_at(events, last, 0)
    following = _next_index(events, last + 1, _PROMPTS)
    end = following if following >= 0 else count
    has_parts = any(isinstance(events[i].event, AssistantPart) for i in range(last + 1, end))
    if not has_parts:
        if following >= 0:
            return None  # another prompt came before any answer to this re-prompt
        return _Located(count, count, count, PROMPT_REPROMPT, prompt.event.uuid, "A",
                        anchor, by)
    if following >= 0:
        if not isinstance(events[following].event, Reprompt):
            return None
        if any(isinstance(events[i].event, (AssistantPart, ToolResults, Discard))
               for i in range(following, count)):
            return None  # an answer after reply N: reply N is an older one, the anchor stale
    case = "B" if following >= 0 else "C"
    return _Located(last + 1, last + 1, end, PROMPT_REPROMPT, prompt.event.uuid, case,
                    anchor, by)


def _group(events: tuple[TailEvent, ...], index: int) -> tuple[int, int, int]:
    """The re-prompts written together from ``index`` (two blocking hooks may each write
    one), as (first, last, index after the group)."""
    first = last = index
    index += 1
    while index < len(events):
        event = events[index].event
        if isinstance(event, Reprompt):
            last = index
        elif isinstance(event, (AssistantPart, ToolResults, TurnStart, Discard)):
            break
        index += 1
    return first, last, index


def _anchor_at(events: tuple[TailEvent, ...], index: int, skip: int) -> Anchor | None:
    """The anchor naming the line at ``index`` (and ``skip`` re-prompts after it)."""
    item = events[index]
    uuid = getattr(item.event, "uuid", "")
    if not uuid:
        return None
    return Anchor(uuid, skip, offset=item.start)


def _locate_turn(events: tuple[TailEvent, ...]) -> _Located:
    """Reply N answers a person's prompt (``stop_hook_active`` false): it cannot fire."""
    count = len(events)
    k = _last_prompt_index(events, count)
    prompt_event = events[k].event if k >= 0 else None
    if any(isinstance(events[i].event, AssistantPart) for i in range(k + 1, count)):
        uuid = getattr(prompt_event, "uuid", "") if prompt_event is not None else ""
        return _Located(k + 1, k + 1, count, _prompt_kind(prompt_event), uuid, "C")
    kind = PROMPT_TURN if isinstance(prompt_event, TurnStart) else PROMPT_NONE
    return _Located(count, count, count, kind, "", "turn")


def _locate_guess(
    events: tuple[TailEvent, ...], *, message: str | None, spawn_time: float | None,
) -> _Located:
    """No usable anchor nor turn start: tell A from B by the tail's summaries, else by the
    clock, taking B (one answer fewer) whenever in doubt."""
    count = len(events)
    k = _last_prompt_index(events, count)
    after_parts = [i for i in range(k + 1, count) if isinstance(events[i].event, AssistantPart)]
    prompt_event = events[k].event if k >= 0 else None

    def not_in_file(case: str, prompt: Event | None, by: str) -> _Located:
        # Reply N is not in the file: all of it is history; N answers ``prompt`` (if known).
        uuid = prompt.uuid if isinstance(prompt, Reprompt) else ""
        anchor = _anchor_at(events, k, 0) if uuid else None
        return _Located(count, count, count, PROMPT_REPROMPT, uuid, case, anchor, by)

    def lagged() -> _Located:
        # Reply N answers a re-prompt written after the last prompt in the file.
        anchor = _anchor_at(events, k, 1) if k >= 0 else None
        return _Located(count, count, count, PROMPT_REPROMPT, "", "lagged", anchor, "tail")

    if after_parts:
        if not isinstance(prompt_event, Reprompt):
            # The file shows an answer to a person's prompt, yet reply N answers a
            # re-prompt: that answer is an earlier one, reply N and its re-prompt lag.
            return lagged()
        last_reply = _last_reply(events, after_parts)
        if message is not None and last_reply.final and _digest_differs(last_reply.text,
                                                                          message):
            # A complete answer to the last re-prompt that is not reply N: reply N's own
            # re-prompt and reply N are not written yet.
            return lagged()
        return _Located(k + 1, k + 1, count, PROMPT_REPROMPT, prompt_event.uuid, "C",
                        _anchor_at(events, k, 0), "tail")

    if isinstance(prompt_event, Reprompt):
        previous = _last_prompt_index(events, k)
        answer_parts = [i for i in range(previous + 1, k)
                        if isinstance(events[i].event, AssistantPart)]
        earlier = events[previous].event if previous >= 0 else None
        own, by = _is_own_reprompt(events, k, spawn_time)
        if (answer_parts and isinstance(earlier, Reprompt) and own
                and (message is None
                     or not _digest_differs(_last_reply(events, answer_parts).text, message))):
            return _Located(previous + 1, previous + 1, k, PROMPT_REPROMPT, earlier.uuid, "B",
                            _anchor_at(events, previous, 0), by)
        return not_in_file("A", prompt_event, by)
    return lagged()


def _is_own_reprompt(events: tuple[TailEvent, ...], k: int, spawn_time: float | None
                     ) -> tuple[bool, str]:
    """Whether the re-prompt at ``k`` was written for THIS Stop (case B), not the last one;
    and what told (``summary`` or ``clock``)."""
    if any(_is_summary(events[i].event) for i in range(k + 1, len(events))):
        return False, "summary"  # that re-prompt's Stop hooks have all finished
    if any(_is_summary(events[i].event) for i in range(k)):
        return True, "summary"  # this version writes summaries, and this re-prompt has none
    reprompt = events[k].event
    written = parse_timestamp(reprompt.timestamp) if isinstance(reprompt, Reprompt) else None
    if spawn_time is None or written is None:
        return True, "clock"
    return written >= spawn_time - SPAWN_MARGIN, "clock"


def _is_summary(event: Event) -> bool:
    return isinstance(event, SystemEntry) and event.subtype == _SUMMARY


def _last_prompt_index(events: tuple[TailEvent, ...], before: int) -> int:
    for i in range(before - 1, -1, -1):
        if isinstance(events[i].event, _PROMPTS):
            return i
    return -1


def _last_index(events: tuple[TailEvent, ...], kind: type) -> int:
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i].event, kind):
            return i
    return -1


def _next_index(events: tuple[TailEvent, ...], start: int, kinds: tuple[type, ...]) -> int:
    for i in range(start, len(events)):
        if isinstance(events[i].event, kinds):
            return i
    return -1


def _index_of(events: tuple[TailEvent, ...], uuid: str) -> int:
    """The index of the re-prompt or turn start with this uuid (the last one), or -1."""
    for i in range(len(events) - 1, -1, -1):
        event = events[i].event
        if isinstance(event, (Reprompt, TurnStart)) and event.uuid == uuid:
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
