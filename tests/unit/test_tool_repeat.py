"""The tool-repeat rule (engine/tool_repeat.py): what is the same call, what is the same
result, how counts grow, reset and are refused, and how transcript events feed it."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.engine import masking
from loop_killer.engine.calls import (
    ANSWERED_BY_PERSON,
    REFUSED_MARK,
    call_key,
    call_label,
    is_ignored,
    is_refusal,
)
from loop_killer.engine.masking import result_key
from loop_killer.engine.tool_repeat import (
    DEFAULT_IGNORED,
    MAX_CALLS,
    TOOL_REPEAT_BLOCK,
    TOOL_REPEAT_WARN,
    ToolRepeat,
    ToolRepeatCounter,
    moved_to,
    repeat_label,
)
from loop_killer.engine.transcript import (
    AssistantPart,
    Reprompt,
    ToolCall,
    ToolResult,
    ToolResults,
    TurnStart,
    parse_line,
)
from transcripts import BASH, FIXTURES, Transcript

FAIL = "FAIL test/auth/login.test.js\n  ✕ login fails with a wrong password (12 ms)"


def bash(command: str, **extra: object) -> dict[str, object]:
    return {"command": command, **extra}


def repeat(counter: ToolRepeatCounter, times: int, name: str = "Bash",
           tool_input: object = None, content: object = FAIL, is_error: bool = True
           ) -> list[int]:
    tool_input = bash("npm test") if tool_input is None else tool_input
    return [counter.record(name, tool_input, content, is_error).count for _ in range(times)]


# -- the constants ---------------------------------------------------------------------------


def test_the_rule_keeps_the_loop_guard_defaults() -> None:
    assert (TOOL_REPEAT_WARN, TOOL_REPEAT_BLOCK) == (3, 4)


def test_no_tool_is_ignored_by_default_the_polling_ones_wait_instead() -> None:
    """Polling tools are timed (engine.waiting), questions counted unless the person
    answered: nothing is left out unless the person lists it."""
    for name in ("TaskOutput", "BashOutput", "ScheduleWakeup", "AskUserQuestion", "Monitor",
                 "Bash", "Read", "Edit", "Grep", "WebFetch", "mcp__github__get_issue"):
        assert not is_ignored(name, DEFAULT_IGNORED)


# -- call_key --------------------------------------------------------------------------------


def test_a_bash_call_is_its_command_with_whitespace_collapsed() -> None:
    assert call_key("Bash", bash("npm   test\n")) == call_key("Bash", bash(" npm test"))
    assert call_key("Bash", bash("npm test")) == "Bash npm test"


def test_a_bash_call_ignores_its_description_and_timeout() -> None:
    assert call_key("Bash", bash("npm test", description="run tests")) == call_key(
        "Bash", bash("npm test", description="try again", timeout=60000))


def test_different_commands_are_different_calls() -> None:
    assert call_key("Bash", bash("npm test")) != call_key("Bash", bash("npm test -- -u"))


def test_other_tools_compare_their_whole_input_as_canonical_json() -> None:
    assert call_key("Read", {"file_path": "a", "limit": 5}) == call_key(
        "Read", {"limit": 5, "file_path": "a"})
    assert call_key("Read", {"file_path": "a"}) != call_key("Read", {"file_path": "b"})
    assert call_key("Grep", {"pattern": "x"}) != call_key("Glob", {"pattern": "x"})


def test_odd_inputs_still_make_a_key() -> None:
    assert call_key("Bash", {"cmd": "ls"}) == 'Bash {"cmd":"ls"}'
    assert call_key("mcp__x__y", None) == "mcp__x__y null"
    assert call_key("T", ["a", 1]) == 'T ["a",1]'


def test_call_label_is_one_short_printable_line() -> None:
    assert call_label("Bash", bash("npm\ntest")) == "Bash: npm test"
    assert call_label("Read", {"file_path": "/a/b"}) == "Read: /a/b"
    long = call_label("Bash", bash("x" * 500), limit=40)
    assert len(long) == 40 and long.endswith("…")
    assert "\x1b" not in call_label("Bash", bash("echo \x1b[31mred"))
    assert call_label("mcp__s__t", {"n": 1}) == 'mcp__s__t {"n":1}'


# -- result_key ------------------------------------------------------------------------------


@pytest.mark.parametrize(("first", "second"), [
    ("\x1b[31mFAIL\x1b[0m login", "FAIL login"),
    ("run at 2026-11-30T16:48:35.123Z: FAIL", "run at 2026-12-01T09:01:02Z: FAIL"),
    ("[10:15:32] FAIL", "[23:59:01] FAIL"),
    ("Mon Nov 30 16:48:35 UTC 2026", "Mon Nov 30 16:49:01 UTC 2026"),
    ("3 failed in 1.2s", "3 failed in 0.87s"),
    ("✕ login (45 ms)", "✕ login (3 ms)"),
    ("real\t0m0.003s", "real\t1m2.5s"),
    ("<object at 0x7ffd1234abcd>", "<object at 0x55aa00ff9911>"),
    ("goroutine at 0xc000123456", "goroutine at 0xc000abcdef"),
    ("ptr=0x00007ffd12345678", "ptr=0x00007ffd9abcdef0"),
    ("started at 1712345678", "started at 1712349999"),
    ('{"ts": 1712345678}', '{"ts": 1712349999}'),
    ("created_at=1712345678123", "created_at=1712349999000"),
    ("t=1712345678.123456 done", "t=1712349999.000001 done"),
    ("slept until 1712345678.25", "slept until 1712349999.75"),
    ("now 1712345678.123", "now 1712349999.456"),
])
def test_results_differing_only_in_noise_are_the_same(first: str, second: str) -> None:
    assert result_key(first, is_error=True) == result_key(second, is_error=True)


@pytest.mark.parametrize(("first", "second"), [
    ("12 failed", "11 failed"),
    ("src/a.py:10:15: E501", "src/a.py:22:15: E501"),  # line:column is not a clock
    ("I have 3 sandwiches", "I have 4 sandwiches"),
    ("size 0x1F", "size 0x2F"),  # a short hex literal is not an address
    ("crc 0x1A2B3C4D", "crc 0x5E6F7A8B"),  # nor a CRC or a register (8 digits)
    ("Backfilled 2024-01-01..2024-01-07", "Backfilled 2024-01-08..2024-01-14"),  # a date
    ("release date: 2026-12-01", "release date: 2026-12-08"),  # alone is the news
    ("balance 0x" + "0" * 62 + "64", "balance 0x" + "0" * 62 + "c8"),  # nor a 256-bit value
    ("tx 0x" + "ab" * 32, "tx 0x" + "cd" * 32),  # nor a hash
    ("exit 1", "exit 2"),
])
def test_results_differing_in_substance_are_different(first: str, second: str) -> None:
    assert result_key(first, is_error=False) != result_key(second, is_error=False)


def test_a_structured_output_s_time_taken_is_masked() -> None:
    """Glob's tool_response carries durationMs, WebSearch's durationSeconds: twelve
    identical Globs for a missing file were never counted (found by an adversarial pass)."""
    def glob(ms: int) -> dict[str, object]:
        return {"filenames": [], "durationMs": ms, "numFiles": 0, "truncated": False}

    assert result_key(glob(12), is_error=False) == result_key(glob(31), is_error=False)
    assert result_key({"results": ["a"], "durationSeconds": 1.5}, is_error=False) == (
        result_key({"results": ["a"], "durationSeconds": 0.2}, is_error=False))
    assert result_key({"numFiles": 1}, is_error=False) != result_key(
        {"numFiles": 2}, is_error=False)  # a count is no duration
    for value in ({"duration": 12.0}, {"trialDurationDays": 14}):  # values, not times taken
        other = {key: 2 * number for key, number in value.items()}
        assert result_key(value, is_error=False) != result_key(other, is_error=False)


def test_what_claude_code_appends_to_a_subagent_s_report_is_masked() -> None:
    def report(text: str, agent: str, tokens: int, ms: int) -> str:
        return (f"[Subagent hand-back] The report follows:\n  {text}\nagentId: {agent} "
                f"(use SendMessage with to: '{agent}', summary: '<5-10 word recap>' to "
                f"continue this agent)\n<usage>subagent_tokens: {tokens}\ntool_uses: 2\n"
                f"duration_ms: {ms}</usage>")

    same = "login.test.js still fails: expected true, got false."
    first = result_key(report(same, "ab57d187fa5a86108", 20, 379), is_error=False)
    assert first == result_key(report(same, "c0ffee12ab34cd567", 31, 1204), is_error=False)
    assert first != result_key(report("login.test.js passes now.", "c0ffee12ab34cd567", 31,
                                      1204), is_error=False)
    # As 2.1.39 wrote it (a real transcript): a 7-digit id, total_tokens.
    older = ("  Found 2 failing tests.\nagentId: {} (for resuming to continue this agent's "
             "work if needed)\n<usage>total_tokens: {}\ntool_uses: 2\nduration_ms: {}</usage>")
    assert result_key(older.format("a881341", 43179, 32855), is_error=False) == result_key(
        older.format("b9921f0", 40012, 29120), is_error=False)


def test_an_error_and_a_success_with_the_same_text_are_different_results() -> None:
    assert result_key("done", is_error=True) != result_key("done", is_error=False)


def test_text_blocks_compare_by_their_text() -> None:
    blocks = [{"type": "text", "text": "FAIL in 1.2s"}]
    assert result_key(blocks, is_error=True) == result_key("FAIL in 3s", is_error=True)


def test_structured_results_are_masked_inside_before_comparing() -> None:
    first = {"stdout": "\x1b[1mok\x1b[0m in 2s", "stderr": "", "interrupted": False}
    second = {"interrupted": False, "stderr": "", "stdout": "ok in 5s"}
    assert result_key(first, is_error=False) == result_key(second, is_error=False)
    assert result_key({"stdout": "a"}, is_error=False) != result_key({"stdout": "b"},
                                                                     is_error=False)


def test_image_blocks_count_by_their_data() -> None:
    def image(data: str) -> list[dict[str, object]]:
        return [{"type": "image", "source": {"type": "base64", "data": data}}]

    assert result_key(image("AAAA"), is_error=False) == result_key(image("AAAA"), is_error=False)
    assert result_key(image("AAAA"), is_error=False) != result_key(image("BBBB"), is_error=False)


# -- counting --------------------------------------------------------------------------------


def test_the_same_call_with_the_same_result_counts_up() -> None:
    assert repeat(ToolRepeatCounter(), 5) == [1, 2, 3, 4, 5]


def test_noise_in_the_output_does_not_stop_the_count() -> None:
    counter = ToolRepeatCounter()
    counts = [counter.record("Bash", bash("npm test"), f"FAIL after {n}.{n}s at 10:0{n}:00",
                             True).count for n in range(4)]
    assert counts == [1, 2, 3, 4]


def test_a_different_result_is_progress_and_restarts_the_count() -> None:
    counter = ToolRepeatCounter()
    counts = [counter.record("Bash", bash("npm test"), f"{failed} failed", True).count
              for failed in (5, 5, 4, 4, 4, 3)]
    assert counts == [1, 2, 1, 2, 3, 1]


def test_error_then_success_is_progress() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 3, content="x", is_error=True)
    assert counter.record("Bash", bash("npm test"), "x", False).count == 1


def test_other_calls_in_between_do_not_reset_a_call() -> None:
    counter = ToolRepeatCounter()
    seen = []
    for n in range(4):
        seen.append(counter.record("Bash", bash("npm test"), FAIL, True).count)
        counter.record("Read", {"file_path": f"src/{n}.js"}, "code", False)
        counter.record("Grep", {"pattern": f"n{n}"}, "no matches", False)
    assert seen == [1, 2, 3, 4]


def test_a_sweep_of_different_calls_is_never_a_loop() -> None:
    counter = ToolRepeatCounter()
    flags = [counter.record("Bash", bash(f"npm test -- --shard={n}"), FAIL, True).count
             for n in range(20)]
    files = [counter.record("Read", {"file_path": f"src/{n}.js"}, "same", False).count
             for n in range(20)]
    assert set(flags) == set(files) == {1}
    assert all(counter.refusal("Bash", bash(f"npm test -- --shard={n}")) is None
               for n in range(20))


def test_the_warning_comes_on_the_third_identical_result_only() -> None:
    counter = ToolRepeatCounter()
    warned = [counter.record("Bash", bash("npm test"), FAIL, True).warn for _ in range(5)]
    assert warned == [False, False, True, False, False]


def test_the_next_attempt_is_refused_after_the_fourth_identical_result() -> None:
    counter = ToolRepeatCounter()
    for count in range(1, TOOL_REPEAT_BLOCK):
        counter.record("Bash", bash("npm test"), FAIL, True, f"toolu_{count}")
        assert counter.refusal("Bash", bash("npm test")) is None
    fourth = counter.record("Bash", bash("npm test"), FAIL, True, "toolu_4")
    assert fourth.blocked
    refusal = counter.refusal("Bash", bash("npm  test", description="again"), "toolu_5")
    assert refusal == ToolRepeat("Bash npm test", "Bash", "toolu_5", 4)


def test_a_changed_call_is_not_refused() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    assert counter.refusal("Bash", bash("npm test -- --verbose")) is None
    assert counter.refusal("Read", {"file_path": "package.json"}) is None


def test_the_refusal_holds_while_other_calls_run() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    counter.record("Read", {"file_path": "src/a.js"}, "code", False)
    assert counter.refusal("Bash", bash("npm test")) is not None


def test_our_own_refusal_coming_back_as_a_result_leaves_the_count_alone() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    reason = f"PreToolUse:Bash hook error: {REFUSED_MARK} to run Bash: npm test again"
    assert counter.record("Bash", bash("npm test"), reason, True).count == 4
    assert counter.refusal("Bash", bash("npm test")) is not None
    assert is_refusal([{"type": "text", "text": reason}], is_error=True)
    assert not is_refusal(reason, is_error=False)  # a tool that merely prints the words


def test_the_person_speaking_resets_everything() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    repeat(counter, 2, name="Read", tool_input={"file_path": "a"}, content="x", is_error=False)
    counter.reset()
    assert counter.refusal("Bash", bash("npm test")) is None
    assert len(counter) == 0
    assert repeat(counter, 1) == [1]


def test_ignored_tools_are_never_counted_nor_refused() -> None:
    counter = ToolRepeatCounter(ignored=frozenset({"TaskOutput"}))
    counts = [counter.record("TaskOutput", {"task_id": "b1"}, "running", False).count
              for _ in range(10)]
    assert counts == [0] * 10
    assert counter.refusal("TaskOutput", {"task_id": "b1"}) is None
    assert len(counter) == 0


def test_the_ignored_list_is_configurable_with_patterns() -> None:
    counter = ToolRepeatCounter(ignored=frozenset({"mcp__ci__*", "Bash"}))
    assert repeat(counter, 5, name="mcp__ci__status", tool_input={}) == [0] * 5
    assert repeat(counter, 2) == [0, 0]
    assert repeat(counter, 2, name="Grep", tool_input={}) == [1, 2]  # not listed


def test_mcp_tools_count_like_any_other() -> None:
    counter = ToolRepeatCounter()
    assert repeat(counter, 4, name="mcp__github__get_issue", tool_input={"n": 9},
                  content=[{"type": "text", "text": "Not Found"}]) == [1, 2, 3, 4]
    assert counter.refusal("mcp__github__get_issue", {"n": 9}) is not None


def test_subagents_count_apart_with_one_counter_per_scope() -> None:
    scopes = {"main": ToolRepeatCounter(), "agent-1": ToolRepeatCounter()}
    for _ in range(2):
        scopes["main"].record("Bash", bash("npm test"), FAIL, True)
        scopes["agent-1"].record("Bash", bash("npm test"), FAIL, True)
    assert scopes["main"].count("Bash", bash("npm test")) == 2
    assert scopes["agent-1"].count("Bash", bash("npm test")) == 2


def test_only_the_most_recent_calls_are_kept() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    for n in range(MAX_CALLS):
        counter.record("Read", {"file_path": f"f{n}"}, "x", False)
    assert len(counter) == MAX_CALLS
    assert counter.refusal("Bash", bash("npm test")) is None  # forgotten: fail open


def test_a_call_seen_again_is_kept_as_recent() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 3)
    for n in range(MAX_CALLS - 1):
        counter.record("Read", {"file_path": f"f{n}"}, "x", False)
    repeat(counter, 1)
    for n in range(MAX_CALLS - 1):
        counter.record("Grep", {"pattern": f"p{n}"}, "x", False)
    assert counter.refusal("Bash", bash("npm test")) is not None


# -- the state kept between hook processes -----------------------------------------------------


def test_the_state_round_trips_through_json() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    repeat(counter, 2, name="Read", tool_input={"file_path": "a"}, content="x", is_error=False)
    restored = ToolRepeatCounter.from_state(orjson.loads(orjson.dumps(counter.to_state())))
    assert restored.refusal("Bash", bash("npm test")) is not None
    assert restored.record("Read", {"file_path": "a"}, "x", False).count == 3
    assert restored.record("Bash", bash("npm test"), FAIL, True).count == 5


def test_the_state_is_small_and_holds_no_output() -> None:
    counter = ToolRepeatCounter()
    secret = "password=hunter2 " * 1000
    for n in range(MAX_CALLS + 50):
        counter.record("Write", {"file_path": f"f{n}", "content": secret}, secret, False)
    data = orjson.dumps(counter.to_state())
    assert b"hunter2" not in data
    assert len(data) < 20_000


@pytest.mark.parametrize("state", [
    None, [], "x", {"v": 99, "calls": []}, {"v": 1}, {"v": 1, "calls": "x"},
    {"v": 1, "calls": [["a", "b"], ["a", "b", "c"], ["a", "b", True], [1, "b", 3],
                       ["a", "b", -1], ["a", "b", 10**9]]},
])
def test_an_unreadable_state_is_an_empty_counter(state: object) -> None:
    assert len(ToolRepeatCounter.from_state(state)) == 0


def test_a_restored_counter_keeps_its_ignored_list() -> None:
    counter = ToolRepeatCounter.from_state({"v": 1, "calls": []}, ignored=frozenset({"Bash"}))
    assert counter.ignored == frozenset({"Bash"})
    assert repeat(counter, 4) == [0] * 4


@given(st.lists(st.tuples(st.sampled_from(["npm test", "ls", "make"]),
                          st.sampled_from(["A", "B"]), st.booleans()), max_size=40))
def test_restoring_after_every_step_changes_nothing(steps: list[tuple[str, str, bool]]) -> None:
    """What the hooks do (a new process per result) counts exactly like one counter."""
    live = ToolRepeatCounter()
    state = ToolRepeatCounter().to_state()
    for command, output, error in steps:
        kept = ToolRepeatCounter.from_state(state)
        assert kept.record("Bash", bash(command), output, error) == live.record(
            "Bash", bash(command), output, error)
        state = kept.to_state()


# -- transcript events ------------------------------------------------------------------------


def call(tool_use_id: str, command: str = "npm test", name: str = "Bash") -> AssistantPart:
    return AssistantPart(f"msg_{tool_use_id}", f"u_{tool_use_id}", "", "", True, False,
                         (ToolCall(tool_use_id, name, bash(command)),))


def result(tool_use_id: str, content: object = FAIL, is_error: bool = True) -> ToolResults:
    return ToolResults(f"r_{tool_use_id}", "", (ToolResult(tool_use_id, content, is_error),))


def prompt(kind: str = "prompt") -> TurnStart:
    return TurnStart("p", "", kind, "go on")  # type: ignore[arg-type]


def test_feed_pairs_calls_with_their_results() -> None:
    counter = ToolRepeatCounter()
    counts = []
    for n in range(4):
        assert counter.feed(call(f"t{n}")) == []
        counts += counter.feed(result(f"t{n}"))
    assert [(r.tool_use_id, r.count) for r in counts] == [("t0", 1), ("t1", 2), ("t2", 3),
                                                           ("t3", 4)]
    assert counts[-1] == ToolRepeat("Bash npm test", "Bash", "t3", 4)


def test_feed_gives_one_repeat_per_result_of_parallel_calls() -> None:
    counter = ToolRepeatCounter()
    both = AssistantPart("m", "u", "", "", True, False, (
        ToolCall("a", "Bash", bash("npm test")), ToolCall("b", "Read", {"file_path": "x"})))
    counter.feed(both)
    found = counter.feed(ToolResults("r", "", (ToolResult("b", "x", False),
                                               ToolResult("a", FAIL, True))))
    assert [(r.name, r.count) for r in found] == [("Read", 1), ("Bash", 1)]


def test_feed_counts_a_result_written_before_its_call() -> None:
    counter = ToolRepeatCounter()
    assert counter.feed(result("t1")) == []
    assert [r.count for r in counter.feed(call("t1"))] == [1]


def test_feed_resets_on_a_prompt_but_not_on_re_prompts_or_meta_lines() -> None:

    counter = ToolRepeatCounter()
    for n, between in enumerate([Reprompt("rp", "", "Stop hook feedback:\n[x]: not met"),
                                 prompt("meta"), prompt("compact")]):
        counter.feed(call(f"t{n}"))
        counter.feed(result(f"t{n}"))
        counter.feed(between)
    counter.feed(call("t9"))
    assert [r.count for r in counter.feed(result("t9"))] == [4]
    counter.feed(prompt())
    counter.feed(call("t10"))
    assert [r.count for r in counter.feed(result("t10"))] == [1]


def test_feed_reads_real_transcript_lines() -> None:
    transcript = Transcript()
    transcript.prompt()
    for _ in range(4):
        transcript.reply("Running the tests.", tools=[BASH])
        transcript.tool_result(transcript.last_tool_use_id, FAIL, is_error=True)
    counter = ToolRepeatCounter()
    counts = []
    for raw in transcript.lines:
        event = parse_line(raw)
        if event is not None:
            counts += [r.count for r in counter.feed(event)]
    assert counts == [1, 2, 3, 4]


def test_feed_over_a_real_goal_session_counts_across_its_re_prompts() -> None:
    """A real 2.1.328 /goal session: the same echo three times, one per re-prompt, then
    a changed command. Re-prompts do not reset, so the third is the warning."""
    paths = sorted((FIXTURES / "claude-code-2.1.328" / "goal-with-tools").rglob("*.jsonl"))
    assert paths
    counter = ToolRepeatCounter()
    counts = []
    for path in paths:
        if path.parent.name == "subagents":
            continue
        for raw in path.read_bytes().splitlines():
            event = parse_line(raw)
            if event is not None:
                counts += [r.count for r in counter.feed(event)]
    assert counts == [1, 2, TOOL_REPEAT_WARN, 1]


# The masking patterns as first written (lookbehind first): the faster forms in the
# engine must find exactly the same spans.
_PLAIN_PATTERNS = {
    "_EPOCH": r"(?<![\w.])1\d{9}(?:\d{3})?(?:\.\d+)?(?![\w.])",
    "_CLOCK": r"(?<![\w:.])(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?"
              r"(?:\s?[AaPp][Mm])?(?![\w:])",
    "_DURATION": r"(?<![\w.])(?:\d+(?:\.\d+)?\s?(?:ns|[µμu]s|ms|seconds?|secs?|s|minutes?"
                 r"|mins?|m(?=\d)|hours?|hrs?|h)(?![^\W\d_]))+",
}
_PIECES = [*"0123456789:.-TZ+ amphsµμunxAPM_\n", "sec", "min", "hour", "hrs", "ms", "ns",
           "seconds", "1700000000", "12:34", "23:59:59.5", "2026-11-30T10:00:00Z",
           "0x7ffd1234ab", "file.py:12:34", "24:00", "9:05 PM", "1h2m3s"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=16))
def test_the_fast_masking_patterns_match_their_plain_forms(pieces):
    import re

    text = "".join(pieces)
    for name, plain in _PLAIN_PATTERNS.items():
        fast = getattr(masking, name)
        assert re.sub(fast, "<x>", text) == re.sub(plain, "<x>", text), (name, text)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([*_PIECES, "\x1b[31m", "\x1b]0;t\x07", "0x", "ts=", "at ",
                                 *"\t\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\u00a0", "\u0661\u0662",
                                 "1 \x1cs", "5\x0bms", "12\t:", "x0", "0X"]),
                max_size=16))
def test_masking_skips_a_pattern_only_where_it_cannot_match(pieces):
    """Each pattern is tried only where a character it needs is in the text, and ``re``
    only where one of them may match (``_may_match``, every whitespace of ``\\s``
    included): the same output as trying every pattern everywhere."""
    import re

    text = "".join(pieces)
    everywhere = masking._mask_noise(text, masking._ALL_NOISE)  # (test_masking_noise.py)
    everywhere = re.sub(masking._ANSI, "", everywhere)
    everywhere = re.sub(masking._ISO_MOMENT, "<time>", everywhere)
    everywhere = re.sub(masking._EPOCH, masking._epoch_or_not, everywhere)
    everywhere = re.sub(masking._CLOCK, "<time>", everywhere)
    everywhere = re.sub(masking._ADDRESS, "0x…", everywhere)
    everywhere = re.sub(masking._DURATION, "<duration>", everywhere)
    assert masking._mask(text) == everywhere


# -- issue 21: no false refusals -------------------------------------------------------------


@pytest.mark.parametrize("first, second", [
    # ls -l of a file growing past 1 GB: a size is not a time
    ("-rw-r--r-- 1 dev dev 1073741824 Dec  1 11:00 big.bin",
     "-rw-r--r-- 1 dev dev 1181116006 Dec  1 11:00 big.bin"),
    ("1073741824 bytes copied", "1395864371 bytes copied"),
    ("order id 1234567890", "order id 1987654321"),
    ("count: 1500000000", "count: 1500000001"),
])
def test_a_size_count_or_id_of_ten_digits_is_not_masked_as_a_time(first: str,
                                                                    second: str) -> None:
    assert result_key(first, is_error=False) != result_key(second, is_error=False)


def test_a_growing_file_polled_with_ls_is_never_warned_nor_refused() -> None:
    counter = ToolRepeatCounter()
    counts = [counter.record("Bash", bash("ls -l big.bin"),
                             f"-rw-r--r-- 1 dev dev {1_000_000_000 + n * 80_000_000} big.bin",
                             False).count for n in range(6)]
    assert counts == [1] * 6
    assert counter.refusal("Bash", bash("ls -l big.bin")) is None


def test_one_command_in_many_folders_is_many_calls() -> None:
    counter = ToolRepeatCounter()
    counts = [counter.record("Bash", bash("npm test"), "PASS 12 tests", False,
                             cwd=f"/repo/packages/p{n}").count for n in range(6)]
    assert counts == [1] * 6
    assert counter.refusal("Bash", bash("npm test"), cwd="/repo/packages/p5") is None
    # ...while the same command in the same folder is still the same call
    for _ in range(3):
        counter.record("Bash", bash("npm test"), "PASS 12 tests", False, cwd="/repo/packages/p5")
    refusal = counter.refusal("Bash", bash("npm test"), cwd="/repo/packages/p5")
    assert refusal is not None and refusal.count == 4
    assert repeat_label(refusal) == "Bash: npm test"


def test_a_check_after_each_edit_checks_something_new() -> None:
    counter = ToolRepeatCounter()
    counts = []
    for n in range(6):
        counter.record("Edit", {"file_path": "src/a.js", "old_string": f"v{n}",
                                "new_string": f"v{n + 1}"}, "The file was updated.", False)
        counts.append(counter.record("Bash", bash("npm test"), "PASS 12 tests", False).count)
    assert counts == [1] * 6
    assert counter.refusal("Bash", bash("npm test")) is None


def test_the_same_failing_check_with_nothing_changed_is_still_caught() -> None:
    counter = ToolRepeatCounter()
    counter.record("Edit", {"file_path": "src/a.js", "old_string": "a", "new_string": "b"},
                   "The file was updated.", False)
    counts = [counter.record("Bash", bash("npm test"), FAIL, True).count for _ in range(4)]
    assert counts == [1, 2, 3, 4]
    assert counter.refusal("Bash", bash("npm test")) is not None


def test_an_edit_that_failed_or_repeats_itself_changes_nothing() -> None:
    counter = ToolRepeatCounter()
    write = {"file_path": "src/a.js", "content": "same"}
    counts = []
    for _ in range(4):
        counter.record("Edit", {"file_path": "a", "old_string": "x", "new_string": "y"},
                       "String to replace not found", True)  # failed: no change
        counter.record("Write", write, "File written.", False)  # the same write again
        counts.append(counter.record("Bash", bash("npm test"), FAIL, True).count)
    # The first Write changed the file (before the first test run); its repeats did not.
    assert counts == [1, 2, 3, 4]


def test_refused_attempts_are_counted_per_call_and_kept_across_processes() -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    refused = counter.refusal("Bash", bash("npm test"))
    assert refused is not None
    assert [counter.note_refusal(refused) for _ in range(2)] == [1, 2]
    again = ToolRepeatCounter.from_state(counter.to_state())
    assert again.note_refusal(refused) == 3
    # A model that heeded one refusal and moved on is not stopped by another's first.
    other = ToolRepeat(call_key("Bash", bash("make")), "Bash", "", 4)
    assert again.note_refusal(other) == 1 and again.refused == 3
    again.reset()
    assert again.refused == 0
    # An older version's count of all calls is dropped: nothing is stopped by mistake.
    state = {**counter.to_state(), "refused": 2}
    assert ToolRepeatCounter.from_state(state).refused == 0


def test_a_state_file_of_the_earlier_shape_is_still_read() -> None:
    digest = "d" * 20
    counter = ToolRepeatCounter.from_state({"v": 1, "calls": [[digest, "r" * 20, 4]]})
    assert len(counter) == 1 and counter.refused == 0


def test_a_result_nested_too_deep_for_recursion_is_still_keyed() -> None:
    deep: object = "leaf 12:00:01"
    other: object = "leaf 13:14:15"
    for _ in range(5000):
        deep, other = [deep], [other]
    assert result_key(deep, is_error=False) == result_key(other, is_error=False)
    nested: object = {"k": 1}
    for n in range(3000):
        nested = {"a": nested, "b": [n]}
    assert result_key(nested, is_error=False).startswith("ok:")
    counter = ToolRepeatCounter()
    assert [counter.record("mcp__x__y", nested, nested, False).count
            for _ in range(2)] == [1, 2]


def test_a_huge_output_is_masked_in_bounded_time_and_still_compared() -> None:
    from loop_killer.engine.masking import MAX_MASKED

    noise = "12:00:01 " * (MAX_MASKED // 9 + 10)
    assert result_key(noise + "A", is_error=False) != result_key(noise + "B", is_error=False)
    assert result_key(noise + "A", is_error=False) == result_key(noise + "A", is_error=False)


# -- changes made other than by Claude Code's editing tools: measured (issue 30) -----------


def hook_record(counter: ToolRepeatCounter, name: str, tool_input: object, content: object,
                is_error: bool, tree: str) -> int:
    """A result as the PostToolUse hook counts it: the working tree's fingerprint
    (``tree``) is taken only when the result would repeat the call's last one."""
    from loop_killer.engine.calls import call_key
    from loop_killer.engine.tool_repeat import result_digest

    call = call_key(name, tool_input)
    result = result_digest(content, is_error=is_error)
    measured = tree if counter.would_repeat(call, name, result, failed=is_error,
                                            tool_input=tool_input) else None
    return counter.record_call(call, name, content, is_error, result=result,
                               tool_input=tool_input, tree=measured).count


