"""Tool-repeat loops in the watcher: the same call giving the same result, seen in the
transcript, is logged once per loop, and not at all when the PostToolUse hook logged it
first (one record per warned result, ``state.records``)."""

from __future__ import annotations

import orjson
from loop_killer.state import records
from loop_killer.watch.sessions import Sessions
from transcripts import Lines, append


def _tool_ids(lines: list[bytes]) -> list[str]:
    return [block["tool_use_id"] for line in lines
            for block in (orjson.loads(line).get("message") or {}).get("content") or []
            if isinstance(block, dict) and block.get("type") == "tool_result"]


def test_the_same_failing_command_three_times_is_logged_once(env):
    sessions = Sessions(env.state)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.prompt())
    sessions.sync(str(path))
    lines = [line for _ in range(5) for line in s.answer("Trying again.", tool=True)]
    append(path, lines)
    sessions.sync(str(path))
    logged = env.records("detection", session_id=s.session_id)
    assert [(r["rule"], r["count"], r["call"], r["source"]) for r in logged] == [
        ("TOOL_REPEAT", 3, "Bash: npm test", "watcher")]
    assert logged[0]["tool_use_id"] == _tool_ids(lines)[2]  # the 3rd identical result
    # (its line is told from the log, as a hook's is: test_narrate)


def test_a_changing_result_or_a_persons_prompt_starts_the_count_afresh(env):
    sessions = Sessions(env.state)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.prompt() + s.answer(tool=True, output="3 failing")
           + s.answer(tool=True, output="2 failing") + s.answer(tool=True, output="2 failing")
           + s.prompt("try once more") + s.answer(tool=True, output="2 failing"))
    sessions.sync(str(path))
    assert env.records("detection", session_id=s.session_id) == []


def test_a_loop_the_hook_logged_first_is_not_logged_again(env):
    sessions = Sessions(env.state)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.prompt())
    sessions.sync(str(path))
    lines = [line for _ in range(3) for line in s.answer("Trying again.", tool=True)]
    # The PostToolUse hook for the 3rd result ran before the line reached the file.
    assert records.record_detection(env.state, s.session_id, _tool_ids(lines)[2],
                                    source="hook", rule="TOOL_REPEAT")
    append(path, lines)
    sessions.sync(str(path))
    assert env.records("detection", session_id=s.session_id) == []


def test_a_tool_loop_in_a_history_that_appeared_with_a_file_is_not_news(env):
    sessions = Sessions(env.state, history_age=0.0)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.prompt() + [line for _ in range(3)
                               for line in s.answer("Trying again.", tool=True)])
    sessions.sync(str(path))
    assert env.records("detection", session_id=s.session_id) == []
