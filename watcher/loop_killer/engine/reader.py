"""The one transcript reader: bytes -> lines -> events -> answers -> run -> detections.

Pure and incremental. The watcher feeds each session's new bytes as they are written,
the Stop hook feeds the tail it read, and the history scan feeds whole files: all three
read with this class and judge with the same ``RunDetector``.

Each whole line becomes a ``Step``: the event it holds (or None for a line that matters
to nobody), where the line sits in the file, the answers it completed and the
detections they caused. ``feed`` ends with a step for the moment the reader caught up
with what is written (``event`` None), where a reply marked final completes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from .answers import Answer
from .lines import MAX_LINE_BYTES, LineBuffer
from .rules import DEFAULT_THRESHOLDS, Thresholds
from .run import Detection, RunDetector
from .tool_repeat import DEFAULT_IGNORED
from .transcript import Event, ParseStats, parse_line

__all__ = [
    "EventReader",
    "LineEvent",
    "LineParser",
    "Step",
    "TranscriptReader",
    "detect_transcript",
]

LineParser = Callable[[bytes, int, int, ParseStats], "Event | None"]
"""Turns one whole line, ``buffer[start:end]`` (``LineBuffer.spans``), into its event
(None to skip it, counted in the stats): ``parse_line`` on a copy of it, or a caller's
parser that copies only the lines it parses (the watcher's ``skim_span``; the history
scan, which also leaves lone tool results unread and routes a subagent's inline lines
elsewhere)."""


def _parse_copy(buffer: bytes, start: int, end: int, stats: ParseStats) -> Event | None:
    return parse_line(buffer[start:end], stats)


_NOTHING: tuple[()] = ()


@dataclass(frozen=True, slots=True)
class LineEvent:
    """One line's event, and where the line sits in the file."""

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
    """The first stages alone: bytes in any chunks -> whole lines -> events, each with
    where its line sits in the file (``offset``: where the first byte fed sits).
    Lines that hold no event are counted in ``stats`` and give no step (lines that
    cannot be JSON objects, blank or without a ``{``, are never handed to ``parse``).
    ``parse``: how one line becomes an event (``parse_line`` unless a caller gives its
    own)."""

    __slots__ = ("_lines", "_parse", "stats")

    def __init__(self, *, offset: int = 0, max_line: int = MAX_LINE_BYTES,
                 parse: LineParser = _parse_copy) -> None:
        self.stats = ParseStats()
        self._lines = LineBuffer(offset, max_line=max_line, skip_non_json=True)
        self._parse = parse

    @property
    def offset(self) -> int:
        """Just past the last whole line read: where the next line starts."""
        return self._lines.line_start

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished last line held back."""
        return self._lines.pending_bytes

    @property
    def oversized_lines(self) -> int:
        """Lines skipped for being longer than ``max_line``."""
        return self._lines.oversized

    def feed(self, chunk: bytes) -> list[LineEvent]:
        """The events of the whole lines ``chunk`` completes, in order."""
        found: list[LineEvent] = []
        stats = self.stats
        parse = self._parse
        lines = self._lines
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
        """Forget a partial line (after a truncation, say); optionally move ``offset``."""
        self._lines.reset(offset)


class TranscriptReader:
    """One session transcript's bytes in, in any chunks; steps out.

    ``offset`` is where the first byte fed sits in the file (a tail read from the middle).
    ``live``, ``already_fired``, ``thresholds``: as for ``RunDetector`` (or pass a
    ``detector``).
    """

    __slots__ = ("detector", "events")

    def __init__(
        self,
        session_id: str = "",
        *,
        offset: int = 0,
        live: bool = True,
        already_fired: Collection[str] = (),
        max_line: int = MAX_LINE_BYTES,
        detector: RunDetector | None = None,
        parse: LineParser = _parse_copy,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        ignored: frozenset[str] = DEFAULT_IGNORED,
    ) -> None:
        self.detector = detector or RunDetector(session_id, live=live,
                                                already_fired=already_fired,
                                                thresholds=thresholds, ignored=ignored)
        self.events = EventReader(offset=offset, max_line=max_line, parse=parse)

    @property
    def stats(self) -> ParseStats:
        return self.events.stats

    @property
    def offset(self) -> int:
        """Just past the last whole line read: where the next line starts."""
        return self.events.offset

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished last line held back."""
        return self.events.pending_bytes

    @property
    def oversized_lines(self) -> int:
        """Lines skipped for being longer than ``max_line``."""
        return self.events.oversized_lines

    def feed(self, chunk: bytes) -> list[Step]:
        """Feed bytes; return a step per whole line holding an event (with the answers it
        completed and the detections they caused), then the catch-up step when it
        completed anything."""
        steps = [self.judge(line) for line in self.events.feed(chunk)]
        caught_up = self.catch_up()
        if caught_up is not None:
            steps.append(caught_up)
        return steps

    def judge(self, line: LineEvent) -> Step:
        """A line's event with what it did to the run."""
        answers, detections = self.detector.step(line.event)
        if not answers:
            return Step(line.start, line.end, line.event)
        return Step(line.start, line.end, line.event, answers, detections)

    def catch_up(self) -> Step | None:
        """The reader has caught up with what is written: a reply marked final is whole."""
        answers, detections = self.detector.step_flush()
        if not answers:
            return None
        return Step(self.offset, self.offset, None, answers, detections)

    def finish(self) -> list[Step]:
        """The transcript is over (a whole file): read a last line without its newline,
        and count the answer in progress, if any."""
        steps = self.feed(b"\n") if self.events.pending_bytes else []
        answers, detections = self.detector.step_finish()
        if answers:
            steps.append(Step(self.offset, self.offset, None, answers, detections))
        return steps


def detect_transcript(
    data: bytes | Iterable[bytes], session_id: str = "", *, finish: bool = False
) -> list[Detection]:
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
