"""``loop-killer status`` and ``loop-killer clear``, through the CLI dispatcher."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from loop_killer import cli
from loop_killer.state.inbox import peek_request
from transcripts import Lines, append

from .helpers import wait_for


@pytest.fixture(autouse=True)
def whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows read whole: piped, a report is 80 columns unless $COLUMNS says (the widths
    are tests/watch/test_fits.py's)."""
    monkeypatch.setenv("COLUMNS", "400")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_status_shows_the_watcher_and_every_live_run(env, start_watcher, capsys):
    busy = Lines(cwd="/home/dev/busy")
    append(busy.path_in(env.root), busy.goal_loop(2))
    looping = Lines(cwd="/home/dev/looping")
    append(looping.path_in(env.root), looping.goal_loop(3))
    quiet = Lines()
    append(quiet.path_in(env.root), quiet.prompt() + quiet.answer("Done.", tool=True))
    start_watcher(heartbeat_interval=0.1)
    append(looping.path_in(env.root), looping.loop(1))  # fires, and run restarts
    append(looping.path_in(env.root), looping.loop(1))
    wait_for(lambda: (st := env.status(looping.session_id)) and st.run_length == 1, what="run")

    code, out, _ = run(capsys, "status", "--json")
    assert code == 0
    data = orjson.loads(out)
    assert data["watcher"]["alive"] and data["watcher"]["root"] == str(env.root)
    by_id = {s["session_id"]: s for s in data["sessions"]}
    assert set(by_id) == {busy.session_id, looping.session_id}
    assert by_id[busy.session_id]["run_length"] == 2
    assert by_id[busy.session_id]["pending_request"] is None
    assert by_id[looping.session_id]["pending_request"]["rule"] == "SAME_REPLY_TURNS"
    assert by_id[looping.session_id]["project"] == looping.project

    code, out, _ = run(capsys, "status")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("watcher: running")
    assert lines[1].split() == ["PROJECT", "SESSION", "RUN", "SIMILAR", "LAST", "ACTIVITY",
                                "CLEAR", "REQUEST", "TOOL", "REPEATS"]
    row = next(line for line in lines if looping.session_id[:8] in line)
    assert "looping" in row and "pending (SAME_REPLY_TURNS" in row
    assert quiet.session_id[:8] not in out


def test_status_without_a_watcher(env, capsys):
    code, out, _ = run(capsys, "status")
    assert code == 1
    assert "not running" in out and "no session" in out
    code, out, _ = run(capsys, "status", "--json")
    assert code == 1 and orjson.loads(out)["watcher"] is None


def test_clear_writes_a_manual_request_for_a_unique_prefix(env, capsys):
    s = Lines(session_id="a26ba613-efc5-4fa5-919a-77fca5250a20")
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    other = Lines(session_id="b4119b1c-7ad2-403b-a747-e084284a2887")
    append(other.path_in(env.root), other.prompt())
    code, out, err = run(capsys, "clear", "a26b")
    assert code == 0, err
    assert s.session_id in out
    request = peek_request(env.state, s.session_id)
    assert request is not None
    assert (request.rule, request.source, request.answer_uuid) == ("MANUAL", "manual", "")
    assert request.transcript_path == str(path)
    assert peek_request(env.state, other.session_id) is None
    (record,) = env.detections(s.session_id)
    assert record["rule"] == "MANUAL" and record["source"] == "manual"


def test_clear_refuses_what_names_no_single_session(env, capsys):
    for session_id in ("a26ba613-efc5-4fa5-919a-77fca5250a20", "a26bffff-0000-4000-8000-0"):
        s = Lines(session_id=session_id)
        append(s.path_in(env.root), s.prompt())
    code, _, err = run(capsys, "clear", "a26b")
    assert code == 1 and "2 sessions" in err
    code, _, err = run(capsys, "clear", "ffff")
    assert code == 1 and "no session" in err
    assert not (env.state / "requests").exists() or not list((env.state / "requests").iterdir())


