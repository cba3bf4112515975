"""Stand-ins for tool results never change a count of the engine's ToolRepeatCounter."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.engine import stand_ins as standins
from loop_killer.engine.calls import REFUSED_MARK
from loop_killer.engine.stand_ins import ToolCounts
from loop_killer.engine.tool_repeat import ToolRepeatCounter
from loop_killer.engine.transcript import (
    AssistantPart,
    Event,
    ToolCall,
    ToolResult,
    ToolResults,
    TurnStart,
    UnreadResult,
)

# Outputs that differ in bytes but not once masked (times, durations), and outputs that
# really differ; errors, refusals, block lists, and a polling tool that is never counted.
OUTPUTS: list[tuple[Any, bool]] = [
    ("FAIL 1 failing", True), ("FAIL 1 failing", False), ("ok", False),
    ("done at 2026-03-01T09:00:01Z in 1.2s", False),
    ("done at 2026-03-01T09:07:45Z in 3.9s", False),
    ("done at 2026-03-01T09:07:45Z in 3.9s, 2 files", False),
    ([{"type": "text", "text": "block output"}], False),
    ([{"type": "text", "text": "block output"}, {"type": "image", "source": {}}], False),
    (f"PreToolUse:Bash hook error: {REFUSED_MARK}: same call", True),
    ("\x1b[31mred\x1b[0m 0x7ffd12345678", False), ("red 0x7ffd99999999", False),
]
CALLS: list[tuple[str, Any]] = [("Bash", {"command": "npm test"}),
                                ("Bash", {"command": "npm  test", "timeout": 5}),
                                ("Read", {"file_path": "/a.py"}), ("TaskOutput", {"id": 1}),
                                ("Bash", {"command": "ls"})]

step = st.one_of(
    st.tuples(st.just("round"), st.integers(0, len(CALLS) - 1),
              st.integers(0, len(OUTPUTS) - 1), st.booleans()),
    st.tuples(st.just("prompt"), st.just(0), st.just(0), st.just(False)),
    st.tuples(st.just("meta"), st.just(0), st.just(0), st.just(False)),
)


def events(steps: list[tuple[str, int, int, bool]], unread_at: frozenset[int] = frozenset()
           ) -> list[Event]:
    """The rounds' events; the results of the steps ``unread_at`` left in their lines."""
    out: list[Event] = []
    for n, (kind, call, output, early) in enumerate(steps):
        if kind != "round":
            out.append(TurnStart(f"u{n}", "t", "prompt" if kind == "prompt" else "meta", "x"))
            continue
        name, tool_input = CALLS[call]
        content, is_error = OUTPUTS[output]
        part = AssistantPart(f"m{n}", f"a{n}", "t", "", True, False,
                             (ToolCall(f"id{n}", name, tool_input),))
        if n in unread_at:
            content, is_error = unread(f"id{n}", content, is_error), False
        result = ToolResults(f"r{n}", "t", (ToolResult(f"id{n}", content, is_error),))
        out += [result, part] if early else [part, result]  # early: result before its call
    return out


def counts(feed: list[Event], *, through: bool, max_held: int | None = None
           ) -> list[tuple[str, str, int]]:
    """What the counter said of each result: fed directly (the counter's own pairing of
    calls and results is the reference) or through stand-ins."""
    counter = ToolRepeatCounter()
    counts = ToolCounts(counter, max_held=max_held)
    feed_one = counts.feed if through else counter.feed
    return [(r.tool_use_id, r.call, r.count) for event in feed for r in feed_one(event)]


@settings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=40))
def test_counts_are_the_same_with_and_without_stand_ins(
        steps: list[tuple[str, int, int, bool]]) -> None:
    feed = events(steps)
    assert counts(feed, through=True) == counts(feed, through=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(step, max_size=40))
def test_counts_stay_the_same_when_contents_give_way_to_keys(
        steps: list[tuple[str, int, int, bool]]) -> None:
    feed = events(steps)
    # Nothing held: every content is keyed at once.
    assert counts(feed, through=True, max_held=0) == counts(feed, through=False)


def test_identical_outputs_are_never_masked(monkeypatch: Any) -> None:
    calls: list[object] = []
    real = standins.result_key

    def counting(content: object, *, is_error: bool) -> str:
        calls.append(content)
        return real(content, is_error=is_error)

    monkeypatch.setattr(standins, "result_key", counting)
    feed = events([("round", 0, 0, False)] * 5 + [("round", 2, 2, False)])
    assert [c for _, _, c in counts(feed, through=True)] == [1, 2, 3, 4, 5, 1]
    assert calls == []


def test_outputs_equal_once_masked_count_as_the_same() -> None:
    feed = events([("round", 0, 3, False), ("round", 0, 4, False), ("round", 1, 3, False),
                   ("round", 0, 5, False)])
    assert [c for _, _, c in counts(feed, through=True)] == [1, 2, 3, 1]
    assert counts(feed, through=True) == counts(feed, through=False)


def unread(tool_use_id: str, content: Any, is_error: bool) -> UnreadResult:
    """A result left in its line, as ``loop-killer scan`` hands it on."""
    line = orjson.dumps({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": tool_use_id, "type": "tool_result", "content": content,
         "is_error": is_error}]}, "uuid": "u", "timestamp": "t"})
    return UnreadResult(line, tool_use_id)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(step, st.booleans()), max_size=40))
