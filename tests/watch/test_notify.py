"""Desktop notifications (``loop-killer-watch --notify``): a sentence per outcome, each
session's first stop at once, a summary of the rest (sent when the watcher stops too),
nothing but one log line where no notifier exists."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from loop_killer.watch.narrate import Notice
from loop_killer.watch.notify import Notifier, Throttle, notifier_command
from transcripts import Lines, append

from .helpers import wait_for


def _stop(session: str, text: str, who: str = "billing") -> Notice:
    return Notice(session, who, text, stop=True)


def _warn(session: str, text: str, who: str = "billing") -> Notice:
    return Notice(session, who, text, stop=False)


def test_each_sessions_first_stop_shows_at_once_and_more_of_it_become_one_summary():
    throttle = Throttle(window=60)
    assert throttle.offer(_stop("s1", "billing: loop stopped"), now=0) == [
        "billing: loop stopped"]
    # Another session's first stop is never held back by the first one's window.
    assert throttle.offer(_stop("s2", "auth: loop stopped", "auth"), now=1) == [
        "auth: loop stopped"]
    assert throttle.offer(_stop("s1", "billing: again"), now=2) == []
    assert throttle.offer(_stop("s1", "billing: and again"), now=3) == []
    assert throttle.next_due == 60
    assert throttle.due(now=59) == []
    assert throttle.due(now=60) == [
        "billing: 2 more loops stopped in the last 60 s; see the watcher's terminal"]
    assert throttle.next_due is None


def test_a_warning_never_holds_back_a_stop():
    throttle = Throttle(window=60)
    assert throttle.offer(_warn("s1", "billing: Bash: npm test gave the same result 3 "
                                      "times; the model was warned"), now=0) != []
    assert throttle.offer(_stop("s1", "billing: loop stopped, goal cleared"), now=1) == [
        "billing: loop stopped, goal cleared"]


def test_what_is_gathered_is_shown_when_the_watcher_stops():
    shown: list[list[str]] = []
    notifier = Notifier(throttle=Throttle(window=600), command=lambda text: ["show", text],
                        run=shown.append)
    notifier.offer(_stop("s1", "billing: loop stopped"))
    wait_for(lambda: len(shown) == 1, what="the first stop shown")
    notifier.offer(_stop("s1", "billing: loop stopped again"))
    notifier.close()
    assert [argv[1] for argv in shown] == [
        "billing: loop stopped",
        "billing: 1 more loop stopped in the last 600 s; see the watcher's terminal"]


def test_a_slow_notifier_still_shows_everything_left_at_the_stop_in_one_call():
    """Each call takes its time: what was still queued and the summaries gathered go in
    one last notification (an audit found two summaries dropped behind queued calls)."""
    import threading

    shown: list[str] = []
    release = threading.Event()

    def slow(argv: list[str]) -> None:
        shown.append(argv[1])
        release.wait(5)  # the first call holds the worker until the stop is under way

    notifier = Notifier(throttle=Throttle(window=600), command=lambda text: ["show", text],
                        run=slow)
    for session, who in (("s1", "billing"), ("s2", "auth")):
        for n in range(3):
            notifier.offer(_stop(session, f"{who}: loop {n} stopped", who))
    wait_for(lambda: len(shown) == 1, what="the first call under way")
    closing = threading.Thread(target=notifier.close)
    closing.start()
    # The stop has gathered what is left into one notification, and its end mark.
    wait_for(lambda: notifier._outbox.qsize() == 2, what="the last notification queued")
    release.set()
    closing.join(20)
    assert not closing.is_alive()
    assert shown[0] == "billing: loop 0 stopped"
    assert shown[1:] == ["auth: loop 0 stopped\n"
                         "billing: 2 more loops stopped in the last 600 s; see the watcher's "
                         "terminal\n"
                         "auth: 2 more loops stopped in the last 600 s; see the watcher's "
                         "terminal"]


def test_the_notifier_is_notify_send_or_osascript_and_never_a_shell():
    linux = notifier_command("LOOP \x1b]0;x\x07 proj", platform="linux",
                             which=lambda name: "/usr/bin/" + name)
    assert linux is not None and linux[0] == "notify-send" and "\x1b" not in linux[-1]
    mac = notifier_command('say "hi"', platform="darwin", which=lambda name: "/usr/bin/osascript")
    assert mac is not None and mac[:2] == ["osascript", "-e"] and '\\"hi\\"' in mac[2]
    assert notifier_command("x", platform="linux", which=lambda name: None) is None


def test_none_available_is_said_once_in_the_log(caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    notifier = Notifier(throttle=Throttle(window=0), command=lambda text: None)
    for attempt in range(3):
        notifier.offer(_stop(f"s{attempt}", "billing: loop stopped"))
    notifier.close()
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


def test_the_watcher_notifies_once_the_outcome_is_known(env, start_watcher,
                                                        fake_notify_send):
    notifier = Notifier(throttle=Throttle(window=0))
    env.root.mkdir(parents=True)
    runner = start_watcher(notify=notifier.offer)
    s = Lines(cwd="/home/dev/billing")
    path = s.path_in(env.root)
    append(path, s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    assert not fake_notify_send.exists()  # a request is no news yet
    append(path, s.cleared())
    wait_for(lambda: fake_notify_send.exists() and fake_notify_send.read_text(),
             what="the notification")
    runner.stop()
    notifier.close()
    assert fake_notify_send.read_text().splitlines() == [
        "home-dev-billing: loop stopped, goal cleared (3 similar replies to re-prompts)"]