@pytest.mark.parametrize("writer", [
    bash("python3 fix.py 3"), bash("npx prettier -w src"), bash("uv run ruff format"),
    {"command": "make format"}, "mcp__codex__codex", "mcp__ide__editFile",
], ids=["codemod", "prettier", "ruff format", "make format", "mcp codex", "mcp ide"])
def test_a_check_after_a_change_made_any_other_way_checks_something_new(writer) -> None:
    """Whoever changed the files, the fingerprint says so: the same passing test after
    each change is never warned (1, 2, 1, 2...: the first repeat has nothing to compare
    with)."""
    name, tool_input = (writer, {"n": 1}) if isinstance(writer, str) else ("Bash", writer)
    counter = ToolRepeatCounter()
    counts = []
    for n in range(8):
        hook_record(counter, name, tool_input, "done", False, tree=f"git:{n}")
        counts.append(hook_record(counter, "Bash", bash("pytest -q"), "5 passed", False,
                                  tree=f"git:{n}"))
    assert max(counts) < TOOL_REPEAT_WARN
    assert counter.refusal("Bash", bash("pytest -q")) is None


def test_the_same_failing_check_with_nothing_changed_on_disk_is_still_caught() -> None:
    counter = ToolRepeatCounter()
    counts = [hook_record(counter, "Bash", bash("npm test"), FAIL, True, tree="git:same")
              for _ in range(5)]
    assert counts == [1, 2, 3, 4, 5]
    assert counter.refusal("Bash", bash("npm test")) is not None


