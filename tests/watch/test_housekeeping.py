"""A watcher left running for weeks: old requests expire, statuses of deleted transcripts
go, and memory does not grow with the sessions and detections seen."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import random
import time
import tracemalloc

import orjson
from loop_killer.engine.rules import IDLE_TURNS
from loop_killer.state import records
from loop_killer.state.inbox import MAX_REQUEST_AGE, ClearRequest, peek_request, write_request
from loop_killer.state.status import read_session_status, session_status_path
from loop_killer.watch.sessions import IDLE_AFTER, Sessions
from transcripts import Lines, append

from .helpers import wait_for

QUICK = {"reconcile_interval": 0.05, "housekeeping_interval": 0.05}


def request_for(session_id: str, *, age: float, transcript: str = "", rule: str = "SAME_REPLY_TURNS"
                ) -> ClearRequest:
    return ClearRequest(session_id=session_id, rule=rule, count=3, run_length=3,
                        answer_uuid="", answer_digest="", transcript_path=transcript,
                        created_at=time.time() - age, source="watcher")


def read_all(env, lines: Lines):
    path = lines.path_in(env.root)
    return wait_for(lambda: (st := env.status(lines.session_id)) and st.offset == path.stat(
        ).st_size and st, what=f"{lines.session_id[:8]} read to its end")


# -- 1. clear requests nobody takes -------------------------------------------------------


def test_requests_older_than_the_limit_are_removed_at_start_up_and_while_running(
        env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    looping = Lines()
    path = looping.path_in(env.root)
    append(path, looping.goal_loop(2))
    first = start_watcher()
    append(path, looping.loop(1))
    wait_for(lambda: env.has_request(looping.session_id), what="the request")
    wait_for(lambda: env.status(looping.session_id).pending_request, what="status says so")
    first.stop()
    # Nobody took it, and the session never stopped again: make it 31 minutes old.
    old = dataclasses.replace(peek_request(env.state, looping.session_id),
                              created_at=time.time() - MAX_REQUEST_AGE - 60)
    write_request(env.state, old)
    gone_session = "0000dead-0000-4000-8000-000000000001"  # no transcript at all
    write_request(env.state, request_for(gone_session, age=MAX_REQUEST_AGE + 5))
    fresh = "0000f5e5-0000-4000-8000-000000000002"
    write_request(env.state, request_for(fresh, age=MAX_REQUEST_AGE - 120, rule="MANUAL"))
    garbage = env.state / "requests" / "0000bad0-0000-4000-8000-000000000003.json"
    garbage.write_bytes(b"not json")
    os.utime(garbage, (time.time() - MAX_REQUEST_AGE - 5,) * 2)
    young_garbage = env.state / "requests" / "0000bad1-0000-4000-8000-000000000004.json"
    young_garbage.write_bytes(b"not json")
    other = env.state / "requests" / "README"  # not a request: never touched
    other.write_text("hands off")
    os.utime(other, (time.time() - 10 * MAX_REQUEST_AGE,) * 2)

    runner = start_watcher(**QUICK)
    assert not env.has_request(looping.session_id) and not env.has_request(gone_session)
    assert not garbage.exists()
    assert env.has_request(fresh) and young_garbage.exists() and other.exists()
    shown = [r.getMessage() for r in caplog.records if r.getMessage().startswith("EXPIRED")]
    assert len(shown) == 2
    assert any(looping.session_id[:8] in line and "SAME_REPLY_TURNS" in line
               and "never taken" in line for line in shown)
    assert sum("removed the clear request" in r.getMessage() and "not a valid request"
               in r.getMessage() for r in caplog.records) == 1
    wait_for(lambda: not env.status(looping.session_id).pending_request,
             what="the status no longer says a request is pending")

    # While running: one that turns stale later goes at the next housekeeping round.
    later = "0000a9ed-0000-4000-8000-000000000005"
    write_request(env.state, request_for(later, age=MAX_REQUEST_AGE + 1))
    wait_for(lambda: not env.has_request(later), what="the request expired while running")
    assert env.has_request(fresh)
    assert runner.watcher.sessions.tracked  # the watcher is still at work
    append(path, looping.loop(3))
    wait_for(lambda: env.has_request(looping.session_id), what="a new loop fires as usual")


def test_a_dormant_sessions_status_stops_saying_its_request_is_pending(env, start_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    runner = start_watcher(idle_after=0.3, outcome_timeout=0.05, **QUICK)
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    wait_for(lambda: env.status(s.session_id).pending_request, what="status: pending")
    tracked = runner.watcher.sessions.tracked[str(path)]
    wait_for(lambda: tracked.detector is None, what="the session to go dormant")
    assert env.has_request(s.session_id)  # nobody took it
    request = dataclasses.replace(peek_request(env.state, s.session_id),
                                  created_at=time.time() - MAX_REQUEST_AGE - 1)
    write_request(env.state, request)
    wait_for(lambda: not env.has_request(s.session_id), what="the request expired")
    wait_for(lambda: not env.status(s.session_id).pending_request, what="status: not pending")
    assert tracked.detector is None  # still dormant: its status was mended on disk


# -- 2. statuses of transcripts deleted while no watcher ran ------------------------------


def test_statuses_of_deleted_transcripts_are_removed_at_start_up_and_while_running(
        env, start_watcher, tmp_path):
    deleted, kept = Lines(), Lines()
    for s in (deleted, kept):
        append(s.path_in(env.root), s.goal_loop(2))
    first = start_watcher()
    for s in (deleted, kept):
        read_all(env, s)
    first.stop()
    deleted.path_in(env.root).unlink()  # while no watcher ran
    status_dir = env.state / "status"
    template = orjson.loads(session_status_path(env.state, kept.session_id).read_bytes())
    elsewhere = tmp_path / "elsewhere.jsonl"  # outside the root, but it exists
    elsewhere.write_bytes(b"")
    outside = "0000e15e-0000-4000-8000-000000000001"
    (status_dir / f"{outside}.json").write_bytes(orjson.dumps(
        {**template, "session_id": outside, "transcript_path": str(elsewhere)}))
    broken = status_dir / "0000b0b0-0000-4000-8000-000000000002.json"
    broken.write_bytes(b"{ not ours")
    notes = status_dir / "notes.txt"
    notes.write_text("hands off")
    mismatch = "0000aaaa-0000-4000-8000-000000000003"  # says it is another session's
    (status_dir / f"{mismatch}.json").write_bytes(orjson.dumps(
        {**template, "session_id": kept.session_id, "transcript_path": "/nonexistent"}))

    start_watcher(**QUICK)
    assert read_session_status(env.state, deleted.session_id) is None
    assert not session_status_path(env.state, deleted.session_id).exists()
    assert env.status(kept.session_id) is not None
    assert env.status(outside) is not None and broken.exists() and notes.exists()
    assert (status_dir / f"{mismatch}.json").exists()

    # A status whose transcript is gone, found while running, goes too.
    ghost = "0000c0c0-0000-4000-8000-000000000004"
    (status_dir / f"{ghost}.json").write_bytes(orjson.dumps(
        {**template, "session_id": ghost,
         "transcript_path": str(env.root / "-home-dev-proj" / f"{ghost}.jsonl")}))
    wait_for(lambda: not (status_dir / f"{ghost}.json").exists(),
             what="the ghost's status removed")
    assert env.status(kept.session_id) is not None and env.status(outside) is not None


def test_a_transcript_deleted_while_followed_leaves_no_status_nor_records(env, monkeypatch):
    """Deleted while the watcher follows it: its status and detection records go at the
    first housekeeping after the rename window (the file might have turned up under
    another name, taking its records along); renamed, its records move with it."""
    from loop_killer.watch import sessions as sessions_module
    from loop_killer.watch.follower import RENAME_WINDOW

    sessions = Sessions(env.state, outcome_timeout=0.0)
    deleted, renamed = Lines(), Lines()
    for s in (deleted, renamed):
        append(s.path_in(env.root), s.goal_loop(3))  # fires once: one record each
        sessions.sync(str(s.path_in(env.root)))
        assert len(records.recorded_keys(env.state, s.session_id)) == 1
    deleted.path_in(env.root).unlink()
    sessions.sync(str(deleted.path_in(env.root)))
    sessions.housekeep()
    assert records.recorded_keys(env.state, deleted.session_id)  # it may turn up renamed

    new_path = renamed.path_in(env.root).with_name("0000feed-0000-4000-8000-000000000001.jsonl")
    renamed.path_in(env.root).rename(new_path)
    sessions.sync(str(renamed.path_in(env.root)))
    sessions.sync(str(new_path))
    assert records.recorded_keys(env.state, "0000feed-0000-4000-8000-000000000001")
    assert not records.recorded_keys(env.state, renamed.session_id)

    later = time.monotonic() + RENAME_WINDOW + 1
    monkeypatch.setattr(sessions_module.time, "monotonic", lambda: later)
    sessions.housekeep()
    assert not session_status_path(env.state, deleted.session_id).exists()
    assert not (env.state / "fired" / deleted.session_id).exists()


def test_statuses_are_left_alone_while_the_root_is_missing(env, start_watcher):
    s = Lines()
    append(s.path_in(env.root), s.goal_loop(2))
    first = start_watcher()
    read_all(env, s)
    first.stop()
    other_root = env.root.with_name("projects-moved")
    env.root.rename(other_root)  # an unmounted disk, say
    runner = start_watcher(**QUICK)
    rounds = runner.watcher._next_housekeeping
    wait_for(lambda: runner.watcher._next_housekeeping > rounds, what="a housekeeping round")
    assert session_status_path(env.state, s.session_id).exists()


def test_a_root_gone_while_watching_keeps_statuses_and_records_and_nothing_fires_twice(
        env, start_watcher, monkeypatch):
    """An audit found the projects folder going away (for longer than the rename window)
    made the running watcher drop every status, forget every detection record, and fire
    the same stopped loop again when the folder came back."""
    from loop_killer.watch import follower

    monkeypatch.setattr(follower, "RENAME_WINDOW", 0.0)
    env.root.mkdir(parents=True)
    runner = start_watcher(**QUICK)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the loop's request")
    env.request(s.session_id).unlink()  # taken by its Stop hook
    read_all(env, s)
    other_root = env.root.with_name("projects-moved")
    env.root.rename(other_root)  # an unmounted disk, say
    rounds = runner.watcher._next_housekeeping
    wait_for(lambda: runner.watcher._next_housekeeping > rounds + 0.2,
             what="housekeeping rounds while it is gone")
    assert session_status_path(env.state, s.session_id).exists()
    assert records.recorded_keys(env.state, s.session_id)
    other_root.rename(env.root)
    read_all(env, s)
    assert not env.has_request(s.session_id)
    assert len(env.detections(s.session_id)) == 1


def test_a_transcript_back_under_its_own_name_keeps_its_records(env):
    """Moved away and back (same file, same name): taken for a rename to itself, it lost
    its records (an audit), so its stopped loop would fire again."""
    from loop_killer.watch.follower import Vanished

    sessions = Sessions(env.state, outcome_timeout=0.0)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    sessions.sync(str(path))
    assert len(records.recorded_keys(env.state, s.session_id)) == 1
    away = path.with_name("elsewhere.tmp")
    path.rename(away)
    sessions.sync(str(path))  # gone
    away.rename(path)
    sessions.sync(str(path))  # back: the same file under the same name
    assert isinstance(sessions.gone, Vanished)
    assert len(records.recorded_keys(env.state, s.session_id)) == 1
    append(path, s.loop(1))
    sessions.sync(str(path))
    assert len(env.detections(s.session_id)) == 1  # nothing fired twice


# -- 3. memory over weeks -----------------------------------------------------------------


def retained_texts(sessions: Sessions) -> tuple[int, int]:
    """(texts, characters) of answers the sessions' detectors hold."""
    texts = chars = 0
    for tracked in sessions.tracked.values():
        detector = tracked.detector
        if tracked.dormant is not None and tracked.dormant.last_answer is not None:
            assert tracked.dormant.last_answer.text == ""
        if detector is None:
            continue
        held = [a.text for a in detector.run]
        if detector.last_answer is not None:
            held.append(detector.last_answer.text)
        texts += len(held)
        chars += sum(map(len, held))
    return texts, chars


