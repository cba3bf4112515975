"""What ``loop-killer-watch`` prints (issue 33, item 6): one LOOP line per loop, in the
order the transcripts were written across sessions; one outcome line per loop, naming its
rule, in words that do not repeat themselves; a tool-call warning nothing refused after
says so; and the detection log holds one record per fact."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from loop_killer.state import journal, records, report
from loop_killer.state import session as store
from loop_killer.state.config import Settings
from loop_killer.watch.narrate import InOrder, Said
from loop_killer.watch.respond import OUTCOME_TIMEOUT, PendingOutcome, at_deadline
from transcripts import Lines, append

from .helpers import wait_for

EVENTS = "loop_killer.watch.events"


def _shown(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == EVENTS]


def _of(caplog: pytest.LogCaptureFixture, session_id: str) -> list[str]:
    return [line for line in _shown(caplog) if f"  {session_id[:8]}  " in line]


# -- in the order the transcripts were written ---------------------------------------------


def test_loops_are_printed_in_the_order_their_transcripts_were_written(
        env: Any, start_watcher: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Two loops written 0.6 s apart, the later one read first: printed earlier first."""
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher()
    earlier, later = Lines(cwd="/home/dev/billing", age=0.6), Lines(cwd="/home/dev/shop")
    earlier_lines = earlier.goal_loop(3)  # stamped 0.6 s before
    append(later.path_in(env.root), later.goal_loop(3))
    wait_for(lambda: env.has_request(later.session_id), what="the later loop read")
    append(earlier.path_in(env.root), earlier_lines)
    wait_for(lambda: len([x for x in _shown(caplog) if x.startswith("LOOP")]) == 2,
             what="both LOOP lines")
    runner.stop()
    loops = [x for x in _shown(caplog) if x.startswith("LOOP")]
    assert [earlier.session_id[:8] in loops[0], later.session_id[:8] in loops[1]] == [
        True, True]


def test_the_order_is_by_when_things_happened_and_an_outcome_follows_its_loop() -> None:
    order = InOrder(window=1.0)
    order.add(10.6, [Said(logging.WARNING, "later")])
    order.add(10.0, [Said(logging.WARNING, "earlier")])
    order.add(10.0, [Said(logging.INFO, "its outcome", after=10.0)])
    order.add(9.0, [Said(logging.INFO, "found before its LOOP line was read", after=11.0)])
    assert order.ready(10.9) == []  # within the window: a line about earlier may come
    assert [s.line for s in order.ready(11.0)] == ["earlier", "its outcome"]
    assert [s.line for s in order.drain()] == ["later", "found before its LOOP line was read"]


# -- one outcome line per loop, and what a warning came to ------------------------------------


def _tool_loop(env: Any, s: Lines, *, hooks: bool) -> None:
    """The same call, the same result, three times in the person's turn; with ``hooks``,
    the tool-call hooks keep counts for the session (the plugin is loaded)."""
    if hooks:
        path = store.state_path(env.state, s.session_id)
        store.save(path, store.put(None, store.MAIN, Settings().tool_counter()),
                   refusable=False)
    lines = s.prompt()
    for _ in range(3):
        lines += s.answer("Running the tests again.", tool=True, output="1 failing")
    append(s.path_in(env.root), lines)
    if hooks:  # the PostToolUse hook judged the third result and logged the warning
        journal.append(env.state, journal.decode({
            "event": "detection", "rule": "TOOL_REPEAT", "source": "hook",
            "session_id": s.session_id, "project": "-home-dev-shop", "call": "Bash: npm test",
            "count": 3, "tool_use_id": "toolu_hook_3",
            "transcript_path": str(s.path_in(env.root))}))


@pytest.mark.parametrize(("hooks", "outcome", "label"), [
    (True, "warned", "WARNED"), (False, "none", "NOTHING")])
