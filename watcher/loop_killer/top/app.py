"""``loop-killer top``: the shell around ``rows`` and ``view``; keys in cbreak mode between
refreshes (``c`` then ``y`` clears the selected session)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli.commands import state_options
from ..scan.prices import PriceTable
from ..scan.usage import Spent, UsageTally, read_new_bytes
from ..state import journal
from ..state.config import load_settings, transcript_cwd
from ..state.files import list_transcripts, projects_dir, session_id_of, state_dir
from ..state.journal import Record, ToolRecord
from ..state.refused import Refused, hook_refusals, refused_now
from ..state.status import (
    SessionStatus,
    WatcherHeartbeat,
    read_session_status,
    watcher_alive,
    written_statuses,
)
from .rows import LastDetection, Limits, Screen, build_screen, fold_record

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["MISSING_RICH", "StateReader", "add_arguments_top", "parse_window", "top"]

MISSING_RICH = ("loop-killer top needs the rich library: pip install rich (or reinstall "
                "loop-killer, which depends on it)")

REFRESH = 0.5  # seconds between two looks at the state folder
LISTING_INTERVAL = 10.0  # seconds between two listings of the project folders
_READ_PER_LOOK = 8 * 1024 * 1024  # transcript bytes read per session per look
_HISTORY_BYTES = 2 * 1024 * 1024  # of the detection log, read at start
_REFUSALS_KEPT = 64  # a session's latest refusals (those since its mark are what count)
_WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 60.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_window(text: str) -> float:
    """``90s``, ``30m``, ``1h``, ``2d`` (a bare number is minutes) -> seconds."""
    found = _WINDOW.match(text)
    if found is None or float(found.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30m, 1h, 2d")
    return float(found.group(1)) * _UNITS[found.group(2)]


def add_arguments_top(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--window", type=parse_window, default=3600.0, metavar="AGE",
                        help="show sessions whose transcript grew within AGE (30m, 1h, 2d; "
                             "default 1h)")
    state_options(parser, root=True)


class _Transcript:
    """One transcript's usage and its session's folder, read on at each look."""

    __slots__ = ("cwd", "path", "tally")

    def __init__(self, path: str) -> None:
        self.path = path
        self.tally = UsageTally()
        self.cwd = ""  # as its lines last said

    def read_on(self) -> None:
        try:
            data, size = read_new_bytes(self.path, self.tally.offset, _READ_PER_LOOK)
        except OSError:
            return
        if size < self.tally.offset:  # rewritten: count it afresh
            self.tally = UsageTally()
            return
        if data:
            self.tally.feed(data)
            self.cwd = transcript_cwd(data, self.cwd) or self.cwd


class StateReader:
    """What the screen needs, kept up to date from the state folder at each ``look``."""

    def __init__(self, state: Path, *, window: float, root: Path | None = None) -> None:
        self.state = state
        self.root = root
        self.window = window
        self.at_rest: dict[str, SessionStatus] = {}  # active lately, with no status file
        self._next_listing = 0.0
        self.statuses: dict[str, tuple[float, SessionStatus]] = {}  # id -> (when written, status)
        self.detections: dict[str, LastDetection] = {}
        self.refusals: dict[str, list[ToolRecord]] = {}  # a hook's, per session
        self.refused: dict[str, Refused] = {}  # the sessions a call is refused in now
        self.transcripts: dict[str, _Transcript] = {}
        self.beat: WatcherHeartbeat | None = None
        self.prices = PriceTable()
        settings = load_settings(state)
        self.limits = Limits(settings.thresholds.same_reply_turns,
                             settings.thresholds.idle_turns, settings.tool_repeat_block)
        self._journal = journal.JournalTail(state)
        self._journal.skip_to_end()  # before the history: a record in between is read twice
        self._fold(list(journal.read_recent(state, max_bytes=_HISTORY_BYTES)))

    def _fold(self, records: list[Record]) -> None:
        for record in records:
            fold_record(self.detections, record)
        for session_id, refusals in hook_refusals(records).items():
            kept = self.refusals.setdefault(session_id, [])
            kept.extend(refusals)
            del kept[:-_REFUSALS_KEPT]

    def look(self, now: float) -> None:
        self.beat = watcher_alive(self.state, now=now)
        self._fold(list(self._journal.read_new()))
        self._read_statuses(now)
        if self.root is not None and time.monotonic() >= self._next_listing:
            self._list_transcripts(self.root, now)
            self._next_listing = time.monotonic() + LISTING_INTERVAL
        shown = self._shown()
        for session_id in list(self.transcripts):
            if session_id not in shown:
                del self.transcripts[session_id]
        for session_id, status in shown.items():
            transcript = self.transcripts.get(session_id)
            if transcript is None or transcript.path != status.transcript_path:
                transcript = self.transcripts[session_id] = _Transcript(status.transcript_path)
            transcript.read_on()
        self.refused = {
            session_id: refused for session_id in shown.keys() & self.refusals.keys()
            if (refused := refused_now(self.state, session_id, self.refusals[session_id]))}

    def _read_statuses(self, now: float) -> None:
        seen: set[str] = set()
        for session_id, mtime in written_statuses(self.state):
            if now - mtime > self.window + 60:  # written long ago: not active
                continue
            seen.add(session_id)
            known = self.statuses.get(session_id)
            if known is not None and known[0] == mtime:
                continue
            status = read_session_status(self.state, session_id)
            if status is not None:
                self.statuses[session_id] = (mtime, status)
        for session_id in set(self.statuses) - seen:
            del self.statuses[session_id]

    def _list_transcripts(self, root: Path, now: float) -> None:
        """Sessions active lately without a status (the watcher writes one only live)."""
        found: dict[str, SessionStatus] = {}
        for path, entry in list_transcripts(str(root)):
            session_id = session_id_of(path)
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if session_id is None or now - mtime > self.window:
                continue
            found[session_id] = SessionStatus(
                session_id=session_id, transcript_path=path, project=Path(path).parent.name,
                offset=0, run_length=0, chain_length=0, awaiting=None, last_answer_uuid="",
                last_answer_digest="", last_activity=mtime, updated_at=now)
        self.at_rest = found

    def _shown(self) -> dict[str, SessionStatus]:
        shown = dict(self.at_rest)
        shown.update((session_id, status) for session_id, (_, status) in self.statuses.items())
        return shown

    def screen(self, now: float) -> Screen:
        spent_by: dict[str, tuple[Spent | None, Spent | None]] = {
            session_id: transcript.tally.spent(self.prices)
            for session_id, transcript in self.transcripts.items()}
        cwds = {session_id: transcript.cwd
                for session_id, transcript in self.transcripts.items() if transcript.cwd}
        return build_screen(self._shown().values(), self.detections, spent_by, beat=self.beat,
                            limits=self.limits, now=now, window=self.window,
                            home=os.environ.get("HOME"), cwds=cwds, refused=self.refused)


def ask_to_clear(session_id: str, project: str, *, root: Path, state: Path) -> str:
    """``loop-killer clear`` for one session: the line it printed."""
    from ..cli.commands import clear

    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        clear(argparse.Namespace(session=session_id, project=project, root=root, state_dir=state))
    lines = [line for line in said.getvalue().splitlines() if line.strip()]
    return lines[0] if lines else "nothing was said"


UP, DOWN = "up", "down"
_KEYS = {b"\x1b[A": UP, b"\x1bOA": UP, b"k": UP, b"\x1b[B": DOWN, b"\x1bOB": DOWN, b"j": DOWN}


def decode_keys(data: bytes) -> list[str]:
    """The keys in what the terminal sent: arrows (``up``, ``down``) or characters."""
    keys: list[str] = []
    at = 0
    while at < len(data):
        for sequence, key in _KEYS.items():
            if data.startswith(sequence, at):
                keys.append(key)
                at += len(sequence)
                break
        else:
            if data[at] == 0x1B:  # another escape sequence: skip it whole
                end = at + 1
                while end < len(data) and not (0x40 <= data[end] <= 0x7E and end > at + 1):
                    end += 1
                at = end + 1
                continue
            keys.append(chr(data[at]))
            at += 1
    return keys


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys arrive one by one, unechoed, while in this block (Ctrl-C still interrupts)."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_keys(fd: int, timeout: float) -> list[str]:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return []
    try:
        data = os.read(fd, 64)
    except OSError:
        return []
    return decode_keys(data) if data else ["q"]  # end of input: quit


def _terminal_size(fd: int, console: Console) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return console.size
    return max(size.columns, 20), max(size.lines, 6)


def top(args: argparse.Namespace) -> int:
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        print(MISSING_RICH, file=sys.stderr)
        return 2
    from .view import render

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("loop-killer top needs a terminal (try loop-killer status for a snapshot)",
              file=sys.stderr)
        return 2
    state = Path(args.state_dir or state_dir()).expanduser()
    root = Path(args.root or projects_dir()).expanduser()
    reader = StateReader(state, window=args.window, root=root)
    console = Console()
    fd = sys.stdin.fileno()
    chosen, message, asking = "", "", ""  # asking: the session a clear awaits 'y' for
    shown: tuple[object, ...] = ()
    with cbreak(fd), Live(console=console, screen=True, auto_refresh=False) as live:
        next_look = 0.0
        while True:
            now = time.time()
            if time.monotonic() >= next_look:
                reader.look(now)
                next_look = time.monotonic() + REFRESH
            screen = reader.screen(now)
            ids = [row.session_id for row in screen.rows]
            selected = ids.index(chosen) if chosen in ids else 0  # follows its session
            # The terminal's own size each time (a resize), never $COLUMNS/$LINES inherited.
            width, height = _terminal_size(fd, console)
            console.size = (width, height)
            frame = (screen, selected, message, width, height)
            if frame != shown:  # unchanged: nothing drawn
                live.update(render(screen, selected=selected, width=width, height=height,
                                   message=message, now=now), refresh=True)
                shown = frame
            for key in read_keys(fd, max(0.05, next_look - time.monotonic())):
                if asking:
                    row = next((r for r in screen.rows if r.session_id == asking), None)
                    if key in ("y", "Y") and row is not None:
                        message = ask_to_clear(row.session_id, row.project, root=root, state=state)
                    else:
                        message = "clear cancelled"
                    asking = ""
                elif key in ("q", "Q", "\x03"):
                    return 0
                elif key in (UP, DOWN) and ids:
                    step = -1 if key == UP else 1
                    selected = min(max(0, selected + step), len(ids) - 1)
                    chosen = ids[selected]
                elif key in ("c", "C") and screen.rows:
                    row = screen.rows[selected]
                    asking = row.session_id
                    message = (f"end the loop of {row.project_text} {row.session_text} at "
                               "its next Stop? y: yes, other keys: no")
