"""The scan's typed decoder (``engine.typed``) gives every line the event ``parse_line``
gives it, a tool result's content left unread, or says that only ``parse_line`` can tell."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.engine.transcript import (
    Event,
    ParseStats,
    ToolResults,
    UnreadResult,
    parse_line,
)
from loop_killer.engine.typed import NOT_TYPED, typed_event
from transcripts import scan_bytes

from .test_prefilter import _HOSTILE, fixture_lines


def _parsed(line: bytes, subagent: bool) -> tuple[Event | None, str]:
    stats = ParseStats()
    event = parse_line(line, stats, subagent=subagent)
    return event, next(iter(stats.skipped), "")


def _read_back(event: Event | None) -> Event | None:
    """The event with its unread results read, as ``parse_line`` gives them."""
    if not isinstance(event, ToolResults):
        return event
    results = []
    for result in event.results:
        assert isinstance(result.content, UnreadResult)
        content, is_error = result.content.read()
        results.append(dataclasses.replace(result, content=content, is_error=is_error))
    return dataclasses.replace(event, results=tuple(results))


def same_event(line: bytes) -> bool:
    """Asserts that the typed decoder agrees with ``parse_line`` on ``line`` (as a main
    transcript's line and as a subagent's); whether it could decode it."""
    typed = False
    for subagent in (False, True):
        found = typed_event(line, subagent=subagent)
        if found is NOT_TYPED:
            continue
        typed = True
        event, reason, _ = found
        assert (_read_back(event), reason) == _parsed(line, subagent), (line, subagent)
    return typed


def test_every_fixture_line_gets_the_event_parse_line_gives() -> None:
    lines = fixture_lines()
    assert all(same_event(line) for line in lines)  # every real line fits the structures
    assert len(lines) > 1000


def test_hostile_lines_get_the_same_event() -> None:
    for line in _HOSTILE:
        same_event(line)


def test_lines_that_do_not_fit_are_left_to_parse_line() -> None:
    result = b'{"tool_use_id":"T1","type":"tool_result","content":"x"}'
    for line in [b"[1, 2]", b'{"type":"user"', b'{"type":"user","message":"text"}',
                 b'{"type":"assistant","message":{"content":[{"type":["text"]}]}}',
                 b'{"type":"user","message":{"content":[' + result + b"," + result + b"]}}",
                 b'{"type":"user","message":{"content":"caf\xe9"}}']:
        assert typed_event(line) is NOT_TYPED, line
    # (the scan then parses it whole: the broken one is counted as parse_line counts it)
    assert scan_bytes(b'{"type":"user"\n').broken == 1


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)


def _either(*values: Any) -> st.SearchStrategy[Any]:
    """One of these values, or any JSON value."""
    return st.one_of(st.sampled_from(values), _JSON)


_BLOCKS = st.fixed_dictionaries({}, optional={
    "type": _either("text", "tool_use", "tool_result", "thinking", "redacted_thinking",
                    "image"),
    "text": _either("Stop hook feedback: go on", " API Error: 500", "hello"),
    "id": _either("toolu_1", "toolu_2"), "name": _either("Bash", "Read"), "input": _JSON,
    "tool_use_id": _either("toolu_1", "toolu_2"), "content": _JSON,
    "is_error": _either(True, False)})

_USAGE = st.fixed_dictionaries({}, optional={
    "input_tokens": _either(3, 0, -1), "output_tokens": _either(5, True),
    "cache_read_input_tokens": _either(7), "cache_creation_input_tokens": _either(11),
    "cache_creation": st.one_of(st.fixed_dictionaries(
        {"ephemeral_1h_input_tokens": _either(4, 40)}), _JSON),
    "speed": _either("fast", "standard"), "inference_geo": _either("us", "global")})

_MESSAGE = st.fixed_dictionaries({}, optional={
    "id": _either("msg_1"), "model": _either("claude-opus-4-5"),
    "content": st.one_of(st.lists(_BLOCKS, max_size=3),
                         _either("[Request interrupted by user]", "hi", "stop hook x")),
    "stop_reason": _either("end_turn", "tool_use", None, "pause_turn"),
    "usage": st.one_of(_USAGE, _JSON)})

_LINES = st.fixed_dictionaries({}, optional={
    "type": _either("user", "assistant", "system", "attachment", "cost-state", "progress"),
    "uuid": _either("u1"), "timestamp": _either("2026-01-01T00:00:00Z"),
    "isSidechain": _either(True, False), "isMeta": _either(True),
    "isCompactSummary": _either(True), "isApiErrorMessage": _either(True),
    "subtype": _either("stop_hook_summary"), "preventedContinuation": _either(True),
    "cwd": _either("/home/dev"), "requestId": _either("req_1"), "totalCostUSD": _JSON,
    "message": st.one_of(_MESSAGE, _JSON),
    "attachment": st.one_of(st.fixed_dictionaries({}, optional={
        "type": _either("goal_status", "skill_listing"), "met": _either(True, False),
        "sentinel": _either(True), "condition": _either("tests pass"),
        "reason": _either("not yet")}), _JSON),
    "other": _JSON})


@settings(max_examples=400, deadline=None)
@given(entry=_LINES)
def test_any_line_gets_the_event_parse_line_gives_or_is_left_to_it(
        entry: dict[str, Any]) -> None:
    same_event(orjson.dumps(entry))
