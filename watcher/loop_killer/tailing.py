"""Read only as much of a transcript's tail as its trailing run needs.

Used by the watcher's start-up catch-up and by the Stop hook's own detection, so that
neither ever reads a whole history: the file is read backwards, block by block, until a
run boundary (a turn start, or an answer that used a tool), or until enough re-prompts
have been seen that the run is past every threshold anyway.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from .engine import IDLE_TURNS, Reprompt, is_run_boundary, parse_line

__all__ = ["find_run_start", "iter_lines_backwards"]

_BLOCK = 256 * 1024
MAX_TAIL_BYTES = 256 * 1024 * 1024
"""Never read back further than this, whatever the file holds."""


def iter_lines_backwards(
    handle: BinaryIO, end: int, *, block: int = _BLOCK, limit: int = MAX_TAIL_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for the non-blank whole lines before ``end``, last first.

    Bytes after the last newline before ``end`` (a line still being written) are not a
    whole line and are left out. Linear in the bytes read, even for a line of many
    megabytes: a block is scanned once, and a line is joined once its start is found.
    Stops at the file's start, or at the first line start found after ``limit`` bytes.
    """
    position = end
    parts: list[bytes] = []  # pieces of the line being assembled, last piece first
    partial = True  # the piece after the last newline is not a whole line
    read = 0
    while position > 0:
        size = min(block, position)
        position -= size
        handle.seek(position)
        chunk = handle.read(size)
        if len(chunk) != size:
            return  # the file shrank under us; the caller re-checks its size
        read += size
        cut = size
        while (newline := chunk.rfind(b"\n", 0, cut)) >= 0:
            parts.append(chunk[newline + 1 : cut])
            line = b"".join(reversed(parts)) if len(parts) > 1 else parts[0]
            parts = []
            if partial:
                partial = False
            elif line.strip():
                yield position + newline + 1, line
            cut = newline
            if read > limit:
                return
        if read > limit:
            return  # a line longer than the limit: its start is never reached
        parts.append(chunk[:cut])
    line = b"".join(reversed(parts))
    if not partial and line.strip():
        yield 0, line


def find_run_start(
    handle: BinaryIO, end: int | None = None, *, max_reprompts: int = IDLE_TURNS + 1
) -> int:
    """The offset from which feeding the file up to ``end`` reproduces its trailing run.

    That is the start of the last run boundary before ``end``; or, when more than
    ``max_reprompts`` re-prompts come first, the start of the earliest of them (the run
    is then past every threshold, which is all the rules need to know); or the start of
    the earliest line read when the read limit was reached; or 0.
    """
    if end is None:
        end = handle.seek(0, os.SEEK_END)
    reprompts = 0
    earliest = 0
    for offset, line in iter_lines_backwards(handle, end):
        event = parse_line(line)
        if is_run_boundary(event):
            return offset
        if isinstance(event, Reprompt):
            reprompts += 1
            if reprompts >= max_reprompts:
                return offset
        earliest = offset
    return earliest
