"""Where reply N is in the tail, and which re-prompt it answers (pure).

The hook's own detection: the transcript's tail plus this reply, judged by the engine.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..engine.answers import PROMPT_NONE, PROMPT_REPROMPT, PROMPT_TURN, AnswerAssembler, PromptKind
from ..engine.reader import LineEvent
from ..engine.rules import text_digest
from ..engine.transcript import (
    AssistantPart,
    Discard,
    Event,
    Reprompt,
    SystemEntry,
    ToolResults,
    TurnStart,
    parse_timestamp,
)
from .anchor import Anchor

__all__ = ["SPAWN_MARGIN", "Case", "Located", "locate_active", "locate_turn", "reply_text"]

Case = Literal["A", "B", "C", "lagged", "turn"]
"""Where reply N is (see above); ``turn``: it answers a person's prompt, not in the file."""

SPAWN_MARGIN = 0.15
"""Last resort only (no anchor, no turn start in the tail, no summaries): a re-prompt
written later than this many seconds before the hook started is taken as this Stop's own
(case B). Misjudging it errs late, never early."""

_SUMMARY = "stop_hook_summary"


@dataclass(frozen=True, slots=True)
class Located:
    feed_until: int  # events before this index are history (fed with live=False)
    parts_from: int  # reply N's lines, when in the file: events[parts_from:parts_until]
    parts_until: int
    prompt_kind: PromptKind
    prompt_uuid: str
    case: Case
    anchor: Anchor | None = None  # the re-prompt reply N answered, for the next reply
    by: str = ""


_PROMPTS = (Reprompt, TurnStart, Discard)


def locate_active(
    events: tuple[LineEvent, ...], *, message: str | None, spawn_time: float | None,
    anchor: Anchor | None,
) -> Located:
    """Reply N answers a re-prompt: find it from the anchor, else guess (erring late)."""
    start = _resolve(events, anchor)
    if start is not None:
        base, skip, by = start
        located = _by_anchor(events, base, skip, by)
        if located is not None and not (located.case == "A" and _unfinished(events)):
            return located
    return _locate_guess(events, message=message, spawn_time=spawn_time)


def _unfinished(events: tuple[LineEvent, ...]) -> bool:
    """The summaries disagree with case A: this version writes them, yet none follows the
    last re-prompt, whose Stop is so still running (it is this Stop's own, B). Only this
    direction is checked: it is the one where trusting the anchor could fire early."""
    last = _last_index(events, Reprompt)
    return (last >= 0 and any(_is_summary(events[i].event) for i in range(last))
            and not any(_is_summary(events[i].event) for i in range(last + 1, len(events))))


