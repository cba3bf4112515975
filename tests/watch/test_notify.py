"""Desktop notifications (``loop-killer-watch --notify``): one per loop, a summary for a
storm, nothing but one log line where no notifier exists."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from loop_killer.watch.notify import NotifyHandler, Throttle, install, notifier_command

from .helpers import wait_for
from .lines import Lines, append


def test_the_first_loop_shows_at_once_and_a_storm_becomes_one_summary():
    throttle = Throttle(window=60)
    assert throttle.offer("LOOP a", now=0) == ["LOOP a"]
    assert throttle.offer("LOOP b", now=1) == []
    assert throttle.offer("LOOP c", now=2) == []
    assert throttle.next_due == 60
    assert throttle.due(now=59) == []
    (summary,) = throttle.due(now=60)
    assert summary.startswith("2 more loops stopped in the last 60 s")
    assert throttle.next_due is None
    assert throttle.offer("LOOP d", now=61) == []  # still quiet after the summary
    # A late loop brings out the summary of the last window; it then waits for its own.
    summary = "1 more loop stopped in the last 60 s; see the watcher's terminal"
    assert throttle.offer("LOOP e", now=200) == [summary]
    assert throttle.next_due == 260


def test_the_notifier_is_notify_send_or_osascript_and_never_a_shell():
    linux = notifier_command("LOOP \x1b]0;x\x07 proj", platform="linux",
                             which=lambda name: "/usr/bin/" + name)
    assert linux is not None and linux[0] == "notify-send" and "\x1b" not in linux[-1]
    mac = notifier_command('say "hi"', platform="darwin", which=lambda name: "/usr/bin/osascript")
    assert mac is not None and mac[:2] == ["osascript", "-e"] and '\\"hi\\"' in mac[2]
    assert notifier_command("x", platform="linux", which=lambda name: None) is None


def test_none_available_is_said_once_in_the_log(caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    handler = NotifyHandler(throttle=Throttle(window=0), command=lambda text: None)
    try:
        logger = logging.getLogger("test.notify")
        logger.addHandler(handler)
        for _ in range(3):
            logger.warning("LOOP proj s1 SAME_REPLY_TURNS")
        wait_for(lambda: any("neither notify-send" in r.getMessage() for r in caplog.records),
                 what="the log line")
    finally:
        logging.getLogger("test.notify").removeHandler(handler)
        handler.close()
    assert sum("neither notify-send" in r.getMessage() for r in caplog.records) == 1


@pytest.fixture
def fake_notify_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notify-send on PATH that writes its last argument to a file, one line each."""
    shown = tmp_path / "shown.txt"
    tool = tmp_path / "bin" / "notify-send"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\nfor last; do :; done\necho "$last" >> {shown}\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    return shown


def test_the_watcher_notifies_each_loop_it_reports(env, start_watcher, fake_notify_send):
    handler = install(throttle=Throttle(window=0))
    try:
        env.root.mkdir(parents=True)
        start_watcher()
        s = Lines()
        append(s.path_in(env.root), s.goal_loop(3))
        wait_for(lambda: fake_notify_send.exists() and fake_notify_send.read_text(),
                 what="the notification")
    finally:
        logging.getLogger("loop_killer.watch.events").removeHandler(handler)
        handler.close()
    (line,) = fake_notify_send.read_text().splitlines()
    assert line.startswith("LOOP") and "SAME_REPLY_TURNS" in line and s.session_id[:8] in line
