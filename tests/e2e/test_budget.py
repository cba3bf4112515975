"""BUDGET (issue 32), on the real Claude Code 2.1.332, headless, offline.

The endless migration: every answer runs a new ``./migrate.sh tN`` and says something new,
and the ``/goal`` evaluator never finds it met. Every answer does new work, so no loop
rule can tell it from progress, and Claude Code's own cap starts afresh on tool work: only
a budget ends it. Each answer is two main requests (the call, then the words after its
result).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .harness import Sandbox, goal_statuses, read_jsonl, run_headless
from .mock_api import EvaluatorPolicy, MockAnthropic, Reply, ToolCall, _blocks, _usage
from .test_scenarios import Watcher, settled_main_count

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
GOAL = "/goal every table is migrated"
MODEL = "claude-opus-5-5"


def _migrations(project: Path) -> None:
    migrate = project / "migrate.sh"
    migrate.write_text("#!/bin/sh\necho \"$1\" >> migrations.txt\n"
                       "echo \"migration $1 written ($(wc -l < migrations.txt) so far)\"\n")
    migrate.chmod(0o755)


def _reply(index: int) -> Reply:
    """Request ``index`` (0-based) of the endless migration: a call, then its words."""
    table = index // 2 + 1
    if index % 2 == 0:
        return Reply(tool_calls=[ToolCall("Bash", {"command": f"./migrate.sh t{table}"})])
    return Reply(text=f"Table t{table} is migrated ({table * 7} rows moved); t{table + 1} next.")


def _script(index: int, body: dict[str, Any]) -> Reply:
    return _reply(index)


def _price(reply: Reply) -> float:
    """What the mock's reply costs as loop-killer prices it (its usage, as the mock sends
    it: 10 input tokens, output by the blocks' size)."""
    from loop_killer.engine.transcript import Usage
    from loop_killer.scan.prices import PriceTable

    blocks = _blocks(reply)
    usage = _usage(max(1, sum(len(json.dumps(b)) // 4 for b in blocks)))
    return PriceTable().reply_cost(MODEL, Usage(input=usage["input_tokens"],
                                                output=usage["output_tokens"]))[0]


def _journal(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = sandbox.home / ".claude" / "loop-killer" / "detections.jsonl"
    return read_jsonl(path) if path.exists() else []


def _result(result: Any) -> str:
    assert result.output is not None, result.stderr
    return str(result.output.get("result"))


def test_the_re_prompt_budget_ends_an_endless_migration_and_clears_its_goal(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    _migrations(sandbox.project)
    mock_api.configure(_script, evaluator=EvaluatorPolicy())
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash", "--model", MODEL],
                          env={"LOOP_KILLER_BUDGET_REPROMPTS": "5"}, timeout=240)
    assert result.returncode == 0, result.stderr
    # The answer to the /goal, then the answers to 5 re-prompts: 6 answers, 12 requests.
    assert settled_main_count(mock_api) == 12
    assert (sandbox.project / "migrations.txt").read_text().split() == [
        f"t{n}" for n in range(1, 7)]
    assert any(s.get("met") is True and s.get("sentinel") is True
               for s in goal_statuses(sandbox.read_transcript()))
    said = _result(result)
    assert said == ("loop-killer: BUDGET (5 re-prompts in this goal, limit 5): loop stopped, "
                    "goal cleared."), said
    assert [r["rule"] for r in _journal(sandbox) if r["event"] == "detection"] == ["BUDGET"]


def test_the_spend_budget_with_the_watcher_ends_an_endless_migration(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    _migrations(sandbox.project)
    two_requests = _price(_reply(0)) + _price(_reply(1))
    limit = two_requests * 1.01  # crossed by the third request
    sandbox.extra_env["LOOP_KILLER_BUDGET_USD"] = repr(limit)  # the watcher's and the hooks'
    sandbox.extra_env["LOOP_KILLER_BUDGET_REPROMPTS"] = "0"  # spend alone
    (sandbox.home / ".claude" / "projects").mkdir(parents=True, exist_ok=True)  # read live
    watcher = Watcher(sandbox)
    try:
        mock_api.configure(_script, evaluator=EvaluatorPolicy())
        result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                              extra_args=["--allowedTools", "Bash", "--model", MODEL],
                              timeout=240)
        assert result.returncode == 0, result.stderr
        main = settled_main_count(mock_api)
        assert main <= 6, main  # the 3rd request crossed it: stopped by the 2nd or 3rd Stop
        assert any(s.get("met") is True and s.get("sentinel") is True
                   for s in goal_statuses(sandbox.read_transcript()))
        said = _result(result)
        assert said.startswith("loop-killer: BUDGET ($") and " spent in this goal, limit $" in said
        assert said.endswith("): loop stopped, goal cleared."), said
        shown = watcher.wait_for(lambda text: "BUDGET" in text and "CLEARED" in text)
        assert "spent in this goal" in shown
    finally:
        watcher.stop()


def test_with_the_default_budget_a_goal_met_at_its_tenth_check_runs_untouched(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    _migrations(sandbox.project)
    mock_api.configure(_script, evaluator=EvaluatorPolicy(met_on=10))
    result = run_headless(sandbox, GOAL, version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash", "--model", MODEL], timeout=240)
    assert result.returncode == 0, result.stderr
    assert settled_main_count(mock_api) == 20
    final = goal_statuses(sandbox.read_transcript())[-1]
    assert final["met"] is True and not final.get("sentinel")  # its evaluator ended it
    assert not [r for r in _journal(sandbox) if r["event"] in ("detection", "outcome")]


def test_a_budget_stop_of_a_turn_without_a_goal_ends_it_and_says_so(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    from .test_scenarios import write_blocking_stop_hook

    _migrations(sandbox.project)
    write_blocking_stop_hook(sandbox.project)
    mock_api.configure(_script)
    result = run_headless(sandbox, "Migrate every table.", version=claude_332,
                          plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash", "--model", MODEL],
                          env={"LOOP_KILLER_BUDGET_REPROMPTS": "3"}, timeout=240)
    assert result.returncode == 0, result.stderr
    assert settled_main_count(mock_api) == 8  # 4 answers: the prompt's and 3 re-prompts'
    outcomes = [r for r in _journal(sandbox) if r["event"] == "outcome"]
    assert [r["outcome"] for r in outcomes] == ["stopped_no_goal"]
    assert outcomes[0]["detail"] == (
        "loop-killer: BUDGET (3 re-prompts in this turn, limit 3): loop stopped; no goal "
        "was set.")