def prose(rng: random.Random, words: int) -> str:
    return " ".join(f"w{rng.getrandbits(40):x}" for _ in range(words))


def test_memory_stays_bounded_as_sessions_go_idle(env):
    """Hundreds of sessions, each with a loop that fired and long answers, then idle: the
    clock moves past IDLE_AFTER and only offsets and identities are left."""
    rng = random.Random(7)
    sessions = Sessions(env.state, outcome_timeout=0.0)
    done, running = [], []
    tracemalloc.start()
    try:
        for i in range(160):
            s = Lines(cwd=f"/home/dev/p{i % 9}")
            text = prose(rng, 300)
            lines = s.goal_loop(3, text) + s.prompt("thanks, now the docs") + s.answer(
                "Writing the docs.", tool=True) + s.answer(prose(rng, 600))
            if i % 16 == 0:  # a few stay in a run: those keep their detector
                lines = s.goal_loop(IDLE_TURNS - 1, text) + s.reprompt() + s.answer(
                    prose(rng, 300))
                running.append(s)
            else:
                done.append(s)
            append(s.path_in(env.root), lines)
            sessions.sync(str(s.path_in(env.root)))
        sessions.respond.tick(time.monotonic() + 1)  # every outcome reported
        texts_before, chars_before = retained_texts(sessions)
        assert texts_before >= len(done) and chars_before > len(done) * 600 * 12
        gc.collect()
        memory_before = tracemalloc.get_traced_memory()[0]

        sessions.housekeep(time.time() + IDLE_AFTER + 1)  # an hour later

        gc.collect()
        freed = memory_before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    texts_after, chars_after = retained_texts(sessions)
    assert len(sessions.tracked) == len(done) + len(running)  # all still followed
    awake = [t for t in sessions.tracked.values() if t.detector is not None]
    assert {t.session_id for t in awake} == {s.session_id for s in running}
    assert texts_after <= len(running) * (IDLE_TURNS + 1)
    assert freed > 0.8 * (chars_before - chars_after)  # nothing else held on to them
    for tracked in sessions.tracked.values():
        assert tracked.pending_bytes == 0 and sessions.respond.pending_of(tracked) is None
    # What fired is on disk, one record per detection, not in memory.
    assert all(len(records.recorded_keys(env.state, s.session_id)) == 1 for s in done)

    # A dormant session that grows again is rebuilt from its tail and fires as before.
    s = done[0]
    path = s.path_in(env.root)
    append(path, s.goal() + s.answer("Starting.") + s.loop(3))
    sessions.sync(str(path))
    assert sessions.tracked[str(path)].detector is not None
    request = peek_request(env.state, s.session_id)
    assert request is not None and request.answer_uuid == s.answer_uuids[-1]


