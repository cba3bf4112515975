"""What earlier scans found in each file, so a file unchanged since is not read again.

A transcript is only ever appended to: a file listed with the device, inode, size and
modification time (to the nanosecond) it had when it was read holds what it held then,
and its ``FileResult`` is used as it was. A file that grew, or a new one, is read; the
others cost one ``stat`` (the listing's own). A file written in the last ``SETTLING``
seconds before the scan is not kept: the file system's clock moves in ticks of a few
milliseconds, so a same-size rewrite within one tick would look unchanged (git's
"racily clean" case); such a file is the live session's, read again next time anyway.

A result also depends on the settings the engine judged with and on the code that read
it, so the whole cache counts only under the same ``context``: the package's version,
those settings, and the size and time of every module of the installed package (a
checkout being worked on invalidates it by itself).

It is one file in the state folder (``scan-cache.msgpack``, this user's alone), written
whole after a scan (a temporary file renamed over it). It is decoded into its own types:
a broken, foreign or hostile file reads as an empty cache (logged) and is replaced; it is
never unpickled, and a file owned by someone else is not read. Tokens are kept, not
prices (``summary`` prices them), so ``--prices`` does not touch it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from .. import __version__
from ..config import Settings
from ..state.files import read_small_file, write_private_file
from .files import Transcript
from .records import FileResult

__all__ = ["CACHE_FILE", "ScanCache", "scan_context"]

logger = logging.getLogger(__name__)

CACHE_FILE = "scan-cache.msgpack"
MAX_CACHE_BYTES = 1 << 30
"""A cache file bigger than this is not read (a 1 GB history's is about 10 MB)."""

_FORMAT = 1
SETTLING = 2.0

Stamp = tuple[int, int, int, int]
"""(device, inode, size, modification time in ns) of a file as it was listed."""


class _Entry(msgspec.Struct, array_like=True):
    stamp: Stamp
    result: FileResult


class _Document(msgspec.Struct):
    format: int
    context: str
    files: dict[str, _Entry]


_DECODE = msgspec.msgpack.Decoder(_Document).decode
_ENCODE = msgspec.msgpack.Encoder().encode


def stamp_of(transcript: Transcript) -> Stamp | None:
    """The file as listed; None when the listing did not say (no result is kept)."""
    if not (transcript.inode and transcript.mtime_ns):
        return None
    return transcript.device, transcript.inode, transcript.size, transcript.mtime_ns


def scan_context(settings: Settings) -> str:
    """What a file's result depends on besides its bytes (see the module docstring)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for module in sorted(package.rglob("*.py")):
        try:
            info = module.stat()
        except OSError:
            continue
        digest.update(f"{module.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}\n"
                      .encode())
    thresholds = settings.thresholds
    judged = (
        thresholds.same_reply_turns, thresholds.idle_turns, thresholds.similar,
        sorted(thresholds.off), settings.tool_repeat_warn, settings.tool_repeat_block,
        settings.tool_repeat_stop, settings.edit_oscillation_warn,
        sorted(settings.ignore_tools), sorted(settings.rules_off),
    )
    return f"{__version__} {digest.hexdigest()[:16]} {judged!r}"


class ScanCache:
    """The results kept by earlier scans, and those of this one (``keep``), saved whole."""

    def __init__(self, path: Path, context: str, files: dict[str, _Entry] | None = None
                 ) -> None:
        self.path = path
        self.context = context
        self._files: dict[str, _Entry] = files if files is not None else {}
        self._seen: set[str] = set()
        self._changed = False
        self._settled_before = time.time_ns() - int(SETTLING * 1e9)

    @classmethod
    def load(cls, state: Path, context: str) -> ScanCache:
        """The cache in the state folder, or an empty one (none yet, or not usable)."""
        path = state / CACHE_FILE
        try:
            document = _DECODE(read_small_file(path, MAX_CACHE_BYTES, owned=True))
        except FileNotFoundError:
            return cls(path, context)
        except (OSError, msgspec.DecodeError) as error:  # (ValidationError is one)
            logger.warning("scan cache %s not used, every file is read: %s", path, error)
            return cls(path, context)
        if document.format != _FORMAT or document.context != context:
            return cls(path, context)  # another version or settings: read again
        return cls(path, context, document.files)

    def split(self, transcripts: Iterable[Transcript]
              ) -> tuple[list[FileResult], list[Transcript]]:
        """(results kept for files unchanged since, the files to read)."""
        kept: list[FileResult] = []
        to_read: list[Transcript] = []
        for transcript in transcripts:
            self._seen.add(transcript.path)
            entry = self._files.get(transcript.path)
            stamp = stamp_of(transcript)
            if entry is not None and stamp is not None and entry.stamp == stamp:
                kept.append(entry.result)
            else:
                to_read.append(transcript)
        return kept, to_read

    def keep(self, transcript: Transcript, result: FileResult) -> None:
        """Remember a file's result as read now (a file that was not read is forgotten)."""
        stamp = stamp_of(transcript)
        self._changed = True
        if stamp is None or result.skipped or stamp[3] >= self._settled_before:
            self._files.pop(transcript.path, None)
        else:
            self._files[transcript.path] = _Entry(stamp, result)

    def save(self, *, listed: str | None) -> None:
        """Write the cache. ``listed``: the folder whose every file was listed (no
        --project, no --since): a file in it that was not listed is gone, and forgotten.
        Files elsewhere (another --root) keep their results."""
        if listed is not None:
            inside = os.path.join(listed, "")
            gone = [path for path in self._files
                    if path.startswith(inside) and path not in self._seen]
            for path in gone:
                del self._files[path]
            self._changed = self._changed or bool(gone)
        if not self._changed:
            return
        try:
            write_private_file(self.path, _ENCODE(_Document(_FORMAT, self.context,
                                                            self._files)))
        except OSError as error:
            logger.warning("scan cache %s not written: %s", self.path, error)
