"""The tool-call hooks run as Claude Code runs them: the plugin's launcher in a new
process, the hook input as JSON on stdin, one JSON object (or nothing) on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop_killer.engine.calls import REFUSED_MARK

from .kit import (
    SESSION,
    before,
    failed,
    journal,
    launch,
    prompt,
    start,
    succeeded,
)


def state_file(state: Path, session: str = SESSION) -> Path:
    return state / "tools" / f"{session}.json"


def test_a_failing_command_is_warned_on_its_third_identical_result(state: Path) -> None:
    assert launch(failed()) is None
    assert launch(failed()) is None
    out = launch(failed())
    assert out is not None
    specific = out["hookSpecificOutput"]
    assert specific["hookEventName"] == "PostToolUseFailure"
    assert specific["additionalContext"].startswith("loop-killer: ")
    assert "Bash: npm test" in specific["additionalContext"]
    assert "3 times" in specific["additionalContext"]
    assert out["systemMessage"].startswith("loop-killer: ")
    assert "Bash: npm test" in out["systemMessage"] and "3 times" in out["systemMessage"]
    assert "TOOL_REPEAT" in out["systemMessage"]
    assert "\n" not in out["systemMessage"]


def test_the_fifth_attempt_is_refused_and_the_person_is_told(state: Path) -> None:
    for _ in range(3):
        launch(failed())
    assert launch(before()) is None  # the 4th attempt runs
    fourth = launch(failed())
    assert fourth is not None and "refuse" in fourth["hookSpecificOutput"]["additionalContext"]
    assert "systemMessage" not in fourth  # the person heard on the warning already
    out = launch(before())
    assert out is not None
    decision = out["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    assert decision["permissionDecisionReason"].startswith(REFUSED_MARK)
    assert out["systemMessage"].startswith("loop-killer: refused Bash: npm test")
    assert launch(before()) is not None  # every further attempt, until the person speaks


def test_a_successful_command_repeating_its_output_counts_too(state: Path) -> None:
    outs = [launch(succeeded("git status", "nothing to commit")) for _ in range(4)]
    assert [out is not None for out in outs] == [False, False, True, True]
    assert outs[2] is not None
    assert outs[2]["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert launch(before("git status")) is not None


def test_a_changed_call_or_another_tool_is_not_refused(state: Path) -> None:
    for _ in range(4):
        launch(failed())
    assert launch(before("npm test -- --verbose")) is None
    assert launch(before(tool="Read", tool_input={"file_path": "package.json"})) is None


def test_output_that_changes_as_the_files_change_is_never_touched(state: Path,
                                                                   tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    outs = []
    for n in range(6, 0, -1):
        (project / "fix.py").write_text(f"FIXED = {7 - n}\n")  # what the model's script did
        outs.append(launch(failed(error=f"Exit code 1\n{n} failed", cwd=str(project))))
    assert outs == [None] * 6
    assert launch(before(cwd=str(project))) is None


def test_failing_with_another_error_and_nothing_changed_is_a_repeat(state: Path,
                                                                   tmp_path: Path) -> None:
    """Measured, not guessed: the same command failing with a new error each time while
    nothing changed on disk is warned at the 3rd and refused at the 5th (issue 30)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "app.py").write_text("print('hi')\n")
    outs = [launch(failed("curl -f localhost/health", error=f"Exit code 22\nHTTP {code}",
                          cwd=str(project))) for code in (503, 502, 504, 500)]
    assert [out is not None for out in outs] == [False, False, True, True]
    refused = launch(before("curl -f localhost/health", cwd=str(project)))
    assert REFUSED_MARK in json.dumps(refused)


def test_the_persons_prompt_resets_everything(state: Path) -> None:
    for _ in range(4):
        launch(failed())
    assert state_file(state).exists()
    assert launch(prompt()) is None
    assert not state_file(state).exists()
    assert launch(before()) is None
    assert launch(failed()) is None  # counts from 1 again


