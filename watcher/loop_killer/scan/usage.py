"""A live session's token usage and cost, from its transcript's bytes as they are written,
each API reply once (as ``scan`` counts): ``top`` and the metrics."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ..engine.prefilter import skim_span
from ..engine.reader import EventReader
from ..engine.transcript import AssistantPart, TurnStart, parse_timestamp
from .ledger import UsageLedger
from .prices import PriceTable
from .records import ModelTokens, Replies, add_model_tokens, by_model

__all__ = ["Spent", "UsageTally", "read_new_bytes", "reply_tokens"]


@dataclass(frozen=True, slots=True)
class Spent:
    """Tokens (all kinds together) and their estimated cost in USD."""

    tokens: int = 0
    usd: float = 0.0


class UsageTally:
    """Token usage of one transcript fed in any chunks: the person's current turn, and all."""

    __slots__ = ("_earlier", "_ledger", "_reader", "_turn")

    def __init__(self, *, offset: int = 0) -> None:
        self._reader = EventReader(offset=offset, parse=skim_span)
        self._ledger = UsageLedger()
        self._turn: dict[str, None] = {}  # the current turn's reply ids, oldest first
        # (the ledger's folds, the prices, the sum) of the earlier turns' replies
        self._earlier: tuple[int, PriceTable, Spent] | None = None

    @property
    def offset(self) -> int:
        """Where the next byte to feed sits in the file."""
        return self._reader.offset + self._reader.pending_bytes

    def feed(self, chunk: bytes) -> None:
        for line in self._reader.feed(chunk):
            event = line.event
            if isinstance(event, AssistantPart):
                self._ledger.add(event)
                if event.usage is not None:
                    self._turn[event.message_id] = None
            elif isinstance(event, TurnStart) and event.kind == "prompt":
                self._ledger.end_turn()  # the person spoke: a new turn
                self._turn.clear()

    def turn(self) -> ModelTokens:
        return by_model(self._ledger.replies_of(self._turn))

    def session(self) -> ModelTokens:
        return add_model_tokens(by_model(self._ledger.replies()), self.turn())

    def last_replies(self, count: int) -> tuple[int, Replies]:
        """How many of the turn's last ``count`` replies there are, and they."""
        ids = list(self._turn)[-count:] if count > 0 else []
        return len(ids), self._ledger.replies_of(ids)

    def spent(self, prices: PriceTable) -> tuple[Spent, Spent]:
        """(the current turn, the whole session), each reply priced as billed."""
        turn = _priced(self._ledger.replies_of(self._turn), prices)
        earlier = self._earlier
        if earlier is None or earlier[0] != self._ledger.folds or earlier[1] is not prices:
            # (the earlier turns change only when the person speaks)
            earlier = self._earlier = (self._ledger.folds, prices,
                                       _priced(self._ledger.replies(), prices))
        folded = earlier[2]
        return turn, Spent(folded.tokens + turn.tokens, folded.usd + turn.usd)


def _priced(replies: Replies, prices: PriceTable) -> Spent:
    return Spent(sum(reply.usage.total for reply in replies),
                 sum(prices.reply_cost(reply.model, reply.usage)[0] for reply in replies))


def read_new_bytes(path: str, offset: int, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of the file from ``offset``, and its size now (below ``offset``:
    rewritten). Never follows a link or blocks; raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if info.st_size <= offset:
            return b"", info.st_size
        return os.pread(fd, min(limit, info.st_size - offset), offset), info.st_size
    finally:
        os.close(fd)


_TAIL_BYTES = 2 * 1024 * 1024


def reply_tokens(path: str, replies: int, *, tail: int = _TAIL_BYTES,
                 until: float | None = None) -> float:
    """The mean tokens of the last ``replies`` API replies in the last ``tail`` bytes of the
    transcript at ``path``, written by ``until`` (epoch seconds); 0.0 when none can be read."""
    try:
        size = os.stat(path, follow_symlinks=False).st_size
        start = max(0, size - tail)
        data, _ = read_new_bytes(path, start, tail)
    except OSError:
        return 0.0
    if start > 0:
        cut = data.find(b"\n")
        data, start = (data[cut + 1:], start + cut + 1) if cut >= 0 else (b"", size)
    if until is not None:
        data = data[:_written_by(data, until)]
    tally = UsageTally(offset=start)
    tally.feed(data)
    found, last = tally.last_replies(replies)
    return sum(reply.usage.total for reply in last) / found if found else 0.0


_STAMP = b'"timestamp":"'


def _written_by(data: bytes, until: float) -> int:
    """Where the first line stamped after ``until`` starts in ``data`` (else its length)."""
    at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end + 1
        found = data.find(_STAMP, at, end)
        if found >= 0:
            close = data.find(b'"', found + len(_STAMP), end)
            moment = parse_timestamp(data[found + len(_STAMP):close].decode(
                "ascii", "replace")) if close > 0 else None
            if moment is not None and moment > until:
                return at
        at = end
    return len(data)
