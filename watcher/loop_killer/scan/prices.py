"""What tokens cost: a per-model price table (USD per million tokens), a person's override
file (``--prices``: JSON or TOML, a model prefix -> four prices, or LiteLLM's table), the sum.
A model newer than the table gets its family's newest price, marked a fallback. Built-in prices
are Claude Code's catalog's (2.1.332); long-prompt rates and fast multiples are LiteLLM's."""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import orjson

from .records import Tokens

__all__ = ["DEFAULT_PRICES", "FAMILY_PRICES", "FAST_FALLBACK", "MAX_PRICE_BYTES", "Price",
           "PriceError", "PriceTable", "Priced", "load_prices", "read_price_file"]

MAX_PRICE_BYTES = 8 << 20  # (LiteLLM's table of every model is about 1.5 MB)
FAST_FALLBACK = 2.0  # fast mode's multiple where a model's own is not known (Opus 4.8's, 5's)

_US_ONLY = 1.1  # inference_geo "us": Claude Code bills 1.1x

Priced = Literal["exact", "fallback", "unpriced"]  # (fallback: a family's, a guessed multiple)


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. ``cache_creation_1h``: None for 2 x input; ``long_prompt``: the
    rates of a whole request whose input (cached or not) is over ``long_above``."""

    input: float
    output: float
    cache_read: float
    cache_creation: float
    cache_creation_1h: float | None = None
    long_prompt: Price | None = None
    long_above: int = 200_000
    fast: float | None = None
    fallback: bool = False

    @property
    def one_hour_write(self) -> float:
        return self.input * 2 if self.cache_creation_1h is None else self.cache_creation_1h

    def cost(self, tokens: Tokens, *, one_reply: bool = False) -> float:
        """What ``tokens`` cost, in USD (``one_reply``: the long-prompt rates may apply)."""
        rates = self
        if one_reply and self.long_prompt is not None and tokens.prompt > self.long_above:
            rates = self.long_prompt
        five_minute = tokens.cache_creation - tokens.cache_creation_1h
        usd = (tokens.input * rates.input + tokens.output * rates.output
               + tokens.cache_read * rates.cache_read + five_minute * rates.cache_creation
               + tokens.cache_creation_1h * rates.one_hour_write) / 1_000_000
        if tokens.speed == "fast":
            usd *= self.fast if self.fast is not None else FAST_FALLBACK
        if tokens.inference_geo == "us":
            usd *= _US_ONLY
        return usd


def _price(input_price: float, output_price: float, cache_read: float | None = None,
           **more: Any) -> Price:
    # Anthropic's cache pricing: a read 0.1 x input, a 5-minute write 1.25 x, 1-hour 2 x.
    read = round(input_price * 0.1, 6) if cache_read is None else cache_read
    return Price(input_price, output_price, read, round(input_price * 1.25, 6),
                 round(input_price * 2, 6), **more)


_OPUS_4 = _price(15, 75)
_OPUS_4_5 = _price(5, 25)
_OPUS_5_5 = _price(4, 20, 0.2)
_SONNET_4 = _price(3, 15, long_prompt=_price(6, 22.5))  # 1M context: over 200k, all of it
_SONNET = _price(3, 15)
_SONNET_5 = _price(2, 10)
_SONNET_5_5 = _price(2, 10, 0.1)
_HAIKU_3 = Price(0.25, 1.25, 0.03, 0.3, 0.5)
_HAIKU_3_5 = _price(0.8, 4)
_HAIKU_4_5 = _price(1, 5)
_HAIKU_5_5 = Price(0.1, 0.5, 0.01, 0.125, 0.2, long_prompt=Price(0.5, 2.5, 0.05, 0.625, 1),
                   long_above=100_000)
_TIER_10_50 = _price(10, 50)
_TIER_10_50_READ_0_25 = _price(10, 50, 0.25)
_TIER_8_40_READ_0_20 = _price(8, 40, 0.2)

DEFAULT_PRICES: Mapping[str, Price] = {  # (claude-opus-4, claude-sonnet-4: the 4.0 models)
    "claude-3-opus": _OPUS_4, "claude-opus-4": _OPUS_4, "claude-opus-4-0": _OPUS_4,
    "claude-opus-4-1": _OPUS_4, "claude-opus-4-5": _OPUS_4_5,
    "claude-opus-4-6": replace(_OPUS_4_5, fast=6), "claude-opus-4-7": replace(_OPUS_4_5, fast=6),
    "claude-opus-4-8": replace(_OPUS_4_5, fast=2), "claude-opus-5": replace(_OPUS_4_5, fast=2),
    "claude-opus-5-5": _OPUS_5_5,
    "claude-3-sonnet": _SONNET, "claude-3-5-sonnet": _SONNET, "claude-3-7-sonnet": _SONNET,
    "claude-sonnet-4": _SONNET_4, "claude-sonnet-4-0": _SONNET_4, "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-6": _SONNET, "claude-sonnet-5": _SONNET_5, "claude-sonnet-5-5": _SONNET_5_5,
    "claude-3-haiku": _HAIKU_3, "claude-3-5-haiku": _HAIKU_3_5, "claude-haiku-4-5": _HAIKU_4_5,
    "claude-haiku-5-5": _HAIKU_5_5,
    "claude-fable-5": _TIER_10_50, "claude-fable-5-1": _TIER_10_50_READ_0_25,
    "claude-fable-5-2": _TIER_8_40_READ_0_20, "claude-mythos-5": _TIER_10_50,
    "claude-mythos-5-1": _TIER_10_50_READ_0_25, "claude-mythos-5-2": _TIER_8_40_READ_0_20,
}

FAMILY_PRICES: Mapping[str, Price] = {
    key: replace(price, fallback=True) for key, price in {
        # (a newer model than the table, or an alias)
        "claude-opus": _OPUS_5_5, "opus": _OPUS_5_5,
        "claude-sonnet": _SONNET_5_5, "sonnet": _SONNET_5_5,
        "claude-haiku": _HAIKU_5_5, "haiku": _HAIKU_5_5,
        "claude-fable": _TIER_8_40_READ_0_20, "claude-mythos": _TIER_8_40_READ_0_20,
    }.items()
}

_SEPARATORS = re.compile(r"[@.:]")
_NEWER_VERSION = re.compile(r"-\d{1,2}(?!\d)")  # "-9" after "claude-opus-4": another model


class PriceError(ValueError):
    """A price file that cannot be used (unreadable, not JSON/TOML, odd values)."""


def _plain(model: str) -> str:
    """Lower case, provider prefixes dropped, ``@ . :`` read as ``-``."""
    name = model.strip().lower()
    start = name.find("claude-")
    if start > 0:
        name = name[start:]
    return _SEPARATORS.sub("-", name)


def _names_model(plain: str, key: str) -> bool:
    """``key`` is this model's own name (maybe with a date or a suffix), not a newer one's."""
    return plain.startswith(key) and not _NEWER_VERSION.match(plain, len(key))


_Tier = tuple[list[tuple[str, Price]], bool]  # (entries, longest first; keys name models)


class PriceTable:
    """Prices by model name: a person's ``overrides`` (prefixes) and ``models`` (LiteLLM's)
    first, then the defaults, then the families'; in each, the longest matching key wins."""

    __slots__ = ("_cache", "_tiers")

    def __init__(self, overrides: Mapping[str, Price] | None = None, *,
                 models: Mapping[str, Price] | None = None) -> None:
        def tier(entries: Mapping[str, Price], names_models: bool) -> _Tier:
            return (sorted(((_plain(key), price) for key, price in entries.items()),
                           key=lambda item: -len(item[0])), names_models)

        self._tiers = [tier(overrides or {}, False), tier(models or {}, True),
                       tier(DEFAULT_PRICES, True), tier(FAMILY_PRICES, False)]
        self._cache: dict[str, Price | None] = {}

    def price_of(self, model: str) -> Price | None:
        """The price of ``model``, or None when no key matches."""
        if model in self._cache:
            return self._cache[model]
        plain = _plain(model)
        found = None
        for entries, names_models in self._tiers:
            found = next((price for key, price in entries if key and (
                _names_model(plain, key) if names_models else plain.startswith(key))), None)
            if found is not None:
                break
        self._cache[model] = found
        return found

    def reply_cost(self, model: str, usage: Tokens) -> tuple[float, Priced]:
        """What one API reply cost as billed (USD), and how sure that price is."""
        price = self.price_of(model)
        if price is None:
            return 0.0, "unpriced"
        guessed = price.fallback or (usage.speed == "fast" and price.fast is None)
        return price.cost(usage, one_reply=True), "fallback" if guessed else "exact"

    def cost(self, by_model: Iterable[tuple[str, Tokens]]) -> tuple[float, int]:
        """USD for tokens per model (sums: no long-prompt rates), and the tokens unpriced."""
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
_ONE_HOUR = "cache_creation_1h"


