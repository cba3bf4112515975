"""What tokens cost: a per-model price table, a user's override file, and the sum.

Prices are USD per million tokens, for input, output, cache reads and cache writes. A
model is priced by the longest table key its name starts with, after making the name
plain: lower case, any provider prefix before ``claude-`` dropped (Bedrock's
``us.anthropic.claude-…``), ``@`` and ``.`` read as ``-`` (Vertex's ``claude-x@date``).
So ``claude-opus-4-5-20251101`` is priced as ``claude-opus-4-5``, and a model newer than
this table as its family (``claude-opus``, ``claude-sonnet``, ``claude-haiku``). A model
no key matches (``<synthetic>``, another vendor's) costs nothing here and its tokens are
counted as unpriced. Cache writes are priced at the 5-minute rate (1.25 × input): the
transcript does not say which were 1-hour writes.

Override or extend the table with ``--prices FILE``: JSON or TOML, mapping a model
prefix to its four prices, as an object (``{"input": 3, "output": 15, "cache_read": 0.3,
"cache_creation": 3.75}``) or a list in that order. The file's keys are tried first (its
longest match wins: ``claude`` alone prices every Claude model), then the defaults. It is
read as the hooks read their files: a regular file of at most ``MAX_PRICE_BYTES``, never
blocking (a FIFO or a device is refused at once).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .records import Tokens

__all__ = ["DEFAULT_PRICES", "MAX_PRICE_BYTES", "Price", "PriceError", "PriceTable",
           "load_prices"]

MAX_PRICE_BYTES = 1 << 20
"""The largest price file read (a table of every model ever made is a few kB)."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_creation: float

    def cost(self, tokens: Tokens) -> float:
        """What ``tokens`` cost, in USD."""
        return (tokens.input * self.input + tokens.output * self.output
                + tokens.cache_read * self.cache_read
                + tokens.cache_creation * self.cache_creation) / 1_000_000


def _price(input_price: float, output_price: float) -> Price:
    # Anthropic's cache pricing: a read is 0.1 x input, a (5-minute) write 1.25 x input.
    return Price(input_price, output_price, round(input_price * 0.1, 6),
                 round(input_price * 1.25, 6))


_OPUS_5 = _price(4, 20)  # as Claude Code 2.1.328 priced claude-opus-5-5 in its cost-state
_OPUS_4_5 = _price(5, 25)
_OPUS_4 = _price(15, 75)
_SONNET = _price(3, 15)
_HAIKU_4_5 = _price(1, 5)

DEFAULT_PRICES: Mapping[str, Price] = {
    # Families, for models newer than this table, and the aliases Claude Code accepts.
    "claude-opus": _OPUS_5,
    "claude-sonnet": _SONNET,
    "claude-haiku": _HAIKU_4_5,
    "opus": _OPUS_5,
    "sonnet": _SONNET,
    "haiku": _HAIKU_4_5,
    # Opus
    "claude-opus-5": _OPUS_5,
    "claude-opus-4-5": _OPUS_4_5,
    "claude-opus-4-6": _OPUS_4_5,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4-2025": _OPUS_4,  # claude-opus-4-20250514 (Opus 4.0)
    "claude-3-opus": _OPUS_4,
    # Sonnet
    "claude-3-7-sonnet": _SONNET,
    "claude-3-5-sonnet": _SONNET,
    "claude-3-sonnet": _SONNET,
    # Haiku
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-3-5-haiku": _price(0.8, 4),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
}
"""The built-in table (USD per million tokens), keyed by model-name prefix."""

_SEPARATORS = re.compile(r"[@.:]")


class PriceError(ValueError):
    """A price file that cannot be used (unreadable, not JSON/TOML, odd values)."""


def _plain(model: str) -> str:
    name = model.strip().lower()
    start = name.find("claude-")
    if start > 0:
        name = name[start:]
    return _SEPARATORS.sub("-", name)


