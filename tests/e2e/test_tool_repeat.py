"""Tool-repeat loops on the real Claude Code (2.1.250 and 2.1.332), headless, offline.

The scripted model keeps running one failing Bash command. Each real run appends a line
to ``runs.txt`` in the project, so the file proves how many times the command really ran:
exactly 4. The request after the 3rd result carries loop-killer's warning; the 5th attempt
is refused before it runs, with loop-killer's reason; after the person's next prompt
(``--resume``) the command runs again. A command whose output changes, and a sweep of
different commands, are never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .harness import Sandbox, goal_statuses, read_jsonl, run_headless, tool_results
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
ALLOW_BASH = ["--allowedTools", "Bash"]
FAILING = "echo run >> runs.txt; cat no-such-file"
WARNING = "loop-killer: this exact call"
REFUSED = "loop-killer: refused to run this call again"
GIVE_UP = "I keep getting the same error, so I will stop and ask: is no-such-file expected?"


@pytest.fixture(params=["2.1.250", "2.1.332"])
def claude(request: pytest.FixtureRequest) -> Path:
    """Each test runs on 2.1.250 (the oldest with all four hooks) and 2.1.332."""
    fixture = {"2.1.250": "claude_250", "2.1.332": "claude_332"}[request.param]
    binary: Path = request.getfixturevalue(fixture)
    return binary


# -- what the scripted model sees ---------------------------------------------------------------


def _last_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last user message."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and isinstance(message.get("content"), list):
            return [b for b in message["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
        if message.get("role") == "user":
            return []
    return []


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def repeater(command: str, *, gives_up: bool = True) -> Any:
    """A model that runs ``command`` again after every result, until it is refused (or,
    not ``gives_up``, refusals included)."""

    def script(index: int, body: dict[str, Any]) -> Reply:
        if gives_up and any(REFUSED in _text(r.get("content")) for r in _last_results(body)):
            return Reply(text=GIVE_UP)
        return Reply(text="Running it again.", tool_calls=[
            ToolCall("Bash", {"command": command, "description": f"attempt {index + 1}"})])

    return script


def scripted(calls: list[tuple[str, dict[str, Any]]], done: str = "Done.") -> Any:
    """A model that makes each call once, in order, then says ``done``."""

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index < len(calls):
            name, tool_input = calls[index]
            return Reply(tool_calls=[ToolCall(name, tool_input)])
        return Reply(text=done)

    return script


def runner(commands: list[str]) -> Any:
    """A model that runs each Bash command once, in order, then stops."""
    return scripted([("Bash", {"command": command}) for command in commands])


# -- what happened -------------------------------------------------------------------------------


def runs(sandbox: Sandbox) -> int:
    path = sandbox.project / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def state_dir(sandbox: Sandbox) -> Path:
    return sandbox.home / ".claude" / "loop-killer"


def journal(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = state_dir(sandbox) / "detections.jsonl"
    return read_jsonl(path) if path.exists() else []


def attachment_texts(entries: list[dict[str, Any]], kind: str, field: str) -> list[str]:
    """The ``field`` of every attachment of type ``kind`` in the transcript, in order."""
    return [
        str(entry["attachment"].get(field))
        for entry in entries
        if entry.get("type") == "attachment"
        and isinstance(entry.get("attachment"), dict)
        and entry["attachment"].get("type") == kind
    ]


def person_notices(entries: list[dict[str, Any]]) -> list[str]:
    """The hook system messages Claude Code showed the person (from the transcript)."""
    return attachment_texts(entries, "hook_system_message", "content")


def mentions(mock: MockAnthropic, text: str) -> list[int]:
    """Indexes of the main requests whose messages hold ``text``."""
    return [r.index for r in mock.requests("main") if text in _text(r.body.get("messages"))]


# -- the loop ------------------------------------------------------------------------------------


def test_a_repeated_failing_command_is_warned_then_refused_until_the_person_speaks(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    mock_api.configure(repeater(FAILING))
    first = run_headless(sandbox, "Make the tests pass.", version=claude, plugin_dir=PLUGIN,
                         extra_args=ALLOW_BASH, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.output is not None
    assert runs(sandbox) == 4  # the 5th attempt never ran
    # Requests: 0 (prompt) -> attempt 1, 1..3 after results 1..3, 4 after result 4
    # (attempt 5, refused), 5 after the refusal (the model gives up).
    assert mock_api.count("main") == 6
    assert mentions(mock_api, WARNING)[0] == 3  # the request right after the 3rd result
    refused = _last_results(mock_api.requests("main")[5].body)
    assert len(refused) == 1 and refused[0].get("is_error") is True
    assert REFUSED in _text(refused[0].get("content"))
    assert first.output.get("result") == GIVE_UP

    entries = sandbox.read_transcript()
    notices = person_notices(entries)
    assert any(n.startswith("loop-killer: Bash: ") and "3 times" in n for n in notices), notices
    assert any(n.startswith("loop-killer: refused Bash: ") for n in notices), notices
    records = journal(sandbox)
    assert [(r["event"], r["rule"], r["count"]) for r in records] == [
        ("detection", "TOOL_REPEAT", 3), ("refusal", "TOOL_REPEAT", 4)]
    session_id = first.output["session_id"]
    assert {r["session_id"] for r in records} == {session_id}

    # The person's next prompt resets everything: the same command runs again.
    mock_api.configure(runner([FAILING]))
    second = run_headless(sandbox, "Try once more.", version=claude, plugin_dir=PLUGIN,
                          extra_args=[*ALLOW_BASH, "--resume", session_id], timeout=120)
    assert second.returncode == 0, second.stderr
    assert runs(sandbox) == 5
    after = _last_results(mock_api.requests("main")[-1].body)
    assert len(after) == 1 and "no-such-file" in _text(after[0].get("content"))
    assert REFUSED not in _text(after[0].get("content"))
    assert len(journal(sandbox)) == 2  # nothing new


def test_changing_output_and_a_sweep_of_commands_are_never_touched(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    # The same command whose output changes each time as a file of the project changes
    # (progress), then six different commands that each fail the same way (a sweep).
    # (runs.txt is committed, so git sees it change: the same failure with nothing
    # changed on disk would be a repeat whatever it printed, issue 30.)
    from .test_changes import commit_project

    commit_project(sandbox.project, {"runs.txt": ""})
    progress = ["echo run >> runs.txt; wc -l < runs.txt; exit 1"] * 6
    sweep = [f"cat missing-{n}.txt 2>/dev/null; exit 3" for n in range(6)]
    mock_api.configure(runner(progress + sweep))
    result = run_headless(sandbox, "Work through these.", version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 6
    assert mock_api.count("main") == 13
    assert mentions(mock_api, "loop-killer") == []
    assert person_notices(sandbox.read_transcript()) == []
    assert journal(sandbox) == []


def test_the_rule_is_switched_off_from_the_env_block_of_settings_json(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    settings = sandbox.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"env": {"LOOP_KILLER_TOOL_REPEAT": "off"}}))
    mock_api.configure(runner([FAILING] * 5))
    result = run_headless(sandbox, "Make the tests pass.", version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 5
    assert mentions(mock_api, "loop-killer") == []
    assert journal(sandbox) == []


# -- the ladder's last step: retrying a refused call ends the turn -------------------------------


def stopped_continuations(entries: list[dict[str, Any]]) -> list[str]:
    """Why a hook ended the turn (``continue: false`` outside a Stop), as recorded."""
    return attachment_texts(entries, "hook_stopped_continuation", "message")


def test_a_model_that_keeps_retrying_a_refused_call_has_its_turn_ended(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    mock_api.configure(repeater(FAILING, gives_up=False))
    result = run_headless(sandbox, "Make the tests pass.", version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 4  # attempts 5, 6 and 7 were refused; the 7th ended the turn
    # Requests: 0..3 -> attempts 1..4 run, 4..6 -> attempts 5..7 refused; none after.
    assert mock_api.count("main") == 7
    entries = sandbox.read_transcript()
    stops = stopped_continuations(entries)
    assert len(stops) == 1 and stops[0].startswith(
        "loop-killer: TOOL_REPEAT: a refused call tried 3 more times"), stops
    records = journal(sandbox)
    assert [(r["event"], r["rule"]) for r in records] == [
        ("detection", "TOOL_REPEAT"), ("refusal", "TOOL_REPEAT"),  # one per refused call
        ("outcome", "TOOL_REPEAT")]
    assert records[-1]["outcome"] == "stopped_no_goal"
    # The person is told of the refusal once, not on every refused attempt.
    notices = person_notices(entries)
    assert len([n for n in notices if n.startswith("loop-killer: refused")]) == 1, notices
    # What -p prints: the stop's line, by the mod's command; nothing before mods.
    assert result.output is not None
    assert result.output["result"] == ("" if "2.1.250" in str(claude) else LADDER_LINE)


LADDER_LINE = ("loop-killer: TOOL_REPEAT (a refused call tried 3 more times): loop stopped; no "
               "goal was set.")


def test_claude_p_in_text_mode_prints_the_ladders_stop(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """A person's script running `claude -p` (text) reads the line naming loop-killer, the
    rule and what it did, where it read an empty line (exit code 0)."""
    mock_api.configure(repeater(FAILING, gives_up=False))
    result = run_headless(sandbox, "Make the tests pass.", version=claude_332,
                          plugin_dir=PLUGIN, extra_args=ALLOW_BASH, timeout=120,
                          output_format="text")
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 4
    assert mock_api.count("main") == 7
    assert result.stdout == LADDER_LINE + "\n", result.stdout


# -- the two kinds of loop as one: a /goal that re-runs the same failing command ------------------

GOAL = "/goal all tests in test/auth pass"
SAME_WORDS = "The auth tests still fail the same way; I will run them again."


def rerunner(command: str, *, text: Any = SAME_WORDS) -> Any:
    """Every answer runs ``command`` once, then says ``text`` (a function of the answer)."""

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index % 2 == 0:
            return Reply(text="Running the auth tests.", tool_calls=[
                ToolCall("Bash", {"command": command, "description": "Run the auth tests"})])
        return Reply(text=text(index // 2) if callable(text) else text)

    return script


def test_a_goal_that_reruns_the_same_failing_command_ends_and_the_goal_is_cleared(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    mock_api.configure(rerunner(FAILING), evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    # The kickoff's answer runs the command (its result is new); the answers to the 1st,
    # 2nd and 3rd re-prompts run it again and get nothing new: no work, 3 similar replies.
    # Two requests an answer (the call, then the words): 8 main requests, then no more.
    assert mock_api.count("main") == 8
    assert runs(sandbox) == 4
    records = journal(sandbox)
    stops = [r for r in records if r["event"] == "detection" and r["rule"] != "TOOL_REPEAT"]
    assert [r["rule"] for r in stops] == ["SAME_REPLY_TURNS"]
    outcomes = [r["outcome"] for r in records if r["event"] == "outcome"]
    statuses = goal_statuses(sandbox.read_transcript())
    if "2.1.250" in str(claude):  # no mod, no terminal pane: the goal is only paused
        assert outcomes == ["not_possible"]
    else:
        assert any(s.get("met") is True and s.get("sentinel") is True for s in statuses)
        assert result.output is not None
        assert result.output["result"].startswith("loop-killer: SAME_REPLY_TURNS ("), result.output
        assert result.output["result"].endswith("loop stopped, goal cleared.")


def test_a_goal_whose_work_advances_runs_until_it_is_met(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    # Similar words in every answer, but each run of the tests gets further: work.
    command = "echo run >> runs.txt; echo \"auth tests: $(wc -l < runs.txt) passed, 1 failed\""
    mock_api.configure(rerunner(command), evaluator=EvaluatorPolicy(met_on=6))
    result = run_headless(sandbox, GOAL, version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert mock_api.count("main") == 12  # 6 rounds of the call and the words
    assert runs(sandbox) == 6
    final = goal_statuses(sandbox.read_transcript())[-1]
    assert final["met"] is True and not final.get("sentinel")  # the evaluator ended it
    assert journal(sandbox) == []



FRESH_ID_API = ("echo run >> runs.txt\n"
                "id=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \\n')\n"
                'echo "Error: 503 Service Unavailable (request_id: req_011CX$id)"\n'
                "exit 1\n")
"""A call that fails the same way every time, with a fresh request id (issue 29)."""


def test_a_goal_whose_call_fails_with_a_fresh_request_id_each_time_ends(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    # Noise is not progress: the same 503 with a new request id in every answer is the
    # same result, so the answers to re-prompts do no work and the loop ends as with an
    # unchanged output. (Before the ids were masked every answer counted as new work and
    # the goal ran until the scripted model ran out.) The model runs the call for 20
    # rounds at most, so that a regression fails on the count, not on a timeout.
    (sandbox.project / "call_api.sh").write_text(FRESH_ID_API)
    run_it = rerunner("sh call_api.sh")

    def script(index: int, body: dict[str, Any]) -> Reply:
        return run_it(index, body) if index < 40 else Reply(text=SAME_WORDS)

    mock_api.configure(script, evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=180)
    assert result.returncode == 0, result.stderr
    assert mock_api.count("main") <= 12
    entries = sandbox.read_transcript()
    outputs = [_text(block.get("content")) for block in tool_results(entries)]
    assert len(outputs) == runs(sandbox) >= 3
    assert len(set(outputs)) == len(outputs)  # a fresh request id every time
    assert all("503 Service Unavailable (request_id: req_011CX" in o for o in outputs)
    statuses = goal_statuses(entries)
    assert statuses[-1].get("met") is True and statuses[-1].get("sentinel") is True
    assert result.output is not None
    assert result.output["result"].endswith("loop stopped, goal cleared."), result.output


# -- no false refusals (issue 21), on the real binary -----------------------------------------


def test_a_check_after_each_edit_is_never_warned_nor_refused(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    target = sandbox.project / "version.txt"
    target.write_text("v0\n")
    calls: list[tuple[str, dict[str, Any]]] = [("Read", {"file_path": str(target)})]
    for n in range(6):
        calls.append(("Edit", {"file_path": str(target), "old_string": f"v{n}",
                               "new_string": f"v{n + 1}"}))
        calls.append(("Bash", {"command": "echo run >> runs.txt; echo 'all 12 tests passed'"}))
    mock_api.configure(scripted(calls))
    result = run_headless(sandbox, "Bump the version and test each step.", version=claude,
                          plugin_dir=PLUGIN, extra_args=["--allowedTools", "Bash,Edit,Read"],
                          timeout=120)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "v6\n"  # every edit was made
    assert runs(sandbox) == 6  # every check ran
    assert mentions(mock_api, "loop-killer") == []
    assert journal(sandbox) == []


def test_one_command_in_many_folders_is_never_refused(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    for n in range(6):
        (sandbox.project / "packages" / f"p{n}").mkdir(parents=True)
        calls.append(("Bash", {"command": f"cd {sandbox.project}/packages/p{n}"}))
        calls.append(("Bash", {"command": "echo run >> ../../runs.txt; echo 'PASS 12 tests'"}))
    mock_api.configure(scripted(calls))
    result = run_headless(sandbox, "Test every package.", version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 6
    assert mentions(mock_api, "loop-killer") == []
    assert journal(sandbox) == []


def test_a_growing_file_polled_with_ls_is_never_refused(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    # A sparse file past 1 GB, 80 MB bigger at every poll: ten-digit sizes starting with 1.
    (sandbox.project / "big.bin").write_bytes(b"")
    os.truncate(sandbox.project / "big.bin", 1_000_000_000)
    poll = "truncate -s +80000000 big.bin && ls -l big.bin && echo run >> runs.txt"
    mock_api.configure(scripted([("Bash", {"command": poll})] * 6))
    result = run_headless(sandbox, "Watch the download.", version=claude, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 6
    assert mentions(mock_api, "loop-killer") == []


def test_a_file_edited_back_and_forth_is_told_to_the_model(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    target = sandbox.project / "m.py"
    target.write_text("import a\n")
    moves = [("import a", "import b"), ("import b", "import a"), ("import a", "import b")]
    calls: list[tuple[str, dict[str, Any]]] = [("Read", {"file_path": str(target)})]
    calls += [("Edit", {"file_path": str(target), "old_string": old, "new_string": new})
              for old, new in moves]
    mock_api.configure(scripted(calls))
    result = run_headless(sandbox, "Fix the import.", version=claude, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Edit,Read"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "import b\n"  # warned, never refused
    # The request after the third edit (edit, revert, edit) carries the warning.
    assert mentions(mock_api, "going back and forth") == [4]
    records = journal(sandbox)
    assert [(r["event"], r["rule"], r["count"]) for r in records] == [
        ("detection", "EDIT_OSCILLATION", 2)]
    notices = person_notices(sandbox.read_transcript())
    assert any("EDIT_OSCILLATION" in n for n in notices), notices


def test_a_goal_that_edits_back_and_forth_is_refused_then_ended_and_cleared(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Edit, test, revert, test, for ever inside a /goal: every edit changes the file, so
    the test's count never grew, and every answer does tool work, so no re-prompt rule
    fired either: it ran until the model gave up (here, 40 requests). Now the 4th return
    of the file is refused, and the 3rd refused attempt ends the turn and clears the
    goal, as for a refused call."""
    target = sandbox.project / "m.py"
    target.write_text("import a\n")
    test = "echo run >> runs.txt; cat m.py; exit 1"

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index >= 40:
            return Reply(text="I give up on this import.")
        if index % 2:
            return Reply(text="Testing.", tool_calls=[ToolCall("Bash", {"command": test})])
        old, new = (("import a", "import b") if "import a" in target.read_text()
                    else ("import b", "import a"))
        return Reply(text="Trying the other import.", tool_calls=[ToolCall(
            "Edit", {"file_path": str(target), "old_string": old, "new_string": new})])

    mock_api.configure(script, evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash,Edit"], timeout=180)
    assert result.returncode == 0, result.stderr
    # Requests 0..7 make four edits (the 2nd, 3rd and 4th take the file back) and four
    # tests; the edits asked at 8, 10 and 12 are refused, the 3rd ending the turn.
    assert mock_api.count("main") == 13
    assert runs(sandbox) == 6
    assert target.read_text() == "import a\n"
    assert mentions(mock_api, "going back and forth")[0] == 5
    assert mentions(mock_api, "loop-killer: refused to make this edit")[0] == 9
    events = [(r["event"], r["rule"]) for r in journal(sandbox)]
    assert events[:2] == [("detection", "EDIT_OSCILLATION"), ("refusal", "EDIT_OSCILLATION")]
    assert events[-1] == ("outcome", "TOOL_REPEAT")
    statuses = goal_statuses(sandbox.read_transcript())
    assert statuses[-1].get("met") is True and statuses[-1].get("sentinel") is True
    assert result.output is not None
    assert result.output["result"] == ("loop-killer: TOOL_REPEAT (a refused call tried 3 more "
                                       "times): loop stopped, goal cleared."), result.output


def test_retrying_a_refused_call_inside_a_goal_ends_the_turn_and_clears_the_goal(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    # The answer to the goal's kickoff never ends: it retries the call after every result,
    # refusals included, so no Stop (and no re-prompt rule) comes between.
    mock_api.configure(repeater(FAILING, gives_up=False), evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=ALLOW_BASH, timeout=120)
    assert result.returncode == 0, result.stderr
    assert runs(sandbox) == 4
    assert mock_api.count("main") == 7
    assert mock_api.count("evaluator") == 0  # the turn ended before any Stop
    statuses = goal_statuses(sandbox.read_transcript())
    assert statuses[-1].get("met") is True and statuses[-1].get("sentinel") is True
    assert result.output is not None
    assert result.output["result"] == ("loop-killer: TOOL_REPEAT (a refused call tried 3 more "
                                       "times): loop stopped, goal cleared."), result.output


# -- calls no command hook hears ---------------------------------------------------------------

REJECTED_READ = ("Read", {"path": "config.txt"})  # Read takes file_path: the input is refused


@pytest.fixture(params=["2.1.328", "2.1.332"])
def claude_with_mod(request: pytest.FixtureRequest) -> Path:
    """The versions that load the plugin's mod (2.1.287 on)."""
    binary: Path = request.getfixturevalue(
        {"2.1.328": "claude_328", "2.1.332": "claude_332"}[request.param])
    return binary


def system_rows(entries: list[dict[str, Any]]) -> list[str]:
    """The rows the mod's turn end added for the person (its notice)."""
    return [str(entry.get("content")) for entry in entries if entry.get("type") == "system"
            and entry.get("subtype") == "informational"]


def test_a_call_whose_input_claude_code_rejects_is_warned_refused_and_its_turn_ended(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_with_mod: Path
) -> None:
    """Claude Code runs no PreToolUse, PostToolUse nor PostToolUseFailure hook for a call
    whose input it rejects (InputValidationError): a model repeating one looped for ever,
    hundreds of requests a minute. The mod hears every call and asks the brain, as those
    hooks would have: the same ladder, the same words, the same log."""
    name, tool_input = REJECTED_READ

    def script(index: int, body: dict[str, Any]) -> Reply:
        return Reply(text="Reading it.", tool_calls=[ToolCall(name, tool_input)])

    mock_api.configure(script)
    debug = sandbox.root / "debug.log"  # (a -p run hands the mod's rows to its host)
    result = run_headless(sandbox, "Read the config.", version=claude_with_mod,
                          plugin_dir=PLUGIN, timeout=120,
                          extra_args=["--allowedTools", "Read", "--debug-file", str(debug)])
    assert not result.timed_out and result.returncode == 0, result.stderr
    # Requests: 0 (prompt) -> attempt 1, 1..3 after rejections 1..3 (the 3rd warned),
    # 4 after the 4th, 5 and 6 after refused attempts 1 and 2; the 3rd refused attempt
    # ends the turn: no request after it.
    assert mock_api.count("main") == 7
    assert mentions(mock_api, WARNING)[0] == 3
    assert mentions(mock_api, REFUSED)[0] == 5
    records = journal(sandbox)
    assert [(r["event"], r["rule"]) for r in records] == [
        ("detection", "TOOL_REPEAT"), ("refusal", "TOOL_REPEAT"),  # one per refused call
        ("outcome", "TOOL_REPEAT")]
    assert records[-1]["outcome"] == "stopped_no_goal"
    # The person's lines, as the command hooks' would be: each warning and the first
    # refusal as a row of the mod's (in the debug log too), the stop as its notice.
    logged = debug.read_text(errors="replace")
    assert "loop-killer: Read: " in logged and "gave the same result 3 times" in logged
    assert logged.count("loop-killer: refused Read: ") == 1
    rows = system_rows(sandbox.read_transcript())
    assert [row for row in rows if "loop stopped" in row] == [
        "loop-killer: TOOL_REPEAT (a refused call tried 3 more times): loop stopped; no goal "
        "was set."]


def test_a_call_the_permissions_refuse_again_and_again_ends_like_any_other(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_with_mod: Path
) -> None:
    """A call the permissions refuse raises PreToolUse but no PostToolUse(Failure): its
    refusals were never counted, and a model retrying it looped (found by a review: 555
    requests in 45 s). The mod counts the refusal the engine gave."""
    mock_api.configure(lambda index, body: Reply(text="Trying again.", tool_calls=[
        ToolCall("Bash", {"command": "echo hi > out.txt"})]))
    result = run_headless(sandbox, "Write the file.", version=claude_with_mod,
                          plugin_dir=PLUGIN, extra_args=["--allowedTools", "Read"],
                          timeout=120)
    assert not result.timed_out and result.returncode == 0, result.stderr
    assert mock_api.count("main") == 7
    assert mentions(mock_api, WARNING)[0] == 3 and mentions(mock_api, REFUSED)[0] == 5
    assert [r["event"] for r in journal(sandbox)] == ["detection", "refusal", "outcome"]


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _delegating(sub_call: ToolCall) -> Any:
    """A session that hands one task to a subagent, which makes ``sub_call`` again and
    again; the session says "Done." once the subagent is back."""
    def script(index: int, body: dict[str, Any]) -> Reply:
        if "SUBTASK" in _first_user_text(body):
            return Reply(text="Trying it again.", tool_calls=[sub_call])
        if index > 0:
            return Reply(text="Done.")
        return Reply(text="Delegating.", tool_calls=[ToolCall("Agent", {
            "description": "do it", "prompt": "SUBTASK do it",
            "subagent_type": "general-purpose"})])

    return script


@pytest.mark.parametrize("sub_call", [
    ToolCall("Bash", {"command": "echo run >> runs.txt; cat no-such-file"}),
    ToolCall(*REJECTED_READ),
], ids=["failing command", "input claude code rejects"])
def test_a_subagent_retrying_a_refused_call_is_stopped_and_the_session_goes_on(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_with_mod: Path, sub_call: ToolCall
) -> None:
    """Found by a review: the ladder's stop was the main session's alone, so a subagent
    retrying its refused call looped (433 requests in 60 s; 397 refusals for a rejected
    input). A failing command's PreToolUse now answers continue: false, which ends the
    subagent's run (measured); for a rejected input the mod answers the subagent's next
    model request itself, with no tool call. The session gets the subagent's result and
    goes on."""
    mock_api.configure(_delegating(sub_call))
    result = run_headless(sandbox, "Go.", version=claude_with_mod, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash,Read,Agent"], timeout=120)
    assert not result.timed_out and result.returncode == 0, result.stderr
    assert result.output is not None and result.output.get("result") == "Done."
    if sub_call.name == "Bash":
        assert runs(sandbox) == 4  # the 5th attempt and the retries never ran
    records = journal(sandbox)
    # (the subagent's stop is its loop's outcome: the session's own turn goes on)
    assert [(r["event"], bool(r.get("agent_id"))) for r in records] == [
        ("detection", True), ("refusal", True), ("outcome", False)]


def test_a_subagent_re_prompted_by_its_own_stop_hook_is_stopped_by_the_ladder(
    sandbox: Sandbox, mock_api: MockAnthropic, claude: Path
) -> None:
    """A SubagentStop hook that always blocks re-prompts the subagent (a "Stop hook
    feedback:" line in its own transcript; measured on 2.1.250, 2.1.328 and 2.1.332).
    Claude Code lets a subagent that answers with text alone go after 9 blocks, but a
    subagent with tool work between its answers had no cap at all (30 blocks in 60
    requests, measured). When that work is the same failing check, the subagent's count
    ends it: the check runs 4 times and the session goes on with the subagent's result."""
    hook = sandbox.root / "block_subagent_stop.py"
    hook.write_text('import json\nprint(json.dumps({"decision": "block", '
                    '"reason": "Keep going: the check must pass."}))\n')
    settings = sandbox.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"hooks": {"SubagentStop": [{"hooks": [
        {"type": "command", "command": f"python3 {hook}"}]}]}}))
    check = ToolCall("Bash", {"command": "echo run >> runs.txt; cat no-such-file"})

    def script(index: int, body: dict[str, Any]) -> Reply:
        if "SUBTASK" in _first_user_text(body):
            if _last_results(body):
                return Reply(text="The check still fails.")  # then its Stop hook blocks
            return Reply(text="Running the check.", tool_calls=[check])
        if index > 0:
            return Reply(text="Done.")
        tools = [tool.get("name") for tool in body.get("tools") or []]
        return Reply(text="Delegating.", tool_calls=[ToolCall(
            "Agent" if "Agent" in tools else "Task", {
                "description": "check", "prompt": "SUBTASK run the check",
                "subagent_type": "general-purpose", "run_in_background": False})])

    mock_api.configure(script)
    result = run_headless(sandbox, "Go.", version=claude, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash,Agent"], timeout=120)
    assert not result.timed_out and result.returncode == 0, result.stderr
    assert result.output is not None and result.output.get("result") == "Done."
    assert runs(sandbox) == 4
    # The session's 2 requests; the subagent's 13: 4 checks, 4 answers each followed by a
    # block, then 3 refused attempts with an answer and a block between, the 3rd ending it.
    assert mock_api.count("main") == 15
    records = journal(sandbox)
    # (the subagent's stop is its loop's outcome: the session's own turn goes on)
    assert [(r["event"], bool(r.get("agent_id"))) for r in records] == [
        ("detection", True), ("refusal", True), ("outcome", False)]
