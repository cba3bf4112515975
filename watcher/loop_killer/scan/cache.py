"""What earlier scans found in each file, so a file unchanged since (a transcript is only
appended to) is not read again; one written in the last ``SETTLING`` seconds is not kept.
And the last report, for a history none of whose files changed since (``Report``).
Decoded into its own types and checked, never unpickled: a bad file reads as an empty cache."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import orjson

from .. import __version__
from ..engine.budget import DEFAULT_BUDGET, Budget
from ..engine.transcript import MAX_COUNT
from ..light import hex_digest
from ..printable import printable
from ..state.config import Settings
from ..state.files import ensure_private_dir, read_small_file, remove_file, write_private_file
from .files import SKIP_PROJECT_OFF, Listing, Transcript
from .records import FileResult
from .summary import Summary

__all__ = ["CACHE_FILE", "REPORT_FILE", "SETTLING", "TAILS_FILE", "Report", "ScanCache",
           "scan_context"]

logger = logging.getLogger(__name__)

CACHE_FILE, TAILS_FILE = "scan-cache.msgpack", "scan-tails.msgpack"
REPORT_FILE = "scan-report.msgpack"
MAX_CACHE_BYTES = 256 << 20  # (a 1 GB history's is about 16 MB)

_FORMAT = 4  # (3: a result holds its session's cwd; 4: its turns, for the budget)
SETTLING = 2.0
_LEFT_BEHIND = 600.0  # seconds: a temporary cache file this old is a killed scan's

Stamp = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


class _Entry(msgspec.Struct, array_like=True, gc=False):
    stamp: Stamp
    result: FileResult


class _Header(msgspec.Struct, gc=False):
    format: int
    context: str


class _Document(_Header, gc=False):
    files: dict[str, _Entry]
    tails: dict[str, tuple[int, int, bytes]] = {}  # path -> device, inode, ``scan.tail``'s


# What a scan could have made, checked by the decoder (in C: a Python loop over every reply
# took longer than decoding them); the fields not named are stepped over unbuilt.
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
_Natural = Annotated[int, msgspec.Meta(ge=0)]


class _SaneUsage(msgspec.Struct, frozen=True, gc=False):  # (a reply's, or a sum's)
    input: _Count = 0
    output: _Count = 0
    cache_read: _Count = 0
    cache_creation: _Count = 0
    cache_creation_1h: _Count = 0


class _SaneReply(msgspec.Struct, gc=False):
    usage: _SaneUsage


class _SaneResult(msgspec.Struct, gc=False):
    replies: list[_SaneReply]
    turns: list[tuple[msgspec.Raw, msgspec.Raw, _Count, _Count]]  # (Turn: an array)
    bytes_read: _Natural
    lines: _Natural
    parsed: _Natural
    broken: _Natural
    oversized: _Natural
    skipped: Annotated[str, msgspec.Meta(max_length=0)]


class _SaneEntry(msgspec.Struct, array_like=True, gc=False):
    stamp: msgspec.Raw
    result: _SaneResult


class _SaneDocument(msgspec.Struct, gc=False):
    files: dict[str, _SaneEntry]


_HEADER = msgspec.msgpack.Decoder(_Header).decode  # (skips ``files`` unbuilt)
_DECODE = msgspec.msgpack.Decoder(_Document).decode
_CHECK = msgspec.msgpack.Decoder(_SaneDocument).decode
_ENCODE = msgspec.msgpack.Encoder().encode


def stamp_of(transcript: Transcript) -> Stamp | None:
    """The file as listed; None when the listing did not say (no result is kept)."""
    if not (transcript.inode and transcript.mtime_ns and transcript.ctime_ns):
        return None
    return (transcript.device, transcript.inode, transcript.size, transcript.mtime_ns,
            transcript.ctime_ns)


def _settled_before() -> int:
    """Files last written or changed before this moment (ns) are kept: see ``SETTLING``."""
    return time.time_ns() - int(SETTLING * 1e9)


def _settled(stamp: Stamp | None, before: int) -> bool:
    return stamp is not None and max(stamp[3], stamp[4]) < before


def scan_context(settings: Settings) -> str:
    """What a file's result depends on besides its bytes (the modules', settings, versions)."""
    package = Path(__file__).resolve().parents[1]
    modules = []
    for module in sorted(package.rglob("*.py")):
        try:
            info = module.stat()
        except OSError:
            continue
        modules.append(f"{module.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}\n")
    thresholds = settings.thresholds
    judged = (
        thresholds.same_reply_turns, thresholds.idle_turns, thresholds.similar,
        sorted(thresholds.off), settings.tool_repeat_warn, settings.tool_repeat_block,
        settings.tool_repeat_stop, settings.edit_oscillation_warn, thresholds.wait_minutes,
        sorted(settings.ignore_tools), sorted(settings.rules_off),
    )
    versions = (sys.version, msgspec.__version__, orjson.__version__)
    # (blake2b, as light's: hashlib would load OpenSSL, 3.6 MB, for this one digest)
    return f"{__version__} {hex_digest(''.join(modules), 16)} {judged!r} {versions!r}"


def _sane(data: bytes, files: dict[str, _Entry]) -> bool:
    """Whether every result holds counts a scan could have made, its loops' replies its own."""
    try:
        _CHECK(data)
    except msgspec.ValidationError:
        return False
    for result in (entry.result for entry in files.values() if entry.result.loops):
        keys = {reply.key for reply in result.replies}
        if not all(reply.key in keys for loop in result.loops
                   for reply in (*loop.tokens, *loop.avoidable)):
            return False
    return True


