"""The holes an adversarial run found in the Stop hook (issue "One reader, one judge"),
each reproduced as the issue describes it, as Claude Code runs the hook: a process with
the input on stdin, ``HOME`` and ``CLAUDE_CONFIG_DIR`` of its own.

1. A FIFO where the transcript should be, or named by an old mod plan, never blocks.
2. A state sub-folder that is a link is never written through nor chmodded.
6. Deeply nested input is bad input: nothing shown, nothing blocked, no crash note.
(3 and 4 are the watcher's: tests/watch/test_holes.py; 5 is tailing's.)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .kit import fixture_transcript, lines_of, replay, run_hook_process, stop_input, write

H = {"hook_event_name": "Stop", "session_id": "s1"}
TIMEOUT = 20  # seconds: a blocked hook is killed here and the test fails


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "c")}


def _state(home: Path) -> Path:
    return home / "c" / "loop-killer"


def _quiet(done) -> dict | None:
    assert done.returncode == 0
    assert done.stderr == b""
    text = done.stdout.decode().strip()
    output = json.loads(text) if text else None
    assert output is None or ("decision" not in output and output.get("continue") is not False)
    return output


def _goal_loop(tmp_path: Path, **env: str) -> tuple[Path, list[dict | None]]:
    """goal-same's turn up to its 3rd answer to a re-prompt, its hooks run in order (in this
    process: kit.replay); the transcript and the outputs of the three re-prompts' Stops."""
    transcript = tmp_path / "proj" / "s1.jsonl"
    outputs = replay(lines_of(fixture_transcript("goal-same")), transcript,
                     env={**_env(tmp_path), **env}, before=4)
    return transcript, outputs[1:]


