"""BUDGET: the pure limits (engine.budget), the settings, the words, the watcher's count of a
turn's spend (its subagents' too) and the Stop hook's count of re-prompts and time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from loop_killer.engine.budget import (
    DEFAULT_BUDGET,
    LIMIT_MINUTES,
    LIMIT_REPROMPTS,
    LIMIT_USD,
    Budget,
    TurnSpend,
    TurnUse,
    crossed,
    nearing,
    over_by,
)
from loop_killer.engine.prefilter import skim_span
from loop_killer.engine.reader import EventReader
from loop_killer.engine.rules import RULE_BUDGET
from loop_killer.hooks import notice
from loop_killer.state.config import parse_settings
from loop_killer.state.inbox import ClearRequest, parse_request
from loop_killer.watch.budgets import Budgets
from transcripts import Transcript, Use

THREE_DOLLARS = Use(0, 200_000)  # output tokens of claude-sonnet-4-5 at $15 a million


def test_the_defaults_are_100_reprompts_25_dollars_and_no_time_limit() -> None:
    assert (DEFAULT_BUDGET.reprompts, DEFAULT_BUDGET.usd, DEFAULT_BUDGET.minutes) == (
        100, 25.0, 0.0)


def test_reprompts_are_reached_at_the_limit_spend_only_beyond_it() -> None:
    budget = Budget(reprompts=5, usd=25.0)
    assert crossed(budget, TurnUse(reprompts=4), 0.0) is None
    at_five = crossed(budget, TurnUse(reprompts=5, goal=True), 0.0)
    assert at_five is not None and at_five.limit == LIMIT_REPROMPTS
    assert at_five.words == "5 re-prompts in this goal, limit 5"
    assert crossed(budget, TurnUse(usd=25.0), 0.0) is None
    spent = crossed(budget, TurnUse(usd=25.13, goal=True), 0.0)
    assert spent is not None and spent.limit == LIMIT_USD
    assert spent.words == "$25.13 spent in this goal, limit $25.00"


def test_a_turn_without_a_goal_says_turn_and_a_guessed_price_says_so() -> None:
    found = crossed(Budget(usd=1.0), TurnUse(usd=1.5, fallback=True), 0.0)
    assert found is not None
    assert found.words == "$1.50 spent in this turn (partly at a model family's price), limit $1.00"


def test_wall_time_counts_from_the_turns_start_and_zero_is_off() -> None:
    use = TurnUse(started_at=1000.0)
    assert crossed(Budget(minutes=0), use, 1000.0 + 10 * 3600) is None
    found = crossed(Budget(minutes=30), use, 1000.0 + 31 * 60)
    assert found is not None and found.limit == LIMIT_MINUTES
    assert found.words == "31 min in this turn, limit 30 min"
    assert crossed(Budget(reprompts=0, usd=0), TurnUse(reprompts=10**6, usd=1e9), 0.0) is None


def test_warned_from_80_percent_of_a_limit_until_it_is_reached() -> None:
    budget = Budget(reprompts=10, usd=10.0)
    assert nearing(budget, TurnUse(reprompts=7, usd=7.9), 0.0) == ()
    near = nearing(budget, TurnUse(reprompts=8, usd=8.0), 0.0)
    assert [n.limit for n in near] == [LIMIT_REPROMPTS, LIMIT_USD]
    assert [n.limit for n in nearing(budget, TurnUse(reprompts=10, usd=8.0), 0.0)] == [LIMIT_USD]


def test_over_by_says_what_a_past_turn_spent_beyond_each_limit() -> None:
    use = TurnUse(reprompts=120, usd=30.5, started_at=0.0)
    assert over_by(DEFAULT_BUDGET, use, 3600.0) == {LIMIT_REPROMPTS: 20, LIMIT_USD: 5.5}


def test_a_reply_counts_once_at_its_largest_copy() -> None:
    turn = TurnSpend()
    turn.reply("msg_1", 0.5)
    turn.reply("msg_1", 1.0)  # the same reply's later line, more output counted
    turn.reply("msg_1", 0.7)
    turn.reply("msg_2", 2.0)
    assert turn.use().usd == 3.0


def test_the_settings_read_the_budget_table_and_the_environment_wins() -> None:
    text = b"[budget]\nreprompts = 50\nusd = 10.5\nminutes = 90\n"
    settings = parse_settings(text, {"LOOP_KILLER_BUDGET_USD": "2.5"})
    assert settings.budget == Budget(50, 2.5, 90.0)
    assert settings.sources["budget_usd"] == "$LOOP_KILLER_BUDGET_USD"
    assert not settings.problems
    off = parse_settings(None, {"LOOP_KILLER_BUDGET_REPROMPTS": "0"})
    assert off.budget.reprompts == 0 and not off.problems
    bad = parse_settings(b"[budget]\nusd = -1\n", {})
    assert bad.budget.usd == 25.0 and bad.problems


def test_the_notice_names_budget_and_what_was_spent() -> None:
    firing = notice.Firing(RULE_BUDGET, 2513, 0, "watcher",
                           "$25.13 spent in this goal, limit $25.00")
    assert notice.notice(firing, notice.OUTCOME_CLEARED) == (
        "loop-killer: BUDGET ($25.13 spent in this goal, limit $25.00): loop stopped, "
        "goal cleared.")
    assert notice.notice(firing, notice.OUTCOME_NO_GOAL).endswith("; no goal was set.")
    assert notice.stop_reason(firing).startswith("loop-killer: BUDGET: $25.13 spent")


def test_a_budget_request_carries_its_words_to_the_stop_hook() -> None:
    request = ClearRequest(session_id="s1", rule=RULE_BUDGET, count=2513, run_length=0,
                           answer_uuid="budget-abc", answer_digest="", transcript_path="/t",
                           created_at=1.0, source="watcher",
                           detail="$25.13 spent in this goal, limit $25.00")
    assert parse_request(request.to_json(), expected_session="s1") == request


def _feed(budgets: Budgets, path: str, lines: list[bytes]) -> None:
    reader = EventReader(parse=skim_span)
    for line in reader.feed(b"".join(item + b"\n" for item in lines)):
        budgets.feed(path, line.event)


def test_the_watcher_counts_a_turns_replies_and_re_prompts_and_a_new_prompt_starts_afresh(
        tmp_path: Path) -> None:
    budgets = Budgets(Budget(usd=5.0))
    session = Transcript(start=None)
    session.prompt()
    session.reply("first", THREE_DOLLARS)
    session.reprompt()
    session.reply("second", THREE_DOLLARS)
    path = str(session.path_in(tmp_path))
    _feed(budgets, path, session.lines)
    use = budgets.use(path, goal=True)
    assert use is not None and use.reprompts == 1 and round(use.usd, 6) == 6.0
    warned: list[str] = []
    crossing = budgets.check(path, 0.0, goal=True, warn=lambda near: warned.append(near.words))
    assert crossing is not None and crossing.words == "$6.00 spent in this goal, limit $5.00"
    assert budgets.check(path, 0.0, goal=True, warn=warned.append) is None  # asked once
    before = len(session.lines)
    session.prompt("next")
    _feed(budgets, path, session.lines[before:])
    use = budgets.use(path, goal=False)
    assert use is not None and use.usd == 0.0 and use.reprompts == 0


def test_a_subagents_spend_counts_in_its_parents_turn(tmp_path: Path) -> None:
    budgets = Budgets(Budget(usd=5.0))
    parent = Transcript(start=None)
    parent.prompt()
    parent.reply("delegating", THREE_DOLLARS)
    path = parent.write(parent.path_in(tmp_path))
    _feed(budgets, str(path), parent.lines)
    agent = Transcript(parent.session_id, sidechain=True, start=None, uuid_prefix="agent001")
    agent.reply("subagent work", THREE_DOLLARS)
    agent.reply("more subagent work", THREE_DOLLARS)
    agent.write(path.parent / parent.session_id / "subagents" / "agent-a1.jsonl")
    budgets.read_subagents(str(path), parent.session_id)
    use = budgets.use(str(path), goal=False)
    assert use is not None and round(use.usd, 6) == 9.0
    budgets.read_subagents(str(path), parent.session_id)  # nothing new: counted once
    use = budgets.use(str(path), goal=False)
    assert use is not None and round(use.usd, 6) == 9.0


def test_a_subagent_file_from_before_the_turn_is_not_counted(tmp_path: Path) -> None:
    budgets = Budgets(Budget(usd=5.0))
    parent = Transcript(start=None)
    agent = Transcript(parent.session_id, sidechain=True, start=None, uuid_prefix="agent001")
    agent.reply("an earlier turn's work", THREE_DOLLARS)
    old = agent.write(tmp_path / parent.project / parent.session_id / "subagents" / "agent-a.jsonl")
    os.utime(old, (1_000_000, 1_000_000))
    parent.prompt()
    path = parent.write(parent.path_in(tmp_path))
    _feed(budgets, str(path), parent.lines)
    budgets.read_subagents(str(path), parent.session_id)
    use = budgets.use(str(path), goal=False)
    assert use is not None and use.usd == 0.0


def _stop(home: Path, transcript: Path, prompt_id: str, message: str) -> dict | None:
    from loop_killer.hooks.stop_hook import run_input

    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
           "LOOP_KILLER_BUDGET_REPROMPTS": "3", "LOOP_KILLER_BUDGET_MINUTES": "600"}
    return run_input({"hook_event_name": "Stop", "session_id": "s1", "prompt_id": prompt_id,
                      "transcript_path": str(transcript), "stop_hook_active": True,
                      "last_assistant_message": message}, env=env)


def test_the_stop_hook_counts_each_re_prompt_of_a_turn_and_a_new_turn_starts_afresh(
        tmp_path: Path) -> None:
    session = Transcript(start=None)  # (None: now)
    session.prompt()
    session.goal_status(met=False)
    transcript = session.write(tmp_path / "t.jsonl")
    # Varied replies (no loop rule fires before 6): the third re-prompt reaches the limit.
    said = [_stop(tmp_path, transcript, "p1", text) for text in (
        "Migrated the users table.", "Orders now carry currency codes.",
        "Backfilled invoices from archive storage.")]
    assert said[:2] == [None, None] and said[2] is not None
    assert "3 re-prompts in this goal, limit 3" in said[2]["systemMessage"]
    assert _stop(tmp_path, transcript, "p2", "A new turn's first answer.") is None
    record = json.loads((tmp_path / ".claude" / "loop-killer" / "tools" / "s1.json").read_text())
    assert record["turn"]["prompt"] == "p2" and record["turn"]["stops"] == 1
    assert isinstance(record["turn"]["started_at"], float)  # the person's prompt, read once


def test_status_shows_a_live_goals_spend_re_prompts_and_time_against_its_limits() -> None:
    from loop_killer.engine.budget import live_words

    figures = {"reprompts": 12, "started_at": 1000.0, "usd": 1.2, "fallback": False,
               "goal": True, "limits": {"reprompts": 100, "usd": 25.0, "minutes": 0}}
    assert live_words(figures, 1000.0 + 14 * 60) == (
        "$1.20 of $25.00 spent, 12 of 100 re-prompts, 14 min (no limit)")


def test_the_published_figures_read_back_and_nothing_else_does() -> None:
    """What the watcher publishes of a turn is read back by ``top`` and the metrics with
    the same module; a status file is read, not trusted: anything off is no figures."""
    from loop_killer.engine.budget import against, figures, read_figures

    budget, use = Budget(100, 25.0, 60.0), TurnUse(12, 1000.0, 1.2, True, True)
    assert read_figures(figures(budget, use)) == (budget, use)
    assert [(a.limit, a.used, a.most) for a in against(budget, use, 1000.0 + 900)] == [
        ("reprompts", 12, 100), ("usd", 1.2, 25.0), ("minutes", 15.0, 60.0)]
    # Off, or no start known: no such limit to be against.
    assert [a.limit for a in against(Budget(0, 25.0, 60.0), TurnUse(3, None, 1.0), 0)] == [
        "usd"]
    good = figures(budget, use)
    for bad in (None, [], {**good, "usd": "1.2"}, {**good, "reprompts": True},
                {**good, "started_at": -5}, {**good, "limits": {"usd": 25}},
                {**good, "limits": None}):
        assert read_figures(bad) is None, bad
