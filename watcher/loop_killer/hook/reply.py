"""Which reply is this, and does it fire: the Stop hook's judgement of reply N.

Three steps, in this order in the file:

* the anchor (I/O, ``<state>/hook/<session>.json``): which re-prompt the last judged reply
  answered, the hook's memory between two Stops;
* ``read_tail`` (I/O): only as much of the transcript as the judgement needs (the trailing
  run, back to the anchor or the turn's start), parsed by the engine's one event reader,
  every open refusing a FIFO or anything but a regular file without blocking;
* ``judge`` (pure): where reply N (``last_assistant_message``) is in the tail
  (``locate_active``), and whether it makes a rule fire, judged by the engine's one judge
  (``RunDetector``): every answer before reply N counted with ``live=False`` (nothing fires
  on history), reply N itself once, live.

Where is reply N? Measured on Claude Code 2.1.250 and 2.1.328, headless and in the TUI,
when the Stop hook for reply N reads the transcript it finds one of:

* A: reply N is not written yet. The file ends with the re-prompt reply N answers (and
  that Stop's ``stop_hook_summary`` after it, where the version writes one).
* B: reply N is written, and so is the NEXT re-prompt: the Stop hooks run in parallel and
  Claude Code writes a blocking hook's re-prompt as soon as that hook answers, while ours is
  still running.
* C: reply N is (partly) written after its re-prompt, nothing after it.
* lagged: not even the re-prompt reply N answers is written yet.

With identical replies A and B look alike. The anchor tells them apart deterministically:
every hook run for a reply that answers a re-prompt leaves which re-prompt that reply
answered, so reply N answers the FIRST re-prompt after reply N-1's. An anchor names a line
(``base``: a re-prompt's or a turn start's uuid, with its offset in the transcript) and
``skip``: the reply answered the ``skip``-th re-prompt after ``base`` (0: ``base`` itself).
``base`` "" means the last turn start written before ``turn_before`` (bytes): a turn whose
start no hook has read yet. A hook run that does not read the transcript (a live watcher
covers it, or the run failed) only counts one more (``advance_anchor``), so the chain never
skips a reply. Without an anchor from this turn, reply N is the turn's first answer to a
re-prompt: it answers the first re-prompt after the turn's start. If that re-prompt's
answer is in the file, that answer is reply N (B, C); if not, reply N is only in the hook
input (A).

Where the version writes ``stop_hook_summary`` lines, case A is taken only where they
agree (a summary follows that re-prompt: its Stop is over). Only when neither the anchor
nor the turn's start is in the tail, or the file contradicts them (an answer after
"reply N": a hook run that saved nothing), or the summaries disagree, is the old guess
used: a ``stop_hook_summary`` after the last re-prompt means its Stop is over (A), none
while the version writes them means it is this Stop's (B); where the tail shows no
summary at all (2.1.250 headless), the re-prompt's time against this hook's start
(``spawn_time``), B whenever in doubt: reply N is counted once too few rather than twice.

Claude Code starts the next Stop's hooks only after every hook of this Stop has ended, so
an anchor saved AFTER this hook process started was saved for this very reply, by a twin
(the plugin loaded twice): it is not counted again; the anchor before it (``prev``) is the
one this reply's place is judged from. "After" is told on the boot clock (``boot_clock``),
which nobody sets: the wall clock set back between two Stops would make the next reply's
hook look older than the last anchor, a twin of the reply before. Anchors are small,
private, written atomically and read without following links (nor a linked ``hook/`` or
state folder: ``state.files.state_folder``); a missing or broken file is simply no anchor.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal

from ..engine.answers import (
    PROMPT_NONE,
    PROMPT_REPROMPT,
    PROMPT_TURN,
    Answer,
    AnswerAssembler,
    PromptKind,
)
from ..engine.reader import EventReader, LineEvent
from ..engine.rules import DEFAULT_THRESHOLDS, Thresholds, text_digest
from ..engine.run import Detection, RunDetector
from ..engine.tool_repeat import DEFAULT_IGNORED
from ..engine.transcript import (
    STOP_HOOK_SUMMARY,
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    Reprompt,
    SystemEntry,
    ToolCall,
    ToolResults,
    TurnStart,
    parse_line,
    parse_timestamp,
)
from ..state.files import file_size, open_transcript
from ..tailing import find_run_start, iter_lines_backwards

__all__ = [
    "Anchor",
    "AnchorKeeper",
    "Case",
    "Judgement",
    "Saved",
    "Tail",
    "advance_anchor",
    "anchor_path",
    "judge",
    "last_goal_status",
    "last_prompt_time",
    "read_anchor",
    "read_tail",
    "save_anchor",
    "tail_from_bytes",
]

ANCHOR_DIR = "hook"


ANCHOR_VERSION = 1


_MAX_ANCHOR_BYTES = 4096


TWIN_MARGIN = 0.015
"""An anchor saved later than this many seconds before this hook process started is a
twin's, for this same reply. (The previous Stop's hooks ended an API round trip before
this one started; the process start time read from ``/proc`` is good to about 20 ms.)"""


def boot_clock() -> float:
    """Seconds on a clock every process shares and nobody sets (Linux: since boot,
    suspend included, the clock of ``/proc/uptime``)."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Anchor:
    """The re-prompt a reply answered: the ``skip``-th re-prompt after the line ``base``."""

    __slots__ = ("base", "offset", "prompt_id", "skip", "turn_before")

    def __init__(self, base: str, skip: int = 0, *, offset: int = -1, turn_before: int = -1,
                 prompt_id: str = "") -> None:
        self.base = base  # uuid of a re-prompt or turn start; "" = the turn's start
        self.skip = skip
        self.offset = offset  # where ``base``'s line starts in the transcript; -1 unknown
        self.turn_before = turn_before  # for base "": the turn started before this offset
        self.prompt_id = prompt_id  # the hook input's prompt_id (one per turn), "" unknown

    def advanced(self, *, prompt_id: str = "") -> Anchor:
        """The anchor of the reply after this one, when nobody read where it is."""
        return Anchor(self.base, self.skip + 1, offset=self.offset,
                      turn_before=self.turn_before, prompt_id=prompt_id or self.prompt_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Anchor) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Anchor({fields})"

    def fields(self) -> dict[str, Any]:
        return {"base": self.base, "skip": self.skip, "offset": self.offset,
                "turn_before": self.turn_before, "prompt_id": self.prompt_id}

    @classmethod
    def from_fields(cls, record: Any) -> Anchor | None:
        if not isinstance(record, dict):
            return None
        base, skip = record.get("base"), record.get("skip")
        offset, turn_before = record.get("offset", -1), record.get("turn_before", -1)
        prompt_id = record.get("prompt_id", "")
        if not (isinstance(base, str) and len(base) <= 200 and isinstance(prompt_id, str)):
            return None
        if not (_is_int(skip) and _is_int(offset) and _is_int(turn_before)):
            return None
        assert isinstance(skip, int) and isinstance(offset, int) and isinstance(turn_before, int)
        if skip < 0 or skip > 100_000 or (not base and turn_before < 0):
            return None
        return cls(base, skip, offset=offset, turn_before=turn_before,
                   prompt_id=prompt_id[:200])


