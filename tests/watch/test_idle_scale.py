"""The safety net at scale: an idle pass stats only what is live, and still every lost
event is caught (within a pass for a live session, at the sweep for a dormant one).

These tests drive one watcher's start-up and reconcile passes from the test's own
thread (no loop running), so each pass is a sync point and its work can be counted.
The time an idle watcher costs is measured by ``scripts/bench`` ("idle at scale").
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from loop_killer.watch import safety_net as safety_net_module
from loop_killer.watch import watcher as watcher_module
from loop_killer.watch.observer import FILE
from loop_killer.watch.safety_net import LIVE_MAX
from loop_killer.watch.watcher import Watcher
from transcripts import Lines, append

DAY = 86400.0


class Passes:
    """A watcher whose start-up and reconcile passes the test runs, counting the stats
    of single transcripts and the syncs they lead to."""

    def __init__(self, watcher: Watcher, monkeypatch: pytest.MonkeyPatch) -> None:
        self.watcher = watcher
        self.stats = 0
        self.synced: set[str] = set()  # paths synced (a sync may call itself again)
        real_seen_of, real_sync = watcher_module.seen_of, watcher.sessions.sync

        def seen_of(info: os.stat_result):
            self.stats += 1
            return real_seen_of(info)

        def sync(path: str) -> bool:
            self.synced.add(path)
            return real_sync(path)

        monkeypatch.setattr(watcher_module, "seen_of", seen_of)
        monkeypatch.setattr(safety_net_module, "seen_of", seen_of)
        monkeypatch.setattr(watcher.sessions, "sync", sync)

    def quick(self) -> None:
        """One pass between two sweeps."""
        self.stats, self.synced = 0, set()
        self.watcher.net.next_sweep = time.monotonic() + 3600
        self.watcher._reconcile()

    def sweep(self) -> None:
        self.stats, self.synced = 0, set()
        self.watcher.net.next_sweep = 0.0
        self.watcher._reconcile()


@pytest.fixture
def passes(env, monkeypatch) -> Iterator[Passes]:
    env.root.mkdir(parents=True, exist_ok=True)
    watcher = Watcher(root=env.root, state=env.state, home=str(env.home))
    yield Passes(watcher, monkeypatch)
    watcher._shutdown()


def old_sessions(env, count: int, folders: int = 4) -> list[Path]:
    """``count`` finished sessions last written days ago."""
    paths = []
    for i in range(count):
        s = Lines(cwd=f"/home/dev/project{i % folders}")
        path = s.path_in(env.root)
        append(path, s.prompt() + s.answer("Done.", tool=True))
        moment = time.time() - 30 * DAY - i
        os.utime(path, (moment, moment))
        paths.append(path)
    return paths


def offset_of(env, path: Path) -> int:
    status = env.status(path.stem)
    return status.offset if status is not None else -1


def test_an_idle_pass_over_dormant_sessions_stats_none_of_them(env, passes):
    old_sessions(env, 200)
    passes.watcher._start()
    assert len(passes.watcher.sessions.tracked) == 200
    for _ in range(3):  # the first one lists the folders just written once more
        passes.quick()
        assert passes.stats == 0 and passes.synced == set()
    passes.sweep()
    assert passes.stats == 200 and passes.synced == set()


def test_a_lost_event_on_a_live_session_is_caught_by_the_next_pass(env, passes):
    old_sessions(env, 50)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2) + s.reprompt())
    passes.watcher._start()
    append(path, s.api_request())
    passes.watcher._handle([(FILE, str(path))])  # seen changing: the session is live
    append(path, s.answer())  # its event lost
    passes.quick()
    assert passes.stats == 1  # the live session only
    assert env.has_request(s.session_id)


def test_a_lost_event_on_a_dormant_session_is_caught_by_the_sweep(env, passes):
    (path, *_) = old_sessions(env, 20)
    passes.watcher._start()
    size = path.stat().st_size
    s = Lines(path.stem, cwd="/home/dev/project0")
    append(path, s.prompt("and now the docs") + s.answer("Writing.", tool=True))  # lost
    passes.quick()
    assert offset_of(env, path) < path.stat().st_size
    passes.sweep()
    assert passes.synced == {str(path)}
    assert offset_of(env, path) == path.stat().st_size > size
    append(path, s.prompt("more") + s.answer("Sure.", tool=True))  # lost again
    passes.quick()  # live now: a pass is enough
    assert offset_of(env, path) == path.stat().st_size


def test_a_transcript_created_with_its_event_lost_is_found_by_its_folder(env, passes):
    old_sessions(env, 40)
    passes.watcher._start()
    for _ in range(2):
        passes.quick()
    s = Lines(cwd="/home/dev/project1")  # an existing folder
    append(s.path_in(env.root), s.goal_loop(3))
    t = Lines(cwd="/home/dev/brand-new")  # a new one
    append(t.path_in(env.root), t.goal_loop(3))
    passes.quick()
    assert env.has_request(s.session_id) and env.has_request(t.session_id)
    assert passes.synced == {str(s.path_in(env.root)), str(t.path_in(env.root))}


def test_a_deleted_or_replaced_transcript_with_its_event_lost_is_found_by_its_folder(
        env, passes):
    gone, replaced, *_ = old_sessions(env, 40, folders=1)
    passes.watcher._start()
    passes.quick()
    gone.unlink()
    s = Lines(replaced.stem, cwd="/home/dev/project0")
    temp = replaced.with_name("incoming.tmp")
    temp.write_bytes(b"")
    append(temp, s.goal_loop(3))
    os.replace(temp, replaced)  # another file under the same name
    passes.quick()
    assert str(gone) not in passes.watcher.sessions.tracked
    assert passes.synced == {str(gone), str(replaced)}
    assert env.has_request(s.session_id)


def test_of_many_sessions_written_lately_a_pass_stats_only_the_latest(env, passes):
    paths = old_sessions(env, 3 * LIVE_MAX)
    now = time.time()
    for age, path in enumerate(paths):  # all within the hour, the first written last
        os.utime(path, (now - 10 * age, now - 10 * age))
    passes.watcher._start()
    assert set(passes.watcher.net.hot) == {str(p) for p in paths[:LIVE_MAX]}
    passes.quick()
    assert passes.stats == LIVE_MAX
    last = paths[-1]  # off the live list: a lost event waits for the sweep
    s = Lines(last.stem, cwd="/home/dev/project0")
    append(last, s.prompt("and now the docs") + s.answer("Writing.", tool=True))
    passes.quick()
    assert offset_of(env, last) < last.stat().st_size
    passes.sweep()
    assert offset_of(env, last) == last.stat().st_size


def test_the_live_list_keeps_the_sessions_that_changed_last(env, passes):
    paths = old_sessions(env, 3 * LIVE_MAX)
    passes.watcher._start()
    for path in paths:  # each seen changing, in turn
        passes.watcher._handle([(FILE, str(path))])
    hot = passes.watcher.net.hot
    assert {str(p) for p in paths[-LIVE_MAX:]} <= set(hot) and len(hot) <= 2 * LIVE_MAX
