"""The Stop hook's record of a turn, against what the transcript's readers decide (an
adversarial review of the redesign found each case): the turn's results seen, not the
tool-repeat count, say whether a reply did work; a record left by hooks no longer loaded
does not keep the watcher out; a task's notice starts the run afresh; the record stays
small whatever the thresholds and the script."""
from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from loop_killer.hooks.stop_hook import run_input as stop_hook
from loop_killer.hooks.tool_hook import run_input as tool_hook
from loop_killer.state import session as store
from loop_killer.state.files import state_dir_text

SID = "11111111-2222-3333-4444-555555555555"
PID = "p-1"


def env_of(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")})
    env.update(extra)
    return env


def base(transcript: Path, cwd: str, prompt_id: str = PID) -> dict[str, Any]:
    return {"session_id": SID, "transcript_path": str(transcript), "cwd": cwd,
            "prompt_id": prompt_id}


def prompt(b: dict[str, Any], text: str, env: dict[str, str]) -> None:
    tool_hook({**b, "hook_event_name": "UserPromptSubmit", "prompt": text}, env=env)


def bash(b: dict[str, Any], command: str, output: str, env: dict[str, str], *,
         failed: bool = False, n: int = 0, agent: str | None = None) -> Any:
    data = {**b, "tool_name": "Bash", "tool_input": {"command": command},
            "tool_use_id": f"toolu_{command[:5]}_{n}",
            "hook_event_name": "PostToolUseFailure" if failed else "PostToolUse"}
    if agent:
        data["agent_id"] = agent
        data["agent_type"] = "general-purpose"
    if failed:
        data["error"] = output
    else:
        data["tool_response"] = {"stdout": output, "stderr": "", "interrupted": False}
    return tool_hook(data, env=env)


def stop(b: dict[str, Any], text: str, env: dict[str, str], *, active: bool = True) -> Any:
    return stop_hook({**b, "hook_event_name": "Stop", "stop_hook_active": active,
                      "last_assistant_message": text}, env=env)


def stopped(out: Any) -> bool:
    return isinstance(out, dict) and out.get("continue") is False


def goal_loop(b: dict[str, Any], env: dict[str, str], answers: int, *, same_text: bool = False
              ) -> list[int]:
    """Person's prompt, reply 0 runs a failing test, then ``answers`` re-prompt answers
    each re-running the same failing command (same result): which answers were stopped."""
    prompt(b, "Make the tests pass.", env)
    bash(b, "npm test", "FAIL test/auth/login.test.js", env, failed=True)
    stop(b, "The tests fail; I am on it.", env, active=False)
    fired = []
    for i in range(1, answers + 1):
        bash(b, "npm test", "FAIL test/auth/login.test.js", env, failed=True, n=i)
        text = ("The auth tests still fail the same way." if same_text else
                f"Attempt {i}: looked at it from angle number {i * 7919} {'x' * i}, "
                f"word{i} thing{i} other{i} still fail")
        if stopped(stop(b, text, env)):
            fired.append(i)
    return fired



def test_a_failing_command_that_changes_a_tracked_file_each_run_is_still_no_work(
        tmp_path: Path) -> None:
    """The tree's fingerprint changes at every run (the command appends to a log), so the
    tool-repeat rule counts each result afresh; the re-prompt rules compare results, as
    the transcript's readers do, and the loop ends."""
    folder = tmp_path / "proj"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "test.log").write_text("x")
    subprocess.run(["git", "-C", str(folder), "add", "."], check=True)
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=a", "-c", "user.email=a@b",
                    "commit", "-qm", "x"], check=True)
    env = env_of(tmp_path)
    b = base(tmp_path / "t.jsonl", str(folder))
    (tmp_path / "t.jsonl").write_text("")
    prompt(b, "Make the tests pass.", env)
    bash(b, "npm test", "FAIL test/auth/login.test.js", env, failed=True)
    stop(b, "The tests fail; I am on it.", env, active=False)
    fired = []
    for i in range(1, 5):
        with open(folder / "test.log", "a") as log:
            log.write(f"run {i}: FAIL\n")  # what the command itself did
        bash(b, "npm test", "FAIL test/auth/login.test.js", env, failed=True, n=i)
        if stopped(stop(b, "The auth tests still fail the same way.", env)):
            fired.append(i)
    assert fired[:1] == [3]


