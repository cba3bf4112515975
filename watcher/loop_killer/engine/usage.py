"""A reply's token counts (``Usage``), as Claude Code writes them in a line's
``message.usage``, read by name from a parsed line or a typed one (``usage_of``). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_COUNT", "Usage", "is_count", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    """A reply's token counts (Claude Code repeats them on every line of one message).

    ``cache_creation`` counts every cache write; ``cache_creation_1h`` is the part of it
    written for an hour (billed higher than a 5-minute write). ``speed`` ("fast" or "")
    and ``inference_geo`` ("us" or "") say how one reply was served, which its price
    depends on; a sum keeps them only where every reply in it agrees.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    cache_creation_1h: int = 0
    speed: str = ""
    inference_geo: str = ""

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_creation

    @property
    def prompt(self) -> int:
        """The request's input tokens, cached or not: what a long-prompt price is chosen by."""
        return self.input + self.cache_read + self.cache_creation

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input + other.input, self.output + other.output,
                     self.cache_read + other.cache_read,
                     self.cache_creation + other.cache_creation,
                     self.cache_creation_1h + other.cache_creation_1h,
                     self.speed if self.speed == other.speed else "",
                     self.inference_geo if self.inference_geo == other.inference_geo else "")

    def merged(self, other: Usage) -> Usage:
        """The larger of each count: older Claude Code versions wrote a reply's lines as it
        streamed, so a later line of the same reply may carry larger counts."""
        return Usage(max(self.input, other.input), max(self.output, other.output),
                     max(self.cache_read, other.cache_read),
                     max(self.cache_creation, other.cache_creation),
                     max(self.cache_creation_1h, other.cache_creation_1h),
                     self.speed or other.speed, self.inference_geo or other.inference_geo)

    def to_dict(self) -> dict[str, int]:
        """The JSON shape: ``input``, ``output``, ``cache_read``, ``cache_creation``, ``total``."""
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_creation": self.cache_creation, "total": self.total}


MAX_COUNT = 10**12
"""More tokens than any reply ever had: a count above it is garbage, counted as none (its
sums must still fit the 64-bit integers JSON readers take)."""


def is_count(value: Any) -> bool:
    """Whether ``value`` is a token count as a reply can have one."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _count(value: Any) -> int:
    return value if is_count(value) else 0


def usage_of(field: Callable[[str], Any]) -> Usage:
    """A reply's ``usage``, each field read by name (``dict.get``, or a typed line's)."""
    created = _count(field("cache_creation_input_tokens"))
    split = field("cache_creation")
    # The 1-hour part of the writes, never more than all of them (as Claude Code bills it).
    one_hour = min(_count(split.get("ephemeral_1h_input_tokens")), created) \
        if isinstance(split, dict) else 0
    return Usage(
        input=_count(field("input_tokens")),
        output=_count(field("output_tokens")),
        cache_read=_count(field("cache_read_input_tokens")),
        cache_creation=created,
        cache_creation_1h=one_hour,
        speed="fast" if field("speed") == "fast" else "",
        inference_geo="us" if field("inference_geo") == "us" else "",
    )
