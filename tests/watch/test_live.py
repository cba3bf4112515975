"""The watcher following sessions live, with a real watchdog observer on a temp tree."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time

import orjson
import pytest
from loop_killer.engine.rules import text_digest
from loop_killer.state import journal
from loop_killer.state.inbox import peek_request
from loop_killer.watch import follower as follower_module
from transcripts import SAME, Lines, append, data, fixture_lines, fixture_session

from .helpers import wait_for


def loop_file(env, lines: Lines, replies: int = 1):
    """A session that ran /goal and has ``replies`` re-prompted answers so far."""
    path = lines.path_in(env.root)
    append(path, lines.goal_loop(replies))
    return path


def test_a_loop_written_live_fires_once_with_request_log_and_status(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=2)
    env.read_to_end(s.session_id, path)
    assert not env.has_request(s.session_id), "a request after two replies"
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the clear request")

    request = peek_request(env.state, s.session_id)
    assert request is not None
    assert (request.rule, request.source, request.count) == ("SAME_REPLY_TURNS", "watcher", 3)
    assert request.answer_uuid == s.answer_uuids[-1]
    assert request.answer_digest == text_digest(SAME)
    assert request.transcript_path == str(path)
    (record,) = env.logged(1, s.session_id)
    assert record["answer_uuid"] == s.answer_uuids[-1]
    assert record["project"] == s.project and record["source"] == "watcher"
    assert record["snippet"] == SAME and record["count"] == 3
    assert record["transcript_path"] == str(path) and record["rule"] == "SAME_REPLY_TURNS"
    # The request comes first, the status right after it.
    status = wait_for(lambda: (st := env.status(s.session_id))
                      and st.last_answer_uuid == s.answer_uuids[-1] and st, what="status")
    assert status.last_answer_digest == text_digest(SAME)
    assert status.pending_request is True
    assert status.offset == path.stat().st_size

    def shown_loops() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name == "loop_killer.watch.events" and r.getMessage().startswith("LOOP")]

    (shown,) = wait_for(shown_loops, what="the LOOP line")  # (a second late at most)
    assert s.session_id[:8] in shown and "3 similar replies" in shown and SAME in shown


def test_appends_in_many_small_writes_are_read_whole(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = s.path_in(env.root)
    payload = data(s.goal_loop(3))
    path.parent.mkdir(parents=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for start in range(0, len(payload), 97):  # cuts lines, even UTF-8, anywhere
            os.write(fd, payload[start:start + 97])
            if start % (97 * 20) == 0:
                time.sleep(0.001)  # kept: paces the writes, so some reads find a line cut
    finally:
        os.close(fd)
    wait_for(lambda: env.has_request(s.session_id), what="the clear request")
    status = wait_for(lambda: (st := env.status(s.session_id)) and st.offset == len(payload)
                      and st, what="status at the end of the file")
    assert status.extra["broken_lines"] == 0
    assert len(env.detections(s.session_id)) == 1


def test_a_half_written_last_line_waits_for_its_end(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=2)
    last = data(s.loop(1))
    cut = len(last) - 40
    append(path, last[:cut])
    size_before_partial = path.stat().st_size - cut + last.rfind(b"\n", 0, cut) + 1
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == size_before_partial,
             what="the whole lines before the partial one")
    assert not env.has_request(s.session_id)
    status = env.status(s.session_id)
    assert status.extra["pending_bytes"] == cut - (last.rfind(b"\n", 0, cut) + 1)
    assert status.extra["broken_lines"] == 0
    append(path, last[cut:])
    wait_for(lambda: env.has_request(s.session_id), what="the request once the line ended")
    assert env.status(s.session_id).extra["broken_lines"] == 0


def test_the_real_goal_same_transcript_fires_on_its_third_reprompted_answer(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    project, session_id = fixture_session("goal-same")
    path = env.root / project / f"{session_id}.jsonl"
    replayed = fixture_lines("goal-same")
    answers = [orjson.loads(line)["uuid"] for line in replayed
               if orjson.loads(line).get("type") == "assistant"]
    for line in replayed:
        append(path, [line])
    wait_for(lambda: (st := env.status(session_id)) and st.offset == path.stat().st_size,
             what="the whole transcript read")
    # The kickoff's answer is not part of the run: answers 2-4 fire, then 5-7 again
    # (the loop went on until Claude Code's own cap), and 8-9 are too few.
    assert [r["answer_uuid"] for r in env.detections(session_id)] == [answers[3], answers[6]]
    request = peek_request(env.state, session_id)
    assert request is not None and request.answer_uuid == answers[6]
    assert request.rule == "SAME_REPLY_TURNS"


def test_status_is_never_ahead_of_the_request(env, start_watcher):
    """A Stop hook that sees the firing answer's digest in the status finds the request."""
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=2)
    wait_for(lambda: env.status(s.session_id), what="status")
    violations: list[str] = []
    done = threading.Event()

    def watch_status() -> None:
        while not done.is_set():
            status = env.status(s.session_id)
            if status and status.last_answer_uuid == (s.answer_uuids[-1] if len(
                    s.answer_uuids) == 5 else None) and not env.has_request(s.session_id):
                violations.append("status showed the answer before the request existed")
            time.sleep(0)  # kept: a yield to the watcher's thread, not a wait

    checker = threading.Thread(target=watch_status)
    checker.start()
    try:
        append(path, s.loop(1))
        wait_for(lambda: env.has_request(s.session_id), what="request")
        wait_for(lambda: env.status(s.session_id).last_answer_uuid == s.answer_uuids[-1],
                 what="status of the firing answer")
    finally:
        done.set()
        checker.join()
    assert violations == []


