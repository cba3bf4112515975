"""Prove the e2e harness against the real Claude Code binaries (offline, mock API)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transcripts import CONDITION

from .harness import (
    Sandbox,
    TuiSession,
    assistant_texts,
    entry_text,
    goal_statuses,
    run_headless,
    stop_hook_feedback,
    tool_results,
    tool_uses,
)
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall

EVALUATOR_FORMAT = {"format": {"type": "json_schema", "schema": {
    "type": "object", "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}}}}}

SAME_REPLY = "I am still working on getting the auth tests to pass."
FEEDBACK = f"Stop hook feedback:\n[{CONDITION}]: The condition is not met yet."
# Claude Code's own cap: 9 consecutive Stop-hook blocks end the turn. The kickoff reply plus
# 8 re-prompted replies are 9 main requests; each of the 9 is evaluated (and blocked).
CAP = 9


def _run_goal_loop(sandbox: Sandbox, mock: MockAnthropic, binary: Path) -> list[dict]:
    mock.configure(default=Reply(text=SAME_REPLY, delay=0.02), evaluator=EvaluatorPolicy())
    rc, output, stderr = run_headless(sandbox, f"/goal {CONDITION}", version=binary, timeout=60)
    assert rc == 0, stderr
    assert output is not None and output["subtype"] == "success"
    assert output["num_turns"] == CAP + 1
    return sandbox.read_transcript()


def test_headless_goal_loop_runs_until_the_block_cap_on_2_1_328(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_328: Path
) -> None:
    entries = _run_goal_loop(sandbox, mock_api, claude_328)

    assert mock_api.count("main") == CAP
    assert mock_api.count("evaluator") == CAP
    assert mock_api.count("other") == 0
    main = mock_api.requests("main")
    assert "A session-scoped Stop hook is now active" in main[0].last_user_text
    assert all(r.last_user_text == FEEDBACK for r in main[1:])

    feedback = stop_hook_feedback(entries)
    assert len(feedback) == CAP  # the 9th is the one the cap overrides
    assert all(entry_text(e) == FEEDBACK and e.get("isMeta") is True for e in feedback)
    statuses = goal_statuses(entries)
    assert statuses[0] == {"type": "goal_status", "met": False, "sentinel": True,
                           "condition": CONDITION}
    assert statuses[1:] == [
        {"type": "goal_status", "met": False, "condition": CONDITION,
         "reason": "The condition is not met yet."}
    ] * CAP
    assert assistant_texts(entries) == [SAME_REPLY] * CAP
    cap_lines = [e for e in entries if e.get("subtype") == "informational"]
    assert len(cap_lines) == 1 and "9 consecutive times" in cap_lines[0]["content"]


def test_headless_goal_loop_re_prompts_on_2_1_250(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_250: Path
) -> None:
    entries = _run_goal_loop(sandbox, mock_api, claude_250)

    assert mock_api.count("main") == CAP
    assert mock_api.count("evaluator") == CAP
    feedback = stop_hook_feedback(entries)
    assert len(feedback) == CAP
    assert all(entry_text(e) == FEEDBACK for e in feedback)
    assert len(goal_statuses(entries)) == CAP + 1
    # 2.1.250 writes neither system/stop_hook_summary nor the cap's informational line.
    assert not [e for e in entries if e.get("type") == "system"
                and e.get("subtype") in ("stop_hook_summary", "informational")]


def test_headless_goal_ends_when_the_evaluator_says_met(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_328: Path
) -> None:
    mock_api.configure(default=Reply(text=SAME_REPLY), evaluator=EvaluatorPolicy(met_on=3))
    rc, output, stderr = run_headless(sandbox, f"/goal {CONDITION}", version=claude_328,
                                      timeout=60)
    assert rc == 0, stderr
    assert output is not None and output["subtype"] == "success"
    assert mock_api.count("main") == 3
    assert [r.answer["ok"] for r in mock_api.requests("evaluator")] == [False, False, True]

    entries = sandbox.read_transcript()
    assert len(stop_hook_feedback(entries)) == 2
    last = goal_statuses(entries)[-1]
    assert last["met"] is True and last["reason"] == "The condition is met."
    assert last["iterations"] == 3  # extra fields on the met status (2.1.328)


def test_headless_bash_tool_call_writes_a_tool_result(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_328: Path
) -> None:
    mock_api.configure([
        Reply(text="Let me run it.",
              tool_calls=[ToolCall("Bash", {"command": "echo hi-from-bash",
                                            "description": "Print a greeting"})]),
        Reply(text="The command printed hi-from-bash."),
    ])
    rc, output, stderr = run_headless(
        sandbox, "Run echo for me.", version=claude_328, extra_args=["--allowedTools", "Bash"],
        timeout=60,
    )
    assert rc == 0, stderr
    assert output is not None and output["result"] == "The command printed hi-from-bash."

    entries = sandbox.read_transcript()
    assert [u["name"] for u in tool_uses(entries)] == ["Bash"]
    results = tool_results(entries)
    assert len(results) == 1 and not results[0].get("is_error")
    assert "hi-from-bash" in str(results[0]["content"])
    # The second main request carries the tool result back to the model.
    assert mock_api.count("main") == 2
    assert "hi-from-bash" in mock_api.requests("main")[1].last_user_text


def test_tui_shows_the_scripted_reply_and_exits_cleanly(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_328: Path,
    tui: Callable[..., TuiSession],
) -> None:
    mock_api.configure([Reply(text="Hello from the scripted model.", delay=0.05)])
    session = tui(version=claude_328)
    session.wait_ready()
    session.type_line("Say hello.")
    screen = session.wait_for("Hello from the scripted model.", timeout=30)
    assert "\u276f Say hello." in screen
    assert session.exit() == 0
    assert "claude --resume" in session.capture()

    assert mock_api.count("main") == 1
    assert mock_api.requests("main")[0].last_user_text.endswith("Say hello.")
    entries = sandbox.read_transcript()
    assert "Hello from the scripted model." in assistant_texts(entries)
    prompts = [entry_text(e) for e in entries if e.get("type") == "user" and not e.get("isMeta")]
    assert "Say hello." in prompts


def _post(mock: MockAnthropic, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        mock.base_url + "/v1/messages", data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_mock_api_classifies_answers_and_reports_script_errors(tmp_path: Path) -> None:
    """The mock alone (no binary): plain-JSON answers, classification, probes, the log."""
    def script(index: int, body: dict[str, Any]) -> Reply:
        if index == 1:
            raise ValueError("broken script")
        return Reply(text="hi", tool_calls=[ToolCall("Bash", {"command": "ls"})])

    log = tmp_path / "requests.jsonl"
    with MockAnthropic(script, evaluator=EvaluatorPolicy(met_on=2), log_path=log) as mock:
        tools = [{"name": "Bash"}]
        status, message = _post(mock, {"tools": tools, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]}]})
        assert status == 200 and message["stop_reason"] == "tool_use"
        assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
        status, error = _post(mock, {"tools": tools, "messages": []})
        assert status == 400 and "broken script" in error["error"]["message"]
        assert mock.script_errors == ["main[1]: ValueError('broken script')"]
        verdicts = [_post(mock, {"tools": [], "output_config": EVALUATOR_FORMAT,
                                 "messages": []})[1]["content"][0]["text"] for _ in range(2)]
        assert [json.loads(v)["ok"] for v in verdicts] == [False, True]
        _, other = _post(mock, {"messages": [{"role": "user", "content": "title?"}]})
        assert other["content"][0]["text"] == "OK."
        with urllib.request.urlopen(mock.base_url + "/", timeout=10) as probe:
            assert probe.status == 200

        assert [r.kind for r in mock.requests()] == ["main", "main", "evaluator", "evaluator",
                                                     "other"]
        assert mock.requests("main")[0].last_user_text == "go"
    assert len(log.read_text().splitlines()) == 5
