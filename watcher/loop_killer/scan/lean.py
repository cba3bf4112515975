"""The scan's first pass over one transcript file: its cost report, and which parts of it
the engine must read for loops (pure).

Whole blocks of lines are decoded at once (``DECODE_LINES``); a reply or a tool result
never becomes an event: usage goes to the ``UsageLedger``, calls and results to
``LoopHints``. The ``FileResult`` is ``TranscriptScan``'s but for ``loops`` (found in
``segments`` by the engine). It gives up (the engine reads the file whole) wherever the
engine would read a line another way: a block that does not decode, a blank line, a line
of the conversation written type first, a wrong shape, a flat subagent file, a subagent's
cost-state line, a line over ``max_line``; or a loop possible among inline subagent lines
(Claude Code 1.0.x: a scope of their own) or in a file that holds some.
"""

from __future__ import annotations

import msgspec

from ..config import Settings
from ..engine.reader import MAX_LINE_BYTES
from ..engine.transcript import (
    SYNTHETIC_MODEL,
    AssistantPart,
    Reprompt,
    TurnStart,
    usage_of,
)
from ..engine.typed import DECODE_LINES, NOT_TYPED, Line, Message, entry_event
from .hints import LoopHints, Segment
from .ledger import UsageLedger
from .records import FileResult, merged
from .transcript import (
    DEFAULT_SETTINGS,
    TYPE_FIRST,
    cost_amount,
    line_request_id,
    reply_request_id,
)
from .turns import TurnTally

__all__ = ["LeanScan"]

# Lines the engine keeps (``sort_line``) when written type first (an attachment: one
# that names a goal_status): it then reads them its own way.
_SORTED = ("user", "assistant", "system", "attachment")
_CWD = b'"cwd":"'


class _Scope:
    """A main transcript's own lines, or a subagent's inline in it (``inline``)."""

    __slots__ = ("hints", "inline", "ledger")

    def __init__(self, settings: Settings, *, reprompts: bool, inline: bool) -> None:
        self.ledger, self.inline = UsageLedger(), inline
        self.hints = LoopHints(settings, reprompts=reprompts)


