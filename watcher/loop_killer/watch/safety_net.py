"""The safety net for lost file events: which transcripts are live, the project folders'
marks, and the passes that stat them (the ``Watcher`` runs them on its timers).

Sized so that thousands of dormant transcripts cost next to nothing: ``check_live``
stats the transcripts that changed lately (``HOT_FOR``: the live sessions, where a lost
event must cost seconds at most) and lists the project folders whose mark changed (a
file created, renamed or deleted changes its folder); ``sweep`` stats every transcript.
Each path found changed goes to ``sync``; nothing here reads a transcript.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from .follower import Change, Seen, classify, seen_of
from .observer import FolderMark, folder_entries, folder_marks, list_transcripts
from .tracked import Tracked

__all__ = ["HOT_FOR", "SafetyNet"]

HOT_FOR = 900.0
"""Seconds a transcript stays on the live list after the watcher last saw it change
(what changed before start-up was read by the catch-up; a live session writes again)."""

UNSETTLED_NS = 1_000_000_000
"""A folder changed this recently (ns) is listed again at the next pass: a file created
within the same clock tick as the listing would leave its mtime as it was."""


class SafetyNet:
    """The live list and the folder marks of one root; ``sync(path)`` brings a path that
    changed up to date (the followed sessions are ``tracked``, by path)."""

    def __init__(self, root: str, tracked: Mapping[str, Tracked], sync: Callable[[str], None],
                 *, sweep_interval: float) -> None:
        self.root = root
        self.tracked = tracked
        self.sync = sync
        self.sweep_interval = sweep_interval
        self.next_sweep = 0.0  # monotonic
        self.hot: dict[str, float] = {}  # live transcripts: path -> until when (monotonic)
        self.folders: dict[str, FolderMark] = {}  # project folder -> its mark

    def mark_folders(self) -> None:
        """Take the folders' marks (before a listing: nothing missed)."""
        self.folders = self._marks()

    def sync_folder(self, folder: str) -> None:
        """A project folder changed: follow the transcripts that appeared in it (or were
        replaced by another file), and let go of those that vanished."""
        present = folder_entries(folder)
        prefix = folder + os.sep
        tracked = self.tracked
        known = {p for p in tracked if p.startswith(prefix)}
        changed = {path for path, inode in present
                   if path not in tracked or tracked[path].follower.key[1] != inode}
        hot_until = time.monotonic() + HOT_FOR
        for path in sorted(changed | (known - {path for path, _ in present})):
            self.hot[path] = hot_until
            self.sync(path)

    def check_live(self) -> None:
        """Stat the live transcripts; list the project folders whose mark changed."""
        now = time.monotonic()
        for path, until in list(self.hot.items()):
            if until < now:
                del self.hot[path]
            elif self._changed(path):
                self.sync(path)
                if path in self.tracked:
                    self.hot[path] = now + HOT_FOR
                else:  # gone, or not a transcript to follow: its folder mark says more
                    del self.hot[path]
        folders = self._marks()
        old, self.folders = self.folders, folders
        for folder in sorted(folders.keys() | old.keys()):
            mark = old.get(folder)
            if folders.get(folder) != mark or (mark is not None and mark[1] < 0):
                self.sync_folder(folder)

    def sweep(self, *, polling: bool) -> None:
        """Stat every transcript: catches whatever events were lost or never sent (when
        ``polling``, nothing is put on the live list: every pass is a sweep)."""
        self.next_sweep = time.monotonic() + self.sweep_interval
        self.mark_folders()
        tracked = self.tracked
        listed: set[str] = set()
        hot_until = time.monotonic() + HOT_FOR
        for path, entry in list_transcripts(self.root):
            listed.add(path)
            known = tracked.get(path)
            if known is not None:
                try:
                    seen: Seen | None = seen_of(entry.stat())
                except OSError:
                    seen = None
                follower = known.follower
                if classify(follower.key, follower.offset, seen) is Change.UNCHANGED:
                    continue
            if not polling:
                self.hot[path] = hot_until
            self.sync(path)
        for path in [p for p in tracked if p not in listed]:
            self.sync(path)

    def _marks(self) -> dict[str, FolderMark]:
        """The project folders' marks; one changed within ``UNSETTLED_NS`` gets a mark
        that says so (mtime -1), so that it is listed once more at the next pass."""
        settled = time.time_ns() - UNSETTLED_NS
        return {folder: (inode, mtime if mtime < settled else -1)
                for folder, (inode, mtime) in folder_marks(self.root).items()}

    def _changed(self, path: str) -> bool:
        known = self.tracked.get(path)
        if known is None:
            return True
        try:
            seen: Seen | None = seen_of(os.stat(path))
        except OSError:
            seen = None
        follower = known.follower
        return classify(follower.key, follower.offset, seen) is not Change.UNCHANGED