def test_a_record_left_by_hooks_no_longer_loaded_keeps_nobody_out(tmp_path: Path) -> None:
    env = env_of(tmp_path)
    b = base(tmp_path / "t.jsonl", str(tmp_path))
    (tmp_path / "t.jsonl").write_text("")
    prompt(b, "go", env)
    stop(b, "first", env, active=False)
    stop(b, "answer 1", env)
    state = state_dir_text(env)
    assert store.hooks_judge(state, SID, since=time.time() - 60)
    # (the session resumed days later without the plugin: its answers come much later)
    assert not store.hooks_judge(state, SID, since=time.time() + 3600)


def test_the_record_stays_small_and_a_long_run_still_fires(tmp_path: Path) -> None:
    env = env_of(tmp_path, LOOP_KILLER_IDLE_TURNS="120", LOOP_KILLER_BUDGET_REPROMPTS="0")
    b = base(tmp_path / "t.jsonl", str(tmp_path))
    (tmp_path / "t.jsonl").write_text("")
    prompt(b, "go", env)
    stop(b, "first", env, active=False)
    path = store.state_path(state_dir_text(env), SID)
    fired, sizes = [], []
    letters = "абвгдежзиклмнопрстуфхцчшщыэюя"
    for i in range(1, 122):
        rnd = random.Random(i)
        text = " ".join("".join(rnd.choice(letters) for _ in range(9)) for _ in range(220))
        if stopped(stop(b, text, env)):
            fired.append(i)
        sizes.append(os.path.getsize(path))
    assert fired == [120]
    assert max(sizes) < store.MAX_STATE_BYTES


def _notice(b: dict[str, Any], status: str, task: str) -> dict[str, Any]:
    return {**b, "hook_event_name": "UserPromptSubmit", "prompt": (
        f"<task-notification>\n<task-id>{task}</task-id>\n<tool-use-id>toolu_{task}"
        f"</tool-use-id>\n<output-file>/tmp/claude-0/proj/s/tasks/{task}.output</output-file>"
        f"\n<status>{status}</status>\n<summary>Background command \"./deploy.sh\" "
        f"{status}</summary>\n</task-notification>")}


@pytest.mark.parametrize("rules_off", ["", "TOOL_REPEAT"])
def test_a_tasks_notice_mid_turn_starts_the_run_afresh(tmp_path: Path, rules_off: str) -> None:
    """2.1.332 submits a task's notice mid-turn with the turn's prompt_id; its transcript
    line is a turn start to the watcher. The answer reacting to the news is not the 6th
    idle one."""
    env = env_of(tmp_path, LOOP_KILLER_RULES_OFF=rules_off)
    b = base(tmp_path / "t.jsonl", str(tmp_path / "nowhere"))
    (tmp_path / "t.jsonl").write_text("")
    prompt(b, "Deploy it.", env)
    bash(b, "./deploy.sh &", "started in background", env)
    stop(b, "The deploy is running in the background.", env, active=False)
    fired = []
    for i, said in enumerate(["Waiting for the deploy.", "Still running, nothing to do yet.",
                              "The rollout takes a while.", "No news from the background job.",
                              "I will keep an eye on it."], 1):
        if stopped(stop(b, said, env)):
            fired.append(i)
    tool_hook(_notice(b, "failed", "b1x"), env=env)  # news: the deploy failed
    if stopped(stop(b, "The deploy failed: the migration timed out. Fixing next.", env)):
        fired.append(6)
    assert fired == []


def test_a_busy_locks_work_marker_is_taken_by_the_next_stop_even_beside_the_flag(
        tmp_path: Path) -> None:
    """A result noted (the flag) and another that met a busy lock (the marker): the next
    Stop takes both, so the marker does not make a later idle reply look like work."""
    env = env_of(tmp_path)
    b = base(tmp_path / "t.jsonl", str(tmp_path))
    (tmp_path / "t.jsonl").write_text("")
    prompt(b, "go", env)
    stop(b, "first", env, active=False)
    bash(b, "npm test", "FAIL one", env, failed=True)
    path = store.state_path(state_dir_text(env), SID)
    store.mark_work(path)
    stop(b, "Ran the tests.", env)
    assert not os.path.lexists(store.work_marker(path))
    assert store.turn_of(store.load(path))["run"]["length"] == 0  # that reply did work
    stop(b, "Still failing.", env)
    assert store.turn_of(store.load(path))["run"]["length"] == 1  # this one did not
