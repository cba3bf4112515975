"""``loop-killer top``: the rows from plain data, the screen at 80 and 120 columns, keys,
and the state reader over a real state folder (no terminal: tests/watch/test_top_tmux.py
drives the real screen)."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from loop_killer.scan.usage import Spent, UsageTally, reply_tokens
from loop_killer.state import journal
from loop_killer.state.inbox import peek_request
from loop_killer.state.refused import Refused
from loop_killer.state.status import SessionStatus, WatcherHeartbeat, write_session_status
from loop_killer.top.app import StateReader, ask_to_clear, decode_keys, parse_window
from loop_killer.top.rows import (
    Attention,
    LastDetection,
    Limits,
    Screen,
    build_screen,
    fold_record,
    money,
    project_names,
    tokens_text,
)
from loop_killer.top.view import cut_left, render, visible_rows
from rich.console import Console
from transcripts import Lines, append, data

from .conftest import Env

NOW = 1_800_000_000.0


def status(session_id: str, **changes: object) -> SessionStatus:
    base = SessionStatus(
        session_id=session_id, transcript_path=f"/p/-home-dev-{session_id}/{session_id}.jsonl",
        project=f"-home-dev-proj-{session_id}", offset=100, run_length=0, chain_length=0,
        awaiting=None, last_answer_uuid="", last_answer_digest="", last_activity=NOW - 10,
        updated_at=NOW - 10)
    return replace(base, **changes)  # type: ignore[arg-type]


def screen_of(*statuses: SessionStatus, detections: dict[str, LastDetection] | None = None,
              beat: WatcherHeartbeat | None = None, window: float = 3600.0,
              cwds: dict[str, str] | None = None, refused: dict[str, Refused] | None = None):
    return build_screen(statuses, detections or {}, {}, beat=beat, limits=Limits(), now=NOW,
                        window=window, home="/home/dev", cwds=cwds, refused=refused)


# -- rows ---------------------------------------------------------------------------------


def test_what_each_session_is_doing_sorted_by_what_needs_attention_first() -> None:
    screen = screen_of(
        status("working", awaiting="turn", last_activity=NOW - 1),
        status("waiting"),
        status("repeating", tool_repeats=[{"call": "Bash: npm test", "count": 3}]),
        status("refused", tool_repeats=[{"call": "Bash: ls nope", "count": 4},
                                        {"call": "Read: a.py", "count": 2}]),
        status("run", run_length=4, chain_length=2, awaiting="reprompt"),
        status("near", run_length=2, chain_length=2, awaiting="reprompt"),
        status("stopped"),
        status("old", last_activity=NOW - 7200),
        detections={"stopped": LastDetection("SAME_REPLY_TURNS", 3, NOW - 20, "",
                                             "cleared", NOW - 15)},
        refused={"refused": Refused("Bash: ls nope", 2, NOW - 3)})
    doing = {row.session_id: row.doing[0] for row in screen.rows}
    assert [row.session_id for row in screen.rows] == [
        "refused", "near", "run", "repeating", "stopped", "waiting", "working"]
    assert doing["refused"] == "refused x2: Bash: ls nope"
    assert doing["near"] == "re-prompt run 2/6, 2/3 similar"  # 2 of 3 similar: nearer
    assert doing["run"] == "re-prompt run 4/6, 2/3 similar"
    assert doing["repeating"] == "repeating x3: Bash: npm test"
    assert doing["stopped"] == "loop stopped (SAME_REPLY_TURNS)"
    assert doing["waiting"] == "waiting for you"
    assert doing["working"] == "working"
    assert "old" not in doing  # outside the window
    assert screen.summary == ("7 sessions in 1 h: 1 refused, 2 in a re-prompt run, "
                              "1 repeating")
    assert screen.rows[0].project_text == "proj-refused"  # the home folder left out


def test_a_call_is_refused_only_where_a_hook_refused_it() -> None:
    """Counts say how often a result came back, not that a hook refused anything: a session
    only the watcher saw (no hook loaded), or one from before the install, reached the
    refusal's count with nothing refused. Only a hook's logged refusal says "refused"."""
    at_the_block = status("s", tool_repeats=[{"call": "Bash: sleep 5", "count": 4}])
    (row,) = screen_of(at_the_block).rows
    assert row.doing == ("repeating x4: Bash: sleep 5",)
    assert row.attention == Attention.REPEATING
    assert screen_of(at_the_block).summary.endswith(": 0 refused, 0 in a re-prompt run, "
                                                    "1 repeating")
    (row,) = screen_of(at_the_block, refused={"s": Refused("Bash: sleep 5", 1, NOW)}).rows
    assert row.doing == ("refused x1: Bash: sleep 5",)
    assert row.attention == Attention.REFUSED


def test_results_past_the_refusal_say_the_call_is_not_being_refused() -> None:
    """Past the refusal, results still come: no hook refused the call (none installed, or
    Claude Code rejected the input before any hook ran). "refused" would be untrue."""
    screen = screen_of(status("s", tool_repeats=[{"call": "Read: a.py", "count": 321}]))
    (row,) = screen.rows
    assert row.doing == ("still repeating x321: Read: a.py",)
    assert row.attention == Attention.REPEATING


def test_a_project_is_named_by_its_folders_last_part_told_apart_from_the_left() -> None:
    """Named by the session's folder (its lines' cwd), not by the transcript's folder,
    whose name is the path with every other character made '-': ``home-dev-serv…`` on
    every row. Two folders ending alike are told apart by the shortest ending no other
    shares."""
    cwds = {"a": "/home/dev/team-a/api", "b": "/home/dev/team-b/api", "c": "/home/dev/web",
            "d": "/home/dev/web", "e": "/home/dev/x/web-app"}
    screen = screen_of(*(status(name) for name in cwds), status("f"), cwds=cwds)
    named = {row.session_id: row.project_text for row in screen.rows}
    assert named == {"a": "…/team-a/api", "b": "…/team-b/api", "c": "web", "d": "web",
                     "e": "web-app", "f": "proj-f"}  # f: no cwd read yet
    assert project_names(["/srv/api", "/srv/old/api", "/api"]) == {
        "/srv/api": "/srv/api", "/srv/old/api": "…/old/api", "/api": "/api"}
    assert project_names(["/home/dev/api", "/home/dev/x/home/dev/api"], "/home/dev") == {
        "/home/dev/api": "~/api", "/home/dev/x/home/dev/api": "…/x/home/dev/api"}
    # Too long for its column: cut from the left, where the ending tells it apart.
    assert cut_left("a-rather-long-project-name-12", 16) == "…project-name-12"
    assert cut_left("日本語プロジェクト-07", 10) == "…ェクト-07"  # (two columns a character)


def test_a_clear_request_is_shown_and_kept_in_view_past_the_window() -> None:
    screen = screen_of(status("asked", pending_request=True, last_activity=NOW - 9000))
    (row,) = screen.rows
    assert row.attention == Attention.RUN
    assert row.doing == ("clear requested: next Stop ends the loop", "clear requested")


def test_a_stopped_loop_is_no_longer_what_a_session_does_once_it_works_again() -> None:
    last = {"s": LastDetection("TOOL_REPEAT", 3, NOW - 600, "", "stopped_no_goal", NOW - 600)}
    assert screen_of(status("s"), detections=last).rows[0].doing == ("waiting for you",)
    assert screen_of(status("s", last_activity=NOW - 590), detections=last
                     ).rows[0].doing[0] == "loop stopped (TOOL_REPEAT)"
    assert screen_of(status("s", awaiting="turn", last_activity=NOW - 590), detections=last
                     ).rows[0].doing == ("working",)


def test_the_watcher_line_says_when_no_watcher_runs() -> None:
    from loop_killer.printable import display_width
    from loop_killer.top.view import KEYS_HELP

    assert screen_of().watcher.startswith("WATCHER NOT RUNNING")
    # Neither the advice nor the keys may be cut at 80 columns.
    assert screen_of().watcher.endswith("start loop-killer-watch")
    assert display_width(screen_of().watcher) <= 80 and display_width(KEYS_HELP) <= 80
    assert not screen_of().watcher_running
    beat = WatcherHeartbeat(pid=42, started_at=NOW - 100, beat_at=NOW - 1, root="/r",
                            sessions=31)
    screen = screen_of(beat=beat)
    assert screen.watcher_running
    assert screen.watcher == "watcher running (pid 42, 31 sessions followed, beat 1s ago)"
    beat = WatcherHeartbeat(pid=42, started_at=NOW - 100, beat_at=NOW - 0.2, root="/r",
                            sessions=31)
    assert screen_of(beat=beat).watcher.endswith("beat just now)")


def test_the_last_detection_and_its_outcome_from_the_log_records() -> None:
    known: dict[str, LastDetection] = {}
    records = [
        {"event": "detection", "session_id": "a", "rule": "SAME_REPLY_TURNS", "count": 3,
         "at": NOW - 30, "snippet": "I am still working", "answer_uuid": "u1"},
        {"event": "outcome", "session_id": "a", "rule": "SAME_REPLY_TURNS",
         "outcome": "clear_queued", "at": NOW - 29},
        {"event": "outcome", "session_id": "a", "rule": "SAME_REPLY_TURNS",
         "outcome": "cleared", "at": NOW - 28},
        {"event": "outcome", "session_id": "a", "rule": "SAME_REPLY_TURNS",
         "outcome": "stopped", "at": NOW - 27},  # a passing word after the last one
        {"event": "detection", "session_id": "b", "rule": "TOOL_REPEAT", "count": 3,
         "call": "Bash: npm test", "at": NOW - 5, "source": "hook"},
        {"event": "detection", "session_id": "e", "rule": "TOOL_REPEAT", "count": 3,
         "call": "Bash: ls", "at": NOW - 5, "source": "watcher"},  # no hook warned
        {"event": "outcome", "session_id": "c", "rule": "TOOL_REPEAT",
         "outcome": "stopped_no_goal", "at": NOW - 4},  # the ladder's stop: no detection
        {"event": "refusal", "session_id": "b", "rule": "TOOL_REPEAT", "at": NOW - 3},
        {"event": "detection", "session_id": 7, "rule": "X"},  # not a session: skipped
        {"event": "detection", "session_id": "d", "rule": "MANUAL", "count": 0, "at": "x"},
    ]
    for record in filter(None, map(journal.decode, records)):  # session 7: not a record
        fold_record(known, record)
    assert known["a"].outcome == "cleared"
    screen = screen_of(*(status(name) for name in "abcde"), detections=known)
    shown = {row.session_id: row.loop for row in screen.rows}
    assert shown["a"] == ("SAME_REPLY_TURNS x3 -> CLEARED 28s ago",
                          "SAME_REPLY_TURNS x3 -> CLEARED", "SAME_REPLY_TURNS -> CLEARED")
    assert shown["b"] == ("TOOL_REPEAT x3 -> WARNED 5s ago: Bash: npm test",
                          "TOOL_REPEAT x3 -> WARNED 5s ago", "TOOL_REPEAT x3 -> WARNED",
                          "TOOL_REPEAT -> WARNED")
    assert shown["c"][0] == "TOOL_REPEAT -> STOPPED 4s ago"
    assert shown["d"][0].startswith("MANUAL clear -> PENDING")
    assert shown["e"][-1] == "TOOL_REPEAT -> NOT WARNED"


def test_figures() -> None:
    assert [tokens_text(n) for n in (950, 12_345, 4_500_000)] == ["950", "12.3k", "4.5M"]
    assert [money(x) for x in (0, 0.004, 3.1, 12345.6)] == ["$0", "<$0.01", "$3.10",
                                                            "$12,346"]
    spent = {"a": (Spent(1234, 0.05), Spent(2_000_000, 12.5))}
    screen = build_screen([status("a")], {}, spent, beat=None, limits=Limits(), now=NOW,
                          window=3600)
    assert (screen.rows[0].turn, screen.rows[0].total) == ("1.2k tok $0.05",
                                                            "2.0M tok $12.50")



def budget(usd: float = 1.2, reprompts: int = 12, *, minutes: float = 0.0,
           started_at: float | None = NOW - 840, limits: dict[str, float] | None = None
           ) -> dict[str, object]:
    """A turn's figures as the watcher publishes them (``engine.budget.figures``)."""
    from loop_killer.engine.budget import Budget, TurnUse, figures

    shown = Budget(**{"reprompts": 100, "usd": 25.0, "minutes": minutes, **(limits or {})})
    return figures(shown, TurnUse(reprompts, started_at, usd, goal=True))