class Saved:
    """An anchor file: the anchor, the one it was judged from, when it was written (wall
    clock ``at``; ``boot``: on ``boot_clock``, None in a file from before it was kept)."""

    __slots__ = ("anchor", "at", "boot", "prev")

    def __init__(self, anchor: Anchor, prev: Anchor | None, at: float,
                 boot: float | None = None) -> None:
        self.anchor = anchor
        self.prev = prev
        self.at = at
        self.boot = boot

    def is_twins(self, spawn_time: float | None) -> bool:
        """Saved after this hook process started: by another hook for this same reply.

        ``spawn_time`` (wall clock, a moment ago) only gives this process's age; when the
        file says when it was saved on the boot clock, the two are compared there, so a
        wall clock set back or forward between two Stops changes nothing."""
        if spawn_time is None:
            return False
        if self.boot is None:
            return self.at > spawn_time - TWIN_MARGIN
        now = boot_clock()
        started = now - (time.time() - spawn_time)
        # Later than now: saved before the machine restarted, long before this process.
        return started - TWIN_MARGIN < self.boot <= now


def anchor_path(state: str, session_id: str) -> str:
    """``<state>/hook/<session>.json`` (``session_id`` is a plain id: checked on input)."""
    return os.path.join(state, ANCHOR_DIR, f"{session_id}.json")


