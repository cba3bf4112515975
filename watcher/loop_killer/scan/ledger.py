"""The token usage of one scope's API replies, each counted once (pure): Claude Code repeats a
reply's ``usage`` on each of its lines, and may write the reply again. A reply is its
``message.id`` and ``requestId``; of its copies the largest is kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..engine.transcript import AssistantPart
from ..light import digest
from .records import ModelTokens, Replies, Reply, ReplyKey, Tokens, by_model

__all__ = ["MAX_OPEN", "UsageLedger", "reply_key"]

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
        return self.count(part.message_id, request_id, part.usage, part.model,
                          part.timestamp)

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

    def tokens_of(self, message_ids: Iterable[str]) -> ModelTokens:
        """The tokens of these replies per model, each counted once."""
        return by_model(self.replies_of(message_ids))

    def end_turn(self) -> None:
        """The person spoke: no loop can reach back past this point."""
        for requests in self._open.values():
            self._fold(requests)
        self._open.clear()

    def replies(self) -> Replies:
        """Every reply folded so far, each once (``end_turn`` first for all)."""
        return tuple(self._kept.values())

    def totals(self) -> ModelTokens:
        """``replies`` per model."""
        return by_model(self._kept.values())

    def _fold(self, requests: dict[str, Reply]) -> None:
        self.folds += 1
        kept = self._kept
        for reply in requests.values():
            known = kept.get(reply.key)
            kept[reply.key] = reply if known is None else _larger(known, reply.usage,
                                                                   reply.model)
