"""``[projects] off`` is one rule everywhere (issue 29, item 7).

The bug: ``off = ["/home/dev/proj"]`` was honoured by the hooks but not by the watcher for
a session in ``/home/dev/proj/sub``: the watcher decided once, when it began to follow the
file, from the project folder's name (``-home-dev-proj-sub``, which cannot tell
``/home/dev/proj/sub`` from ``/home/dev/proj-sub``) or from a tail's cwd, and a file that
appears opens with lines that carry none (a summary, a file-history snapshot, a queue
operation). It logged ``LOOP ... -> clear requested`` and wrote the request. Now the
watcher asks ``Settings.project_off`` again before each batch of lines whose cwd is new,
and the hooks and ``scan`` ask the same function with the same inputs.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest
from loop_killer.hooks.stop_hook import run_input as stop_hook
from loop_killer.hooks.tool_hook import run_input as tool_hook
from loop_killer.scan.files import (
    SKIP_PROJECT_OFF,
    find_transcripts,
    read_transcript,
    switched_off,
)
from loop_killer.state.config import load_settings
from loop_killer.state.inbox import ClearRequest, peek_request, write_request
from loop_killer.watch.sessions import Sessions
from transcripts import Lines, append, line

EVENTS = "loop_killer.watch.events"  # where the watcher's LOOP lines go


def _config(env, prefixes: list[str]) -> None:
    env.state.mkdir(parents=True, exist_ok=True)
    quoted = ", ".join(f'"{prefix}"' for prefix in prefixes)
    (env.state / "config.toml").write_text(f"[projects]\noff = [{quoted}]\n")


def _no_cwd(s: Lines) -> list[bytes]:
    """What a transcript may open with, none of it with a cwd."""
    stamp = "2026-05-01T10:00:00.000Z"
    return [line(type="summary", summary="Auth tests", leafUuid=str(uuid.uuid4())),
            line(type="file-history-snapshot", messageId=str(uuid.uuid4()),
                 snapshot={"messageId": "m", "trackedFileBackups": {}, "timestamp": stamp},
                 isSnapshotUpdate=False),
            line(type="queue-operation", operation="enqueue", timestamp=stamp,
                 sessionId=s.session_id, content="/goal the auth tests pass")]


def _loops(s: Lines) -> list[bytes]:
    """A re-prompt loop (three similar answers), a person's prompt, then a tool-repeat
    loop (the same call, the same result, three times)."""
    return (s.goal() + s.answer("Starting.") + s.loop(3) + s.prompt()
            + [piece for _ in range(3) for piece in s.answer("Trying again.", tool=True)])


def _followed(env, s: Lines, how: str) -> Path:
    """The session's transcript, read by a watcher as ``how`` says: ``apart`` (it appears
    with its first lines only, the rest comes later), ``together`` (it appears whole, in
    one write), ``caught_up`` (its first lines were there at start-up)."""
    path = s.path_in(env.root)
    sessions = Sessions(env.state)
    if how == "together":
        append(path, _no_cwd(s) + _loops(s))
        sessions.sync(str(path))
    else:
        append(path, _no_cwd(s))
        if how == "caught_up":
            sessions.catch_up(str(path), pending_requests=set())
        else:
            sessions.sync(str(path))
        append(path, _loops(s))
        sessions.sync(str(path))
    sessions.respond.release()  # the lines held to be told in order, told now
    return path


@pytest.mark.parametrize("how", ["apart", "together", "caught_up"])
@pytest.mark.parametrize("switched_off", [True, False])
def test_a_sub_folder_of_a_project_off_is_left_alone_whatever_its_first_lines(
        env, caplog, how, switched_off):
    """No LOOP line, no clear request, no detection logged; with the project on, the same
    lines give both loops (the test would see the bug)."""
    _config(env, ["/home/dev/proj"] if switched_off else [])
    caplog.set_level(logging.INFO, logger=EVENTS)
    s = Lines(cwd="/home/dev/proj/sub")
    _followed(env, s, how)
    said = [record.getMessage() for record in caplog.records if record.name == EVENTS]
    if switched_off:
        assert said == []
        assert peek_request(env.state, s.session_id) is None
        assert env.detections(s.session_id) == []
    else:
        assert any("LOOP" in text and "clear requested" in text for text in said), said
        assert [r["rule"] for r in env.detections(s.session_id)] == ["SAME_REPLY_TURNS",
                                                                     "TOOL_REPEAT"]


def test_the_real_cwd_overrules_a_folder_name_that_says_off(env):
    """``/home/dev-proj`` is in the folder ``-home-dev-proj``, the name of
    ``/home/dev/proj``'s too: once a line gives its cwd, its rules are on again."""
    _config(env, ["/home/dev/proj"])
    s = Lines(cwd="/home/dev-proj")
    _followed(env, s, "apart")
    assert peek_request(env.state, s.session_id) is not None
    assert len(env.detections(s.session_id)) == 2


