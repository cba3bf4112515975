"""Each live turn's budget (BUDGET, ``engine.budget``), kept as the watcher reads lines, each
reply priced as ``scan`` prices it. Crossed, the ``Responder`` asks a stop; at ``WARN_AT`` the
person is told once per turn."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ..engine.budget import LIMIT_USD, Crossing, TurnSpend, TurnUse, crossed, figures, nearing
from ..engine.prefilter import KEEP, sort_line
from ..engine.reader import EventReader
from ..engine.rules import RULE_BUDGET, text_digest
from ..engine.transcript import (
    AssistantPart,
    Event,
    ParseStats,
    Reprompt,
    TurnStart,
    parse_line,
    parse_timestamp,
)
from ..scan.prices import PriceTable
from ..scan.usage import read_new_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..engine.budget import Budget
    from .respond import Responder
    from .tracked import Tracked

__all__ = ["Budgets"]

log = logging.getLogger("loop_killer.watch")

_READ_LIMIT = 8 * 1024 * 1024  # most bytes read from one subagent file in one go
_CLOCK_MARGIN = 2.0


def _subagent_line(buffer: bytes, start: int, end: int, stats: ParseStats | None = None
                   ) -> Event | None:
    """A subagent's line (``isSidechain``) read as its own file's conversation."""
    if sort_line(buffer, start, end) < KEEP:
        return None
    return parse_line(buffer[start:end], stats, subagent=True)


class Budgets:
    """Every live turn's figures, by main transcript path; all calls from one thread."""

    def __init__(self, budget: Budget, *, prices: PriceTable | None = None) -> None:
        self.budget = budget
        self.prices = prices if prices is not None else PriceTable()
        self.turns: dict[str, TurnSpend] = {}
        self.subagents: dict[str, dict[str, EventReader]] = {}  # path -> file -> reader

    def feed(self, path: str, event: Event | None) -> None:
        if isinstance(event, TurnStart):
            if event.kind == "prompt":  # the person spoke: a new turn
                self.turns[path] = TurnSpend(parse_timestamp(event.timestamp))
            return
        turn = self.turns.get(path)
        if turn is None:
            return  # no turn begun in what was read (a tail from a run's middle)
        if isinstance(event, Reprompt):
            turn.reprompts += 1
        elif isinstance(event, AssistantPart):
            self._reply(turn, event)

    def _reply(self, turn: TurnSpend, part: AssistantPart) -> None:
        if part.usage is None:
            return
        usd, how = self.prices.reply_cost(part.model, part.usage)
        turn.reply(part.message_id or part.uuid, usd, fallback=how == "fallback")

    def read_subagents(self, path: str, session_id: str) -> None:
        """Count the new replies of the session's subagents in its current turn."""
        turn = self.turns.get(path)
        if turn is None:
            return
        folder = os.path.join(os.path.dirname(path), session_id, "subagents")
        try:
            with os.scandir(folder) as entries:
                names = [entry.path for entry in entries if entry.name.endswith(".jsonl")
                         and entry.is_file(follow_symlinks=False)]
        except OSError:
            return
        known = self.subagents.setdefault(path, {})
        for name in names:
            reader = known.get(name)
            if reader is None:
                reader = known[name] = EventReader(offset=self._start(name, turn),
                                                   parse=_subagent_line)
            offset = reader.offset + reader.pending_bytes
            try:
                data, size = read_new_bytes(name, offset, _READ_LIMIT)
            except OSError:
                continue
            if size < offset:  # rewritten: read again from its start
                known[name] = EventReader(parse=_subagent_line)
                continue
            for line in reader.feed(data):
                if isinstance(line.event, AssistantPart):
                    self._reply(turn, line.event)

    @staticmethod
    def _start(name: str, turn: TurnSpend) -> int:
        try:
            info = os.stat(name, follow_symlinks=False)
        except OSError:
            return 0
        begun = turn.started_at
        # (a margin for a coarse file clock: a file written with the prompt is the turn's)
        old = begun is not None and info.st_mtime < begun - _CLOCK_MARGIN
        return info.st_size if old else 0

    def forget(self, path: str) -> None:
        self.turns.pop(path, None)
        self.subagents.pop(path, None)

    def use(self, path: str, *, goal: bool) -> TurnUse | None:
        turn = self.turns.get(path)
        return None if turn is None else turn.use(goal=goal)

    def check(self, path: str, now: float, *, goal: bool,
              warn: Callable[[Crossing], None]) -> Crossing | None:
        """The spend limit crossed, once a turn; ``warn`` once per limit and turn near it."""
        turn = self.turns.get(path)
        if turn is None or not self.budget.any_on:
            return None
        use = turn.use(goal=goal)
        for near in nearing(self.budget, use, now):
            if near.limit not in turn.warned:
                turn.warned.add(near.limit)
                warn(near)
        crossing = crossed(self.budget, use, now, (LIMIT_USD,))
        if crossing is None or turn.stopped:
            return None
        turn.stopped = True
        turn.warned.add(LIMIT_USD)
        return crossing

    def judge(self, tracked: Tracked, now: float, respond: Responder) -> dict[str, object] | None:
        """Check the turn's spend (``respond`` asks a stop, warns); its status figures."""
        if tracked.off or not self.budget.any_on:
            return None
        self.read_subagents(tracked.path, tracked.session_id)
        goal = tracked.detector.goal if tracked.detector is not None else None
        goal_set = goal is not None and not goal.met  # (neither met nor cleared)
        crossing = self.check(tracked.path, now, goal=goal_set, warn=lambda near: (
            respond.warn_limit(tracked, RULE_BUDGET, near.words, "near its budget")))
        if crossing is not None:
            turn = self.turns[tracked.path]
            key = "budget-" + text_digest(f"{tracked.path}:{turn.started_at}:usd")
            respond.on_limit(tracked, RULE_BUDGET, crossing.count, crossing.words, key, now)
        use = self.use(tracked.path, goal=goal_set)
        return None if use is None else figures(self.budget, use)
