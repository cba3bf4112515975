"""Waiting is not looping (issue 29), on the real Claude Code 2.1.332, headless, offline.

A ``/goal`` waiting on CI polls ``sleep 1 && ./ci-status.sh``, which prints ``in_progress``
until its Nth run: the same result again and again is the world not having changed yet.
It runs until its evaluator finds it met, with no word from loop-killer. A CI that never
turns green is a loop once its result has stayed the same for the wait bound (set to a few
seconds here): the call is refused, the turn ended, the goal cleared, and the words say
it waited. A goal whose work advances while it re-reads an unchanged plan runs to its
end: its refused re-read never ends the turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .harness import Sandbox, goal_statuses, read_jsonl, run_headless
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
POLL = "sleep 1 && ./ci-status.sh"
GOAL = "/goal CI for PR 42 has passed"
SAME_WORDS = "CI for PR 42 is still running; I will check it again."
VARIED_WORDS = [
    "CI for PR 42 is still running; I will check it again.",
    "The pipeline has not finished yet. Polling once more.",
    "Still in progress. Giving the runners another moment.",
    "No verdict from the build so far, so another look follows.",
    "Checks remain pending; waiting a little longer before the next query.",
    "Nothing final yet: the jobs keep going, one more status request.",
    "The workflow is busy; I'll ask for its state again shortly.",
    "Not green, not red: unfinished. Another poll.",
    "Pending as before. Trying again.",
]


def ci_status(project: Path, *, green_at: int | None) -> None:
    """``./ci-status.sh``: ``in_progress`` until its ``green_at``-th run, then ``success``
    (never, with None). Each run is counted in ``polls.txt``."""
    turn = f'[ "$n" -ge {green_at} ] && {{ echo success; exit 0; }}\n' if green_at else ""
    script = project / "ci-status.sh"
    script.write_text("#!/bin/sh\necho poll >> polls.txt\nn=$(wc -l < polls.txt)\n"
                      f"{turn}echo in_progress\n")
    script.chmod(0o755)


def polls(sandbox: Sandbox) -> int:
    path = sandbox.project / "polls.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def poller(words: list[str]) -> Any:
    """Every answer polls CI once, then says the next of ``words`` (the last one kept)."""

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index % 2 == 0:
            return Reply(text="Checking CI.", tool_calls=[
                ToolCall("Bash", {"command": POLL, "description": "Check CI status"})])
        return Reply(text=words[min(index // 2, len(words) - 1)])

    return script


def journal(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = sandbox.home / ".claude" / "loop-killer" / "detections.jsonl"
    return read_jsonl(path) if path.exists() else []


def loop_killer_said(mock: MockAnthropic, result_stdout: str) -> bool:
    """Whether any word of loop-killer reached the model or the person."""
    return any("loop-killer" in json.dumps(r.body.get("messages")) for r in
               mock.requests("main")) or "loop-killer" in result_stdout


def test_a_goal_waiting_on_ci_with_the_same_words_is_met_untouched(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Was: 4 polls, then the goal cleared (SAME_REPLY_TURNS: a repeated result was no
    work)."""
    ci_status(sandbox.project, green_at=6)
    mock_api.configure(poller([SAME_WORDS]), evaluator=EvaluatorPolicy(met_on=6))
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash"], timeout=180)
    assert result.returncode == 0, result.stderr
    assert polls(sandbox) == 6 and mock_api.count("main") == 12
    final = goal_statuses(sandbox.read_transcript())[-1]
    assert final["met"] is True and not final.get("sentinel")  # its evaluator ended it
    assert journal(sandbox) == [] and not loop_killer_said(mock_api, result.stdout)


