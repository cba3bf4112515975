"""Finding a history's transcripts, and reading one of them safely (the file I/O shell):
links never followed, only regular files opened, each checked to be the one listed."""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.transcript import record
from ..printable import printable
from ..state.files import NotAFile, is_plain_id, open_transcript, session_id_of
from .records import FileResult

if TYPE_CHECKING:
    from ..state.config import Settings
    from .lean import LeanScan

# (the readers are imported when a file is read: a scan all from its cache never loads them)

__all__ = ["CHUNK_BYTES", "SKIP_FAILED", "SKIP_LINK", "SKIP_NOT_REGULAR", "SKIP_PROJECT_OFF",
           "SKIP_UNREADABLE", "Listing", "Transcript", "find_transcripts", "read_transcript",
           "switched_off"]

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # read at a time from a transcript

# Why a file (or a folder) was not read, or not counted.
SKIP_LINK = "link"
SKIP_NOT_REGULAR = "not_regular"  # a FIFO, a socket, a device...
SKIP_UNREADABLE = "unreadable"
SKIP_FAILED = "failed"  # a bug
SKIP_PROJECT_OFF = "project_off"


@record
class Transcript:
    """One transcript file to read, as listed (no ``session_id``: a flat agent-*.jsonl)."""

    path: str
    project: str
    session_id: str
    subagent: bool
    size: int
    device: int = 0
    inode: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0


@dataclass(slots=True)
class Listing:
    """What ``find_transcripts`` found, and what it skipped and why."""

    transcripts: list[Transcript] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    older: int = 0  # files last written before ``since``


_SINCE_MARGIN = 86_400.0  # (the writer's clock and the file system's may differ a little)


def find_transcripts(root: Path | str, *, project: str | None = None,
                     since: float | None = None) -> Listing:
    """Every transcript under ``root`` (the projects folder); ``project``: only folders whose
    name or path holds it (any case); ``since``: not files last changed well before it."""
    listing = Listing()
    try:
        projects = sorted(os.scandir(root), key=lambda entry: entry.name)
    except FileNotFoundError:
        return listing
    except OSError:
        listing.skipped[SKIP_UNREADABLE] += 1
        return listing
    wanted = project.casefold() if project else None
    for folder in projects:
        if wanted is not None and wanted not in folder.name.casefold() \
                and wanted not in folder.path.casefold():
            continue
        kind = _kind(folder)
        if kind == "link":
            listing.skipped[SKIP_LINK] += 1
        elif kind == "dir":
            _list_project(folder.path, folder.name, listing, since)
    return listing


def _kind(entry: os.DirEntry[str]) -> str:
    """``link``, ``dir``, ``file`` or ``other``, never following a link."""
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        pass
    return "other"


def _entries(folder: str, listing: Listing) -> list[os.DirEntry[str]]:
    """A folder's entries by name; none (counted as unreadable) if it cannot be listed."""
    try:
        return sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        listing.skipped[SKIP_UNREADABLE] += 1
        return []


def _list_project(folder: str, project: str, listing: Listing, since: float | None) -> None:
    for entry in _entries(folder, listing):
        kind = _kind(entry)
        if entry.name.endswith(".jsonl"):
            session_id = session_id_of(entry.path)
            # (any other .jsonl is a subagent's, agent-<id>.jsonl)
            _add(entry, kind, project, session_id or "", session_id is None, listing, since)
        elif is_plain_id(entry.name) and kind == "dir":
            _list_subagents(entry.path, entry.name, project, listing, since)
        elif is_plain_id(entry.name) and kind == "link":
            listing.skipped[SKIP_LINK] += 1  # a session's folder (its subagents) linked


def _list_subagents(session_folder: str, session_id: str, project: str, listing: Listing,
                    since: float | None) -> None:
    subagents = os.path.join(session_folder, "subagents")
    try:
        info = os.lstat(subagents)
    except OSError:
        return  # most sessions have none
    if stat.S_ISLNK(info.st_mode):
        listing.skipped[SKIP_LINK] += 1
        return
    if not stat.S_ISDIR(info.st_mode):
        return
    for entry in _entries(subagents, listing):
        if entry.name.endswith(".jsonl"):
            _add(entry, _kind(entry), project, session_id, True, listing, since)