def _notice(status: str, task: str) -> dict[str, Any]:
    """A background task's notice as Claude Code 2.1.332 submits it (UserPromptSubmit
    mid-turn, the turn's prompt_id): ids and an output file that differ every time."""
    return {**prompt(), "prompt": (
        f"<task-notification>\n<task-id>{task}</task-id>\n<tool-use-id>toolu_{task}"
        f"</tool-use-id>\n<output-file>/tmp/claude-0/proj/s/tasks/{task}.output</output-file>"
        f"\n<status>{status}</status>\n<summary>Background command \"node server.js\" "
        f"{status}</summary>\n</task-notification>")}


def test_the_same_background_notice_again_is_not_the_person_speaking(state: Path) -> None:
    """A model restarting a crashing server in the background and probing it: each
    restart's notice reset every count, and the probe was never warned nor refused.
    The same notice again is no news: the probe is refused on its 5th attempt."""
    attempts = 0
    for round_ in range(6):
        launch(_notice("failed", f"b{round_}x"))
        attempts += 1
        if REFUSED_MARK in json.dumps(launch(before())):
            break
        launch(failed())
    assert attempts == 6  # the first notice was news: 5 attempts after it, the 5th refused
    assert state_file(state).exists()


def test_a_background_notice_that_is_news_lifts_a_refusal(state: Path) -> None:
    """Polling a silent build's log until it is refused, then the build's end is told:
    the log may say more now, so the poll runs again (found by a review). (A poll that
    sleeps first waits, and is timed instead: tests/unit/test_waiting.py.)"""
    poll = "tail -3 build.log"
    launch(_notice("running", "a1"))
    for _ in range(4):
        launch(succeeded(poll, stdout="compiling..."))
    assert REFUSED_MARK in json.dumps(launch(before(poll)))
    launch(_notice("completed", "a2"))
    assert launch(before(poll)) is None


def test_a_cycle_of_commands_that_cd_elsewhere_is_refused_on_its_fifth_round(
        state: Path) -> None:
    """Claude Code hands PreToolUse the folder before a call and PostToolUse the one after
    it; a leading cd in a command that exits 0 stays in effect (2.1.332). Two such
    commands in turn were counted in their folders and looked up in the other's: never
    refused, while the model was told 'loop-killer will refuse' round after round."""
    api, web = "/home/dev/proj/packages/api", "/home/dev/proj/packages/web"
    here = "/home/dev/proj"
    refused = []
    for round_ in range(1, 6):
        for folder in (api, web):
            command = f"cd {folder} && npm test 2>&1 | tail -5"
            if REFUSED_MARK in json.dumps(launch(before(command, cwd=here))):
                refused.append((round_, folder))
                continue
            launch(succeeded(command, stdout="Tests: 1 failed", cwd=folder))
            here = folder
    assert refused == [(5, api), (5, web)]


def test_the_persons_answer_to_a_question_lifts_a_refusal(state: Path) -> None:
    """The warning says "ask the person": their answer through AskUserQuestion is them
    speaking, as a prompt is, and the refused call runs again."""
    for _ in range(4):
        launch(failed())
    assert REFUSED_MARK in json.dumps(launch(before()))
    answer = succeeded(tool="AskUserQuestion",
                       tool_input={"questions": [{"question": "Is postgres running?"}]},
                       tool_response={"answers": {"Is postgres running?": "Started it"}})
    assert launch(answer) is None
    assert not state_file(state).exists()
    assert launch(before()) is None  # runs
    assert launch(failed()) is None  # and counts from 1 again


def test_a_test_run_after_a_fix_made_with_sed_is_a_new_check(state: Path,
                                                              tmp_path: Path) -> None:
    """The change is seen on disk, whatever made it (sed here, as the hook sees it)."""
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    for n in range(6):
        (project / "src" / "a.js").write_text(f"export const v = {n + 1}\n")
        assert launch(succeeded(f"sed -i 's/v{n}/v{n + 1}/' src/a.js", stdout="",
                                cwd=str(project))) is None
        assert launch(before(cwd=str(project))) is None
        assert launch(failed(cwd=str(project))) is None  # never warned, never refused
    assert launch(before(cwd=str(project))) is None