def test_failing_again_with_another_error_and_nothing_changed_is_a_repeat() -> None:
    """OpenHands' stuck test: one command failing with a different error each time (a
    flaky server: 503, a timeout, 502...) while nothing changed on disk."""
    counter = ToolRepeatCounter()
    errors = ["HTTP 503 Service Unavailable", "curl: (28) Operation timed out",
              "HTTP 502 Bad Gateway", "curl: (7) Failed to connect", "HTTP 500"]
    counts = [hook_record(counter, "Bash", bash("curl -f api/health"), error, True,
                          tree="git:same") for error in errors]
    assert counts == [1, 2, 3, 4, 5]
    assert counter.refusal("Bash", bash("curl -f api/health")) is not None


def test_failing_again_after_a_change_on_disk_or_unmeasured_is_a_new_check() -> None:
    counter = ToolRepeatCounter()
    counts = [hook_record(counter, "Bash", bash("npm test"), f"{n} failed", True,
                          tree=f"git:{n}") for n in range(5)]
    assert counts == [1, 2, 1, 1, 1]  # (the 2nd has no earlier fingerprint to compare)
    unmeasured = ToolRepeatCounter()  # the transcript's readers: the error must repeat
    assert [unmeasured.record("Bash", bash("npm test"), f"{n} failed", True).count
            for n in range(5)] == [1] * 5


