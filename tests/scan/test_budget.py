"""``scan`` reports the past turns that went beyond the budget (issue 32): exactly those,
with what they spent beyond it, in the table and in ``--json``, from the cache too."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from loop_killer import cli
from loop_killer.engine.budget import BUDGET_REPROMPTS, BUDGET_USD
from loop_killer.scan import cache
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.records import Tokens
from loop_killer.state.files import projects_dir, state_dir
from transcripts import START, Transcript, Use, scan_bytes

OPUS = "claude-opus-4-1"  # $15 a million input tokens
REPROMPTS = "aaaaaaaa-1111-4222-8333-444444444444"
SPEND = "bbbbbbbb-1111-4222-8333-444444444444"
UNDER = "cccccccc-1111-4222-8333-444444444444"
COPY = "dddddddd-1111-4222-8333-444444444444"
WORK = "Migrated another table; the next one is orders."


def usd(model: str, *uses: Use) -> float:
    table = PriceTable()
    return sum(table.reply_cost(model, Tokens(u.input, u.output, u.cache_read,
                                              u.cache_creation))[0] for u in uses)


def plant(root: Path) -> dict[str, float]:
    """Three sessions and a resumed copy of one; the expected spend of the two turns over
    the default budget."""
    # 120 re-prompts in one goal (over 100), cheap replies; then a turn of the person's.
    goal = Transcript(REPROMPTS, cwd="/home/dev/migrate")
    goal.goal()  # (its slash command is the person's prompt: the turn starts there)
    cheap = [Use(100 + i, 20) for i in range(121)]
    goal.reply("On it.", cheap[0])
    for i, use in enumerate(cheap[1:]):
        goal.reprompt()
        goal.reply(f"{WORK} ({i})", use)
    goal.prompt("thanks")
    goal.reply("You're welcome.", Use(5, 5))
    goal.write(goal.path_in(root))
    # A resumed session's copy of it: its turns are the original's, not new ones.
    (goal.path_in(root).parent / f"{COPY}.jsonl").write_bytes(goal.data())

    # $15 in the main session and $10.50 in a subagent it ran: $25.50 (over $25).
    spend = Transcript(SPEND, cwd="/home/dev/big", model=OPUS)
    spend.prompt("read the whole monorepo")
    spend.reply("Reading.", Use(1_000_000, 0))
    agent = Transcript(SPEND, cwd="/home/dev/big", model=OPUS, sidechain=True,
                       start=START + timedelta(milliseconds=500), uuid_prefix="bbbbbbbc")
    agent.user("Summarise the services.")
    agent.reply("Done.", Use(700_000, 0))
    agent.write(spend.path_in(root).parent / SPEND / "subagents" / "agent-a1.jsonl")
    spend.prompt("now the tests")  # (the subagent began before: its spend is the first turn's)
    spend.reply("Sure.", Use(1_000, 0))
    spend.write(spend.path_in(root))

    # Under every limit: 50 re-prompts, and a $20 turn.
    under = Transcript(UNDER, cwd="/home/dev/small")
    under.prompt("/goal fix lint")
    for i in range(50):
        under.reprompt()
        under.reply(f"Fixed lint in file {i}.", Use(50, 5))
    under.prompt("one big read")
    under.assistant_line([{"type": "text", "text": "Read."}], "msg_cccc_big", "end_turn",
                         Use(1_333_333, 0), model=OPUS, requestId="req_big")
    under.write(under.path_in(root))
    return {"reprompts": usd(goal.model, *cheap),
            "spend": usd(OPUS, Use(1_000_000, 0), Use(700_000, 0))}


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert cli.main(["scan", "--json", *args]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


@pytest.fixture
def history(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    monkeypatch.setattr(cache, "SETTLING", 0.0)  # (the test's files are kept: as test_cache)
    root = projects_dir()
    root.mkdir(parents=True)
    return plant(root)


def test_exactly_the_turns_over_the_default_budget_with_what_they_spent_beyond_it(
        capsys: pytest.CaptureFixture[str], history: dict[str, float]) -> None:
    document = scan(capsys)
    assert document["scan"]["budget_limits"] == {"reprompts": BUDGET_REPROMPTS,
                                                 "usd": BUDGET_USD, "minutes": 0.0}
    spend, reprompts = document["budget"]  # (biggest spend first)
    assert (spend["session_id"], spend["project"]) == (SPEND, "-home-dev-big")
    assert spend["reprompts"] == 0
    assert spend["cost_usd"] == pytest.approx(history["spend"]) == 25.5
    assert spend["over"] == {"usd": pytest.approx(25.5 - BUDGET_USD)}
    assert spend["started_at"] < spend["ended_at"]
    assert spend["transcript_path"].endswith(f"{SPEND}.jsonl")

    # the original, not its resumed copy (the same replies)
    assert reprompts["session_id"] in (REPROMPTS, COPY)
    assert reprompts["reprompts"] == 120
    assert reprompts["over"] == {"reprompts": 120 - BUDGET_REPROMPTS}
    assert reprompts["cost_usd"] == pytest.approx(history["reprompts"], abs=1e-6)
    assert 5 < reprompts["minutes"] < 15  # (the builder's lines are a second apart)


def test_the_table_says_which_turns_and_by_how_much(
        capsys: pytest.CaptureFixture[str], history: dict[str, float]) -> None:
    assert cli.main(["scan"]) == 0
    out = capsys.readouterr().out
    section = " ".join(out[out.index("Turns over the budget"):].split("\n\n")[0].split())
    assert section.startswith("Turns over the budget (100 re-prompts, $25.00 a turn):")
    assert "bbbbbbbb" in section and "$25.50; beyond the limit: $0.50" in section
    assert "120 re-prompts" in section and "beyond the limit: 20 re-prompts" in section
    assert "cccccccc" not in section


def test_the_budget_in_the_settings_is_the_one_judged_by(
        capsys: pytest.CaptureFixture[str], history: dict[str, float]) -> None:
    state_dir().mkdir(parents=True)
    (state_dir() / "config.toml").write_text("[budget]\nreprompts = 40\nusd = 0\n")
    document = scan(capsys)
    assert sorted((row["reprompts"], row["over"]) for row in document["budget"]) == [
        (50, {"reprompts": 10}), (120, {"reprompts": 80})]
    (state_dir() / "config.toml").write_text("[budget]\nreprompts = 0\nusd = 0\n")
    assert scan(capsys)["budget"] == []


def test_the_turns_come_back_from_the_cache_the_same(
        capsys: pytest.CaptureFixture[str], history: dict[str, float]) -> None:
    first = scan(capsys)
    second = scan(capsys)
    assert second["scan"]["from_cache"] == second["scan"]["transcripts"] == 5
    assert second["budget"] == first["budget"] and len(first["budget"]) == 2
    assert scan(capsys, "--no-cache")["budget"] == first["budget"]


def test_a_files_turns_and_which_replies_each_holds() -> None:
    session = Transcript()
    session.reply("Left from before.", Use(1, 1))  # (before the file's first prompt)
    session.prompt("go")
    session.goal()
    session.reply("On it.", Use(2, 2))
    for _ in range(3):
        session.reprompt()
        session.reply("Working.", Use(3, 3), thinking="hmm")  # (two lines, one reply)
    session.prompt("thanks")
    session.slash_command("clear")  # (a prompt with no reply: no turn kept)
    result = scan_bytes(session.data(), session_id=session.session_id)
    before, goal = result.turns
    assert (before.reprompts, before.replies) == (0, 1)
    assert (goal.reprompts, goal.replies) == (3, 4)
    # (a file's replies are in its turns' order: each turn's are the next ones)
    assert [reply.usage.input for reply in result.replies] == [1, 2, 3, 3, 3]
    assert before.started_at < goal.started_at < goal.ended_at
