"""The loop figures for monitoring: the tally from detection-log records (pure), the session
gauges, and the ``/metrics`` endpoint the watcher serves (read over loopback)."""

from __future__ import annotations

import os
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from loop_killer.export import prometheus
from loop_killer.export.metrics import (
    OTHER,
    STOP_HOOK_BLOCK_CAP,
    LoopTally,
    MetricsSource,
    parse_address,
    read_gauges,
)
from loop_killer.state import journal
from loop_killer.state.config import parse_settings
from loop_killer.state.status import write_session_status
from loop_killer.watch.main import main as watch_main
from transcripts import Lines, append

from .conftest import Env
from .helpers import without_library
from .test_top import budget, status


def tally(**options: Any) -> LoopTally:
    return LoopTally(home="/home/dev", reply_tokens=lambda path, replies, until: 250.0,
                     **options)


def detection(session: str, rule: str, **more: Any) -> journal.Record | None:
    """A detection as the log reads it back."""
    return journal.decode({"event": "detection", "session_id": session, "rule": rule,
                           "project": "-home-dev-shop", "transcript_path": "/t.jsonl", **more})


def outcome(session: str, rule: str, word: str, **more: Any) -> journal.Record | None:
    return journal.decode({"event": "outcome", "session_id": session, "rule": rule,
                           "outcome": word, "project": "-home-dev-shop", **more})


def test_a_loop_counts_when_detected_and_again_at_its_first_outcome_with_the_tokens(
        ) -> None:
    figures = tally()
    figures.observe(detection("s1", "SAME_REPLY_TURNS", answer_uuid="a1", count=3,
                              run_length=3))
    assert figures.loops == {("SAME_REPLY_TURNS", "reprompt", "shop"): 1}
    assert figures.outcomes == {}  # no outcome yet
    figures.observe(outcome("s1", "SAME_REPLY_TURNS", "clear_queued", answer_uuid="a1"))
    figures.observe(outcome("s1", "SAME_REPLY_TURNS", "cleared", answer_uuid="a1"))
    assert figures.loops == {("SAME_REPLY_TURNS", "reprompt", "shop"): 1}
    assert figures.outcomes == {("SAME_REPLY_TURNS", "reprompt", "clear_queued", "shop"): 1}
    # 250 tokens a reply x the 5 replies Claude Code's cap of 8 blocks still allowed.
    assert figures.avoided_tokens == {("SAME_REPLY_TURNS", "shop"):
                                      250.0 * (STOP_HOOK_BLOCK_CAP - 3)}


def test_the_avoided_tokens_are_the_loops_replies_not_a_turn_that_came_after(
        tmp_path: Path) -> None:
    """Read at a scrape, the transcript may already hold the person's next turn: an audit
    found its replies taken for the loop's (610,025 avoided tokens instead of 100)."""
    from datetime import datetime, timedelta, timezone

    from transcripts import Transcript, Use

    now = time.time()
    start = datetime.fromtimestamp(now, timezone.utc)
    looped = Transcript(start=start - timedelta(seconds=120))
    looped.prompt("go")
    looped.goal()
    for _ in range(3):
        looped.reprompt()
        looped.reply("I am still working on it.", Use(10, 10))
    later = Transcript(looped.session_id, start=start + timedelta(seconds=30))
    later.prompt("now refactor billing")
    later.reply("Done.", Use(5, 2000, 120_000))
    path = tmp_path / f"{looped.session_id}.jsonl"
    path.write_bytes(looped.data() + later.data())
    figures = LoopTally(home="/home/dev")
    figures.observe(detection("s1", "SAME_REPLY_TURNS", answer_uuid="a1", count=3,
                              run_length=3, transcript_path=str(path)))
    figures.observe(outcome("s1", "SAME_REPLY_TURNS", "cleared", answer_uuid="a1", at=now))
    assert figures.avoided_tokens == {("SAME_REPLY_TURNS", "shop"):
                                      20.0 * (STOP_HOOK_BLOCK_CAP - 3)}


