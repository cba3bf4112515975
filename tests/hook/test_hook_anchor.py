"""The anchor through the hook's entry point: every run for a reply that answers a
re-prompt leaves it (judged, or advanced by one when the transcript was not read), a normal
turn does not touch it, and a second hook for the same reply never counts it again."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from loop_killer.hook import stop_hook
from loop_killer.hook.reply import (
    Anchor,
    advance_anchor,
    anchor_path,
    read_anchor,
    save_anchor,
)
from loop_killer.hook.stop_hook import run

from .kit import (
    Stop,
    entry,
    fixture_transcript,
    is_reprompt,
    journal,
    lines_of,
    raw,
    stop_input,
    stops,
    without_summaries,
    write,
)

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"
PROMPT = "182dc0eb-5aaa-4580-9bd2-a2b300a8e060"


def _env(state: Path) -> dict[str, str]:
    return {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}


class Session:
    """One session's transcript growing Stop by Stop, and its hook run at each Stop."""

    def __init__(self, tmp_path: Path, state: Path, scenario: str = "goal-same") -> None:
        self.lines = without_summaries(lines_of(fixture_transcript(scenario)))  # 2.1.250
        self.stops = {stop.number: stop for stop in stops(self.lines) if stop.reprompted}
        self.path = tmp_path / "proj" / f"{SESSION}.jsonl"
        self.state = state

    def cut(self, stop: Stop, case: str) -> None:
        end = {"A": stop.first, "C": stop.index + 1, "B": stop.index + 2}[case]
        if case == "B":
            assert is_reprompt(self.lines[stop.index + 1])
        write(self.path, self.lines[:end])

    def hook(self, number: int, case: str, *, spawn_time: float | None = None,
             prompt_id: str = PROMPT) -> dict | None:
        stop = self.stops[number]
        self.cut(stop, case)
        data = stop_input(self.path, message=stop.text, prompt_id=prompt_id)
        if spawn_time is None:
            # The hook started now, an API round trip after the last Stop's hooks ended
            # (in a test the hooks follow each other within milliseconds).
            spawn_time = time.time() + 0.05
        return run(raw(data), env=_env(self.state), spawn_time=spawn_time)

    def anchor(self) -> Anchor | None:
        saved = read_anchor(str(self.state), SESSION)
        return saved.anchor if saved is not None else None

    def reprompt_uuid(self, number: int) -> str:
        """The re-prompt that answer ``number`` answers."""
        return [entry(line)["uuid"] for line in self.lines if is_reprompt(line)][number - 1]


def _saved_earlier(state: Path, seconds: float) -> None:
    """The session's anchor as if saved ``seconds`` ago (both its clocks moved back), in
    place of sleeping for the time to pass."""
    path = Path(anchor_path(str(state), SESSION))
    record = json.loads(path.read_bytes())
    record["at"] -= seconds
    record["boot"] -= seconds
    path.write_text(json.dumps(record))


def _detections(state: Path) -> list[dict]:
    return [r for r in journal(state) if r["event"] == "detection"]


@pytest.mark.parametrize("cases", ["AAA", "BBB", "CCC", "ABC", "CBA", "BAB"])
def test_each_hook_hands_the_next_the_reprompt_its_reply_answered(
    tmp_path: Path, state: Path, cases: str
) -> None:
    """2.1.250 headless (no summaries), any mix of cuts: the loop stops at the 3rd answer."""
    session = Session(tmp_path, state)
    for number, case in enumerate(cases, start=1):
        output = session.hook(number, case)
        assert session.anchor() == Anchor(session.reprompt_uuid(number), 0, offset=(
            session.anchor().offset), prompt_id=PROMPT)
        if number < 3:
            assert output is None, (number, case)
    assert output is not None and output["continue"] is False
    detection = _detections(state)
    assert [d["located_by"] for d in detection] == ["anchor"]
    assert detection[0]["prompt_uuid"] == session.reprompt_uuid(3)


def test_the_firing_hook_saves_its_anchor_and_the_next_reply_is_counted_once(
    tmp_path: Path, state: Path
) -> None:
    session = Session(tmp_path, state)
    session.hook(1, "A")
    session.hook(2, "B")
    assert session.hook(3, "B") is not None  # fires
    assert session.anchor().base == session.reprompt_uuid(3)
    # The loop went on anyway: the 4th answer starts a new run (the 3rd is not counted
    # again), so do the 5th; the 6th fires again.
    assert session.hook(4, "A") is None
    assert session.hook(5, "C") is None
    assert session.hook(6, "B") is not None
    assert len(_detections(state)) == 2


def test_a_normal_turn_leaves_no_anchor(tmp_path: Path, state: Path) -> None:
    session = Session(tmp_path, state)
    first = stops(session.lines)[0]
    write(session.path, session.lines[: first.index + 1])
    assert run(raw(stop_input(session.path, active=False)), env=_env(state)) is None
    assert not (state / "hook").exists()


def test_a_twin_hook_for_the_same_reply_does_not_count_it_twice(
    tmp_path: Path, state: Path
) -> None:
    """The plugin loaded twice: two hooks per Stop. The second reads the anchor the first
    saved for this very reply, and must judge from the one before."""
    session = Session(tmp_path, state)
    session.hook(1, "A")
    _saved_earlier(state, 0.1)  # the API round trip
    started = time.time()
    assert session.hook(2, "B", spawn_time=started) is None
    assert session.hook(2, "B", spawn_time=started) is None  # the twin: not the 3rd answer
    assert session.anchor().base == session.reprompt_uuid(2)
    assert session.hook(3, "A") is not None


