"""Tool results made cheap to count, without changing a single count (the watcher, scan): a
short stand-in per result, the previous one's when equal (only a change needs masking)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..light import digest
from .calls import ANSWERED_BY_PERSON, call_key, is_ignored, is_refusal
from .edits import FILE_CHANGING_TOOLS
from .masking import result_key
from .pairing import ToolPairing
from .tool_repeat import MAX_CALLS, ToolRepeat, ToolRepeatCounter
from .transcript import AssistantPart, Event, ToolCall, ToolResult, UnreadResult
from .waiting import waits

__all__ = ["MAX_HELD_BYTES", "StandIns", "ToolCounts", "held_size"]

MAX_HELD_BYTES = 32 << 20  # contents kept for comparison; beyond, the oldest give way
_MAX_LAST = 8 * MAX_CALLS  # calls remembered (the counter forgets long before: safe)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass(slots=True)
class _Last:
    """A call's previous result: its content (until keyed), its key, and its stand-in."""

    content: Any
    is_error: bool
    key: str | None
    token: str
    size: int


def held_size(content: Any) -> int:
    """Roughly the bytes a result's content holds in memory."""
    if isinstance(content, UnreadResult):
        return content.size
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(block.get("text", "")) + 64 if isinstance(block, dict)
                   and isinstance(block.get("text"), str) else 256 for block in content)
    return 256


class StandIns:
    __slots__ = ("_held", "_ignored", "_ignored_names", "_last", "_pairing", "_tokens", "max_held")

    def __init__(self, ignored: frozenset[str], *, max_held: int | None = None) -> None:
        self._ignored = ignored
        self.max_held = MAX_HELD_BYTES if max_held is None else max_held
        self._ignored_names: dict[str, bool] = {}  # tool name -> ignored (names are few)
        self._pairing = ToolPairing()
        self._last: dict[bytes, _Last] = {}  # call digest -> its previous result
        self._held = 0  # bytes of contents kept in ``_last``
        self._tokens = 0

    def pairs(self, event: Event, waiting: Callable[[str, object], bool] = waits
              ) -> list[tuple[AssistantPart, ToolCall, str, ToolResult]]:
        """The results ``event`` completes, each with its call, ``call_key`` and stand-in."""
        if self._pairing.starts_afresh(event):
            self._last.clear()  # the counter starts afresh: so do the comparisons
            self._held = 0
        paired: list[tuple[AssistantPart, ToolCall, str, ToolResult]] = []
        for part, call, result in self._pairing.pair(event):
            key = call_key(call.name, call.input, result.cwd)
            paired.append((part, call, key, self._stand_in(
                call.name, key, result, waiting=waiting(call.name, call.input))))
        return paired

    def _stand_in(self, name: str, call_text: str, result: ToolResult, *, waiting: bool
                  ) -> ToolResult:
        ignored = self._ignored_names.get(name)
        if ignored is None:
            ignored = self._ignored_names[name] = is_ignored(name, self._ignored)
        if ignored:
            return result  # (the counter never looks at these)
        if name in ANSWERED_BY_PERSON or name in FILE_CHANGING_TOOLS:  # (the counter reads)
            if isinstance(result.content, UnreadResult):
                content, is_error = result.content.read()
                return ToolResult(result.tool_use_id, content, is_error, result.cwd,
                                  result.content.read_move())
            return result
        call = digest(call_text.encode("utf-8", "surrogatepass"))
        last = self._last.get(call)
        content, is_error = result.content, result.is_error
        if isinstance(content, UnreadResult):
            if last is None and not waiting:
                # Compared with nothing yet: unread (were it our refusal, counting 1 changes
                # nothing). Read for a wait: as refused, it neither waited nor made one wait.
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
        return self._keep(call, _Last(content, is_error, key, token, held_size(content)), result)

    def _keep(self, call: bytes, last: _Last, result: ToolResult) -> ToolResult:
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

    def _trim(self) -> None:  # (the oldest contents give way to their keys: still exact)
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
    """A ``ToolRepeatCounter`` fed through ``StandIns``: the same counts as fed directly."""

    __slots__ = ("_stand_ins", "counter")

    def __init__(self, counter: ToolRepeatCounter, *, max_held: int | None = None) -> None:
        self.counter = counter
        self._stand_ins = StandIns(counter.ignored, max_held=max_held)

    def feed(self, event: Event) -> list[ToolRepeat]:
        return [repeat for _, _, repeat in self.feed_paired(event)]

    def feed_paired(self, event: Event) -> list[tuple[AssistantPart, ToolCall, ToolRepeat]]:
        """``feed``, each count with its call and the reply that made the call."""
        if not ToolPairing.may_pair(event):
            return []  # most lines: text or thinking, nothing to count
        # (a result the counter takes for a wait, itself or after one, is read at once)
        return self.counter.feed_pairs(event, self._stand_ins.pairs(event, self.counter.waits))
