"""What a person sees fits the terminal: at 80 columns, on a pseudo-terminal, every line
of ``config``, ``status``, ``doctor`` and the watcher is at most 80 columns, wrapped at
spaces under a hanging indent. Through a pipe, the commands' reports and every ``--help``
fit 80 columns too (never more than 100: a word longer than a line), no line padded with
spaces; the watcher's log keeps each record on one line there."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from loop_killer.printable import display_width, wrap
from transcripts import Lines, append

from .terminal import OnTerminal, piped_on_a_terminal


def _cli(*args: str) -> list[str]:
    found = shutil.which("loop-killer")
    return [found, *args] if found else [sys.executable, "-m", "loop_killer.cli", *args]


def _fits(text: str, columns: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if display_width(line) > columns]
    assert not too_wide, f"wider than {columns} columns:\n" + "\n".join(too_wide)


def test_wrap_cuts_at_spaces_under_a_hanging_indent():
    line = "12:00:01  LOOP      billing  a26ba613  SAME_REPLY_TURNS: " + "word " * 30
    pieces = wrap(line, 80, indent=10)
    assert len(pieces) > 1 and all(len(piece) <= 80 for piece in pieces)
    assert all(piece.startswith(" " * 10) and piece[10] != " " for piece in pieces[1:])
    assert " ".join(piece.strip() for piece in pieces) == line.strip()
    assert wrap(line, None) == [line]  # a file or a pipe: one record per line
    assert wrap("x" * 100, 40, indent=4) == ["x" * 40, "    " + "x" * 36, "    " + "x" * 24]


def test_config_fits_80_columns_on_a_terminal_and_in_a_pipe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (a list longer than a line: nothing is ignored by default)
    monkeypatch.setenv("LOOP_KILLER_IGNORE_TOOLS", ",".join(
        ["default", "TaskOutput", "BashOutput", "ScheduleWakeup", "mcp__ci__*", "Monitor",
         "WaitForMcpServers", "ReadNotifications", "AgentOutput"]))
    shown = OnTerminal(_cli("config")).finish()
    _fits(shown)
    lines = shown.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("ignore_tools"))
    assert lines[row + 1].startswith(" " * len("ignore_tools"))  # wrapped in its column
    piped = piped_on_a_terminal(_cli("config"), columns=191)  # (`config | cat`: 80 columns)
    _fits(piped)
    lines = piped.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("ignore_tools"))
    assert lines[row + 1].startswith(" " * len("ignore_tools"))


def test_doctor_fits_80_columns_on_a_terminal():
    shown = OnTerminal(_cli("doctor")).finish(60)
    _fits(shown)
    assert any(line.startswith(("OK", "WARN", "FAIL")) for line in shown.splitlines())


def test_status_fits_80_columns_on_a_terminal(env):
    import time

    from loop_killer.state import journal
    from loop_killer.state.status import SessionStatus, write_session_status

    for n in range(3):  # (CJK takes two columns: an audit found status 90 wide with it)
        s = Lines(cwd=f"/home/dev/a-rather-long-project-folder-name-{n}" if n < 2 else
                  "/home/dev/認証テストの長いプロジェクトフォルダ名")
        path = s.path_in(env.root)
        append(path, s.goal_loop(2))
        write_session_status(env.state, SessionStatus(
            session_id=s.session_id, transcript_path=str(path), project=s.project,
            offset=0, run_length=0, chain_length=0, awaiting=None, last_answer_uuid="",
            last_answer_digest="", last_activity=time.time(), updated_at=time.time(),
            tool_repeats=[{"call": "Bash: cat /home/dev/some/long/path/to/a/file.txt | "
                                   "grep -v something | sort | uniq -c", "count": 4}]))
        journal.append(env.state, journal.decode({
            "event": "detection", "session_id": s.session_id, "rule": "SAME_REPLY_TURNS",
            "count": 3, "project": s.project, "source": "hook", "answer_uuid": f"a{n}",
            "snippet": "I am still working on getting the auth tests to pass, again."}))
    shown = OnTerminal(_cli("status")).finish()
    _fits(shown)
    assert "a-rather-long-project-folder-name-0" in shown.replace("\n", "")


def test_the_watchers_lines_fit_80_columns_on_a_terminal(env):
    from .conftest import watch_command

    env.root.mkdir(parents=True)
    watcher = OnTerminal([*watch_command(), "--reconcile-interval", "1"])
    try:
        watcher.read_until(lambda text: "caught up" in text or "watching" in text)
        s = Lines(cwd="/home/dev/a-project-whose-name-is-long-enough-to-matter")
        append(s.path_in(env.root), s.goal_loop(3))
        shown = watcher.read_until(lambda text: "clear requested" in text)
        os.kill(watcher.proc.pid, signal.SIGINT)
        shown = watcher.finish()
    finally:
        watcher.kill()
    _fits(shown)
    lines = shown.splitlines()
    loop = next(i for i, line in enumerate(lines) if "  LOOP  " in line)
    assert lines[loop + 1].startswith(" " * 10) and not lines[loop + 1][10].isspace()


def test_the_log_formatter_wraps_only_on_a_terminal(tmp_path):
    from loop_killer.watch.main import PrintableFormatter

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "word " * 40, None, None)
    with open(tmp_path / "log", "w") as to_a_file:
        formatter = PrintableFormatter("%(asctime)s  %(message)s", "%H:%M:%S",
                                       stream=to_a_file)
        assert "\n" not in formatter.format(record)


def _plant_history(root: Path) -> None:
    """A re-prompt loop and a tool-repeat loop, in projects with long names."""
    goal = Lines(cwd="/home/dev/a-rather-long-project-folder-name-for-the-goal-loop")
    append(goal.path_in(root), goal.goal_loop(4))
    tools = Lines(cwd="/home/dev/認証テストの長いプロジェクトフォルダ名")
    append(tools.path_in(root), tools.prompt() + [
        line for _ in range(4) for line in tools.answer("Running the tests again.", tool=True)])


def _argv(command: str) -> list[str]:
    if command == "loop-killer-watch --help":
        from .conftest import watch_command

        return [*watch_command(), "--help"]
    return _cli(*command.split())


def _every_report_and_help() -> list[str]:
    from loop_killer.cli import COMMANDS

    return ["config", "doctor", "status", "scan --jobs 1", "--help",
            *(f"{name} --help" for name in COMMANDS), "loop-killer-watch --help"]


@pytest.mark.parametrize("command", _every_report_and_help())
def test_what_is_piped_fits_100_columns_and_no_line_ends_in_spaces(command: str) -> None:
    """``loop-killer COMMAND | cat`` in a 191-column terminal: every line at most 100
    columns (80, save a word longer than that), none padded with spaces."""
    from loop_killer.state.files import projects_dir

    _plant_history(projects_dir())
    shown = piped_on_a_terminal(_argv(command), columns=191)
    assert shown.strip(), f"{command} printed nothing"
    if command == "scan --jobs 1":
        assert "2 loops" in shown  # (the table, not "No loops found.")
    _fits(shown, 100)
    padded = [line for line in shown.splitlines() if line != line.rstrip()]
    assert not padded, "lines ending in spaces:\n" + "\n".join(map(repr, padded))