def _document(path: Path, context: str, else_: str) -> _Document | None:
    """A cache file of this context, checked; None: none yet, or not usable (logged)."""
    try:
        ensure_private_dir(path.parent, create=False)  # (a link there is refused)
        data = read_small_file(path, MAX_CACHE_BYTES, owned=True)
        header = _HEADER(data)
        if header.format != _FORMAT or header.context != context:
            return None  # another version or settings: read again
        document = _DECODE(data)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError) as error:  # (ValidationError is one)
        logger.warning("scan cache %s not used, %s: %s", path, else_,
                       printable(str(error), 300))
        return None
    if not _sane(data, document.files):
        logger.warning("scan cache %s not used, %s: a result in it is not one a scan makes",
                       path, else_)
        return None
    return document


class ScanCache:
    """The results kept by earlier scans, and those of this one (``keep``), saved whole; the
    tails in a file of their own (a live session's changes them alone, scan after scan)."""

    def __init__(self, path: Path, context: str, files: dict[str, _Entry] | None = None,
                 tails: dict[str, tuple[int, int, bytes]] | None = None) -> None:
        self.path, self.context, self._changed, self._tails_changed = path, context, False, False
        self._files = files if files is not None else {}
        self._tails = tails if tails is not None else {}
        self._seen: set[str] = set()
        self._worthy: set[str] = set()  # (files whose tail is kept)
        self._settled_before = _settled_before()

    @classmethod
    def load(cls, state: Path, context: str) -> ScanCache:
        """The cache in the state folder, or an empty one (none yet, or not usable)."""
        files = _document(state / CACHE_FILE, context, "every file is read")
        tails = _document(state / TAILS_FILE, context, "a grown file is read whole")
        return cls(state / CACHE_FILE, context, files.files if files else None,
                   tails.tails if tails else None)

    def split(self, transcripts: Iterable[Transcript], worthy: set[str] | None = None
              ) -> tuple[list[FileResult], list[Transcript], dict[str, bytes]]:
        """(results kept for files unchanged since, the files to read, the tails to keep of
        those: the one kept before if its file is the same, else b"")."""
        kept: list[FileResult] = []
        to_read: list[Transcript] = []
        self._worthy = worthy or set()
        tails: dict[str, bytes] = {}
        for transcript in transcripts:
            path = transcript.path
            self._seen.add(path)
            entry = self._files.get(path)
            stamp = stamp_of(transcript)
            if entry is not None and stamp is not None and entry.stamp == stamp:
                kept.append(entry.result)
                continue
            to_read.append(transcript)
            if path in self._worthy:
                device, inode, tail = self._tails.get(path, (0, 0, b""))
                same = (device, inode) == (transcript.device, transcript.inode)
                tails[path] = tail if same and transcript.inode else b""
        return kept, to_read, tails

    def keep(self, transcript: Transcript, result: FileResult) -> None:
        """Remember a file's result as read now (a file that was not read is forgotten), and
        its tail even while it settles (the bytes it stands for are checked when used)."""
        stamp, path = stamp_of(transcript), transcript.path
        if result.tail and not result.skipped:
            self._tails[path] = (transcript.device, transcript.inode, result.tail)
            self._tails_changed, result = True, replace(result, tail=b"")
        elif self._tails.pop(path, None) is not None:
            self._tails_changed = True
        if stamp is None or result.skipped or not _settled(stamp, self._settled_before):
            self._changed |= self._files.pop(path, None) is not None
        else:
            self._files[path], self._changed = _Entry(stamp, result), True

    def save(self, *, root: str, whole: bool) -> None:
        """Write the files of ``root`` listed now, and its others unless listed ``whole``."""
        inside = os.path.join(root, "")
        files = {path: entry for path, entry in self._files.items()
                 if path in self._seen or (not whole and path.startswith(inside))}
        tails = {path: tail for path, tail in self._tails.items() if path in self._worthy or (
            path not in self._seen and not whole and path.startswith(inside))}
        written = [(self.path, _Document(_FORMAT, self.context, files))] if (
            self._changed or len(files) != len(self._files)) else []
        if self._tails_changed or len(tails) != len(self._tails):
            written.append((self.path.with_name(TAILS_FILE),
                            _Document(_FORMAT, self.context, {}, tails)))
        for path, document in written:
            try:
                write_private_file(path, _ENCODE(document))
            except (OSError, ValueError) as error:  # (ValueError: a name not UTF-8)
                logger.warning("scan cache %s not written: %s", path, error)
        if written:
            self._clear_left_behind()

    def _clear_left_behind(self) -> None:
        """Remove temporary cache files of scans killed while writing."""
        folder, prefixes = self.path.parent, (f".{CACHE_FILE}.", f".{TAILS_FILE}.")
        try:
            with os.scandir(folder) as entries:
                old = [entry.path for entry in entries
                       if entry.name.startswith(prefixes) and entry.name.endswith(".tmp")
                       and entry.is_file(follow_symlinks=False)
                       and entry.stat(follow_symlinks=False).st_mtime
                       < time.time() - _LEFT_BEHIND]
        except OSError:
            return
        for path in old:
            remove_file(path)


