"""The watcher path: trust a live watcher's status, wait for it briefly only when this
reply fires, and never wait on a normal turn.

Waiting is measured on a fake clock (the hook's ``poll`` sleeps on it), so the tests hold
on a loaded machine: "did not wait" is no sleep at all, "waited until the watcher
answered" is the fake time at which it did.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loop_killer.hook import decide, local_detect, wait
from loop_killer.hook.stop_hook import run
from loop_killer.hook.wait import poll
from loop_killer.state import journal as journal_module
from loop_killer.state.inbox import ClearRequest, write_request
from loop_killer.state.status import (
    SessionStatus,
    WatcherHeartbeat,
    write_heartbeat,
    write_session_status,
)

from .kit import fixture_transcript, journal, lines_of, raw, stop_input, stops, write

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"


def _env(state: Path) -> dict[str, str]:
    return {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}


def _beat(state: Path, *, age: float = 0.0) -> None:
    now = time.time()
    write_heartbeat(state, WatcherHeartbeat(pid=os.getpid(), started_at=now - 100,
                                            beat_at=now - age, root=str(state)))


def _status(state: Path, transcript: Path, *, offset: int, run_length: int, chain: int,
            digest: str = "ade7c0b305209229") -> None:
    write_session_status(state, SessionStatus(
        session_id=SESSION, transcript_path=str(transcript), project="proj", offset=offset,
        run_length=run_length, chain_length=chain, awaiting="reprompt",
        last_answer_uuid="x", last_answer_digest=digest, last_activity=time.time(),
        updated_at=time.time()))


def _watcher_request(state: Path, transcript: Path, answer_uuid: str) -> None:
    write_request(state, ClearRequest(
        session_id=SESSION, rule="SAME_REPLY_TURNS", count=3, run_length=3,
        answer_uuid=answer_uuid, answer_digest="ade7c0b305209229",
        transcript_path=str(transcript), created_at=time.time(), source="watcher"))
    journal_module.append(state, {"event": "detection", "session_id": SESSION,
                                  "answer_uuid": answer_uuid, "rule": "SAME_REPLY_TURNS",
                                  "source": "watcher"})


class FakeClock:
    """The hook's clock while it polls: sleeping advances it and runs what is due."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0
        self.due: list[tuple[float, Callable[[], None]]] = []

    def at(self, when: float, action: Callable[[], None]) -> None:
        self.due.append((when, action))

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        for item in [item for item in self.due if item[0] <= self.now]:
            self.due.remove(item)
            item[1]()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    real = wait.poll

    def fake_poll(check, *, timeout: float, interval: float, **_: object):
        return real(check, timeout=timeout, interval=interval, clock=lambda: fake.now,
                    sleep=fake.sleep)

    monkeypatch.setattr(wait, "poll", fake_poll)
    return fake


@pytest.fixture
def goal_same(tmp_path: Path):
    lines = lines_of(fixture_transcript("goal-same"))
    by_number = {stop.number: stop for stop in stops(lines)}
    return tmp_path / "proj" / f"{SESSION}.jsonl", lines, by_number


def _run(data: dict, state: Path):
    return run(raw(data), env=_env(state))


def test_a_normal_turn_never_waits_nor_reads_the_transcript(
    goal_same, state: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    _beat(state)
    _status(state, path, offset=0, run_length=2, chain=2)  # behind, and at a threshold's edge
    monkeypatch.setattr(local_detect, "read_tail", _must_not_be_called)
    assert _run(stop_input(path, active=False), state) is None
    assert clock.sleeps == 0


def _must_not_be_called(*args, **kwargs):
    raise AssertionError("the transcript must not be read on this turn")


def test_a_live_watcher_that_has_read_everything_and_is_far_from_a_threshold_is_trusted(
    goal_same, state: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[2].first])  # the hook for the 2nd answer to a re-prompt
    _beat(state)
    _status(state, path, offset=path.stat().st_size, run_length=1, chain=1)
    monkeypatch.setattr(local_detect, "read_tail", _must_not_be_called)
    assert _run(stop_input(path), state) is None
    assert clock.sleeps == 0


