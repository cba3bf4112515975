"""Bytes of a file, in any chunks, cut into whole lines that know where they start.

Pure: no files, no clock. Linear in the bytes fed however a long line is split across
chunks, and bounded in memory: an unfinished line longer than ``max_line`` is dropped
(the reader skips to the next newline and counts it), so bytes appended without a
newline can never grow a process without bound.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_BYTES", "LineBuffer", "Span"]

Span = tuple[int, bytes, int, int]
"""A line in a buffer: (its offset in the file, the buffer, its start and end in it)."""

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest line kept. Claude Code's own lines stay far below it (it caps pasted
images at a few MB); a longer one is skipped whole and counted in ``oversized``."""


class LineBuffer:
    """Cuts a byte stream into whole lines; keeps the partial last line for later.

    ``offset`` is the position (in the file) of the next byte fed; each line comes back
    with the position of its first byte. A chunk is scanned once for newlines, and a
    partial line grows in one amortised buffer.
    """

    __slots__ = ("_partial", "_skipping", "max_line", "offset", "oversized")

    def __init__(self, offset: int = 0, *, max_line: int = MAX_LINE_BYTES) -> None:
        self._partial = bytearray()
        self._skipping = False  # inside a line over ``max_line``: drop bytes to its end
        self.offset = offset
        self.max_line = max_line
        self.oversized = 0  # lines skipped for being longer than ``max_line``

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished last line held back."""
        return len(self._partial)

    @property
    def line_start(self) -> int:
        """Where the unfinished last line starts (``offset`` when there is none)."""
        return self.offset - len(self._partial)

    def feed(self, chunk: bytes) -> list[tuple[int, bytes]]:
        """The lines completed by ``chunk``: (start offset, line without its newline)."""
        return [(offset, buffer[start:end]) for offset, buffer, start, end in self.spans(chunk)]

    def spans(self, chunk: bytes) -> list[Span]:
        """``feed`` without copying lines out of ``chunk``: each line completed by it as
        (start offset, buffer, start, end), the line being ``buffer[start:end]``. The
        buffer is ``chunk`` itself, or, for a line begun in earlier chunks, that line."""
        base = self.offset
        self.offset += len(chunk)
        newline = chunk.find(b"\n")
        if newline < 0:
            self._hold(chunk)
            return []
        spans: list[Span] = []
        if self._skipping:
            self._skipping = False
        elif self._partial:
            self._partial += chunk[:newline]
            if len(self._partial) <= self.max_line:
                line = bytes(self._partial)
                spans.append((base + newline - len(line), line, 0, len(line)))
            else:
                self.oversized += 1
            self._partial = bytearray()
        elif newline <= self.max_line:
            spans.append((base, chunk, 0, newline))
        else:
            self.oversized += 1
        start = newline + 1
        find, max_line = chunk.find, self.max_line
        while (newline := find(b"\n", start)) >= 0:
            if newline - start <= max_line:
                spans.append((base + start, chunk, start, newline))
            else:
                self.oversized += 1
            start = newline + 1
        self._hold(chunk[start:])
        return spans

    def _hold(self, rest: bytes) -> None:
        if self._skipping or not rest:
            return
        if len(self._partial) + len(rest) > self.max_line:
            self._partial = bytearray()
            self._skipping = True
            self.oversized += 1
            return
        self._partial += rest

    def reset(self, offset: int | None = None) -> None:
        """Forget a partial line (after a truncation, say); optionally move ``offset``."""
        self._partial = bytearray()
        self._skipping = False
        if offset is not None:
            self.offset = offset