def read_anchor(state: str, session_id: str) -> Saved | None:
    """The session's anchor file, or None (missing, unsafe, broken)."""
    from ..state.files import read_json_object, state_folder

    try:
        state_folder(state, ANCHOR_DIR)
    except OSError:
        return None
    record = read_json_object(anchor_path(state, session_id), _MAX_ANCHOR_BYTES)
    if record is None or record.get("v") != ANCHOR_VERSION:
        return None
    anchor = Anchor.from_fields(record)
    at, boot = record.get("at"), record.get("boot")
    if anchor is None or not isinstance(at, (int, float)) or isinstance(at, bool):
        return None
    if not isinstance(boot, (int, float)) or isinstance(boot, bool):
        boot = None  # saved before the boot clock was kept: the wall clock it is
    return Saved(anchor, Anchor.from_fields(record.get("prev")), float(at), boot)


def previous_anchor(saved: Saved | None, *, spawn_time: float | None, prompt_id: str
                    ) -> Anchor | None:
    """The anchor the previous reply's hook left: a twin's is skipped, another turn's
    (its ``prompt_id`` differs: one per turn) is none."""
    if saved is None:
        return None
    anchor = saved.prev if saved.is_twins(spawn_time) else saved.anchor
    if anchor is not None and anchor.prompt_id and prompt_id and anchor.prompt_id != prompt_id:
        return None
    return anchor


def save_anchor(state: str, session_id: str, anchor: Anchor, *, prev: Anchor | None,
                size: int | None) -> bool:
    """Write the anchor (and the one it was judged from) atomically; False on failure."""
    from pathlib import Path

    import orjson

    from ..state.files import state_folder, write_private_file

    record = {"v": ANCHOR_VERSION, **anchor.fields(),
              "prev": prev.fields() if prev is not None else None,
              "size": size if size is not None else -1, "at": time.time(),
              "boot": boot_clock()}
    try:
        state_folder(state, ANCHOR_DIR, create=True)
        write_private_file(Path(anchor_path(state, session_id)), orjson.dumps(record))
    except OSError:
        return False
    return True


def advance_anchor(state: str, session_id: str, *, size: int | None, prompt_id: str,
                   spawn_time: float | None) -> bool:
    """Count this reply without reading the transcript: it answered the re-prompt after
    the one the previous anchor names. Without one from this turn, this reply is the
    turn's first answer to a re-prompt. Nothing is written when a twin already did."""
    saved = read_anchor(state, session_id)
    if saved is not None and saved.is_twins(spawn_time):
        return False
    previous = previous_anchor(saved, spawn_time=spawn_time, prompt_id=prompt_id)
    if previous is None:
        if size is None:
            return False
        # The turn's start is in the file already (it came before this reply).
        fresh = Anchor("", 1, turn_before=size, prompt_id=prompt_id)
        return save_anchor(state, session_id, fresh, prev=None, size=size)
    return save_anchor(state, session_id, previous.advanced(prompt_id=prompt_id),
                       prev=previous, size=size)