def test_a_file_edited_back_and_forth_climbs_the_ladder_to_the_stop(state: Path,
                                                                    tmp_path: Path) -> None:
    """Edit, test, revert, test: every edit is a change, so the test's count never grows
    and the loop never ended (in a /goal it has tool work every round). Warned at edit 3
    (the first move made again), edit 4 let through, edit 5 refused (the exact change
    already made, from the state on disk); the 3rd refused attempt ends the turn, as for a
    refused call: one ladder."""
    file = tmp_path / "m.py"
    file.write_text("a")
    path = str(file)

    def change(old: str, new: str, *, after: bool) -> dict[str, Any]:
        tool_input = {"file_path": path, "old_string": old, "new_string": new}
        if after:  # (Claude Code made the edit, and hands the whole file before it)
            original = file.read_text()
            file.write_text(original.replace(old, new, 1))
            return succeeded(tool="Edit", tool_input=tool_input, tool_response={
                "filePath": path, "oldString": old, "newString": new,
                "originalFile": original, "replaceAll": False})
        return before(tool="Edit", tool_input=tool_input)

    said = []
    for old, new in [("a", "b"), ("b", "a")] * 2:
        assert launch(change(old, new, after=False)) is None
        said.append(launch(change(old, new, after=True)))
        assert launch(failed("pytest", error=f"1 failed ({new})")) is None
    assert [out is not None for out in said] == [False, False, True, False]
    assert said[2] is not None
    assert "loop-killer will refuse its fourth return." in (
        said[2]["hookSpecificOutput"]["additionalContext"])
    refused = [launch(change("a", "b", after=False)) for _ in range(3)]
    for out in refused:
        assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert out["hookSpecificOutput"]["permissionDecisionReason"].startswith(
            f"{REFUSED_MARK} to make this edit: it would take the file back to an earlier "
            "version for the fourth time (EDIT_OSCILLATION)")
    first, second, third = refused
    assert first is not None and first["systemMessage"] == (
        f"loop-killer: refused Edit: {path}: it would be edited back to an earlier version "
        "4 times (EDIT_OSCILLATION); the model was told to keep the file as it is or ask you")
    assert second is not None and "systemMessage" not in second
    assert third is not None and third["continue"] is False
    assert third["stopReason"].startswith("loop-killer: TOOL_REPEAT: a refused call tried 3")
    records = journal(state)
    # One record per fact: warned, refused (once for the edit, however many attempts),
    # the turn ended after 3 attempts.
    assert [(r["event"], r["rule"], r.get("count")) for r in records] == [
        ("detection", "EDIT_OSCILLATION", 2), ("refusal", "EDIT_OSCILLATION", 4),
        ("outcome", "TOOL_REPEAT", 3)]
    # An edit that moves on is made; the person's next prompt lifts the refusal.
    assert launch(change("a", "c", after=False)) is None  # (never made before: not refused)
    assert launch(prompt()) is None
    assert launch(change("a", "b", after=False)) is None


def test_a_model_that_heeded_refusals_is_not_stopped_by_another_calls_first(
        state: Path) -> None:
    """Found by a review: refused attempts were counted for the turn, so two refusals of
    one call the model then left alone made the first refusal of another end the turn.
    The stop is for a call retried: three refused attempts of that one call."""
    for command in ("npm test", "make"):
        for _ in range(4):
            launch(failed(command))
    assert [launch(before("npm test")) is not None for _ in range(2)] == [True, True]
    first = launch(before("make"))
    assert first is not None and "continue" not in first
    assert first["systemMessage"].startswith("loop-killer: refused Bash: make")
    assert launch(before("make")) is not None
    third = launch(before("make"))
    assert third is not None and third["continue"] is False


def test_the_state_file_appears_with_the_first_counted_result_only(state: Path) -> None:
    assert launch(before()) is None
    assert launch(prompt()) is None
    assert launch(succeeded(tool="AskUserQuestion", tool_input={"q": "Which?"})) is None
    assert not state_file(state).exists()
    launch(failed())
    assert state_file(state).exists()
    assert state_file(state).stat().st_mode & 0o777 == 0o600


