"""Start-up catch-up: existing transcripts brought up to date from their tails only."""

from __future__ import annotations

import logging
import os
import time

import orjson
from loop_killer.state import journal, records
from loop_killer.state.inbox import ClearRequest, peek_request, write_request
from transcripts import Lines, append, data, fixture_lines, fixture_session

from .helpers import wait_for


def test_a_loop_already_finished_before_start_up_does_not_fire(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(5) + s.prompt("ok, stop that") + s.answer("Done.", tool=True))
    project, fixture_id = fixture_session("goal-same")  # ended by Claude Code's own cap
    fixture_path = env.root / project / f"{fixture_id}.jsonl"
    append(fixture_path, fixture_lines("goal-same"))
    start_watcher()
    assert not env.has_request(s.session_id) and not env.has_request(fixture_id)
    t = Lines(fixture_id)
    append(fixture_path, t.prompt("Let's do something else.") + t.answer("Sure.", tool=True))
    append(path, s.prompt("and now?") + s.answer("Fine."))
    for session_id, p in ((s.session_id, path), (fixture_id, fixture_path)):
        wait_for(lambda p=p, sid=session_id: (st := env.status(sid))
                 and st.offset == p.stat().st_size, what="the appended lines read")
    assert not env.has_request(s.session_id) and not env.has_request(fixture_id)
    assert env.detections() == []


def test_a_loop_in_progress_at_start_up_fires_on_its_next_reply(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(4))  # already past SAME_REPLY_TURNS
    runner = start_watcher()
    assert runner.watcher.sessions.catch_up_stats.runs == 1
    status = env.read_to_end(s.session_id, path)  # the start-up status
    assert status.run_length == 4 and status.chain_length == 4
    assert not env.has_request(s.session_id), "a request during catch-up"
    append(path, s.reprompt())
    env.read_to_end(s.session_id, path)
    assert not env.has_request(s.session_id), "a request before the reply"
    append(path, s.answer())
    request = wait_for(lambda: peek_request(env.state, s.session_id), what="the request")
    assert request.answer_uuid == s.answer_uuids[-1]
    assert request.rule == "SAME_REPLY_TURNS"


def test_a_restart_never_repeats_a_request(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    first = start_watcher()
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the first request")
    first.stop()
    env.request(s.session_id).unlink()  # the Stop hook took it
    start_watcher()
    append(path, s.loop(1))
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size,
             what="the reply read")
    assert not env.has_request(s.session_id), "counting did not restart after the fired answer"
    assert env.status(s.session_id).run_length == 1
    append(path, s.loop(2))
    request = wait_for(lambda: peek_request(env.state, s.session_id), what="a new request")
    assert request.answer_uuid == s.answer_uuids[-1]
    assert [r["answer_uuid"] for r in env.logged(2, s.session_id)] == [
        s.answer_uuids[-4], s.answer_uuids[-1]]


