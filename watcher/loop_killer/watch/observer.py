"""Where hints that a transcript changed come from: watchdog events (queued once per path:
``EventQueue``), an ``OVERFLOW`` hint, and the listings the safety net makes."""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from ..state.files import is_session_file_name, list_transcripts

__all__ = ["DIR", "FILE", "OVERFLOW", "ROOT", "STOP", "EventQueue", "Taken", "FolderMark",
           "folder_entries", "folder_marks", "list_transcripts", "listen_for_overflow",
           "observer_healthy", "relevance", "start_observer", "stop_observer"]

log = logging.getLogger("loop_killer.watch")

FILE = "file"  # a session transcript may have changed
DIR = "dir"  # a project folder appeared, moved or went away
ROOT = "root"  # the watched root itself went away
OVERFLOW = "overflow"  # the kernel dropped events: whatever changed must be looked for
STOP = "stop"

# Where watchdog 7 logs that the kernel's inotify queue overflowed; it tells handlers nothing.
_OVERFLOW_LOGGERS = ("watchdog.observers.inotify_c", "watchdog.observers.inotify")

# The inotify mask is cut to these (the watcher's own reads must not wake it up); a watchdog
# too old to cut it has the others dropped in the handler.
EVENT_TYPES = [FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileDeletedEvent,
               DirCreatedEvent, DirMovedEvent, DirDeletedEvent]
_IGNORED_TYPES = frozenset({"opened", "closed", "closed_no_write"})


def relevance(root: str, path: str, is_directory: bool) -> str | None:
    """What a path under ``root`` is: a transcript (FILE: ``<root>/<project>/<id>.jsonl``),
    a project folder (DIR), the root (ROOT), or None."""
    if path == root:
        return ROOT if is_directory else None
    prefix = root + os.sep
    if not path.startswith(prefix):
        return None
    rest = path[len(prefix):]
    cut = rest.find(os.sep)
    if is_directory:
        return DIR if cut < 0 else None
    if cut < 0 or rest.find(os.sep, cut + 1) >= 0:
        return None
    return FILE if is_session_file_name(rest[cut + 1:]) else None


@dataclass(slots=True)
class Taken:
    """What one take found: the hints, the events they stand for, the oldest's wait."""

    hints: list[tuple[str, str]]
    events: int
    waited: float


class EventQueue:
    """Hints from any thread: one put again before it is taken is kept once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._hints: dict[tuple[str, str], None] = {}
        self._events = 0  # puts since the last take, repeats included
        self._since = 0.0  # when the oldest hint waiting was put (monotonic)

    def put(self, kind: str, path: str = "") -> None:
        with self._lock:
            if not self._hints:
                self._since = time.monotonic()
            self._hints[(kind, path)] = None
            self._events += 1
        self._ready.set()

    @property
    def waiting(self) -> int:
        return self._events

    def take(self, timeout: float) -> list[tuple[str, str]]:
        """Wait up to ``timeout`` seconds for a hint; all those queued, in order."""
        return self.take_counted(timeout).hints

    def take_counted(self, timeout: float) -> Taken:
        if timeout > 0:
            self._ready.wait(timeout)
        with self._lock:
            self._ready.clear()
            hints, self._hints = self._hints, {}
            events, self._events = self._events, 0
            waited = time.monotonic() - self._since if hints else 0.0
        return Taken(list(hints), events, waited)


class _Handler(FileSystemEventHandler):
    def __init__(self, root: str, hints: EventQueue) -> None:
        super().__init__()
        self._root = root
        self._hints = hints

    def dispatch(self, event: FileSystemEvent) -> None:
        # Runs in watchdog's thread: decide and enqueue, nothing else.
        if event.event_type in _IGNORED_TYPES:
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            path = os.fsdecode(raw)
            kind = relevance(self._root, path, event.is_directory)
            if kind is not None:
                self._hints.put(kind, path)


class _OverflowListener(logging.Handler):
    """Turns watchdog's warning of an overflow into an ``OVERFLOW`` hint."""

    def __init__(self, hints: EventQueue) -> None:
        super().__init__(logging.WARNING)
        self.hints = hints

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in str(record.msg).lower():
            self.hints.put(OVERFLOW)


def listen_for_overflow(hints: EventQueue) -> Callable[[], None]:
    """An ``OVERFLOW`` hint at each overflow watchdog logs; returns what stops it."""
    listener = _OverflowListener(hints)
    loggers = [logging.getLogger(name) for name in _OVERFLOW_LOGGERS]
    for logger in loggers:
        if not logger.isEnabledFor(logging.WARNING):
            logger.setLevel(logging.WARNING)  # quieted: we still must hear of it
        logger.addHandler(listener)

    def stop() -> None:
        for logger in loggers:
            logger.removeHandler(listener)

    return stop


def start_observer(root: str, hints: EventQueue, *, factory: Callable[[], Any] | None = None
                   ) -> Any:
    """A native observer on ``root``; raises OSError when refused (inotify limits)."""
    if factory is None:
        from watchdog.observers import Observer

        factory = Observer
    # watchdog warns of its own benign race when a folder and its subfolder come at once
    # (a subagent's ``<session>/subagents``): not for the person at the terminal.
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
    observer = factory()
    handler = _Handler(root, hints)
    try:
        observer.schedule(handler, root, recursive=True, event_filter=EVENT_TYPES)
    except TypeError:  # watchdog before 4 has no event_filter
        observer.schedule(handler, root, recursive=True)
    try:
        observer.start()
    except BaseException:
        stop_observer(observer)
        raise
    return observer


def stop_observer(observer: Any, *, timeout: float = 2.0) -> None:
    try:
        observer.stop()
        if observer.is_alive():
            observer.join(timeout)
    except (RuntimeError, OSError) as error:  # never started, or half started
        log.debug("stopping the observer: %s", error)


def observer_healthy(observer: Any) -> bool:
    """The observer thread and all its emitters are still running."""
    if observer is None or not observer.is_alive():
        return False
    return all(emitter.is_alive() for emitter in list(getattr(observer, "emitters", ())))


FolderMark = tuple[int, int]
"""(st_ino, st_mtime_ns) of a project folder: changes when a file in it is created,
renamed or deleted."""


def folder_marks(root: str) -> dict[str, FolderMark]:
    """The mark of every project folder under ``root`` (one ``stat`` each)."""
    marks: dict[str, FolderMark] = {}
    try:
        projects = list(os.scandir(root))
    except OSError:
        return marks
    for project in projects:
        try:
            if project.is_dir():
                info = project.stat()
                marks[project.path] = (info.st_ino, info.st_mtime_ns)
        except OSError:
            continue  # vanished meanwhile: the next pass sees it gone
    return marks


def folder_entries(folder: str) -> list[tuple[str, int]]:
    """The transcripts in one project folder, with their inode numbers (no ``stat``)."""
    try:
        with os.scandir(folder) as entries:
            return [(entry.path, entry.inode()) for entry in entries
                    if is_session_file_name(entry.name)]
    except OSError:
        return []
