"""Planted histories: exactly which loops a scan finds, their tokens and avoidable tokens."""

from __future__ import annotations

import json

from loop_killer.engine.rules import (
    IDLE_TURNS,
    RULE_EDIT_OSCILLATION,
    RULE_IDLE,
    RULE_SAME,
    SAME_REPLY_TURNS,
)
from loop_killer.engine.tool_repeat import RULE_TOOL_REPEAT, TOOL_REPEAT_WARN
from loop_killer.scan.records import Tokens
from transcripts import CONDITION, Transcript, Use, scan_bytes, total

SAME_TEXT = "I am still working on the auth tests; the condition is not met yet, continuing."


def uses(count: int, base: int = 100) -> list[Use]:
    """Distinct usage per reply, so that every sum names exactly the replies it holds."""
    return [Use(base + i, 10 + i, 1000 * (i + 1), 7 * i) for i in range(count)]


def tokens(items: list[Use]) -> Tokens:
    return Tokens(sum(u.input for u in items), sum(u.output for u in items),
                  sum(u.cache_read for u in items), sum(u.cache_creation for u in items))


def goal_session() -> Transcript:
    session = Transcript()
    session.prompt(f"/goal {CONDITION}")
    session.goal()
    session.reply("On it.", Use(5, 5))
    return session


def test_long_same_loop_with_thinking_counts_each_reply_once() -> None:
    session = goal_session()
    replies = uses(25)
    for use in replies:
        session.reprompt()
        session.noise()
        session.reply(SAME_TEXT, use, thinking="Let me think about the tests again.")
    session.prompt("stop that")  # ends the run
    session.reply("Stopped.", Use(1, 1))

    result = scan_bytes(session.data(), session_id=session.session_id)

    (loop,) = result.loops
    assert (loop.kind, loop.rule, loop.replies) == ("reprompt", RULE_SAME, 25)
    # thinking + text lines share one message id: each reply's usage counted once
    assert loop.total_tokens == tokens(replies)
    assert loop.total_tokens.total == total(replies)
    # loop-killer would have stopped the turn at the 3rd similar reply
    assert loop.avoidable_tokens == tokens(replies[SAME_REPLY_TURNS:])
    assert {reply.model for reply in loop.tokens} == {"claude-sonnet-4-5-20250929"}


def test_idle_loop_rule_and_avoidable_tokens() -> None:
    session = goal_session()
    texts = ["Reading the parser module now.", "Quantum flux capacitor readings nominal.",
             "Bananas contain potassium and fibre.", "Weather tomorrow looks cloudy overall.",
             "Compilers translate source programs.", "Mountains erode over geological time.",
             "Jazz improvisation follows chord changes."]
    replies = uses(len(texts), base=300)
    for text, use in zip(texts, replies, strict=True):
        session.reprompt()
        session.reply(text, use)

    result = scan_bytes(session.data(), session_id=session.session_id)

    (loop,) = result.loops
    assert (loop.rule, loop.replies) == (RULE_IDLE, len(texts))
    assert loop.total_tokens == tokens(replies)
    assert loop.avoidable_tokens == tokens(replies[IDLE_TURNS:])
    assert loop.first_at < loop.last_at


def test_tool_repeat_loop_counts_the_calling_replies() -> None:
    session = Transcript()
    session.prompt("make the tests pass")
    calls = uses(6, base=500)
    for use in calls:
        session.run("npm test", "FAIL test/auth.test.js\n1 failing", use, is_error=True)
    session.reply("The tests keep failing the same way; I need your help.", Use(2, 2))

    result = scan_bytes(session.data(), session_id=session.session_id)

    (loop,) = result.loops
    assert (loop.kind, loop.rule, loop.replies) == ("tool", RULE_TOOL_REPEAT, 6)
    assert loop.total_tokens == tokens(calls)
    # the warning came with the 3rd identical result: the calls after it were avoidable
    assert loop.avoidable_tokens == tokens(calls[TOOL_REPEAT_WARN:])
    assert loop.label == "Bash: npm test"


def test_tool_repeat_needs_the_same_result() -> None:
    session = Transcript()
    session.prompt("watch the build")
    for i, use in enumerate(uses(5)):
        session.run("make", f"step {i} of 5 done", use)
    assert scan_bytes(session.data()).loops == ()


