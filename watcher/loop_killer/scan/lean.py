"""The scan's fast first pass over one transcript file (pure): ``TranscriptScan``'s result but
for loops, and the parts the engine must read for those (``LoopHints``). Blocks of lines are
decoded at once. It gives up (the engine reads the file whole) wherever the engine would read
a line another way (undecodable, blank, oversized, written type first, a wrong shape, a flat
subagent file, a subagent's cost-state) or a loop is possible among inline subagent lines."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from ..engine.calls import call_key, is_ignored
from ..engine.edits import FILE_CHANGING_TOOLS, edited_file
from ..engine.pairing import MAX_PENDING, ToolPairing
from ..engine.reader import MAX_LINE_BYTES
from ..engine.rules import RULE_IDLE, RULE_SAME
from ..engine.transcript import SYNTHETIC_MODEL, AssistantPart, Reprompt, ToolResults, TurnStart
from ..engine.typed import NOT_TYPED, TypedUsage, typed_event
from ..state.config import Settings
from .ledger import TurnTally, UsageLedger
from .records import FileResult, ReplyKey, merged
from .transcript import DEFAULT_SETTINGS, TYPE_FIRST, cost_amount, reply_request_id, request_id_of

__all__ = ["LeanScan", "LoopHints", "Segment"]

Segment = tuple[int, "int | None"]  # from a prompt's line to a later one's, or the end


class _Block(msgspec.Struct, gc=False):
    type: str | None = None
    id: Any = None
    name: Any = None
    input: msgspec.Raw = msgspec.Raw(b"null")  # (decoded if its call is paired: LoopHints)
    tool_use_id: Any = None


class _Message(msgspec.Struct, gc=False):
    id: Any = None
    model: Any = None
    content: str | list[_Block] | None = None
    usage: TypedUsage | None = None


class _Line(msgspec.Struct, gc=False):
    """What the first pass reads of a line (a person's text: decoded again, ``Line``)."""

    type: Any = None
    uuid: Any = None
    timestamp: Any = None
    isSidechain: Any = None
    isApiErrorMessage: Any = None
    cwd: Any = None
    requestId: Any = None
    totalCostUSD: Any = None
    message: _Message | None = None


_DECODE_LINES = msgspec.json.Decoder(_Line).decode_lines

# Lines the engine keeps (``sort_line``) and reads its own way when written type first
_SORTED = ("user", "assistant", "system", "attachment")
_CWD = b'"cwd":"'


class _Scope:
    """A main transcript's own lines, or a subagent's inline in it (``inline``)."""

    __slots__ = ("hints", "inline", "last", "ledger")

    def __init__(self, settings: Settings, *, reprompts: bool, inline: bool) -> None:
        self.ledger, self.inline = UsageLedger(), inline
        self.hints = LoopHints(settings, reprompts=reprompts)
        # (message id, request id, usage, ledger folds, key) of the last reply line counted:
        # a next line of the reply alike changes only the times.
        self.last: tuple[str, str, TypedUsage, int, ReplyKey] | None = None


class LeanScan:
    """The first pass over one file: ``feed`` bytes while it returns True, then ``finish``
    (None: the engine must read it whole) and ``segments``."""

    __slots__ = ("_at", "_cost_state", "_cwd", "_main", "_pending", "_settings", "_side",
                 "_turns", "bytes_read", "lines", "needs_engine", "parsed", "path", "project",
                 "session_id", "subagent")

    def __init__(self, *, path: str = "", project: str = "", session_id: str = "",
                 subagent: bool = False, settings: Settings | None = None) -> None:
        self.path, self.project, self.session_id = path, project, session_id
        self.subagent = subagent
        self.needs_engine = subagent and not session_id  # (a flat agent-*.jsonl)
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
            if sum(map(len, self._pending)) > MAX_LINE_BYTES:
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
        """Read whole lines (``block`` ends with a newline); False: the engine must read."""
        at, self._at = self._at, self._at + len(block)
        decoded = self._decode(block)
        if decoded is None:
            return False
        entries, starts = decoded
        if not self._cwd:
            self._find_cwd(entries, block, starts)
        main, subagent = self._main, self.subagent
        for index, entry in enumerate(entries):
            kind = entry.type
            if kind == "assistant" or kind == "user":
                scope = self._inline() if entry.isSidechain is True and not subagent else main
                message = entry.message
                if message is None or message.model == SYNTHETIC_MODEL \
                        or entry.isApiErrorMessage is True:
                    read = self._event(scope, block, starts, index, at)
                elif kind == "assistant":
                    read = self._reply(scope, entry, message)
                else:  # (a line of tool results, else a person's prompt, a re-prompt...)
                    read = self._results(scope, message.content) or self._event(
                        scope, block, starts, index, at)
                if not read:
                    return False
            elif kind == "cost-state":
                if subagent or entry.isSidechain is True:
                    return False
                self._cost_state = cost_amount(entry.totalCostUSD, self._cost_state)
        return True

    def _decode(self, block: bytes) -> tuple[list[_Line], list[int]] | None:
        """The block's lines, decoded, and where each starts; None: the engine must read."""
        starts, type_first = _line_starts(block)
        try:
            entries = _DECODE_LINES(block)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # (too deep)
            return None
        if len(entries) != len(starts):  # (a blank line)
            return None
        if len(block) > MAX_LINE_BYTES and max(
                end - start for start, end in zip(starts, [*starts[1:], len(block)],
                                                  strict=True)) >= MAX_LINE_BYTES:
            return None  # (the reader drops such a line)
        if any(entries[index].type in _SORTED and _sorted(block, starts, index,
                                                          entries[index].type)
               for index in type_first):
            return None  # (the engine sorts such a line by its bytes: read its own way)
        self.lines += len(starts)
        self.parsed += len(starts) - len(type_first)
        return entries, starts

    def _find_cwd(self, entries: list[_Line], block: bytes, starts: list[int]) -> None:
        """The first line's top-level ``cwd`` whose bytes hold the key (``_file_cwd``'s)."""
        for index, entry in enumerate(entries):
            if isinstance(entry.cwd, str) and entry.cwd and block.find(
                    _CWD, starts[index], _end(block, starts, index)) >= 0:
                self._cwd = entry.cwd
                return

    def _inline(self) -> _Scope:
        if self._side is None:
            self._side = _Scope(self._settings, reprompts=False, inline=True)
        return self._side

    def _results(self, scope: _Scope, content: str | list[_Block] | None) -> bool:
        """A user line's tool results, told to ``LoopHints``; False for none (a prompt...)."""
        if not isinstance(content, list):
            return False
        ids = [part.tool_use_id if isinstance(part.tool_use_id, str) else ""
               for part in content if part.type == "tool_result"]
        if not ids or len(ids) > 1 and len(set(ids)) < len(ids):
            return False  # (a result read again by its call's id: the engine's way)
        scope.hints.results(ids)
        return True

    def _reply(self, scope: _Scope, entry: _Line, message: _Message) -> bool:
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
            when, request, ledger, last = (_str(entry.timestamp),
                                           request_id_of(entry.requestId), scope.ledger,
                                           scope.last)
            if last is not None and last[0] == message_id and last[1] == request \
                    and last[2] == usage and last[3] == ledger.folds:
                key = last[4]
                ledger.saw(when)
            else:
                key = ledger.count(message_id, request, usage.read(), _str(message.model), when)
                scope.last = (message_id, request, usage, ledger.folds, key)
            self._turns.aside(key, when) if scope.inline else self._turns.reply(key, when)
        return True

    def _event(self, scope: _Scope, block: bytes, starts: list[int], index: int,
               at: int) -> bool:
        """Line ``index`` (``block`` at ``at`` in the file) read as the engine reads it."""
        start = starts[index]
        found = typed_event(memoryview(block)[start:_end(block, starts, index)], b"",
                            subagent=self.subagent or scope.inline)
        if found is NOT_TYPED or found[1] == "wrong_shape":
            return False
        event, _, entry = found
        if event is not None:
            self._turns.take(event, scope.ledger, reply_request_id(event, entry),
                             inline=scope.inline)
            scope.hints.feed(event, at + start)
            self._turns.close(event, scope.ledger, inline=scope.inline)
        return True


def _sorted(block: bytes, starts: list[int], index: int, kind: str) -> bool:
    """Whether the engine reads line ``index`` its own way (type first; an attachment: a goal's)."""
    start = starts[index]
    if not block.startswith(TYPE_FIRST, start):
        return False
    return kind != "attachment" or block.find(b"goal_status", start,
                                              _end(block, starts, index)) >= 0


def _end(block: bytes, starts: list[int], index: int) -> int:
    return starts[index + 1] if index + 1 < len(starts) else len(block)


def _line_starts(block: bytes) -> tuple[list[int], list[int]]:
    """Where each line of ``block`` starts, and which lines start with their type."""
    starts: list[int] = []
    type_first: list[int] = []
    find, starts_with, size = block.find, block.startswith, len(block)
    at = 0
    while at < size:
        if starts_with(TYPE_FIRST, at):
            type_first.append(len(starts))
        starts.append(at)
        at = find(b"\n", at) + 1
    return starts, type_first


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


class LoopHints:
    """Told one scope's lines in order: where the engine must read (``segments``), so each test
    is a necessary condition of an engine rule, counted coarsely. Starting at a prompt, it judges
    as from the top unless something crosses it (*unsafe*): a call and result paired across it,
    too many unpaired, or a later line of a reply from before it."""

    __slots__ = ("_calls", "_crossings", "_crowded", "_early", "_edits", "_flagged",
                 "_ignored", "_ignored_names", "_message_ids", "_oscillation", "_pending",
                 "_reprompts", "_run", "_starts", "_thresholds", "_turn_ids", "_unkeyed",
                 "_unsafe", "_waiting", "_warn")

    def __init__(self, settings: Settings, *, reprompts: bool = True) -> None:
        self._thresholds, self._reprompts = settings.thresholds, reprompts
        self._warn, self._ignored = settings.tool_repeat_warn, settings.ignore_tools
        # (at least one return: a threshold of 0 switches the shape off)
        self._oscillation = max(1, settings.edit_oscillation_warn) + 1
        self._waiting: dict[str, tuple[int, str, Any]] = {}  # call id -> turn, name, input
        self._early: dict[str, int] = {}  # result id -> its turn (before its call)
        self._run = 0  # re-prompts since the last turn start
        self._calls: Counter[str] = Counter()  # call_key -> results in the person's turn
        self._edits: Counter[str] = Counter()  # file -> changes in the person's turn
        self._unkeyed: dict[str | None, list[Any] | None] = {}  # tool -> inputs (``_due``)
        self._starts = [0]  # where each turn starts (turn 0: the file's start)
        self._flagged: list[int] = []  # turns that could hold a loop
        self._unsafe: set[int] = set()  # turns the engine cannot start at
        self._crossings: list[tuple[int, int]] = []  # (turn stored, turn paired) of pairs
        self._pending = 0  # calls and results stored unpaired (at most)
        self._crowded = False  # so many that the pairing may have forgotten some
        self._message_ids: set[str] = set()  # of the replies before this turn
        self._turn_ids: set[str] = set()  # of this turn's
        self._ignored_names: dict[str, bool] = {}  # tool name -> not counted

    def feed(self, event: object, offset: int) -> None:
        """Take the scope's next event, whose line starts at ``offset``."""
        if isinstance(event, AssistantPart):
            self.calls(event.message_id, [(call.tool_use_id, call.name, call.input)
                                          for call in event.tool_calls])
        elif isinstance(event, ToolResults):
            self.results([result.tool_use_id for result in event.results])
        elif isinstance(event, Reprompt):
            self.reprompt()
        elif isinstance(event, TurnStart):  # (no call or result is paired by it)
            self.turn_start(offset if ToolPairing.starts_afresh(event) else None)

    def reply(self, message_id: str) -> None:
        """A reply line without a tool call."""
        if not message_id or message_id in self._message_ids:
            # (maybe a line of the last reply before the turn)
            self._unsafe.add(len(self._starts) - 1)
        self._turn_ids.add(message_id)

    def calls(self, message_id: str, calls: list[tuple[str, str, Any]]) -> None:
        """A reply line and its tool calls (id, name, input: decoded, or ``Raw``)."""
        self.reply(message_id)
        turn = len(self._starts) - 1
        self._stored(len(calls))
        for tool_use_id, name, tool_input in calls:
            early = self._early.pop(tool_use_id, None)
            if early is None:
                _put(self._waiting, tool_use_id, (turn, name, tool_input))
            else:
                self._paired(early, name, tool_input)

    def results(self, tool_use_ids: list[str]) -> None:
        self._stored(len(tool_use_ids))
        waiting = self._waiting
        for tool_use_id in tool_use_ids:
            made = waiting.pop(tool_use_id, None)
            if made is None:
                _put(self._early, tool_use_id, len(self._starts) - 1)
            else:
                self._paired(*made)

    def reprompt(self) -> None:
        if self._reprompts:
            self._run += 1
            if self._thresholds.fires(RULE_SAME, self._run) or self._thresholds.fires(
                    RULE_IDLE, self._run):
                self._flag(len(self._starts) - 1)

    def turn_start(self, prompt_at: int | None) -> None:
        """A turn starts: a person's prompt at ``prompt_at``, or (None) a meta message."""
        self._run = 0
        if prompt_at is not None:
            self._starts.append(prompt_at)
            self._message_ids |= self._turn_ids
            self._turn_ids = set()
            self._calls.clear()
            self._edits.clear()
            self._unkeyed.clear()

    def _stored(self, count: int) -> None:
        self._pending += count
        self._crowded = self._crowded or self._pending >= MAX_PENDING // 2

    def _paired(self, since: int, name: str, tool_input: Any) -> None:
        """A call and its result met (the first stored in turn ``since``)."""
        turn = len(self._starts) - 1
        self._pending -= 2
        if since < turn:
            self._crossings.append((since, turn))  # (stored before a prompt)
        ignored = self._ignored_names.get(name)
        if ignored is None:
            ignored = self._ignored_names[name] = is_ignored(name, self._ignored)
        if ignored:
            return
        flag = False
        for each in self._due(name, tool_input, self._warn):
            key = call_key(name, each)
            self._calls[key] += 1
            flag = flag or self._calls[key] >= self._warn
        if name in FILE_CHANGING_TOOLS:
            for each in self._due(None, tool_input, self._oscillation):
                path = edited_file(each)
                self._edits[path] += 1
                flag = flag or self._edits[path] >= self._oscillation
        if flag:
            self._flag(turn)

    def _due(self, tool: str | None, tool_input: Any, needed: int) -> list[Any]:
        """To count, decoded: none till ``needed`` of ``tool`` (None: file changes) in the turn."""
        waiting = self._unkeyed.setdefault(tool, [])
        if waiting is not None:
            waiting.append(tool_input)
            if len(waiting) < needed:
                return []
            self._unkeyed[tool] = None
        return [msgspec.json.decode(each) if isinstance(each, (bytes, msgspec.Raw)) else each
                for each in waiting or (tool_input,)]

    def _flag(self, turn: int) -> None:
        if not self._flagged or self._flagged[-1] != turn:
            self._flagged.append(turn)

    def segments(self) -> list[Segment]:
        """Each flagged turn from the last safe prompt before it to the next, in file order."""
        if not self._flagged:
            return []
        turns = len(self._starts)
        unsafe = set(self._unsafe)
        depth = [0] * (turns + 1)
        for since, until in self._crossings:
            depth[since + 1] += 1
            depth[until + 1] -= 1
        crossed = 0
        for turn in range(turns):
            crossed += depth[turn]
            if crossed or self._crowded:  # (crowded: start at the top)
                unsafe.add(turn)
        found: list[tuple[int, int]] = []  # (first turn, last turn)
        for turn in self._flagged:
            first, floor = turn, found[-1][1] + 1 if found else 0
            while first > floor and first in unsafe:
                first -= 1
            if found and first <= floor:  # (it meets the segment before: one segment)
                found[-1] = (found[-1][0], turn)
            else:
                found.append((first, turn))
        last = len(self._starts) - 1
        return [(self._starts[first], self._starts[turn + 1] if turn < last else None)
                for first, turn in found]


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    """``ToolPairing``'s: the newest last, the oldest given way beyond ``MAX_PENDING``."""
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_PENDING:
        del table[next(iter(table))]
