"""What one assistant line's ``usage`` says: the 1-hour cache writes, fast mode, US-only
inference (``engine.transcript.Usage``), which the scan prices apart."""

from __future__ import annotations

import orjson
from loop_killer.engine.transcript import MAX_COUNT, AssistantPart, Usage, parse_line


def _line(usage: dict[str, object]) -> bytes:
    return orjson.dumps({
        "type": "assistant", "uuid": "u1", "timestamp": "2026-11-30T17:20:08.026Z",
        "requestId": "req_1", "sessionId": "s1",
        "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-4-8",
                    "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                    "usage": usage}})


def _usage(usage: dict[str, object]) -> Usage:
    event = parse_line(_line(usage))
    assert isinstance(event, AssistantPart) and event.usage is not None
    return event.usage


def test_one_hour_cache_writes_are_told_apart_from_five_minute_ones() -> None:
    usage = _usage({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 300,
                    "cache_creation": {"ephemeral_5m_input_tokens": 100,
                                       "ephemeral_1h_input_tokens": 200}})
    assert (usage.cache_creation, usage.cache_creation_1h) == (300, 200)
    assert usage.total == 315  # the split changes no count


def test_a_one_hour_count_larger_than_all_writes_is_cut_to_them() -> None:
    usage = _usage({"cache_creation_input_tokens": 50,
                    "cache_creation": {"ephemeral_1h_input_tokens": 80}})
    assert usage.cache_creation_1h == 50


def test_without_the_split_every_write_is_a_five_minute_one() -> None:
    assert _usage({"cache_creation_input_tokens": 40}).cache_creation_1h == 0


def test_fast_mode_and_us_only_inference_are_kept() -> None:
    usage = _usage({"input_tokens": 1, "speed": "fast", "inference_geo": "us"})
    assert (usage.speed, usage.inference_geo) == ("fast", "us")
    standard = _usage({"input_tokens": 1, "speed": "standard", "inference_geo": ""})
    assert (standard.speed, standard.inference_geo) == ("", "")


def test_a_sum_keeps_how_replies_were_served_only_where_they_agree() -> None:
    fast = Usage(1, 1, speed="fast")
    assert (fast + fast).speed == "fast"
    assert (fast + Usage(1, 1)).speed == ""
    assert (fast + Usage(1, 1, cache_creation=4, cache_creation_1h=3)).cache_creation_1h == 3


def test_a_count_no_reply_can_have_is_garbage_and_counted_as_none() -> None:
    """(A count past 64 bits made ``scan --json`` fail: orjson writes no bigger integer.)"""
    usage = _usage({"input_tokens": 2**64 - 1, "output_tokens": MAX_COUNT + 1,
                    "cache_read_input_tokens": MAX_COUNT, "cache_creation_input_tokens": -5})
    assert (usage.input, usage.output, usage.cache_read, usage.cache_creation) == (
        0, 0, MAX_COUNT, 0)
