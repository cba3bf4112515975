"""The token usage of one scope's API replies, counted once per ``message.id``.

Claude Code writes one assistant line per content block and repeats the reply's
``usage`` on each of them, so usage is kept per message id (the larger of each count,
since older versions wrote growing counts while streaming) and summed per model.

Pure. Memory is bounded by the replies of the person's current turn (``end_turn``
folds them into the session's totals), and by ``MAX_OPEN`` whatever a turn holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..engine.transcript import AssistantPart
from .records import ModelTokens, Tokens, add_model_tokens

__all__ = ["MAX_OPEN", "UsageLedger"]

MAX_OPEN = 20_000
"""Replies remembered within one turn; beyond it the oldest are folded into the totals
(a loop that still needs one then counts it no more: far beyond any turn seen)."""


class UsageLedger:
    """Usage per message id for the current turn, and per model for everything seen."""

    __slots__ = ("_open", "_totals", "max_open")

    def __init__(self, *, max_open: int = MAX_OPEN) -> None:
        self._open: dict[str, tuple[str, Tokens]] = {}  # message id -> (model, tokens)
        self._totals: dict[str, Tokens] = {}
        self.max_open = max_open

    def add(self, part: AssistantPart) -> None:
        """Take one assistant line's usage (lines without usage change nothing)."""
        if part.usage is None:
            return
        usage = part.usage
        known = self._open.get(part.message_id)
        if known is not None:
            counted = known[1]
            if counted != usage:
                self._open[part.message_id] = (known[0] or part.model, counted.merged(usage))
            return
        self._open[part.message_id] = (part.model, usage)
        if len(self._open) > self.max_open:
            oldest = next(iter(self._open))
            self._fold(oldest, self._open.pop(oldest))

    def tokens_of(self, message_ids: Iterable[str]) -> ModelTokens:
        """The tokens of these replies per model, each counted once."""
        seen: set[str] = set()
        pairs: list[tuple[str, Tokens]] = []
        for message_id in message_ids:
            if message_id in seen:
                continue
            seen.add(message_id)
            known = self._open.get(message_id)
            if known is not None:
                pairs.append(known)
        return add_model_tokens(pairs)

    def end_turn(self) -> None:
        """The person spoke: no loop can reach back past this point, fold the turn."""
        for message_id, entry in self._open.items():
            self._fold(message_id, entry)
        self._open.clear()

    def totals(self) -> ModelTokens:
        """Every reply seen so far, per model (call ``end_turn`` first for all of them)."""
        return tuple(sorted(self._totals.items()))

    def _fold(self, message_id: str, entry: tuple[str, Tokens]) -> None:
        model, tokens = entry
        self._totals[model] = self._totals.get(model, Tokens()) + tokens