def test_a_goal_waiting_on_ci_with_varied_words_is_met_untouched(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Was: 4 polls, then cleared by the TOOL_REPEAT stop (refused from the 5th)."""
    ci_status(sandbox.project, green_at=8)
    mock_api.configure(poller(VARIED_WORDS), evaluator=EvaluatorPolicy(met_on=8))
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash"], timeout=180)
    assert result.returncode == 0, result.stderr
    assert polls(sandbox) == 8 and mock_api.count("main") == 16
    final = goal_statuses(sandbox.read_transcript())[-1]
    assert final["met"] is True and not final.get("sentinel")
    assert journal(sandbox) == [] and not loop_killer_said(mock_api, result.stdout)


def test_a_goal_polling_a_ci_that_never_turns_green_ends_at_the_wait_bound(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """The result stays ``in_progress`` for the bound (6 s here): the model is told it
    waited, the poll is refused, and its third refused attempt ends the turn and clears
    the goal, with words that say what it waited on and for how long."""
    ci_status(sandbox.project, green_at=None)
    mock_api.configure(poller([SAME_WORDS]), evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash"], timeout=180,
                          env={"LOOP_KILLER_WAIT_MINUTES": "0.1"})
    assert result.returncode == 0, result.stderr
    first, last = _poll_times(sandbox)
    assert last - first >= 6.0  # it waited the whole bound...
    assert polls(sandbox) <= 12  # ...and no more than a round or two past it
    told = [r.index for r in mock_api.requests("main")
            if "its result has not changed in" in json.dumps(r.body.get("messages"))]
    assert told, "the model was told it waited"
    statuses = goal_statuses(sandbox.read_transcript())
    assert any(s.get("met") is True and s.get("sentinel") is True for s in statuses)
    assert result.output is not None
    said = str(result.output.get("result"))
    assert said.startswith("loop-killer: TOOL_REPEAT (") and "waited" in said, said
    assert "sleep 1 && ./ci-status.sh" in said and said.endswith("goal cleared."), said
    detections = [r for r in journal(sandbox) if r["event"] == "detection"]
    assert [r["rule"] for r in detections] == ["TOOL_REPEAT"]


def _poll_times(sandbox: Sandbox) -> tuple[float, float]:
    """When the first and the last poll's results came back (the transcript's clock)."""
    from loop_killer.engine.transcript import parse_timestamp as iso_seconds

    times = []
    for entry in sandbox.read_transcript():
        content = (entry.get("message") or {}).get("content") if entry.get("type") == "user" \
            else None
        if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result"
                and "in_progress" in json.dumps(b.get("content")) for b in content):
            seconds = iso_seconds(str(entry.get("timestamp")))
            assert seconds is not None
            times.append(seconds)
    assert times
    return times[0], times[-1]


def test_a_goal_whose_work_advances_while_it_rereads_an_unchanged_plan_runs_to_its_end(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Every answer re-reads PLAN.md (the same result: refused from the 5th) and writes the
    next migration (new). Was: cleared at migration 6 of 11, the refused re-read having
    ended the turn although the turn made progress."""
    (sandbox.project / "PLAN.md").write_text("1. Write one migration per table, 11 tables.\n")
    migrate = sandbox.project / "migrate.sh"
    migrate.write_text("#!/bin/sh\necho \"$1\" >> migrations.txt\n"
                       "echo \"migration $1 written ($(wc -l < migrations.txt) of 11)\"\n")
    migrate.chmod(0o755)

    def script(index: int, body: dict[str, Any]) -> Reply:
        step, table = index % 3, index // 3 + 1
        if step == 0:
            return Reply(tool_calls=[ToolCall("Read", {"file_path": str(
                sandbox.project / "PLAN.md")})])
        if step == 1:
            return Reply(tool_calls=[ToolCall("Bash", {"command": f"./migrate.sh t{table}"})])
        return Reply(text=f"Migration for table t{table} is written; on to the next one.")

    mock_api.configure(script, evaluator=EvaluatorPolicy(met_on=11))
    result = run_headless(sandbox, "/goal every table has its migration", version=claude_332,
                          plugin_dir=PLUGIN, extra_args=["--allowedTools", "Bash,Read"],
                          timeout=240)
    assert result.returncode == 0, result.stderr
    written = (sandbox.project / "migrations.txt").read_text().split()
    assert written == [f"t{n}" for n in range(1, 12)]
    final = goal_statuses(sandbox.read_transcript())[-1]
    assert final["met"] is True and not final.get("sentinel")  # its evaluator ended it
    refusals = [r for r in journal(sandbox) if r["event"] == "refusal"]
    assert refusals and all(r["tool"] == "Read" for r in refusals)  # still refused
    assert not [r for r in journal(sandbox) if r["event"] == "outcome"]  # never stopped
