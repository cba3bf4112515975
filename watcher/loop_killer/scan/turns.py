"""One file's turns as its events arrive, for the budget (pure). A person's prompt starts a
turn; a reply goes to the first turn that holds it; the file's replies are kept in its turns'
order, so a turn names its own by their count.
"""

from __future__ import annotations

from bisect import bisect_right

from ..engine.transcript import AssistantPart, Reprompt, TurnStart
from .ledger import UsageLedger
from .records import Replies, Reply, ReplyKey, Turn

__all__ = ["TurnTally"]


class _Open:
    __slots__ = ("ended_at", "keys", "reprompts", "started_at")

    def __init__(self, started_at: str) -> None:
        self.started_at = self.ended_at = started_at
        self.reprompts = 0
        self.keys: list[ReplyKey] = []


class TurnTally:
    """A file's turns; ``aside``: a reply of an inline subagent line (1.0.x), placed by its
    time at the end (the engine reads those lines ahead of the others)."""

    __slots__ = ("_aside", "_current", "_seen", "_turns")

    def __init__(self) -> None:
        self._turns: list[_Open] = []
        self._current: _Open | None = None
        self._seen: set[ReplyKey] = set()
        self._aside: list[tuple[str, ReplyKey]] = []

    def prompt(self, timestamp: str) -> None:
        self._current = _Open(timestamp)
        self._turns.append(self._current)

    def reprompt(self, timestamp: str) -> None:
        turn = self._turn(timestamp)
        turn.reprompts += 1
        if timestamp > turn.ended_at:
            turn.ended_at = timestamp

    def reply(self, key: ReplyKey, timestamp: str) -> None:
        """A line of the reply ``key`` (the last one's time ends the turn)."""
        turn = self._current or self._turn(timestamp)
        seen = self._seen
        if key not in seen:
            seen.add(key)
            turn.keys.append(key)
        if timestamp > turn.ended_at:
            turn.ended_at = timestamp

    def aside(self, key: ReplyKey, timestamp: str) -> None:
        self._aside.append((timestamp, key))

    def take(self, event: object, ledger: UsageLedger, request: str = "", *,
             inline: bool = False) -> None:
        """A reply's usage into ``ledger`` and its turn, or a re-prompt."""
        if isinstance(event, AssistantPart):
            key = ledger.add(event, request)
            if key is not None:
                (self.aside if inline else self.reply)(key, event.timestamp)
        elif isinstance(event, Reprompt) and not inline:
            self.reprompt(event.timestamp)

    def close(self, event: object, ledger: UsageLedger, *, inline: bool = False) -> None:
        """After ``take`` and the loops: a person's prompt ends the turn."""
        if isinstance(event, TurnStart) and event.kind == "prompt":
            ledger.end_turn()
            if not inline:
                self.prompt(event.timestamp)

    def _turn(self, timestamp: str) -> _Open:
        turn = self._current
        if turn is None:  # (lines before the file's first prompt)
            turn = self._current = _Open(timestamp)
            self._turns.append(turn)
        return turn

    def finish(self, replies: Replies) -> tuple[Replies, tuple[Turn, ...]]:
        """The file's replies in its turns' order, and the turns holding a reply or a re-prompt."""
        if self._aside:
            self._place_asides()
        if not self._turns:
            return replies, ()
        if len(self._turns) == 1 and self._turns[0].keys:  # (every reply is its own)
            turn = self._turns[0]
            return replies, (Turn(turn.started_at, turn.ended_at, turn.reprompts,
                                  len(replies)),)
        by_key = {reply.key: reply for reply in replies}
        ordered: list[Reply] = []
        turns = []
        for turn in self._turns:
            if turn.keys or turn.reprompts:
                before = len(ordered)
                ordered.extend(by_key[key] for key in turn.keys if key in by_key)
                turns.append(Turn(turn.started_at, turn.ended_at, turn.reprompts,
                                  len(ordered) - before))
        if len(ordered) < len(replies):  # (every reply is told: none is lost if not)
            told = {reply.key for reply in ordered}
            ordered.extend(reply for reply in replies if reply.key not in told)
        return tuple(ordered), tuple(turns)

    def _place_asides(self) -> None:
        """Each inline subagent reply in the last turn begun by its time (else the first)."""
        if not self._turns:
            self._turn(self._aside[0][0])
        starts = [turn.started_at for turn in self._turns]
        for timestamp, key in self._aside:
            if key not in self._seen:
                self._seen.add(key)
                turn = self._turns[max(0, bisect_right(starts, timestamp) - 1)]
                turn.keys.append(key)
                if timestamp > turn.ended_at:
                    turn.ended_at = timestamp
        self._aside.clear()
