"""The plain values a history scan produces: token counts, loops, and one file's result.

Pure records (frozen dataclasses) and small functions over them; no I/O. Token counts
are kept per model so that prices are applied later, in one place (``prices``), after
the files were read on other cores.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..engine.transcript import Usage

__all__ = [
    "FileResult",
    "Loop",
    "LoopKind",
    "ModelTokens",
    "Tokens",
    "add_model_tokens",
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


@dataclass(frozen=True, slots=True)
class Loop:
    """One past loop found in one transcript file.

    ``replies``: answers in the re-prompt run, or identical results of the tool call.
    ``tokens``: what the loop's API replies used, per model; ``avoidable``: the part of it
    spent after the reply at which loop-killer would first have acted (stopped the turn,
    or warned the model). ``label``: a few words on what looped, for people (the tool call,
    or the first looping answer), never shown unclean.
    """

    kind: LoopKind
    rule: str
    replies: int
    first_at: str
    last_at: str
    tokens: ModelTokens
    avoidable: ModelTokens
    label: str = ""

    @property
    def total_tokens(self) -> Tokens:
        return sum_tokens(self.tokens)

    @property
    def avoidable_tokens(self) -> Tokens:
        return sum_tokens(self.avoidable)


@dataclass(frozen=True, slots=True)
class FileResult:
    """What one transcript file held.

    ``session_id``: the session it belongs to (a subagent's file: its parent session, when
    known). ``subagent``: the file is a subagent's (scanned for tool-repeat loops only).
    ``usage``: every API reply in the file, counted once, per model (for the session's own
    total); ``cost_state``: the last ``cost-state`` line's ``totalCostUSD`` (Claude Code
    2.1.33x), if any. ``skipped``: why the file was not read (``link``, ``not_regular``,
    ``unreadable``), empty when it was. ``lines`` / ``parsed`` / ``broken``: lines seen,
    lines handed to the engine's parser, and bad lines: not valid JSON objects among those
    parsed, and lines that do not even start like one (a line that does, but holds no
    conversation marker, is skipped unparsed and uncounted).
    """

    path: str
    project: str
    session_id: str
    subagent: bool = False
    loops: tuple[Loop, ...] = ()
    usage: ModelTokens = ()
    cost_state: float | None = None
    bytes_read: int = 0
    lines: int = 0
    parsed: int = 0
    broken: int = 0
    oversized: int = 0
    skipped: str = ""