@pytest.mark.parametrize("bad", ["../etc/passwd", "a/b", "..", "-rf", "x" * 200, ""])
def test_clear_rejects_what_is_not_a_session_id(env, capsys, bad):
    code, _, err = run(capsys, "clear", "--", bad)
    assert code == 2 and "not a session id" in err


def test_a_manual_request_shows_in_the_watchers_terminal(env, start_watcher, capsys, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="loop_killer")
    s = Lines()
    append(s.path_in(env.root), s.goal_loop(1))
    start_watcher()
    code, _, _ = run(capsys, "clear", s.session_id)
    assert code == 0
    line = wait_for(lambda: [r.getMessage() for r in caplog.records
                             if "MANUAL" in r.getMessage()], what="the manual request shown")
    assert s.session_id[:8] in line[0] and "(manual)" in line[0]


def test_status_shows_a_stale_request_as_stale_not_pending(env, capsys):
    import time

    from loop_killer.state.inbox import MAX_REQUEST_AGE, ClearRequest, write_request

    stale, fresh = Lines(cwd="/home/dev/stale"), Lines(cwd="/home/dev/fresh")
    for s, age in ((stale, MAX_REQUEST_AGE + 300), (fresh, 60)):
        append(s.path_in(env.root), s.goal_loop(3))
        write_request(env.state, ClearRequest(
            session_id=s.session_id, rule="SAME_REPLY_TURNS", count=3, run_length=3,
            answer_uuid="", answer_digest="", transcript_path=str(s.path_in(env.root)),
            created_at=time.time() - age, source="watcher"))
    _, out, _ = run(capsys, "status", "--json")
    by_id = {s["session_id"]: s for s in orjson.loads(out)["sessions"]}
    assert by_id[stale.session_id]["pending_request"] is None
    assert by_id[stale.session_id]["stale_request"]["rule"] == "SAME_REPLY_TURNS"
    assert "older than" in by_id[stale.session_id]["stale_request"]["stale"]
    assert by_id[fresh.session_id]["pending_request"]["rule"] == "SAME_REPLY_TURNS"
    assert by_id[fresh.session_id]["stale_request"] is None
    _, out, _ = run(capsys, "status")
    row = next(line for line in out.splitlines() if stale.session_id[:8] in line)
    assert "stale (SAME_REPLY_TURNS, 35 min ago)" in row and "pending" not in row
    row = next(line for line in out.splitlines() if fresh.session_id[:8] in line)
    assert "pending (SAME_REPLY_TURNS, 60 s ago)" in row


def test_status_shows_live_tool_repeat_counts_next_to_re_prompt_runs(env, start_watcher,
                                                                    capsys):
    s = Lines(cwd="/home/dev/tools")
    path = s.path_in(env.root)
    append(path, s.prompt())
    start_watcher(heartbeat_interval=0.1)
    append(path, [line for _ in range(2) for line in s.answer("Trying again.", tool=True)])
    wait_for(lambda: (st := env.status(s.session_id)) and st.tool_repeats, what="the counts")
    _, out, _ = run(capsys, "status", "--json")
    (shown,) = orjson.loads(out)["sessions"]
    assert shown["tool_repeats"] == [{"call": "Bash: npm test", "count": 2}]
    _, out, _ = run(capsys, "status")
    row = next(line for line in out.splitlines() if s.session_id[:8] in line)
    assert row.rstrip().endswith("Bash: npm test x2")
    append(path, s.prompt("Let us try another way."))  # the person spoke: counts reset
    wait_for(lambda: (st := env.status(s.session_id)) and not st.tool_repeats,
             what="the counts reset")


