"""``loop-killer top`` on a real terminal: tmux, a real watcher, 30 live sessions, one
looping. Every session is on the 120-column screen with the loop's rule, the clear key
writes the request, the screen fits 80 columns, and ``q`` quits (status 0)."""

from __future__ import annotations

import os
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


def test_top_shows_thirty_live_sessions_one_looping(env: Env, spawn_watcher, pane) -> None:
    watcher = spawn_watcher()
    sessions = [Lines(cwd=f"/home/dev/service-{index:02d}") for index in range(SESSIONS)]
    for index, session in enumerate(sessions):
        lines = session.prompt() + session.answer("Working on it.", tool=True)
        if index == LOOPING:
            lines = session.goal_loop(3)  # three similar replies to re-prompts
        append(session.path_in(env.root), lines)
    looping = sessions[LOOPING]
    env.logged(1, looping.session_id)
    wait_for(lambda: len(os.listdir(env.state / "status")) >= SESSIONS, 15,
             "a status for every session")

    top = pane(_top_command())
    running = f"watcher running (pid {watcher.proc.pid}, {SESSIONS} sessions followed"
    shown = top.shows(lambda text: all(s.session_id[:8] in text for s in sessions)
                      and "SAME_REPLY_TURNS" in text and running in text,
                      "every session, the loop's rule, the watcher's next beat")
    loop_row = next(line for line in shown.splitlines() if looping.session_id[:8] in line)
    assert "SAME_REPLY_TURNS x3" in loop_row and "clear requested" in loop_row
    assert "<$0.01" in loop_row  # its tokens (claude-opus-5-5, 20 a reply) and cost

    # The clear key, on another session: down one row, c, then y to confirm.
    top.keys("Down", "c")
    asked = top.shows(lambda text: "? y: ask its next Stop hook" in text, "the question")
    question = next(line for line in asked.splitlines() if "? y: ask" in line)
    chosen = next(s for s in sessions if s.session_id[:8] in question)
    assert chosen is not looping
    top.keys("y")
    top.shows(lambda text: "clear request written for" in text, "the clear's answer")
    request = peek_request(env.state, chosen.session_id)
    assert request is not None and request.rule == "MANUAL" and request.source == "manual"

    # 80 columns: the figures share a column; every line fits; sessions still listed.
    top.tmux("resize-window", "-t", "top", "-x", "80", "-y", "45")
    narrow = top.shows(lambda text: "TURN/TOTAL" in text, "the 80-column layout")
    assert all(len(line) <= 80 for line in narrow.splitlines())
    assert all(s.session_id[:8] in narrow for s in sessions)

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