def test_a_live_turn_shows_its_spend_and_re_prompts_against_the_budget() -> None:
    """Beside what a session in a turn is doing: its spend and re-prompts against their
    limits, with their units, the limit nearest first (a narrow column keeps that one)."""
    screen = screen_of(
        status("goal", awaiting="reprompt", extra={"budget": budget(5.0)}),
        status("near", awaiting="reprompt",
               extra={"budget": budget(2.0, 95, minutes=60)}),
        status("plain", awaiting="turn", extra={"budget": budget(0.31, 0)}),
        status("between", extra={"budget": budget()}),  # waiting for you: the turn is over
        status("nothing", awaiting="turn"),  # no figures (no watcher, or no limit on)
        status("broken", awaiting="turn", extra={"budget": {"usd": "a lot"}}))
    doing = {row.session_id: row.doing for row in screen.rows}
    assert doing["goal"] == ("working · $5.00/$25 · 12/100 re-prompts",
                             "working · $5.00/$25", "working")
    assert doing["near"] == ("working · 95/100 re-prompts · 14/60 min · $2.00/$25",
                             "working · 95/100 re-prompts · 14/60 min",
                             "working · 95/100 re-prompts", "working")
    assert doing["plain"] == ("working · $0.31/$25", "working")  # no re-prompt: not said
    assert doing["between"] == ("waiting for you",)
    assert doing["nothing"] == doing["broken"] == ("working",)
    # Beside a re-prompt run's words too, its shorter wordings kept for a narrow column.
    (run,) = screen_of(status("run", run_length=4, awaiting="reprompt",
                              extra={"budget": budget(limits={"usd": 2.5})})).rows  # spend nearer
    assert run.doing == ("re-prompt run 4/6 · $1.20/$2.50 · 12/100 re-prompts",
                         "re-prompt run 4/6 · $1.20/$2.50",
                         "run 4/6 · $1.20/$2.50 · 12/100 re-prompts", "run 4/6 · $1.20/$2.50",
                         "re-prompt run 4/6", "run 4/6")