def test_a_tree_that_cannot_be_fingerprinted_counts_as_changed() -> None:
    counter = ToolRepeatCounter()
    assert [hook_record(counter, "Bash", bash("npm test"), FAIL, True, tree="")
            for _ in range(6)] == [1] * 6


def test_a_call_seen_for_the_first_time_and_an_edit_are_never_measured() -> None:
    from loop_killer.engine.calls import call_key
    from loop_killer.engine.tool_repeat import result_digest

    counter = ToolRepeatCounter()
    call, result = call_key("Bash", bash("ls")), result_digest("a", is_error=False)
    assert not counter.would_repeat(call, "Bash", result, failed=False)
    counter.record("Bash", bash("ls"), "a", False)
    assert counter.would_repeat(call, "Bash", result, failed=False)
    assert not counter.would_repeat(call, "Bash", result_digest("b", is_error=False),
                                    failed=False)
    edit = {"file_path": "a.py", "old_string": "a", "new_string": "b"}
    counter.record("Edit", edit, "ok", False)
    assert not counter.would_repeat(call_key("Edit", edit), "Edit",
                                    result_digest("ok", is_error=False), failed=False)


def test_a_subagents_run_is_a_change_to_the_files() -> None:
    counter = ToolRepeatCounter()
    counts = []
    for n in range(6):
        counter.record("Task", {"prompt": f"fix the login test, attempt {n}"}, "done", False)
        counts.append(counter.record("Bash", bash("npm test"), FAIL, True).count)
    assert counts == [1] * 6


