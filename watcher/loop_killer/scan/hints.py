"""Whether one scope's events could hold a loop, told cheaply (pure).

The scan's first pass (``lean``) reads every line for the cost report alone; the engine
runs only on a file this says could hold a loop. So it must never miss one: each test
below is a necessary condition of a rule the engine applies, counted more coarsely than
the engine counts (a superset of what it finds).

* A re-prompt loop needs a detection, which needs a run of answers to re-prompts at least
  as long as a rule's threshold (``Thresholds.fires``). The run starts afresh at every
  turn start, and each of its answers answers a re-prompt of its own: so some stretch
  between two turn starts holds that many re-prompts (``is_reprompt``, the engine's).
* A tool-repeat loop needs ``tool_repeat_warn`` identical results of one call within a
  person's turn: so that many results of calls with one ``call_key`` (without the folder,
  whatever their outputs), paired by the engine's ``ToolPairing`` since its last fresh
  start; tools the counter ignores never count.
* An oscillating edit needs ``edit_oscillation_warn`` returns of one file within a turn,
  each one more change of it: so that many changes, plus one, by file-changing calls
  naming that file (``edited_file``).
"""

from __future__ import annotations

from collections import Counter

from ..config import Settings
from ..engine.edits import edited_file
from ..engine.pairing import ToolPairing
from ..engine.rules import RULE_IDLE, RULE_SAME
from ..engine.tool_repeat import FILE_CHANGING_TOOLS, call_key, is_ignored
from ..engine.transcript import Event, Reprompt, TurnStart

__all__ = ["LoopHints"]


class LoopHints:
    """Told one scope's events in order; ``feed`` is True from the first event after
    which the engine could find a loop in the scope. ``reprompts``: the scope is a main
    transcript's (subagents have no Stop-hook re-prompts: no re-prompt loop is looked
    for in theirs)."""

    __slots__ = ("_calls", "_edits", "_ignored", "_oscillation", "_pairing", "_reprompts",
                 "_run", "_thresholds", "_warn")

    def __init__(self, settings: Settings, *, reprompts: bool = True) -> None:
        self._thresholds = settings.thresholds
        self._reprompts = reprompts
        self._warn = settings.tool_repeat_warn
        self._ignored = settings.tool_counter().ignored
        # (at least one return: a threshold of 0 switches the shape off)
        self._oscillation = max(1, settings.edit_oscillation_warn) + 1
        self._pairing = ToolPairing()
        self._run = 0  # re-prompts since the last turn start
        self._calls: Counter[str] = Counter()  # call_key -> results in the person's turn
        self._edits: Counter[str] = Counter()  # file -> changes in the person's turn

    def feed(self, event: Event) -> bool:
        """Take the scope's next event: True when a loop could now be found."""
        if isinstance(event, Reprompt):
            if not self._reprompts:
                return False
            self._run += 1
            thresholds = self._thresholds
            return thresholds.fires(RULE_SAME, self._run) or thresholds.fires(RULE_IDLE,
                                                                               self._run)
        if isinstance(event, TurnStart):
            self._run = 0
        if not ToolPairing.may_pair(event):
            return False
        if ToolPairing.starts_afresh(event):
            self._calls.clear()
            self._edits.clear()
        for _, call, _ in self._pairing.pair(event):
            if is_ignored(call.name, self._ignored):
                continue
            key = call_key(call.name, call.input)
            self._calls[key] += 1
            if self._calls[key] >= self._warn:
                return True
            if call.name in FILE_CHANGING_TOOLS:
                path = edited_file(call.input)
                self._edits[path] += 1
                if self._edits[path] >= self._oscillation:
                    return True
        return False