def test_catch_up_reads_only_the_trailing_run(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    big = "x" * 100_000
    history = []
    for _ in range(60):  # 12 MB of tool output (twice 100 kB per answer) before the run
        history += s.prompt() + s.answer("Looking.", tool=True, output=big)
    append(path, history + s.goal() + s.answer("Starting.") + s.loop(2))
    assert path.stat().st_size > 10_000_000
    runner = start_watcher()
    stats = runner.watcher.sessions.catch_up_stats
    assert stats.sessions == 1 and stats.runs == 1
    assert stats.bytes_read < 100_000
    assert env.status(s.session_id).run_length == 2
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the request")


def test_a_request_superseded_while_no_watcher_ran_is_withdrawn(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    write_request(env.state, ClearRequest(
        session_id=s.session_id, rule="SAME_REPLY_TURNS", count=3, run_length=3,
        answer_uuid=s.answer_uuids[-1], answer_digest="", transcript_path=str(path),
        created_at=time.time() - 5, source="watcher"))
    other = Lines()
    other_path = other.path_in(env.root)
    append(other_path, other.goal_loop(3))
    write_request(env.state, ClearRequest(
        session_id=other.session_id, rule="MANUAL", count=0, run_length=0, answer_uuid="",
        answer_digest="", transcript_path=str(other_path), created_at=time.time() - 5,
        source="manual"))
    append(path, s.prompt("Stop, do this instead."))  # after the request
    start_watcher()
    assert not env.has_request(s.session_id)
    assert env.has_request(other.session_id)  # no prompt since: still pending


def test_start_up_publishes_status_only_for_sessions_in_a_run(env, start_watcher):
    quiet = Lines()
    append(quiet.path_in(env.root), quiet.prompt() + quiet.answer("Done.", tool=True))
    busy = Lines()
    append(busy.path_in(env.root), busy.goal_loop(2))
    start_watcher()
    assert env.status(busy.session_id).run_length == 2
    assert env.status(quiet.session_id) is None


def test_a_partial_last_line_at_start_up_is_completed_live(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    last = data(s.loop(1))
    append(path, last[:-25])
    start_watcher()
    assert env.status(s.session_id).run_length == 2
    append(path, last[-25:])
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    assert env.status(s.session_id).extra["broken_lines"] == 0


def test_hook_detections_in_the_log_count_as_fired(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    start_watcher()
    upcoming = s.loop(1)
    uuid = orjson.loads(upcoming[-1])["uuid"]
    _hook_fires(env, {"event": "detection", "session_id": s.session_id, "answer_uuid": uuid,
                      "prompt_uuid": _reprompt_uuid(upcoming), "rule": "SAME_REPLY_TURNS",
                      "count": 3, "source": "hook"})
    wait_for(lambda: any("(hook)" in r.getMessage() for r in caplog.records),
             what="the hook's detection shown")
    append(path, upcoming)
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size,
             what="the reply read")
    assert not env.has_request(s.session_id)
    assert [r["source"] for r in env.detections(s.session_id)] == ["hook"]


def test_a_restart_leaves_unchanged_statuses_alone(env, start_watcher):
    s = Lines()
    append(s.path_in(env.root), s.goal_loop(2))
    first = start_watcher()
    written = env.status(s.session_id)
    first.stop()
    start_watcher()
    assert env.status(s.session_id).updated_at == written.updated_at


def _reprompt_uuid(lines: list[bytes]) -> str:
    for line in lines:
        entry = orjson.loads(line)
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, str) and content.startswith("Stop hook feedback:"):
            return entry["uuid"]
    raise AssertionError("no re-prompt")


def _hook_fires(env, record: dict) -> None:
    """What the Stop hook does when it fires: record the detection (keyed by the
    re-prompt), mark it acted on, and log it."""
    key = records.record_key(record["prompt_uuid"], record["answer_uuid"])
    assert records.record_detection(env.state, record["session_id"], key, source="hook",
                                    rule=record["rule"])
    assert records.mark_acted(env.state, record["session_id"], key)
    journal.append(env.state, journal.decode(record))


def _hook_cut_record(session_id: str, prompt_line: bytes) -> dict:
    """What the Stop hook logs when it fires on a reply not yet on disk: it knows only
    the re-prompt that reply answered."""
    return {"event": "detection", "session_id": session_id, "answer_uuid": "",
            "prompt_uuid": orjson.loads(prompt_line)["uuid"], "rule": "SAME_REPLY_TURNS",
            "count": 3, "source": "hook"}


def test_a_reply_the_hook_cut_before_it_was_written_is_not_requested_after_a_restart(
        env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    first = start_watcher()
    reprompt = s.reprompt()
    append(path, reprompt)
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size,
             what="the re-prompt read")
    first.stop()
    _hook_fires(env, _hook_cut_record(s.session_id, reprompt[0]))
    start_watcher()
    append(path, s.answer())  # the reply the hook acted on reaches the file
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size,
             what="the reply read")
    assert not env.has_request(s.session_id), "the restart requested it again"
    assert [r["source"] for r in env.detections(s.session_id)] == ["hook"]
    assert env.status(s.session_id).run_length == 0  # counting restarts after it


def test_a_reply_the_hook_cut_is_not_requested_after_a_rename(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    reprompt = s.reprompt()
    append(path, s.goal_loop(2) + reprompt)
    _hook_fires(env, _hook_cut_record(s.session_id, reprompt[0]))
    runner = start_watcher()
    new_id = "0123abcd-0000-4000-8000-00000000beef"
    target = path.with_name(f"{new_id}.jsonl")
    os.rename(path, target)
    wait_for(lambda: str(target) in runner.watcher.sessions.tracked, what="the new name")
    append(target, s.answer())
    wait_for(lambda: (st := env.status(new_id)) and st.offset == target.stat().st_size,
             what="the reply read under the new name")
    assert not env.has_request(new_id) and not env.has_request(s.session_id)
    assert [r["source"] for r in env.detections()] == ["hook"]


def test_a_prompt_in_one_project_leaves_the_request_for_another_projects_session(
        env, start_watcher):
    # One session id in two projects: the request names project A's transcript; a prompt
    # written in project B while no watcher ran supersedes nothing of A's.
    a = Lines(cwd="/home/dev/a")
    a_path = a.path_in(env.root)
    append(a_path, a.goal_loop(3))
    b = Lines(session_id=a.session_id, cwd="/home/dev/b")
    b_path = b.path_in(env.root)
    append(b_path, b.goal_loop(1))
    write_request(env.state, ClearRequest(
        session_id=a.session_id, rule="SAME_REPLY_TURNS", count=3, run_length=3,
        answer_uuid=a.answer_uuids[-1], answer_digest="", transcript_path=str(a_path),
        created_at=time.time() - 5, source="watcher"))
    append(b_path, b.prompt("Something else, in project b."))  # after the request
    start_watcher()
    request = peek_request(env.state, a.session_id)
    assert request is not None and request.transcript_path == str(a_path)
