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
    """One past loop found in one transcript file.

    ``replies``: answers in the re-prompt run, or identical results of the tool call.
    ``tokens``: the loop's API replies (each once); ``avoidable``: those of them spent
    after the reply at which loop-killer would first have acted (stopped the turn, or
    warned the model). ``label``: a few words on what looped, for people (the tool call,
    or the first looping answer), never shown unclean.
    """

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
    """One turn in one file: from a person's prompt to the next (in a subagent's file,
    from a prompt it was given: its spend goes to its parent's turn at that moment).

    ``started_at``: the prompt's time (before a file's first prompt, its first reply's or
    re-prompt's); ``ended_at``: its last reply's or re-prompt's; ``reprompts``: the
    Stop-hook re-prompts in it; ``replies``: how many of the file's ``replies`` are its
    own, the next ones after the turns before it's (the file's replies are in its turns'
    order; each reply in the first turn that holds it). The budget's figures
    (``engine.budget``), read in the first pass with the usage. (A named tuple: kept
    in the cache as an array, 53 bytes a turn against a record's map's 91, and read in
    60 % of its time.)"""

    started_at: str
    ended_at: str
    reprompts: int
    replies: int


@record
class FileResult:
    """What one transcript file held.

    ``session_id``: the session it belongs to (a subagent's file: its parent session, when
    known). ``subagent``: the file is a subagent's (scanned for tool-repeat loops only).
    ``replies``: every API reply in the file, counted once (its largest copy);
    ``first_at`` / ``last_at``: the earliest and latest of their times (which file a reply
    copied into another belongs to: the original began first, or ended first);
    ``cost_state``: the last ``cost-state`` line's ``totalCostUSD`` (Claude Code
    2.1.33x), if any. ``skipped``: why the file was not read (``link``, ``not_regular``,
    ``unreadable``) or not counted (``project_off``), empty when it was. ``lines`` /
    ``parsed`` / ``broken``: lines seen, lines handed to the engine's parser, and bad
    lines: not valid JSON objects among those parsed, and lines that do not even start
    like one (a line that does, but holds no conversation marker, is skipped unparsed and
    uncounted). ``cwd``: the session's real path, from the first line that gives one (""
    when none does): whether its project is switched off is asked with it
    (``Settings.project_off``). ``turns``: the file's turns that hold a reply or a
    re-prompt (``Turn``), in the order of ``replies``.
    """

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