def _elsewhere(tmp_path: Path) -> Path:
    """Where a planted link points: a 0755 folder nothing may write into or chmod."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    os.chmod(elsewhere, 0o755)
    return elsewhere


def test_1_a_fifo_transcript_never_blocks_the_hook(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)
    data = {**H, "transcript_path": str(fifo), "stop_hook_active": True,
            "last_assistant_message": "x"}
    output = _quiet(run_hook_process(data, env=_env(tmp_path), timeout=TIMEOUT))
    assert output is None or "not a regular file" in output.get("systemMessage", "")


def test_1_an_old_plan_naming_a_fifo_never_blocks_later_turns(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    outcomes = _state(tmp_path) / "outcomes"
    outcomes.mkdir(parents=True)
    plan = outcomes / "s1.17.plan"
    plan.write_text(json.dumps({"session_id": "s1", "answer_uuid": "a", "rule": "IDLE_TURNS",
                                "transcript_path": str(fifo), "offset": 0, "id": "s1.17"}))
    old = time.time() - 600  # older than 120 s: the sweep reads the transcript named
    os.utime(plan, (old, old))
    transcript = write(tmp_path / "proj" / "s1.jsonl",
                       lines_of(fixture_transcript("goal-same"))[:3])
    for active in (False, True):
        _quiet(run_hook_process(stop_input(transcript, active=active), env=_env(tmp_path),
                                timeout=TIMEOUT))
    assert not plan.exists()  # swept once, logged as unconfirmed
    log = [json.loads(line) for line in (_state(tmp_path) / "detections.jsonl").read_text()
           .splitlines()]
    assert [r["outcome"] for r in log if r["event"] == "outcome"] == ["sent_unconfirmed"]


@pytest.mark.parametrize("folder", ["hook", "notes", "outcomes", "status", "requests",
                                    "fired"])
def test_2_a_state_folder_that_is_a_link_is_never_written_through(tmp_path: Path,
                                                                  folder: str) -> None:
    elsewhere = _elsewhere(tmp_path)
    state = _state(tmp_path)
    state.mkdir(parents=True)
    (state / folder).symlink_to(elsewhere)
    output = _goal_loop(tmp_path)[1][-1]
    assert list(elsewhere.iterdir()) == []
    assert elsewhere.stat().st_mode & 0o777 == 0o755
    assert (state / folder).is_symlink()
    assert output is not None and output["continue"] is False  # the loop is still stopped


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_6_deeply_nested_input_is_bad_input(tmp_path: Path, depth: int) -> None:
    for data in (b"[" * depth, b'{"hook_event_name": "Stop", "x": ' + b"[" * depth):
        done = run_hook_process(data, env=_env(tmp_path), timeout=TIMEOUT)
        assert done.returncode == 0 and done.stderr == b"" and done.stdout == b""
    assert not (_state(tmp_path) / "hook-errors.log").exists()  # not even a crash logged


def test_a_bad_settings_file_is_said_once_and_blocks_nothing(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.mkdir(parents=True)
    (state / "config.toml").write_text("[rules]\nidle_turns = 1\n")
    data = {**H, "hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": "/p",
            "tool_input": {"command": "ls"}, "tool_response": "x", "tool_use_id": "toolu_1",
            "transcript_path": str(tmp_path / "s1.jsonl")}
    first = _quiet(run_hook_process(data, env=_env(tmp_path), timeout=TIMEOUT))
    assert first is not None and "idle_turns must be a whole number" in first["systemMessage"]
    again = _quiet(run_hook_process(data, env=_env(tmp_path), timeout=TIMEOUT))
    assert again is None or "idle_turns" not in again.get("systemMessage", "")


def test_a_project_switched_off_is_left_alone(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.mkdir(parents=True)
    (state / "config.toml").write_text('[projects]\noff = ["/home/dev/proj"]\n')
    assert _goal_loop(tmp_path)[1] == [None, None, None]


# -- issue 21: the state folder itself a link; a linked folder said once -------------------


@pytest.mark.parametrize("debug", ["", "1"])  # (hook-debug.log is not written through either)
def test_a_linked_state_folder_is_never_written_through(tmp_path: Path, debug: str) -> None:
    elsewhere = _elsewhere(tmp_path)
    (tmp_path / "c").mkdir()
    _state(tmp_path).symlink_to(elsewhere)
    transcript, outputs = _goal_loop(tmp_path, LOOP_KILLER_DEBUG=debug)
    output = outputs[-1]
    tool = {**H, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "cwd": "/p",
            "tool_input": {"command": "make"}, "error": "x", "tool_use_id": "toolu_1",
            "transcript_path": str(transcript)}
    for _ in range(4):
        _quiet(run_hook_process(tool, env=_env(tmp_path), timeout=TIMEOUT))
    assert list(elsewhere.iterdir()) == []
    assert elsewhere.stat().st_mode & 0o777 == 0o755
    assert output is None  # no record is kept through a link: the hook judges nothing


def test_a_linked_folder_is_said_once_in_the_hooks_log(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = _state(tmp_path)
    state.mkdir(parents=True)
    (state / "tools").symlink_to(elsewhere)
    (elsewhere / "s1.json").write_text("{}")  # the launcher's cheap look finds counts
    tool = {**H, "hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/p",
            "tool_input": {"command": "make"}, "tool_use_id": "toolu_1",
            "transcript_path": str(tmp_path / "s1.jsonl")}
    for _ in range(3):
        assert _quiet(run_hook_process(tool, env=_env(tmp_path), timeout=TIMEOUT)) is None
    said = [line for line in (state / "hook-errors.log").read_text().splitlines()
            if "tools" in line]
    assert len(said) == 1 and "not a folder" in said[0]


def test_doctor_can_list_the_linked_state_folders(tmp_path: Path) -> None:
    from loop_killer.state.files import linked_state_folders

    state = _state(tmp_path)
    (state / "fired").mkdir(parents=True)
    assert linked_state_folders(state) == []
    (state / "hook").symlink_to(tmp_path)
    (state / "requests").symlink_to(tmp_path)
    assert sorted(linked_state_folders(state)) == [state / "hook", state / "requests"]


def test_with_loop_killer_debug_each_judgement_is_logged_and_without_it_nothing(
        tmp_path: Path) -> None:
    """Why a reply did or did not fire, for a report from the field (or a flaky test)."""
    _, outputs = _goal_loop(tmp_path / "quiet")
    assert outputs[-1] is not None and outputs[-1]["continue"] is False
    assert not (_state(tmp_path / "quiet") / "hook-debug.log").exists()
    _, outputs = _goal_loop(tmp_path / "told", LOOP_KILLER_DEBUG="1")
    assert outputs[-1] is not None and outputs[-1]["continue"] is False
    log = _state(tmp_path / "told") / "hook-debug.log"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["what"] for line in lines] == ["judged"] * 3
    assert [line["reprompts"] for line in lines] == [1, 2, 3]
    assert [line["fired"] for line in lines] == [None, None, "SAME_REPLY_TURNS"]
    assert not any(line["twin"] for line in lines)