def _resolve(events: tuple[LineEvent, ...], anchor: Anchor | None
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


def _by_anchor(events: tuple[LineEvent, ...], base: int, skip: int, by: str
               ) -> Located | None:
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
        return Located(count, count, count, PROMPT_REPROMPT, "", "lagged", anchor, by)
    first, last = target
    prompt = events[last]
    anchor = _anchor_at(events, last, 0)
    following = _next_index(events, last + 1, _PROMPTS)
    end = following if following >= 0 else count
    has_parts = any(isinstance(events[i].event, AssistantPart) for i in range(last + 1, end))
    if not has_parts:
        if following >= 0:
            return None  # another prompt came before any answer to this re-prompt
        return Located(count, count, count, PROMPT_REPROMPT, prompt.event.uuid, "A",
                        anchor, by)
    if following >= 0:
        if not isinstance(events[following].event, Reprompt):
            return None
        if any(isinstance(events[i].event, (AssistantPart, ToolResults, Discard))
               for i in range(following, count)):
            return None  # an answer after reply N: reply N is an older one, the anchor stale
    case: Case = "B" if following >= 0 else "C"
    return Located(last + 1, last + 1, end, PROMPT_REPROMPT, prompt.event.uuid, case,
                    anchor, by)


def _group(events: tuple[LineEvent, ...], index: int) -> tuple[int, int, int]:
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


def _anchor_at(events: tuple[LineEvent, ...], index: int, skip: int) -> Anchor | None:
    """The anchor naming the line at ``index`` (and ``skip`` re-prompts after it)."""
    item = events[index]
    uuid = getattr(item.event, "uuid", "")
    if not uuid:
        return None
    return Anchor(uuid, skip, offset=item.start)


def locate_turn(events: tuple[LineEvent, ...]) -> Located:
    """Reply N answers a person's prompt (``stop_hook_active`` false): it cannot fire."""
    count = len(events)
    k = _last_prompt_index(events, count)
    prompt_event = events[k].event if k >= 0 else None
    if any(isinstance(events[i].event, AssistantPart) for i in range(k + 1, count)):
        uuid = getattr(prompt_event, "uuid", "") if prompt_event is not None else ""
        return Located(k + 1, k + 1, count, _prompt_kind(prompt_event), uuid, "C")
    kind: PromptKind = PROMPT_TURN if isinstance(prompt_event, TurnStart) else PROMPT_NONE
    return Located(count, count, count, kind, "", "turn")


def _locate_guess(
    events: tuple[LineEvent, ...], *, message: str | None, spawn_time: float | None,
) -> Located:
    """No usable anchor nor turn start: tell A from B by the tail's summaries, else by the
    clock, taking B (one answer fewer) whenever in doubt."""
    count = len(events)
    k = _last_prompt_index(events, count)
    after_parts = [i for i in range(k + 1, count) if isinstance(events[i].event, AssistantPart)]
    prompt_event = events[k].event if k >= 0 else None

    def not_in_file(case: Case, prompt: Event | None, by: str) -> Located:
        # Reply N is not in the file: all of it is history; N answers ``prompt`` (if known).
        uuid = prompt.uuid if isinstance(prompt, Reprompt) else ""
        anchor = _anchor_at(events, k, 0) if uuid else None
        return Located(count, count, count, PROMPT_REPROMPT, uuid, case, anchor, by)

    def lagged() -> Located:
        # Reply N answers a re-prompt written after the last prompt in the file.
        anchor = _anchor_at(events, k, 1) if k >= 0 else None
        return Located(count, count, count, PROMPT_REPROMPT, "", "lagged", anchor, "tail")

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
        return Located(k + 1, k + 1, count, PROMPT_REPROMPT, prompt_event.uuid, "C",
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
            return Located(previous + 1, previous + 1, k, PROMPT_REPROMPT, earlier.uuid, "B",
                            _anchor_at(events, previous, 0), by)
        return not_in_file("A", prompt_event, by)
    return lagged()


def _is_own_reprompt(events: tuple[LineEvent, ...], k: int, spawn_time: float | None
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


def _last_prompt_index(events: tuple[LineEvent, ...], before: int) -> int:
    for i in range(before - 1, -1, -1):
        if isinstance(events[i].event, _PROMPTS):
            return i
    return -1


def _last_index(events: tuple[LineEvent, ...], kind: type) -> int:
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i].event, kind):
            return i
    return -1


def _next_index(events: tuple[LineEvent, ...], start: int, kinds: tuple[type, ...]) -> int:
    for i in range(start, len(events)):
        if isinstance(events[i].event, kinds):
            return i
    return -1


def _index_of(events: tuple[LineEvent, ...], uuid: str) -> int:
    """The index of the re-prompt or turn start with this uuid (the last one), or -1."""
    for i in range(len(events) - 1, -1, -1):
        event = events[i].event
        if isinstance(event, (Reprompt, TurnStart)) and event.uuid == uuid:
            return i
    return -1


def _prompt_kind(event: Event | None) -> PromptKind:
    if isinstance(event, Reprompt):
        return PROMPT_REPROMPT
    if isinstance(event, TurnStart):
        return PROMPT_TURN
    return PROMPT_NONE


@dataclass(frozen=True, slots=True)
class _Reply:
    text: str
    final: bool


def _last_reply(events: tuple[LineEvent, ...], indexes: list[int]) -> _Reply:
    """The text of the last API reply among the assistant lines at ``indexes``, and
    whether a line marked it final; grouped by the engine's one answer assembler."""
    assembler = AnswerAssembler()
    for i in indexes:
        event = events[i].event
        if isinstance(event, AssistantPart):
            assembler.feed(event)
    done = assembler.flush()
    final = bool(done)
    answers = done or assembler.finish()
    return _Reply(answers[-1].last_text if answers else "", final)


def reply_text(parts: list[LineEvent], message: str | None = None) -> str:
    """Reply N's whole text, as the watcher reads it (every API reply of the answer, text
    before a tool call too): its lines in the file, ending with ``message`` (the hook
    input's ``last_assistant_message``, the last API reply's text) where the file does not
    hold it yet."""
    assembler = AnswerAssembler()
    for item in parts:
        if isinstance(item.event, AssistantPart):
            assembler.feed(item.event)
    answers = assembler.finish()
    written = answers[-1].text if answers else ""
    if message is None or written.endswith(message):
        return written
    return f"{written}\n{message}" if written else message


def _digest_differs(text: str, message: str) -> bool:
    return text_digest(text) != text_digest(message)