def test_status_says_when_the_watcher_falls_behind(env, capsys):
    import os
    import time

    from loop_killer.state.status import WatcherHeartbeat, write_heartbeat

    now = time.time()
    write_heartbeat(env.state, WatcherHeartbeat(
        pid=os.getpid(), started_at=now - 60, beat_at=now, root=str(env.root),
        lag=7.5, waiting=1234))
    code, out, _ = run(capsys, "status")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("watcher: running")
    assert lines[1] == "  falling behind: file events waited up to 7.5 s (1234 waiting)"
    _, out, _ = run(capsys, "status", "--json")
    shown = orjson.loads(out)["watcher"]
    assert (shown["lag"], shown["waiting"]) == (7.5, 1234)
    assert shown["falling_behind"].startswith("falling behind")

    write_heartbeat(env.state, WatcherHeartbeat(
        pid=os.getpid(), started_at=now - 60, beat_at=now, root=str(env.root)))
    _, out, _ = run(capsys, "status")
    assert "falling behind" not in out


def test_status_shows_a_refused_call_as_refused_and_the_last_loops_with_their_outcome(
        env, capsys):
    import time

    from loop_killer.state import journal
    from loop_killer.state.status import SessionStatus, write_session_status

    now = time.time()
    api, billing = Lines(cwd="/home/dev/api"), Lines(cwd="/home/dev/billing")
    for s in (api, billing):
        append(s.path_in(env.root), s.goal_loop(1))
    call = "Bash: cat server.log"
    write_session_status(env.state, SessionStatus(
        session_id=api.session_id, transcript_path=str(api.path_in(env.root)),
        project=api.project, offset=0, run_length=0, chain_length=0, awaiting=None,
        last_answer_uuid="", last_answer_digest="", last_activity=now, updated_at=now,
        tool_repeats=[{"call": call, "count": 4}]))
    base = {"project": api.project, "session_id": api.session_id, "rule": "TOOL_REPEAT",
            "call": call, "source": "hook"}
    for record in (
            {"event": "detection", "session_id": billing.session_id,
             "project": billing.project, "rule": "SAME_REPLY_TURNS", "count": 3,
             "answer_uuid": "a1", "source": "watcher", "at": now - 300},
            {"event": "outcome", "session_id": billing.session_id, "project": billing.project,
             "rule": "SAME_REPLY_TURNS", "outcome": "clear_queued", "source": "hook",
             "at": now - 299},
            {"event": "outcome", "session_id": billing.session_id, "project": billing.project,
             "rule": "SAME_REPLY_TURNS", "outcome": "cleared", "source": "watcher",
             "at": now - 298},
            {"event": "outcome", "session_id": billing.session_id, "project": billing.project,
             "rule": "SAME_REPLY_TURNS", "outcome": "stopped", "source": "watcher",
             "at": now - 297},  # a passing outcome after the final one changes nothing
            {**base, "event": "detection", "count": 3, "tool_use_id": "t3", "at": now - 60},
            {**base, "event": "refusal", "count": 4, "at": now - 30},  # one per call
            # The watcher's word on an earlier warning of the session: no news here.
            {**base, "event": "outcome", "outcome": "none", "source": "watcher",
             "at": now - 25}):
        journal.append(env.state, journal.decode(record))
    # The tool hooks' counts (the attempts refused: 2) and their mark: a call would be
    # refused (made at the 4th identical result).
    from loop_killer.state import session as store
    from loop_killer.state.config import Settings

    def refused(attempts: int) -> Path:
        """The tool hooks' counts after ``attempts`` refused attempts; their mark."""
        counts = Settings().tool_counter()
        command = {"command": "cat server.log"}
        for _ in range(4):
            counts.record("Bash", command, "no change", False)
        for _ in range(attempts):
            refusal = counts.refusal("Bash", command)
            assert refusal is not None
            counts.note_refusal(refusal)
        store.save(path, store.put(None, store.MAIN, counts), refusable=True)
        return Path(store.refusal_marker(path))

    path = store.state_path(env.state, api.session_id)
    marker = refused(2)
    os.utime(marker, (now - 40, now - 40))

    _, out, _ = run(capsys, "status", "--json")
    data = orjson.loads(out)
    (shown,) = data["sessions"]
    assert shown["refused"]["call"] == call and shown["refused"]["attempts"] == 2
    assert [(r["rule"], r["outcome"]) for r in data["recent"]] == [
        ("TOOL_REPEAT", "warned"), ("SAME_REPLY_TURNS", "cleared")]
    _, out, _ = run(capsys, "status")
    row = next(line for line in out.splitlines() if api.session_id[:8] in line
               and " ago " not in line)
    assert row.split()[2:4] == ["-", "-"]  # no re-prompt run: no 0 0
    assert row.rstrip().endswith("Bash: cat server.log x4, refused 2 times")
    recent = out.split("recent loops (newest first):\n", 1)[1].splitlines()
    assert recent[0].startswith("  60 s ago home-dev-api ")  # (HOME is not /home/dev)
    assert "the model was warned" in recent[0]
    assert recent[1].startswith("  5 min ago home-dev-billing ")
    assert recent[1].endswith("SAME_REPLY_TURNS (3 similar replies to re-prompts): loop "
                              "stopped, goal cleared")

    # The person spoke: the tool hooks drop their mark, and the refusal is over, though
    # the same call repeats again in the new turn (an audit found it still "refused").
    store.remove(path)
    write_session_status(env.state, SessionStatus(
        session_id=api.session_id, transcript_path=str(api.path_in(env.root)),
        project=api.project, offset=0, run_length=1, chain_length=1, awaiting=None,
        last_answer_uuid="", last_answer_digest="", last_activity=now, updated_at=now,
        tool_repeats=[{"call": call, "count": 2}]))
    _, out, _ = run(capsys, "status", "--json")
    assert orjson.loads(out)["sessions"][0]["refused"] is None
    # Refused again later: only the refusals since the new mark are counted.
    refused(1)
    journal.append(env.state, journal.decode({**base, "event": "refusal", "count": 4}))
    _, out, _ = run(capsys, "status", "--json")
    assert orjson.loads(out)["sessions"][0]["refused"]["attempts"] == 1


