"""What the mod did after the turn: its outcome files become detection-log lines, once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from loop_killer.hooks.mod_outcomes import outcome_paths, sweep_mod_outcomes, write_mod_plan_record
from loop_killer.hooks.stop_hook import run
from loop_killer.state.journal import LoopRecord, OutcomeRecord

from .kit import journal, raw, stop_input

PROOF = (b'{"type":"attachment","attachment":{"type":"goal_status","met":true,"sentinel":true,'
         b'"condition":"tests pass"},"uuid":"u","timestamp":"2026-11-30T00:00:00.000Z"}\n')


def _plan(state: Path, key: str, transcript: Path, **extra) -> str:
    return write_mod_plan_record(str(state), key, {
        "id": key, "session_id": "s", "answer_uuid": "a1", "rule": "SAME_REPLY_TURNS",
        "project": "proj", "transcript_path": str(transcript),
        "offset": transcript.stat().st_size, **extra})


def _report(path: str, status: str, output: str | None = None) -> None:
    Path(path).write_text(json.dumps({"v": 1, "id": "x", "status": status, "output": output,
                                      "error": None, "at": 1}) + "\n")


def test_a_settled_plan_is_logged_once_and_removed(tmp_path: Path, state: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    outcome_path = _plan(state, "s.1", transcript)
    _report(outcome_path, "cleared", "Goal cleared: tests pass")
    records: list[OutcomeRecord] = []
    assert sweep_mod_outcomes(str(state), records.append) == 1
    assert records[0].outcome == "cleared" and records[0].hands == "mod"
    assert records[0].detail == "/goal clear: Goal cleared: tests pass"
    assert records[0].answer_uuid == "a1" and records[0].source == "hook"
    assert not any(Path(p).exists() for p in outcome_paths(str(state), "s.1"))
    assert sweep_mod_outcomes(str(state), records.append) == 0


def test_a_queued_plan_waits_then_is_logged_as_unconfirmed(tmp_path: Path, state: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    outcome_path = _plan(state, "s.2", transcript)
    _report(outcome_path, "queued")
    records: list[OutcomeRecord] = []
    assert sweep_mod_outcomes(str(state), records.append) == 0
    assert sweep_mod_outcomes(str(state), records.append, now=time.time() + 600) == 1
    assert records[0].outcome == "sent_unconfirmed"
    assert records[0].detail == "the mod never reported what /goal clear did"


def test_files_left_without_their_plan_go_after_an_hour(tmp_path: Path, state: Path) -> None:
    """The mod wrote its outcome after its plan was logged as unconfirmed; a sweeper died
    between taking a plan and logging it: those files went nowhere (an audit's note)."""
    from loop_killer.hooks.mod_outcomes import LEFTOVER_AGE

    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    late = Path(_plan(state, "s.3", transcript))
    assert sweep_mod_outcomes(str(state), [].append, now=time.time() + 600) == 1
    _report(str(late), "cleared", "Goal cleared: tests pass")  # after its plan was logged
    taken = state / "outcomes" / "s.4.plan.123.taken"
    taken.write_text("{}")
    kept = Path(_plan(state, "s.5", transcript))  # a live plan: its files stay
    _report(str(kept), "queued")
    assert sweep_mod_outcomes(str(state), [].append) == 0
    assert late.exists() and taken.exists()  # young: the mod may be writing still
    later = time.time() + LEFTOVER_AGE + 1
    assert sweep_mod_outcomes(str(state), [].append, now=later) == 1  # s.5, stale by then
    assert not late.exists() and not taken.exists()


def test_the_proof_line_outranks_what_the_mod_reported(tmp_path: Path, state: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b'{"type":"x"}\n')
    outcome_path = _plan(state, "s.3", transcript)
    _report(outcome_path, "failed", "")
    with open(transcript, "ab") as handle:
        handle.write(PROOF)
    records: list[OutcomeRecord] = []
    sweep_mod_outcomes(str(state), records.append)
    assert (records[0].outcome, records[0].evidence) == ("cleared", "proof line")


def test_a_no_goal_report_and_broken_files(tmp_path: Path, state: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    _report(_plan(state, "s.4", transcript), "no_goal", "No goal set")
    plan_path, outcome_path = outcome_paths(str(state), "s.5")
    Path(plan_path).write_text("not json")
    Path(outcome_path).write_text("{}")
    os.symlink("/etc/passwd", outcome_paths(str(state), "s.6")[0])
    records: list[OutcomeRecord] = []
    assert sweep_mod_outcomes(str(state), records.append) == 1
    assert records[0].outcome == "stopped_no_goal"
    assert sorted(os.listdir(state / "outcomes")) == []


def test_the_next_stop_hook_logs_what_the_mod_did(tmp_path: Path, state: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    _report(_plan(state, "s.7", transcript), "cleared", "Goal cleared: tests pass")
    env = {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}
    assert run(raw(stop_input(transcript, active=False)), env=env) is None
    assert [r["outcome"] for r in journal(state)] == ["cleared"]


def test_with_the_mod_and_no_goal_no_plan_is_recorded(tmp_path: Path, state: Path) -> None:
    """Without a goal the mod runs nothing and reports nothing: a plan record would turn
    into a false "sent_unconfirmed" line two minutes later."""
    from .kit import answer, fixture_transcript, lines_of, replay

    lines = lines_of(fixture_transcript("command-hook-loop"))
    path = tmp_path / "proj" / "s.jsonl"
    env = {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}
    replay(lines, path, env=env, before=3)
    output = run(raw(stop_input(path, message=answer(lines, 3).text, mod=True)), env=env)
    assert output is not None and output["continue"] is False
    plan = json.loads(output["hookSpecificOutput"]["additionalContext"].removeprefix(
        "loop-killer: "))
    assert plan["clear_goal"] is False and plan["outcome_path"] == ""
    assert not (state / "outcomes").exists() or not any((state / "outcomes").iterdir())
    records: list[OutcomeRecord] = []
    assert sweep_mod_outcomes(str(state), records.append, now=time.time() + 600) == 0
    assert [r["outcome"] for r in journal(state) if r["event"] == "outcome"] == [
        "stopped_no_goal"]


def test_the_watcher_shows_what_the_hook_logged_before_the_clear_it_read(
        tmp_path: Path, state: Path, caplog) -> None:
    """The mod's clear lands in the transcript moments after the Stop hook logged LOOP and
    QUEUED, before the watcher's next read of the log: the watcher's CLEARED waits for
    that read (its tick), so its terminal prints in the order things happened."""
    import logging

    from loop_killer.engine.transcript import GoalStatus
    from loop_killer.watch.follower import Follower
    from loop_killer.watch.narrate import tell
    from loop_killer.watch.respond import Responder
    from loop_killer.watch.tracked import Tracked

    caplog.set_level(logging.INFO, logger="loop_killer.watch.events")
    responder = Responder(state, home=None, history_age=600)
    path = str(tmp_path / "proj" / "s.jsonl")
    tracked = Tracked(path=path, session_id="s1234567", project="proj",
                      follower=Follower(path, (0, 0)), reader=None)
    responder.follow(tracked, "a1", "SAME_REPLY_TURNS")  # the watcher read reply N
    responder.on_status(tracked, GoalStatus("g", "", True, True, "tests pass", ""))
    assert not [r for r in caplog.records if r.name.endswith("events")]  # held for the tick
    for record in (LoopRecord(session_id="s1234567", project="proj",
                              rule="SAME_REPLY_TURNS", count=3, source="hook"),
                   OutcomeRecord(session_id="s1234567", project="proj",
                                 outcome="clear_queued", detail="queued", source="hook")):
        # The watcher's next read of the log: QUEUED is on the way to the clear.
        now = time.time()
        responder.say(tell(responder.narrator, record, home=None, now=now), at=now)
    responder.tick(time.monotonic())
    responder.release()  # (what waits to be told in order: at once)
    shown = [r.getMessage().split()[0] for r in caplog.records if r.name.endswith("events")]
    assert shown == ["LOOP", "CLEARED"]
    # The hook acted on it: what became of it is the hook's and the mod's to log, once.
    assert journal(state) == []


def test_two_sweepers_log_a_plan_once(tmp_path: Path, state: Path) -> None:
    """The watcher and a Stop hook sweep at once: whoever takes the plan logs it."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    _report(_plan(state, "s.9", transcript), "cleared", "Goal cleared: tests pass")
    records: list[OutcomeRecord] = []
    inner: list[int] = []

    def append_while_another_sweeps(record: OutcomeRecord) -> None:
        inner.append(sweep_mod_outcomes(str(state), records.append))
        records.append(record)

    assert sweep_mod_outcomes(str(state), append_while_another_sweeps) == 1
    assert inner == [0] and len(records) == 1
    assert os.listdir(state / "outcomes") == []