class AnchorKeeper:
    """Saves a session's anchor exactly once per Stop hook run: as judged, or advanced by
    one (``settle``) when nothing judged this reply's place."""

    def __init__(self, state: str, session_id: str, *, prompt_id: str, transcript_path: str,
                 spawn_time: float | None) -> None:
        self.state = state
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.transcript_path = transcript_path
        self.spawn_time = spawn_time
        self.previous: Anchor | None = None
        self.done = False

    def current(self) -> Anchor | None:
        """The anchor the previous reply's hook left, if it is from this turn."""
        self.previous = previous_anchor(read_anchor(self.state, self.session_id),
                                        spawn_time=self.spawn_time, prompt_id=self.prompt_id)
        return self.previous

    def save(self, anchor: Anchor, *, size: int | None) -> None:
        self.done = True
        judged = Anchor(anchor.base, anchor.skip, offset=anchor.offset,
                        turn_before=anchor.turn_before, prompt_id=self.prompt_id)
        save_anchor(self.state, self.session_id, judged, prev=self.previous, size=size)

    def settle(self) -> None:
        """Nothing judged this reply's place: count it as the one after the anchor's."""
        if self.done:
            return
        self.done = True
        # The anchor is best effort, the stop is not.
        with contextlib.suppress(Exception):
            advance_anchor(self.state, self.session_id,
                           size=file_size(self.transcript_path),
                           prompt_id=self.prompt_id, spawn_time=self.spawn_time)


MAX_FORWARD_BYTES = 64 * 1024 * 1024
"""Never parse more than this much of a tail (a run of huge answers is cut at the front)."""


TURN_REACH = 8 * 1024 * 1024
"""How far back before the trailing run the hook looks for the turn's start (or its
anchor), when the run starts at an answer that used a tool."""


@dataclass(frozen=True, slots=True)
class Tail:
    """The end of a transcript, from the start of its trailing run: each event with the
    offsets of its line."""

    path: str
    start: int
    end: int  # just past the last whole line read (a line being written is left out)
    events: tuple[LineEvent, ...]


@contextmanager
def _opened(path: str) -> Iterator[BinaryIO]:
    """The transcript, opened without blocking (a FIFO is refused with NotAFile)."""
    fd = open_transcript(path)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        yield handle


