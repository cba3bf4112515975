"""One detection record per answer, and no waiting: where the Stop hook judges a session's
replies it logs what it finds and the watcher leaves it be; a request the watcher wrote is
taken once; nobody ever sleeps for the other.

"Never sleeps" is checked by making ``time.sleep`` fail during the hook run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from loop_killer.hooks import stop_hook, turn
from loop_killer.hooks.stop_hook import run
from loop_killer.hooks.terminal import poll
from loop_killer.state import journal as journal_module
from loop_killer.state import records
from loop_killer.state import session as store
from loop_killer.state.inbox import ClearRequest, write_request
from loop_killer.state.session import hooks_judge

from .kit import (
    PROMPT_ID,
    fixture_transcript,
    journal,
    lines_of,
    raw,
    replay,
    stop_input,
    stops,
    write,
)

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"


def _env(state: Path) -> dict[str, str]:
    return {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}


def _watcher_fires(state: Path, transcript: Path, answer_uuid: str, prompt_uuid: str) -> None:
    """What the watcher does when it fires: record first, then the request and the log."""
    assert records.record_detection(state, SESSION, prompt_uuid, source="watcher",
                                    rule="SAME_REPLY_TURNS")
    write_request(state, ClearRequest(
        session_id=SESSION, rule="SAME_REPLY_TURNS", count=3, run_length=3,
        answer_uuid=answer_uuid, answer_digest="ade7c0b305209229",
        transcript_path=str(transcript), created_at=time.time(), source="watcher",
        prompt_uuid=prompt_uuid))
    journal_module.append(state, journal_module.LoopRecord(
        session_id=SESSION, answer_uuid=answer_uuid, prompt_uuid=prompt_uuid,
        rule="SAME_REPLY_TURNS", source="watcher"))


@pytest.fixture(autouse=True)
def no_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(seconds: float) -> None:
        raise AssertionError(f"the Stop hook slept {seconds} s")

    monkeypatch.setattr(time, "sleep", refuse)


@pytest.fixture
def goal_same(tmp_path: Path):
    lines = lines_of(fixture_transcript("goal-same"))
    by_number = {stop.number: stop for stop in stops(lines)}
    return tmp_path / "proj" / f"{SESSION}.jsonl", lines, by_number


def _run(data: dict, state: Path):
    return run(raw(data), env=_env(state))


def _detections(state: Path) -> list[str]:
    return [r["source"] for r in journal(state) if r["event"] == "detection"]


def _must_not_be_called(*args, **kwargs):
    raise AssertionError("the transcript must not be read on this turn")


def test_stops_that_do_not_fire_never_read_the_transcript(
    goal_same, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, lines, _ = goal_same
    monkeypatch.setattr(turn, "_last_event", _must_not_be_called)
    assert replay(lines, path, env=_env(state), before=3) == [None] * 3


def test_the_hook_fires_on_its_own_and_logs_the_detection_once(goal_same, state: Path
                                                                ) -> None:
    path, lines, _ = goal_same
    outputs = replay(lines, path, env=_env(state), before=4)
    assert outputs[:3] == [None] * 3
    assert outputs[3] is not None and outputs[3]["continue"] is False
    (detection,) = [r for r in journal(state) if r["event"] == "detection"]
    assert (detection["source"], detection["located_by"], detection["answer_uuid"]) == (
        "hook", "anchor", f"{PROMPT_ID}:3")
    # The watcher, reading the same answer a moment later, leaves it to the hook.
    assert hooks_judge(str(state), SESSION, since=time.time() - 60)


def test_a_twin_hook_for_the_same_reply_counts_nothing_and_does_not_stop(goal_same,
                                                                        state: Path) -> None:
    """The plugin loaded twice: two hooks for reply 3, started together. The one that
    saves the turn second finds it saved after it started: it leaves the stop to the
    first, and reply 3 is counted once."""
    path, lines, _ = goal_same
    replay(lines, path, env=_env(state), before=3)
    data = stop_input(path)
    started = time.time()
    first = stop_hook.run_input(data, env=_env(state), spawn_time=started)
    assert first is not None and first["continue"] is False
    assert stop_hook.run_input(data, env=_env(state), spawn_time=started) is None
    assert [r["event"] for r in journal(state)] == ["detection", "outcome"]
    assert store.turn_of(store.load(store.state_path(state, SESSION)))["stops"] == 3


@pytest.mark.parametrize("written", ["reply not written", "reply written"])
def test_watcher_first_then_the_hook_one_detection_logged_and_no_wait(
    goal_same, state: Path, written: str
) -> None:
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.first if written == "reply not written" else third.index + 1])
    prompt_uuid = _reprompt_uuid(lines, third.first)
    _watcher_fires(state, path, third.uuid, prompt_uuid)
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert _detections(state) == ["watcher"]
    outcomes = [r for r in journal(state) if r["event"] == "outcome"]
    assert len(outcomes) == 1


def test_a_manual_request_still_stops_the_next_turn(goal_same, state: Path) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[1].first])
    write_request(state, ClearRequest(
        session_id=SESSION, rule="MANUAL", count=0, run_length=0, answer_uuid="",
        answer_digest="", transcript_path=str(path), created_at=time.time(),
        source="manual"))
    output = _run(stop_input(path, active=False), state)
    assert output is not None and output["continue"] is False


def test_a_record_folder_that_is_a_link_is_never_written_through(
    goal_same, state: Path, tmp_path: Path
) -> None:
    path, lines, _ = goal_same
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (state / records.RECORDS_DIR).mkdir(parents=True)
    (state / records.RECORDS_DIR / SESSION).symlink_to(elsewhere)
    output = replay(lines, path, env=_env(state), before=4)[-1]
    assert output is not None and output["continue"] is False  # it still stops the loop
    assert list(elsewhere.iterdir()) == []
    assert elsewhere.stat().st_mode & 0o777 == 0o755


def _reprompt_uuid(lines: list[bytes], before: int) -> str:
    """The uuid of the last re-prompt line before index ``before``."""
    import json

    for line in reversed(lines[:before]):
        entry = json.loads(line)
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "user" and isinstance(content, str) and content.startswith(
                "Stop hook feedback:"):
            return entry["uuid"]
    raise AssertionError("no re-prompt")


def test_poll_checks_once_more_at_the_deadline() -> None:
    clock = iter([0.0, 0.0, 0.5, 1.1, 1.1])
    calls = []

    def check():
        calls.append(1)
        return "done" if len(calls) == 3 else None

    assert poll(check, timeout=1.0, interval=0.5, clock=lambda: next(clock),
                sleep=lambda s: None) == "done"
    assert poll(lambda: None, timeout=0, interval=0.1) is None