def test_unread_results_count_as_read_ones(
        steps: list[tuple[tuple[str, int, int, bool], bool]]) -> None:
    rounds = [s for s, _ in steps]
    left = frozenset(n for n, (_, leave) in enumerate(steps) if leave)
    plain = counts(events(rounds), through=False)
    lazy = counts(events(rounds, unread_at=left), through=True)
    refusals = {f"id{n}" for n, (kind, _, output, _) in enumerate(rounds)
                if kind == "round" and REFUSED_MARK in str(OUTPUTS[output][0])}
    assert len(lazy) == len(plain)
    for (tool_use_id, call, count), (_, _, was) in zip(lazy, plain, strict=True):
        # A refusal counts nothing; an unread one, first of its call in a turn, counts 1
        # (and the call's refusals after it say 1 where they would say 0). The call's next
        # real result counts 1 either way, so no loop can tell.
        assert count == was or (tool_use_id in refusals and (count, was) == (1, 0)), call


def test_an_unread_first_result_is_never_read() -> None:
    counts = ToolCounts(ToolRepeatCounter())
    part = AssistantPart("m", "a", "t", "", True, False, (ToolCall("id1", "Bash",
                                                                     {"command": "ls"}),))
    broken = UnreadResult(b"{not json", "id1")
    fed = counts.feed(part) + counts.feed(ToolResults("r", "t", (ToolResult(
        "id1", broken, False),)))
    assert [r.count for r in fed] == [1]
    # Compared with the next result, it is read: a broken line equals no real output.
    part2 = AssistantPart("m2", "a2", "t", "", True, False, (ToolCall("id2", "Bash",
                                                                       {"command": "ls"}),))
    fed = counts.feed(part2) + counts.feed(ToolResults("r2", "t", (ToolResult(
        "id2", "file.txt", False),)))
    assert [r.count for r in fed] == [1]


def test_outputs_equal_in_python_but_not_in_json_are_not_the_same() -> None:
    counts = ToolCounts(ToolRepeatCounter())
    found = []
    for n, content in enumerate([True, 1, 1.0, [{"type": "image", "w": 1}],
                                 [{"type": "image", "w": 1.0}]]):
        found += counts.feed(AssistantPart(f"m{n}", f"a{n}", "t", "", True, False,
                                           (ToolCall(f"id{n}", "Read", {"p": 1}),)))
        found += counts.feed(ToolResults(f"r{n}", "t", (ToolResult(f"id{n}", content,
                                                                   False),)))
    assert [r.count for r in found] == [1, 1, 1, 1, 1]


def test_one_pairing_of_calls_and_results_as_the_counter_pairs_them() -> None:
    # A call id given twice in one reply, its result early; a thousand calls waiting.
    twice = [TurnStart("u", "t", "prompt", "x"),
             ToolResults("r0", "t", (ToolResult("c", "out", False),)),
             AssistantPart("m", "a", "t", "", True, False,
                           (ToolCall("c", "Read", {"p": 1}), ToolCall("c", "Read", {"p": 1}))),
             ToolResults("r1", "t", (ToolResult("c", "out", False),))]
    waiting = [AssistantPart(f"m{n}", f"a{n}", "t", "", True, False,
                             (ToolCall(f"p{n}", "Bash", {"command": f"echo {n}"}),))
               for n in range(1000)]
    waiting += [ToolResults("rx", "t", (ToolResult("x", "out", False),)),
                AssistantPart("mx", "ax", "t", "", True, False,
                              (ToolCall("x", "Bash", {"command": "ls"}),)),
                ToolResults("rp", "t", (ToolResult("p0", "0", False),))]
    for feed in (twice, waiting):
        assert counts(feed, through=True) == counts(feed, through=False)
        assert counts(feed, through=False)  # (something was counted)


def test_a_result_that_cannot_be_read_again_is_a_broken_one() -> None:
    def gone() -> bytes:
        raise OSError("the file is gone")

    assert UnreadResult(gone, "id1").read() == (UnreadResult.BROKEN, True)
    line = unread("id1", "3 passed", False).source
    assert UnreadResult(lambda: line, "id1").read() == ("3 passed", False)


def test_results_read_again_from_their_file_take_no_room() -> None:
    # Kept for comparison, a result that can be read again holds no bytes: it is never
    # read just to make room, however many there are.
    read: list[str] = []

    def again(tool_use_id: str, line: bytes) -> UnreadResult:
        def source() -> bytes:
            read.append(tool_use_id)
            return line  # (never called: nothing is compared)
        return UnreadResult(source, tool_use_id)

    counts = ToolCounts(ToolRepeatCounter(), max_held=64)
    for n in range(50):
        call = ToolCall(f"id{n}", "Bash", {"command": f"ls {n}"})
        line = unread(f"id{n}", "x" * 200, False).source
        assert isinstance(line, bytes)
        fed = counts.feed(AssistantPart(f"m{n}", f"a{n}", "t", "", True, False, (call,)))
        fed += counts.feed(ToolResults("", "", (ToolResult(f"id{n}", again(f"id{n}", line),
                                                           False),)))
        assert [r.count for r in fed] == [1]
    assert read == []