def test_a_twin_does_not_advance_the_anchor_twice(state: Path) -> None:
    save_anchor(str(state), SESSION, Anchor("r1", 0, offset=10, prompt_id=PROMPT),
                prev=None, size=100)
    _saved_earlier(state, 0.05)
    started = time.time()
    assert advance_anchor(str(state), SESSION, size=200, prompt_id=PROMPT,
                          spawn_time=started)
    assert not advance_anchor(str(state), SESSION, size=200, prompt_id=PROMPT,
                              spawn_time=started)
    saved = read_anchor(str(state), SESSION)
    assert (saved.anchor.base, saved.anchor.skip, saved.prev.base) == ("r1", 1, "r1")


def test_hooks_that_could_not_read_the_transcript_still_move_the_anchor(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers 1 and 2: the transcript cannot be read, so those hooks judge nothing. Answer
    3: the hook reads again, and its anchor (two re-prompts after the turn's start) places
    reply 3 exactly."""
    session = Session(tmp_path, state)
    read_tail = stop_hook.read_tail

    def unreadable(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(stop_hook, "read_tail", unreadable)
    for number, case in ((1, "A"), (2, "B")):
        session.cut(session.stops[number], case)
        output = session.hook(number, case)
        assert output is None or "continue" not in output  # a note at most, never a stop
    assert session.anchor() == Anchor("", 2, turn_before=session.anchor().turn_before,
                                      prompt_id=PROMPT)
    monkeypatch.setattr(stop_hook, "read_tail", read_tail)
    session.cut(session.stops[3], "B")
    output = session.hook(3, "B")
    assert output is not None and output["continue"] is False
    assert [d["located_by"] for d in _detections(state)] == ["anchor"]


def _must_not_be_called(*args, **kwargs):
    raise AssertionError("the transcript must not be read on this turn")


def test_a_hook_that_failed_still_moves_the_anchor(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = Session(tmp_path, state)
    session.hook(1, "A")
    judge = stop_hook.judge

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(stop_hook, "judge", broken)
    with pytest.raises(RuntimeError):
        session.hook(2, "B")
    assert session.anchor().base == session.reprompt_uuid(1)
    assert session.anchor().skip == 1
    monkeypatch.setattr(stop_hook, "judge", judge)
    assert session.hook(3, "A") is not None  # exactly the 3rd


def test_a_taken_request_moves_the_anchor(tmp_path: Path, state: Path) -> None:
    from loop_killer.state.inbox import ClearRequest, write_request

    session = Session(tmp_path, state)
    session.hook(1, "C")
    write_request(state, ClearRequest(
        session_id=SESSION, rule="MANUAL", count=0, run_length=0, answer_uuid="",
        answer_digest="", transcript_path=str(session.path), created_at=time.time(),
        source="manual"))
    assert session.hook(2, "C") is not None  # stopped as asked
    assert (session.anchor().base, session.anchor().skip) == (session.reprompt_uuid(1), 1)


def test_another_turns_anchor_is_ignored(tmp_path: Path, state: Path) -> None:
    """An anchor saved in another turn (another prompt id) names nothing in this one."""
    session = Session(tmp_path, state)
    lines = session.lines
    last = [i for i, line in enumerate(lines) if is_reprompt(line)][-1]
    save_anchor(str(state), SESSION,
                Anchor(entry(lines[last])["uuid"], 0, offset=sum(map(len, lines[:last])),
                       prompt_id="an-earlier-prompt"), prev=None, size=10**6)
    session.hook(1, "B", spawn_time=time.time())
    assert session.anchor().base == session.reprompt_uuid(1)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "garbage", "huge"])
def test_an_unsafe_or_broken_anchor_file_is_no_anchor(
    tmp_path: Path, state: Path, kind: str
) -> None:
    session = Session(tmp_path, state)
    path = Path(anchor_path(str(state), SESSION))
    path.parent.mkdir(parents=True)
    if kind == "symlink":
        target = tmp_path / "elsewhere.json"
        target.write_text(json.dumps({"v": 1, "base": "x", "skip": 5, "at": 0}))
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "garbage":
        path.write_bytes(b"\xff{not json")
    else:
        path.write_bytes(b" " * 10**6)
    assert read_anchor(str(state), SESSION) is None
    started = time.monotonic()
    session.hook(1, "A")
    assert time.monotonic() - started < 5
    if kind == "symlink":
        # Replaced by a file of our own (rename over the link), the target untouched.
        assert not path.is_symlink() and json.loads(target.read_text())["skip"] == 5


def test_the_clock_stepping_back_between_two_stops_does_not_make_a_twin(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wall clock is set back 10 s between two Stops (NTP, a person): the next hook
    started, by the clock, before the last anchor was saved. It is still the next reply
    (a twin runs at the same time; the boot clock says which came first), so the loop is
    stopped at the 3rd answer, not the 4th."""
    session = Session(tmp_path, state)
    assert session.hook(1, "A") is None
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() - 10.0)
    assert session.hook(2, "B") is None
    assert session.anchor().base == session.reprompt_uuid(2)
    assert session.hook(3, "B") is not None


def test_an_anchor_saved_before_a_restart_of_the_machine_is_no_twins(state: Path) -> None:
    """The boot clock starts again at a restart: an anchor saved later on it than now was
    saved before the restart, not by a twin of this hook."""
    save_anchor(str(state), SESSION, Anchor("r1", 0, offset=10, prompt_id=PROMPT),
                prev=None, size=100)
    path = Path(anchor_path(str(state), SESSION))
    record = json.loads(path.read_bytes())
    record["boot"] += 3600.0
    path.write_text(json.dumps(record))
    saved = read_anchor(str(state), SESSION)
    assert saved is not None and not saved.is_twins(time.time() - 1.0)
    record["boot"] -= 3600.0
    path.write_text(json.dumps(record))
    assert read_anchor(str(state), SESSION).is_twins(time.time() - 1.0)
