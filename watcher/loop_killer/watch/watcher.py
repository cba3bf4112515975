"""The watcher's loop: one thread reads every transcript; events only wake it up. A flood must
not bury a loop: hints are coalesced by path, a batch reads for ``HANDLE_BUDGET`` s at most."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..hooks.mod_outcomes import sweep_mod_outcomes
from ..state import journal, report
from ..state.files import ensure_private_dir, state_folder
from ..state.journal import JournalTail
from ..state.status import (
    BEHIND_LAG,
    HEARTBEAT_INTERVAL,
    WatcherHeartbeat,
    heartbeat_path,
    read_heartbeat,
    write_heartbeat,
)
from .follower import Seen, seen_of
from .narrate import Notice, tell
from .observer import (
    DIR,
    FILE,
    OVERFLOW,
    ROOT,
    STOP,
    EventQueue,
    list_transcripts,
    listen_for_overflow,
    observer_healthy,
    start_observer,
    stop_observer,
)
from .respond import OUTCOME_TIMEOUT
from .safety_net import HOT_FOR, LIVE_MAX, SafetyNet
from .sessions import IDLE_AFTER, Sessions

__all__ = ["BEHIND_REPEAT", "HANDLE_BUDGET", "HOUSEKEEPING_INTERVAL", "POLL_INTERVAL",
           "RECONCILE_INTERVAL", "SWEEP_INTERVAL", "Pace", "Watcher", "release_memory"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")

# Seconds between two passes of each timer.
RECONCILE_INTERVAL = 3.0  # over the live transcripts and the project folders
SWEEP_INTERVAL = 120.0  # that stat every transcript
POLL_INTERVAL = 1.0  # of the reconcile pass, when polling is all there is
HOUSEKEEPING_INTERVAL = 30.0  # stale requests, statuses, idle sessions
JOURNAL_TAIL_INTERVAL = 0.5
ROOT_CHECK_INTERVAL = 1.0

HANDLE_BUDGET = 1.0
"""Seconds of reading in one batch of hints before the timers get their turn; what is
left is read next, first."""

class Watcher:
    """Follows every session transcript under ``root``; publishes into ``state``."""

    def __init__(self, *, root: Path, state: Path, poll: bool = False,
                 reconcile_interval: float | None = None,
                 sweep_interval: float = SWEEP_INTERVAL,
                 outcome_timeout: float = OUTCOME_TIMEOUT,
                 heartbeat_interval: float = HEARTBEAT_INTERVAL, home: str | None = None,
                 observer_factory: Callable[[], Any] | None = None,
                 housekeeping_interval: float = HOUSEKEEPING_INTERVAL,
                 idle_after: float = IDLE_AFTER,
                 notify: Callable[[Notice], None] | None = None) -> None:
        self.root = Path(root)
        self.state = Path(state)
        self.force_poll = poll
        self.polling = poll
        self._reconcile_every = reconcile_interval
        self.heartbeat_interval = heartbeat_interval
        self.home = home if home is not None else os.environ.get("HOME")
        self.housekeeping_interval = housekeeping_interval
        self.sessions = Sessions(self.state, home=self.home, outcome_timeout=outcome_timeout,
                                 idle_after=idle_after)
        self.sessions.respond.notify = notify  # desktop notifications (``--notify``)
        self.hints = EventQueue()
        self.ready = threading.Event()  # set once catch-up is done
        self.started_at = time.time()
        self.catch_up_seconds = 0.0
        self._observer_factory = observer_factory
        self._observer: Any = None
        self._stopping = threading.Event()
        self._root_key: tuple[int, int] | None = None
        self._journal = JournalTail(self.state)
        self._again: list[str] = []
        self._next_housekeeping = 0.0
        self.net = SafetyNet(str(self.root), self.sessions.tracked, self._sync,
                             sweep_interval=sweep_interval)
        self._starting = False  # catching up: hints for files not caught up yet wait
        self._deferred: list[tuple[str, str]] = []
        self.pace = Pace()
        self._unread_since: dict[str, float] = {}  # files read in steps: since when (monotonic)
        self._last_beat = time.monotonic()
        self.overflows = 0  # times the kernel said it dropped events

    @property
    def reconcile_interval(self) -> float:
        if self._reconcile_every is not None:
            return self._reconcile_every
        return POLL_INTERVAL if self.polling else RECONCILE_INTERVAL

    def stop(self) -> None:
        """Ask the loop to end (thread- and signal-safe)."""
        self._stopping.set()
        self.hints.put(STOP)

    def run(self) -> None:
        ensure_private_dir(self.state)
        stop_listening = listen_for_overflow(self.hints)
        try:
            self._start()
            self.ready.set()
            self._loop()
        finally:
            stop_listening()
            self.ready.set()
            self._shutdown()

    def _start(self) -> None:
        started = time.perf_counter()
        self._journal.skip_to_end()
        try:  # their statuses, left saying a request is pending, are written anew below
            expired = self.sessions.expire_requests(time.time())
        except Exception:
            log.exception("unexpected error while expiring old clear requests")
            expired = set()
        waiting = not self._root_present()
        if not waiting:
            self._watch_root()
            self.net.mark_folders()
            pending = _pending_requests(self.state) | expired
            self._starting = True
            try:
                self._catch_up_all(pending)
            finally:
                self._starting = False
                for kind, path in self._deferred:  # handled by the loop, now live
                    self.hints.put(kind, path)
                self._deferred = []
            self.net.next_sweep = time.monotonic() + self.net.sweep_interval
        self._housekeep()
        self.sessions.respond.release()  # the loops found catching up, in their order
        self.catch_up_seconds = time.perf_counter() - started
        stats = self.sessions.catch_up_stats
        events.info(report.startup_line(
            root=str(self.root), sessions=stats.sessions, projects=len(stats.projects),
            runs=stats.runs, seconds=self.catch_up_seconds, bytes_read=stats.bytes_read,
            polling=self.polling, waiting=waiting))
        self._beat()

    def _catch_up_all(self, pending: set[str]) -> None:
        """Catch every transcript up, the most recently written first, serving the events of
        those caught up in between; the first ``LIVE_MAX`` written within ``HOT_FOR`` go live."""
        found: list[tuple[float, str, Seen | None]] = []
        for path, entry in list_transcripts(str(self.root)):
            try:
                seen: Seen | None = seen_of(entry.stat())
            except OSError:
                seen = None
            found.append((seen.mtime if seen is not None else 0.0, path, seen))
        found.sort(reverse=True)
        now, monotonic_now = time.time(), time.monotonic()
        for index, (mtime, path, _seen) in enumerate(found):
            if self._stopping.is_set():
                return
            try:
                self.sessions.catch_up(path, pending_requests=pending)
            except Exception:  # one odd file must not keep the others unwatched
                log.exception("unexpected error while catching up %s", path)
            if (not self.polling and index < LIVE_MAX and now - mtime < HOT_FOR
                    and path in self.sessions.tracked):
                self.net.live(path, monotonic_now + HOT_FOR - (now - mtime))
            hints = self.hints.take(0)
            if hints:
                self._guarded(self._handle, hints)

    def _loop(self) -> None:
        now = time.monotonic()
        next_beat = now + self.heartbeat_interval
        next_reconcile = now + self.reconcile_interval
        next_tail = now + JOURNAL_TAIL_INTERVAL
        while not self._stopping.is_set():
            now = time.monotonic()
            deadline = min(next_beat, next_reconcile, next_tail)
            wait = 0.0 if self._again else deadline - now
            taken = self.hints.take_counted(wait)
            self.pace.took(taken.waited, taken.events)
            hints = taken.hints
            if self._again:  # what was left to read comes first: it waited longest
                hints = list(dict.fromkeys([(FILE, path) for path in self._again] + hints))
                self._again = []
            if hints:
                self._guarded(self._handle, hints)
            now = time.monotonic()
            if now >= next_tail:
                self._guarded(self._tail_journal)
                self._guarded(self.sessions.respond.tick, now)
                next_tail = now + JOURNAL_TAIL_INTERVAL
            if now >= next_reconcile:
                self._guarded(self._reconcile)
                next_reconcile = time.monotonic() + (
                    self.reconcile_interval if self._root_key is not None
                    else min(self.reconcile_interval, ROOT_CHECK_INTERVAL))
            if now >= next_beat:
                self._guarded(self._beat)
                next_beat = now + self.heartbeat_interval

    @staticmethod
    def _guarded(action: Callable[..., Any], *args: Any, **options: Any) -> None:
        """Run one timer's work; a bug in it is logged, and the watcher carries on."""
        try:
            action(*args, **options)
        except Exception:
            log.exception("unexpected error in %s", getattr(action, "__name__", action))

    def _handle(self, hints: list[tuple[str, str]]) -> None:
        if self._starting:  # only files already caught up are followed live yet
            tracked = self.sessions.tracked
            now_hints = [h for h in hints if h[0] == FILE and h[1] in tracked]
            self._deferred.extend(h for h in hints if h[0] != FILE or h[1] not in tracked)
            hints = now_hints
        folders = [path for kind, path in hints if kind == DIR]
        for kind, _path in hints:
            if kind == STOP:
                return
            if kind == ROOT:
                self._reconcile()
            if kind == OVERFLOW:
                self._overflowed()
        for folder in folders:
            self.net.sync_folder(folder)
        started = time.monotonic()
        hot_until = started + HOT_FOR
        files = [path for kind, path in hints if kind == FILE]
        for index, path in enumerate(files):
            if self._stopping.is_set():
                return
            if time.monotonic() - started > HANDLE_BUDGET:
                self._again[:0] = files[index:]  # the timers' turn; these are read next
                return
            self.net.live(path, hot_until)
            self._sync(path)

    def _overflowed(self) -> None:
        """The kernel dropped file events: look at every transcript now."""
        self.overflows += 1
        log.warning("file events were lost (the kernel's event queue overflowed: "
                    "a flood of writes); looking at every transcript now")
        if not self._starting:
            self.net.sweep(polling=self.polling)

    def _sync(self, path: str) -> None:
        try:
            more = self.sessions.sync(path)
        except Exception:  # a bug must not end a watcher left running for weeks
            log.exception("unexpected error while reading %s", path)
            return
        if more:
            self._again.append(path)
            self._unread_since.setdefault(path, time.monotonic())
        else:
            self._unread_since.pop(path, None)

    def _root_present(self) -> bool:
        try:
            info: os.stat_result | None = os.stat(self.root)
        except OSError:
            info = None
        self._root_key = (info.st_dev, info.st_ino) if info and stat.S_ISDIR(info.st_mode) else None
        return self._root_key is not None

    def _watch_root(self) -> None:
        """Start the native observer on the root, or fall back to polling."""
        self._unwatch()
        if self.force_poll:
            self.polling = True
            return
        try:
            self._observer = start_observer(str(self.root), self.hints,
                                            factory=self._observer_factory)
            if self.polling:
                log.warning("watching %s natively again", self.root)
            self.polling = False
        except Exception as error:  # noqa: BLE001 (inotify limits are OSError; any other
            # failure to start the native observer must fall back to polling just the same)
            if not self.polling:
                log.warning("cannot watch %s natively (%s): polling every %.1f s instead",
                            self.root, error, self._reconcile_every or POLL_INTERVAL)
            self.polling = True
            self._observer = None

    def _unwatch(self) -> None:
        if self._observer is not None:
            stop_observer(self._observer)
            self._observer = None

    def _reconcile(self) -> None:
        """The safety net for lost events (``SafetyNet``), and the root gone or replaced."""
        before = self._root_key
        present = self._root_present()
        if not present:
            if before is not None:
                log.warning("%s is gone; waiting for it to come back", self.root)
                self._unwatch()
            # Not deleted (an unmounted disk): followed no more, statuses and records kept.
            for path in list(self.sessions.tracked):
                self.sessions.drop(path, why="out of reach (the projects folder is gone)",
                                   quiet=True, keep_status=True)
            self.net.folders = {}
            self._housekeep(due=True)
            return
        sweep = self.polling or time.monotonic() >= self.net.next_sweep
        if before != self._root_key:
            if before is not None:
                log.warning("%s was replaced; watching the new one", self.root)
            else:
                events.info(f"{self.root} appeared: watching it")
            self._watch_root()
            sweep = True
        elif not self.force_poll and self._observer is not None and not observer_healthy(
                self._observer):
            log.warning("the file-system observer stopped; restarting it")
            self._watch_root()
            sweep = True
        if sweep:
            self.net.sweep(polling=self.polling)
        else:
            self.net.check_live()
        self._housekeep(due=True)

    def _housekeep(self, *, due: bool = False) -> None:
        """``Sessions.housekeep``, now or (``due``) when its interval has passed."""
        now = time.monotonic()
        if due and now < self._next_housekeeping:
            return
        self._next_housekeeping = now + self.housekeeping_interval
        self._guarded(self.sessions.housekeep, time.time(), statuses=self._root_key is not None)

    def _beat(self) -> None:
        now = time.monotonic()
        if self._unread_since:
            self.pace.unread_for(now - min(self._unread_since.values()))
        lag, line, caught_up = self.pace.beat(now, interval=now - self._last_beat,
                                              unread_files=len(self._unread_since))
        self._last_beat = now
        if line is not None:
            log.warning("%s", line)
        if caught_up:
            release_memory()
        beat = WatcherHeartbeat(
            pid=os.getpid(), started_at=self.started_at, beat_at=time.time(),
            root=str(self.root), sessions=len(self.sessions.tracked), polling=self.polling,
            lag=round(lag, 3), waiting=self.hints.waiting)
        try:
            write_heartbeat(self.state, beat)
        except OSError as error:
            log.error("cannot write the heartbeat in %s: %s", self.state, error)

    def _tail_journal(self) -> None:
        """Show what the hooks logged, and follow the loops they stopped; what the mod
        reported of a clear is logged first, as the next Stop hook would."""
        try:
            sweep_mod_outcomes(str(self.state), partial(journal.append, self.state))
        except OSError as error:
            log.debug("cannot sweep the mod's outcomes: %s", error)
        respond = self.sessions.respond
        for record in self._journal.read_new():
            now = time.time()
            respond.say(tell(respond.narrator, record, home=self.home, now=now),
                        at=record.at or now)
            respond.on_record(record)
            if isinstance(record, journal.LoopRecord) and record.source == "hook":
                self.sessions.follow_hook_detection(record.session_id, record.answer_uuid,
                                                    record.rule)

    def _shutdown(self) -> None:
        self._unwatch()
        self._guarded(self._tail_journal)  # what the hooks logged last, and then
        self._guarded(self.sessions.respond.close)  # what was held is said before the end
        with contextlib.suppress(OSError):
            beat = read_heartbeat(self.state)
            if beat is not None and beat.pid == os.getpid():
                os.unlink(heartbeat_path(self.state))


