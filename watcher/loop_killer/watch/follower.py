"""Follow one transcript file: ``classify`` (pure), ``Follower`` (reads only the bytes
appended) and ``Vanished`` (to tell a rename from a new file). Never writes."""

from __future__ import annotations

import enum
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..light import digest
from ..state.files import open_transcript

__all__ = [
    "CHECK_BYTES", "NO_CHECK", "RENAME_WINDOW", "Change", "Check", "FileKey", "Follower", "Seen",
    "Vanished", "check_of", "classify", "holds", "seen_of", "stat_seen"]

FileKey = tuple[int, int]
"""(st_dev, st_ino): a file's identity, whatever its name."""

CHECK_BYTES = 512
"""Bytes before the read offset compared on every read: a file rewritten in place to at
least its old size is noticed."""

RENAME_WINDOW = 30.0
"""Seconds during which a file that vanished and turns up under another name (same
device and inode) counts as renamed, not new."""


@dataclass(frozen=True, slots=True)
class Check:
    """The last bytes a follower read: how many, and their digest (not the bytes)."""

    length: int
    digest: bytes


NO_CHECK = Check(0, b"")


def check_of(data: bytes) -> Check:
    tail = data[-CHECK_BYTES:]
    if not tail:
        return NO_CHECK
    return Check(len(tail), digest(tail))


def holds(path: str | Path, offset: int, check: Check) -> bool:
    """Whether the file at ``path`` has the checked bytes just before ``offset``."""
    try:
        fd = open_transcript(path, regular_only=False)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size < offset:
            return False
        return check_of(os.pread(fd, check.length, offset - check.length)) == check
    except OSError:
        return False
    finally:
        os.close(fd)


class Change(enum.Enum):
    """What happened to a file since it was last read."""

    UNCHANGED = "unchanged"
    GROWN = "grown"  # bytes were appended: read them
    NEW = "new"  # not followed yet
    REPLACED = "replaced"  # another file now has this name (new inode)
    TRUNCATED = "truncated"  # shorter than what was read, or rewritten in place
    GONE = "gone"  # deleted or renamed away
    NOT_A_FILE = "not a regular file"


@dataclass(frozen=True, slots=True)
class Seen:
    """What one ``stat`` said about a path."""

    key: FileKey
    size: int
    regular: bool
    mtime: float


def seen_of(info: os.stat_result) -> Seen:
    return Seen((info.st_dev, info.st_ino), info.st_size, stat.S_ISREG(info.st_mode), info.st_mtime)


def stat_seen(path: str) -> Seen | None:
    """What a ``stat`` of ``path`` says (None: gone). Raises OSError for another error."""
    try:
        return seen_of(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


def classify(known: FileKey | None, offset: int, seen: Seen | None) -> Change:
    """What happened to a path followed as ``known`` (None: not followed), ``offset``
    bytes read, that a stat now ``seen`` (None: gone)."""
    if seen is None:
        return Change.GONE
    if not seen.regular:
        return Change.NOT_A_FILE
    if known is None:
        return Change.NEW
    if seen.key != known:
        return Change.REPLACED
    if seen.size < offset:
        return Change.TRUNCATED
    if seen.size > offset:
        return Change.GROWN
    return Change.UNCHANGED


class Follower:
    """Reads the bytes appended to one file since the last read (I/O, one file)."""

    __slots__ = ("_check", "key", "offset", "path")

    def __init__(self, path: str, key: FileKey, offset: int = 0) -> None:
        self.path = path
        self.key = key
        self.offset = offset  # bytes read so far (a partial last line included)
        self._check = NO_CHECK

    def remember(self, data: bytes) -> None:
        """Record ``data`` as the bytes that end at ``offset``."""
        self._check = check_of(data)

    def same_file_at(self, path: str) -> bool:
        """Whether ``path`` holds the bytes last read: the same file, renamed."""
        return bool(self._check.length) and holds(path, self.offset, self._check)

    def read_new(self, *, limit: int) -> tuple[Change, bytes]:
        """Up to ``limit`` new bytes: (what happened, the bytes). Raises OSError."""
        try:
            fd = open_transcript(self.path, regular_only=False)
        except (FileNotFoundError, NotADirectoryError):
            return Change.GONE, b""
        try:
            info = os.fstat(fd)
            change = classify(self.key, self.offset, seen_of(info))
            if change is not Change.GROWN:
                return change, b""
            size = info.st_size
            back = self._check.length
            want = min(size - self.offset, limit)
            window = os.pread(fd, back + want, self.offset - back)
        finally:
            os.close(fd)
        if back and check_of(window[:back]) != self._check:
            return Change.TRUNCATED, b""  # rewritten in place under us
        data = window[back:]
        if not data:
            return Change.UNCHANGED, b""
        self.offset += len(data)
        self.remember(window)
        return Change.GROWN, data


class Vanished:
    """Files followed until they vanished lately; one back within ``RENAME_WINDOW`` is renamed."""

    __slots__ = ("_gone",)

    def __init__(self) -> None:
        self._gone: dict[FileKey, tuple[float, str, Follower]] = {}  # when, session, follower

    def add(self, follower: Follower, session_id: str, now: float) -> None:
        self._gone[follower.key] = (now, session_id, follower)

    def take(self, path: str, key: FileKey, now: float) -> str | None:
        """The session of the vanished file that ``path`` is (forgotten here), or None."""
        gone = self._gone.get(key)
        if gone is None or now - gone[0] > RENAME_WINDOW or not gone[2].same_file_at(path):
            return None
        del self._gone[key]
        return gone[1]

    def forget_old(self, now: float) -> list[str]:
        """Forget the files gone over ``RENAME_WINDOW`` ago; their sessions."""
        old = [k for k, gone in self._gone.items() if now - gone[0] > RENAME_WINDOW]
        return [self._gone.pop(key)[1] for key in old]
