"""The plain values a history scan produces: token counts, loops, one file's result (pure).

Tokens are kept per API reply (``Reply``) so that a reply in several files is counted,
and priced, once (``summary``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from ..engine.transcript import Usage, record

__all__ = [
    "FileResult",
    "Loop",
    "LoopKind",
    "ModelTokens",
    "Replies",
    "Reply",
    "ReplyKey",
    "Tokens",
    "Turn",
    "add_model_tokens",
    "by_model",
    "merged",
    "sum_tokens",
]

LoopKind = Literal["reprompt", "tool"]
"""``reprompt``: a run of answers to Stop-hook re-prompts with no tool work that reached a
re-prompt rule; ``tool``: a call that gave the same result TOOL_REPEAT_WARN times or more."""


Tokens = Usage
"""Token counts of one or more API replies (each reply counted once): the engine's."""


ModelTokens = tuple[tuple[str, Tokens], ...]
"""Tokens per model name (as written in the transcript), sorted by model name."""


def add_model_tokens(*parts: Iterable[tuple[str, Tokens]]) -> ModelTokens:
    """Sum tokens per model over several ``ModelTokens`` (or (model, tokens) pairs)."""
    sums: dict[str, Tokens] = {}
    for part in parts:
        for model, tokens in part:
            sums[model] = sums.get(model, Tokens()) + tokens
    return tuple(sorted(sums.items()))


def sum_tokens(by_model: Iterable[tuple[str, Tokens]]) -> Tokens:
    """All models' tokens together."""
    total = Tokens()
    for _, tokens in by_model:
        total = total + tokens
    return total


ReplyKey = bytes
"""A digest of a reply's (``message.id``, ``requestId``): the same reply in any file."""


@record
class Reply:
    """One API reply's usage, as its largest copy in one file."""

    key: ReplyKey
    model: str
    usage: Tokens

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as one flat tuple (the scan's workers send every reply they read):
        # half the bytes and time of the dataclasses' own.
        usage = self.usage
        return _reply, (self.key, self.model, usage.input, usage.output, usage.cache_read,
                        usage.cache_creation, usage.cache_creation_1h, usage.speed,
                        usage.inference_geo)


def _reply(key: ReplyKey, model: str, *usage: Any) -> Reply:
    return Reply(key, model, Tokens(*usage))


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
    """The replies' tokens per model."""
    return add_model_tokens((reply.model, reply.usage) for reply in replies)


@record
class Loop:
    """One past loop in one file. ``replies``: answers in the re-prompt run, or identical
    results of the call; ``tokens``: its API replies (each once); ``avoidable``: those after
    loop-killer would first have acted; ``label``: a few words on what looped (cleaned)."""

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
        return sum_tokens(by_model(self.tokens))

    @property
    def avoidable_tokens(self) -> Tokens:
        return sum_tokens(by_model(self.avoidable))


class Turn(NamedTuple):
    """One turn in one file, from a person's prompt (a subagent's: a prompt it was given)
    to the next: its first and last times, its re-prompts, and how many of the file's
    ``replies`` (kept in turns' order) are its own: the budget's figures. (A named tuple: the
    cache keeps it as an array, smaller and quicker to read.)"""

    started_at: str
    ended_at: str
    reprompts: int
    replies: int


@record
class FileResult:
    """What one transcript file held. ``session_id``: a subagent file's parent session, when
    known; ``replies``: every API reply, once (its largest copy); ``first_at``/``last_at``:
    their earliest and latest times (which file a copied reply belongs to); ``cost_state``:
    the last ``cost-state`` line's ``totalCostUSD``; ``skipped``: why the file was not read
    (``link``, ``not_regular``, ``unreadable``) or not counted (``project_off``);
    ``lines``/``parsed``/``broken``: lines seen, parsed, and bad (not JSON objects); ``cwd``:
    the session's real path (the first line's that gives one: is its project off?);
    ``turns``: those holding a reply or a re-prompt, in the order of ``replies``."""

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

    @property
    def usage(self) -> ModelTokens:
        """The file's replies' tokens per model."""
        return by_model(self.replies)