def test_the_budget_at_80x24_leaves_the_project_and_the_loop_readable() -> None:
    """The budget gets the room the project and the last loop's rule and outcome leave,
    never theirs: at 80 and 120 columns the nearest limit (the spend here), wider all."""
    statuses = [status(f"{i:08x}-bbbb", awaiting="reprompt",
                       extra={"budget": budget(1.2 + i, 2 + i)}) for i in range(30)]
    cwds = {s.session_id: f"/home/dev/a-rather-long-project-name-{i}"
            for i, s in enumerate(statuses)}
    stopped = {s.session_id: LastDetection("SAME_REPLY_TURNS", 3, NOW - 50, "", "cleared",
                                           NOW - 40) for s in statuses[::3]}
    screen = build_screen(statuses, stopped, {}, beat=None, limits=Limits(), now=NOW,
                          window=3600, home="/home/dev", cwds=cwds)
    for width in (80, 120, 200):
        console = Console(width=width, height=24, record=True, color_system=None,
                          force_terminal=True)
        console.print(render(screen, selected=0, width=width, height=24, message="",
                             now=NOW))
        lines = console.export_text().splitlines()
        assert len(lines) <= 24 and all(len(line) <= width for line in lines)
        rows = [line for line in lines if "-name-" in line]
        assert len(rows) == 19  # 24 lines less the title, summary, header, rule, help
        for line in rows:
            number = line.split("-name-")[1].split()[0]
            row = next(r for r in screen.rows if r.project_text.endswith(f"-{number}"))
            assert f"-name-{number} " in line
            assert ("re-prompts" in line) == (width == 200)
            assert f"${1.2 + int(number):.2f}/$25" in line  # the spend, whole, with its unit
            if row.session_id in stopped:
                assert "SAME_REPLY_TURNS" in line and "-> CLEARED" in line



