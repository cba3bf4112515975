"""One detection record per answer, and no waiting: the watcher and the Stop hook may
both judge the same answer; the first to record it logs it, a request for an answer a
hook already stopped is void, and nobody ever sleeps for the other.

"Never sleeps" is checked by making ``time.sleep`` fail during the hook run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from loop_killer.hook import stop_hook
from loop_killer.hook.stop_hook import run
from loop_killer.hook.terminal import poll
from loop_killer.state import journal as journal_module
from loop_killer.state import records
from loop_killer.state.inbox import ClearRequest, write_request

from .kit import fixture_transcript, journal, lines_of, raw, stop_input, stops, write

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


def test_a_normal_turn_never_reads_the_transcript(
    goal_same, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    monkeypatch.setattr(stop_hook, "read_tail", _must_not_be_called)
    assert _run(stop_input(path, active=False), state) is None


def test_the_hook_fires_on_its_own_and_records_the_detection_once(goal_same, state: Path
                                                                   ) -> None:
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.first])  # reply N not written yet (case A)
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert _detections(state) == ["hook"]
    (key,) = records.recorded_keys(state, SESSION)
    assert key in records.recorded_keys(state, SESSION, acted_only=True)
    # The watcher, reading the same answer a moment later, is second: it logs nothing.
    assert not records.record_detection(state, SESSION, key, source="watcher",
                                        rule="SAME_REPLY_TURNS")


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


@pytest.mark.parametrize("written", ["reply not written", "reply written"])
def test_watcher_recorded_but_its_request_not_yet_written_the_hook_still_stops(
    goal_same, state: Path, written: str
) -> None:
    """The race of a CI failure: the watcher records its detection of reply N a moment
    before this hook reads the records, and writes its request only after this hook has
    looked for one. The record alone (no Stop hook acted on it) must not make the hook
    skip reply N: the hook stops the turn; the watcher's late request is then void."""
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.first if written == "reply not written" else third.index + 1])
    prompt_uuid = _reprompt_uuid(lines, third.first)
    assert records.record_detection(state, SESSION, prompt_uuid, source="watcher",
                                    rule="SAME_REPLY_TURNS")
    assert records.recorded_keys(state, SESSION, acted_only=True) == set()
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert records.recorded_keys(state, SESSION, acted_only=True) == {prompt_uuid}
    assert not records.first_to_act(state, SESSION, prompt_uuid)  # its request: void
    assert _detections(state) == []  # the watcher, first to record, logs it


def test_a_recorded_answer_still_ends_the_run_before_the_reply_judged(goal_same, state: Path
                                                                       ) -> None:
    """Twins for reply 4: the watcher fired on reply 3 (its hook had not), twin A took the
    request and is about to stop the turn for it. Twin B, judging reply 4, counts afresh
    after reply 3 (recorded as fired, though no hook has acted on it yet): one stop."""
    from loop_killer.state.inbox import claim_request

    path, lines, by_number = goal_same
    third, fourth = by_number[3], by_number[4]
    write(path, lines[: fourth.first])  # reply 4 not written yet
    prompt_uuid = _reprompt_uuid(lines, third.first)
    _watcher_fires(state, path, third.uuid, prompt_uuid)
    taken = claim_request(state, SESSION, transcript_path=str(path))  # twin A
    assert taken is not None
    assert _run(stop_input(path), state) is None  # twin B
    assert records.first_to_act(state, SESSION, prompt_uuid)  # twin A goes on, alone
    assert records.recorded_keys(state, SESSION, acted_only=True) == {prompt_uuid}
    assert _detections(state) == ["watcher"]


def test_a_request_for_an_answer_already_stopped_is_void(goal_same, state: Path) -> None:
    """The hook stopped the turn on its own; the watcher's request arrives afterwards:
    the next Stop drops it instead of stopping a turn a second time."""
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.first])
    assert _run(stop_input(path), state)["continue"] is False
    (key,) = records.recorded_keys(state, SESSION)
    write_request(state, ClearRequest(
        session_id=SESSION, rule="SAME_REPLY_TURNS", count=3, run_length=3,
        answer_uuid=third.uuid, answer_digest="x", transcript_path=str(path),
        created_at=time.time(), source="watcher", prompt_uuid=key))
    assert _run(stop_input(path, active=False), state) is None
    assert not (state / "requests" / f"{SESSION}.json").exists()
    assert [r["event"] for r in journal(state)].count("outcome") == 1


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
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (state / records.RECORDS_DIR).mkdir(parents=True)
    (state / records.RECORDS_DIR / SESSION).symlink_to(elsewhere)
    output = _run(stop_input(path), state)
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
