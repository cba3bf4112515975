"""The hook as Claude Code runs it: a process reading stdin; whatever it gets, it exits 0,
prints nothing that could re-prompt the model, and writes nothing to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loop_killer.hooks.stop_hook import parse_input, run

from .kit import (
    answer,
    fixture_transcript,
    lines_of,
    looping_stop,
    run_hook_process,
    stop_input,
    stops,
    write,
)


def _assert_harmless(done) -> dict | None:
    assert done.returncode == 0
    assert done.stderr == b""
    text = done.stdout.decode()
    if not text.strip():
        return None
    output = json.loads(text)
    assert "decision" not in output
    return output


@pytest.mark.parametrize("stdin", [
    b"", b"   \n", b"not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b"null", b'"Stop"',
    b'{"hook_event_name": "Stop"}',
    b'{"hook_event_name": "SubagentStop", "session_id": "s", "transcript_path": "/x"}',
    b"{" * 100000,
])
def test_garbage_or_empty_stdin_exits_0_and_blocks_nothing(stdin: bytes) -> None:
    assert _assert_harmless(run_hook_process(stdin)) is None


def test_a_missing_transcript_blocks_nothing_and_the_loop_is_still_stopped(tmp_path: Path
                                                                           ) -> None:
    assert _assert_harmless(run_hook_process(stop_input(tmp_path / "gone.jsonl"))) is None
    data = looping_stop(tmp_path / "proj" / "s.jsonl")
    Path(data["transcript_path"]).unlink()  # the hook judges from its input and the record
    output = _assert_harmless(run_hook_process(data))
    assert output is not None and output["continue"] is False


def test_a_normal_turn_prints_nothing(tmp_path: Path) -> None:
    lines = lines_of(fixture_transcript("goal-same"))
    first = stops(lines)[0]
    path = write(tmp_path / "s.jsonl", lines[: first.index + 1])
    assert _assert_harmless(run_hook_process(stop_input(path, active=False))) is None


def test_a_looping_reply_is_stopped_through_the_process(tmp_path: Path) -> None:
    output = _assert_harmless(run_hook_process(looping_stop(tmp_path / "s.jsonl")))
    assert output is not None and output["continue"] is False


def test_a_subagent_stop_is_ignored(tmp_path: Path) -> None:
    looping = looping_stop(tmp_path / "s.jsonl")
    for extra in ({"hook_event_name": "SubagentStop"}, {"agent_id": "agent-1"}):
        assert _assert_harmless(run_hook_process({**looping, **extra})) is None


def test_a_session_started_with_agent_is_the_main_session(tmp_path: Path) -> None:
    """``claude --agent NAME`` (or ``"agent"`` in the settings): the main session's Stop
    input carries ``agent_type`` and no ``agent_id`` (2.1.332); its loop is stopped. A
    subagent's carries both, and is left alone."""
    looping = looping_stop(tmp_path / "s.jsonl", agent_type="fixer")
    output = _assert_harmless(run_hook_process(looping))
    assert output is not None and output["continue"] is False
    subagent = {**looping, "agent_id": "a1b2c3d4e5f6a7b8c"}
    assert parse_input(subagent) is None
    assert parse_input({**subagent, "agent_id": ""}) is not None  # an empty id names nobody


def test_an_unexpected_failure_exits_0_with_a_short_note(tmp_path: Path) -> None:
    """A state folder that is a file breaks every write: the hook still exits 0."""
    lines = lines_of(fixture_transcript("goal-same"))
    third = answer(lines, 3)
    path = write(tmp_path / "s.jsonl", lines[: third.first])
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("x")
    env = {**os.environ, "LOOP_KILLER_STATE_DIR": str(blocker / "sub")}
    output = _assert_harmless(run_hook_process(stop_input(path), env=env))
    # Either the loop is still stopped (journal errors are logged and skipped) or a note
    # says the hook failed; never a block, never a crash.
    assert output is not None
    assert output.get("continue") is False or "loop-killer" in output.get("systemMessage", "")