def test_a_warning_nothing_refused_after_gets_an_outcome_line_that_says_so(
        env: Any, start_watcher: Any, caplog: pytest.LogCaptureFixture, hooks: bool,
        outcome: str, label: str) -> None:
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher(outcome_timeout=0.5)
    s = Lines(cwd="/home/dev/shop")
    _tool_loop(env, s, hooks=hooks)
    (logged,) = wait_for(lambda: env.records("outcome", session_id=s.session_id), 10,
                         "the warning's outcome")
    assert (logged["outcome"], logged["rule"], logged["source"]) == (
        outcome, "TOOL_REPEAT", "watcher")
    wait_for(lambda: len(_of(caplog, s.session_id)) == 2, what="its two lines")
    runner.stop()
    loop, said = _of(caplog, s.session_id)
    assert loop.startswith("LOOP") and "gave the same result 3 times" in loop
    assert said.startswith(label) and "TOOL_REPEAT: " in said
    assert ("no call was refused within 0 s" in said if hooks
            else "plugin not loaded?" in said)


def test_the_ladders_stop_is_the_warnings_one_outcome_and_no_warned_follows(
        env: Any, start_watcher: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher(outcome_timeout=0.5)
    base = {"project": "-home-dev-api", "rule": "TOOL_REPEAT", "source": "hook",
            "session_id": "5e551011-aaaa-4000-8000-000000000001"}
    for record in ({**base, "event": "detection", "call": "Bash: npm test", "count": 3,
                    "tool_use_id": "t3"},
                   {**base, "event": "refusal", "call": "Bash: npm test", "count": 4,
                    "tool_use_id": "r1"},
                   {**base, "event": "outcome", "outcome": "stopped_no_goal", "count": 3,
                    "answer_uuid": "r3", "detail": "loop-killer: TOOL_REPEAT (a refused "
                    "call tried 3 more times): loop stopped; no goal was set."}):
        journal.append(env.state, journal.decode(record))
    # Another session's warning, after: once its outcome line is out, the first one's
    # timeout has passed too (no tool hook counted its calls here: NOTHING).
    other = {**base, "session_id": "0a1e4000-bbbb-4000-8000-000000000002"}
    journal.append(env.state, journal.decode({**other, "event": "detection", "count": 3,
                                              "call": "Bash: ls", "tool_use_id": "u3"}))
    wait_for(lambda: any(x.startswith("NOTHING") for x in _of(caplog, other["session_id"])),
             10, "the other session's outcome line")
    runner.stop()
    assert [x.split()[0] for x in _of(caplog, base["session_id"])] == [
        "LOOP", "REFUSED", "STOPPED"]
    assert [r["outcome"] for r in env.records("outcome", session_id=base["session_id"])] == [
        "stopped_no_goal"]  # the hook's word; the watcher adds none


def test_a_loop_a_stop_hook_acted_on_is_logged_once_and_told_once(
        env: Any, start_watcher: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The watcher fired and wrote the request; the Stop hook took it (its mark, its
    QUEUED), the turn stopped, the mod cleared the goal and reported it. The log holds the
    hook's and the mod's records alone (the watcher's "stopped" and "cleared" were a
    second copy of them); the terminal one LOOP line and one outcome line."""
    from loop_killer.hooks.mod_outcomes import write_mod_plan_record

    caplog.set_level(logging.INFO, logger="loop_killer")
    env.root.mkdir(parents=True)
    runner = start_watcher()
    s = Lines(cwd="/home/dev/billing")
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    (fired,) = env.logged(1, s.session_id)
    # The Stop hook takes it: its mark, then its word (the mod's plan handed over).
    assert records.mark_acted(env.state, s.session_id, fired["prompt_uuid"])
    plan_id = f"{s.session_id}.1"
    outcome_path = write_mod_plan_record(str(env.state), plan_id, {
        "id": plan_id, "session_id": s.session_id, "answer_uuid": fired["answer_uuid"],
        "rule": "SAME_REPLY_TURNS", "project": s.project, "transcript_path": str(path),
        "offset": path.stat().st_size})
    journal.append(env.state, journal.OutcomeRecord(
        session_id=s.session_id, answer_uuid=fired["answer_uuid"], rule="SAME_REPLY_TURNS",
        outcome="clear_queued", hands="mod", project=s.project, transcript_path=str(path),
        detail="loop-killer: SAME_REPLY_TURNS (3 similar replies to re-prompts): loop "
               "stopped; /goal clear queued.", source="hook"))
    append(path, [s.summary(prevented=True)])
    append(path, s.cleared())
    Path(outcome_path).write_text(json.dumps({"v": 1, "id": plan_id, "status": "cleared",
                                              "output": "Goal cleared: tests pass"}))
    wait_for(lambda: env.records("outcome", session_id=s.session_id, outcome="cleared"),
             what="the mod's report logged")
    wait_for(lambda: len(_of(caplog, s.session_id)) == 2, what="two lines")
    runner.stop()
    assert [(r["outcome"], r["source"]) for r in env.records(
        "outcome", session_id=s.session_id)] == [("clear_queued", "hook"), ("cleared", "hook")]
    loop, said = _of(caplog, s.session_id)
    assert loop.startswith("LOOP") and said.startswith("CLEARED")
    assert "SAME_REPLY_TURNS: turn ended, goal removed" in said


# -- the words of every outcome line ---------------------------------------------------------

_NOTICE = "loop-killer: {rule} (what it saw): loop stopped, goal cleared."
"""A Stop hook's detail: its notice, which names the rule and the verdict again."""


def _details() -> dict[str, list[str]]:
    """Each outcome with the details its writers give it."""
    pending = PendingOutcome("a", "SAME_REPLY_TURNS", 0.0, 0.0)
    watchers = {
        kind: [at_deadline(p, more_answers=answers, request_pending=waiting,
                           timeout=OUTCOME_TIMEOUT).detail]  # type: ignore[union-attr]
        for kind, p, answers, waiting in (
            ("continued", pending, 2, True), ("none", pending, 0, True),
            ("not_requested", PendingOutcome("a", "S", 0.0, 0.0, requested=False), 0, True))}
    return {
        **watchers,
        "cleared": ["goal cleared: tests pass", "/goal clear: Goal cleared: tests pass",
                    _NOTICE],
        "stopped": ["the turn was stopped", "the request was taken and no re-prompt followed"],
        "stopped_no_goal": [_NOTICE.replace("goal cleared", "no goal was set")],
        "clear_queued": [_NOTICE],
        "sent_unconfirmed": ["the mod never reported what /goal clear did", _NOTICE],
        "not_possible": [_NOTICE],
        "clear_failed": ["/goal clear: No goal is active, the goal was cleared", _NOTICE],
        "superseded": ["a new prompt came first; request removed"],
        "warned": ["no call was refused within 60 s"],
    }


def _words(line: str, project: str) -> list[str]:
    """The line's words, without the project, the session and what it quotes."""
    text = re.sub(r'"[^"]*"', " ", line.replace(project, " ", 1))
    words = [word.strip(",;:.()?").lower() for word in text.split()[2:]]
    return [word for word in words if len(word) >= 3 and not word.isdigit()]


@pytest.mark.parametrize("rule", ["SAME_REPLY_TURNS", "IDLE_TURNS", "MANUAL", "TOOL_REPEAT",
                                  "EDIT_OSCILLATION"])
def test_every_outcome_line_names_its_rule_and_repeats_no_word(rule: str) -> None:
    for outcome, details in _details().items():
        for detail in details:
            for source in ("watcher", "hook"):
                line = report.outcome_line(project="billing", session_id="a26ba613-ffff",
                                           outcome=outcome, rule=rule, detail=detail,
                                           count=3, source=source)
                assert f"  a26ba613  {rule}: " in line, line
                assert "loop-killer" not in line, line
                words = _words(line, "billing")
                assert len(words) == len(set(words)), line


def test_a_ladders_stop_says_how_many_attempts_were_refused() -> None:
    record = journal.decode({"event": "outcome", "session_id": "s1", "project": "api",
                             "rule": "TOOL_REPEAT", "outcome": "stopped_no_goal", "count": 3,
                             "source": "hook", "detail": _NOTICE})
    assert record is not None
    assert report.journal_line(record) == ("STOPPED   api  s1  TOOL_REPEAT: turn ended after 3 "
                                           "refused attempts; no goal was set (hook)")