class _Kept(msgspec.Struct, gc=False):
    key: str
    summary: Summary  # (its limits are the key's: read back as the defaults, then set)


class _Key(msgspec.Struct, gc=False):
    key: str  # (read first: a report of other files is never decoded)


# What a scan could have summed, checked by the decoder before the report is built: a
# hostile report must neither crash the printing nor put a control code on the screen.
_Sum = Annotated[int, msgspec.Meta(ge=0, le=2**61)]
_Usd = Annotated[float, msgspec.Meta(ge=0, le=1e12)]  # (and never NaN)


class _SaneModel(msgspec.Struct, gc=False):
    tokens: _SaneUsage
    cost_usd: _Usd


class _SaneRow(msgspec.Struct, gc=False):  # (a loop's, a session's, a turn's over budget)
    cost_usd: _Usd
    avoidable_cost_usd: _Usd = 0.0
    loops_cost_usd: _Usd = 0.0
    claude_code_cost_usd: _Usd | None = None
    minutes: _Usd | None = None
    reprompts: _Sum = 0
    tokens: _SaneUsage = _SaneUsage()
    avoidable: _SaneUsage = _SaneUsage()
    models: list[_SaneModel] = []
    over: list[tuple[Literal["reprompts", "usd", "minutes"], _Usd]] = []


class _SaneSummary(msgspec.Struct, gc=False):
    loops: list[_SaneRow]
    sessions: list[_SaneRow]
    budget: list[_SaneRow]
    tokens: _SaneUsage
    avoidable_tokens: _SaneUsage
    cost_usd: _Usd
    avoidable_cost_usd: _Usd
    skipped: dict[Literal["link", "not_regular", "unreadable", "failed", "project_off"], _Sum]


class _SaneKept(msgspec.Struct, gc=False):
    summary: _SaneSummary


def _no_budget(value: object) -> None:
    if isinstance(value, Budget):
        return None  # (``Summary.limits``: not kept)
    raise NotImplementedError(type(value))


def _default_budget(kind: type, value: object) -> Budget:
    if kind is Budget:
        return DEFAULT_BUDGET
    raise NotImplementedError(kind)


_ENCODE_REPORT = msgspec.msgpack.Encoder(enc_hook=_no_budget).encode
_DECODE_REPORT = msgspec.msgpack.Decoder(_Kept, dec_hook=_default_budget).decode
_REPORT_KEY = msgspec.msgpack.Decoder(_Key).decode
_CHECK_REPORT = msgspec.msgpack.Decoder(_SaneKept).decode


class Report:
    """The last scan's summary, kept under a key of everything it was made of (the files'
    stamps, what the listing skipped, the options, the settings and the package): a repeat
    scan of a history none of whose files changed reads one file and no transcript."""

    def __init__(self, state: Path, context: str, root: str, listing: Listing,
                 options: object) -> None:
        self.state, self.path = state, state / REPORT_FILE
        stamps = [(t.path, stamp_of(t)) for t in listing.transcripts]
        before = _settled_before()
        # (none kept while a file may still be written, nor for files listed without stamps)
        self.keeps = all(_settled(stamp, before) for _, stamp in stamps)
        self._listed_skips = Counter(listing.skipped)
        self.key = hex_digest(repr((context, root, stamps, sorted(listing.skipped.items()),
                                    listing.older, options)), 32)

    def load(self) -> Summary | None:
        try:
            ensure_private_dir(self.state, create=False)  # (a link there is refused)
            data = read_small_file(self.path, MAX_CACHE_BYTES, owned=True)
            if _REPORT_KEY(data).key != self.key:
                return None  # (another history's, options' or version's)
            _CHECK_REPORT(data)
            return _DECODE_REPORT(data).summary
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError) as error:
            logger.warning("scan report %s not used: %s", self.path, printable(str(error), 300))
            return None

    def save(self, summary: Summary) -> None:
        # (nor when a file was not read this time, EIO say: it is read again next time)
        if not self.keeps or set(Counter(summary.skipped) - self._listed_skips) - {
                SKIP_PROJECT_OFF}:
            return
        # (a loop's replies are summed in its row already: no report reads them again)
        loops = tuple(replace(row, loop=replace(row.loop, tokens=(), avoidable=()))
                      for row in summary.loops)
        try:
            write_private_file(self.path, _ENCODE_REPORT(_Kept(self.key, replace(
                summary, loops=loops))))
        except (OSError, ValueError) as error:  # (ValueError: a name not UTF-8)
            logger.warning("scan report %s not written: %s", self.path, error)
