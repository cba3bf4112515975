"""A change is what changed (issue 30), on the real Claude Code 2.1.332, headless, offline.

Whether anything changed between two identical results is measured on disk, not read from
a command's words: edits made by a script, by a formatter and by a subagent, each followed
by the same passing check, are never warned nor refused; the same failing check with
nothing changed still is, whatever its error says each time. Edits are judged by whole
file states: an Edit forth and a Write back, round after round, is warned and ended.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .harness import Sandbox, read_jsonl, run_headless
from .mock_api import MockAnthropic, Reply, ToolCall

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
CHECK = "./check.sh"
ROUNDS = 8


def journal(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = sandbox.home / ".claude" / "loop-killer" / "detections.jsonl"
    return read_jsonl(path) if path.exists() else []


def said_to_model(mock: MockAnthropic, text: str) -> list[int]:
    return [r.index for r in mock.requests("main")
            if text in json.dumps(r.body.get("messages"))]


def commit_project(project: Path, files: dict[str, str]) -> None:
    """The project's files, committed: git tells their changes (the sandbox's repository
    has no commit yet, so everything in it is untracked)."""
    for name, text in files.items():
        path = project / name
        path.write_text(text)
        if name.endswith(".sh") or name.endswith(".py"):
            path.chmod(0o755)
    git = ["git", "-C", str(project), "-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    subprocess.run([*git, "add", *files], check=True, capture_output=True, timeout=30)
    subprocess.run([*git, "commit", "-qm", "start"], check=True, capture_output=True,
                   timeout=30)


def checks(project: Path) -> int:
    path = project / "checks.log"  # (untracked: git counts it by its name alone)
    return len(path.read_text().splitlines()) if path.exists() else 0


CHECK_SH = "#!/bin/sh\necho run >> checks.log\necho 'all 5 checks passed'\n"


def alternating(first: Any, rounds: int = ROUNDS) -> Any:
    """Every round: ``first(n)`` (a call that changes the files), then the same check."""

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index >= 2 * rounds:
            return Reply(text="Done.")
        if index % 2 == 0:
            return Reply(tool_calls=[first(index // 2 + 1)])
        return Reply(tool_calls=[ToolCall("Bash", {"command": CHECK})])

    return script


def test_changes_made_by_a_script_or_a_formatter_make_the_next_check_new(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Was: a codemod run before each passing check was warned, refused and the turn
    stopped at item 7 of 8; a formatter was never seen as a change."""
    commit_project(sandbox.project, {
        "check.sh": CHECK_SH, "app.py": "items = []\n",
        "fix.py": "import sys\nopen('app.py', 'a').write(f'items.append({sys.argv[1]})\\n')\n",
        # A formatter that really rewrites the file (its style flips every run).
        "format.py": "text = open('app.py').read()\n"
                     "flipped = text.replace('[]', '[ ]') if '[]' in text else "
                     "text.replace('[ ]', '[]')\nopen('app.py', 'w').write(flipped)\n"
                     "print('reformatted 1 file')\n"})
    calls = [lambda n: ToolCall("Bash", {"command": f"python3 fix.py {n}"}),
             lambda n: ToolCall("Bash", {"command": "python3 format.py"})]

    def script(index: int, body: dict[str, Any]) -> Reply:
        # Rounds of codemod, check, then rounds of formatter, check.
        if index >= 4 * ROUNDS:
            return Reply(text="Done.")
        phase, step = divmod(index, 2 * ROUNDS)
        return alternating(calls[phase])(step, body)

    mock_api.configure(script)
    result = run_headless(sandbox, "Apply the codemod item by item, then format.",
                          version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash"], timeout=240)
    assert result.returncode == 0, result.stderr
    assert checks(sandbox.project) == 2 * ROUNDS
    assert result.output is not None and result.output.get("result") == "Done."
    assert journal(sandbox) == [] and not said_to_model(mock_api, "loop-killer")


def test_a_subagents_edits_make_the_next_check_new(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    commit_project(sandbox.project, {"check.sh": CHECK_SH, "app.py": "items = []\n"})

    def script(index: int, body: dict[str, Any]) -> Reply:
        first = _first_user_text(body)
        if "SUBTASK" in first:  # the subagent: one edit of the file, then its report
            if _has_results(body):
                return Reply(text="Added the item.")
            item = first.split("SUBTASK ", 1)[1].split()[0]
            return Reply(tool_calls=[ToolCall("Bash", {
                "command": f"echo 'items.append({item})' >> app.py"})])
        return alternating(lambda n: ToolCall("Agent", {
            "description": f"item {n}", "prompt": f"SUBTASK {n} add the item",
            "subagent_type": "general-purpose"}))(_main_index(body), body)

    mock_api.configure(script)
    result = run_headless(sandbox, "Have a subagent add each item.", version=claude_332,
                          plugin_dir=PLUGIN, extra_args=["--allowedTools", "Bash,Agent"],
                          timeout=300)
    assert result.returncode == 0, result.stderr
    assert checks(sandbox.project) == ROUNDS
    assert not [r for r in journal(sandbox) if r.get("agent_id") is None]


def test_the_same_command_failing_with_another_error_each_time_is_refused_at_the_5th(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """OpenHands' stuck test: nothing changed on disk, so nothing the model did could make
    it pass, whatever the error says this time."""
    commit_project(sandbox.project, {"call.sh": (
        "#!/bin/sh\necho run >> checks.log\nn=$(wc -l < checks.log)\n"
        "case $n in 1) echo 'HTTP 503';; 2) echo 'timed out';; 3) echo 'HTTP 502';;"
        " 4) echo 'connection reset';; *) echo \"HTTP 5$n\";; esac\nexit 1\n")})

    def script(index: int, body: dict[str, Any]) -> Reply:
        if "loop-killer: refused" in json.dumps(body.get("messages")):
            return Reply(text="The service keeps failing; I will ask.")
        return Reply(tool_calls=[ToolCall("Bash", {"command": "./call.sh"})])

    mock_api.configure(script)
    result = run_headless(sandbox, "Call the service until it answers.", version=claude_332,
                          plugin_dir=PLUGIN, extra_args=["--allowedTools", "Bash"],
                          timeout=120)
    assert result.returncode == 0, result.stderr
    assert checks(sandbox.project) == 4  # the 5th attempt was refused before it ran
    assert said_to_model(mock_api, "loop-killer: this exact call")[0] == 3
    assert said_to_model(mock_api, "loop-killer: refused")[0] == 5


def test_an_edit_forth_and_a_write_back_round_after_round_is_warned_and_ended(
    sandbox: Sandbox, mock_api: MockAnthropic, claude_332: Path
) -> None:
    """Was: 16 test runs, 34 requests, no word from loop-killer (each edit a change)."""
    original = "import os\n"
    commit_project(sandbox.project, {"check.sh": "#!/bin/sh\necho run >> checks.log\n"
                                                 "echo '1 failed'; exit 1\n",
                                     "m.py": original})
    path = str(sandbox.project / "m.py")
    steps = [ToolCall("Edit", {"file_path": path, "old_string": "import os",
                               "new_string": "import sys"}),
             ToolCall("Bash", {"command": CHECK}),
             ToolCall("Write", {"file_path": path, "content": original}),
             ToolCall("Bash", {"command": CHECK})]

    def script(index: int, body: dict[str, Any]) -> Reply:
        if index == 0:  # (Claude Code edits only a file read first)
            return Reply(tool_calls=[ToolCall("Read", {"file_path": path})])
        return Reply(text="Trying again.", tool_calls=[steps[(index - 1) % 4]])

    mock_api.configure(script)
    result = run_headless(sandbox, "Fix the import.", version=claude_332, plugin_dir=PLUGIN,
                          extra_args=["--allowedTools", "Bash,Read,Edit,Write"], timeout=180)
    assert result.returncode == 0, result.stderr
    assert checks(sandbox.project) <= 8
    assert said_to_model(mock_api, "going back and forth")
    records = journal(sandbox)
    assert ("detection", "EDIT_OSCILLATION") in [(r["event"], r["rule"]) for r in records]
    assert records[-1]["event"] == "outcome"  # the turn was ended


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            return json.dumps(message.get("content"))
    return ""


def _has_results(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    return isinstance(last.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])


def _main_index(body: dict[str, Any]) -> int:
    """The main session's step: how many of its own requests came before (its messages
    hold one assistant message per earlier reply)."""
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