def test_what_fired_is_on_disk_and_a_detector_holds_only_what_its_tail_holds(env):
    sessions = Sessions(env.state, outcome_timeout=0.0)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3 * 100))  # fires 100 times
    sessions.sync(str(path))
    tracked = sessions.tracked[str(path)]
    assert len(records.recorded_keys(env.state, s.session_id)) == 100
    assert tracked.detector is not None and len(tracked.detector._fired) == 0
    sessions.respond.tick(time.monotonic() + 1)
    sessions.housekeep(time.time() + IDLE_AFTER + 1)  # idle: let go
    assert tracked.detector is None
    append(path, s.loop(1))  # counting restarts after the last answer that fired
    sessions.sync(str(path))
    detector = tracked.detector
    assert detector is not None and detector.run_length == 1
    assert len(detector._fired) <= 3  # the keys its tail holds, not all 100
    append(path, s.loop(2))
    sessions.sync(str(path))
    assert peek_request(env.state, s.session_id).answer_uuid == s.answer_uuids[-1]
    assert len(env.detections(s.session_id)) == 101


def test_an_idle_session_goes_dormant_and_resumes_where_it_was(env, start_watcher):
    env.root.mkdir(parents=True)
    runner = start_watcher(idle_after=0.3, outcome_timeout=0.05, **QUICK)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    env.request(s.session_id).unlink()  # the Stop hook took it
    before = read_all(env, s)
    tracked = runner.watcher.sessions.tracked[str(path)]
    wait_for(lambda: tracked.detector is None, what="the session to go dormant")
    assert env.status(s.session_id) == before  # going dormant changes nothing on disk
    append(path, [s.api_request()])  # a line that changes nothing for the run
    after = wait_for(lambda: (st := env.status(s.session_id)) and st.offset > before.offset
                     and st, what="the line read")
    same = ("run_length", "chain_length", "awaiting", "last_answer_uuid",
            "last_answer_digest", "goal")
    assert [getattr(after, f) for f in same] == [getattr(before, f) for f in same]
    assert after.extra["answers_seen"] == before.extra["answers_seen"]
    # The loop goes on: counting restarts after the answer that fired (the detection
    # log says so to the rebuilt detector), whether it is dormant again or not.
    append(path, s.loop(1))
    st = read_all(env, s)
    assert st.run_length == 1 and not env.has_request(s.session_id)
    append(path, s.loop(2))
    request = wait_for(lambda: peek_request(env.state, s.session_id), what="the new request")
    assert request.answer_uuid == s.answer_uuids[-1]
    assert [r["answer_uuid"] for r in env.logged(2, s.session_id)] == [
        s.answer_uuids[-4], s.answer_uuids[-1]]