# -- the screen ---------------------------------------------------------------------------


def _drawn(width: int, height: int, rows: int, selected: int = 0
           ) -> tuple[list[str], Screen]:
    """The lines drawn of ``rows`` sessions with long project names and long commands,
    every third with a loop stopped; and the screen they were drawn from."""
    statuses = [status(f"{i:08x}-aaaa", run_length=i % 3,
                       tool_repeats=[{"call": "Bash: " + "x" * 200, "count": 2}])
                for i in range(rows)]
    cwds = {s.session_id: f"/home/dev/a-rather-long-project-name-{i}"
            for i, s in enumerate(statuses)}
    stopped = {s.session_id: LastDetection("SAME_REPLY_TURNS", 3, NOW - 50, "", "cleared",
                                           NOW - 40) for s in statuses[::3]}
    spent = {s.session_id: (Spent(258_000, 0.18), Spent(12_345_678, 12_345.0))
             for s in statuses}
    screen = build_screen(statuses, stopped, spent, beat=None, limits=Limits(), now=NOW,
                          window=3600, home="/home/dev", cwds=cwds)
    console = Console(width=width, height=height, record=True, color_system=None,
                      force_terminal=True)
    console.print(render(screen, selected=selected, width=width, height=height, message="",
                         now=NOW))
    return console.export_text().splitlines(), screen


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_the_screen_keeps_the_words_that_matter_from_80_columns(width: int) -> None:
    """Every row's project (its ending, cut from the left), what it is doing and its loop's
    rule and outcome stay readable; figures get only the room those words leave, and
    when shown, are whole with their units (an audit found ``258.0k $0.…``)."""
    lines, screen = _drawn(width, 45, 30)
    assert all(len(line) <= width for line in lines)
    assert len(lines) <= 45
    header = next(line for line in lines if "PROJECT" in line)
    for row in screen.rows:
        (line,) = [line for line in lines if row.session_text in line]
        number = row.project_text.rsplit("-", 1)[1]
        assert f"project-name-{number} " in line
        assert line.split(row.session_text)[0].rstrip().endswith(f"-name-{number}")
        assert any(words in line for words in row.doing) or (
            "repeating x2: Bash: x" in line), (row.doing, line)  # (a command cut)
        if "SAME_REPLY_TURNS" in row.loop[0]:
            assert "SAME_REPLY_TURNS" in line and "-> CLEARED" in line
        if "TOTAL" in header:
            assert "12.3M tok $12,345" in line
        if "TURN" in header:
            assert "258.0k tok $0.18" in line
    assert ("TOTAL" in header) == (width >= 120)
    assert ("TURN" in header) == (width >= 200)