def read_price_file(path: Path | str) -> PriceTable:
    """The price table with a price file's entries over the defaults."""
    entries, litellm = _price_file(Path(path))
    return PriceTable(models=entries) if litellm else PriceTable(entries)


def load_prices(path: Path | str) -> dict[str, Price]:
    """A price file's entries, to put over the defaults (either format, as prefixes)."""
    return _price_file(Path(path))[0]


def _price_file(path: Path) -> tuple[dict[str, Price], bool]:
    """A price file's entries, and whether they are LiteLLM's (keys naming models)."""
    parsed = _parse(path, _read(path))
    if not isinstance(parsed, dict):
        raise PriceError(f"{path}: expected a table of model prefix -> prices")
    if any(isinstance(value, dict) and "input_cost_per_token" in value
           for value in parsed.values()):
        return _litellm_entries(parsed), True
    return {str(key): _entry(path, str(key), value) for key, value in parsed.items()}, False


def _litellm_entries(parsed: dict[Any, Any]) -> dict[str, Price]:
    """LiteLLM's priced entries; of keys naming one model, the bare name's wins, else the first."""
    chosen: dict[str, tuple[str, Price]] = {}
    for key, value in parsed.items():
        price = _litellm_price(value) if isinstance(value, dict) else None
        if price is None:
            continue
        plain = _plain(str(key).rsplit("/", 1)[-1])
        bare = str(key).lower() == plain
        if plain not in chosen or (bare and chosen[plain][0].lower() != plain):
            chosen[plain] = (str(key), price)
    return {plain: price for plain, (_, price) in chosen.items()}