# -- 4. never through a linked folder ------------------------------------------------------


def test_housekeeping_never_reads_or_removes_through_a_linked_folder(env, tmp_path):
    from loop_killer.state.status import SessionStatus, write_session_status
    from loop_killer.watch.housekeeping import Housekeeper
    from loop_killer.watch.watcher import _pending_requests

    # Another folder, laid out like a state folder, that links in the state folder reach.
    elsewhere = tmp_path / "elsewhere"
    expired = "0000dead-0000-4000-8000-000000000001"
    write_request(elsewhere, request_for(expired, age=MAX_REQUEST_AGE + 60))
    gone = "0000dead-0000-4000-8000-000000000002"
    write_session_status(elsewhere, SessionStatus(
        session_id=gone, transcript_path=str(tmp_path / "gone.jsonl"), project="p",
        offset=0, run_length=1, chain_length=1, awaiting=None, last_answer_uuid="",
        last_answer_digest="", last_activity=0.0, updated_at=0.0))
    outside = sorted(p for p in elsewhere.rglob("*") if p.is_file())
    env.state.mkdir(parents=True)
    (env.state / "requests").symlink_to(elsewhere / "requests")
    (env.state / "status").symlink_to(elsewhere / "status")

    keeper = Housekeeper(env.state, home=None)
    assert keeper.expire_requests({}, time.time()) == set()
    assert keeper.sweep_statuses(set()) == 0
    assert _pending_requests(env.state) == set()
    assert sorted(p for p in elsewhere.rglob("*") if p.is_file()) == outside


