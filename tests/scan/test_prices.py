"""Prices: model names matched by prefix, a user's file over the defaults, unknown models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loop_killer.scan.prices import (
    DEFAULT_PRICES,
    FAMILY_PRICES,
    FAST_FALLBACK,
    MAX_PRICE_BYTES,
    Price,
    PriceError,
    PriceTable,
    load_prices,
    read_price_file,
)
from loop_killer.scan.records import Tokens


@pytest.mark.parametrize(("model", "key"), [
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ("claude-opus-4-6", "claude-opus-4-6"),
    ("claude-opus-4-20250514", "claude-opus-4"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("claude-opus-4-7", "claude-opus-4-7"),
    ("claude-opus-4-8", "claude-opus-4-8"),
    ("claude-opus-5", "claude-opus-5"),
    ("claude-opus-5-5", "claude-opus-5-5"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("claude-sonnet-5", "claude-sonnet-5"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),  # Vertex
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("claude-haiku-5-5", "claude-haiku-5-5"),
    ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ("claude-fable-5-1", "claude-fable-5-1"),
    ("claude-mythos-5", "claude-mythos-5"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),  # Bedrock
    ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
    ("us.anthropic.claude-opus-4-6-v1", "claude-opus-4-6"),
    ("anthropic.claude-haiku-4-5", "claude-haiku-4-5"),  # Mantle
    ("claude-opus-4-5@20251101", "claude-opus-4-5"),  # Vertex
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
    ("claude-opus-4-6[1m]", "claude-opus-4-6"),
    ("Claude-Opus-4.5", "claude-opus-4-5"),
])
def test_models_and_their_provider_names_get_their_own_price(model: str, key: str) -> None:
    price = PriceTable().price_of(model)
    assert price == DEFAULT_PRICES[key] and price is not None and not price.fallback


@pytest.mark.parametrize(("model", "family"), [
    ("claude-opus-9", "claude-opus"),  # newer than the table: its family
    ("claude-opus-4-9", "claude-opus"),  # not Opus 4.0, whose key it starts with
    ("claude-opus-5-7", "claude-opus"),
    ("claude-sonnet-6", "claude-sonnet"),
    ("claude-haiku-4-6", "claude-haiku"),
    ("claude-fable-6", "claude-fable"),
    ("sonnet", "sonnet"),
])
def test_a_newer_model_gets_its_familys_price_marked_as_a_fallback(model: str,
                                                                 family: str) -> None:
    price = PriceTable().price_of(model)
    assert price == FAMILY_PRICES[family] and price is not None and price.fallback
    assert PriceTable().reply_cost(model, Tokens(1, 1))[1] == "fallback"


@pytest.mark.parametrize(("model", "rates"), [
    # (input, output, cache read, 5-minute write, 1-hour write): Claude Code 2.1.332's catalog
    ("claude-opus-4-7", (5, 25, 0.5, 6.25, 10)),
    ("claude-opus-4-8", (5, 25, 0.5, 6.25, 10)),
    ("claude-opus-5", (5, 25, 0.5, 6.25, 10)),
    ("claude-opus-5-5", (4, 20, 0.2, 5, 8)),
    ("claude-opus-4-1", (15, 75, 1.5, 18.75, 30)),
    ("claude-sonnet-5", (2, 10, 0.2, 2.5, 4)),
    ("claude-sonnet-5-5", (2, 10, 0.1, 2.5, 4)),
    ("claude-sonnet-4-6", (3, 15, 0.3, 3.75, 6)),
    ("claude-haiku-4-5", (1, 5, 0.1, 1.25, 2)),
    ("claude-haiku-5-5", (0.1, 0.5, 0.01, 0.125, 0.2)),
    ("claude-fable-5", (10, 50, 1, 12.5, 20)),
    ("claude-fable-5-2", (8, 40, 0.2, 10, 16)),
    ("claude-mythos-5-1", (10, 50, 0.25, 12.5, 20)),
])
def test_current_models_are_priced_as_claude_code_bills_them(
        model: str, rates: tuple[float, ...]) -> None:
    price = PriceTable().price_of(model)
    assert price is not None
    assert (price.input, price.output, price.cache_read, price.cache_creation,
            price.one_hour_write) == pytest.approx(rates)


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    table = PriceTable()
    five_minute = Tokens(cache_creation=1_000_000)
    one_hour = Tokens(cache_creation=1_000_000, cache_creation_1h=1_000_000)
    mixed = Tokens(cache_creation=1_000_000, cache_creation_1h=250_000)
    assert table.reply_cost("claude-opus-4-6", five_minute) == (pytest.approx(6.25), "exact")
    assert table.reply_cost("claude-opus-4-6", one_hour)[0] == pytest.approx(10)
    assert table.reply_cost("claude-opus-4-6", mixed)[0] == pytest.approx(
        0.75 * 6.25 + 0.25 * 10)
    # a user's four prices: the 1-hour write is 2 x their input
    assert Price(3, 15, 0.3, 3.75).cost(one_hour) == pytest.approx(6)


def test_a_reply_over_200k_input_tokens_is_billed_whole_at_the_long_prompt_rates() -> None:
    table = PriceTable()
    short = Tokens(input=100_000, output=10_000, cache_read=100_000)  # 200k: not over
    long = Tokens(input=100_000, output=10_000, cache_read=100_001)
    assert table.reply_cost("claude-sonnet-4-5-20250929", short)[0] == pytest.approx(
        (100_000 * 3 + 10_000 * 15 + 100_000 * 0.3) / 1e6)
    assert table.reply_cost("claude-sonnet-4-5-20250929", long)[0] == pytest.approx(
        (100_000 * 6 + 10_000 * 22.5 + 100_001 * 0.6) / 1e6)
    # cache writes count towards the threshold, and are billed at the long rates too
    writes = Tokens(input=1, cache_creation=250_000, cache_creation_1h=50_000)
    assert table.reply_cost("claude-sonnet-4", writes)[0] == pytest.approx(
        (1 * 6 + 200_000 * 7.5 + 50_000 * 12) / 1e6)
    # Haiku 5.5's threshold is 100k; Opus 4.6 has none
    assert table.reply_cost("claude-haiku-5-5", Tokens(input=150_000))[0] == pytest.approx(
        150_000 * 0.5 / 1e6)
    assert table.reply_cost("claude-opus-4-6", Tokens(input=300_000))[0] == pytest.approx(1.5)
    # a sum of replies is not one request: base rates
    assert table.cost([("claude-sonnet-4-5", long)])[0] == pytest.approx(
        table.reply_cost("claude-sonnet-4-5", Tokens(100_000, 10_000, 100_000))[0]
        + 0.3 / 1e6)


def test_fast_mode_multiplies_every_rate_by_the_models_multiple() -> None:
    table = PriceTable()
    fast = Tokens(input=1_000_000, output=1_000_000, cache_read=1_000_000, speed="fast")
    assert table.reply_cost("claude-opus-4-6", fast) == (pytest.approx(6 * 30.5), "exact")
    assert table.reply_cost("claude-opus-4-8", fast) == (pytest.approx(2 * 30.5), "exact")
    # a multiple nobody published: the fallback, marked
    assert table.reply_cost("claude-opus-5-5", fast) == (
        pytest.approx(FAST_FALLBACK * 24.2), "fallback")


def test_us_only_inference_costs_a_tenth_more() -> None:
    usage = Tokens(input=1_000_000, inference_geo="us")
    assert PriceTable().reply_cost("claude-opus-4-8", usage)[0] == pytest.approx(5.5)


def test_a_model_without_a_price_is_unpriced() -> None:
    assert PriceTable().reply_cost("<synthetic>", Tokens(1, 1)) == (0.0, "unpriced")
    assert PriceTable().reply_cost("gpt-5", Tokens(1, 1)) == (0.0, "unpriced")


def test_a_litellm_prices_file_is_read_as_ccusage_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "model_prices_and_context_window.json"
    path.write_text(json.dumps({
        "sample_spec": {"input_cost_per_token": "0.0", "max_tokens": "set to max"},
        "claude-sonnet-4-5": {
            "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
            "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06,
            "cache_creation_input_token_cost_above_1hr": 6e-06,
            "input_cost_per_token_above_200k_tokens": 6e-06,
            "output_cost_per_token_above_200k_tokens": 2.25e-05,
            "cache_read_input_token_cost_above_200k_tokens": 6e-07,
            "cache_creation_input_token_cost_above_200k_tokens": 7.5e-06,
            "litellm_provider": "anthropic", "mode": "chat"},
        "vertex_ai/claude-sonnet-4-5": {"input_cost_per_token": 9e-06,
                                        "output_cost_per_token": 9e-06},
        "claude-opus-4-6": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06,
                            "provider_specific_entry": {"us": 1.1, "fast": 6.0}},
        "claude-opus-4": {"input_cost_per_token": 7e-06, "output_cost_per_token": 7e-06},
        "dall-e-3": {"output_cost_per_image": 0.04},
    }))
    table = read_price_file(path)
    sonnet = table.price_of("claude-sonnet-4-5-20250929")
    assert sonnet is not None and not sonnet.fallback
    assert (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_creation,
            sonnet.one_hour_write) == pytest.approx((3, 15, 0.3, 3.75, 6))
    long = Tokens(input=300_000, output=1_000)
    assert table.reply_cost("claude-sonnet-4-5", long)[0] == pytest.approx(
        (300_000 * 6 + 1_000 * 22.5) / 1e6)
    opus = table.price_of("claude-opus-4-6")
    assert opus is not None and (opus.input, opus.output, opus.fast) == (1, 2, 6)
    # a LiteLLM key names a model: Opus 4.9 is not "claude-opus-4", it is the family's
    assert table.price_of("claude-opus-4-9") == FAMILY_PRICES["claude-opus"]
    assert table.price_of("claude-opus-4-20250514") == Price(7, 7, 0.7, 8.75)
    # models the file leaves out keep the built-in price
    assert table.price_of("claude-haiku-4-5") == DEFAULT_PRICES["claude-haiku-4-5"]


def test_unknown_models_cost_nothing_and_are_counted() -> None:
    table = PriceTable()
    assert table.price_of("<synthetic>") is None
    usd, unpriced = table.cost([("<synthetic>", Tokens(5, 5)), ("gpt-5", Tokens(1, 2, 3, 4)),
                                ("claude-sonnet-4", Tokens(1_000_000, 0))])
    assert usd == pytest.approx(3.0)
    assert unpriced == 20


def test_cost_uses_all_four_prices() -> None:
    price = Price(3, 15, 0.3, 3.75)
    assert price.cost(Tokens(1_000_000, 1_000_000, 1_000_000, 1_000_000)) == pytest.approx(22.05)
    assert price.cost(Tokens(100, 10, 1000, 7)) == pytest.approx(
        (100 * 3 + 10 * 15 + 1000 * 0.3 + 7 * 3.75) / 1e6)


def test_a_json_file_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text('{"claude-sonnet": {"input": 1, "output": 2, "cache_read": 0.5, '
                    '"cache_creation": 1.5}, "my-model": [10, 20, 1, 12.5]}')
    table = PriceTable(load_prices(path))
    assert table.price_of("claude-sonnet-4-5") == Price(1, 2, 0.5, 1.5)
    assert table.price_of("my-model-v2") == Price(10, 20, 1, 12.5)
    assert table.price_of("claude-opus-4-5") == DEFAULT_PRICES["claude-opus-4-5"]


def test_a_users_short_key_wins_over_longer_defaults() -> None:
    table = PriceTable({"claude": Price(0, 0, 0, 0)})
    assert table.price_of("claude-opus-4-5-20251101") == Price(0, 0, 0, 0)
    assert table.price_of("sonnet") == FAMILY_PRICES["sonnet"]


def test_a_toml_file_works_too(tmp_path: Path) -> None:
    pytest.importorskip("tomllib")
    path = tmp_path / "prices.toml"
    path.write_text('["claude-opus-4-5"]\ninput = 4\noutput = 20\ncache_read = 0.4\n'
                    'cache_creation = 5\n\n[local]\ninput = 0\noutput = 0\ncache_read = 0\n'
                    'cache_creation = 0\n')
    table = PriceTable(load_prices(path))
    assert table.price_of("claude-opus-4-5-20251101") == Price(4, 20, 0.4, 5)
    assert table.price_of("local-llama") == Price(0, 0, 0, 0)


@pytest.mark.parametrize("text", [
    "not json or toml {", "[1, 2]", '{"m": [1, 2, 3]}', '{"m": {"input": 1}}',
    '{"m": [1, 2, 3, -4]}', '{"m": [1, 2, 3, "4"]}', '{"m": [true, 2, 3, 4]}',
    '{"m": {"input": 1, "output": 1, "cache_read": 1, "cache_creation": 1, "x": 1}}',
])
def test_bad_price_files_are_refused_with_a_reason(tmp_path: Path, text: str) -> None:
    path = tmp_path / "prices.txt"
    path.write_text(text)
    with pytest.raises(PriceError, match="prices.txt"):
        load_prices(path)


def test_a_missing_price_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PriceError):
        load_prices(tmp_path / "none.json")


def _load_in_a_child(path: Path) -> subprocess.CompletedProcess[str]:
    """``load_prices`` in a process of its own, bounded in time and memory: a FIFO must
    not block it, /dev/zero must not fill the machine's memory."""
    code = ("import sys, resource\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from loop_killer.scan.prices import PriceError, load_prices\n"
            "try:\n"
            "    load_prices(sys.argv[1])\n"
            "except PriceError as error:\n"
            "    print(error)\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_price_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path,
                                                                    kind: str) -> None:
    path = {"fifo": tmp_path / "prices.json", "device": Path("/dev/zero"),
            "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    done = _load_in_a_child(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{path}: not a regular file"


def test_an_oversized_price_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_bytes(b'{"m": [1, 2, 3, 4]}' + b" " * MAX_PRICE_BYTES)
    with pytest.raises(PriceError, match=r"prices.json: too large \(over 8 MB\)"):
        load_prices(path)


def test_a_price_file_named_through_a_link_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text('{"m": [1, 2, 3, 4]}')
    (tmp_path / "prices.json").symlink_to(tmp_path / "real.json")
    assert load_prices(tmp_path / "prices.json") == {"m": Price(1, 2, 3, 4)}


def test_a_toml_price_file_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_bytes(b"m = " + b"[" * 500 + b"]" * 500)
    with pytest.raises(PriceError, match="prices.toml: .*nested too deeply"):
        load_prices(path)