def test_rows_beyond_the_height_scroll_with_the_selection() -> None:
    assert visible_rows(10, 0, 40) == range(10)
    assert visible_rows(100, 0, 25) == range(20)
    assert visible_rows(100, 99, 25) == range(80, 100)
    assert 50 in visible_rows(100, 50, 25)
    lines, screen = _drawn(120, 25, 100, selected=60)
    ids = [row.session_text for row in screen.rows]
    assert len(lines) <= 25
    assert any("(80 more ↑↓)" in line for line in lines)
    assert any(ids[60] in line for line in lines)
    assert not any(ids[0] in line for line in lines)


def test_keys_and_windows() -> None:
    assert decode_keys(b"\x1b[A\x1b[Bjkcq") == ["up", "down", "down", "up", "c", "q"]
    assert decode_keys(b"\x1b[1;5Cq") == ["q"]  # an unknown sequence is skipped whole
    assert [parse_window(t) for t in ("90s", "30m", "1h", "2d", "15")] == [
        90, 1800, 3600, 172800, 900]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_window("soon")


# -- tokens, the state reader, the clear key ----------------------------------------------


def test_tokens_of_the_turn_and_the_session() -> None:
    session = Lines()
    lines = session.prompt() + session.answer("one", tool=True) + session.prompt()
    lines += session.answer("two") + session.answer("three")
    tally = UsageTally()
    blob = data(lines)
    for at in range(0, len(blob), 97):  # in any chunks
        tally.feed(blob[at:at + 97])
    turn = sum(t.total for _, t in tally.turn())
    total = sum(t.total for _, t in tally.session())
    assert (turn, total) == (40, 80)  # 20 tokens a reply; the first turn had two
    assert tally.offset == len(blob)