def _pending_requests(state: Path) -> set[str]:
    try:  # a linked requests/ holds nothing of ours: never listed through
        folder = state_folder(state, "requests", private=True)
        return {name[:-5] for name in os.listdir(folder) if name.endswith(".json")}
    except OSError:
        return set()


BEHIND_REPEAT = 60.0  # seconds between two lines saying the watcher is still behind


class Pace:
    """How long hints or bytes waited between two beats, and what to log of it (pure)."""

    __slots__ = ("_said_at", "behind_since", "events", "lag")

    def __init__(self) -> None:
        self.lag = 0.0
        self.events = 0  # events the hints taken since the last beat stood for
        self.behind_since: float | None = None
        self._said_at = 0.0

    def took(self, waited: float, events: int) -> None:
        self.lag = max(self.lag, waited)
        self.events += events

    def unread_for(self, seconds: float) -> None:
        self.lag = max(self.lag, seconds)

    def beat(self, now: float, *, interval: float, unread_files: int
             ) -> tuple[float, str | None, bool]:
        """(the lag since the last beat, a line to log or None, whether the watcher just
        caught up); starts the next interval."""
        lag, events = self.lag, self.events
        self.lag, self.events = 0.0, 0
        if lag >= BEHIND_LAG:
            if self.behind_since is None:
                self.behind_since = self._said_at = now
            elif now - self._said_at < BEHIND_REPEAT:
                return lag, None, False
            self._said_at = now
            return lag, report.behind_line(lag=lag, events=events, seconds=interval,
                                           unread_files=unread_files,
                                           for_seconds=now - self.behind_since), False
        if self.behind_since is not None:
            took, self.behind_since = now - self.behind_since, None
            return lag, report.caught_up_line(took), True
        return lag, None, False


def release_memory() -> None:
    """Give back what a flood took: collect cycles, then (glibc) return the freed heap."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator gives back on its own
        pass
