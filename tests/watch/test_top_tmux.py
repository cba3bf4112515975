"""``loop-killer top`` on a real terminal: tmux, a real watcher, 30 live sessions in
~/dev/service-NN, two looping. Every service is named on the 120x45 screen and, scrolling,
on the 80x24 one, with the loops' rules and a goal's turn against its budget; the clear
key writes the request, and ``q`` quits (status 0)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from loop_killer.state.inbox import peek_request
from must_run import unavailable
from transcripts import Lines, append

from .conftest import Env
from .helpers import wait_for

SESSIONS = 30
LOOPING = 7
REPEATING = 12
WORKING = 3  # a goal's re-prompt being answered


def _top_command() -> str:
    found = shutil.which("loop-killer")
    command = [found] if found else [sys.executable, "-m", "loop_killer.cli"]
    return " ".join(command) + " top; echo TOP-EXIT=$?; sleep 600"


class Pane:
    """One tmux server of our own (its socket in a fresh folder) with one pane."""

    def __init__(self, command: str, *, width: int, height: int) -> None:
        self.folder = tempfile.mkdtemp(prefix="lk-top-")  # short: a socket path is limited
        self.socket = os.path.join(self.folder, "tmux")
        self.tmux("new-session", "-d", "-s", "top", "-x", str(width), "-y", str(height),
                  command)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True,
                              text=True, timeout=10, check=True)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "top")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "top", *keys)

    def shows(self, predicate: Callable[[str], bool], what: str, timeout: float = 20.0
              ) -> str:
        """The screen once ``predicate`` holds of it (looked at every 50 ms)."""
        text = ""

        def holds() -> bool:
            nonlocal text
            text = self.screen()
            return predicate(text)

        wait_for(holds, timeout, lambda: f"{what}; the screen:\n{text}", every=0.05)
        return text

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], check=False,
                       capture_output=True, timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def pane() -> Iterator[Callable[..., Pane]]:
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed: apt install tmux")
    panes: list[Pane] = []

    def start(command: str, *, width: int = 120, height: int = 45) -> Pane:
        panes.append(Pane(command, width=width, height=height))
        return panes[-1]

    yield start
    for made in panes:
        made.close()


def _names(screen: str) -> set[str]:
    """The services named whole on ``screen`` (not ``dev-service-07``, not cut)."""
    return set(_NAME.findall(screen))


_NAME = re.compile(r"(?<![\w/-])(service-\d\d)(?![\w-])")


def _row(screen: str, service: str) -> str:
    (line,) = [line for line in screen.splitlines() if f"{service} " in line]
    return line


def test_top_tells_thirty_services_apart_at_80x24_and_120x45(
        env: Env, spawn_watcher, pane) -> None:
    """30 live sessions in ~/dev/service-00 ... service-29 (their transcripts' folders all
    read ``-tmp-...-dev-service-NN``): each row names its service, and a loop's rule and
    outcome are on screen at 120x45 and at 80x24 (where the rows scroll). A call that
    repeats with no hook loaded is never said to be refused."""
    watcher = spawn_watcher()
    names = [f"service-{index:02d}" for index in range(SESSIONS)]
    sessions = [Lines(cwd=str(env.home / "dev" / name)) for name in names]
    for index, session in enumerate(sessions):
        lines = session.prompt() + session.answer("Working on it.", tool=True)
        if index == WORKING:
            lines += session.goal() + session.answer("Migrated 3 tables.") + session.reprompt()
        if index == LOOPING:
            lines = session.goal_loop(3)  # three similar replies to re-prompts
        if index == REPEATING:  # the same result 5 times: past the refusal, no hook
            lines = session.prompt()
            for _ in range(5):
                lines += session.answer("Running the tests again.", tool=True)
        append(session.path_in(env.root), lines)
    looping, repeating = names[LOOPING], names[REPEATING]
    env.logged(1, sessions[LOOPING].session_id)
    env.logged(1, sessions[REPEATING].session_id)
    wait_for(lambda: len(os.listdir(env.state / "status")) >= SESSIONS, 15,
             "a status for every session")

    top = pane(_top_command(), width=120, height=45)
    running = f"watcher running (pid {watcher.proc.pid}, {SESSIONS} sessions followed"
    wide = top.shows(lambda text: _names(text) == set(names) and "SAME_REPLY_TURNS" in text
                     and "TOOL_REPEAT" in text and running in text,
                     "every service by name, both loops' rules, the watcher's next beat")
    assert all(len(line) <= 120 for line in wide.splitlines())
    assert all(s.session_id[:8] in wide for s in sessions)
    loop_row = _row(wide, looping)
    assert "SAME_REPLY_TURNS x3 -> PENDING" in loop_row and "clear requested" in loop_row
    assert "<$0.01" in loop_row  # its cost (claude-opus-5-5, 20 tokens a reply)
    tool_row = _row(wide, repeating)
    assert "still repeating x5: Bash: npm test" in tool_row
    assert "TOOL_REPEAT x3 -> NOT WARNED" in tool_row  # seen by the watcher alone
    assert "refused" not in tool_row and ": 0 refused," in wide
    header = next(line for line in wide.splitlines() if "PROJECT" in line)
    assert "TOTAL" in header
    assert all(" tok " in _row(wide, name) for name in names)  # every figure's unit
    # A turn in progress against its budget (the watcher's figures), the nearest limit first.
    assert "working · 1/100 re-prompts" in _row(wide, names[WORKING])

    # 80x24: no figures, the words kept; 19 rows at a time, the rest a scroll away.
    top.tmux("resize-window", "-t", "top", "-x", "80", "-y", "24")
    narrow = top.shows(lambda text: "PROJECT" in text and "TOTAL" not in text
                       and len(text.splitlines()) <= 24, "the 80x24 layout")
    assert all(len(line) <= 80 for line in narrow.splitlines())
    loop_row, tool_row = _row(narrow, looping), _row(narrow, repeating)
    assert "SAME_REPLY_TURNS" in loop_row and "-> PENDING" in loop_row
    assert "clear requested" in loop_row
    assert "TOOL_REPEAT" in tool_row and "-> NOT WARNED" in tool_row
    assert "still repeating x5: Bash: n" in tool_row
    seen = _names(narrow)
    assert len(seen) == 19 and {looping, repeating} <= seen
    top.keys(*["Down"] * SESSIONS)
    wide_lines: list[str] = []
    working: list[str] = []  # its row, once scrolled into view (the working rows are last)

    def all_named(text: str) -> bool:
        seen.update(_names(text))
        wide_lines.extend(line for line in text.splitlines() if len(line) > 80)
        working.extend(line for line in text.splitlines() if f"{names[WORKING]} " in line)
        return seen == set(names)

    top.shows(all_named, "every service by name, scrolling down")
    assert not wide_lines
    assert working and "working · 1/100 re-prompts" in working[-1]

    # The clear key on the last row (a session at rest): c, then y to confirm.
    top.keys("c")
    asked = top.shows(lambda text: "at its next Stop? y: yes, other keys: no" in text,
                      "the question, whole at 80 columns")
    question = next(line for line in asked.splitlines() if "? y: yes" in line)
    chosen = next(s for s in sessions if s.session_id[:8] in question)
    assert chosen not in (sessions[LOOPING], sessions[REPEATING])
    top.keys("y")
    said = top.shows(lambda text: "clear request written for" in text, "the clear's answer")
    assert len(said.splitlines()) <= 24 and said.splitlines()[-1].startswith("q quit")
    request = peek_request(env.state, chosen.session_id)
    assert request is not None and request.rule == "MANUAL" and request.source == "manual"

    top.keys("q")
    top.shows(lambda text: "TOP-EXIT=0" in text, "top to quit with status 0")


def test_top_says_when_no_watcher_runs(env: Env, pane) -> None:
    session = Lines(cwd="/home/dev/alone")
    append(session.path_in(env.root), session.prompt() + session.answer("ok"))
    top = pane(_top_command(), width=80, height=24)
    shown = top.shows(lambda text: "WATCHER NOT RUNNING" in text, "the no-watcher line")
    assert session.session_id[:8] in shown  # listed from the project folders all the same
    top.keys("q")
    top.shows(lambda text: "TOP-EXIT=0" in text, "top to quit")
    assert not Path(env.state / "requests").exists()
