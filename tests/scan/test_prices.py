"""Prices: model names matched by prefix, a user's file over the defaults, unknown models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from loop_killer.scan.prices import (
    DEFAULT_PRICES,
    MAX_PRICE_BYTES,
    Price,
    PriceError,
    PriceTable,
    load_prices,
)
from loop_killer.scan.records import Tokens


@pytest.mark.parametrize(("model", "key"), [
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ("claude-opus-4-6", "claude-opus-4-6"),
    ("claude-opus-4-20250514", "claude-opus-4-2025"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("claude-opus-5-5", "claude-opus-5"),
    ("claude-opus-9", "claude-opus"),  # newer than the table: its family
    ("claude-sonnet-4-5-20250929", "claude-sonnet"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet"),  # Bedrock
    ("claude-opus-4-5@20251101", "claude-opus-4-5"),  # Vertex
    ("Claude-Opus-4.5", "claude-opus-4-5"),
    ("sonnet", "sonnet"),
])
def test_models_are_priced_by_their_longest_prefix(model: str, key: str) -> None:
    assert PriceTable().price_of(model) == DEFAULT_PRICES[key]


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
    assert table.price_of("sonnet") == DEFAULT_PRICES["sonnet"]


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
    with pytest.raises(PriceError, match=r"prices.json: too large \(over 1 MB\)"):
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