def _add(entry: os.DirEntry[str], kind: str, project: str, session_id: str, subagent: bool,
         listing: Listing, since: float | None) -> None:
    if kind == "link":
        listing.skipped[SKIP_LINK] += 1
        return
    if kind != "file":
        listing.skipped[SKIP_NOT_REGULAR] += 1
        return
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        listing.skipped[SKIP_UNREADABLE] += 1
        return
    if since is not None and info.st_mtime < since - _SINCE_MARGIN:
        listing.older += 1
        return
    listing.transcripts.append(Transcript(entry.path, project, session_id, subagent,
                                          info.st_size, info.st_dev, info.st_ino,
                                          info.st_mtime_ns, info.st_ctime_ns))


def read_transcript(transcript: Transcript, *, chunk_bytes: int = CHUNK_BYTES,
                    settings: Settings | None = None, two_tier: bool = True,
                    tail: bytes | None = None) -> FileResult:
    """Scan one transcript file; never raises. ``two_tier``: first ``LeanScan``, then the
    engine where it says; off, the engine reads every file whole (the same result, slower).
    ``tail``: keep the first pass's (``scan.tail``), going on from this one if not b""."""

    def skipped(reason: str) -> FileResult:
        return FileResult(path=transcript.path, project=transcript.project,
                          session_id=transcript.session_id, subagent=transcript.subagent,
                          skipped=reason)

    try:
        fd = open_transcript(transcript.path)
    except NotAFile:
        return skipped(SKIP_NOT_REGULAR)
    except OSError:
        return skipped(SKIP_UNREADABLE)
    try:
        info = os.fstat(fd)
        if transcript.inode and (info.st_dev, info.st_ino) != (transcript.device,
                                                               transcript.inode):
            # (replaced since it was listed: a link put in its place, say)
            return skipped(SKIP_LINK if os.path.islink(transcript.path) else SKIP_UNREADABLE)
        lean = _resumed(tail, fd, transcript, settings) if tail and two_tier else None
        chunk = os.pread(fd, chunk_bytes, lean._at) if lean else os.read(fd, chunk_bytes)
        if lean is None and two_tier and not _looks_looping(chunk, transcript.subagent):
            lean = _lean_scan(transcript, settings)
        kept = b""
        if lean is not None:
            result, kept = _first_pass(lean, fd, chunk, transcript, settings, chunk_bytes, tail)
            if result is not None:
                return replace(result, tail=kept) if kept else result
            chunk = os.pread(fd, chunk_bytes, 0)
        return replace(_engine(fd, transcript, settings, chunk_bytes),
                       cwd=_file_cwd(fd, chunk, chunk_bytes), tail=kept)
    except OSError as error:
        if error.errno not in (errno.EIO, errno.EACCES, errno.EISDIR, errno.ENOENT):
            logger.debug("reading %s: %s", transcript.path, error)
        return skipped(SKIP_UNREADABLE)
    except Exception as error:  # a bug must cost one file, never the whole scan
        if tail:  # (a kept state broken, foreign, or that no scan made: read without it)
            logger.warning("scan: %s read whole, its kept state not usable: %s",
                           transcript.path, printable(str(error), 300))
            return read_transcript(transcript, chunk_bytes=chunk_bytes, settings=settings,
                                   two_tier=two_tier, tail=b"")
        logger.exception("scanning %s failed", transcript.path)
        return skipped(SKIP_FAILED)
    finally:
        os.close(fd)