def test_polling_tools_are_never_counted(state: Path) -> None:
    for _ in range(6):
        assert launch(succeeded(tool="TaskOutput", tool_input={"task_id": "b1"},
                                tool_response={"status": "running"})) is None
    assert launch(before(tool="TaskOutput", tool_input={"task_id": "b1"})) is None


def test_mcp_tools_are_counted(state: Path) -> None:
    call = {"tool": "mcp__github__get_issue", "tool_input": {"number": 9}}
    outs = [launch(failed(error="Not Found", **call)) for _ in range(4)]
    assert outs[2] is not None and outs[3] is not None
    assert launch(before(**call)) is not None


def test_subagents_count_apart_from_the_main_session(state: Path) -> None:
    agent = {"agent_id": "a1b2c3", "agent_type": "general-purpose"}
    for _ in range(2):
        launch(failed())
        launch(failed(**agent))
    assert launch(failed()) is not None  # main: 3rd
    out = launch(failed(**agent))  # subagent: its own 3rd
    assert out is not None and "3 times" in out["systemMessage"]
    launch(failed())  # main: 4th
    assert launch(before()) is not None
    assert launch(before(**agent)) is None  # the subagent has only 3
    records = [r for r in journal(state) if r["event"] == "detection"]
    assert [r.get("agent_id") for r in records] == [None, "a1b2c3"]


def test_a_session_started_with_agent_counts_as_the_main_session(state: Path) -> None:
    """``claude --agent NAME``: the main session's input names the agent (``agent_type``)
    with no ``agent_id`` (2.1.332). Its calls are the main session's, logged as such (no
    subagent named), and its refused retries end the turn, not "a subagent's" run."""
    main = {"agent_type": "fixer"}
    for _ in range(4):
        launch(failed(**main))
    assert launch(before()) is not None  # one scope: the plain input's refusal too
    said = [launch(before(**main)) for _ in range(2)]
    assert said[-1] is not None and said[-1].get("continue") is False
    assert "subagent" not in said[-1]["systemMessage"]
    records = journal(state)
    assert [r["event"] for r in records][:2] == ["detection", "refusal"]
    assert all(r.get("agent_id") is None and r.get("agent_type") is None for r in records)


def test_a_subagent_retrying_a_refused_call_is_stopped_alone(state: Path) -> None:
    """The ladder's last step in a subagent's scope ends the subagent's run (the session's
    turn goes on with its result): no goal of the session is cleared, nothing else is."""
    agent = {"agent_id": "a1b2c3", "agent_type": "general-purpose"}
    for _ in range(4):
        launch(failed(**agent))
    said = [launch(before(**agent)) for _ in range(3)]
    assert all(out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
               for out in said)
    assert [out.get("continue") for out in said] == [None, None, False]
    assert said[2]["systemMessage"] == (
        "loop-killer: TOOL_REPEAT: a subagent's refused call (Bash: npm test) tried 3 more "
        "times; the subagent was stopped")
    # One record per fact: warned, refused (once per call), the subagent stopped.
    assert [r["event"] for r in journal(state)] == ["detection", "refusal", "outcome"]
    assert (journal(state)[-1]["outcome"], journal(state)[-1]["count"]) == ("stopped", 3)
    assert launch(before()) is None  # the session's own calls are not touched


def test_warnings_and_refusals_are_logged_for_the_watcher(state: Path) -> None:
    for _ in range(4):
        launch(failed())
    launch(before())
    records = journal(state)
    assert [r["event"] for r in records] == ["detection", "refusal"]
    for record in records:
        assert record["rule"] == "TOOL_REPEAT"
        assert record["session_id"] == SESSION
        assert record["tool"] == "Bash"
        assert record["call"] == "Bash: npm test"
        assert record["project"] == "-home-dev-proj"  # the project folder, as in every record
        assert record["transcript_path"].endswith(f"{SESSION}.jsonl")
        assert record["source"] == "hook"
    assert [r["count"] for r in records] == [3, 4]


