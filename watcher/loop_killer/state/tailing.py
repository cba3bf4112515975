"""Read a transcript's tail backwards, block by block, only as far as its trailing run needs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Literal

from ..engine.rules import DEFAULT_THRESHOLDS
from ..engine.transcript import Reprompt, is_run_boundary, parse_line

__all__ = ["MAX_RUN_LINES", "MAX_TAIL_BYTES", "MAX_TAIL_LINES", "RunStart", "ScanStats",
           "iter_lines_backwards", "scan_run_start"]

_BLOCK = 256 * 1024
MAX_TAIL_BYTES = 64 * 1024 * 1024  # never read back further than this

MAX_TAIL_LINES = 100_000  # never step back over more lines (blank ones included)

MAX_RUN_LINES = 5_000
"""The line budget of ``scan_run_start`` (a trailing run holds under 50 lines in every
transcript of tests/fixtures)."""

_NEWLINE = ord("\n")


@dataclass(slots=True)
class ScanStats:
    """What a backward scan did: filled in as it goes, read once it stopped."""

    end: int  # where the scan started (the file offset it read back from)
    lines: int = 0  # whole lines stepped over, blank ones included
    read: int = 0  # bytes read
    earliest: int = -1  # start of the earliest non-blank whole line passed (-1: none)
    tail_start: int = -1  # start of the line cut by ``end`` (-1: not found yet)
    complete: bool = False  # reached the file's start (no budget cut the scan short)

    @property
    def replay_from(self) -> int:
        """Where reading forwards again reproduces every non-blank line passed."""
        if self.earliest >= 0:
            return self.earliest
        return self.tail_start if self.tail_start >= 0 else self.end


def _blank_run_start(chunk: bytes, stop: int) -> int:
    """Where the run of newlines ending just before ``stop`` begins (in C)."""
    width = 64
    while True:
        low = max(0, stop - width)
        kept = len(chunk[low:stop].rstrip(b"\n"))
        if kept or low == 0:
            return low + kept
        width *= 8


def iter_lines_backwards(  # noqa: C901 - one pass over blocks, lines and blank runs:
    handle: BinaryIO,  # split up, it would cost a call per line on the hooks' hot path
    end: int,
    *,
    block: int = _BLOCK,
    limit: int = MAX_TAIL_BYTES,
    max_lines: int = MAX_TAIL_LINES,
    stats: ScanStats | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for the non-blank whole lines before ``end``, last first; stops
    at the file's start, after ``limit`` bytes or ``max_lines`` lines (``stats``: how far)."""
    if stats is None:
        stats = ScanStats(end)
    position = end
    parts: list[bytes] = []  # pieces of the line being assembled, last piece first
    partial = True  # the piece after the last newline is not a whole line
    while position > 0:
        size = min(block, position)
        position -= size
        handle.seek(position)
        chunk = handle.read(size)
        if len(chunk) != size:
            return  # the file shrank under us; the caller re-checks its size
        stats.read += size
        cut = size  # chunk[:cut] is still to be scanned; chunk[cut] ends the current line
        while True:
            if not parts and not partial and cut > 0 and chunk[cut - 1] == _NEWLINE:
                # Empty lines end at cut - 1, cut - 2, ...: step over the whole run at once.
                run = _blank_run_start(chunk, cut)
                count = cut - run
                room = max_lines - stats.lines
                if count >= room:
                    stats.lines = max_lines
                    return
                stats.lines += count
                cut = run
                if stats.read > limit:
                    return
                continue
            newline = chunk.rfind(b"\n", 0, cut)
            if newline < 0:
                break
            parts.append(chunk[newline + 1 : cut])
            line = b"".join(reversed(parts)) if len(parts) > 1 else parts[0]
            parts = []
            start = position + newline + 1
            if partial:
                partial = False
                stats.tail_start = start
            else:
                stats.lines += 1
                if line.strip():
                    stats.earliest = start
                    yield start, line
                if stats.lines >= max_lines:
                    return
            cut = newline
            if stats.read > limit:
                return
        if stats.read > limit:
            return  # a line longer than the limit: its start is never reached
        parts.append(chunk[:cut])
    line = b"".join(reversed(parts))
    stats.complete = True
    if partial:
        stats.tail_start = 0
        return
    stats.lines += 1
    if line.strip():
        stats.earliest = 0
        yield 0, line


@dataclass(frozen=True, slots=True)
class RunStart:
    """Where the trailing run starts, and why the backward scan stopped there."""

    offset: int
    why: Literal["boundary", "reprompts", "file start", "budget"]
    lines: int  # whole lines stepped over (blank ones included)
    read: int  # bytes read


def scan_run_start(handle: BinaryIO, end: int | None = None, *,
                   max_reprompts: int = DEFAULT_THRESHOLDS.reach, max_lines: int = MAX_RUN_LINES,
                   limit: int = MAX_TAIL_BYTES) -> RunStart:
    """Where feeding the file from ``offset`` up to ``end`` reproduces its trailing run: the
    last run boundary; else the earliest of ``max_reprompts`` re-prompts; else the earliest
    line read before the file's start or a budget (``why`` "budget")."""
    if end is None:
        end = handle.seek(0, os.SEEK_END)
    stats = ScanStats(end)
    reprompts = 0
    for offset, line in iter_lines_backwards(handle, end, limit=limit, max_lines=max_lines,
                                             stats=stats):
        event = parse_line(line)
        if is_run_boundary(event):
            return RunStart(offset, "boundary", stats.lines, stats.read)
        if isinstance(event, Reprompt):
            reprompts += 1
            if reprompts >= max_reprompts:
                return RunStart(offset, "reprompts", stats.lines, stats.read)
    return RunStart(stats.replay_from, "file start" if stats.complete else "budget",
                    stats.lines, stats.read)
