"""The plugin in the real Claude Code (offline, mock API): the loop ends at exactly the reply
that reaches the threshold, and /goal clear is run by the mod (2.1.328) or typed into the
tmux pane (2.1.250, which has no mods)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.harness import (
    Sandbox,
    TuiSession,
    assistant_texts,
    claude_binary,
    goal_statuses,
    missing_claude_reason,
    missing_tool_reason,
    run_headless,
)
from e2e.mock_api import EvaluatorPolicy, MockAnthropic, Reply
from must_run import unavailable
from transcripts import CONDITION
from waits import wait_for

PLUGIN = Path(__file__).resolve().parents[2] / "plugin"
SAME = "I am still working on getting the auth tests to pass."


def _binary(version: str) -> Path:
    path = claude_binary(version)
    if path is None:
        unavailable(missing_claude_reason(version))
    return path


@pytest.fixture
def mock(tmp_path: Path) -> Iterator[MockAnthropic]:
    with MockAnthropic(log_path=tmp_path / "mock.jsonl") as server:
        server.configure(default=Reply(text=SAME, delay=0.3), evaluator=EvaluatorPolicy())
        yield server


@pytest.fixture
def sandbox(tmp_path: Path, mock: MockAnthropic) -> Sandbox:
    return Sandbox.create(tmp_path / "sb", mock)


ONE_LINE = ("loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop stopped, goal "
            "cleared.")


def _journal(sandbox: Sandbox) -> list[dict]:
    path = sandbox.home / ".claude" / "loop-killer" / "detections.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("version, result, outcome", [
    # With the mod, the printed result is loop-killer's one line, once /goal clear ran.
    ("2.1.328", ONE_LINE, "clear_queued"),
    ("2.1.250", "", "not_possible"),
])
def test_headless_goal_loop_stops_at_the_third_similar_reply(
    sandbox: Sandbox, mock: MockAnthropic, version: str, result: str, outcome: str
) -> None:
    run = run_headless(sandbox, f"/goal {CONDITION}", version=_binary(version),
                       plugin_dir=PLUGIN, timeout=120)
    assert run.returncode == 0, run.stderr
    # The kickoff's answer, then exactly three answers to re-prompts: not one more.
    assert mock.count("main") == 4
    assert assistant_texts(sandbox.read_transcript()) == [SAME] * 4
    assert run.output is not None and run.output["result"] == result
    records = _journal(sandbox)
    assert [(r["event"], r.get("rule")) for r in records] == [
        ("detection", "SAME_REPLY_TURNS"), ("outcome", "SAME_REPLY_TURNS")]
    assert records[1]["outcome"] == outcome
    statuses = goal_statuses(sandbox.read_transcript())
    assert (statuses[-1].get("met"), statuses[-1].get("sentinel")) == (
        (True, True) if version == "2.1.328" else (False, None))


def test_headless_command_hook_loop_is_stopped_without_touching_any_goal(
    sandbox: Sandbox, mock: MockAnthropic
) -> None:
    hook = sandbox.root / "block.sh"
    hook.write_text('#!/bin/sh\necho \'{"decision":"block","reason":"Keep working."}\'\n')
    hook.chmod(0o755)
    settings = sandbox.project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": str(hook)}]}]}}))
    run = run_headless(sandbox, "Fix the failing tests in test/auth.",
                       version=_binary("2.1.328"), plugin_dir=PLUGIN, timeout=120)
    assert run.returncode == 0, run.stderr
    assert mock.count("main") == 4
    records = _journal(sandbox)
    assert records[-1]["outcome"] == "stopped_no_goal"
    assert goal_statuses(sandbox.read_transcript()) == []


def _tui_until_outcome(sandbox: Sandbox, version: str, shown: str) -> tuple[TuiSession, str]:
    """Run a /goal loop in the TUI until the hook logged its outcome and ``shown`` and the
    cleared goal are on screen (the hook's own line shows once its process has ended)."""
    if shutil.which("tmux") is None:
        unavailable(missing_tool_reason("tmux"))
    tui = TuiSession(sandbox, version=_binary(version), plugin_dir=PLUGIN)
    tui.start()
    tui.wait_ready()
    tui.type_line(f"/goal {CONDITION}")
    try:
        wait_for(lambda: any(r["event"] == "outcome" for r in _journal(sandbox)), 90,
                 lambda: f"an outcome logged; screen:\n{tui.capture()}", every=0.2)
        screen = tui.wait_for(lambda text: shown in text and f"Goal cleared: {CONDITION}" in text,
                              timeout=20)
    except TimeoutError:
        tui.close()
        raise
    return tui, screen


def test_tui_without_mods_types_goal_clear_into_its_own_tmux_pane(
    sandbox: Sandbox, mock: MockAnthropic
) -> None:
    notice = f"Stop says: {ONE_LINE}"
    tui, screen = _tui_until_outcome(sandbox, "2.1.250", notice)
    try:
        assert notice in screen
    finally:
        tui.close()
    assert mock.count("main") == 4
    outcome = next(r for r in _journal(sandbox) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("cleared", "tmux")
    statuses = goal_statuses(sandbox.read_transcript())
    assert (statuses[-1].get("met"), statuses[-1].get("sentinel")) == (True, True)


def test_tui_with_the_mod_leaves_the_typing_to_the_mod(
    sandbox: Sandbox, mock: MockAnthropic
) -> None:
    reason = "loop-killer: SAME_REPLY_TURNS: 3 similar replies to re-prompts; turn stopped"
    tui, screen = _tui_until_outcome(sandbox, "2.1.328", reason)
    try:
        assert "Stop says:" not in screen
    finally:
        tui.close()
    assert mock.count("main") == 4
    outcome = next(r for r in _journal(sandbox) if r["event"] == "outcome")
    assert (outcome["outcome"], outcome["hands"]) == ("clear_queued", "mod")