def test_control_codes_never_reach_the_person(state: Path) -> None:
    command = "printf '\x1b]0;pwned\x07\x1b[2J'; exit 1"
    for _ in range(3):
        out = launch(failed(command, error="boom"))
    assert out is not None
    for text in (out["systemMessage"], out["hookSpecificOutput"]["additionalContext"]):
        assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def test_the_ignored_tools_and_the_switch_come_from_the_environment(state: Path) -> None:
    """Not counted: the record keeps no counts, only the turn's results seen and whether a
    reply did work (a tool the person listed: always; the rule off: a result new in the
    turn)."""
    ignore = {"LOOP_KILLER_IGNORE_TOOLS": "default,Bash"}
    off = {"LOOP_KILLER_TOOL_REPEAT": "off"}
    for env in (ignore, off):
        assert [launch(failed(), env=env) for _ in range(4)] == [None] * 4
        kept = json.loads(state_file(state).read_text())
        assert kept["scopes"] == {} and kept["turn"]["work"] is True
        assert len(kept["turn"]["seen"]) == 1  # four times the same result
        assert launch(prompt(), env=env) is None  # the person's prompt forgets it
        assert not state_file(state).exists()


def test_an_interrupted_call_is_not_a_result(state: Path) -> None:
    for _ in range(4):
        assert launch({**failed(), "is_interrupt": True}) is None
    assert not state_file(state).exists()


def test_hooks_of_parallel_calls_lose_no_count(state: Path) -> None:
    """Eight identical calls of one reply, their hooks running at the same time."""
    procs = [start(failed()) for _ in range(8)]
    outputs = []
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=60) == 0 and stderr == b""
        outputs.append(json.loads(stdout) if stdout.strip() else None)
    kept = json.loads(state_file(state).read_text())
    assert [item[2] for item in kept["scopes"]["main"]["calls"]] == [8]
    warned = [out for out in outputs if out and "systemMessage" in out]
    assert len(warned) == 1  # exactly one hook saw the 3rd result


def test_bad_input_is_ignored_quietly(state: Path) -> None:
    assert launch(None, raw=b"not json") is None
    assert launch(None, raw=b"") is None
    assert launch({**failed(), "session_id": "../../etc"}) is None
    assert launch({**failed(), "tool_name": 42}) is None
    assert launch({**before(), "session_id": None}) is None
    assert not (state / "tools").exists() or not any(
        p.suffix == ".json" for p in (state / "tools").iterdir())


def test_a_tool_result_nested_500_deep_is_still_counted(state: Path) -> None:
    """Issue 21: a result nested ~500 deep crashed the PostToolUse hook (not counted)."""
    deep: Any = {"leaf": "done at 12:00:01"}
    for _ in range(250):  # an object and an array a level: 500 deep
        deep = {"inner": [deep]}
    outputs = [launch(succeeded(tool="mcp__db__query", tool_input={"q": "select 1"},
                                tool_response=deep)) for _ in range(3)]
    assert outputs[:2] == [None, None]
    assert outputs[2] is not None and "3 times" in outputs[2]["systemMessage"]


def test_the_warning_tells_the_model_how_many_more_results_it_has(state: Path) -> None:
    """The model hears when the call will be refused, as the settings have it: with the
    refusal after 6 identical results, 3 more after the warning, then the refusal."""
    env = {"LOOP_KILLER_TOOL_REPEAT_BLOCK": "6"}
    for _ in range(2):
        assert launch(failed(), env=env) is None
    warned = launch(failed(), env=env)
    assert warned is not None
    assert ("If it gives the same result 3 times more, loop-killer will refuse"
            in warned["hookSpecificOutput"]["additionalContext"])
    for _ in range(3):
        assert launch(before(), env=env) is None  # attempts 4, 5 and 6 run
        launch(failed(), env=env)
    assert launch(before(), env=env) is not None  # the 7th is refused