def test_two_writers_in_a_cycle_with_the_same_results_are_still_a_loop() -> None:
    """Configure-and-build, both writing a log git does not track, the same failure each
    round: nothing changed that git sees, so both are loops."""
    counter = ToolRepeatCounter()
    configure = bash("cmake -S . -B build > cmake.log 2>&1; tail -3 cmake.log")
    build = bash("make -C build 2>&1 | tee make.log | tail -5")
    rounds = [(hook_record(counter, "Bash", configure, "CMake Error", True, tree="git:t"),
               hook_record(counter, "Bash", build, "make: *** Error 2", True, tree="git:t"))
              for _ in range(5)]
    assert rounds == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]


@pytest.mark.parametrize("tool", sorted(ANSWERED_BY_PERSON))
def test_the_person_answering_a_question_lifts_a_refusal(tool: str) -> None:
    counter = ToolRepeatCounter()
    repeat(counter, 4)
    refused = counter.refusal("Bash", bash("npm test"))
    assert refused is not None
    counter.note_refusal(refused)
    answer = counter.record(tool, {"questions": []}, "User answered: Started postgres, retry",
                            False)
    assert answer.count == 0  # never counted itself
    assert counter.refusal("Bash", bash("npm test")) is None and counter.refused == 0
    assert repeat(counter, 1) == [1]


@pytest.mark.parametrize(("command", "cwd", "folder"), [
    ("cd /repo/api && npm test", "/repo/web", "/repo/api"),
    ("cd packages/web && npm test 2>&1 | tail", "/repo", "/repo/packages/web"),
    ("  cd ../web; make", "/repo/api", "/repo/web"),
    ('cd "/repo/my app" && ls', "/repo", "/repo/my app"),
    ("cd /repo/api", "/repo", ""),  # a cd alone runs nothing there
    ("cd ~/repo && ls", "/repo", ""),  # a folder the words do not tell
    ("cd $REPO && ls", "/repo", ""),
    ("cd src || exit 1", "/repo", ""),
    ("npm test && cd /tmp", "/repo", ""),
    ("cd x && ls", "", ""),  # relative to an unknown folder
])
def test_the_folder_a_leading_cd_moves_to(command: str, cwd: str, folder: str) -> None:
    assert moved_to("Bash", {"command": command}, cwd) == folder
    assert moved_to("Read", {"command": command}, cwd) == ""
