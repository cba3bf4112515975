"""One transcript file's bytes in, in any chunks; its loops and token usage out, as the
engine reads it (pure). Inline subagent lines (``isSidechain``) are a scope of their own; a
subagent's file is scanned for tool-repeat loops only."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import orjson

from ..engine.prefilter import (
    COST,
    KEEP,
    RESULT,
    may_be_subagents,
    skipped_reason,
    sort_line,
    unread_result,
)
from ..engine.reader import EventReader, Step, TranscriptReader
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..engine.transcript import AssistantPart, Event, ParseStats, TurnStart, parse_line
from ..engine.typed import NOT_TYPED, Line, decode_line, entry_event, typed_event
from ..state.config import Settings
from .ledger import TurnTally, UsageLedger
from .loops import RepromptLoops, ToolLoops
from .records import FileResult, Loop, merged

__all__ = ["TranscriptScan", "cost_amount", "cost_state_total", "reply_request_id",
           "request_id_of", "session_id_in"]

_SESSION_ID = re.compile(rb'"sessionId":"([A-Za-z0-9][A-Za-z0-9._-]{0,127})"')
_REQUEST_ID = b'"requestId":"'
_MAX_REQUEST_ID = 200


def session_id_in(line: bytes, start: int, end: int) -> str:
    """The ``sessionId`` a line (``line[start:end]``) names, or "" (a flat subagent file's)."""
    found = _SESSION_ID.search(line, start, end)
    return found.group(1).decode() if found else ""


def request_id(line: bytes) -> str:
    """An assistant line's ``requestId``, or "": the last one (a tool's input may hold one)."""
    found = line.rfind(_REQUEST_ID)
    if found < 0:
        return ""
    begin = found + len(_REQUEST_ID)
    close = line.find(b'"', begin, begin + _MAX_REQUEST_ID)
    return line[begin:close].decode("utf-8", "replace") if close > 0 else ""


def reply_request_id(event: Event, entry: Line) -> str:
    """The ``requestId`` of a reply's decoded line, where its usage is counted."""
    if isinstance(event, AssistantPart) and event.usage is not None:
        return request_id_of(entry.requestId)
    return ""


def request_id_of(request: object) -> str:
    """A decoded reply line's ``requestId`` (its value as written)."""
    return request if isinstance(request, str) and len(request) < _MAX_REQUEST_ID else ""


# Claude Code's bookkeeping lines open with their type: told by their bytes (``sort_line``).
TYPE_FIRST = b'{"type":"'

DEFAULT_SETTINGS = Settings()


class _Scope:
    """One counting scope (``inline``: a subagent's lines in a main transcript)."""

    __slots__ = ("inline", "ledger", "stats", "tools", "turns")

    def __init__(self, settings: Settings, turns: TurnTally, *, inline: bool) -> None:
        self.ledger = UsageLedger()
        self.turns, self.inline = turns, inline
        self.tools = ToolLoops(self.ledger, settings) if settings.rule_on(
            RULE_TOOL_REPEAT) else None
        self.stats = ParseStats()

    def event(self, event: object, loops: list[Loop], request: str = "") -> None:
        self.turns.take(event, self.ledger, request, inline=self.inline)
        if self.tools is not None:
            loops.extend(self.tools.feed(event))  # type: ignore[arg-type]
        self.turns.close(event, self.ledger, inline=self.inline)

    def finish(self, loops: list[Loop]) -> None:
        if self.tools is not None:
            loops.extend(self.tools.finish())
        self.ledger.end_turn()


class TranscriptScan:
    """Scans one transcript file. ``prefilter``: off only to prove it changes nothing;
    ``reread``: reads (offset, length) of the file again; ``offset``: the first byte's."""

    __slots__ = ("_chunk", "_chunk_at", "_cost_state", "_events", "_garbage", "_loops",
                 "_main", "_prefilter", "_reader", "_reprompts", "_requests", "_reread",
                 "_settings", "_side_scope", "_turns", "bytes_read", "lines", "parsed",
                 "path", "project", "session_id", "subagent")

    def __init__(self, *, path: str = "", project: str = "", session_id: str = "",
                 subagent: bool = False, prefilter: bool = True, settings: Settings | None = None,
                 reread: Callable[[int, int], bytes] | None = None, offset: int = 0) -> None:
        self.path, self.project, self.session_id = path, project, session_id
        self.subagent, self._prefilter, self._reread = subagent, prefilter, reread
        self._chunk, self._chunk_at = b"", 0
        self._loops: list[Loop] = []
        self._cost_state: float | None = None
        self._requests: dict[int, str] = {}  # id() of a reply's event -> its requestId, a while
        self.lines = self.parsed = self._garbage = 0
        self.bytes_read = offset
        self._settings = settings = settings if settings is not None else DEFAULT_SETTINGS
        self._turns = TurnTally()
        # The engine's reader; only how a line becomes an event is the scan's (``_parse``).
        if subagent:  # (its conversation is a sidechain: read as the scope's main one)
            self._side_scope: _Scope | None = _Scope(settings, self._turns, inline=False)
            self._main: _Scope | None = None
            self._reprompts: RepromptLoops | None = None
            self._reader: TranscriptReader | None = None
            self._events = EventReader(offset=offset, parse=self._parse)
        else:
            self._main = _Scope(settings, self._turns, inline=False)
            self._side_scope = None  # made on the first inline subagent line
            self._reprompts = RepromptLoops(self._main.ledger)
            self._reader = TranscriptReader(session_id, offset=offset, parse=self._parse,
                                            thresholds=settings.thresholds,
                                            ignored=settings.ignore_tools)
            self._events = self._reader.events

    def feed(self, chunk: bytes) -> None:
        """Take the file's next bytes."""
        self._chunk, self._chunk_at = chunk, self.bytes_read
        self.bytes_read += len(chunk)
        if self._reader is None:
            self._events.feed(chunk)  # every event went to the subagent's scope
            return
        for step in self._reader.feed(chunk):
            self._step(step)

    def finish(self) -> FileResult:
        """The file is over: every loop in it, and its usage."""
        if self._reader is None:
            if self._events.pending_bytes:
                self._events.feed(b"\n")  # a last line without its newline
        else:
            for step in self._reader.finish():
                self._step(step)
        if self._reprompts is not None:
            self._loops.extend(self._reprompts.finish())
        scopes = [scope for scope in (self._main, self._side_scope) if scope is not None]
        for scope in scopes:
            scope.finish(self._loops)
        # (lines without a "{" never reach ``_parse``: the reader counts them)
        stepped_over = self._events.stats
        broken = self._garbage + stepped_over.broken + sum(scope.stats.broken for scope in scopes)
        kept, turns = self._turns.finish(merged(*(scope.ledger.replies() for scope in scopes)))
        return FileResult(
            path=self.path, project=self.project, session_id=self.session_id,
            subagent=self.subagent, loops=tuple(self._loops), replies=kept,
            first_at=min((scope.ledger.first_at for scope in scopes if scope.ledger.first_at),
                         default=""),
            last_at=max((scope.ledger.last_at for scope in scopes), default=""),
            cost_state=self._cost_state, bytes_read=self.bytes_read,
            lines=self.lines + stepped_over.lines, parsed=self.parsed, broken=broken,
            oversized=self._events.oversized_lines, turns=turns)

    def _parse(self, buffer: bytes, start: int, end: int, stats: ParseStats) -> Event | None:
        """One line's event for the main scope (the reader's parser)."""
        self.lines += 1
        if self._prefilter and not buffer.startswith(TYPE_FIRST, start, end):
            entry = decode_line(memoryview(buffer)[start:end])
            if entry is not None:
                # (a user line's results are read again from the file, or from a copy)
                found = entry_event(entry, (self._source(buffer, start, end)
                                            or buffer[start:end]) if entry.type == "user"
                                    else b"", subagent=self._main is None)
                if found is not NOT_TYPED:
                    event, reason = found
                    return self._typed(buffer, start, end, event, reason, entry)
        return self._sort_and_parse(buffer, start, end)

    def _typed(self, buffer: bytes, start: int, end: int, event: Event | None, reason: str,
               entry: Line) -> Event | None:
        """A decoded line's event for the main scope; the others go where they belong."""
        self.parsed += 1
        if reason == "sidechain":  # a subagent's line, inline (Claude Code 1.0.x)
            found = typed_event(memoryview(buffer)[start:end],
                                self._source(buffer, start, end), subagent=True)
            if found is NOT_TYPED:
                self._side_line(buffer[start:end])
                return None
            event, reason, entry = found
        if self._main is None or entry.isSidechain is True:
            scope = self._side(buffer, start, end)
            scope.stats.count(event, reason)
            if event is not None:
                scope.event(event, self._loops, reply_request_id(event, entry))
            return None
        self._main.stats.count(event, reason)
        if event is None:
            if entry.type == "cost-state":
                self._cost(entry.totalCostUSD)
        elif isinstance(event, AssistantPart) and event.usage is not None:
            self._requests[id(event)] = reply_request_id(event, entry)
        return event

    def _sort_and_parse(self, buffer: bytes, start: int, end: int) -> Event | None:
        """One line's event, sorted by its bytes first (``sort_line``)."""
        kind = sort_line(buffer, start, end)
        if kind == RESULT and self._prefilter:
            result = unread_result(buffer, start, end, self._source(buffer, start, end))
            if result is not None:
                # (most of a history's bytes: read only if the call repeats)
                unread, sidechain = result
                if self._main is None or sidechain:
                    self._side(buffer, start, end).event(unread, self._loops)
                    return None
                return unread
        elif kind < KEEP:
            if kind == COST:
                self._cost(cost_state_total(buffer[start:end]))
            if self._prefilter:
                if skipped_reason(buffer, start, end) == "bad_json":
                    self._garbage += 1  # not even a JSON object: counted without parsing
                return None
        self.parsed += 1
        line = buffer[start:end]
        if self._main is None:
            self._side_line(line)
            return None
        event = parse_line(line, self._main.stats)
        if event is None and may_be_subagents(line):
            self._side_line(line)  # a subagent's line, inline (Claude Code 1.0.x)
        elif isinstance(event, AssistantPart) and event.usage is not None:
            self._requests[id(event)] = request_id(line)
        return event

    def _source(self, buffer: bytes, start: int, end: int) -> Callable[[], bytes] | None:
        """How to read a line of the chunk being fed again from the file, if it can be."""
        if self._reread is None or buffer is not self._chunk:
            return None
        return partial(self._reread, self._chunk_at + start, end - start)

    def _side(self, line: bytes, start: int = 0, end: int | None = None) -> _Scope:
        """The subagent's scope (made on its first line, ``line[start:end]``)."""
        if not self.session_id:
            self.session_id = session_id_in(line, start, len(line) if end is None else end)
        if self._side_scope is None:
            self._side_scope = _Scope(self._settings, self._turns, inline=True)
        return self._side_scope

    def _side_line(self, line: bytes) -> None:
        scope = self._side(line)
        event = parse_line(line, scope.stats, subagent=True)
        if event is not None:
            scope.event(event, self._loops, request_id(line)
                        if isinstance(event, AssistantPart) and event.usage is not None
                        else "")

    def _step(self, step: Step) -> None:
        main, reprompts = self._main, self._reprompts
        if main is None or reprompts is None:
            return
        event = step.event
        # usage first: a loop the step closes may hold this reply
        self._turns.take(event, main.ledger, self._requests.pop(id(event), ""))
        if step.answers or isinstance(event, TurnStart):
            # (a step without answers changes no re-prompt run unless it starts a turn)
            self._loops.extend(reprompts.step(step))
        if event is not None:
            if main.tools is not None:
                self._loops.extend(main.tools.feed(event))
            self._turns.close(event, main.ledger)

    def _cost(self, total: object) -> None:
        self._cost_state = cost_amount(total, self._cost_state)


def cost_state_total(line: bytes) -> object:
    """The ``totalCostUSD`` of a ``cost-state`` line; None when it is not one."""
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(entry, dict) and entry.get("type") == "cost-state":
        return entry.get("totalCostUSD")
    return None


def cost_amount(total: object, known: float | None) -> float | None:
    """The session's cost after a ``cost-state`` line's ``totalCostUSD`` (``known``: before)."""
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total >= 0:
        return float(total)
    return known