def test_two_loops_a_hook_stopped_before_their_replies_were_written_count_twice() -> None:
    """A Stop hook that acts before Claude Code writes the reply names none: both loops of
    a session come with answer_uuid "" (an audit found the second counted as a later word
    on the first)."""
    figures = tally()
    for loop in (1, 2):
        figures.observe(detection("s1", "SAME_REPLY_TURNS", answer_uuid="", count=3,
                                  run_length=3, source="hook", prompt_uuid=f"p{loop}"))
        figures.observe(outcome("s1", "SAME_REPLY_TURNS", "clear_queued", answer_uuid="",
                                source="hook"))
    assert figures.loops == {("SAME_REPLY_TURNS", "reprompt", "shop"): 2}
    assert figures.outcomes == {("SAME_REPLY_TURNS", "reprompt", "clear_queued", "shop"): 2}


def test_a_loop_that_went_on_avoided_nothing_and_a_manual_clear_finds_its_outcome() -> None:
    figures = tally()
    figures.observe(detection("s1", "IDLE_TURNS", answer_uuid="a1", run_length=6))
    figures.observe(outcome("s1", "IDLE_TURNS", "continued", answer_uuid="a1"))
    figures.observe(detection("s2", "MANUAL", answer_uuid="", count=0))
    figures.observe(outcome("s2", "MANUAL", "stopped_no_goal", answer_uuid="x"))
    assert figures.outcomes == {("IDLE_TURNS", "reprompt", "continued", "shop"): 1,
                                ("MANUAL", "reprompt", "stopped_no_goal", "shop"): 1}
    assert figures.avoided_tokens == {("MANUAL", "shop"): 250.0 * STOP_HOOK_BLOCK_CAP}


def test_tool_calls_warnings_refusals_and_the_ladders_stop() -> None:
    figures = tally()
    figures.observe(detection("s1", "TOOL_REPEAT", tool_use_id="t1", count=3))
    figures.observe(detection("s2", "EDIT_OSCILLATION", tool_use_id="e1", count=2))
    figures.observe(detection("s3", "TOOL_REPEAT", tool_use_id="u1", count=3))
    figures.observe(journal.ToolRecord(session_id="s1", rule="TOOL_REPEAT", refused=True,
                                       project="-home-dev-shop"))
    # The ladder's stop names the refused attempt: it is s1's warned loop's outcome.
    figures.observe(outcome("s1", "TOOL_REPEAT", "clear_queued", answer_uuid="t9"))
    figures.observe(outcome("s1", "TOOL_REPEAT", "cleared", answer_uuid="t9"))  # the mod's
    # The watcher's word on a warning nothing refused after.
    figures.observe(outcome("s2", "EDIT_OSCILLATION", "warned", answer_uuid="e1"))
    # A stop with no warning awaiting (s3's settled): a loop detected at its stop.
    figures.observe(outcome("s3", "TOOL_REPEAT", "warned", answer_uuid="u1"))
    figures.observe(outcome("s3", "TOOL_REPEAT", "stopped_no_goal", answer_uuid="u7"))
    assert figures.loops == {("TOOL_REPEAT", "tool", "shop"): 3,
                             ("EDIT_OSCILLATION", "tool", "shop"): 1}
    assert figures.outcomes == {("TOOL_REPEAT", "tool", "clear_queued", "shop"): 1,
                                ("EDIT_OSCILLATION", "tool", "warned", "shop"): 1,
                                ("TOOL_REPEAT", "tool", "warned", "shop"): 1,
                                ("TOOL_REPEAT", "tool", "stopped_no_goal", "shop"): 1}
    assert figures.refusals == {"shop": 1}
    assert figures.avoided_tokens == {}


