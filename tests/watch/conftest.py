"""Fixtures for the watcher tests: a real watchdog observer over a temporary tree.

Every test has its own HOME and CLAUDE_CONFIG_DIR (tests/conftest.py); the watcher runs
in-process in a thread (``start_watcher``) or as the real ``loop-killer-watch`` program
(``spawn_watcher``). Waits are bounded polls, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from loop_killer.state import journal
from loop_killer.state.inbox import request_path
from loop_killer.state.status import SessionStatus, read_heartbeat, read_session_status
from loop_killer.watch.watcher import Watcher
from transcripts import Lines, append

from .helpers import wait_for


@dataclass
class Env:
    home: Path
    root: Path
    state: Path

    def request(self, session_id: str) -> Path:
        return request_path(self.state, session_id)

    def has_request(self, session_id: str) -> bool:
        return self.request(session_id).exists()

    def records(self, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """The detection log's lines as they are on disk (each one a record: it reads)."""
        path = journal.journal_path(self.state)
        lines = path.read_bytes().split(b"\n")[:-1] if path.exists() else []  # whole ones
        assert all(journal.decode(json.loads(line)) for line in lines)
        return [r for r in map(json.loads, lines)
                if (event is None or r.get("event") == event)
                and all(r.get(k) == v for k, v in match.items())]

    def detections(self, session_id: str | None = None) -> list[dict[str, Any]]:
        match = {} if session_id is None else {"session_id": session_id}
        return self.records("detection", **match)

    def logged(self, count: int, session_id: str | None = None) -> list[dict[str, Any]]:
        """The detections logged, once there are ``count`` (the log line comes just after
        the request file)."""
        return wait_for(lambda: len(found := self.detections(session_id)) >= count and found,
                        what=f"{count} detection(s) in the log")

    def status(self, session_id: str):
        return read_session_status(self.state, session_id)

    def read_to_end(self, session_id: str, path: Path) -> SessionStatus:
        """The session's status once it says the watcher read ``path`` to its end: a
        request those lines make is written by then (before the status)."""
        return wait_for(lambda: (st := self.status(session_id))
                        and st.offset == path.stat().st_size and st,
                        what=f"{path.name} read to its end")

    def two_loops(self) -> tuple[Lines, Lines, dict[str, Any]]:
        """A tool-repeat loop the watcher finds in a live transcript (the same call, the
        same result, three times in the person's turn) and a re-prompt loop it fires on,
        whose Stop hook's word (``cleared``) is then logged: what the metrics count. The
        two sessions' lines, and the re-prompt loop's detection as logged."""
        tools = Lines(cwd="/home/dev/shop")
        lines = tools.prompt()
        for _ in range(3):
            lines += tools.answer("Running the tests again.", tool=True, output="1 failing")
        append(tools.path_in(self.root), lines)
        goal = Lines(cwd="/home/dev/billing")
        append(goal.path_in(self.root), goal.goal_loop(3))
        (fired,) = self.logged(1, goal.session_id)
        journal.append(self.state, journal.OutcomeRecord(
            session_id=goal.session_id, answer_uuid=fired["answer_uuid"], rule=fired["rule"],
            outcome="cleared", project=fired["project"],
            transcript_path=fired["transcript_path"], source="hook"))
        return tools, goal, fired


@pytest.fixture
def env(isolated_home: Path) -> Env:
    config = Path(os.environ["CLAUDE_CONFIG_DIR"])
    return Env(isolated_home, config / "projects", config / "loop-killer")


class Running:
    """A watcher running in a thread of this process."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="watcher", daemon=True)
        self.thread.start()
        assert watcher.ready.wait(10), "the watcher did not finish its catch-up"

    def _run(self) -> None:
        try:
            self.watcher.run()
        except BaseException as error:  # noqa: BLE001 (raised again by stop())
            self.error = error

    def stop(self) -> None:
        self.watcher.stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the watcher did not stop"
        if self.error is not None:
            raise self.error


@pytest.fixture
def start_watcher(env: Env) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def start(**options: Any) -> Running:
        options.setdefault("root", env.root)
        options.setdefault("state", env.state)
        options.setdefault("home", str(env.home))
        runner = Running(Watcher(**options))
        running.append(runner)
        return runner

    yield start
    for runner in running:
        if runner.thread.is_alive():
            runner.stop()


def watch_command() -> list[str]:
    found = shutil.which("loop-killer-watch")
    return [found] if found else [sys.executable, "-m", "loop_killer.watch.main"]


class Spawned:
    """The real ``loop-killer-watch`` program."""

    def __init__(self, env: Env, *args: str) -> None:
        self.env = env
        self.out = env.home / f"watch-{time.monotonic_ns()}.out"
        self.err = self.out.with_suffix(".err")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [*watch_command(), "--reconcile-interval", "1", *args],
                stdout=out, stderr=err, env=os.environ.copy(), start_new_session=True)

    def wait_ready(self, timeout: float = 15.0) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, f"watcher exited early: {self.stderr()}"
            beat = read_heartbeat(self.env.state)
            return beat is not None and beat.pid == self.proc.pid
        wait_for(ready, timeout, "the watcher's first heartbeat")

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        os.kill(self.proc.pid, signum)

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def spawn_watcher(env: Env) -> Iterator[Callable[..., Spawned]]:
    spawned: list[Spawned] = []

    def spawn(*args: str, ready: bool = True) -> Spawned:
        process = Spawned(env, *args)
        spawned.append(process)
        if ready:
            process.wait_ready()
        return process

    yield spawn
    for process in spawned:
        process.kill()

