"""The table fits the terminal: a compact layout under 100 columns, columns measured as a
terminal shows them (CJK takes two), the top 20 loops unless asked, by cost or by time."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from loop_killer.printable import display_width
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.report import fit, human_report
from loop_killer.scan.summary import Collector, Summary, ordered
from transcripts import START, Transcript, Use, scan_bytes

SAME = "I am still working on the auth tests; the condition is not met yet."
PROJECTS = ["-home-dev-billing", "-home-dev-認証テスト", "-home-dev-支付系统-后端",
            "-home-dev-emoji-🚀-launch"]


def _summary(loops: int, *, until: float | None = None) -> Summary:
    collector = Collector(PriceTable(), until=until)
    for index in range(loops):
        session_id = f"{index:08x}-2222-4333-8444-555555555555"
        session = Transcript(session_id, start=START + timedelta(days=index))
        session.prompt("go")
        session.goal()
        for turn in range(3 + index % 4):
            session.reprompt()
            session.reply(SAME, Use(100 * (index + 1), 10 + turn))
        collector.add(scan_bytes(session.data(), path=f"/p/{session_id}.jsonl",
                                 project=PROJECTS[index % len(PROJECTS)],
                                 session_id=session_id))
    return collector.summary()


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] in "┌├│└"]


def test_at_80_columns_the_table_is_compact_and_fits() -> None:
    text = human_report(_summary(6), width=80)
    lines = _table_lines(text)
    assert lines and all(display_width(line) <= 80 for line in lines)
    assert "│ When" in lines[1] and "Session" not in lines[1]
    assert all(display_width(line) <= 80 for line in text.splitlines()[:len(lines)])


@pytest.mark.parametrize("width", [100, 110, 120, 133])
def test_between_100_and_the_full_tables_width_it_is_compact_and_fits(width: int) -> None:
    """An audit found the full table 134 columns wide from 100 to 133: it is compact there
    whenever the full one would not fit."""
    text = human_report(_summary(8), width=width)
    assert all(display_width(line) <= width for line in text.splitlines())
    assert "Avoidable" not in text  # the compact table


def test_at_140_columns_the_table_is_full_width() -> None:
    lines = _table_lines(human_report(_summary(6), width=140))
    assert "Session" in lines[1] and "Avoidable" in lines[1]
    assert all(display_width(line) <= 140 for line in lines)


@pytest.mark.parametrize("width", [0, 80, 140])
def test_cjk_and_emoji_project_names_keep_the_columns_aligned(width: int) -> None:
    lines = _table_lines(human_report(_summary(8), width=width))
    assert any("認" in line for line in lines) and any("支" in line for line in lines)
    widths = {display_width(line) for line in lines}
    assert len(widths) == 1  # every row as wide as the rules
    # and every column boundary in the same terminal column
    def bars(line: str) -> list[int]:
        column, found = 0, []
        for char in line:
            if char in "│┼├┤┌┐└┘┬┴":
                found.append(column)
            column += display_width(char)
        return found
    assert len({tuple(bars(line)) for line in lines}) == 1


def test_display_width_and_fit() -> None:
    assert display_width("abc") == 3
    assert display_width("認証") == 4
    assert display_width("e\u0301") == 1  # a combining accent takes no column
    assert fit("認証テスト", 5) == "認証…"  # never half a wide character
    assert display_width(fit("認証テスト", 6)) == 6


def test_the_table_shows_the_top_20_and_says_how_many_more() -> None:
    summary = _summary(23)
    text = human_report(summary, width=0)
    rows = [line for line in _table_lines(text) if "re-prompt" in line]
    assert len(rows) == 20
    assert "… and 3 more loops (--top 0 shows them all)" in text
    assert len([line for line in _table_lines(human_report(summary, width=0, top=5))
                if "re-prompt" in line]) == 5
    everything = human_report(summary, width=0, top=0)
    assert len([line for line in _table_lines(everything) if "re-prompt" in line]) == 23
    assert "more loops" not in everything


def test_loops_by_time_and_until() -> None:
    summary = _summary(6)
    by_cost = [row.loop.first_at for row in summary.loops]
    by_time = [row.loop.first_at for row in ordered(summary, "time").loops]
    assert by_time == sorted(by_cost) and by_cost != by_time
    until = (START + timedelta(days=2, hours=12)).timestamp()
    assert len(_summary(6, until=until).loops) == 3


def test_at_80_columns_every_line_fits_the_cost_state_lines_too() -> None:
    collector = Collector(PriceTable())
    for index in range(3):
        session_id = f"{index:08x}-2222-4333-8444-555555555555"
        session = Transcript(session_id, start=START)
        session.prompt("go")
        session.goal()
        for turn in range(4):
            session.reprompt()
            session.reply(SAME, Use(100, 10 + turn))
        session.cost_state(0.5)
        collector.add(scan_bytes(session.data(), path=f"/p/{session_id}.jsonl",
                                 project="-home-dev-a-project-with-a-rather-long-name",
                                 session_id=session_id))
    summary = replace(collector.summary(), from_cache=2)
    text = human_report(summary, width=80, root="/home/someone/.claude/projects", seconds=0.4)
    assert "by Claude Code" in text and "2 unchanged since the last scan" in text
    assert all(display_width(line) <= 80 for line in text.splitlines())