def test_the_cost_is_scans_cost_each_reply_priced_as_billed() -> None:
    """An audit found ``top`` pricing each model's summed tokens, so a reply whose prompt
    passed 200k tokens was priced at the base rate: each reply is priced as ``scan``
    prices it, in the turn and in the session."""
    from loop_killer.scan.prices import PriceTable
    from loop_killer.scan.records import Tokens
    from loop_killer.scan.summary import Collector
    from transcripts import Transcript, Use, scan_bytes

    session = Transcript(model="claude-sonnet-4-5-20250929")
    session.prompt("go")
    session.reply("small", Use(1000, 1000))
    session.prompt("again")
    session.reply("long prompt", Use(1000, 1000, 250_000))
    session.reply("small again", Use(1000, 1000))
    blob = session.data()
    tally = UsageTally()
    tally.feed(blob)
    prices = PriceTable()
    turn, total = tally.spent(prices)
    collector = Collector(prices)
    collector.add(scan_bytes(blob, path=f"/p/{session.session_id}.jsonl", project="p",
                             session_id=session.session_id))
    (scanned,) = collector.summary().sessions
    assert total.tokens == 256_000 and abs(total.usd - scanned.cost_usd) < 1e-9
    long_rate = prices.reply_cost("claude-sonnet-4-5-20250929", Tokens(1000, 1000, 250_000))
    base_rate = prices.cost([("claude-sonnet-4-5-20250929", Tokens(1000, 1000, 250_000))])
    assert long_rate[0] > base_rate[0]  # the case priced apart
    assert turn.tokens == 254_000 and abs(
        turn.usd - long_rate[0] - prices.reply_cost("claude-sonnet-4-5-20250929",
                                                    Tokens(1000, 1000))[0]) < 1e-9
    assert tally.spent(prices) == (turn, total)  # the earlier turns priced once, kept


def test_mean_tokens_of_a_loops_replies(tmp_path: Path) -> None:
    session = Lines()
    path = tmp_path / "t.jsonl"
    append(path, session.goal_loop(4))
    assert reply_tokens(str(path), 3) == 20.0
    assert reply_tokens(str(path), 3, tail=3000) == 20.0  # from a tail cut mid-line
    assert reply_tokens(str(tmp_path / "none.jsonl"), 3) == 0.0


def test_the_state_reader_follows_status_files_the_log_and_transcripts(env: Env) -> None:
    looping, quiet, old = Lines(cwd="/home/dev/loop"), Lines(cwd="/home/dev/quiet"), Lines()
    for session in (looping, quiet, old):
        append(session.path_in(env.root), session.prompt() + session.answer("ok"))
    path = looping.path_in(env.root)
    now = time.time()
    write_session_status(env.state, replace(
        status(looping.session_id), transcript_path=str(path), project=looping.project,
        run_length=3, last_activity=now))
    os.utime(old.path_in(env.root), (now - 7200, now - 7200))
    journal.append(env.state, journal.LoopRecord(session_id=looping.session_id,
                                                 rule="IDLE_TURNS", count=6))
    reader = StateReader(env.state, window=3600, root=env.root)
    reader.look(now)
    screen = reader.screen(now)
    assert {row.session_id for row in screen.rows} == {looping.session_id, quiet.session_id}
    first = screen.rows[0]
    assert first.session_id == looping.session_id
    assert first.doing[0] == "re-prompt run 3/6"
    assert first.loop[0].startswith("IDLE_TURNS x6 -> PENDING")
    assert first.total == "20 tok <$0.01"
    assert {row.project_text for row in screen.rows} == {"loop", "quiet"}  # by their cwd
    append(path, looping.answer("more"))
    journal.append(env.state, journal.OutcomeRecord(session_id=looping.session_id,
                                                    rule="IDLE_TURNS", outcome="cleared"))
    reader.look(time.time())
    first = reader.screen(time.time()).rows[0]
    assert first.total == "40 tok <$0.01"  # read on from where it was
    assert "-> CLEARED" in first.loop[0]
    assert not screen.watcher_running