def test_status_tells_an_oscillating_edit_as_what_it_saw() -> None:
    from loop_killer.cli.commands import recent_loops
    from loop_killer.state import journal

    (loop,) = recent_loops([journal.ToolRecord(
        session_id="s1", project="p", rule="EDIT_OSCILLATION", call="Edit: m.py", count=2,
        source="hook", at=1.0)], limit=5)
    assert (loop["rule"], loop["outcome"]) == ("EDIT_OSCILLATION", "warned")
    assert loop["what"] == "Edit: m.py: edited back to an earlier version 2 times"


def test_status_never_says_the_model_was_warned_when_only_the_watcher_saw_the_loop() -> None:
    """A tool loop in the watcher's record alone: no hook ran for those calls (the plugin
    not installed, or Claude Code rejected their input before any hook), so nobody
    warned the model."""
    from loop_killer.cli.commands import _recent_line, recent_loops
    from loop_killer.state import journal

    (loop,) = recent_loops([journal.ToolRecord(
        session_id="s1", project="p", rule="TOOL_REPEAT", call="Read: a.py", count=3,
        source="watcher", at=1.0)], limit=5)
    assert loop["outcome"] == "seen"
    line = _recent_line(loop, 61.0, None)
    assert "seen by the watcher alone: no hook warned the model" in line
    assert "the model was warned" not in line


def test_status_says_once_that_it_cannot_read_the_state_folder(env, capsys, monkeypatch):
    """Another user's state folder (0700): neither "not running" nor "no session" can be
    told from it. (Root reads any folder: the permission check is what is replaced.)"""
    env.state.mkdir(parents=True, exist_ok=True)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == env.state
                        else real_access(path, mode, **kw))
    code, out, err = run(capsys, "status")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"loop-killer status: cannot read the state folder {env.state} (permission denied): "
        "run it as the user who runs Claude Code"]
