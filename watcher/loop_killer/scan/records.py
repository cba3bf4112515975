"""The plain values a history scan produces: token counts, loops, one file's result (pure).
Tokens are kept per API reply (``Reply``): a reply in several files counts once (``summary``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

from ..engine.transcript import Usage, record

__all__ = ["FileResult", "Loop", "LoopKind", "ModelTokens", "Replies", "Reply", "ReplyKey",
           "Tokens", "Turn", "add_model_tokens", "by_model", "merged"]

LoopKind = Literal["reprompt", "tool"]
Tokens = Usage  # of one or more API replies, each counted once
ModelTokens = tuple[tuple[str, Tokens], ...]  # sorted by model name


def add_model_tokens(*parts: Iterable[tuple[str, Tokens]]) -> ModelTokens:
    """Tokens per model summed over several ``ModelTokens``."""
    sums: dict[str, Tokens] = {}
    for part in parts:
        for model, tokens in part:
            sums[model] = sums.get(model, Tokens()) + tokens
    return tuple(sorted(sums.items()))


ReplyKey = bytes  # a digest of (message.id, requestId): the same reply in any file


@record
class Reply:
    """One API reply's usage, as its largest copy in one file."""

    key: ReplyKey
    model: str
    usage: Tokens


Replies = tuple[Reply, ...]


def merged(*scopes: Replies) -> Replies:
    """The scopes' replies, each once (its larger copy), in order of first sight."""
    replies: dict[ReplyKey, Reply] = {}
    for scope in scopes:
        for reply in scope:
            known = replies.get(reply.key)
            if known is None or reply.usage.total > known.usage.total:
                replies[reply.key] = reply
    return tuple(replies.values())


def by_model(replies: Iterable[Reply]) -> ModelTokens:
    return add_model_tokens((reply.model, reply.usage) for reply in replies)


@record
class Loop:
    """One past loop in one file. ``replies``: answers in the run, or identical results of the
    call; ``tokens``: its API replies; ``avoidable``: those after loop-killer would have acted."""

    kind: LoopKind
    rule: str
    replies: int
    first_at: str
    last_at: str
    tokens: Replies
    avoidable: Replies
    label: str = ""

    @property
    def total_tokens(self) -> Tokens:
        return sum((reply.usage for reply in self.tokens), Tokens())

    @property
    def avoidable_tokens(self) -> Tokens:
        return sum((reply.usage for reply in self.avoidable), Tokens())


class Turn(NamedTuple):
    """One turn in one file; ``replies``: how many of the file's are its own (a named tuple:
    the cache keeps it as an array)."""

    started_at: str
    ended_at: str
    reprompts: int
    replies: int


@record
class FileResult:
    """What one transcript file held: every API reply once (its largest copy); ``cost_state``:
    the last ``cost-state`` line's total; ``skipped``: why it was not read or counted."""

    path: str
    project: str
    session_id: str
    subagent: bool = False
    loops: tuple[Loop, ...] = ()
    replies: Replies = ()
    first_at: str = ""
    last_at: str = ""
    cost_state: float | None = None
    bytes_read: int = 0
    lines: int = 0
    parsed: int = 0
    broken: int = 0
    oversized: int = 0
    skipped: str = ""
    cwd: str = ""
    turns: tuple[Turn, ...] = ()
    tail: bytes = b""  # where a next scan goes on from, if the file grows (``scan.tail``)

    @property
    def usage(self) -> ModelTokens:
        return by_model(self.replies)
