"""The safety net for lost file events: ``check_live`` stats the transcripts that changed
lately, ``sweep`` stats every transcript, so a lost event costs a sweep interval at most."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from .follower import Change, Seen, classify, seen_of
from .observer import FolderMark, folder_entries, folder_marks, list_transcripts
from .tracked import Tracked

__all__ = ["HOT_FOR", "LIVE_MAX", "SafetyNet"]

HOT_FOR = 900.0
"""Seconds a transcript stays on the live list after it last changed."""

LIVE_MAX = 64
"""The live list keeps this many, those changed last (up to twice as many between trims):
10,000 transcripts written within the hour must not be stat'ed every pass."""

UNSETTLED_NS = 1_000_000_000
"""A folder changed this recently (ns) is listed again at the next pass: a file created
within the same clock tick as the listing would leave its mtime as it was."""


class SafetyNet:
    """The live list and the folder marks of one root; ``sync`` brings a path up to date."""

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
        """A project folder changed: sync what appeared, was replaced or vanished in it."""
        present = folder_entries(folder)
        prefix = folder + os.sep
        tracked = self.tracked
        known = {p for p in tracked if p.startswith(prefix)}
        changed = {path for path, inode in present
                   if path not in tracked or tracked[path].follower.key[1] != inode}
        hot_until = time.monotonic() + HOT_FOR
        for path in sorted(changed | (known - {path for path, _ in present})):
            self.live(path, hot_until)
            self.sync(path)

    def live(self, path: str, until: float) -> None:
        """Put ``path`` on the live list until ``until`` (monotonic); past twice
        ``LIVE_MAX``, only the ``LIVE_MAX`` changed last stay (the sweep sees the rest)."""
        self.hot[path] = until
        if len(self.hot) > 2 * LIVE_MAX:
            self.hot = dict(sorted(self.hot.items(), key=lambda item: item[1])[-LIVE_MAX:])

    def check_live(self) -> None:
        """Stat the live transcripts; list the project folders whose mark changed."""
        now = time.monotonic()
        for path, until in list(self.hot.items()):
            if until < now:
                del self.hot[path]
            elif self._changed(path):
                self.sync(path)
                if path in self.tracked:
                    self.live(path, now + HOT_FOR)
                else:  # gone, or not a transcript to follow: its folder mark says more
                    del self.hot[path]
        folders = self._marks()
        old, self.folders = self.folders, folders
        for folder in sorted(folders.keys() | old.keys()):
            mark = old.get(folder)
            if folders.get(folder) != mark or (mark is not None and mark[1] < 0):
                self.sync_folder(folder)

    def sweep(self, *, polling: bool) -> None:
        """Stat every transcript (``polling``: none goes on the live list)."""
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
                self.live(path, hot_until)
            self.sync(path)
        for path in [p for p in tracked if p not in listed]:
            self.sync(path)

    def _marks(self) -> dict[str, FolderMark]:
        """The project folders' marks; one changed within ``UNSETTLED_NS`` has mtime -1 (it
        is listed once more at the next pass)."""
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
