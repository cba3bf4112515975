"""Clear requests taken by the Stop hook: exactly once, only fresh ones, never hostile ones."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest
from loop_killer.hooks.stop_hook import run
from loop_killer.state.inbox import ClearRequest, discard_request, write_request
from owners import give_to_another_user

from .kit import fixture_transcript, journal, lines_of, raw, stop_input, write

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"


def _env(state: Path) -> dict[str, str]:
    return {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}


def _request(transcript: Path, **changes: Any) -> ClearRequest:
    fields: dict[str, Any] = {
        "session_id": SESSION, "rule": "SAME_REPLY_TURNS", "count": 3, "run_length": 3,
        "answer_uuid": "ae8b26b6-5a1a-433e-b780-1391f3f95af1",
        "answer_digest": "ade7c0b305209229", "transcript_path": str(transcript),
        "created_at": time.time(), "source": "watcher",
    }
    fields.update(changes)
    return ClearRequest(**fields)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """goal-same up to its 2nd answer to a re-prompt: a loop, but not yet at a threshold."""
    lines = lines_of(fixture_transcript("goal-same"))
    return write(tmp_path / "proj" / f"{SESSION}.jsonl", lines[:31])


def test_a_fresh_request_stops_the_turn_and_is_taken(transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript))
    output = run(raw(stop_input(transcript, active=False)), env=_env(state))
    assert output is not None and output["continue"] is False
    assert output["stopReason"] == (
        "loop-killer: SAME_REPLY_TURNS: 3 similar replies to re-prompts; turn stopped")
    assert not (state / "requests" / f"{SESSION}.json").exists()
    outcome = [r for r in journal(state) if r["event"] == "outcome"]
    assert len(outcome) == 1 and outcome[0]["source"] == "hook"
    assert outcome[0]["answer_uuid"] == "ae8b26b6-5a1a-433e-b780-1391f3f95af1"
    assert not [r for r in journal(state) if r["event"] == "detection"]  # the watcher logged it
    # Taken once: the next Stop has nothing to act on.
    assert run(raw(stop_input(transcript, active=False)), env=_env(state)) is None


def test_a_request_is_taken_by_a_session_started_with_agent(transcript: Path, state: Path
                                                            ) -> None:
    """``loop-killer clear`` on a session started with ``claude --agent NAME``: its Stop
    input names the agent (``agent_type``) but no ``agent_id``; it is the main session."""
    write_request(state, _request(transcript))
    output = run(raw(stop_input(transcript, active=False, agent_type="fixer")),
                 env=_env(state))
    assert output is not None and output["continue"] is False
    assert not (state / "requests" / f"{SESSION}.json").exists()


def test_a_manual_request_names_itself(transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript, rule="MANUAL", count=2, answer_uuid="",
                                  answer_digest="", source="manual"))
    output = run(raw(stop_input(transcript)), env=_env(state))
    assert output is not None
    assert output["stopReason"].startswith("loop-killer: MANUAL: asked by hand")
    assert "stopped this turn as asked" in output["systemMessage"]


def _claimer(args: tuple[str, str, str, Any]) -> str | None:
    home, config, data, barrier = args
    barrier.wait()
    output = run(data.encode(), env={"HOME": home, "CLAUDE_CONFIG_DIR": config})
    return json.dumps(output) if output else None


def test_concurrent_hooks_take_one_request_exactly_once(transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript))
    data = json.dumps(stop_input(transcript, active=False))
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(8)
        with context.Pool(8) as pool:
            results = pool.map(_claimer, [(str(state.parent.parent), str(state.parent), data,
                                           barrier)] * 8)
    fired = [r for r in results if r is not None]
    assert len(fired) == 1
    assert json.loads(fired[0])["continue"] is False
    assert len([r for r in journal(state) if r["event"] == "outcome"]) == 1
    assert len(list((state / "claimed").iterdir())) == 1


def test_a_stale_request_is_dropped(transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript, created_at=time.time() - 3600))
    assert run(raw(stop_input(transcript, active=False)), env=_env(state)) is None
    assert not (state / "requests" / f"{SESSION}.json").exists()
    assert journal(state) == []


def _prompt_line(when: float, text: str = "Please fix the tests.") -> bytes:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1000):03d}Z"
    return json.dumps({
        "parentUuid": None, "isSidechain": False, "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": f"prompt-{int(when)}", "timestamp": stamp, "sessionId": SESSION,
    }).encode() + b"\n"


@pytest.mark.parametrize("request_age, fires", [(5.0, False), (-5.0, True)])
def test_a_request_older_than_the_persons_last_prompt_is_dropped(
    tmp_path: Path, state: Path, request_age: float, fires: bool
) -> None:
    prompt_at = time.time() - 60
    path = write(tmp_path / "proj" / f"{SESSION}.jsonl", [_prompt_line(prompt_at)])
    write_request(state, _request(path, created_at=prompt_at - request_age))
    output = run(raw(stop_input(path, active=False)), env=_env(state))
    assert (output is not None) == fires
    assert not (state / "requests" / f"{SESSION}.json").exists()


def _hostile(state: Path, kind: str, tmp_path: Path, transcript: Path) -> None:
    folder = state / "requests"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SESSION}.json"
    good = _request(transcript).to_json()
    if kind == "symlink":
        target = tmp_path / "elsewhere.json"
        target.write_bytes(good)
        path.symlink_to(target)
    elif kind == "oversized":
        path.write_bytes(good[:-1] + b', "pad": "' + b"x" * (70 * 1024) + b'"}')
    elif kind == "bad json":
        path.write_bytes(b'{"session_id": ')
    elif kind == "wrong session":
        path.write_bytes(_request(transcript, session_id="other-session").to_json())
    elif kind == "path-like session":
        data = json.loads(good)
        data["session_id"] = "../../etc/passwd"
        path.write_bytes(json.dumps(data).encode())
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["symlink", "oversized", "bad json", "wrong session",
                                  "path-like session", "directory", "fifo"])
def test_a_hostile_request_file_blocks_nothing(
    tmp_path: Path, transcript: Path, state: Path, kind: str
) -> None:
    _hostile(state, kind, tmp_path, transcript)
    started = time.monotonic()
    output = run(raw(stop_input(transcript, active=False)), env=_env(state))
    assert time.monotonic() - started < 10  # a blocking read would never return
    assert output is None
    assert journal(state) == []


def test_a_path_like_session_id_in_the_hook_input_is_ignored(transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript))
    for bad in ("../" + SESSION, SESSION + "/x", "..", "", "a" * 200):
        assert run(raw(stop_input(transcript, session_id=bad or "x", active=False)
                       | ({"session_id": bad} if bad == "" else {})), env=_env(state)) is None
    assert (state / "requests" / f"{SESSION}.json").exists()  # untouched


# -- issue 21: links, owners, one session id in two projects ------------------------------


def test_a_linked_requests_folder_is_never_acted_on_nor_emptied(
        tmp_path: Path, transcript: Path, state: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{SESSION}.json").write_bytes(_request(transcript).to_json())
    state.mkdir(parents=True, exist_ok=True)
    (state / "requests").symlink_to(outside)
    assert run(raw(stop_input(transcript, active=False)), env=_env(state)) is None
    assert (outside / f"{SESSION}.json").exists()  # not moved
    assert not (state / "claimed").exists() or not list((state / "claimed").iterdir())


def test_a_request_another_user_owns_is_never_acted_on(transcript: Path, state: Path) -> None:
    path = write_request(state, _request(transcript))
    give_to_another_user(path)
    assert run(raw(stop_input(transcript, active=False)), env=_env(state)) is None
    assert journal(state) == []


@pytest.mark.parametrize("how", ["another owner", "writable by others"])
def test_a_request_in_a_folder_others_can_write_is_never_acted_on(
        transcript: Path, state: Path, how: str) -> None:
    write_request(state, _request(transcript))
    folder = state / "requests"
    if how == "another owner":
        give_to_another_user(folder)
    else:
        os.chmod(folder, 0o777)
    assert run(raw(stop_input(transcript, active=False)), env=_env(state)) is None
    assert journal(state) == []
    assert (folder / f"{SESSION}.json").exists()


def test_a_request_for_the_same_id_in_another_project_waits_for_its_own_stop(
        tmp_path: Path, transcript: Path, state: Path) -> None:
    twin = write(tmp_path / "other-proj" / f"{SESSION}.jsonl", lines_of(transcript))
    write_request(state, _request(transcript))
    assert run(raw(stop_input(twin, active=False)), env=_env(state)) is None
    assert (state / "requests" / f"{SESSION}.json").exists()  # left for its own session
    output = run(raw(stop_input(transcript, active=False)), env=_env(state))
    assert output is not None and output["continue"] is False


def test_a_request_naming_its_transcript_by_another_path_is_still_its_own(
        tmp_path: Path, transcript: Path, state: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(transcript.parent)  # a ~/.claude reached through a link, say
    write_request(state, _request(alias / transcript.name))
    output = run(raw(stop_input(transcript, active=False)), env=_env(state))
    assert output is not None and output["continue"] is False


@pytest.mark.parametrize("twin", [False, True])
def test_a_request_naming_no_transcript_is_taken_only_for_an_unambiguous_id(
        tmp_path: Path, transcript: Path, state: Path, twin: bool) -> None:
    """One written by hand (or before requests had to name their transcript)."""
    if twin:
        write(tmp_path / "other-proj" / f"{SESSION}.jsonl", lines_of(transcript))
    write_request(state, _request(transcript, transcript_path=""))
    output = run(raw(stop_input(transcript, active=False)), env=_env(state))
    assert (output is not None) == (not twin)
    assert (state / "requests" / f"{SESSION}.json").exists() == twin


def test_a_prompt_in_one_project_withdraws_only_its_own_request(
        tmp_path: Path, transcript: Path, state: Path) -> None:
    write_request(state, _request(transcript))
    other = str(tmp_path / "other-proj" / f"{SESSION}.jsonl")
    assert not discard_request(state, SESSION, "a prompt", transcript_path=other)
    assert (state / "requests" / f"{SESSION}.json").exists()
    assert discard_request(state, SESSION, "a prompt", transcript_path=str(transcript))