def test_a_persons_prompt_ends_a_tool_streak() -> None:
    session = Transcript()
    for _ in range(3):
        session.prompt("try again")
        session.run("npm test", "1 failing", Use(1, 1))
        session.run("npm test", "1 failing", Use(1, 1))
        session.reply("Still failing.", Use(1, 1))
    assert scan_bytes(session.data()).loops == ()


def test_healthy_goal_work_with_tools_is_no_loop() -> None:
    session = goal_session()
    for i, use in enumerate(uses(8)):
        session.reprompt()
        session.run(f"pytest test/auth -k case{i}", f"{i} passed, {8 - i} failed", use)
        session.reply(SAME_TEXT, Use(3, 3))
    assert scan_bytes(session.data()).loops == ()


def test_two_similar_replies_only_is_no_loop() -> None:
    session = goal_session()
    for use in uses(SAME_REPLY_TURNS - 1):
        session.reprompt()
        session.reply(SAME_TEXT, use)
    session.prompt("thanks, that will do")
    session.reply("You're welcome.", Use(1, 1))
    assert scan_bytes(session.data()).loops == ()


def test_a_loop_that_runs_to_the_end_of_the_file_is_found() -> None:
    session = goal_session()
    replies = uses(4)
    for use in replies:
        session.reprompt()
        session.reply(SAME_TEXT, use)
    (loop,) = scan_bytes(session.data()).loops
    assert loop.replies == 4
    assert loop.avoidable_tokens == tokens(replies[3:])


def test_one_loop_per_run_however_often_the_rules_fire() -> None:
    session = goal_session()
    for use in uses(20):
        session.reprompt()
        session.reply(SAME_TEXT, use)
    session.prompt("new task")
    session.reply("ok", Use(1, 1))
    for use in uses(6, base=900):
        session.reprompt()
        session.reply(SAME_TEXT, use)

    loops = scan_bytes(session.data()).loops
    assert [(loop.rule, loop.replies) for loop in loops] == [(RULE_SAME, 20), (RULE_SAME, 6)]


def test_growing_usage_lines_take_the_largest_count() -> None:
    session = goal_session()
    replies = uses(3)
    for use in replies:
        session.reprompt()
        session.reply(SAME_TEXT, use, thinking="hmm", growing=True)
    (loop,) = scan_bytes(session.data()).loops
    assert loop.total_tokens == tokens(replies)


def test_subagent_file_is_scanned_for_tool_repeats_only() -> None:
    agent = Transcript("22222222-2222-4333-8444-555555555555", sidechain=True)
    agent.user("Find why the auth tests fail.")  # the task prompt
    calls = uses(4, base=40)
    for use in calls:
        agent.run("grep -r token src", "no matches", use)
    for use in uses(7):  # re-prompt shapes mean nothing in a subagent
        agent.reprompt()
        agent.reply(SAME_TEXT, use)

    result = scan_bytes(agent.data(), subagent=True)

    assert result.session_id == agent.session_id  # read from its lines
    (loop,) = result.loops
    assert (loop.kind, loop.replies) == ("tool", 4)
    assert loop.total_tokens == tokens(calls)
    assert loop.avoidable_tokens == tokens(calls[3:])


def test_inline_subagent_lines_count_in_their_own_scope() -> None:
    main = Transcript()
    main.prompt("investigate")
    # The same call in the main session twice and in the subagent twice: no streak of 3.
    side = Transcript(main.session_id, sidechain=True)
    for _ in range(2):
        main.run("ls", "a b c", Use(1, 1))
        side.run("ls", "a b c", Use(1, 1))
    side.run("ls", "a b c", Use(9, 9))
    lines = []
    for a, b in zip(main.lines, side.lines, strict=False):  # the longer one's rest below
        lines += [a, b]
    lines += side.lines[len(main.lines):]
    data = b"".join(line + b"\n" for line in lines)

    (loop,) = scan_bytes(data, session_id=main.session_id).loops
    assert (loop.kind, loop.replies) == ("tool", 3)
    assert loop.total_tokens.total == 2 + 2 + 18


def test_parallel_identical_calls_in_one_reply_count_its_usage_once() -> None:
    session = Transcript()
    session.prompt("go")
    use = Use(50, 5)
    session.reply("Running all three.", use, tools=[("Bash", {"command": "make"})] * 3)
    ids = session.tool_use_ids
    session.results(*[(tool_id, "error: no rule") for tool_id in ids])
    (loop,) = scan_bytes(session.data()).loops
    assert loop.replies == 3
    assert loop.total_tokens.total == use.total
    assert loop.avoidable_tokens.total == 0