def test_a_truncated_file_is_read_again_without_firing_twice(env, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the first request")
    content = path.read_bytes()
    env.request(s.session_id).unlink()  # the Stop hook took it
    with open(path, "r+b") as handle:  # truncate in place (same inode), then rewrite
        handle.truncate(0)
    wait_for(lambda: any("truncated" in r.getMessage() for r in caplog.records),
             what="the truncation warning")
    append(path, content)
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == len(content),
             what="the rewritten file read")
    assert not env.has_request(s.session_id), "the same answer fired twice"
    assert len(env.detections(s.session_id)) == 1
    append(path, s.loop(3))  # a new loop in the rewritten file does fire
    wait_for(lambda: env.has_request(s.session_id), what="a request for the new loop")
    assert len(env.logged(2, s.session_id)) == 2


def test_a_file_rewritten_in_place_to_a_larger_size_is_noticed(env, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=1)
    wait_for(lambda: env.status(s.session_id), what="status")
    other = Lines(s.session_id)
    with open(path, "r+b") as handle:  # same inode, new content, never shorter
        handle.write(data(other.goal_loop(3)))
    wait_for(lambda: env.has_request(s.session_id), what="the new content's loop")
    assert any("truncated" in r.getMessage() for r in caplog.records)


def test_delete_and_recreate(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the first request")
    env.request(s.session_id).unlink()
    path.unlink()
    wait_for(lambda: env.status(s.session_id) is None, what="the status to go with the file")
    again = Lines(s.session_id)
    append(path, again.goal_loop(2))
    wait_for(lambda: (st := env.status(s.session_id)) and st.run_length == 2, what="re-read")
    assert not env.has_request(s.session_id)
    append(path, again.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="a request for the new file")
    assert [r["answer_uuid"] for r in env.logged(2, s.session_id)] == [
        s.answer_uuids[-1], again.answer_uuids[-1]]


def test_a_replaced_file_with_the_same_answers_does_not_fire_again(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the first request")
    env.request(s.session_id).unlink()
    copy = path.with_name("copy.tmp")
    shutil.copyfile(path, copy)
    replaced_at = time.time()
    os.replace(copy, path)  # a new inode with the same lines
    # The old file's status says the same offset and answers: the replacement's is the one
    # that saw the last answer after the replace.
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size
             and st.extra["answers_seen"] == 5
             and st.extra["last_answer_seen_at"] > replaced_at, what="the replacement read")
    assert not env.has_request(s.session_id), "the same answer firing twice"
    assert len(env.detections(s.session_id)) == 1


def test_a_renamed_transcript_is_not_read_as_new(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=2)
    wait_for(lambda: env.status(s.session_id), what="status")
    moved = Lines()
    target = path.with_name(f"{moved.session_id}.jsonl")
    os.rename(path, target)
    wait_for(lambda: env.status(s.session_id) is None, what="the old name forgotten")
    wait_for(lambda: (st := env.status(moved.session_id)) and st.run_length == 2,
             what="the new name followed from its tail")
    assert not env.has_request(moved.session_id)


def test_a_renamed_transcript_never_fires_again_on_what_fired(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size,
             what="status")
    moved = Lines(s.session_id)  # the lines go on with the old id inside; the name is new
    new_id = "0123abcd-0000-4000-8000-000000000001"
    target = path.with_name(f"{new_id}.jsonl")
    os.rename(path, target)
    wait_for(lambda: env.status(s.session_id) is None, what="the old name forgotten")
    append(target, moved.loop(1))
    wait_for(lambda: (st := env.status(new_id)) and st.offset == target.stat().st_size,
             what="the new name followed")
    assert not env.has_request(new_id)
    assert env.status(new_id).run_length == 1


def test_a_new_file_reusing_a_deleted_files_inode_is_read_as_new(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    for _ in range(3):  # ext4 hands a freed inode out again at once
        s = Lines()
        path = loop_file(env, s, replies=1)
        wait_for(lambda s=s: env.status(s.session_id), what="status")
        path.unlink()
        t = Lines()
        loop_file(env, t, replies=3)
        wait_for(lambda t=t: env.has_request(t.session_id), what="the new file's request")


def test_a_new_project_folder_after_start(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines(cwd="/home/dev/brand/new-project")
    assert not (env.root / s.project).exists()
    loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="a request in the new folder")


def test_fifty_sessions_appended_concurrently(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    sessions = [Lines(cwd=f"/home/dev/p{i % 7}") for i in range(50)]

    def write(s: Lines) -> None:
        path = s.path_in(env.root)
        for line in s.goal_loop(3):
            append(path, [line])
            time.sleep(0.0005)  # kept: paces each writer, so the 50 writers interleave

    threads = [threading.Thread(target=write, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for s in sessions:
        wait_for(lambda s=s: env.has_request(s.session_id), timeout=10,
                 what=f"the request of {s.session_id}")
    records = env.logged(50)
    assert sorted(r["session_id"] for r in records) == sorted(s.session_id for s in sessions)
    assert {r["answer_uuid"] for r in records} == {s.answer_uuids[-1] for s in sessions}


def test_subagent_files_never_fire(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    main = Lines()
    main_path = main.path_in(env.root)
    append(main_path, main.prompt())
    nested = Lines(sidechain=True)
    flat = Lines(sidechain=False)  # even unmarked, a file named agent-* is not a session
    nested_path = main_path.with_suffix("") / "subagents" / f"agent-{nested.session_id}.jsonl"
    flat_path = main_path.with_name(f"agent-{flat.session_id}.jsonl")
    append(nested_path, nested.goal_loop(4))
    append(flat_path, flat.goal_loop(4))
    append(main_path, main.answer("Done.", tool=True))
    env.read_to_end(main.session_id, main_path)
    # A sentinel: a session begun after them. (The main file's answer is none: its event
    # may be merged with the main file's first one, queued before theirs.) The watcher
    # handles events in the order first queued: once this file is read, theirs were.
    later = Lines()
    later_path = later.path_in(env.root)
    append(later_path, later.prompt() + later.answer("Done.", tool=True))
    env.read_to_end(later.session_id, later_path)
    assert not any((env.state / "requests").glob("*.json")), "a request"
    assert env.detections() == []
    assert not (env.state / "status" / f"agent-{flat.session_id}.json").exists()


def test_garbage_lines_are_logged_and_nothing_else_is_lost(env, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=1)
    append(path, b'{"type":"user","message":{"role":\n')  # a cut line
    append(path, b"\xff\xfe not json at all \x00\n")
    append(path, b"[1, 2, 3]\n")
    append(path, s.loop(1))
    append(path, b"}}}}\n")
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the request despite garbage")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "broken line" in r.getMessage()]

    # Reported once the batch is read (the request may come first, within the batch).
    wait_for(lambda: sum(int(w.split("skipped ")[1].split()[0]) for w in warnings()) == 4,
             what="four broken lines reported")
    assert all(s.session_id[:8] in w for w in warnings())
    wait_for(lambda: (st := env.status(s.session_id)) and st.extra["broken_lines"] == 4,
             what="the status (written just after the request)")


def test_a_new_prompt_withdraws_the_pending_request(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    append(path, s.prompt("Never mind, do something else."))
    wait_for(lambda: not env.has_request(s.session_id), what="the request withdrawn")
    outcome = wait_for(lambda: env.records("outcome", session_id=s.session_id), what="outcome")
    assert outcome[0]["outcome"] == "superseded"
    assert wait_for(lambda: not env.status(s.session_id).pending_request, what="status")


def test_outcome_cleared_and_stopped_are_logged_and_the_final_one_shown(env, start_watcher,
                                                                        caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    append(path, [s.summary(prevented=True)])
    append(path, s.cleared())
    outcomes = wait_for(lambda: len(r := env.records("outcome", session_id=s.session_id)) == 2
                        and r, what="two outcomes")
    assert [o["outcome"] for o in outcomes] == ["stopped", "cleared"]
    assert all(o["answer_uuid"] == s.answer_uuids[-1] for o in outcomes)

    def shown() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.endswith("events")]

    # Outcome lines are shown at the watcher's next tick, after the detection log is read;
    # the turn stopped is on the way to the clear: one line says what became of the loop.
    wait_for(lambda: any(line.startswith("CLEARED") and "goal removed" in line
                         for line in shown()), what="the CLEARED line")
    assert [line.split()[0] for line in shown() if s.session_id[:8] in line] == [
        "LOOP", "CLEARED"]


def test_outcome_after_the_timeout_says_the_loop_went_on(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher(outcome_timeout=0.5)
    s = Lines()
    path = loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    append(path, s.loop(2))
    (outcome,) = wait_for(lambda: env.records("outcome", session_id=s.session_id), 5, "outcome")
    assert outcome["outcome"] == "continued" and "2 more" in outcome["detail"]
    wait_for(lambda: any(r.getMessage().startswith("GOING ON") for r in caplog.records
                         if r.name.endswith("events")), what="the GOING ON line")


def test_outcome_after_the_timeout_with_nothing_happening(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher(outcome_timeout=0.3)
    s = Lines()
    loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    (outcome,) = wait_for(lambda: env.records("outcome", session_id=s.session_id), 5, "outcome")
    assert outcome["outcome"] == "none"


def test_hook_outcomes_in_the_log_are_shown(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    journal.append(env.state, journal.OutcomeRecord(session_id="old", outcome="cleared",
                                                    source="hook"))  # before start-up: not shown
    start_watcher()
    journal.append(env.state, journal.decode({"event": "outcome", "session_id": "b4119b1c-7ad2",
                               "project": "-home-dev-tui-proj", "outcome": "cleared",
                               "detail": "Goal cleared: all tests pass", "source": "hook"}))

    def shown() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.endswith("events")]

    line = wait_for(lambda: [x for x in shown() if "b4119b1c" in x], what="the hook's outcome")
    assert line[0].startswith("CLEARED") and '("all tests pass") (hook)' in line[0]
    assert not [x for x in shown() if " old" in x]


def test_a_loop_in_a_file_that_appears_with_old_history_does_not_fire(env, start_watcher):
    env.root.mkdir(parents=True)
    start_watcher()
    old = Lines(age=3600)  # a copied / forked history, an hour old
    path = old.path_in(env.root)
    path.parent.mkdir(parents=True)
    temp = path.with_name("incoming.tmp")
    temp.write_bytes(data(old.goal_loop(4)))
    os.replace(temp, path)
    wait_for(lambda: (st := env.status(old.session_id)) and st.offset == path.stat().st_size,
             what="the file read")
    assert not env.has_request(old.session_id)
    old.age = 0
    append(path, old.loop(3))  # the loop going on now fires
    wait_for(lambda: env.has_request(old.session_id), what="the request")


def test_root_missing_at_start(env, start_watcher):
    assert not env.root.exists()
    runner = start_watcher(reconcile_interval=0.2)
    assert runner.watcher.sessions.tracked == {}
    s = Lines()
    loop_file(env, s, replies=3)  # creates the root, the folder and the file at once
    wait_for(lambda: env.has_request(s.session_id), what="the request once the root exists")
    t = Lines()
    loop_file(env, t, replies=3)  # and it is watched natively from then on
    wait_for(lambda: env.has_request(t.session_id), what="the second request")
    assert not runner.watcher.polling


def test_root_deleted_and_created_again(env, start_watcher):
    env.root.mkdir(parents=True)
    runner = start_watcher(reconcile_interval=0.2)
    s = Lines()
    loop_file(env, s, replies=1)
    wait_for(lambda: env.status(s.session_id), what="status")
    shutil.rmtree(env.root)
    wait_for(lambda: not runner.watcher.sessions.tracked, what="the sessions dropped")
    t = Lines()
    loop_file(env, t, replies=3)
    wait_for(lambda: env.has_request(t.session_id), what="the request under the new root")


def test_polling_mode_finds_loops_without_events(env, start_watcher):
    env.root.mkdir(parents=True)
    runner = start_watcher(poll=True, reconcile_interval=0.1)
    assert runner.watcher.polling and runner.watcher._observer is None
    s = Lines()
    loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request by polling")


def test_falls_back_to_polling_when_the_observer_cannot_start(env, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)

    def refuse():
        raise OSError(28, "inotify watch limit reached")

    runner = start_watcher(observer_factory=refuse, reconcile_interval=0.1)
    assert runner.watcher.polling
    assert any("polling" in r.getMessage() and "inotify watch limit" in r.getMessage()
               for r in caplog.records)
    s = Lines()
    loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request by polling")


def test_lost_events_cost_latency_not_detections(env, start_watcher, monkeypatch):
    env.root.mkdir(parents=True)
    runner = start_watcher(reconcile_interval=0.2)
    monkeypatch.setattr(runner.watcher.hints, "put", lambda *a, **k: None)  # drop all
    s = Lines()
    loop_file(env, s, replies=3)
    wait_for(lambda: env.has_request(s.session_id), what="the request from reconcile")


def test_unreadable_file_is_retried_and_reported_once(env, start_watcher, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher(reconcile_interval=0.1)
    s = Lines()
    path = loop_file(env, s, replies=1)
    wait_for(lambda: env.status(s.session_id), what="status")
    real = follower_module.Follower.read_new
    denied = {"on": True, "tries": 0}

    def read_new(self, *, limit):
        if denied["on"]:
            denied["tries"] += 1
            raise PermissionError(13, "Permission denied")
        return real(self, limit=limit)

    monkeypatch.setattr(follower_module.Follower, "read_new", read_new)
    append(path, s.loop(2))
    wait_for(lambda: denied["tries"] >= 4, what="several passes retrying it")
    assert sum("Permission denied" in r.getMessage() for r in caplog.records) == 1
    denied["on"] = False
    wait_for(lambda: env.has_request(s.session_id), what="the request once readable")


def test_non_regular_files_are_ignored(env, start_watcher, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher(reconcile_interval=0.1)
    folder = env.root / "-home-dev-proj"
    folder.mkdir()
    os.mkfifo(folder / "0000fifo-0000.jsonl")
    (folder / "0000dir-0000.jsonl").mkdir()
    s = Lines()
    loop_file(env, s, replies=3)  # the watcher neither hangs nor stops
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    wait_for(lambda: any("fifo" in r.getMessage() and "not a regular file" in r.getMessage()
                         for r in caplog.records), what="the fifo reported")


def test_heartbeat_says_the_watcher_is_alive(env, start_watcher):
    from loop_killer.state.status import watcher_alive

    env.root.mkdir(parents=True)
    runner = start_watcher(heartbeat_interval=0.1)
    first = wait_for(lambda: watcher_alive(env.state), what="heartbeat")
    assert first.pid == os.getpid() and first.root == str(env.root) and not first.polling
    wait_for(lambda: watcher_alive(env.state).beat_at > first.beat_at, what="a second beat")
    runner.stop()
    assert watcher_alive(env.state) is None


@pytest.mark.parametrize("rule_replies", [6])
def test_idle_turns_fire_on_varied_replies(env, start_watcher, rule_replies):
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.prompt() + s.goal() + s.answer("Starting."))
    texts = ["alpha beta gamma", "delta epsilon zeta", "theta iota kappa",
             "lambda omicron sigma", "upsilon omega rho", "tau phi chi psi"]
    for text in texts[: rule_replies - 1]:
        append(path, s.reprompt() + s.answer(text))
    env.read_to_end(s.session_id, path)
    assert not env.has_request(s.session_id), "an early request"
    append(path, s.reprompt() + s.answer(texts[rule_replies - 1]))
    request = wait_for(lambda: peek_request(env.state, s.session_id), what="the request")
    assert request.rule == "IDLE_TURNS" and request.count == 6


@pytest.mark.parametrize("clear_first", [False, True], ids=["clear-after-log", "clear-before-log"])
def test_a_loop_the_hook_cut_alone_is_followed_to_its_clear(env, start_watcher, caplog,
                                                            clear_first):
    """The Stop hook fired before the watcher did (it saw reply N first): the watcher
    still follows that detection and shows the clear, whichever it reads first."""
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    start_watcher()
    s = Lines()
    path = loop_file(env, s, replies=2)
    wait_for(lambda: env.status(s.session_id) is not None, what="the session's status")
    hook_record = {"event": "detection", "session_id": s.session_id, "answer_uuid": "",
                   "prompt_uuid": "p", "rule": "SAME_REPLY_TURNS", "count": 3,
                   "source": "hook"}
    if clear_first:
        append(path, s.cleared())
        wait_for(lambda: (st := env.status(s.session_id)) and st.goal
                 and st.goal.get("met"), what="the clear read")
        journal.append(env.state, journal.decode(hook_record))
    else:
        journal.append(env.state, journal.decode(hook_record))
        wait_for(lambda: any("(hook)" in r.getMessage() for r in caplog.records),
                 what="the hook's detection picked up from the log")
        append(path, s.cleared())
    # Shown at the watcher's next tick, after the detection log is read...
    wait_for(lambda: any(r.getMessage().startswith("CLEARED") for r in caplog.records
                         if r.name.endswith("events")), what="the CLEARED line")
    # ... and not logged by the watcher: what became of a loop a Stop hook acted on is the
    # hook's (and its mod's) to log, once (logged before the line is held).
    assert env.records("outcome", session_id=s.session_id) == []