def test_parse_input_reads_the_mod_flag_and_the_reply() -> None:
    data = stop_input("/t/s.jsonl", mod=True)
    parsed = parse_input(data)
    assert parsed is not None and parsed.mod_active and parsed.stop_hook_active
    assert parsed.last_assistant_message == "I am still working on getting the auth tests to pass."
    assert parse_input({**data, "loop_killer_mod": {"version": 2}}).mod_active is False
    assert parse_input({**data, "loop_killer_mod": True}).mod_active is False
    assert parse_input({**data, "stop_hook_active": "yes"}).stop_hook_active is False
    assert parse_input({**data, "transcript_path": 5}) is None


def test_the_hook_runs_as_a_module_and_through_the_cli(tmp_path: Path) -> None:
    data = stop_input(tmp_path / "missing.jsonl", active=False)
    for argv in ([sys.executable, "-m", "loop_killer.hooks"],
                 [sys.executable, "-m", "loop_killer.cli", "hook"]):
        assert _assert_harmless(run_hook_process(data, argv=argv)) is None


def test_a_firing_stop_runs_in_a_process_of_its_own(tmp_path: Path) -> None:
    """A firing Stop, run as the launcher runs it, fires and judges with the turn module.
    (Its count of modules was retired with issue 31: what it stood for, the cost of a
    hook, is measured by scripts/hook-timing.)"""
    looping = looping_stop(tmp_path / "s.jsonl")
    code = ("import sys\nfrom loop_killer.hooks.entry import main\nmain(sys.stdin.buffer.read())\n"
            "open(sys.argv[1], 'w').write(' '.join(n for n in sys.modules"
            " if n.startswith('loop_killer')))\n")
    listed = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-c", code, str(listed)], capture_output=True,
                          input=json.dumps(looping).encode(), timeout=60, check=True)
    assert json.loads(done.stdout)["continue"] is False  # it did fire
    modules = listed.read_text().split()
    assert "loop_killer.hooks.turn" in modules, modules


def test_run_ignores_an_oversized_input() -> None:
    assert run(b"{" + b" " * (33 * 1024 * 1024) + b"}", env={"HOME": "/nonexistent"}) is None


def test_the_output_is_ascii_so_an_odd_stdout_encoding_never_swallows_a_stop(
    tmp_path: Path
) -> None:
    """The mod's plan names a state folder with non-ASCII letters; stdout is ASCII only."""
    env = {**os.environ, "LOOP_KILLER_STATE_DIR": str(tmp_path / "état-ü"),
           "PYTHONIOENCODING": "ascii"}
    done = run_hook_process(looping_stop(tmp_path / "s.jsonl", env, mod=True), env=env)
    output = _assert_harmless(done)
    assert output is not None and output["continue"] is False
    assert done.stdout.isascii()
    assert "état-ü" in output["hookSpecificOutput"]["additionalContext"]


def _garbage_request(state: Path, session: str) -> None:
    """A broken request file: taking it logs a warning, which goes to the hook's log."""
    (state / "requests").mkdir(parents=True, exist_ok=True)
    (state / "requests" / f"{session}.json").write_text("{not json")


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_the_error_log_never_blocks_on_a_fifo_nor_follows_a_link(
    tmp_path: Path, kind: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = write(tmp_path / "s.jsonl", [b'{"type":"x"}\n'])
    _garbage_request(state, "s")
    log = state / "hook-errors.log"
    target = tmp_path / "elsewhere.txt"
    if kind == "fifo":
        os.mkfifo(log)
    else:
        target.write_text("")
        log.symlink_to(target)
    env = {**os.environ, "LOOP_KILLER_STATE_DIR": str(state)}
    done = run_hook_process(stop_input(path, active=False), env=env, timeout=20)
    _assert_harmless(done)
    if kind == "symlink":
        assert target.read_text() == ""


def test_the_error_log_is_rotated_once_large(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = write(tmp_path / "s.jsonl", [b'{"type":"x"}\n'])
    _garbage_request(state, "s")
    log = state / "hook-errors.log"
    log.write_bytes(b"x" * (1024 * 1024 + 10))
    env = {**os.environ, "LOOP_KILLER_STATE_DIR": str(state)}
    _assert_harmless(run_hook_process(stop_input(path, active=False), env=env))
    assert (state / "hook-errors.log.1").stat().st_size > 1024 * 1024
    assert "clear request" in log.read_text()
