"""The scan's first pass over one transcript file: its cost report, and which parts of it
the engine must read for loops (pure).

Most of a history holds no loop, and the engine (answers, runs, tool-call counters) is
most of the cost of reading it. ``LeanScan`` reads a file the way ``TranscriptScan``
does, line for line with the same code (``LineBuffer``, ``sort_line``, ``typed_event``,
``UsageLedger``), but hands the events to ``LoopHints`` instead of the engine, and
builds no event for a system line or an attachment (no reply, prompt or tool call is
in one). Its ``FileResult`` is the one ``TranscriptScan`` gives, but for ``loops``: those
are in the ``segments`` the engine reads then (``files.read_transcript``), found there
as reading the whole file finds them (``LoopHints``).

A subagent's lines inline in a main transcript (Claude Code 1.0.x) are a scope of their
own, as ``TranscriptScan`` makes them: their replies counted apart and merged at the end,
their tool calls told to ``LoopHints`` of their own.

It gives up, and the whole file is read by ``TranscriptScan`` (``needs_engine``), on any
line that the engine's reader would not read the plain way: a line the typed decoding
cannot tell (``NOT_TYPED``), a line of the conversation that starts with its type; and at
the end, when a loop could
be among a subagent's inline lines, or in a turn of a file that holds some (the engine
reads such a file whole).
"""

from __future__ import annotations

from ..config import Settings
from ..engine.prefilter import COST, KEEP, sort_line
from ..engine.reader import MAX_LINE_BYTES, LineBuffer
from ..engine.transcript import AssistantPart, Event, Reprompt, TurnStart
from ..engine.typed import NOT_TYPED, Line, typed_event
from .hints import LoopHints, Segment
from .ledger import UsageLedger
from .records import FileResult, Replies, Reply, ReplyKey
from .transcript import (
    DEFAULT_SETTINGS,
    TYPE_FIRST,
    cost_amount,
    cost_state_total,
    reply_request_id,
    session_id_in,
)
from .turns import TurnTally

__all__ = ["LeanScan"]


