"""Where hints that a transcript changed come from: watchdog events, and listings.

Events are only hints. The watchdog callback (its own thread) does nothing but decide
whether a path can matter (``relevance``, pure) and put it on a queue; the watcher's one
thread does all reading. The reconcile pass lists the tree (``list_transcripts``) and
compares the project folders' marks (``folder_marks``) so a lost event costs latency,
never a detection. When the native observer cannot start
(inotify limits, say), ``start_observer`` says why and the watcher polls instead.
"""

from __future__ import annotations

import logging
import os
import queue
import warnings
from collections.abc import Callable
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

from ..state.paths import is_session_file_name, list_transcripts

__all__ = [
    "DIR",
    "FILE",
    "ROOT",
    "STOP",
    "EventQueue",
    "FolderMark",
    "folder_entries",
    "folder_marks",
    "list_transcripts",
    "observer_healthy",
    "relevance",
    "start_observer",
    "stop_observer",
]

log = logging.getLogger("loop_killer.watch")

# Kinds of queued hints.
FILE = "file"  # a session transcript may have changed
DIR = "dir"  # a project folder appeared, moved or went away
ROOT = "root"  # the watched root itself went away
STOP = "stop"

EVENT_TYPES = [
    FileCreatedEvent, FileModifiedEvent, FileMovedEvent, FileDeletedEvent,
    DirCreatedEvent, DirMovedEvent, DirDeletedEvent,
]
"""Only these reach us (the inotify mask is cut to them: no open/close events, so the
watcher's own reads never wake it up)."""

_IGNORED_TYPES = frozenset({"opened", "closed", "closed_no_write"})
"""Dropped in the handler too, for a watchdog too old to cut the mask."""


def relevance(root: str, path: str, is_directory: bool) -> str | None:
    """What a path under ``root`` can be: a transcript (FILE), a project folder (DIR),
    the root itself (ROOT), or nothing to us (None).

    Transcripts are ``<root>/<project>/<name>.jsonl``; subagent files (``agent-*.jsonl``
    beside them, or anything deeper such as ``<session>/subagents/agent-*.jsonl``) are not.
    """
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


class EventQueue:
    """Hints from any thread to the watcher's thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

    def put(self, kind: str, path: str = "") -> None:
        self._queue.put((kind, path))

    def take(self, timeout: float, *, most: int = 100_000) -> list[tuple[str, str]]:
        """Wait up to ``timeout`` seconds for a hint; return it with all already queued,
        duplicates removed, in order."""
        try:
            first = self._queue.get(timeout=max(0.0, timeout)) if timeout > 0 else (
                self._queue.get_nowait())
        except queue.Empty:
            return []
        items = {first: None}
        for _ in range(most):
            try:
                items[self._queue.get_nowait()] = None
            except queue.Empty:
                break
        return list(items)


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


def start_observer(root: str, hints: EventQueue, *, factory: Callable[[], Any] | None = None
                   ) -> Any:
    """Start a native watchdog observer on ``root`` (recursive); raise OSError if the
    platform refuses (inotify watch or instance limits, ...)."""
    if factory is None:
        from watchdog.observers import Observer

        factory = Observer
    # watchdog warns when a folder and its subfolder are created at once (a subagent's
    # ``<session>/subagents``): its own benign race, not for the person at the terminal.
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
"""(st_ino, st_mtime_ns) of a project folder: it changes when a file in it is created,
renamed or deleted (not when one grows)."""


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
    """The session transcripts directly in one project folder, with their inode numbers
    (from the listing: no ``stat``); empty if the folder is gone."""
    try:
        with os.scandir(folder) as entries:
            return [(entry.path, entry.inode()) for entry in entries
                    if is_session_file_name(entry.name)]
    except OSError:
        return []
