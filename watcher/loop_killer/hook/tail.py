"""Reading the transcript's tail for the Stop hook (I/O): only as much as the judgement
needs (the trailing run, back to the anchor or the turn's start), parsed by the engine's
one event reader. Every open refuses a FIFO or anything but a regular file without ever
blocking (``state.files.open_transcript``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from ..engine.reader import EventReader, LineEvent
from ..engine.rules import DEFAULT_THRESHOLDS
from ..engine.transcript import Event, GoalStatus, TurnStart, parse_line, parse_timestamp
from ..state.files import open_transcript
from ..tailing import find_run_start, iter_lines_backwards
from .anchor import Anchor

__all__ = [
    "MAX_FORWARD_BYTES",
    "TURN_REACH",
    "Tail",
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