class LeanScan:
    """The first pass over one transcript file (the options as for ``TranscriptScan``).

    ``feed`` the file's bytes while it returns True; ``finish`` gives the file's result
    but for its loops, or None when the engine must read it whole (``needs_engine``);
    ``segments``, the parts of it that the engine must read for loops."""

    __slots__ = ("_broken", "_cost_state", "_find_session", "_hints", "_ledger", "_lines",
                 "_settings", "_side", "_turns", "bytes_read", "lines", "needs_engine",
                 "parsed", "path", "project", "session_id", "subagent")

    def __init__(self, *, path: str = "", project: str = "", session_id: str = "",
                 subagent: bool = False, settings: Settings | None = None,
                 max_line: int = MAX_LINE_BYTES) -> None:
        self.path, self.project, self.session_id = path, project, session_id
        self.subagent = subagent
        self.needs_engine = False
        # A flat agent-*.jsonl names its session in its lines: found as TranscriptScan
        # finds it, in the first line read that names one.
        self._find_session = subagent and not session_id
        self._lines = LineBuffer(max_line=max_line, skip_non_json=True)
        self._ledger = UsageLedger()
        self._turns = TurnTally()
        self._settings = settings if settings is not None else DEFAULT_SETTINGS
        self._hints = LoopHints(self._settings, reprompts=not subagent)
        self._side: tuple[UsageLedger, LoopHints] | None = None  # inline subagent lines
        self._cost_state: float | None = None
        self._broken = 0
        self.bytes_read = self.lines = self.parsed = 0

    def feed(self, chunk: bytes) -> bool:
        """Take the file's next bytes; False once the engine must read the file."""
        if self.needs_engine:
            return False
        self.bytes_read += len(chunk)
        return self._feed(chunk)

    def _feed(self, chunk: bytes) -> bool:
        read = self._line
        for offset, buffer, start, end in self._lines.iter_spans(chunk):
            if not read(offset, buffer, start, end):
                self.needs_engine = True
                return False
        return True

    def finish(self) -> FileResult | None:
        """The file is over: its result, or None when the engine must read it."""
        if self.needs_engine or (self._lines.pending_bytes and not self._feed(b"\n")):
            return None  # (a last line without its newline, read as the reader does)
        ledger, lines = self._ledger, self._lines
        ledger.end_turn()
        replies, first_at, last_at = ledger.replies(), ledger.first_at, ledger.last_at
        if self._side is not None:
            side, hints = self._side
            if hints.segments() or self._hints.segments():
                self.needs_engine = True
                return None
            side.end_turn()
            replies = _merged(replies, side.replies())
            first_at = min(filter(None, (first_at, side.first_at)), default="")
            last_at = max(last_at, side.last_at)
        replies, turns = self._turns.finish(replies)
        return FileResult(
            path=self.path, project=self.project, session_id=self.session_id,
            subagent=self.subagent, replies=replies, first_at=first_at,
            last_at=last_at, cost_state=self._cost_state, bytes_read=self.bytes_read,
            # (lines stepped over unparsed: blank ones, and broken ones without a "{")
            lines=self.lines + lines.blank + lines.not_json, parsed=self.parsed,
            broken=self._broken + lines.not_json, oversized=lines.oversized,
            turns=turns)

    def segments(self) -> list[Segment]:
        """The parts of the file the engine must read (after ``finish``)."""
        return self._hints.segments()

    def _line(self, offset: int, buffer: bytes, start: int, end: int) -> bool:
        """Read one line (``buffer[start:end]``, at ``offset`` in the file); False when
        the engine must read the whole file."""
        self.lines += 1
        if buffer.startswith(TYPE_FIRST, start, end):
            return self._bookkeeping(buffer, start, end)
        # (b"": a tool result is never read here, so the line need not be kept for it)
        found = typed_event(memoryview(buffer)[start:end], b"", subagent=self.subagent,
                            lean=True)
        if found is NOT_TYPED:
            return False
        event, reason, entry = found
        self.parsed += 1
        if self._find_session and not self.session_id:
            self.session_id = session_id_in(buffer, start, end)
        if entry.isSidechain is True and not self.subagent:
            return self._side_line(offset, memoryview(buffer)[start:end], found)
        if reason == "wrong_shape":
            self._broken += 1
        if event is None:
            if entry.type == "cost-state" and not self.subagent:
                self._cost_state = cost_amount(entry.totalCostUSD, self._cost_state)
            return True
        if isinstance(event, AssistantPart):
            key = self._ledger.add(event, reply_request_id(event, entry))
            if key is not None:
                self._turns.reply(key, event.timestamp)
        elif isinstance(event, Reprompt):
            self._turns.reprompt(event.timestamp)
        self._hints.feed(event, offset)
        if isinstance(event, TurnStart) and event.kind == "prompt":
            self._ledger.end_turn()
            self._turns.prompt(event.timestamp)
        return True

    def _bookkeeping(self, buffer: bytes, start: int, end: int) -> bool:
        """Claude Code's bookkeeping lines (their type first): told by their bytes, as
        TranscriptScan tells them; False for a line of the conversation."""
        kind = sort_line(buffer, start, end)
        if kind == COST:
            self._cost_state = cost_amount(cost_state_total(buffer[start:end]),
                                           self._cost_state)
        return kind < KEEP

    def _side_line(self, offset: int, line: memoryview,
                   found: tuple[Event | None, str, Line]) -> bool:
        """A subagent's line inline in a main transcript (``found``: its main scope's
        reading): read as ``TranscriptScan`` reads it, in a scope of its own. False when
        only the engine can read it."""
        event, reason, entry = found
        if reason == "sidechain":  # (its conversation: read as a subagent's)
            found = typed_event(line, b"", subagent=True, lean=True)
            if found is NOT_TYPED:
                return False
            event, reason, entry = found
        if reason == "wrong_shape":
            self._broken += 1
        if event is None:
            return True
        if self._side is None:
            self._side = (UsageLedger(), LoopHints(self._settings, reprompts=False))
        ledger, hints = self._side
        if isinstance(event, AssistantPart):
            key = ledger.add(event, reply_request_id(event, entry))
            if key is not None:
                self._turns.aside(key, event.timestamp)
        hints.feed(event, offset)
        if isinstance(event, TurnStart) and event.kind == "prompt":
            ledger.end_turn()
        return True


def _merged(main: Replies, side: Replies) -> Replies:
    """Both scopes' replies, each once (its larger copy), as ``TranscriptScan`` merges
    them: the main scope's first."""
    replies: dict[ReplyKey, Reply] = {reply.key: reply for reply in main}
    for reply in side:
        known = replies.get(reply.key)
        if known is None or reply.usage.total > known.usage.total:
            replies[reply.key] = reply
    return tuple(replies.values())