def test_a_watcher_started_mid_loop_counts_a_raised_threshold_from_the_tail(env):
    """The catch-up reads the run back to the configured threshold's reach, not the
    default's: with IDLE_TURNS at 10, a loop 9 replies long when the watcher starts fires
    at its 10th reply (an audit found it read 7 re-prompts back, and never fired)."""
    from loop_killer.engine.rules import Thresholds
    from loop_killer.state.config import Settings

    settings = Settings(thresholds=Thresholds(idle_turns=10))
    s = Lines()
    path = s.path_in(env.root)
    texts = ["alpha beta gamma", "delta epsilon zeta", "theta iota kappa", "lambda mu nu",
             "omicron sigma tau", "upsilon phi chi", "golf india juliet", "kilo lima mike",
             "november oscar papa", "quebec romeo sierra"]
    append(path, s.prompt() + s.goal() + [line for text in texts[:9]
                                          for line in s.reprompt() + s.answer(text)])
    sessions = Sessions(env.state, outcome_timeout=0.0, settings=settings)
    sessions.catch_up(str(path), pending_requests=set())  # as at the watcher's start
    assert not env.has_request(s.session_id)
    append(path, s.reprompt() + s.answer(texts[9]))
    sessions.sync(str(path))
    request = peek_request(env.state, s.session_id)
    assert request is not None and request.rule == "IDLE_TURNS" and request.run_length == 10