def _per_million(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return round(float(value) * 1_000_000, 9)
    return None


def _litellm_price(entry: dict[str, Any]) -> Price | None:
    def rate(name: str, suffix: str = "") -> float | None:
        return _per_million(entry.get(name + suffix))

    def rates(suffix: str, base: Price | None = None) -> Price | None:
        input_rate, output_rate = rate("input_cost_per_token", suffix), \
            rate("output_cost_per_token", suffix)
        if output_rate is None and base is not None:
            output_rate = base.output
        if input_rate is None or output_rate is None:
            return None
        read = rate("cache_read_input_token_cost", suffix)
        write = rate("cache_creation_input_token_cost", suffix)
        one_hour = rate("cache_creation_input_token_cost_above_1hr", suffix)
        return Price(input_rate, output_rate,
                     round(input_rate * 0.1, 9) if read is None else read,
                     round(input_rate * 1.25, 9) if write is None else write,
                     one_hour)

    base = rates("")
    if base is None:
        return None
    long_prompt = rates("_above_200k_tokens", base)
    special = entry.get("provider_specific_entry")
    fast = special.get("fast") if isinstance(special, dict) else None
    return replace(base, long_prompt=long_prompt,
                   fast=float(fast) if isinstance(fast, (int, float))
                   and not isinstance(fast, bool) and fast > 0 else None)


def _read(path: Path) -> bytes:
    """The file's bytes, as the hooks read theirs, never blocking (a link is followed)."""
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
        if set(value) - {_ONE_HOUR} != set(_FIELDS):
            raise PriceError(f"{path}: {key!r} needs exactly {', '.join(_FIELDS)}"
                             f" (and optionally {_ONE_HOUR})")
        numbers = [value[name] for name in (*_FIELDS, _ONE_HOUR) if name in value]
    elif isinstance(value, list) and len(value) == 4:
        numbers = value
    else:
        raise PriceError(f"{path}: {key!r} needs four prices ({', '.join(_FIELDS)})")
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0
               for n in numbers):
        raise PriceError(f"{path}: {key!r}: prices are numbers of USD per million, >= 0")
    rates = [float(n) for n in numbers]
    return Price(rates[0], rates[1], rates[2], rates[3], rates[4] if len(rates) > 4 else None)