def test_cost_state_and_whole_session_usage() -> None:
    session = goal_session()
    for use in uses(3):
        session.reprompt()
        session.reply(SAME_TEXT, use)
    session.cost_state(0.25)
    session.cost_state(1.5)
    result = scan_bytes(session.data())
    assert result.cost_state == 1.5
    everything = tokens([Use(5, 5), *uses(3)])
    assert dict(result.usage) == {"claude-sonnet-4-5-20250929": everything}


def test_chunking_never_changes_the_loops() -> None:
    session = goal_session()
    for use in uses(9):
        session.reprompt()
        session.noise(300)
        session.reply(SAME_TEXT, use, thinking="again")
    session.prompt("tests")
    for use in uses(5):
        session.run("npm test", "1 failing", use)
    data = session.data()
    whole = scan_bytes(data, chunk_size=len(data))
    for size in (1, 5, 97, 4096):
        assert scan_bytes(data, chunk_size=size).loops == whole.loops
    assert len(whole.loops) == 2


def test_a_goal_that_only_repeats_a_result_is_a_reprompt_loop() -> None:
    """Work means something new (engine.run): answers whose tool work only gives back a
    result already seen in the turn are a re-prompt loop, as the hook and the watcher
    judge them."""
    session = goal_session()
    for use in uses(6):
        session.reprompt()
        session.run("npm test", "FAIL test/auth.test.js\n1 failing", use, is_error=True)
        session.reply(SAME_TEXT, Use(3, 3))
    loops = scan_bytes(session.data()).loops
    assert ("reprompt", RULE_SAME) in {(loop.kind, loop.rule) for loop in loops}
    assert ("tool", RULE_TOOL_REPEAT) in {(loop.kind, loop.rule) for loop in loops}


def test_a_file_edited_back_and_forth_is_an_oscillation_loop() -> None:
    session = Transcript()
    session.prompt("fix the import")
    edits = uses(3, base=700)
    content = "a"
    for (old, new), use in zip((("a", "b"), ("b", "a"), ("a", "b")), edits, strict=True):
        session.reply(None, use, tools=[("Edit", {
            "file_path": "m.py", "old_string": old, "new_string": new})])
        (tool_id,) = session.tool_use_ids
        # (Claude Code's result line holds the whole file before the edit)
        session.user([{"tool_use_id": tool_id, "type": "tool_result",
                       "content": "The file m.py has been updated successfully."}],
                     toolUseResult={"filePath": "m.py", "oldString": old, "newString": new,
                                    "originalFile": content, "replaceAll": False})
        content = content.replace(old, new, 1)
    (loop,) = scan_bytes(session.data(), session_id=session.session_id).loops
    assert (loop.kind, loop.rule, loop.replies) == ("tool", RULE_EDIT_OSCILLATION, 2)
    assert loop.total_tokens == tokens(edits)  # edit, revert, edit
    assert loop.avoidable_tokens.total == 0  # a warning: nothing was cut
    assert loop.label == "Edit: m.py"


def test_a_tool_result_nested_500_deep_loses_nothing() -> None:
    """Issue 21: a result nested ~500 deep made the scan drop the whole transcript, its
    re-prompt loops included, with a traceback."""
    deep: object = {"rows": "none at 12:00:01"}
    for _ in range(250):  # an object and an array a level: 500 deep
        deep = {"inner": [deep]}
    session = goal_session()
    for use in uses(6):
        session.reprompt()
        session.reply(None, use, tools=[("mcp__db__query", {"q": "select 1"})])
        (tool_id,) = session.tool_use_ids
        session.results((tool_id, [{"type": "text", "text": "x"}, "DEEP"]))
        # (written by the standard library: orjson writes nothing past 255 deep)
        session.lines[-1] = session.lines[-1].replace(b'"DEEP"', json.dumps(deep).encode())
        session.reply(SAME_TEXT, Use(3, 3))
    result = scan_bytes(session.data(), session_id=session.session_id)
    assert {(loop.kind, loop.rule) for loop in result.loops} == {
        ("reprompt", RULE_SAME), ("tool", RULE_TOOL_REPEAT)}
