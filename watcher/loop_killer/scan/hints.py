"""Which turns of one scope could hold a loop, told cheaply (pure): the engine reads only those,
so each test is a necessary condition of an engine rule, counted coarsely."""
from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from ..engine.calls import call_key, is_ignored
from ..engine.edits import FILE_CHANGING_TOOLS, edited_file
from ..engine.pairing import MAX_PENDING, ToolPairing
from ..engine.rules import RULE_IDLE, RULE_SAME
from ..engine.transcript import AssistantPart, Event, Reprompt, ToolResults, TurnStart
from ..state.config import Settings

__all__ = ["LoopHints", "Segment"]

Segment = tuple[int, "int | None"]  # from a prompt's line to a later one's, or the end


class LoopHints:
    """Told one scope's lines in order: where the engine must read (``segments``). Starting at
    a prompt, it judges as from the top unless something crosses it (*unsafe*): a call and
    result paired across it, too many unpaired, or a later line of a reply from before it."""

    __slots__ = ("_calls", "_crossings", "_crowded", "_early", "_edits", "_flagged",
                 "_ignored", "_ignored_names", "_message_ids", "_oscillation", "_pending",
                 "_reprompts", "_run", "_starts", "_thresholds", "_turn_ids", "_unsafe",
                 "_waiting", "_warn")

    def __init__(self, settings: Settings, *, reprompts: bool = True) -> None:
        self._thresholds, self._reprompts = settings.thresholds, reprompts
        self._warn, self._ignored = settings.tool_repeat_warn, settings.tool_counter().ignored
        # (at least one return: a threshold of 0 switches the shape off)
        self._oscillation = max(1, settings.edit_oscillation_warn) + 1
        self._waiting: dict[str, tuple[int, str, Any]] = {}  # call id -> turn, name, input
        self._early: dict[str, int] = {}  # result id -> its turn (before its call)
        self._run = 0  # re-prompts since the last turn start
        self._calls: Counter[str] = Counter()  # call_key -> results in the person's turn
        self._edits: Counter[str] = Counter()  # file -> changes in the person's turn
        self._starts = [0]  # where each turn starts (turn 0: the file's start)
        self._flagged: list[int] = []  # turns that could hold a loop
        self._unsafe: set[int] = set()  # turns the engine cannot start at
        self._crossings: list[tuple[int, int]] = []  # (turn stored, turn paired) of pairs
        self._pending = 0  # calls and results stored unpaired (at most)
        self._crowded = False  # so many that the pairing may have forgotten some
        self._message_ids: set[str] = set()  # of the replies before this turn
        self._turn_ids: set[str] = set()  # of this turn's
        self._ignored_names: dict[str, bool] = {}  # tool name -> not counted

    def feed(self, event: Event, offset: int) -> None:
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
        turn = len(self._starts) - 1
        self._stored(len(tool_use_ids))
        for tool_use_id in tool_use_ids:
            made = self._waiting.pop(tool_use_id, None)
            if made is None:
                _put(self._early, tool_use_id, turn)
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
        if isinstance(tool_input, msgspec.Raw):  # (the first pass decodes it only now)
            tool_input = msgspec.json.decode(tool_input)
        key = call_key(name, tool_input)
        self._calls[key] += 1
        flag = self._calls[key] >= self._warn
        if name in FILE_CHANGING_TOOLS:
            path = edited_file(tool_input)
            self._edits[path] += 1
            flag = flag or self._edits[path] >= self._oscillation
        if flag:
            self._flag(turn)

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
