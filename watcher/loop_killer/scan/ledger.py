"""The token usage of one scope's API replies, each counted once (a reply is its ``message.id``
and ``requestId``; of its copies the largest is kept), and a file's turns, for the budget (pure)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from ..engine.transcript import AssistantPart, Reprompt, TurnStart
from ..light import digest
from .records import Replies, Reply, ReplyKey, Tokens, Turn

__all__ = ["MAX_OPEN", "TurnTally", "UsageLedger", "reply_key"]

MAX_OPEN = 20_000  # replies kept by id in one turn; beyond, the oldest are folded


def reply_key(message_id: str, request_id: str) -> ReplyKey:
    return digest(f"{message_id}\0{request_id}".encode("utf-8", "surrogatepass"))


def _larger(known: Reply, usage: Tokens, model: str) -> Reply:
    if usage.total > known.usage.total:
        return Reply(known.key, known.model or model, usage)
    return known


class UsageLedger:
    """The current turn's replies by message id (the loops ask for theirs), and every reply."""

    __slots__ = ("_kept", "_open", "first_at", "folds", "last_at")

    def __init__(self) -> None:
        self._open: dict[str, dict[str, Reply]] = {}  # message id -> request id -> reply
        self._kept: dict[ReplyKey, Reply] = {}
        self.folds = 0  # how many times replies were folded into the kept ones
        self.first_at = self.last_at = ""  # of the replies seen

    def add(self, part: AssistantPart, request_id: str = "") -> ReplyKey | None:
        """Take one assistant line's usage: the reply's key (None: no usage)."""
        if part.usage is None:
            return None
        return self.count(part.message_id, request_id, part.usage, part.model, part.timestamp)

    def count(self, message_id: str, request_id: str, usage: Tokens, model: str,
              when: str) -> ReplyKey:
        """``add`` of a reply line's fields: its reply's key."""
        self.saw(when)
        requests = self._open.get(message_id)
        if requests is None:
            requests = self._open[message_id] = {}
            if len(self._open) > MAX_OPEN:
                oldest = next(iter(self._open))
                self._fold(self._open.pop(oldest))
        known = requests.get(request_id)
        if known is None:
            key = reply_key(message_id, request_id)
            requests[request_id] = Reply(key, model, usage)
            return key
        requests[request_id] = _larger(known, usage, model)
        return known.key

    def saw(self, when: str) -> None:
        if when and (not self.first_at or when < self.first_at):
            self.first_at = when
        if when > self.last_at:
            self.last_at = when

    def replies_of(self, message_ids: Iterable[str]) -> Replies:
        """These replies of the current turn, each once."""
        seen: set[str] = set()
        found: list[Reply] = []
        for message_id in message_ids:
            if message_id in seen:
                continue
            seen.add(message_id)
            found.extend(self._open.get(message_id, {}).values())
        return tuple(found)

    def end_turn(self) -> None:
        """The person spoke: no loop can reach back past this point."""
        for requests in self._open.values():
            self._fold(requests)
        self._open.clear()

    def replies(self) -> Replies:
        """Every reply folded so far, each once (``end_turn`` first for all)."""
        return tuple(self._kept.values())

    def _fold(self, requests: dict[str, Reply]) -> None:
        self.folds += 1
        kept = self._kept
        for reply in requests.values():
            known = kept.get(reply.key)
            kept[reply.key] = reply if known is None else _larger(known, reply.usage, reply.model)


class _Open:
    __slots__ = ("ended_at", "keys", "reprompts", "started_at")

    def __init__(self, started_at: str) -> None:
        self.started_at = self.ended_at = started_at
        self.reprompts = 0
        self.keys: list[ReplyKey] = []


class TurnTally:
    """A file's turns; ``aside``: an inline subagent reply (1.0.x), placed by time at the end."""

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
            return replies, (Turn(turn.started_at, turn.ended_at, turn.reprompts, len(replies)),)
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
