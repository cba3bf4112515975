"""What the watcher prints and notifies about each loop: one LOOP line and one outcome
line, in order, however many writers report it; notifications in sentences."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import orjson
from loop_killer.hooks.mod_outcomes import write_mod_plan_record
from loop_killer.state import journal, records
from loop_killer.watch.narrate import Narrator, Notice
from transcripts import Lines, append

from .helpers import wait_for


def _lines_of(caplog, session_id: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.endswith("events") and session_id[:8] in r.getMessage()]


def _log_read(runner, env) -> bool:
    """The watcher has read the detection log to its end."""
    path = journal.journal_path(env.state)
    return path.exists() and runner.watcher._journal.offset == path.stat().st_size


def _mod_cleared(env, s: Lines, path: Path, answer_uuid: str) -> None:
    """What the Stop hook and the mod do for a stopped loop on 2.1.287+: the hook logs
    its queued clear and leaves a plan; the turn stops, the mod runs /goal clear (the
    goal's clear in the transcript) and reports it in its outcome file."""
    plan_id = f"{s.session_id}.1"
    outcome_path = write_mod_plan_record(str(env.state), plan_id, {
        "id": plan_id, "session_id": s.session_id, "answer_uuid": answer_uuid,
        "rule": "SAME_REPLY_TURNS", "project": s.project, "transcript_path": str(path),
        "offset": path.stat().st_size})
    journal.append(env.state, journal.decode({
        "event": "outcome", "session_id": s.session_id, "answer_uuid": answer_uuid,
        "rule": "SAME_REPLY_TURNS", "project": s.project, "transcript_path": str(path),
        "outcome": "clear_queued", "hands": "mod", "source": "hook",
        "detail": "loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop "
                  "stopped; /goal clear queued."}))
    append(path, [s.summary(prevented=True)])
    append(path, s.cleared())
    Path(outcome_path).write_text(json.dumps({"v": 1, "id": plan_id, "status": "cleared",
                                              "output": "Goal cleared: tests pass"}))


def test_a_loop_stopped_and_cleared_by_the_mod_is_told_once(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    notices: list[Notice] = []
    runner = start_watcher(notify=notices.append)
    s = Lines(cwd="/home/dev/billing")
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    _mod_cleared(env, s, path, s.answer_uuids[-1])
    # The mod's report is logged (by the watcher's own sweep, not the next Stop hook's)...
    wait_for(lambda: env.records("outcome", session_id=s.session_id, hands="mod",
                                 outcome="cleared"), what="the mod's report logged")
    wait_for(lambda: _log_read(runner, env), what="the log read to its end")
    runner.stop()
    # ... and the person reads one LOOP line and one outcome line, in that order.
    assert [line.split()[0] for line in _lines_of(caplog, s.session_id)] == ["LOOP", "CLEARED"]
    assert [n.text for n in notices] == [  # the project as lines name it
        "home-dev-billing: loop stopped, goal cleared (3 similar replies to re-prompts)"]
    assert notices[0].stop


def test_a_loop_the_hook_cut_first_is_told_once_too(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher()
    s = Lines(cwd="/home/dev/billing")
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    wait_for(lambda: env.status(s.session_id) is not None, what="the session's status")
    # The hook judged reply 3 before it was on disk: it knows the re-prompt, not the answer.
    third = s.loop(1)
    prompt_uuid = orjson.loads(third[0])["uuid"]
    assert records.first_to_record(env.state, s.session_id, prompt_uuid, source="hook",
                                   rule="SAME_REPLY_TURNS")
    journal.append(env.state, journal.decode({"event": "detection", "session_id": s.session_id,
                               "answer_uuid": "", "prompt_uuid": prompt_uuid,
                               "project": s.project, "rule": "SAME_REPLY_TURNS", "count": 3,
                               "source": "hook"}))
    wait_for(lambda: _lines_of(caplog, s.session_id), what="the hook's LOOP line")
    append(path, third)
    _mod_cleared(env, s, path, "")
    wait_for(lambda: env.records("outcome", session_id=s.session_id, hands="mod",
                                 outcome="cleared"), what="the mod's report logged")
    wait_for(lambda: _log_read(runner, env), what="the log read to its end")
    runner.stop()
    assert [line.split()[0] for line in _lines_of(caplog, s.session_id)] == ["LOOP", "CLEARED"]


def test_a_passing_outcome_is_said_when_nothing_final_follows():
    narrator = Narrator(settle=5)
    said = narrator.detection("s1", ["a1"], who="billing", rule="SAME_REPLY_TURNS", count=3,
                              line="LOOP billing", now=0)
    assert [x.line for x in said] == ["LOOP billing"] and said[0].notice is None
    assert narrator.outcome("s1", ["a1"], kind="stopped", line="STOPPED", source="watcher",
                            who="billing", now=1) == []
    assert narrator.due(5) == []
    (told,) = narrator.due(6)
    assert told.line == "STOPPED" and told.notice is not None
    assert told.notice.text == "billing: loop stopped (3 similar replies to re-prompts)"
    # One outcome line per loop: whatever comes later is in the detection log alone.
    for kind in ("stopped", "clear_failed", "cleared"):
        assert narrator.outcome("s1", ["a1"], kind=kind, line=kind, source="hook",
                                who="billing", now=7) == []
    # The same detection from another writer is the same loop; a new one is a new loop.
    assert narrator.detection("s1", ["a1"], who="billing", rule="SAME_REPLY_TURNS",
                              count=3, line="LOOP again", now=10) == []
    assert [x.line for x in narrator.detection("s1", ["a2"], who="billing",
                                               rule="IDLE_TURNS", count=5, line="LOOP 2",
                                               now=11)] == ["LOOP 2"]


def test_a_passing_outcome_is_said_when_the_watcher_stops():
    narrator = Narrator(settle=60)
    narrator.detection("s1", ["a1"], who="p", rule="SAME_REPLY_TURNS", count=3, line="L", now=0)
    narrator.outcome("s1", ["a1"], kind="clear_queued", line="QUEUED", source="hook",
                     who="p", now=1)
    assert [x.line for x in narrator.flush()] == ["QUEUED"]


def test_tool_repeats_notify_as_warnings_and_a_refusal_that_ends_the_turn_as_a_stop():
    from loop_killer.watch.narrate import tell

    narrator = Narrator()
    base = {"session_id": "s1", "project": "-home-dev-api", "source": "hook",
            "rule": "TOOL_REPEAT", "call": "Bash: npm test"}
    (warned,) = tell(narrator, journal.decode({**base, "event": "detection", "count": 3,
                                "tool_use_id": "t3"}), home="/home/dev", now=0)
    assert warned.line is not None and warned.line.startswith("LOOP")
    assert warned.notice is not None and not warned.notice.stop
    assert warned.notice.text == ("api: Bash: npm test gave the same result 3 times; the "
                                  "model was warned")
    (refused,) = tell(narrator, journal.decode({**base, "event": "refusal", "count": 4,
                                                "tool_use_id": "r0"}), home="/home/dev", now=1)
    assert refused.line is not None and refused.line.startswith("REFUSED")
    assert refused.notice is None
    # The ladder's stop (the 3rd refused attempt) is the warned loop's one outcome.
    stop = journal.decode({**base, "event": "outcome", "outcome": "stopped_no_goal",
                           "answer_uuid": "r2", "count": 3,
                           "detail": "loop-killer: TOOL_REPEAT (a refused call tried 3 more "
                                     "times): loop stopped; no goal was set."})
    (stopped,) = tell(narrator, stop, home="/home/dev", now=2)
    assert stopped.line == ("STOPPED   api  s1  TOOL_REPEAT: turn ended after 3 refused "
                            "attempts; no goal was set (hook)")
    assert stopped.notice is not None and stopped.notice.stop
    assert stopped.notice.text == ("api: loop stopped; no goal was set (Bash: npm test "
                                   "refused 3 times)")


def test_a_warned_only_tool_loop_says_so_and_a_later_stop_is_a_loop_of_its_own():
    from loop_killer.watch.narrate import tell

    narrator = Narrator()
    base = {"session_id": "s1", "project": "api", "rule": "TOOL_REPEAT",
            "call": "Bash: npm test"}
    (loop,) = tell(narrator, journal.decode({**base, "event": "detection", "count": 3,
                                             "tool_use_id": "t3", "source": "hook"}),
                   home=None, now=0)
    # The watcher's word, when no refusal followed within its outcome timeout.
    (warned,) = narrator.outcome("s1", ["t3"], kind="warned", line="WARNED api",
                                 rule="TOOL_REPEAT", source="watcher", who="api", now=60)
    assert warned.line == "WARNED api" and warned.notice is None  # warned at the LOOP line
    stop = journal.decode({**base, "event": "outcome", "outcome": "stopped_no_goal",
                           "answer_uuid": "r9", "count": 3, "source": "hook"})
    (stopped,) = tell(narrator, stop, home=None, now=300)
    assert stopped.line is not None and stopped.line.startswith("STOPPED")


def test_the_watchers_own_tool_repeat_line_is_told_from_the_log_and_notified(env):
    from loop_killer.watch.narrate import tell

    narrator = Narrator()
    record = {"event": "detection", "session_id": "s1", "project": "p", "source": "watcher",
              "rule": "TOOL_REPEAT", "call": "Bash: ls", "count": 3, "tool_use_id": "t"}
    (said,) = tell(narrator, journal.decode(record), home=None, now=0)
    assert said.line == ("LOOP      p  s1  TOOL_REPEAT: Bash: ls gave the same result 3 "
                         "times in a row")
    assert said.notice is not None and "Bash: ls gave the same result 3 times" in \
        said.notice.text


def test_no_late_outcome_reaches_the_terminal_after_the_final_one(env, start_watcher, caplog):
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher()
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    append(path, s.cleared())
    wait_for(lambda: any(x.startswith("CLEARED") for x in _lines_of(caplog, s.session_id)),
             what="the CLEARED line")
    journal.append(env.state, journal.decode({"event": "outcome", "session_id": s.session_id,
                               "answer_uuid": s.answer_uuids[-1], "project": s.project,
                               "outcome": "cleared", "detail": "/goal clear: Goal cleared",
                               "source": "hook", "hands": "mod"}))  # 40 s later, say
    wait_for(lambda: _log_read(runner, env), what="the log read")
    runner.stop()  # what it read is told before it ends
    assert [line.split()[0] for line in _lines_of(caplog, s.session_id)] == ["LOOP", "CLEARED"]