def test_a_session_that_moves_into_a_folder_off_is_off_from_then_on(env):
    """The hooks ask with the cwd of each call; the watcher with the newest cwd its lines
    give (a ``cd`` in a Bash call moves Claude Code's cwd), before it reads them."""
    _config(env, ["/home/dev/proj/vendor"])
    s = Lines(cwd="/home/dev/proj")
    path = s.path_in(env.root)
    sessions = Sessions(env.state)
    append(path, s.goal() + s.answer("Starting."))
    sessions.sync(str(path))
    s.transcript.cwd = "/home/dev/proj/vendor/lib"
    append(path, s.loop(3))
    sessions.sync(str(path))
    assert peek_request(env.state, s.session_id) is None
    assert env.detections(s.session_id) == []


# -- the same inputs, the same answer: watcher, Stop hook, tool-call hooks, scan -----------

CASES = [  # (cwd, switched off by ["/home/dev/proj"])
    ("/home/dev/proj", True),
    ("/home/dev/proj/sub", True),
    ("/home/dev/proj/2", True),  # folder -home-dev-proj-2, as /home/dev/proj-2's
    ("/home/dev/proj-2", False),
    ("/home/dev-proj", False),  # folder -home-dev-proj, as /home/dev/proj's
    ("/home/dev/other", False),
]


def _watcher_acts(env, s: Lines) -> bool:
    _followed(env, s, "apart")
    return bool(env.detections(s.session_id)) or peek_request(env.state, s.session_id) \
        is not None


def _stop_hook_acts(env, s: Lines, hook_env: dict[str, str]) -> bool:
    """A clear request waits for the session (the watcher's, or one as a watcher with the
    bug wrote): does its Stop hook take it?"""
    path = s.path_in(env.root)
    if peek_request(env.state, s.session_id) is None:
        write_request(env.state, ClearRequest(
            session_id=s.session_id, rule="SAME_REPLY_TURNS", count=3, run_length=3,
            answer_uuid="", answer_digest="", transcript_path=str(path),
            created_at=time.time(), source="manual"))
    output = stop_hook({"hook_event_name": "Stop", "session_id": s.session_id,
                        "transcript_path": str(path), "cwd": s.transcript.cwd,
                        "stop_hook_active": False, "last_assistant_message": "x"},
                       env=hook_env)
    return output is not None


def _tool_hooks_act(env, s: Lines, hook_env: dict[str, str]) -> bool:
    """The same failing call three times: is the model warned?"""
    outputs = [tool_hook({
        "hook_event_name": "PostToolUseFailure", "session_id": s.session_id,
        "transcript_path": str(s.path_in(env.root)), "cwd": s.transcript.cwd,
        "tool_name": "Bash", "tool_input": {"command": "npm test"},
        "tool_use_id": f"toolu_{n}", "error": "Exit code 1\nFAIL", "is_interrupt": False},
        env=hook_env) for n in range(3)]
    return any(output is not None for output in outputs)


def test_the_watcher_the_hooks_and_the_scan_agree(env):
    _config(env, ["/home/dev/proj"])
    hook_env = {"HOME": str(env.home), "CLAUDE_CONFIG_DIR": str(env.state.parent)}
    settings = load_settings(env.state)
    sessions = {cwd: Lines(cwd=cwd) for cwd, _ in CASES}
    said = {}
    for cwd, s in sessions.items():
        said[cwd] = [_watcher_acts(env, s), _stop_hook_acts(env, s, hook_env),
                     _tool_hooks_act(env, s, hook_env)]
    for transcript in find_transcripts(env.root).transcripts:
        result = switched_off(read_transcript(transcript, settings=settings), settings)
        cwd = next(cwd for cwd, s in sessions.items() if s.session_id == transcript.session_id)
        said[cwd].append(result.skipped != SKIP_PROJECT_OFF and bool(result.loops))
    assert said == {cwd: [not off] * 4 for cwd, off in CASES}
