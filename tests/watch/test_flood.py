"""A flood of writes (issue 21: 379k lines/s over 200 sessions overflowed the kernel's
event queue; the loop was caught 57 s late and memory stayed at 492 MB).

Hints are coalesced by path (memory by the sessions, not the events); an event-queue
overflow, which watchdog only logs, makes the watcher look at every transcript at once;
how far behind it is goes in the heartbeat and the log. Work is counted, never timed.
"""

from __future__ import annotations

import logging
import threading
import tracemalloc

from loop_killer.state.status import (
    BEHIND_LAG,
    WatcherHeartbeat,
    falling_behind,
    read_heartbeat,
)
from loop_killer.watch.observer import FILE, EventQueue
from loop_killer.watch.watcher import BEHIND_REPEAT, Pace
from transcripts import Lines, append

from .helpers import wait_for


def test_a_flood_of_events_is_held_once_per_path() -> None:
    hints = EventQueue()
    paths = [f"/p/{i}.jsonl" for i in range(200)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]

        def flood() -> None:
            for _ in range(500):
                for path in paths:
                    hints.put(FILE, path)

        writer = threading.Thread(target=flood)
        writer.start()
        writer.join()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 64 * 1024  # 100,000 events, 200 paths: one entry each
    assert hints.waiting == 100_000
    taken = hints.take_counted(0)
    assert taken.hints == [(FILE, path) for path in paths]  # in the order first put
    assert taken.events == 100_000 and taken.waited >= 0
    assert hints.take_counted(0).hints == [] and hints.waiting == 0


class _Deaf:
    """An observer that starts and stays alive but never hears a thing (every event of
    a flood lost)."""

    emitters: tuple[()] = ()

    def __init__(self) -> None:
        self.alive = False

    def schedule(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        pass

    def start(self) -> None:
        self.alive = True

    def stop(self) -> None:
        self.alive = False

    def is_alive(self) -> bool:
        return self.alive

    def join(self, timeout: float | None = None) -> None:
        pass


def test_an_event_queue_overflow_makes_the_watcher_look_at_once(env, start_watcher) -> None:
    """The events of the loop's last reply were lost: without the overflow warning the
    next look would be at the sweep (here: an hour away)."""
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2) + s.reprompt())
    runner = start_watcher(observer_factory=_Deaf, reconcile_interval=3600.0,
                           sweep_interval=3600.0)
    append(path, s.answer())
    # How watchdog 7 says it (inotify_c.py, on IN_Q_OVERFLOW), in its own thread.
    said = threading.Thread(target=logging.getLogger("watchdog.observers.inotify_c").warning,
                            args=("Inotify queue overflowed; filesystem events were lost",))
    said.start()
    said.join()
    wait_for(lambda: env.has_request(s.session_id), what="the request after the overflow")
    assert runner.watcher.overflows == 1


def test_watchdog_still_says_when_its_queue_overflowed() -> None:
    """The overflow reaches us only through watchdog's warning: it must still log one."""
    import inspect

    from watchdog.observers import inotify_c

    source = inspect.getsource(inotify_c)
    assert "IN_Q_OVERFLOW" in source and "overflowed" in source


def test_pace_says_when_the_watcher_falls_behind_and_when_it_caught_up() -> None:
    pace = Pace()
    pace.took(0.01, 5)
    assert pace.beat(2.0, interval=2.0, unread_files=0) == (0.01, None, False)
    pace.took(BEHIND_LAG + 1, 40_000)
    lag, line, caught_up = pace.beat(4.0, interval=2.0, unread_files=3)
    assert lag == BEHIND_LAG + 1 and not caught_up
    assert line is not None and "falling behind" in line and "20,000 events/s" in line
    assert "3 files with bytes left to read" in line
    pace.unread_for(BEHIND_LAG + 5)  # bytes still unread: still behind, said once a while
    assert pace.beat(6.0, interval=2.0, unread_files=1)[1] is None
    pace.unread_for(BEHIND_LAG + 5)
    line = pace.beat(4.0 + BEHIND_REPEAT, interval=2.0, unread_files=1)[1]
    assert line is not None and f"for {BEHIND_REPEAT:.0f} s" in line
    lag, line, caught_up = pace.beat(70.0, interval=2.0, unread_files=0)
    assert caught_up and line is not None and "caught up again after 66 s" in line


def test_status_says_a_watcher_is_falling_behind() -> None:
    beat = WatcherHeartbeat(pid=1, started_at=0.0, beat_at=1.0, root="/r")
    assert falling_behind(beat) is None
    behind = WatcherHeartbeat(pid=1, started_at=0.0, beat_at=1.0, root="/r",
                              lag=BEHIND_LAG + 9.5, waiting=1234)
    assert falling_behind(behind) == (f"falling behind: file events waited up to "
                                      f"{BEHIND_LAG + 9.5:.1f} s (1234 waiting)")


def test_the_heartbeat_carries_the_lag(env, start_watcher) -> None:
    env.root.mkdir(parents=True)
    runner = start_watcher(heartbeat_interval=0.05)
    runner.watcher.pace.unread_for(BEHIND_LAG + 2)  # as if bytes had waited that long
    beat = wait_for(lambda: (b := read_heartbeat(env.state)) is not None and b.lag > 0 and b,
                    what="a heartbeat with the lag")
    assert falling_behind(beat) is not None
    wait_for(lambda: (b := read_heartbeat(env.state)) is not None and b.lag == 0,
             what="the lag back to nothing")


def test_a_session_live_at_start_up_is_on_the_live_list(env, start_watcher) -> None:
    """Every event lost: a session written just before the watcher started is looked at
    on the live list's pass, as one that changes later is, not at the next sweep (an audit
    found it waited for the sweep, 120 s by default; an hour here)."""
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(1))  # written just before the start
    runner = start_watcher(observer_factory=_Deaf, reconcile_interval=0.2,
                           sweep_interval=3600.0)
    wait_for(lambda: str(path) in runner.watcher.net.hot, what="the live list")
    append(path, s.loop(2))  # the loop completes; its events are lost
    wait_for(lambda: env.has_request(s.session_id), what="the request from the live list")
