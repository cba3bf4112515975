"""Tool results made cheap to count, without changing a single count.

Used in front of the counter wherever whole transcripts stream through it: the watcher
(every followed session) and ``loop-killer scan``. (The tool-call hooks count one result
per process and key it directly.)

The engine's ``ToolRepeatCounter`` compares each result of a call with the call's
previous result by ``result_key``, which masks times, durations and addresses with
regular expressions: a few MB/s, most of a scan's time when every result of a long
history goes through it. Yet a result only ever needs masking when the same call gave a
different output before. ``StandIns`` sits in front of the counter and hands it each
result with its content replaced by a short stand-in (a few letters, which masking leaves
as they are): the same stand-in as the call's previous result when the two contents are
equal, or, only when they differ, when ``result_key`` says they are equal. So the counter
sees exactly the sequence of equal and unequal results it would have seen, and does all
the counting (resets, polling tools, refusals, forgetting) itself. (Stand-ins of error
results differ from those of other results, so the counter is told no error flag.)

A result may come unread (``UnreadResult``, from ``loop-killer scan``): it is read only
when it must be compared, which a call's first result in a turn never is.

Calls and results are paired by the counter's own pairing (``ToolPairing``). Pure;
memory bounded by ``MAX_HELD_BYTES`` of contents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..light import digest
from .edits import FILE_CHANGING_TOOLS
from .masking import result_key
from .pairing import ToolPairing
from .tool_repeat import (
    ANSWERED_BY_PERSON,
    MAX_CALLS,
    ToolRepeat,
    ToolRepeatCounter,
    call_key,
    event_seconds,
    is_ignored,
    is_refusal,
)
from .transcript import (
    AssistantPart,
    Event,
    ToolCall,
    ToolResult,
    UnreadResult,
)

__all__ = ["MAX_HELD_BYTES", "StandIns", "ToolCounts"]

MAX_HELD_BYTES = 32 << 20
"""Contents kept for comparison; beyond it the oldest are replaced by their key."""
_MAX_LAST = 8 * MAX_CALLS  # calls remembered (the counter forgets long before: safe)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(slots=True)
class _Last:
    """A call's previous result: its content (until it had to be keyed), its key (once
    computed), and the stand-in the counter saw for it."""

    content: Any
    is_error: bool
    key: str | None
    token: str
    size: int


def _size(content: Any) -> int:
    if isinstance(content, UnreadResult):
        return content.size
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(block.get("text", "")) + 64 if isinstance(block, dict)
                   and isinstance(block.get("text"), str) else 256 for block in content)
    return 256


class StandIns:
    """Turns the events of one scope into the events to feed its ``ToolRepeatCounter``.

    ``ignored``: the counter's ignored tools (their results pass unchanged).
    """

    __slots__ = ("_held", "_ignored", "_ignored_names", "_last", "_pairing", "_tokens",
                 "max_held")

    def __init__(self, ignored: frozenset[str], *, max_held: int | None = None) -> None:
        self._ignored = ignored
        # Bytes of contents kept for comparison (the scan: MAX_HELD_BYTES; the watcher,
        # which follows many sessions at once, less per session).
        self.max_held = MAX_HELD_BYTES if max_held is None else max_held
        self._ignored_names: dict[str, bool] = {}  # tool name -> ignored (names are few)
        self._pairing = ToolPairing()
        self._last: dict[bytes, _Last] = {}  # call digest -> its previous result
        self._held = 0  # bytes of contents kept in ``_last``
        self._tokens = 0

    def pairs(self, event: Event) -> list[tuple[AssistantPart, ToolCall, str, ToolResult]]:
        """The results ``event`` completes, each with its call (``ToolPairing``, the
        counter's own pairing), the call's ``call_key`` and its stand-in for its content."""
        if self._pairing.starts_afresh(event):
            self._last.clear()  # the counter starts afresh: so do the comparisons
            self._held = 0
        paired: list[tuple[AssistantPart, ToolCall, str, ToolResult]] = []
        for part, call, result in self._pairing.pair(event):
            key = call_key(call.name, call.input, result.cwd)
            paired.append((part, call, key, self._stand_in(call.name, key, result)))
        return paired

    def _stand_in(self, name: str, call_text: str, result: ToolResult) -> ToolResult:
        ignored = self._ignored_names.get(name)
        if ignored is None:
            ignored = self._ignored_names[name] = is_ignored(name, self._ignored)
        if ignored:
            return result  # the counter never looks at these: hand them on as they are
        if name in ANSWERED_BY_PERSON or name in FILE_CHANGING_TOOLS:
            # Whether the person answered, or the file's states: the counter reads them.
            if isinstance(result.content, UnreadResult):
                content, is_error = result.content.read()
                return ToolResult(result.tool_use_id, content, is_error, result.cwd,
                                  result.content.read_move())
            return result
        call = digest(call_text.encode("utf-8", "surrogatepass"))
        last = self._last.get(call)
        content, is_error = result.content, result.is_error
        if isinstance(content, UnreadResult):
            if last is None:
                # Compared with nothing yet: it stays unread, with a stand-in of its own.
                # (Were it loop-killer's own refusal, which counts nothing, it would count
                # 1, and so would the call's refusals right after it; its next real result
                # counts 1 either way, so no loop can tell. And the hooks only refuse a
                # call that gave results in the turn: those are kept here.)
                return self._keep(call, _Last(content, False, None, self._new_token(),
                                              content.size), result)
            content, is_error = content.read()
        if is_refusal(content, is_error=is_error):
            return ToolResult(result.tool_use_id, content, is_error, result.cwd)  # never compared
        key: str | None = None
        if last is None:
            token = self._new_token()
        else:
            if isinstance(last.content, UnreadResult):
                last.content, last.is_error = last.content.read()
            before = last.content
            # (strings only: in Python True == 1 == 1.0, which JSON tells apart)
            if last.is_error == is_error and type(before) is str and type(content) is str \
                    and before == content:
                token, key = last.token, last.key  # the very same output
            else:
                previous = last.key if last.key is not None else result_key(
                    before, is_error=last.is_error)
                key = result_key(content, is_error=is_error)
                token = last.token if key == previous else self._new_token()
        return self._keep(call, _Last(content, is_error, key, token, _size(content)), result)

    def _keep(self, call: bytes, last: _Last, result: ToolResult) -> ToolResult:
        """Remember a call's newest result; what the counter gets for it (equal stand-ins
        are equal outputs, error or not: the flag is in the stand-in)."""
        before = self._last.pop(call, None)
        if before is not None:
            self._held -= before.size
        self._last[call] = last
        self._held += last.size
        self._trim()
        return ToolResult(result.tool_use_id, last.token, False, result.cwd)

    def _new_token(self) -> str:
        number, letters = self._tokens, []
        self._tokens += 1
        while True:
            number, digit = divmod(number, len(_LETTERS))
            letters.append(_LETTERS[digit])
            if not number:
                return "result-" + "".join(letters)

    def _trim(self) -> None:
        # Too many bytes kept: the oldest contents give way to their keys (the stand-ins
        # stay, so comparisons stay exact).
        for last in self._last.values():
            if self._held <= self.max_held:
                break
            if last.content is not None:
                if isinstance(last.content, UnreadResult):
                    last.content, last.is_error = last.content.read()
                if last.key is None:
                    last.key = result_key(last.content, is_error=last.is_error)
                last.content = None
                self._held -= last.size
                last.size = 0
        while len(self._last) > _MAX_LAST:
            oldest = self._last.pop(next(iter(self._last)))
            self._held -= oldest.size


class ToolCounts:
    """A ``ToolRepeatCounter`` fed through ``StandIns``: the same counts as the counter fed
    directly, with outputs masked only when a call's output changed. ``max_held``: as for
    ``StandIns``."""

    __slots__ = ("_stand_ins", "counter")

    def __init__(self, counter: ToolRepeatCounter, *, max_held: int | None = None) -> None:
        self.counter = counter
        self._stand_ins = StandIns(counter.ignored, max_held=max_held)

    def feed(self, event: Event) -> list[ToolRepeat]:
        """Take one transcript event; one ToolRepeat per tool result it counted."""
        return [repeat for _, _, repeat in self.feed_paired(event)]

    def feed_paired(self, event: Event) -> list[tuple[AssistantPart, ToolCall, ToolRepeat]]:
        """``feed``, each count with its call and the reply that made the call."""
        if not ToolPairing.may_pair(event):
            return []  # most lines: text or thinking, nothing to count
        if ToolPairing.starts_afresh(event):
            self.counter.reset()
        stand_ins = self._stand_ins
        return [(part, call, self.counter.record_call(
                    key, call.name, result.content, result.is_error, result.tool_use_id,
                    tool_input=call.input, move=result.move,
                    now=event_seconds(event) if self.counter.waits(call.name, call.input)
                    else None))
                for part, call, key, result in stand_ins.pairs(event)]