def test_watcher_behind_catches_up_within_the_wait_and_its_request_is_taken(
    goal_same, state: Path, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.first])  # reply N not written yet (case A)
    _beat(state)
    _status(state, path, offset=path.stat().st_size - 400, run_length=2, chain=2)
    clock.at(0.15, lambda: _watcher_request(state, path, third.uuid))
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    # Waited for the watcher, and no longer than until its request came.
    assert 0.15 <= clock.now < 0.15 + 2 * decide.POLL_INTERVAL
    records = journal(state)
    assert [r["source"] for r in records if r["event"] == "detection"] == ["watcher"]
    outcome = [r for r in records if r["event"] == "outcome"]
    assert len(outcome) == 1 and outcome[0]["answer_uuid"] == third.uuid
    assert not (state / "requests" / f"{SESSION}.json").exists()


def test_watcher_that_has_read_this_reply_without_firing_ends_the_wait_early(
    goal_same, state: Path, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.index + 1])  # reply N written (case C)
    _beat(state)
    _status(state, path, offset=0, run_length=2, chain=2)
    size = path.stat().st_size
    clock.at(0.1, lambda: _status(state, path, offset=size, run_length=3, chain=3))
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert 0.1 <= clock.now < 0.1 + 2 * decide.POLL_INTERVAL
    detections = [r for r in journal(state) if r["event"] == "detection"]
    assert [d["source"] for d in detections] == ["hook"]
    assert detections[0]["answer_uuid"] == third.uuid


def test_a_dead_watcher_is_not_waited_for(goal_same, state: Path, clock: FakeClock) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    _beat(state, age=3600)  # a heartbeat from an hour ago
    _status(state, path, offset=0, run_length=0, chain=0)
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert clock.sleeps == 0
    assert [r["source"] for r in journal(state) if r["event"] == "detection"] == ["hook"]


def test_no_status_for_the_session_means_detecting_locally(
    goal_same, state: Path, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    _beat(state)  # alive, but it has not found this session yet
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    # A watcher that does not follow this session will not fire on it: no wait.
    assert clock.sleeps == 0


def test_a_silent_watcher_costs_at_most_the_bounded_wait(
    goal_same, state: Path, clock: FakeClock
) -> None:
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    _beat(state)
    _status(state, path, offset=path.stat().st_size - 400, run_length=2, chain=2)
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert clock.now == pytest.approx(decide.WAIT_FOR_WATCHER)


def test_the_real_wait_is_bounded_in_wall_time_too(goal_same, state: Path) -> None:
    """Without the fake clock: a silent watcher holds the hook about WAIT_FOR_WATCHER, and
    never for long (a generous bound, for a loaded machine)."""
    path, lines, by_number = goal_same
    write(path, lines[: by_number[3].first])
    _beat(state)
    _status(state, path, offset=path.stat().st_size - 400, run_length=2, chain=2)
    started = time.monotonic()
    output = _run(stop_input(path), state)
    took = time.monotonic() - started
    assert output is not None and output["continue"] is False
    assert decide.WAIT_FOR_WATCHER <= took < decide.WAIT_FOR_WATCHER + 5


def test_a_request_written_while_the_status_was_read_is_not_missed(
    goal_same, state: Path, clock: FakeClock
) -> None:
    """The watcher writes its request, then the status that covers (and resets) the run."""
    path, lines, by_number = goal_same
    third = by_number[3]
    write(path, lines[: third.index + 1])
    _beat(state)
    _status(state, path, offset=path.stat().st_size, run_length=0, chain=0)
    _watcher_request(state, path, third.uuid)
    output = _run(stop_input(path), state)
    assert output is not None and output["continue"] is False
    assert clock.sleeps == 0


def test_poll_checks_once_more_at_the_deadline() -> None:
    clock = iter([0.0, 0.0, 0.5, 1.1, 1.1])
    calls = []

    def check():
        calls.append(1)
        return "done" if len(calls) == 3 else None

    assert poll(check, timeout=1.0, interval=0.5, clock=lambda: next(clock),
                sleep=lambda s: None) == "done"
    assert poll(lambda: None, timeout=0, interval=0.1) is None