def _first_pass(lean: LeanScan, fd: int, chunk: bytes, transcript: Transcript,
                settings: Settings | None, chunk_bytes: int, tail: bytes | None
                ) -> tuple[FileResult | None, bytes]:
    """``LeanScan`` from ``chunk`` on, the engine where it says (None: read by the engine),
    and its tail if asked (b"" if not; kept for a last line half written too)."""
    at = lean._at + len(chunk)
    while chunk and lean.feed(chunk):
        chunk = os.pread(fd, chunk_bytes, at)
        at += len(chunk)
    kept = b""
    if tail is not None and not lean.needs_engine:
        from .tail import keep

        kept = keep(lean, fd)
    result = lean.finish()
    if result is None:
        return None, kept
    loops = [loop for start, end in lean.segments()
             for loop in _engine(fd, transcript, settings, chunk_bytes, start, end).loops]
    return (replace(result, loops=tuple(loops)) if loops else result), kept


def _lean_scan(transcript: Transcript, settings: Settings | None) -> LeanScan:
    from .lean import LeanScan

    return LeanScan(path=transcript.path, project=transcript.project,
                    session_id=transcript.session_id, subagent=transcript.subagent,
                    settings=settings)


def _resumed(tail: bytes, fd: int, transcript: Transcript, settings: Settings | None
             ) -> LeanScan | None:
    """The first pass where ``tail`` left it; None: the file no longer holds what it read."""
    from .tail import resume

    lean = _lean_scan(transcript, settings)
    return lean if resume(tail, fd, lean) else None


def switched_off(result: FileResult, settings: Settings) -> FileResult:
    """The result as counted: skipped when its project is switched off (cached or not)."""
    if result.skipped or not settings.projects_off or not settings.project_off(
            cwd=result.cwd, folder=result.project):
        return result
    return replace(result, skipped=SKIP_PROJECT_OFF)


_CWD = b'"cwd":"'


def _file_cwd(fd: int, head: bytes, chunk_bytes: int) -> str:
    """The top-level ``cwd`` of the file's first line that has one, or ""."""
    from ..engine.reader import MAX_LINE_BYTES, LineBuffer
    from ..state.config import line_cwd

    lines = LineBuffer(max_line=MAX_LINE_BYTES)
    chunk, at = head, len(head)
    while True:
        for _, buffer, start, end in lines.iter_spans(chunk or b"\n"):
            if buffer.find(_CWD, start, end) >= 0:
                cwd = line_cwd(buffer[start:end])
                if cwd:
                    return cwd
        if not chunk:
            return ""  # (a last line without its newline was read as the reader does)
        chunk = os.pread(fd, chunk_bytes, at)
        at += len(chunk)


_REPROMPT_MARK = b'"content":"Stop hook feedback:'  # (a re-prompt, as Claude Code writes it)
LOOKS_LOOPING = 3


def _looks_looping(head: bytes, subagent: bool) -> bool:
    """Whether the engine should read the file at once (a guess: the result is the same)."""
    return not subagent and head.count(_REPROMPT_MARK) >= LOOKS_LOOPING


ENGINE_CHUNK_BYTES = 1 << 18  # (the engine's buffers: a loop-dense scan's worker 9 MB less)


def _engine(fd: int, transcript: Transcript, settings: Settings | None, chunk_bytes: int,
            start: int = 0, end: int | None = None) -> FileResult:
    """The engine's reading from ``start`` to ``end`` (None: the end), chunked as from the top
    (a reply marked final completes where a chunk ends)."""
    from .transcript import TranscriptScan

    scan = TranscriptScan(path=transcript.path, project=transcript.project,
                          session_id=transcript.session_id, subagent=transcript.subagent,
                          settings=settings, reread=partial(_reread, fd), offset=start)
    chunk_bytes, at = min(chunk_bytes, ENGINE_CHUNK_BYTES), start
    while end is None or at < end:
        boundary = (at // chunk_bytes + 1) * chunk_bytes
        chunk = os.pread(fd, (boundary if end is None else min(boundary, end)) - at, at)
        if not chunk:
            break
        scan.feed(chunk)
        at += len(chunk)
    return scan.finish()


def _reread(fd: int, offset: int, length: int) -> bytes:
    """A line read again (a tool result left unread): the file is only appended to."""
    return os.pread(fd, length, offset)
