"""Tool calls paired with their results (pure); a result before its call waits for it."""

from __future__ import annotations

from typing import Any

from .transcript import AssistantPart, Event, ToolCall, ToolResult, ToolResults, TurnStart

__all__ = ["MAX_PENDING", "Paired", "ToolPairing"]

MAX_PENDING = 1000  # tool calls (and early results) waiting for their other half

Paired = tuple[AssistantPart, ToolCall, ToolResult]  # a result, its call and its reply


class ToolPairing:
    __slots__ = ("_calls", "_early")

    def __init__(self) -> None:
        self._calls: dict[str, tuple[AssistantPart, ToolCall]] = {}  # waiting for results
        self._early: dict[str, ToolResult] = {}  # results that came before their call

    @staticmethod
    def starts_afresh(event: Event) -> bool:
        """A person's prompt: every count starts afresh."""
        return isinstance(event, TurnStart) and event.kind == "prompt"

    @staticmethod
    def may_pair(event: Event) -> bool:
        """False for the events that neither pair nor start afresh (most)."""
        if isinstance(event, AssistantPart):
            return bool(event.tool_calls)
        return isinstance(event, (ToolResults, TurnStart))

    def pair(self, event: Event) -> list[Paired]:
        done: list[Paired] = []
        if isinstance(event, AssistantPart):
            for call in event.tool_calls:
                early = self._early.pop(call.tool_use_id, None)
                if early is not None:
                    done.append((event, call, early))
                else:
                    _put(self._calls, call.tool_use_id, (event, call))
        elif isinstance(event, ToolResults):
            for result in event.results:
                made = self._calls.pop(result.tool_use_id, None)
                if made is None:
                    _put(self._early, result.tool_use_id, result)
                else:
                    done.append((made[0], made[1], result))
        return done


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_PENDING:
        del table[next(iter(table))]