class LeanScan:
    """The first pass over one transcript file (the options as for ``TranscriptScan``).

    ``feed`` the file's bytes while it returns True; ``finish`` gives the file's result
    but for its loops, or None when the engine must read it whole (``needs_engine``);
    ``segments``, the parts of it that the engine must read for loops."""

    __slots__ = ("_at", "_cost_state", "_cwd", "_main", "_max_line", "_pending", "_settings",
                 "_side", "_turns", "bytes_read", "lines", "needs_engine", "parsed",
                 "path", "project", "session_id", "subagent")

    def __init__(self, *, path: str = "", project: str = "", session_id: str = "",
                 subagent: bool = False, settings: Settings | None = None,
                 max_line: int = MAX_LINE_BYTES) -> None:
        self.path, self.project, self.session_id = path, project, session_id
        self.subagent = subagent
        self.needs_engine = subagent and not session_id  # (a flat agent-*.jsonl)
        self._max_line = max_line
        self._pending: list[bytes] = []  # a line begun in earlier chunks
        self._at = 0  # where the next block starts in the file
        self._turns = TurnTally()
        self._settings = settings if settings is not None else DEFAULT_SETTINGS
        self._main = _Scope(self._settings, reprompts=not subagent, inline=False)
        self._side: _Scope | None = None  # made on the first inline subagent line
        self._cost_state: float | None = None
        self._cwd = ""  # the first line's that has one (``files._file_cwd``)
        self.bytes_read = self.lines = self.parsed = 0

    def feed(self, chunk: bytes) -> bool:
        """Take the file's next bytes; False once the engine must read the file."""
        if self.needs_engine:
            return False
        self.bytes_read += len(chunk)
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            self._pending.append(chunk)
            if sum(map(len, self._pending)) > self._max_line:
                self.needs_engine = True
            return not self.needs_engine
        block = b"".join((*self._pending, chunk[:cut])) if self._pending else chunk[:cut]
        self._pending = [chunk[cut:]] if cut < len(chunk) else []
        self.needs_engine = not self._block(block)
        return not self.needs_engine

    def finish(self) -> FileResult | None:
        """The file is over: its result, or None when the engine must read it."""
        if self._pending and not self.needs_engine:  # (a last line without its newline)
            self.needs_engine = not self._block(b"".join((*self._pending, b"\n")))
        side = self._side
        if self.needs_engine or side is not None and (side.hints.segments()
                                                      or self.segments()):
            return None
        ledger = self._main.ledger
        ledger.end_turn()
        replies, first_at, last_at = ledger.replies(), ledger.first_at, ledger.last_at
        if side is not None:
            side.ledger.end_turn()
            replies = merged(replies, side.ledger.replies())
            first_at = min(filter(None, (first_at, side.ledger.first_at)), default="")
            last_at = max(last_at, side.ledger.last_at)
        replies, turns = self._turns.finish(replies)
        return FileResult(
            path=self.path, project=self.project, session_id=self.session_id,
            subagent=self.subagent, replies=replies, first_at=first_at, last_at=last_at,
            cost_state=self._cost_state, bytes_read=self.bytes_read, lines=self.lines,
            parsed=self.parsed, turns=turns, cwd=self._cwd)

    def segments(self) -> list[Segment]:
        """The parts of the file the engine must read (after ``finish``)."""
        return self._main.hints.segments()

    def _block(self, block: bytes) -> bool:
        """Read whole lines (``block`` ends with a newline); False when the engine must
        read the file."""
        at, self._at = self._at, self._at + len(block)
        starts, type_first = _line_starts(block)
        try:
            entries = DECODE_LINES(block)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return False
        if len(entries) != len(starts):  # (a blank line)
            return False
        if len(block) > self._max_line and max(
                end - start for start, end in zip(starts, [*starts[1:], len(block)],
                                                  strict=True)) >= self._max_line:
            return False  # (the reader drops such a line)
        self.lines += len(starts)
        self.parsed += len(starts) - type_first
        return all(self._line(entry, block, at, starts, index, type_first > 0)
                   for index, entry in enumerate(entries))

    def _line(self, entry: Line, block: bytes, at: int, starts: list[int], index: int,
              type_first: bool) -> bool:
        """One line (``entry``; the block's line ``index``); False when only the engine
        can read it. ``type_first``: some line of the block starts with its type."""
        kind = entry.type
        if not self._cwd and isinstance(entry.cwd, str) and block.find(
                _CWD, starts[index], _end(block, starts, index)) >= 0:
            self._cwd = entry.cwd  # (its bytes hold the key: as ``_file_cwd`` finds it)
        if type_first and kind in _SORTED and _sorted(block, starts, index, kind):
            return False
        if kind != "assistant" and kind != "user":
            if kind == "cost-state":
                if self.subagent or entry.isSidechain is True:
                    return False
                self._cost_state = cost_amount(entry.totalCostUSD, self._cost_state)
            return True
        scope = self._main
        if entry.isSidechain is True and not self.subagent:
            if self._side is None:
                self._side = _Scope(self._settings, reprompts=False, inline=True)
            scope = self._side
        message = entry.message
        if message is None or message.model == SYNTHETIC_MODEL \
                or entry.isApiErrorMessage is True:
            return self._event(scope, entry, at + starts[index])
        if kind == "assistant":
            return self._reply(scope, entry, message)
        content = message.content
        ids = [_str(part.tool_use_id) for part in content
               if part.type == "tool_result"] if isinstance(content, list) else None
        if not ids:  # (a person's prompt, a re-prompt, a meta message...)
            return self._event(scope, entry, at + starts[index])
        if len(set(ids)) < len(ids):
            return False  # (a result is read again by its call's id: it must be one)
        scope.hints.results(ids)
        return True

    def _reply(self, scope: _Scope, entry: Line, message: Message) -> bool:
        """A reply line (no API error): its usage, and its tool calls."""
        content = message.content
        if isinstance(content, list):
            calls = [(_str(part.id), _str(part.name), part.input) for part in content
                     if part.type == "tool_use"]
        elif isinstance(content, str):
            calls = []
        else:
            return False  # (a wrong shape: counted as broken)
        message_id = _str(message.id) or _str(entry.uuid)
        if calls:
            scope.hints.calls(message_id, calls)
        else:
            scope.hints.reply(message_id)
        usage = message.usage
        if usage is not None:
            when = _str(entry.timestamp)
            key = scope.ledger.count(
                message_id, line_request_id(entry), usage_of(
                    usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens,
                    usage.cache_creation_input_tokens, usage.cache_creation, usage.speed,
                    usage.inference_geo), _str(message.model), when)
            self._turns.aside(key, when) if scope.inline else self._turns.reply(key, when)
        return True

    def _event(self, scope: _Scope, entry: Line, offset: int) -> bool:
        """A line read as the engine reads it (at ``offset`` in the file); False when
        only the engine can."""
        found = entry_event(entry, b"", subagent=self.subagent or scope.inline)
        if found is NOT_TYPED or found[1] == "wrong_shape":
            return False
        event = found[0]
        if isinstance(event, AssistantPart):
            key = scope.ledger.add(event, reply_request_id(event, entry))
            if key is not None:
                if scope.inline:
                    self._turns.aside(key, event.timestamp)
                else:
                    self._turns.reply(key, event.timestamp)
        elif isinstance(event, Reprompt) and not scope.inline:
            self._turns.reprompt(event.timestamp)
        if event is not None:
            scope.hints.feed(event, offset)
        if isinstance(event, TurnStart) and event.kind == "prompt":
            scope.ledger.end_turn()
            if not scope.inline:
                self._turns.prompt(event.timestamp)
        return True


def _sorted(block: bytes, starts: list[int], index: int, kind: str) -> bool:
    """Whether the engine sorts the block's line ``index`` by its bytes and then reads
    it its own way: a line of the conversation that starts with its type (an attachment:
    one that names a goal_status)."""
    start = starts[index]
    if not block.startswith(TYPE_FIRST, start):
        return False
    return kind != "attachment" or block.find(b"goal_status", start,
                                              _end(block, starts, index)) >= 0


def _end(block: bytes, starts: list[int], index: int) -> int:
    return starts[index + 1] if index + 1 < len(starts) else len(block)


def _line_starts(block: bytes) -> tuple[list[int], int]:
    """Where each line of ``block`` starts, and how many start with their type."""
    starts: list[int] = []
    find, starts_with, size = block.find, block.startswith, len(block)
    at = type_first = 0
    while at < size:
        starts.append(at)
        type_first += starts_with(TYPE_FIRST, at)
        at = find(b"\n", at) + 1
    return starts, type_first


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
