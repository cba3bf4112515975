"""The one transcript reader: bytes -> lines -> events -> answers -> run -> detections. Pure,
incremental, used by all; lines over ``max_line`` are skipped and counted (bounded memory)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

from .answers import Answer
from .judge import Detection
from .rules import DEFAULT_THRESHOLDS, Thresholds
from .run import RunDetector
from .tool_repeat import DEFAULT_IGNORED
from .transcript import Event, ParseStats, parse_line

__all__ = ["EventReader", "LineBuffer", "LineEvent", "LineParser", "MAX_LINE_BYTES", "Span",
           "Step", "TranscriptReader", "detect_transcript"]

Span = tuple[int, bytes, int, int]  # (offset in the file, buffer, start and end in it)

MAX_LINE_BYTES = 32 * 1024 * 1024  # the longest line kept (pasted images are a few MB)

_WHITESPACE = b" \t\r\x0b\x0c"  # ``bytes.isspace``'s whitespace, the newline aside
_TEXT_AS_A = bytes(byte if byte == 10 else 97 for byte in range(256))
"""Every byte but the newline as ``a``: with whitespace deleted, a line not blank ends ``a\n``."""


class LineBuffer:
    """Cuts a byte stream into whole lines, each with its offset in the file."""

    __slots__ = ("_partial", "_skipping", "blank", "max_line", "not_json", "offset",
                 "oversized", "skip_non_json")

    def __init__(self, offset: int = 0, *, max_line: int = MAX_LINE_BYTES,
                 skip_non_json: bool = False) -> None:
        self._partial = bytearray()
        self._skipping = False  # inside a line over ``max_line``: drop bytes to its end
        self.offset = offset
        self.max_line = max_line
        self.oversized = 0  # lines skipped for being longer than ``max_line``
        self.skip_non_json = skip_non_json  # count, never give, lines that hold no "{"
        self.blank = 0  # lines of nothing but whitespace stepped over
        self.not_json = 0  # other lines without a "{" stepped over

    @property
    def pending_bytes(self) -> int:  # (of an unfinished last line held back)
        return len(self._partial)

    @property
    def line_start(self) -> int:
        """Where the unfinished last line starts (``offset`` when there is none)."""
        return self.offset - len(self._partial)

    def feed(self, chunk: bytes) -> list[tuple[int, bytes]]:
        """The lines completed by ``chunk``: (start offset, line without its newline)."""
        return [(offset, buffer[start:end])
                for offset, buffer, start, end in self.iter_spans(chunk)]

    def iter_spans(self, chunk: bytes) -> Iterator[Span]:
        """``feed`` without copying lines; iterate it to the end before the next chunk."""
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
            # (a line with no "{" is no JSON object: step over the run of them in C)
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
        """Just past the run of whole lines from ``start`` with no ``{``, counted."""
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


# Turns ``buffer[start:end]`` into its event (None: skipped, counted in the stats).
LineParser = Callable[[bytes, int, int, ParseStats], "Event | None"]


def _parse_copy(buffer: bytes, start: int, end: int, stats: ParseStats) -> Event | None:
    return parse_line(buffer[start:end], stats)


_NOTHING: tuple[()] = ()


@dataclass(frozen=True, slots=True)
class LineEvent:
    start: int  # where the line starts in the file
    end: int  # just past its newline
    event: Event


@dataclass(frozen=True, slots=True)
class Step:
    """What one line (or catching up, ``event`` None) did to the session."""

    start: int  # where the line starts in the file
    end: int  # just past its newline
    event: Event | None
    answers: tuple[Answer, ...] = _NOTHING  # answers it completed, in order
    detections: tuple[Detection, ...] = _NOTHING


class EventReader:
    """The first stages alone: bytes in any chunks -> whole lines -> events."""

    __slots__ = ("_lines", "_parse", "stats")

    def __init__(self, *, offset: int = 0, max_line: int = MAX_LINE_BYTES,
                 parse: LineParser = _parse_copy) -> None:
        self.stats = ParseStats()
        self._lines = LineBuffer(offset, max_line=max_line, skip_non_json=True)
        self._parse = parse

    @property
    def offset(self) -> int:  # (just past the last whole line read)
        return self._lines.line_start

    @property
    def pending_bytes(self) -> int:
        return self._lines.pending_bytes

    @property
    def oversized_lines(self) -> int:
        return self._lines.oversized

    def feed(self, chunk: bytes) -> list[LineEvent]:
        found: list[LineEvent] = []
        stats, parse, lines = self.stats, self._parse, self._lines
        blank, not_json = lines.blank, lines.not_json
        for offset, buffer, start, end in lines.iter_spans(chunk):
            event = parse(buffer, start, end, stats)
            if event is not None:
                found.append(LineEvent(offset, offset + end - start + 1, event))
        blank, not_json = lines.blank - blank, lines.not_json - not_json
        if blank or not_json:  # stepped over unparsed: counted as parsing them would
            stats.lines += blank + not_json
            stats.skipped["blank"] += blank
            stats.skipped["bad_json"] += not_json
        return found

    def reset(self, offset: int | None = None) -> None:
        self._lines.reset(offset)


class TranscriptReader:
    """One session transcript's bytes in, in any chunks; steps out."""

    __slots__ = ("detector", "events")

    def __init__(self, session_id: str = "", *, offset: int = 0, live: bool = True,
                 already_fired: Collection[str] = (), max_line: int = MAX_LINE_BYTES,
                 detector: RunDetector | None = None, parse: LineParser = _parse_copy,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 ignored: frozenset[str] = DEFAULT_IGNORED) -> None:
        self.detector = detector or RunDetector(session_id, live=live, already_fired=already_fired,
                                                thresholds=thresholds, ignored=ignored)
        self.events = EventReader(offset=offset, max_line=max_line, parse=parse)

    @property
    def stats(self) -> ParseStats:
        return self.events.stats

    @property
    def offset(self) -> int:  # (just past the last whole line read)
        return self.events.offset

    @property
    def pending_bytes(self) -> int:
        return self.events.pending_bytes

    @property
    def oversized_lines(self) -> int:
        return self.events.oversized_lines

    def feed(self, chunk: bytes) -> list[Step]:
        """A step per whole line holding an event, then the catch-up step if it did anything."""
        steps = [self.judge(line) for line in self.events.feed(chunk)]
        caught_up = self.catch_up()
        if caught_up is not None:
            steps.append(caught_up)
        return steps

    def judge(self, line: LineEvent) -> Step:
        return Step(line.start, line.end, line.event, *self.detector.step(line.event))

    def catch_up(self) -> Step | None:
        """The reader has caught up with what is written: a reply marked final is whole."""
        answers, detections = self.detector.step_flush()
        if not answers:
            return None
        return Step(self.offset, self.offset, None, answers, detections)

    def finish(self) -> list[Step]:
        """The transcript is over: read a last line without its newline, count the rest."""
        steps = self.feed(b"\n") if self.events.pending_bytes else []
        answers, detections = self.detector.step_finish()
        if answers:
            steps.append(Step(self.offset, self.offset, None, answers, detections))
        return steps


def detect_transcript(data: bytes | Iterable[bytes], session_id: str = "", *,
                      finish: bool = False) -> list[Detection]:
    """All detections in a whole transcript (bytes, or chunks of it)."""
    reader = TranscriptReader(session_id)
    chunks: Iterable[bytes] = [data] if isinstance(data, (bytes, bytearray)) else data
    steps: list[Step] = []
    for chunk in chunks:
        steps.extend(reader.feed(bytes(chunk)))
    if finish:
        steps.extend(reader.finish())
    elif reader.pending_bytes:
        steps.extend(reader.feed(b"\n"))  # a last line without its newline
    return [detection for step in steps for detection in step.detections]