class PriceTable:
    """Prices by model-name prefix: a user's ``overrides`` first (the longest matching key
    of theirs wins, so ``claude`` alone prices every Claude model), then ``defaults``."""

    __slots__ = ("_cache", "_tiers")

    def __init__(self, overrides: Mapping[str, Price] | None = None, *,
                 defaults: Mapping[str, Price] = DEFAULT_PRICES) -> None:
        # Longest keys first within each tier: the most specific prefix wins.
        self._tiers = [
            sorted(((_plain(key), price) for key, price in tier.items()),
                   key=lambda item: -len(item[0]))
            for tier in (overrides or {}, defaults)
        ]
        self._cache: dict[str, Price | None] = {}

    def price_of(self, model: str) -> Price | None:
        """The price of ``model``, or None when no key matches."""
        if model in self._cache:
            return self._cache[model]
        plain = _plain(model)
        found = None
        for tier in self._tiers:
            found = next((price for key, price in tier if key and plain.startswith(key)), None)
            if found is not None:
                break
        self._cache[model] = found
        return found

    def cost(self, by_model: Iterable[tuple[str, Tokens]]) -> tuple[float, int]:
        """USD for tokens per model, and how many of the tokens had no price."""
        usd = 0.0
        unpriced = 0
        for model, tokens in by_model:
            price = self.price_of(model)
            if price is None:
                unpriced += tokens.total
            else:
                usd += price.cost(tokens)
        return usd, unpriced


_FIELDS = ("input", "output", "cache_read", "cache_creation")


def load_prices(path: Path | str) -> dict[str, Price]:
    """A price file's entries (see the module's docstring), to put over the defaults."""
    path = Path(path)
    data = _read(path)
    parsed = _parse(path, data)
    if not isinstance(parsed, dict):
        raise PriceError(f"{path}: expected a table of model prefix -> prices")
    return {str(key): _entry(path, str(key), value) for key, value in parsed.items()}


def _read(path: Path) -> bytes:
    """The file's bytes, as the hooks read theirs (``state.files.read_small_file``); a link
    the person named is followed first: only the file it leads to must be regular."""
    from ..state.files import NotAFile, read_small_file

    real = os.path.realpath(path)
    try:
        return read_small_file(real, MAX_PRICE_BYTES)
    except NotAFile:
        try:
            regular = stat.S_ISREG(os.stat(real).st_mode)
        except OSError:
            regular = False
        reason = f"too large (over {MAX_PRICE_BYTES >> 20} MB)" if regular else \
            "not a regular file"
        raise PriceError(f"{path}: {reason}") from None
    except OSError as error:
        raise PriceError(f"{path}: {error.strerror or error}") from None


def _parse(path: Path, data: bytes) -> Any:
    if path.suffix.lower() != ".toml":
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            if path.suffix.lower() == ".json":
                raise PriceError(f"{path}: not valid JSON") from None
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise PriceError(f"{path}: neither JSON nor TOML ({error})") from None
        except RecursionError:  # arrays or tables nested deeper than the parser goes
            raise PriceError(f"{path}: neither JSON nor TOML (nested too deeply)") from None
    raise PriceError(f"{path}: TOML needs Python 3.11 or later; use JSON")


def _entry(path: Path, key: str, value: Any) -> Price:
    if isinstance(value, dict):
        unknown = set(value) - set(_FIELDS)
        if unknown or set(value) != set(_FIELDS):
            raise PriceError(f"{path}: {key!r} needs exactly {', '.join(_FIELDS)}")
        numbers = [value[name] for name in _FIELDS]
    elif isinstance(value, list) and len(value) == 4:
        numbers = value
    else:
        raise PriceError(f"{path}: {key!r} needs four prices ({', '.join(_FIELDS)})")
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0
               for n in numbers):
        raise PriceError(f"{path}: {key!r}: prices are numbers of USD per million, >= 0")
    return Price(*(float(n) for n in numbers))
