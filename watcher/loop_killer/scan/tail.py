"""A file's first pass kept where it stopped (``LeanScan`` at its last whole line), so a
transcript only appended to since is read from there on: the new bytes alone. Kept for the
files most likely to grow (``worth_a_tail``), decoded into its own types, never unpickled;
used only while the bytes read before are still there (their first and last 4 KB)."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from ..engine.transcript import MAX_COUNT, Usage
from ..light import digest
from .lean import LeanScan, _Scope
from .ledger import TurnTally, _Open
from .records import Reply

__all__ = ["TAIL_FILES", "TAIL_WITHIN", "Count", "keep", "resume", "worth_a_tail"]

TAIL_FILES, TAIL_WITHIN = 16, 86_400.0  # the newest files, written in the last day
_CHECKED = 4096  # bytes at each end of what was read, compared before going on from it

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
_At = Annotated[int, msgspec.Meta(ge=0)]  # (a turn, an offset; too large: raises, read whole)
_Reply = tuple[bytes, str, Count, Count, Count, Count, Count, str, str]  # (Reply, flat)


class _Turn(msgspec.Struct, array_like=True, gc=False):
    started_at: str
    ended_at: str
    reprompts: Count
    keys: list[bytes]


class _Tally(msgspec.Struct, array_like=True, gc=False):
    turns: list[_Turn]
    seen: set[bytes]
    aside: list[tuple[str, bytes]]


class _Ledger(msgspec.Struct, array_like=True, gc=False):
    open: dict[str, dict[str, _Reply]]
    kept: list[_Reply]
    folds: Count
    first_at: str
    last_at: str


class _Hints(msgspec.Struct, array_like=True, gc=False):
    """``LoopHints``' state (tool inputs not decoded yet: their JSON bytes)."""

    waiting: dict[str, tuple[_At, str, Any]]
    early: dict[str, _At]
    run: Count
    calls: dict[str, Count]
    edits: dict[str, Count]
    unkeyed: list[tuple[str | None, list[Any] | None]]
    starts: Annotated[list[_At], msgspec.Meta(min_length=1)]  # (turn 0: the top)
    flagged: list[_At]
    unsafe: set[_At]
    crossings: list[tuple[_At, _At]]
    pending: int
    crowded: bool
    message_ids: set[str]
    turn_ids: set[str]


class _ScopeState(msgspec.Struct, array_like=True, gc=False):
    ledger: _Ledger
    hints: _Hints


class _Tail(msgspec.Struct, array_like=True, gc=False):
    offset: _At  # where the first pass stopped: its next line starts there
    head: bytes  # digests of the file's first and last bytes before ``offset``
    end: bytes
    cost_state: Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)] | None
    cwd: str
    counts: tuple[Count, Count]  # lines, parsed
    turns: _Tally
    main: _ScopeState
    side: _ScopeState | None


_DECODE = msgspec.msgpack.Decoder(_Tail).decode
_ENCODE = msgspec.msgpack.Encoder().encode


def worth_a_tail(written: Iterable[tuple[str, int]], now: float | None = None) -> set[str]:
    """The files (path, mtime_ns) a scan keeps a tail for: the ``TAIL_FILES`` newest written
    in the last ``TAIL_WITHIN`` seconds."""
    since = int(((time.time() if now is None else now) - TAIL_WITHIN) * 1e9)
    recent = sorted((-mtime, path) for path, mtime in written if mtime >= since)
    return {path for _, path in recent[:TAIL_FILES]}


def keep(lean: LeanScan, fd: int) -> bytes:
    """The first pass's state at its last whole line (before ``finish``), or b"" (none)."""
    offset = lean._at  # (a last line without its newline is read again next time)
    try:
        return _ENCODE(_Tail(offset, *_ends(fd, offset), lean._cost_state, lean._cwd,
                             (lean.lines, lean.parsed), _tally(lean._turns),
                             _scope(lean._main),
                             _scope(lean._side) if lean._side is not None else None))
    except (OverflowError, TypeError, ValueError, OSError):  # (a number past 64 bits...)
        return b""


