"""The session registry: one ``TranscriptReader`` per transcript, fed only the bytes appended,
its steps to the ``Responder``. The one module that assigns a ``Tracked``'s fields."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..engine.answers import PROMPT_REPROMPT
from ..engine.prefilter import skim_span
from ..engine.reader import MAX_LINE_BYTES, Step, TranscriptReader
from ..engine.rules import RULE_IDLE, RULE_SAME, Thresholds
from ..engine.transcript import GoalStatus, SystemEntry, TurnStart, parse_timestamp
from ..state import records
from ..state.config import Settings, load_settings, transcript_cwd
from ..state.files import open_transcript, session_id_of
from ..state.inbox import discard_request, peek_request
from ..state.status import session_status_path
from ..state.tailing import scan_run_start
from .budgets import Budgets
from .follower import Change, FileKey, Follower, Vanished, classify, seen_of, stat_seen
from .housekeeping import Housekeeper
from .publish import publish, unpublish_request
from .respond import HISTORY_AGE, OUTCOME_TIMEOUT, Responder, is_historic
from .tool_repeats import ToolRepeats
from .tracked import CatchUpStats, Dormant, Tracked

__all__ = ["IDLE_AFTER", "READ_LIMIT", "Sessions", "Tracked"]

log = logging.getLogger("loop_killer.watch")

READ_LIMIT = 8 * 1024 * 1024  # bytes read from one file in one go: the others go on
LIVE_FROM_START_LIMIT = 32 * 1024 * 1024  # a file appearing bigger is caught up from its tail
IDLE_AFTER = 3600.0  # seconds without growth before a session at rest goes dormant

_MATCH_BUDGET = 64 * 1024 * 1024  # most bytes scanned (keys x bytes) to sift fired keys


class Sessions:
    """Every followed transcript, by path; all calls from one thread."""

    def __init__(self, state: Path, *, home: str | None = None,
                 outcome_timeout: float = OUTCOME_TIMEOUT, history_age: float = HISTORY_AGE,
                 read_limit: int = READ_LIMIT, idle_after: float = IDLE_AFTER,
                 settings: Settings | None = None) -> None:
        self.state = state
        self.settings = settings if settings is not None else load_settings(state)
        self.home = home
        self.read_limit = read_limit
        self.idle_after = idle_after
        self.respond = Responder(state, home=home, history_age=history_age,
                                 outcome_timeout=outcome_timeout)
        self.housekeeper = Housekeeper(state, home=home)
        self.tool_repeats = ToolRepeats(state, home=home, settings=self.settings)
        self.budgets = Budgets(self.settings.budget)
        self.tracked: dict[str, Tracked] = {}
        self.by_key: dict[FileKey, str] = {}
        self.gone = Vanished()  # recently vanished files: one may turn up renamed
        self.unreadable: dict[str, str] = {}  # path -> last error logged
        self.ignored: set[str] = set()  # non-regular files, logged once
        self.cut_short: set[str] = set()  # files whose backward scan hit its budget, logged once
        self.catch_up_stats = CatchUpStats()

    def follow_hook_detection(self, session_id: str, answer_uuid: str, rule: str) -> None:
        tracked = next((t for t in self.tracked.values() if t.session_id == session_id), None)
        if tracked is not None:
            self.respond.follow(tracked, answer_uuid, rule)

    def catch_up(self, path: str, *, pending_requests: set[str]) -> Tracked | None:
        """Catch an existing transcript up from its tail; nothing fires."""
        tracked = self._open_tail(path, pending_requests)
        if tracked is None or tracked.reader is None:
            return None
        detector = tracked.reader.detector
        stats = self.catch_up_stats
        stats.sessions += 1
        stats.projects.add(tracked.project)
        if detector.run_length:
            stats.runs += 1
        if (detector.run_length or detector.awaiting == PROMPT_REPROMPT
                or tracked.session_id in pending_requests):
            tracked.published = publish(self.state, tracked, time.time(), unless_on_disk=True,
                                        home=self.home)
        elif self._at_rest(tracked):
            self._let_go(tracked)
        return tracked

    def _read_tail(self, path: str | Path, end: int | None = None
                   ) -> tuple[os.stat_result, int, bytes]:
        """(stat, where the trailing run starts, its bytes up to ``end``). Raises OSError."""
        fd = open_transcript(path, regular_only=False)
        try:
            info = os.fstat(fd)
            if not seen_of(info).regular:
                return info, 0, b""
            size = info.st_size if end is None else end
            with open(fd, "rb", buffering=0, closefd=False) as handle:
                found = scan_run_start(handle, size, max_reprompts=self.settings.thresholds.reach)
            if found.why == "budget" and str(path) not in self.cut_short:
                self.cut_short.add(str(path))
                log.warning("%s: only its last %d MB (%d lines) were read back to find its "
                            "run; what came before is not counted", path,
                            max(1, found.read >> 20), found.lines)
            return info, found.offset, os.pread(fd, size - found.offset, found.offset)
        finally:
            os.close(fd)

    def _open_tail(self, path: str, pending_requests: set[str]) -> Tracked | None:
        session_id = session_id_of(path)
        if session_id is None:
            return None
        try:
            info, start, data = self._read_tail(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            self._unreadable(path, error)
            return None
        now_seen = seen_of(info)
        if not now_seen.regular:
            self._not_a_file(path)
            return None
        self.unreadable.pop(path, None)
        reader = self._reader(path, session_id, start, data)
        tracked = self._new_tracked(path, session_id, now_seen.key, reader)
        tracked.follower.offset = start + len(data)
        tracked.follower.remember(data)
        tracked.last_activity = now_seen.mtime
        prompted = self._ingest(tracked, data, time.time(), live=False)
        reader.detector.go_live()
        self.catch_up_stats.bytes_read += len(data)
        if session_id in pending_requests:
            self._withdraw_if_superseded(tracked, prompted)
        return tracked

    def _reader(self, path: str | Path, session_id: str, offset: int, data: bytes | None,
                *, off: bool | None = None) -> TranscriptReader:
        """A reader from ``offset``, catching up when given ``data`` (the tail it replays:
        only the fired keys it holds are kept). ``off`` None: as the folder says."""
        known = records.recorded_keys(self.state, session_id)
        if data is not None and len(known) * len(data) <= _MATCH_BUDGET:
            known = {key for key in known if key.encode() in data}
        if off is None:
            off = self.settings.project_off(folder=Path(path).parent.name)
        return TranscriptReader(session_id, offset=offset, live=data is None,
                                already_fired=known, thresholds=self._thresholds(off),
                                ignored=self.settings.ignore_tools, parse=skim_span)

    def _thresholds(self, off: bool) -> Thresholds:
        thresholds = self.settings.thresholds
        return thresholds.replace(off=frozenset({RULE_SAME, RULE_IDLE})) if off else thresholds

    def _place(self, tracked: Tracked, data: bytes) -> None:
        """Whether the project is off, asked again when ``data`` gives a new cwd (the
        folder's name may not say), before its lines are judged."""
        cwd = transcript_cwd(data, tracked.cwd)
        if not cwd or cwd == tracked.cwd:
            return
        tracked.cwd = sys.intern(cwd)  # (one string per folder, shared by its sessions)
        off = self.settings.project_off(cwd=cwd, folder=tracked.project)
        if off == tracked.off:
            return
        tracked.off = off
        tracked.tools = self.tool_repeats.counter(off=off)
        tracked.tool_streaks = ()
        if tracked.reader is not None:
            tracked.reader.detector.thresholds = self._thresholds(off)

    def _wake(self, tracked: Tracked) -> None:
        """Rebuild a dormant session's reader from its tail, as at start-up. Raises OSError."""
        end = tracked.follower.offset
        _, start, data = self._read_tail(tracked.path, end)
        dormant = tracked.dormant
        reader = self._reader(tracked.path, tracked.session_id, start, data, off=tracked.off)
        detector = reader.detector
        if dormant is not None:
            detector.goal = dormant.goal
        tracked.reader = reader
        tracked.tools = self.tool_repeats.counter(off=tracked.off)
        try:
            self._ingest(tracked, data, time.time(), live=False)
        except BaseException:
            tracked.reader = None  # dormant still: the next growth tries again
            raise
        if dormant is not None:
            if detector.last_answer is None:
                detector.last_answer = dormant.last_answer
            detector.answers_seen = dormant.answers_seen
        tracked.dormant = None
        detector.go_live()
        log.debug("%s: awake again (%d bytes of its tail read)",
                  self.respond.name(tracked), len(data))

    def _let_go(self, tracked: Tracked) -> None:
        """Drop a quiet session's reader, keeping what its status shows."""
        detector = tracked.detector
        if detector is None:
            return
        last = detector.last_answer  # kept without its texts (the status has their digest)
        bare = None if last is None else replace(last, text="", prompt_uuid="", message_ids=())
        tracked.dormant = Dormant(detector.goal, bare, detector.answers_seen)
        tracked.reader = None
        tracked.tools = None
        self.budgets.forget(tracked.path)

    def _withdraw_if_superseded(self, tracked: Tracked, prompted: str) -> None:
        prompt_at = parse_timestamp(prompted)
        if prompt_at is None:
            return
        request = peek_request(self.state, tracked.session_id)
        if request is not None and prompt_at > request.created_at:
            discard_request(self.state, tracked.session_id,
                            "superseded by a prompt written while no watcher ran",
                            transcript_path=tracked.path)  # not another project's

    def sync(self, path: str) -> bool:
        """Bring one path up to date; True when more bytes are left to read."""
        tracked = self.tracked.get(path)
        if tracked is None:
            return self._discover(path)
        try:
            if tracked.reader is None and not self._woken(tracked):
                return False
            change, data = tracked.follower.read_new(limit=self.read_limit)
        except OSError as error:
            self._unreadable(path, error, self.respond.name(tracked))
            return False
        if self.unreadable.pop(path, None) is not None:
            log.warning("%s: readable again", self.respond.name(tracked))
        if change is Change.GROWN:
            now = time.time()
            tracked.last_activity = now
            self._ingest(tracked, data, now, live=True)
            self._after_batch(tracked, now)
            return len(data) >= self.read_limit
        if change is Change.UNCHANGED:
            return False
        if change in (Change.TRUNCATED, Change.REPLACED):
            what = "truncated" if change is Change.TRUNCATED else "replaced by another file"
            log.warning("%s was %s: reading it again from the start (nothing fires twice)",
                        self.respond.name(tracked), what)
            self.drop(path, why=what, quiet=True, keep_status=True)
            return self._discover(path)
        self.drop(path, why=change.value)
        return False

    def _woken(self, tracked: Tracked) -> bool:
        """A dormant session: woken if its file grew; False while unchanged."""
        follower = tracked.follower
        change = classify(follower.key, follower.offset, stat_seen(tracked.path))
        if change is Change.UNCHANGED:
            return False
        if change is Change.GROWN:
            self._wake(tracked)
        return True

    def _discover(self, path: str) -> bool:
        """A path not followed yet (or followed anew): start following it."""
        session_id = session_id_of(path)
        if session_id is None:
            return False
        try:
            seen = stat_seen(path)
        except OSError as error:
            self._unreadable(path, error)
            return False
        change = classify(None, 0, seen)
        if change is Change.GONE:
            self.unreadable.pop(path, None)
            self.ignored.discard(path)
            return False
        if change is Change.NOT_A_FILE:
            self._not_a_file(path)
            return False
        assert seen is not None
        renamed_from = self._renamed_from(path, seen.key)
        if renamed_from is not None:  # what fired under the old name goes with it
            records.move_session(self.state, renamed_from, session_id)
            self.catch_up(path, pending_requests=set())
            return False
        if seen.size > LIVE_FROM_START_LIMIT:
            log.info("%s appeared with %d MB: catching up its tail only", path, seen.size >> 20)
            self.catch_up(path, pending_requests=set())
            return False
        # Read from its start: everything recorded as fired counts, not what a tail holds.
        tracked = self._new_tracked(path, session_id, seen.key,
                                    self._reader(path, session_id, 0, None))
        tracked.history_end = seen.size
        log.info("following %s", self.respond.name(tracked))
        return self.sync(path)

    def _renamed_from(self, path: str, key: FileKey) -> str | None:
        """The session a new path was renamed from (followed, or vanished moments ago)."""
        moved_from = self.by_key.get(key)
        if moved_from is not None and moved_from != path:
            old = self.tracked[moved_from]
            if old.follower.same_file_at(path):
                log.info("%s: renamed to %s", moved_from, path)
                self.drop(moved_from, why="renamed", quiet=True)
                return old.session_id
            return None
        session_id = self.gone.take(path, key, time.monotonic())
        if session_id is not None:
            log.info("%s: a file followed before under another name", path)
        return session_id

    def _new_tracked(self, path: str, session_id: str, key: FileKey,
                     reader: TranscriptReader) -> Tracked:
        project = sys.intern(os.path.basename(os.path.dirname(path)))  # shared
        off = self.settings.project_off(folder=project)
        tracked = Tracked(path, session_id, project, Follower(path, key, reader.offset), reader,
                          tools=self.tool_repeats.counter(off=off), off=off)
        self.tracked[path] = tracked
        self.by_key[key] = path
        return tracked

    def drop(self, path: str, *, why: str, quiet: bool = False, keep_status: bool = False) -> None:
        """Stop following a path; its status file goes too unless ``keep_status``."""
        tracked = self.tracked.pop(path, None)
        if tracked is None:
            return
        if self.by_key.get(tracked.follower.key) == path:
            del self.by_key[tracked.follower.key]
        if why == Change.GONE.value:
            self.gone.add(tracked.follower, tracked.session_id, time.monotonic())
        detector = tracked.detector
        busy = self.respond.pending_of(tracked) is not None or (
            detector is not None and detector.run_length)
        self.respond.forget(tracked)
        self.budgets.forget(path)
        if not quiet:
            (log.warning if busy else log.info)("%s: transcript %s, no longer followed",
                                                  self.respond.name(tracked), why)
        if not keep_status:
            with contextlib.suppress(OSError, ValueError):
                os.unlink(session_status_path(self.state, tracked.session_id))

    def _ingest(self, tracked: Tracked, data: bytes, now: float, *, live: bool) -> str:
        """Feed ``data`` to the reader and act on its steps; the last prompt's timestamp."""
        reader = tracked.reader
        assert reader is not None
        self._place(tracked, data)
        prompted = ""
        for step in reader.feed(data):
            stamp = self._on_step(tracked, step, now, live=live)
            if stamp is not None:
                prompted = stamp
        return prompted

    def _on_step(self, tracked: Tracked, step: Step, now: float, *, live: bool) -> str | None:
        """Act on one step; the timestamp of the person's prompt, if it is one."""
        event = step.event
        if event is not None:
            # A tool loop in the history a file appeared with (a copy) is not news.
            fresh = live and not (step.end <= tracked.history_end and is_historic(
                getattr(event, "timestamp", ""), now, max_age=self.respond.history_age))
            tracked.tool_streaks = self.tool_repeats.feed(tracked, event, live=fresh)
            if not tracked.off:
                self.budgets.feed(tracked.path, event)
        prompted = None
        if isinstance(event, TurnStart):
            if event.kind == "prompt":
                prompted = event.timestamp
                if live:
                    self.respond.on_prompt(tracked)
        elif isinstance(event, (GoalStatus, SystemEntry)):
            self.respond.on_status(tracked, event)
        for detection in step.detections:
            self.respond.on_detection(tracked, detection, step.end, now)
        return prompted

    def _after_batch(self, tracked: Tracked, now: float) -> None:
        reader = tracked.reader
        assert reader is not None
        broken = reader.stats.broken
        if broken > tracked.reported_broken:
            count = broken - tracked.reported_broken
            log.warning("%s: skipped %d broken line%s (not a JSON object) before byte %d",
                        self.respond.name(tracked), count, "s" if count != 1 else "", reader.offset)
            tracked.reported_broken = broken
        if reader.oversized_lines > tracked.reported_oversized:
            log.warning("%s: skipped a line longer than %d MB (a partial write that never "
                        "ended, or not a transcript); reading on after it",
                        self.respond.name(tracked), MAX_LINE_BYTES >> 20)
            tracked.reported_oversized = reader.oversized_lines
        tracked.published = publish(self.state, tracked, now, home=self.home,
                                    budget=self.budgets.judge(tracked, now, self.respond))

    def expire_requests(self, now: float) -> set[str]:
        """Remove the requests no Stop hook will take; the sessions whose request went."""

        def unpublished(tracked: Tracked) -> None:
            tracked.published = unpublish_request(self.state, tracked, now, home=self.home)

        by_session = {t.session_id: t for t in self.tracked.values()}
        return self.housekeeper.expire_requests(by_session, now, then=unpublished)

    def housekeep(self, now: float | None = None, *, statuses: bool = True) -> None:
        """Expire old clear requests, forget deleted transcripts (their statuses only when
        ``statuses``), let idle sessions go dormant."""
        now = time.time() if now is None else now
        self.expire_requests(now)
        followed = {t.session_id for t in self.tracked.values()}
        self.housekeeper.forget_vanished(self.gone.forget_old(time.monotonic()), followed)
        if statuses:
            self.housekeeper.sweep_statuses(followed)
        for tracked in self.tracked.values():
            if now - tracked.last_activity > self.idle_after and self._at_rest(tracked):
                self._let_go(tracked)

    def _at_rest(self, tracked: Tracked) -> bool:
        """Awake with nothing in progress a rebuild from the tail could not redo."""
        if self.respond.pending_of(tracked) is not None:
            return False
        detector = tracked.detector
        return (detector is not None and detector.run_length == 0
                and detector.awaiting != PROMPT_REPROMPT
                and not detector.answer_started and tracked.pending_bytes == 0
                and tracked.follower.offset == tracked.consumed)

    def _unreadable(self, path: str, error: OSError, name: str = "") -> None:
        """Log a read error once (until it changes)."""
        text = f"{type(error).__name__}: {error.strerror or error}"
        if self.unreadable.get(path) != text:
            log.warning("%s: cannot read (%s); will retry", name or path, text)
            self.unreadable[path] = text

    def _not_a_file(self, path: str) -> None:
        if path not in self.ignored:
            log.warning("ignoring %s: not a regular file", path)
            self.ignored.add(path)
        self.drop(path, why="is not a regular file any more", quiet=True)