def test_the_state_reader_shows_refusals_a_hook_logged_since_its_mark(env: Env) -> None:
    """"refused" comes from the log's refusal records (a hook's) since the tool hooks'
    mark, never from a count: a fresh install over an old history has neither."""
    from loop_killer.state.session import refusal_marker, state_path

    session = Lines(cwd="/home/dev/api")
    path = session.path_in(env.root)
    append(path, session.prompt() + session.answer("ok"))
    now = time.time()
    write_session_status(env.state, replace(
        status(session.session_id), transcript_path=str(path), project=session.project,
        last_activity=now, tool_repeats=[{"call": "Bash: sleep 5", "count": 4}]))
    refusal = journal.ToolRecord(refused=True, session_id=session.session_id,
                                 rule="TOOL_REPEAT", call="Bash: sleep 5", count=4,
                                 source="hook", at=now - 60)
    journal.append(env.state, refusal)  # before the mark: an earlier turn's
    reader = StateReader(env.state, window=3600, root=env.root)

    def doing() -> str:
        reader.look(time.time())
        (row,) = reader.screen(time.time()).rows
        return row.doing[0]

    assert doing() == "repeating x4: Bash: sleep 5"  # a count alone: nothing refused
    marker = Path(refusal_marker(state_path(env.state, session.session_id)))
    marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker.write_bytes(b"")
    os.utime(marker, (now - 30, now - 30))
    assert doing() == "repeating x4: Bash: sleep 5"  # the refusal logged predates the mark
    journal.append(env.state, replace(refusal, source="watcher", at=now - 2))  # not a hook
    assert doing() == "repeating x4: Bash: sleep 5"
    journal.append(env.state, replace(refusal, at=now - 1))  # one record per refused call
    assert doing() == "refused x1: Bash: sleep 5"
    # Its attempts are the tool hooks' own count (two in a row, nothing new between).
    from loop_killer.engine.tool_repeat import ToolRepeat
    from loop_killer.state import session as store
    from loop_killer.state.config import Settings

    counts = Settings().tool_counter()
    for _ in range(2):
        counts.note_refusal(ToolRepeat("Bash sleep 5", "Bash", "t", 4))
    store.save(state_path(env.state, session.session_id), store.put(None, store.MAIN, counts),
               refusable=True)
    os.utime(marker, (now - 30, now - 30))
    assert doing() == "refused x2: Bash: sleep 5"
    marker.unlink()  # the person spoke
    assert doing() == "repeating x4: Bash: sleep 5"


def test_the_clear_key_is_loop_killer_clear(env: Env) -> None:
    session = Lines(cwd="/home/dev/proj")
    append(session.path_in(env.root), session.prompt() + session.answer("ok"))
    said = ask_to_clear(session.session_id, session.project, root=env.root, state=env.state)
    assert said.startswith("clear request written for")
    request = peek_request(env.state, session.session_id)
    assert request is not None and request.rule == "MANUAL" and request.source == "manual"
    assert env.detections(session.session_id)[0]["rule"] == "MANUAL"
    said = ask_to_clear("0" * 8, "nothing", root=env.root, state=env.state)
    assert said.startswith("loop-killer clear: no session")


def test_no_hook_imports_the_heavy_libraries() -> None:
    """Every module of the hooks (Stop, tool calls) and what they share, imported in a fresh
    interpreter: rich, prometheus_client and opentelemetry stay out."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys\n"
        "import loop_killer.hooks, loop_killer.hooks, loop_killer.engine, loop_killer.state\n"
        "for package in (loop_killer.hooks, loop_killer.hooks, loop_killer.engine,\n"
        "                loop_killer.state):\n"
        "    for info in pkgutil.iter_modules(package.__path__, package.__name__ + '.'):\n"
        "        if not info.name.endswith('__main__'):  # (it runs the hook)\n"
        "            importlib.import_module(info.name)\n"
        "import loop_killer.state.config, loop_killer.cli\n"
        "heavy = sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] in ('rich', 'prometheus_client', 'opentelemetry'))\n"
        "print(heavy)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