def test_label_values_are_bounded() -> None:
    figures = tally(max_projects=3)
    for index in range(10):
        figures.observe(detection(f"s{index}", "TOOL_REPEAT", project=f"-home-dev-p{index}",
                                  tool_use_id="t"))
        figures.observe(outcome(f"s{index}", "TOOL_REPEAT", "warned", answer_uuid="t",
                                project=f"-home-dev-p{index}"))
    figures.observe(detection("s", "A_RULE_FROM_THE_FUTURE", answer_uuid="u"))
    figures.observe(outcome("s", "A_RULE_FROM_THE_FUTURE", "exploded", answer_uuid="u"))
    figures.observe(outcome("old", "SAME_REPLY_TURNS", "cleared"))  # detected before start
    assert journal.decode({"event": "detection", "session_id": None}) is None  # not counted
    assert {key[2] for key in figures.loops} == {key[3] for key in figures.outcomes} == {
        "p0", "p1", "p2", OTHER}
    assert figures.loops[("TOOL_REPEAT", "tool", OTHER)] == 7
    assert figures.outcomes[("TOOL_REPEAT", "tool", "warned", OTHER)] == 7
    assert figures.outcomes[(OTHER, "reprompt", OTHER, OTHER)] == 1
    assert sum(figures.loops.values()) == sum(figures.outcomes.values()) == 11


def test_gauges_from_the_heartbeat_and_the_statuses_written_lately(env: Env) -> None:
    now = time.time()
    write_session_status(env.state, status("live1", last_activity=now - 10, run_length=2))
    write_session_status(env.state, status("live2", last_activity=now - 100))
    write_session_status(env.state, status("gone", last_activity=now - 4000, run_length=5))
    gauges = read_gauges(env.state, now)
    assert (gauges.followed, gauges.live, gauges.in_run) == (0, 2, 1)


def test_a_budget_stop_is_a_loop_of_its_own_rule_that_avoided_no_tokens() -> None:
    """BUDGET was counted as ``other``. Nothing caps a turn that does new work in every
    answer (the budget is its cap), so its stop counts no avoided tokens; its count is
    the limit's figure (cents, re-prompts, minutes), never a run's length."""
    figures = tally()
    figures.observe(detection("s1", "BUDGET", answer_uuid="budget-1", count=2513,
                              run_length=0, source="watcher"))
    figures.observe(outcome("s1", "BUDGET", "cleared", answer_uuid="budget-1"))
    assert figures.loops == {("BUDGET", "reprompt", "shop"): 1}
    assert figures.outcomes == {("BUDGET", "reprompt", "cleared", "shop"): 1}
    assert figures.avoided_tokens == {}


def test_each_live_turn_against_its_budget_and_only_while_it_lasts(env: Env) -> None:
    """A session's turn is a gauge while an answer is pending in it (the series is gone
    once the turn is over, or the session quiet), so session ids stay bounded."""
    from loop_killer.engine.budget import Budget
    from loop_killer.export.metrics import LiveTurn, budget_limits

    now = time.time()
    for session_id, changes in {
            "goal": {"awaiting": "reprompt",
                     "extra": {"budget": budget(20.5, 12, started_at=now - 900)}},
            "fresh": {"awaiting": "turn",  # its prompt's time unknown: no minutes
                      "extra": {"budget": budget(0.5, 0, started_at=None)}},
            "over": {"extra": {"budget": budget()}},  # waiting for the person
            "quiet": {"awaiting": "turn", "last_activity": now - 4000,
                      "extra": {"budget": budget()}},
            "none": {"awaiting": "turn"}}.items():  # no figures: no limit on, or switched off
        write_session_status(env.state, status(session_id, **{"last_activity": now - 5,
                                                              **changes}))
    gauges = read_gauges(env.state, now, project=lambda folder: folder.rsplit("-", 1)[1])
    turns = sorted(gauges.turns, key=lambda turn: turn.session_id)
    assert turns == [LiveTurn("fresh", "fresh", 0.5, 0, None),
                     LiveTurn("goal", "goal", 20.5, 12, turns[1].minutes)]
    assert turns[1].minutes is not None and 15 <= turns[1].minutes < 15.1
    assert gauges.live == 4
    assert budget_limits(Budget(100, 25.0, 0)) == {"reprompts": 100, "usd": 25.0}
    assert budget_limits(None) == {}