def read_tail(
    path: str, *, anchor: Anchor | None = None, max_forward: int = MAX_FORWARD_BYTES,
    max_reprompts: int = DEFAULT_THRESHOLDS.reach,
) -> Tail:
    """Read and parse the transcript's trailing run (back to its last ``max_reprompts``
    re-prompts at most: ``Thresholds.reach``). Raises OSError when unreadable.

    The tail also reaches back to the anchor's line (when known and within
    ``TURN_REACH``), so that ``judge`` finds the re-prompt this reply answers, and to the
    turn's start (within ``TURN_REACH`` of where it would start), so that it knows every
    result of the turn when it judges whether reply N's are new.
    """
    with _opened(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        start = find_run_start(handle, size, max_reprompts=max_reprompts)
        hint = _anchor_start(handle, anchor, size) if anchor is not None else None
        if hint is not None:
            start = min(start, hint)
        # Back to the turn's start as well: whether reply N's results are new is judged
        # against every result of the turn, as the watcher judges it.
        if start > 0 and not _is_turn_start_at(handle, start):
            turn = _turn_start_before(handle, start)
            if turn is not None:
                start = turn
        cut = False
        if size - start > max_forward:
            start, cut = size - max_forward, True
        handle.seek(start)
        data = handle.read(size - start)
    return tail_from_bytes(data, start=start, path=path, first_is_partial=cut)


def _anchor_start(handle: BinaryIO, anchor: Anchor, size: int) -> int | None:
    """The offset of the anchor's line, when it is a line start within reach."""
    offset = anchor.offset
    if not anchor.base or offset < 0 or offset >= size or size - offset > TURN_REACH:
        return None
    if offset > 0:
        handle.seek(offset - 1)
        if handle.read(1) != b"\n":
            return None
    return offset


def _is_turn_start_at(handle: BinaryIO, offset: int) -> bool:
    handle.seek(offset)
    line = handle.readline(1024 * 1024)
    return line.endswith(b"\n") and isinstance(parse_line(line), TurnStart)


def _turn_start_before(handle: BinaryIO, end: int) -> int | None:
    """The offset of the last turn start before ``end`` (within ``TURN_REACH``), if any."""
    for offset, line in iter_lines_backwards(handle, end, limit=TURN_REACH):
        if b'"user"' in line and isinstance(parse_line(line), TurnStart):
            return offset
    return None


def tail_from_bytes(
    data: bytes, *, start: int = 0, path: str = "", first_is_partial: bool = False
) -> Tail:
    """Parse ``data`` (the file's bytes from ``start``) into a Tail; pure. A last line
    without its newline is still being written and is left out."""
    skip = 0
    if first_is_partial:
        newline = data.find(b"\n")
        skip = len(data) if newline < 0 else newline + 1
    reader = EventReader(offset=start + skip)
    events = reader.feed(data[skip:])
    return Tail(path=path, start=start, end=reader.offset, events=tuple(events))


def last_prompt_time(path: str, *, limit: int = 8 * 1024 * 1024) -> float | None:
    """When the last prompt typed by a person (or a slash command) was written, if found
    within the last ``limit`` bytes; None when unknown."""
    prompt = _last_event(path, b'"user"', _is_persons_prompt, limit)
    return parse_timestamp(prompt.timestamp) if isinstance(prompt, TurnStart) else None


def last_goal_status(path: str, *, limit: int = 8 * 1024 * 1024) -> GoalStatus | None:
    """The last ``goal_status`` line within the last ``limit`` bytes, if any."""
    goal = _last_event(path, b"goal_status", lambda event: isinstance(event, GoalStatus), limit)
    return goal if isinstance(goal, GoalStatus) else None


def _is_persons_prompt(event: Event) -> bool:
    return isinstance(event, TurnStart) and event.kind == "prompt"


def _last_event(path: str, needle: bytes, wanted: Callable[[Event], bool], limit: int
                ) -> Event | None:
    """The last event within ``limit`` bytes of the end that ``wanted`` accepts, reading
    backwards and parsing only lines that hold ``needle``. Raises OSError."""
    with _opened(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        for _, line in iter_lines_backwards(handle, size, limit=limit):
            if needle in line:
                event = parse_line(line)
                if event is not None and wanted(event):
                    return event
    return None


Case = Literal["A", "B", "C", "lagged", "turn"]
"""Where reply N is (see above); ``turn``: it answers a person's prompt, not in the file."""


SPAWN_MARGIN = 0.15
"""Last resort only (no anchor, no turn start in the tail, no summaries): a re-prompt
written later than this many seconds before the hook started is taken as this Stop's own
(case B). Misjudging it errs late, never early."""


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
    return isinstance(event, SystemEntry) and event.subtype == STOP_HOOK_SUMMARY


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


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the tail plus this reply says."""

    detection: Detection | None
    reply_in_file: bool  # reply N is (at least partly) in the transcript
    reply_end: int | None  # offset just past reply N's last line, when it is in the file
    reply_uuid: str  # "" when reply N is not in the file
    prompt_uuid: str  # the re-prompt reply N answers, when known
    case: Case  # where reply N was found (see ``locate_active``)
    goal: GoalStatus | None  # the last goal_status in the tail
    run_length: int  # the run after reply N (0 after a firing)
    chain_length: int
    anchor: Anchor | None = None  # what to remember for the next reply (None: nothing sure)
    located_by: str = ""  # "anchor" | "turn" | "summary" | "clock" | "tail"

    @property
    def goal_set(self) -> bool:
        """A goal is set and neither met nor cleared, as far as the tail shows."""
        return self.goal is not None and not self.goal.met


def judge(
    tail: Tail,
    *,
    session_id: str,
    message: str | None,
    stop_hook_active: bool,
    spawn_time: float | None = None,
    already_fired: Collection[str] = (),
    acted_on: Collection[str] | None = None,
    anchor: Anchor | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    repeated: Callable[[ToolCall], bool] | None = None,
    ignored: frozenset[str] = DEFAULT_IGNORED,
) -> Judgement:
    """Whether reply N (``message``) fires, counting it exactly once.

    ``stop_hook_active`` (from the hook input) says reply N answers a re-prompt even when
    the transcript does not show that re-prompt yet. ``anchor`` is what the hook for the
    previous reply saved (see the module docstring); the judgement's own ``anchor`` is what
    to save for the next one. ``spawn_time`` is when this hook's process started (seconds
    since the epoch), used only as the last resort.

    ``already_fired``: the answers recorded as fired (``state.records``); counting
    restarts after each in the history before reply N. ``acted_on``: those a Stop hook
    stopped the turn for, the only ones reply N itself is not fired for again (None: all
    of ``already_fired``). The watcher may have recorded reply N a moment ago, its
    request not written yet: this hook is then the one that stops the turn.

    ``repeated``: whether a call of reply N whose result is not in the file yet (Claude
    Code may write it after this hook starts) is known to have repeated a result already
    seen (the tool-call hooks counted it); None: such a call counts as work.
    """
    events = tail.events
    goal = _goal_in_tail(events)
    if stop_hook_active:
        located = locate_active(events, message=message, spawn_time=spawn_time,
                                 anchor=anchor)
    else:
        located = locate_turn(events)
    detector = RunDetector(session_id, live=False, already_fired=already_fired,
                           thresholds=thresholds, ignored=ignored)
    _feed(detector, (item.event for item in events[: located.feed_until]))
    detector.go_live(already_fired=acted_on)
    reply = events[located.parts_from : located.parts_until]
    parts = [item for item in reply if isinstance(item.event, AssistantPart)]
    used_tool = any(
        isinstance(item.event, ToolResults)
        or (isinstance(item.event, AssistantPart) and item.event.used_tool)
        for item in reply
    )
    # Its calls and results: whether they produced anything new in the turn is the
    # engine's to judge (``engine.run``), as for every other answer.
    detector.feed_work(item.event for item in reply)
    if repeated is not None:
        detector.work.settle(call.tool_use_id for call in _unanswered(reply)
                             if repeated(call))
    last_part = parts[-1].event if parts else None
    if not parts and stop_hook_active and _is_empty_reply(
            detector, events[: located.feed_until], message):
        message = ""
    if message is None and not parts:
        # Nothing to count: the reply is neither in the input nor in the file.
        return Judgement(None, False, None, "", located.prompt_uuid, located.case, goal,
                         detector.run_length, detector.chain_length, located.anchor,
                         located.by)
    text = reply_text(parts, message)
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


def _goal_in_tail(events: tuple[LineEvent, ...]) -> GoalStatus | None:
    for item in reversed(events):
        if isinstance(item.event, GoalStatus):
            return item.event
    return None


def _is_empty_reply(detector: RunDetector, history: tuple[LineEvent, ...],
                    message: str | None) -> bool:
    """Whether reply N, not in the file yet, is empty, as the answer before it was: Claude
    Code then hands on no ``last_assistant_message`` (a reply whose text is empty) or the
    last one that had text (a reply without content, which it does not write). Measured on
    2.1.250, 2.1.328 and 2.1.332; only after an empty answer, so that a lagging reply of
    a run that says something is never taken for one."""
    before = detector.last_answer
    if before is None or before.prompt != PROMPT_REPROMPT or before.text or before.did_work:
        return False
    return message is None or message.strip() == _last_text(history).strip()


def _last_text(events: tuple[LineEvent, ...]) -> str:
    """The text of the last API reply in ``events`` that has any."""
    message_id = ""
    texts: list[str] = []
    for item in reversed(events):
        event = item.event
        if not isinstance(event, AssistantPart) or not (event.text or message_id):
            continue
        if message_id and event.message_id != message_id:
            break
        message_id = event.message_id
        if event.text:
            texts.append(event.text)
    return "\n".join(reversed(texts))


def _feed(detector: RunDetector, events: Iterable[Event]) -> None:
    for event in events:
        detector.feed(event)
    detector.flush()  # everything before reply N is complete


def _unanswered(reply: Iterable[LineEvent]) -> list[ToolCall]:
    """Reply N's calls whose result is not among its lines."""
    answered = {result.tool_use_id for item in reply if isinstance(item.event, ToolResults)
                for result in item.event.results}
    return [call for item in reply if isinstance(item.event, AssistantPart)
            for call in item.event.tool_calls if call.tool_use_id not in answered]

