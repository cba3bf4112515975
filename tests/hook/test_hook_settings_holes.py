"""Settings holes an adversarial run found (issue 21), as a person meets them: each
program run as a process with a HOME of its own (tests/conftest.py).

1. A config.toml the TOML parser cannot take (arrays 500 deep) crashed ``config``,
   ``doctor``, the watcher and every hook: no loop was stopped. The defaults hold and the
   problem is said.
2. A misspelled key or table was passed over in silence ("OK settings"); an empty
   ``projects.off`` path switched loop-killer off everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .kit import looping_stop, run_hook_process

DEEP = b"[rules]\noff = " + b"[" * 500 + b"]" * 500 + b"\n"
TIMEOUT = 60  # seconds: a stuck program is killed here and the test fails


def _state() -> Path:
    return Path(os.environ["CLAUDE_CONFIG_DIR"]) / "loop-killer"


def _write_config(text: bytes) -> None:
    _state().mkdir(parents=True, exist_ok=True)
    (_state() / "config.toml").write_bytes(text)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # (whole lines to read: piped, a report is 80 columns unless $COLUMNS says)
    env = {**(os.environ if env is None else env), "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "loop_killer.cli", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False, env=env)


@pytest.mark.parametrize("text,said", [
    (DEEP, "not valid TOML (nested too deeply)"),
    (b"x = " + b"[" * 500 + b"]" * 500, "not valid TOML (nested too deeply)"),
    (b"[rule]\nsame_reply_turns = 2\n", "unknown table [rule] (did you mean [rules]?)"),
    (b"[rules]\nsame_reply_turn = 2\n", "unknown key rules.same_reply_turn"),
    (b'[projects]\noff = [""]\n', "projects.off holds an empty path"),
], ids=["deep-rules-off", "deep-top-level", "table", "key", "empty-path"])
def test_config_and_doctor_say_what_is_wrong_and_never_crash(text: bytes, said: str) -> None:
    _write_config(text)
    shown = _cli("config")
    assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
    assert said in shown.stdout and "same_reply_turns" in shown.stdout
    document = json.loads(_cli("config", "--json").stdout)
    assert any(said in problem for problem in document["problems"])
    assert document["settings"]["same_reply_turns"] == 3  # the default holds
    assert document["settings"]["projects_off"] == []
    checked = _cli("doctor")
    assert "Traceback" not in checked.stderr, checked.stderr
    line = next(line for line in checked.stdout.splitlines() if " settings: " in line)
    assert line.startswith("WARN") and said in line


def test_a_hook_still_stops_a_loop_under_a_file_nested_too_deeply(tmp_path: Path) -> None:
    _write_config(DEEP)
    done = run_hook_process(looping_stop(tmp_path / "s.jsonl"), timeout=TIMEOUT)
    assert done.returncode == 0 and done.stderr == b""
    output = json.loads(done.stdout)
    assert output["continue"] is False  # the loop is stopped, with the default rules
    assert "nested too deeply" in output["systemMessage"]


def test_a_tool_hook_survives_a_file_nested_too_deeply(tmp_path: Path) -> None:
    _write_config(b"x = " + b"[" * 500 + b"]" * 500)
    data = {"hook_event_name": "PostToolUse", "session_id": "s1", "tool_name": "Bash",
            "cwd": "/p", "tool_input": {"command": "ls"}, "tool_response": "x",
            "tool_use_id": "toolu_1", "transcript_path": str(tmp_path / "s1.jsonl")}
    done = run_hook_process(data, timeout=TIMEOUT)
    assert done.returncode == 0 and done.stderr == b""
    assert "nested too deeply" in json.loads(done.stdout)["systemMessage"]


def test_an_empty_project_path_switches_nothing_off_for_the_hooks(tmp_path: Path) -> None:
    _write_config(b'[projects]\noff = [""]\n')
    done = run_hook_process(looping_stop(tmp_path / "s.jsonl"), timeout=TIMEOUT)
    assert done.returncode == 0 and json.loads(done.stdout)["continue"] is False


def test_doctor_shows_its_lines_without_control_codes(tmp_path: Path) -> None:
    home = tmp_path / "h\x1b]0;PWNED\x07\u202e"
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    (home / ".claude" / "loop-killer").mkdir(parents=True)
    (home / ".claude" / "loop-killer" / "config.toml").write_text("[rules]\nsimilar = 2\n")
    checked = _cli("doctor", env=env)
    line = next(line for line in checked.stdout.splitlines() if " settings: " in line)
    assert "rules.similar" in line
    assert not any(ch in checked.stdout for ch in "\x1b\x07\u202e"), checked.stdout


def test_config_shows_every_setting_with_where_it_came_from() -> None:
    """An audit found three settings missing from ``loop-killer config`` (their sources
    listed, their values not): every field of the settings is shown."""
    from loop_killer.state.config import Settings

    env = {**os.environ, "LOOP_KILLER_TOOL_REPEAT_STOP": "7"}
    document = json.loads(_cli("config", "--json", env=env).stdout)
    fields = set(Settings.__slots__) - {"thresholds", "sources", "problems", "budget"}
    assert set(document["settings"]) == fields | {"same_reply_turns", "idle_turns", "similar",
                                                  "wait_minutes", "budget_reprompts",
                                                  "budget_usd", "budget_minutes"}
    assert document["settings"]["tool_repeat_stop"] == 7
    assert document["sources"]["tool_repeat_stop"] == "$LOOP_KILLER_TOOL_REPEAT_STOP"
    shown = _cli("config", env=env).stdout
    assert any(line.split()[:2] == ["tool_repeat_stop", "7"] for line in shown.splitlines())