def test_addresses() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address(":9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9") == ("::1", 9)
    for bad in ("9464", "host:", "h:99999", "h:x"):
        with pytest.raises(ValueError):
            parse_address(bad)
    assert parse_settings(b'[watcher]\nmetrics = "127.0.0.1:9464"\n', {}).metrics == (
        "127.0.0.1:9464")


def _scrape(address: tuple[str, int]) -> str:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics",
                                timeout=5) as answer:
        return str(answer.read().decode())


def test_the_endpoint_serves_what_the_log_holds(env: Env) -> None:
    pytest.importorskip("prometheus_client")
    session = Lines(cwd="/home/dev/shop")
    path = session.path_in(env.root)
    append(path, session.goal_loop(3))
    journal.append(env.state, detection("old", "TOOL_REPEAT"))  # before the start: not counted
    server = prometheus.serve_metrics("127.0.0.1:0", MetricsSource(env.state, home=str(
        Path("/home/dev"))))
    try:
        assert "loop_killer_loops_total" not in _scrape(server.address).replace(
            "# HELP loop_killer_loops_total", "").replace("# TYPE loop_killer_loops_total", "")
        journal.append(env.state, detection(session.session_id, "SAME_REPLY_TURNS",
                                            answer_uuid="a", run_length=3,
                                            transcript_path=str(path)))
        journal.append(env.state, outcome(session.session_id, "SAME_REPLY_TURNS", "cleared",
                                          answer_uuid="a"))
        text = _scrape(server.address)
    finally:
        server.close()
    assert ('loop_killer_loops_total{kind="reprompt",project="shop",'
            'rule="SAME_REPLY_TURNS"} 1.0') in text
    assert ('loop_killer_loop_outcomes_total{kind="reprompt",outcome="cleared",project="shop",'
            'rule="SAME_REPLY_TURNS"} 1.0') in text
    # The loop's replies used 20 tokens each (tests/transcripts.py): 20 x (8 - 3).
    assert 'loop_killer_avoided_tokens_total{project="shop",rule="SAME_REPLY_TURNS"} 100.0' in text
    assert "loop_killer_sessions_followed 0.0" in text


def test_the_endpoint_serves_each_live_turn_against_the_budget(env: Env) -> None:
    pytest.importorskip("prometheus_client")
    from loop_killer.engine.budget import Budget

    now = time.time()
    live = status("goal", awaiting="reprompt", last_activity=now,
                  extra={"budget": budget(20.5, 12, started_at=now - 600)})
    write_session_status(env.state, live)
    server = prometheus.serve_metrics("127.0.0.1:0", MetricsSource(
        env.state, home="/home/dev", budget=Budget(100, 25.0, 0)))
    try:
        text = _scrape(server.address)
        write_session_status(env.state, replace(live, awaiting=None))  # the turn is over
        after = _scrape(server.address)
    finally:
        server.close()
    assert 'loop_killer_turn_spend_usd{project="proj-goal",session="goal"} 20.5' in text
    assert 'loop_killer_turn_reprompts{project="proj-goal",session="goal"} 12.0' in text
    assert 'loop_killer_turn_duration_minutes{project="proj-goal",session="goal"} 10.' in text
    assert 'loop_killer_budget_limit{limit="usd"} 25.0' in text
    assert 'loop_killer_budget_limit{limit="reprompts"} 100.0' in text
    assert 'limit="minutes"' not in text  # off: no limit to compare with
    assert 'session="goal"' not in after
    assert 'loop_killer_budget_limit{limit="usd"} 25.0' in after


def test_without_the_library_one_line_says_what_to_install(
        env: Env, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    without_library(monkeypatch, "prometheus_client")
    assert watch_main(["--metrics", "127.0.0.1:9", "--root", str(env.root)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'loop-killer[metrics]'" in err
    assert len(err.strip().splitlines()) == 1
    assert not os.path.exists(env.state / "watcher.json")  # it never started watching
