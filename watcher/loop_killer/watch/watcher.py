"""The watcher's loop: one thread reads every transcript; events only wake it up.

``Watcher.run()`` starts the native observer (or polls), catches every existing
transcript up from its tail, then loops: take the queued hints, bring those files up to
date, and on timers write the heartbeat, reconcile (list and stat the tree, so nothing
depends on an event arriving), tail the detection log for what the Stop hook reports,
and report the outcomes whose time has come. Every ``housekeeping_interval`` the
reconcile pass also keeps the state folder and memory from growing
(``Sessions.housekeep``). ``stop()`` may be called from any thread (or a signal handler).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..state import journal
from ..state.paths import ensure_private_dir
from ..state.status import (
    HEARTBEAT_INTERVAL,
    WatcherHeartbeat,
    heartbeat_path,
    read_heartbeat,
    write_heartbeat,
)
from . import report
from .follower import Change, classify, seen_of
from .observer import (
    DIR,
    FILE,
    ROOT,
    STOP,
    EventQueue,
    list_folder,
    list_transcripts,
    observer_healthy,
    start_observer,
    stop_observer,
)
from .outcomes import OUTCOME_TIMEOUT
from .sessions import IDLE_AFTER, Sessions

__all__ = ["HOUSEKEEPING_INTERVAL", "POLL_INTERVAL", "RECONCILE_INTERVAL", "Watcher"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")

RECONCILE_INTERVAL = 3.0
"""Seconds between two passes that stat every known transcript (events are hints)."""

POLL_INTERVAL = 1.0
"""Seconds between two passes when polling is all there is."""

HOUSEKEEPING_INTERVAL = 30.0
"""Seconds between two housekeeping rounds (stale requests, statuses, idle sessions)."""

JOURNAL_TAIL_INTERVAL = 0.5
ROOT_CHECK_INTERVAL = 1.0


class Watcher:
    """Follows every session transcript under ``root``; publishes into ``state``."""

    def __init__(
        self,
        *,
        root: Path,
        state: Path,
        poll: bool = False,
        reconcile_interval: float | None = None,
        outcome_timeout: float = OUTCOME_TIMEOUT,
        heartbeat_interval: float = HEARTBEAT_INTERVAL,
        home: str | None = None,
        observer_factory: Callable[[], Any] | None = None,
        housekeeping_interval: float = HOUSEKEEPING_INTERVAL,
        idle_after: float = IDLE_AFTER,
    ) -> None:
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
        self.sessions.refresh = self._tail_journal
        self.hints = EventQueue()
        self.ready = threading.Event()  # set once catch-up is done
        self.started_at = time.time()
        self.catch_up_seconds = 0.0
        self._observer_factory = observer_factory
        self._observer: Any = None
        self._stopping = threading.Event()
        self._root_key: tuple[int, int] | None = None
        self._journal = _LogTail(journal.journal_path(self.state))
        self._again: list[str] = []
        self._next_housekeeping = 0.0

    @property
    def reconcile_interval(self) -> float:
        if self._reconcile_every is not None:
            return self._reconcile_every
        return POLL_INTERVAL if self.polling else RECONCILE_INTERVAL

    def stop(self) -> None:
        """Ask the loop to end (thread- and signal-safe)."""
        self._stopping.set()
        self.hints.put(STOP)

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> None:
        ensure_private_dir(self.state)
        try:
            self._start()
            self.ready.set()
            self._loop()
        finally:
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
            pending = _pending_requests(self.state) | expired
            self.sessions.load_fired()
            try:
                for path, entry in list_transcripts(str(self.root)):
                    if self._stopping.is_set():
                        return
                    try:
                        seen = seen_of(entry.stat())
                    except OSError:
                        seen = None
                    try:
                        self.sessions.catch_up(path, seen, pending_requests=pending)
                    except Exception:  # one odd file must not keep the others unwatched
                        log.exception("unexpected error while catching up %s", path)
            finally:
                self.sessions.end_start_up()
        self._housekeep()
        self.catch_up_seconds = time.perf_counter() - started
        stats = self.sessions.catch_up_stats
        events.info(report.startup_line(
            root=str(self.root), sessions=stats.sessions, projects=len(stats.projects),
            runs=stats.runs, seconds=self.catch_up_seconds, bytes_read=stats.bytes_read,
            polling=self.polling, waiting=waiting))
        self._beat()

    def _loop(self) -> None:
        now = time.monotonic()
        next_beat = now + self.heartbeat_interval
        next_reconcile = now + self.reconcile_interval
        next_tail = now + JOURNAL_TAIL_INTERVAL
        while not self._stopping.is_set():
            now = time.monotonic()
            deadline = min(next_beat, next_reconcile, next_tail)
            wait = 0.0 if self._again else deadline - now
            hints = self.hints.take(wait)
            if self._again:
                hints.extend((FILE, path) for path in self._again)
                self._again = []
            if hints:
                self._guarded(self._handle, hints)
            now = time.monotonic()
            if now >= next_tail:
                self._guarded(self._tail_journal)
                self._guarded(self.sessions.tick, now)
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
        folders = [path for kind, path in hints if kind == DIR]
        for kind, _path in hints:
            if kind == STOP:
                return
            if kind == ROOT:
                self._reconcile()
        for folder in folders:
            self._sync_folder(folder)
        for kind, path in hints:
            if kind == FILE and not self._stopping.is_set():
                self._sync(path)

    def _sync(self, path: str) -> None:
        try:
            more = self.sessions.sync(path)
        except Exception:  # a bug must not end a watcher left running for weeks
            log.exception("unexpected error while reading %s", path)
            return
        if more:
            self._again.append(path)

    def _sync_folder(self, folder: str) -> None:
        present = set(list_folder(folder))
        prefix = folder + os.sep
        known = [p for p in self.sessions.tracked if p.startswith(prefix)]
        for path in sorted(present.union(known)):
            self._sync(path)

    # -- the root and the observer ----------------------------------------------------

    def _root_present(self) -> bool:
        try:
            info = os.stat(self.root)
        except OSError:
            self._root_key = None
            return False
        if not os.path.isdir(self.root):
            self._root_key = None
            return False
        self._root_key = (info.st_dev, info.st_ino)
        return True

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
        """Stat every transcript: catches whatever events were lost or never sent."""
        before = self._root_key
        present = self._root_present()
        if not present:
            if before is not None:
                log.warning("%s is gone; waiting for it to come back", self.root)
                self._unwatch()
            for path in list(self.sessions.tracked):
                self._sync(path)
            self._housekeep(due=True)
            return
        if before != self._root_key:
            if before is not None:
                log.warning("%s was replaced; watching the new one", self.root)
            else:
                events.info(f"{self.root} appeared: watching it")
            self._watch_root()
        elif not self.force_poll and self._observer is not None and not observer_healthy(
                self._observer):
            log.warning("the file-system observer stopped; restarting it")
            self._watch_root()
        tracked = self.sessions.tracked
        listed: set[str] = set()
        for path, entry in list_transcripts(str(self.root)):
            listed.add(path)
            known = tracked.get(path)
            if known is None:
                self._sync(path)
                continue
            try:
                seen = seen_of(entry.stat())
            except OSError:
                seen = None
            if classify(known.follower.key, known.follower.offset, seen) is not Change.UNCHANGED:
                self._sync(path)
        for path in [p for p in tracked if p not in listed]:
            self._sync(path)
        self._housekeep(due=True)

    def _housekeep(self, *, due: bool = False) -> None:
        """``Sessions.housekeep``, now or (``due``) when its interval has passed. The
        statuses of transcripts that seem gone are left alone while the root is missing."""
        now = time.monotonic()
        if due and now < self._next_housekeeping:
            return
        self._next_housekeeping = now + self.housekeeping_interval
        self._guarded(self.sessions.housekeep, time.time(),
                      statuses=self._root_key is not None)

    # -- heartbeat, detection log -----------------------------------------------------

    def _beat(self) -> None:
        beat = WatcherHeartbeat(
            pid=os.getpid(), started_at=self.started_at, beat_at=time.time(),
            root=str(self.root), sessions=len(self.sessions.tracked), polling=self.polling)
        try:
            write_heartbeat(self.state, beat)
        except OSError as error:
            log.error("cannot write the heartbeat in %s: %s", self.state, error)

    def _tail_journal(self) -> None:
        for record in self._journal.read_new():
            if record.get("source") == "watcher":
                continue
            line = report.journal_line(record, self.home)
            if line is not None:
                events.info(line)
            if record.get("event") != "detection":
                continue
            session_id, uuid = record.get("session_id"), record.get("answer_uuid")
            prompt, rule = record.get("prompt_uuid"), record.get("rule")
            if isinstance(session_id, str) and isinstance(uuid, str):
                self.sessions.note_fired(session_id, uuid,
                                         prompt if isinstance(prompt, str) else "")
                if record.get("source") == "hook" and isinstance(rule, str):
                    self.sessions.follow_hook_detection(session_id, uuid, rule)

    def _shutdown(self) -> None:
        self._unwatch()
        try:
            beat = read_heartbeat(self.state)
            if beat is not None and beat.pid == os.getpid():
                os.unlink(heartbeat_path(self.state))
        except OSError:
            pass


def _pending_requests(state: Path) -> set[str]:
    try:
        return {name[:-5] for name in os.listdir(state / "requests") if name.endswith(".json")}
    except OSError:
        return set()


class _LogTail:
    """Reads the records appended to the detection log since the last look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.key: tuple[int, int] | None = None
        self.offset = 0
        self.partial = b""

    def skip_to_end(self) -> None:
        try:
            info = os.stat(self.path)
        except OSError:
            self.key, self.offset = None, 0
            return
        self.key, self.offset = (info.st_dev, info.st_ino), info.st_size

    def read_new(self) -> list[dict[str, Any]]:
        try:
            info = os.stat(self.path)
        except OSError:
            return []
        key = (info.st_dev, info.st_ino)
        if key != self.key or info.st_size < self.offset:  # new or rotated log
            self.key, self.offset, self.partial = key, 0, b""
        if info.st_size == self.offset:
            return []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(4 * 1024 * 1024)
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        records = []
        for line in lines:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records
