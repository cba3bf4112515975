"""Bytes of a file, in any chunks, cut into whole lines that know where they start.

Pure: no files, no clock. Linear in the bytes fed however a long line is split across
chunks, and bounded in memory: an unfinished line longer than ``max_line`` is dropped
(the reader skips to the next newline and counts it), so bytes appended without a
newline can never grow a process without bound. Lines can come one at a time
(``iter_spans``), never as a list as long as the chunk has lines; with ``skip_non_json``,
runs of lines that cannot hold a JSON object (blank, or without a ``{``) are stepped over
at C speed and only counted: 100 MB of ``\n`` appended to a transcript cost a few scans
of it, not 100 million Python steps.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["MAX_LINE_BYTES", "LineBuffer", "Span"]

Span = tuple[int, bytes, int, int]
"""A line in a buffer: (its offset in the file, the buffer, its start and end in it)."""

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest line kept. Claude Code's own lines stay far below it (it caps pasted
images at a few MB); a longer one is skipped whole and counted in ``oversized``."""

_WHITESPACE = b" \t\r\x0b\x0c"
"""What ``bytes.isspace`` says is whitespace, the newline aside."""

_TEXT_AS_A = bytes(byte if byte == 10 else 97 for byte in range(256))
"""Every byte but the newline as ``a``: with whitespace deleted, a line that is not blank
ends in ``a\n`` (which never overlaps itself, so ``count`` finds them all)."""


class LineBuffer:
    """Cuts a byte stream into whole lines; keeps the partial last line for later.

    ``offset`` is the position (in the file) of the next byte fed; each line comes back
    with the position of its first byte. A chunk is scanned once for newlines, and a
    partial line grows in one amortised buffer.
    """

    __slots__ = ("_partial", "_skipping", "blank", "max_line", "not_json", "offset",
                 "oversized", "skip_non_json")

    def __init__(self, offset: int = 0, *, max_line: int = MAX_LINE_BYTES,
                 skip_non_json: bool = False) -> None:
        self._partial = bytearray()
        self._skipping = False  # inside a line over ``max_line``: drop bytes to its end
        self.offset = offset
        self.max_line = max_line
        self.oversized = 0  # lines skipped for being longer than ``max_line``
        # Step over the lines no parser can make anything of, only counting them: a
        # transcript's lines are JSON objects, nothing else is ever an event.
        self.skip_non_json = skip_non_json
        self.blank = 0  # lines of nothing but whitespace stepped over
        self.not_json = 0  # other lines without a "{" stepped over

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
        """``iter_spans`` as a list."""
        return list(self.iter_spans(chunk))

    def iter_spans(self, chunk: bytes) -> Iterator[Span]:
        """``feed`` without copying lines out of ``chunk``, one line at a time: each line
        completed by it as (start offset, buffer, start, end), the line being
        ``buffer[start:end]``. The buffer is ``chunk`` itself, or, for a line begun in
        earlier chunks, that line. With ``skip_non_json``, lines that cannot hold a JSON
        object are counted (``blank``, ``not_json``), not given. Iterate it to the end
        before feeding the next chunk."""
        base = self.offset
        self.offset += len(chunk)
        newline = chunk.find(b"\n")
        if newline < 0:
            self._hold(chunk)
            return
        start = 0
        if self._skipping:
            self._skipping = False
            start = newline + 1
        elif self._partial:
            self._partial += chunk[:newline]
            if self.skip_non_json and self._partial.isspace():
                self.blank += 1
                self._partial = bytearray()
            elif len(self._partial) <= self.max_line:
                line = bytes(self._partial)
                self._partial = bytearray()
                yield base + newline - len(line), line, 0, len(line)
            else:
                self.oversized += 1
                self._partial = bytearray()
            start = newline + 1
        find, max_line, skip = chunk.find, self.max_line, self.skip_non_json
        while (newline := find(b"\n", start)) >= 0:
            # A line with no "{" (blank, say) cannot be a JSON object: step over the run of
            # such lines from here in C, whatever its length.
            if skip and chunk[start] != 123 and find(b"{", start, newline) < 0:
                start = self._past_non_json(chunk, start)
                continue
            if newline - start <= max_line:
                yield base + start, chunk, start, newline
            else:
                self.oversized += 1
            start = newline + 1
        self._hold(chunk[start:])

    def _past_non_json(self, chunk: bytes, start: int) -> int:
        """Just past the run of whole lines from ``start`` (the first is one) with no
        ``{`` in them, counting them as blank or not: a few passes in C over the run,
        however its lines alternate."""
        brace = chunk.find(b"{", start)
        end = chunk.rfind(b"\n", start, len(chunk) if brace < 0 else brace) + 1
        lines = chunk.count(b"\n", start, end)
        not_blank = chunk[start:end].translate(_TEXT_AS_A, _WHITESPACE).count(b"a\n")
        self.blank += lines - not_blank
        self.not_json += not_blank
        return end

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
