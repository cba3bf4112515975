"""Whether an answer's tool work produced something new in the person's turn (pure).

The one definition of *work* for the re-prompt rules, used by the watcher, the Stop hook
and the scan alike (through ``RunDetector``): an answer to a re-prompt breaks the run only
if at least one of its calls gave a result not already seen with that call in the
person's turn (the call keyed as the tool-repeat rule keys it, its folder included; the
result masked as that rule masks it). A refused call is not work, and neither is a call
that gave a result already seen: a ``/goal`` whose model re-runs the same failing command
in every answer is a loop, where a migration that advances, tests that fail differently
or files that change are work.

When in doubt it is work, so that nothing fires by mistake: a call whose result is not
in the transcript (yet) and not known otherwise (``settle``: the Stop hook asks the
tool-call hooks' counts), a tool that polls by design (``DEFAULT_IGNORED``, or the
person's list: the one the tool-repeat rule ignores), a result whose earlier copies fell
out of what is remembered.

Results are keyed lazily: most turns have no re-prompt, and their results are never
masked. Memory is bounded by ``MAX_KEPT`` results and ``MAX_HELD_BYTES`` of contents.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..light import hex_digest
from .masking import result_key
from .pairing import ToolPairing
from .tool_repeat import DEFAULT_IGNORED, call_key, is_ignored, is_refusal
from .transcript import AssistantPart, Event, ToolCall, ToolResult, UnreadResult

__all__ = ["MAX_HELD_BYTES", "MAX_KEPT", "TurnWork"]

MAX_KEPT = 4096
"""Results remembered per turn (keyed or waiting to be); the oldest are forgotten first."""

MAX_HELD_BYTES = 1 << 20
"""Contents of results waiting to be keyed; past this the oldest are keyed at once."""


class TurnWork:
    """The results seen in one scope's turn, and whether an answer added a new one."""

    __slots__ = ("_held", "_ignored", "_open_calls", "_pairing", "_pending", "_seen",
                 "_this_answer")

    def __init__(self, ignored: frozenset[str] = DEFAULT_IGNORED) -> None:
        self._ignored = ignored  # tools that poll by design (the settings' list)
        self._pairing = ToolPairing()
        self._seen: dict[str, None] = {}  # digests of (call, result), oldest first
        self._pending: list[tuple[ToolCall, ToolResult]] = []  # seen, not keyed yet
        self._this_answer: list[tuple[ToolCall, ToolResult]] = []  # the answer in progress
        self._open_calls: set[str] = set()  # its calls still without a result
        self._held = 0

    def feed(self, event: Event) -> None:
        """Take one transcript event (a person's prompt starts the turn afresh)."""
        if ToolPairing.starts_afresh(event):
            self._seen.clear()
            self._pending.clear()
            self._this_answer.clear()
            self._open_calls.clear()
            self._held = 0
        if not ToolPairing.may_pair(event):
            return
        if isinstance(event, AssistantPart):
            self._open_calls.update(call.tool_use_id for call in event.tool_calls)
        for _, call, result in self._pairing.pair(event):
            self._open_calls.discard(call.tool_use_id)
            if is_ignored(call.name, self._ignored):
                self._open_calls.add(call.tool_use_id)  # polling by design: always work
                continue
            self._this_answer.append((call, result))  # keyed only if a verdict needs it

    def settle(self, tool_use_ids: Iterable[str]) -> None:
        """Calls of the answer in progress whose result is not in the transcript yet, but
        known (from the tool-call hooks' counts) to have repeated one already seen: not
        work."""
        self._open_calls.difference_update(tool_use_ids)

    def close(self, *, judge: bool) -> bool | None:
        """The answer in progress is complete (or void). With ``judge``: whether its tool
        work produced something new; else None, and its results are only remembered."""
        results, self._this_answer = self._this_answer, []
        unanswered = bool(self._open_calls)
        self._open_calls = set()
        if not judge:
            for item in results:
                self._hold(item)
            return None
        self._key_pending()
        new = unanswered
        for call, result in results:
            digest = _key(call, result)
            if digest is None:
                continue  # loop-killer's own refusal: the call did not run
            if digest not in self._seen:
                new = True
            self._remember(digest)
        return new

    def _hold(self, item: tuple[ToolCall, ToolResult]) -> None:
        self._pending.append(item)
        self._held += _size(item[1].content)
        while self._pending and (self._held > MAX_HELD_BYTES
                                 or len(self._pending) > MAX_KEPT):
            self._key_oldest()

    def _key_oldest(self) -> None:
        call, result = self._pending.pop(0)
        self._held -= _size(result.content)
        digest = _key(call, result)
        if digest is not None:
            self._remember(digest)

    def _key_pending(self) -> None:
        for call, result in self._pending:
            digest = _key(call, result)
            if digest is not None:
                self._remember(digest)
        self._pending.clear()
        self._held = 0

    def _remember(self, digest: str) -> None:
        self._seen.pop(digest, None)
        self._seen[digest] = None
        if len(self._seen) > MAX_KEPT:
            del self._seen[next(iter(self._seen))]


def _key(call: ToolCall, result: ToolResult) -> str | None:
    """The digest of a call (in its folder) with its masked result; None for a refusal
    (nothing ran)."""
    content, is_error = result.content, result.is_error
    if isinstance(content, UnreadResult):
        content, is_error = content.read()
    if is_refusal(content, is_error=is_error):
        return None
    keyed = call_key(call.name, call.input, result.cwd)
    return hex_digest(f"{keyed}\x00{result_key(content, is_error=is_error)}", 24)


def _size(content: Any) -> int:
    if isinstance(content, UnreadResult):
        return content.size
    return len(content) if isinstance(content, str) else 256