def resume(tail: bytes, fd: int, lean: LeanScan) -> bool:
    """``lean`` (new) as ``tail`` left it, ready for the bytes from its offset on; False
    when the file no longer holds what was read (the whole file is read)."""
    state = _DECODE(tail)
    if os.fstat(fd).st_size < state.offset or _ends(fd, state.offset) != (state.head,
                                                                           state.end):
        return False
    lean._at = lean.bytes_read = state.offset
    lean._cost_state, lean._cwd = state.cost_state, state.cwd
    lean.lines, lean.parsed = state.counts
    _set_tally(lean._turns, state.turns)
    _set_scope(lean._main, state.main)
    if state.side is not None:
        _set_scope(lean._inline(), state.side)
    return True


def _ends(fd: int, offset: int) -> tuple[bytes, bytes]:
    size = min(offset, _CHECKED)
    return digest(os.pread(fd, size, 0)), digest(os.pread(fd, size, offset - size))


def _tally(tally: TurnTally) -> _Tally:
    return _Tally([_Turn(turn.started_at, turn.ended_at, turn.reprompts, turn.keys)
                   for turn in tally._turns], tally._seen, tally._aside)


def _set_tally(tally: TurnTally, state: _Tally) -> None:
    for turn in state.turns:
        tally.prompt(turn.started_at)
        opened: _Open = tally._turns[-1]
        opened.ended_at, opened.reprompts, opened.keys = turn.ended_at, turn.reprompts, turn.keys
    tally._seen, tally._aside = state.seen, state.aside


def _flat(reply: Reply) -> _Reply:
    usage = reply.usage
    return (reply.key, reply.model, usage.input, usage.output, usage.cache_read,
            usage.cache_creation, usage.cache_creation_1h, usage.speed, usage.inference_geo)


def _reply(flat: _Reply) -> Reply:
    return Reply(flat[0], flat[1], Usage(*flat[2:]))


def _scope(scope: _Scope) -> _ScopeState:
    ledger, hints = scope.ledger, scope.hints
    return _ScopeState(
        _Ledger({message: {request: _flat(reply) for request, reply in requests.items()}
                 for message, requests in ledger._open.items()},
                [_flat(reply) for reply in ledger._kept.values()], ledger.folds,
                ledger.first_at, ledger.last_at),
        _Hints({call: (turn, name, _raw(tool_input))
                for call, (turn, name, tool_input) in hints._waiting.items()},
               hints._early, hints._run, hints._calls, hints._edits,
               [(tool, None if inputs is None else [_raw(each) for each in inputs])
                for tool, inputs in hints._unkeyed.items()],
               hints._starts, hints._flagged, hints._unsafe, hints._crossings,
               hints._pending, hints._crowded, hints._message_ids, hints._turn_ids))


def _set_scope(scope: _Scope, state: _ScopeState) -> None:
    ledger, hints, kept = scope.ledger, scope.hints, state.ledger
    ledger._open = {message: {request: _reply(flat) for request, flat in requests.items()}
                    for message, requests in kept.open.items()}
    ledger._kept = {flat[0]: _reply(flat) for flat in kept.kept}
    ledger.folds, ledger.first_at, ledger.last_at = kept.folds, kept.first_at, kept.last_at
    told = state.hints
    hints._waiting, hints._early, hints._run = told.waiting, told.early, told.run
    hints._calls, hints._edits = Counter(told.calls), Counter(told.edits)
    hints._unkeyed = dict(told.unkeyed)
    hints._starts, hints._flagged, hints._unsafe = told.starts, told.flagged, told.unsafe
    hints._crossings, hints._pending, hints._crowded = told.crossings, told.pending, told.crowded
    hints._message_ids, hints._turn_ids = told.message_ids, told.turn_ids


def _raw(tool_input: Any) -> Any:
    """A tool input as kept: its JSON's bytes while not decoded (``LoopHints._due``)."""
    return bytes(tool_input) if isinstance(tool_input, msgspec.Raw) else tool_input
