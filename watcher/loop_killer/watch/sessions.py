"""The session registry: one detector per transcript, fed only whole new lines.

``Sessions.sync(path)`` is called for every hint that a transcript may have changed
(a file-system event or the reconcile pass). It decides from the file's identity and
size what happened (``follower.classify``), reads only the new bytes, feeds whole lines
to the session's ``RunDetector``, and acts on what the detector says:

* a detection: the clear request is written at once, then the detection log line and one
  line in the terminal; the session status that covers the answer is written after the
  request (at the end of the batch), so a Stop hook that sees the status reach past the
  answer, or its digest, finds the request already there;
* a person's prompt: a pending request for the session is withdrawn;
* afterwards: what became of the detection (``outcomes``).

Start-up catch-up reads only each file's trailing run (``tailing.find_run_start``) with
the detector in catch-up mode, so nothing fires and start-up does not grow with history.

Left running for weeks, memory and the state folder must not grow with history either
(``housekeep``, called from the watcher's reconcile pass): a clear request nobody took
expires, the status of a transcript deleted while no watcher ran goes, and a session
idle for long with no run in progress keeps only its offset and identity (its detector
is rebuilt from the file's tail, as at start-up, once the file grows again). What fired
is remembered per session, newest ``FIRED_KEEP`` only (``fired.FiredMemory``); a detector
about to be built also asks the detection log (``journal.fired``: answers and the
re-prompts they answered), so nothing fires twice across restarts, truncations, renames
and naps.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..engine import (
    Answer,
    Detection,
    GoalStatus,
    LineBuffer,
    ParseStats,
    RunDetector,
    SystemEntry,
    TurnStart,
    parse_line,
    parse_timestamp,
    text_digest,
)
from ..state import journal
from ..state.files import open_transcript, read_small_file
from ..state.inbox import (
    MAX_REQUEST_AGE,
    MAX_REQUEST_BYTES,
    ClearRequest,
    InvalidRequest,
    discard_request,
    parse_request,
    peek_request,
    request_path,
    write_request,
)
from ..state.paths import is_plain_id, session_id_of
from ..state.status import (
    SessionStatus,
    read_session_status,
    session_status_path,
    write_session_status,
)
from ..tailing import find_run_start
from . import report
from .fired import FIRED_KEEP, FiredMemory
from .follower import (
    Change,
    FileKey,
    Follower,
    Seen,
    classify,
    holds,
    seen_of,
)
from .outcomes import (
    HISTORY_AGE,
    OUTCOME_TIMEOUT,
    Outcome,
    PendingOutcome,
    at_deadline,
    is_historic,
    prevented_continuation,
)

__all__ = ["IDLE_AFTER", "READ_LIMIT", "Sessions", "Tracked"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")

READ_LIMIT = 8 * 1024 * 1024
"""Most bytes read from one file in one go; the rest is read on the next turn of the
loop, so one huge append cannot hold up the heartbeat or the other sessions."""

RENAME_WINDOW = 30.0
"""Seconds during which a file that vanished and turns up under another name (same
device and inode) counts as renamed, not new, whichever event came first."""

LIVE_FROM_START_LIMIT = 32 * 1024 * 1024
"""A file that appears while the watcher runs is read from its start, live, unless it is
already bigger than this: then (a copied history, surely) only its tail is caught up."""

IDLE_AFTER = 3600.0
"""Seconds without growth after which a session with no run in progress goes dormant:
its detector (the last answer's text, the run's texts, what it fired) is let go."""

REBUILD_AFTER = FIRED_KEEP
"""Detections after which a detector is let go at its next quiet moment and rebuilt from
the tail on the next growth: its own set of fired answers only ever grows."""

_MATCH_BUDGET = 64 * 1024 * 1024
"""Most bytes scanned (uuids x bytes) to keep only the fired uuids a tail holds."""


@dataclass(frozen=True, slots=True)
class Dormant:
    """What a dormant session keeps of its detector, so that its status reads the same
    once it is rebuilt from the tail (the tail may not reach back to these)."""

    goal: GoalStatus | None
    last_answer: Answer | None  # without its text (the status keeps only its digest)
    answers_seen: int


@dataclass(slots=True, eq=False)
class Tracked:
    """One session transcript being followed."""

    path: Path
    session_id: str
    project: str
    follower: Follower
    detector: RunDetector | None  # None while dormant: rebuilt from the tail on growth
    lines: LineBuffer = field(default_factory=LineBuffer)
    stats: ParseStats = field(default_factory=ParseStats)
    consumed: int = 0  # offset just past the last whole line read
    history_end: int = 0  # bytes already in the file when first seen live
    last_activity: float = 0.0  # when the file last grew (epoch seconds)
    last_answer_seen_at: float = 0.0  # when the watcher saw the last answer complete
    last_prompt_timestamp: str = ""  # of the last person's prompt read during catch-up
    published: tuple[Any, ...] | None = None  # what the last status written said
    digest: tuple[str, str] = ("", "")  # (answer uuid, text digest) cache
    pending: PendingOutcome | None = None
    settled: bool = False  # the last detection's loop was seen to end (stopped, cleared)
    reported_broken: int = 0
    error: str | None = None
    request_file: str = ""  # where a clear request for this session would be
    dormant: Dormant | None = None  # set while the detector is let go
    fires: int = 0  # detections by the current detector


@dataclass(slots=True)
class CatchUpStats:
    sessions: int = 0
    bytes_read: int = 0
    runs: int = 0
    projects: set[str] = field(default_factory=set)


class Sessions:
    """Every followed transcript, by path; all calls from one thread."""

    def __init__(
        self,
        state: Path,
        *,
        home: str | None = None,
        outcome_timeout: float = OUTCOME_TIMEOUT,
        history_age: float = HISTORY_AGE,
        read_limit: int = READ_LIMIT,
        idle_after: float = IDLE_AFTER,
    ) -> None:
        self.state = state
        self.home = home
        self.outcome_timeout = outcome_timeout
        self.history_age = history_age
        self.read_limit = read_limit
        self.idle_after = idle_after
        self.tracked: dict[str, Tracked] = {}
        self.by_key: dict[FileKey, str] = {}
        # Recently vanished files: when, their session, how far read, their last bytes.
        self.gone: dict[FileKey, tuple[float, str, int, bytes]] = {}
        # What fired lately (answers and re-prompts), newest FIRED_KEEP per session.
        self.fired = FiredMemory()
        # During start-up only: the detection log read once for every session.
        self._logged: dict[str, journal.Fired] | None = None
        # Called just before a request is written, to learn first what the Stop hook
        # logged meanwhile (the watcher sets it to its detection-log tail).
        self.refresh: Callable[[], None] | None = None
        self.unreadable: dict[str, str] = {}  # path -> last error logged
        self.ignored: set[str] = set()  # non-regular files, logged once
        self.unremovable: set[str] = set()  # state files that could not be removed, logged once
        self._watching: set[str] = set()  # paths with a pending outcome
        self.catch_up_stats = CatchUpStats()

    # -- start-up ---------------------------------------------------------------------

    def load_fired(self) -> None:
        """Read the detection log once for the start-up catch-up (``end_start_up`` lets it
        go): what fired before, answers and re-prompts, never fires again."""
        self._logged = journal.fired(self.state)

    def end_start_up(self) -> None:
        self._logged = None

    def follow_hook_detection(self, session_id: str, answer_uuid: str, rule: str) -> None:
        """The Stop hook fired on its own (its detection was in the log): follow what
        becomes of it in the transcript, as for our own, so this terminal shows the clear.

        The clear may already be on disk when the log is read: the goal's last status
        then says so at once.
        """
        tracked = next((t for t in self.tracked.values() if t.session_id == session_id), None)
        if tracked is None or (tracked.pending is not None and not tracked.pending.stopped):
            return
        now = time.time()
        tracked.pending = PendingOutcome(answer_uuid, rule, now,
                                         time.monotonic() + self.outcome_timeout)
        tracked.settled = False
        self._watching.add(str(tracked.path))
        goal = tracked.detector.goal if tracked.detector is not None else None
        if goal is not None and goal.cleared:
            self._resolve(tracked, Outcome(
                "cleared", f"goal cleared: {report.snippet(goal.condition, 60)}"))

    def note_fired(self, session_id: str, answer_uuid: str, prompt_uuid: str = "") -> None:
        """An answer already acted on (by us, or by the Stop hook: it may know only the
        re-prompt its answer replied to, when the answer was not in the file yet)."""
        self.fired.add(session_id, (answer_uuid, prompt_uuid), time.time())

    def _known_fired(self, session_id: str, data: bytes | None = None,
                     renamed_from: str | None = None) -> set[str]:
        """What a detector about to be built for ``session_id`` must never fire on: what
        this watcher noted lately, and what the detection log says fired (answers, and
        the re-prompts they answered).

        With ``data``, the bytes the detector is about to replay (a tail), only the
        logged uuids those bytes hold are taken (nothing else is reachable from its run),
        and the session's memory keeps them too.
        """
        known = set(self.fired.of(session_id))  # a renamed file's memory moved here
        for name in (session_id, renamed_from):
            if name is None:
                continue
            entry = (self._logged.get(name) if self._logged is not None
                     else journal.fired(self.state, name).get(name))
            if entry is None:
                continue
            logged = entry.answers | entry.prompts
            if data is not None:
                logged = _held_in(logged, data)
                self.fired.add(session_id, logged, time.time())
            known |= logged
        return known

    def catch_up(self, path: str, seen: Seen | None = None, *, pending_requests: set[str],
                 renamed_from: str | None = None) -> Tracked | None:
        """Bring an existing transcript to its current state from its tail; nothing fires."""
        tracked = self._open_tail(path, seen, renamed_from)
        if tracked is None:
            return None
        stats = self.catch_up_stats
        stats.sessions += 1
        stats.projects.add(tracked.project)
        if tracked.detector.run_length:
            stats.runs += 1
        if tracked.session_id in pending_requests:
            self._withdraw_if_superseded(tracked)
        detector = tracked.detector
        assert detector is not None
        if detector.run_length or detector.awaiting == "reprompt" or (
            tracked.session_id in pending_requests
        ):
            self._publish(tracked, time.time(), unless_on_disk=True)
        return tracked

    def _open_tail(self, path: str, seen: Seen | None, renamed_from: str | None = None
                   ) -> Tracked | None:
        session_id = session_id_of(Path(path))
        if session_id is None:
            return None
        try:
            fd = open_transcript(path, regular_only=False)
        except FileNotFoundError:
            return None
        except OSError as error:
            self._unreadable(path, error)
            return None
        try:
            info = os.fstat(fd)
            now_seen = seen_of(info)
            if not now_seen.regular:
                self._not_a_file(path)
                return None
            with open(fd, "rb", buffering=0, closefd=False) as handle:
                size = info.st_size
                start = find_run_start(handle, size)
                data = os.pread(fd, size - start, start)
        except OSError as error:
            self._unreadable(path, error)
            return None
        finally:
            os.close(fd)
        self.unreadable.pop(path, None)
        tracked = self._new_tracked(path, session_id, now_seen.key, start, live=False,
                                    already_fired=self._known_fired(session_id, data,
                                                                    renamed_from))
        tracked.follower.offset = start + len(data)
        tracked.follower.remember(data)
        tracked.last_activity = now_seen.mtime
        self._ingest(tracked, data, time.time(), live=False)
        tracked.detector.go_live()
        self.catch_up_stats.bytes_read += len(data)
        return tracked

    def _wake(self, tracked: Tracked) -> None:
        """Rebuild a dormant session's detector from its tail up to what was read, as the
        start-up catch-up does; then it reads on live. Raises OSError."""
        end = tracked.consumed
        fd = open_transcript(tracked.path, regular_only=False)
        try:
            with open(fd, "rb", buffering=0, closefd=False) as handle:
                start = find_run_start(handle, end)
            data = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        dormant = tracked.dormant
        detector = RunDetector(tracked.session_id, live=False,
                               already_fired=self._known_fired(tracked.session_id, data))
        if dormant is not None:
            detector.goal = dormant.goal
        tracked.detector = detector
        tracked.fires = 0
        stats, tracked.stats = tracked.stats, ParseStats()  # counted once already
        tracked.consumed = start
        try:
            self._ingest(tracked, data, time.time(), live=False)
        except BaseException:
            tracked.detector = None  # dormant still: the next growth tries again
            tracked.lines.reset()
            raise
        finally:
            tracked.stats = stats
            tracked.consumed = end
        if dormant is not None:
            if detector.last_answer is None:
                detector.last_answer = dormant.last_answer
            detector.answers_seen = dormant.answers_seen
        tracked.dormant = None
        detector.go_live()
        log.debug("%s: awake again (%d bytes of its tail read)", self._name(tracked), len(data))

    def _let_go(self, tracked: Tracked, *, idle: bool) -> None:
        """Drop a quiet session's detector; keep what its status shows of it."""
        detector = tracked.detector
        if detector is None:
            return
        last = detector.last_answer
        tracked.dormant = Dormant(detector.goal, None if last is None else replace(last, text=""),
                                  detector.answers_seen)
        tracked.detector = None
        tracked.fires = 0
        if idle:  # the detection log knows what fired, should it ever grow again
            self.fired.forget(tracked.session_id)

    def _withdraw_if_superseded(self, tracked: Tracked) -> None:
        prompt_at = parse_timestamp(tracked.last_prompt_timestamp)
        if prompt_at is None:
            return
        request = peek_request(self.state, tracked.session_id)
        if request is not None and prompt_at > request.created_at:
            discard_request(self.state, tracked.session_id,
                            "superseded by a prompt written while no watcher ran")

    # -- following --------------------------------------------------------------------

    def sync(self, path: str) -> bool:
        """Bring one path up to date. Returns True when more bytes are left to read."""
        tracked = self.tracked.get(path)
        if tracked is None:
            return self._discover(path)
        try:
            if tracked.detector is None and not self._woken(tracked):
                return False
            change, data = tracked.follower.read_new(limit=self.read_limit)
        except OSError as error:
            self._read_error(tracked, error)
            return False
        if tracked.error is not None:
            log.warning("%s: readable again", self._name(tracked))
            tracked.error = None
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
                        self._name(tracked), what)
            self.drop(path, why=what, quiet=True, keep_status=True)
            return self._discover(path)
        self.drop(path, why=change.value)
        return False

    def _woken(self, tracked: Tracked) -> bool:
        """A dormant session: False while its file has not grown; else wake it up (its
        detector rebuilt from the tail) and say True. Any other change is left to
        ``read_new`` to find. Raises OSError."""
        try:
            seen: Seen | None = seen_of(os.stat(tracked.path))
        except (FileNotFoundError, NotADirectoryError):
            seen = None
        follower = tracked.follower
        change = classify(follower.key, follower.offset, seen)
        if change is Change.UNCHANGED:
            return False
        if change is Change.GROWN:
            self._wake(tracked)
        return True

    def _discover(self, path: str) -> bool:
        """A path not followed yet (or followed anew): start following it."""
        session_id = session_id_of(Path(path))
        if session_id is None:
            return False
        try:
            seen: Seen | None = seen_of(os.stat(path))
        except (FileNotFoundError, NotADirectoryError):
            seen = None
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
        moved_from = self.by_key.get(seen.key)
        if moved_from is not None and moved_from != path:
            old = self.tracked[moved_from]
            if old.follower.check and holds(path, old.follower.offset, old.follower.check):
                # The same file under a new name: what it holds was read already, and
                # what fired in it must not fire again under the new name.
                log.info("%s: renamed to %s", moved_from, path)
                self.drop(moved_from, why="renamed", quiet=True)
                self.fired.move(old.session_id, session_id, time.time())
                self.catch_up(path, seen, pending_requests=set(), renamed_from=old.session_id)
                return False
        else:
            renamed_from = self._renamed(path, seen.key)
            if renamed_from is not None:
                log.info("%s: a file followed before under another name", path)
                self.fired.move(renamed_from, session_id, time.time())
                self.catch_up(path, seen, pending_requests=set(), renamed_from=renamed_from)
                return False
        if seen.size > LIVE_FROM_START_LIMIT:
            log.info("%s appeared with %d MB: catching up its tail only", path, seen.size >> 20)
            self.catch_up(path, seen, pending_requests=set())
            return False
        # Read from its start (new, or truncated, or replaced): everything the detection
        # log says fired in this session counts, not only what a tail would reach.
        tracked = self._new_tracked(path, session_id, seen.key, 0, live=True,
                                    already_fired=self._known_fired(session_id))
        tracked.history_end = seen.size
        log.info("following %s", self._name(tracked))
        return self.sync(path)

    def _new_tracked(self, path: str, session_id: str, key: FileKey, offset: int, *, live: bool,
                     already_fired: Collection[str]) -> Tracked:
        detector = RunDetector(session_id, live=live, already_fired=already_fired)
        p = Path(path)
        tracked = Tracked(p, session_id, p.parent.name, Follower(p, key, offset), detector,
                          consumed=offset,
                          request_file=str(request_path(self.state, session_id)))
        self.tracked[path] = tracked
        self.by_key[key] = path
        return tracked

    def drop(self, path: str, *, why: str, quiet: bool = False, keep_status: bool = False
             ) -> None:
        """Stop following a path; its status file goes too unless it is read anew."""
        tracked = self.tracked.pop(path, None)
        if tracked is None:
            return
        if self.by_key.get(tracked.follower.key) == path:
            del self.by_key[tracked.follower.key]
        if why == Change.GONE.value:
            follower = tracked.follower
            self.gone[follower.key] = (time.monotonic(), tracked.session_id, follower.offset,
                                       follower.check)
        self._watching.discard(path)
        busy = tracked.pending is not None or (
            tracked.detector is not None and tracked.detector.run_length)
        if not quiet:
            (log.warning if busy else log.info)("%s: transcript %s, no longer followed",
                                                  self._name(tracked), why)
        if not keep_status:
            try:
                os.unlink(session_status_path(self.state, tracked.session_id))
            except (OSError, ValueError):
                pass

    def _renamed(self, path: str, key: FileKey) -> str | None:
        """The session a new path was renamed from moments ago, if it was."""
        now = time.monotonic()
        for old in [k for k, gone in self.gone.items() if now - gone[0] > RENAME_WINDOW]:
            del self.gone[old]
        gone = self.gone.get(key)
        if gone is None or not gone[3] or not holds(path, gone[2], gone[3]):
            return None
        del self.gone[key]
        return gone[1]

    # -- reading lines ----------------------------------------------------------------

    def _ingest(self, tracked: Tracked, data: bytes, now: float, *, live: bool) -> None:
        """Feed the whole lines completed by ``data``; act on what they mean."""
        position = tracked.consumed
        detector = tracked.detector
        assert detector is not None
        stats = tracked.stats
        for _, line in tracked.lines.feed(data):
            position += len(line) + 1
            event = parse_line(line, stats)
            if event is None:
                continue
            kind = type(event)
            if kind is TurnStart or kind is GoalStatus or kind is SystemEntry:
                self._notice(tracked, event, line, live=live)
            for detection in detector.feed(event):
                tracked.fires += 1
                self._on_detection(tracked, detection, position, now)
        # Caught up with what is written: a reply whose lines said it is final is whole.
        for detection in detector.flush():
            tracked.fires += 1
            self._on_detection(tracked, detection, position, now)
        tracked.consumed = position

    def _notice(self, tracked: Tracked, event: TurnStart | GoalStatus | SystemEntry,
                line: bytes, *, live: bool) -> None:
        """A person's prompt, a goal status or a system line: what it means for us."""
        if isinstance(event, TurnStart):
            if event.kind == "prompt":
                self._on_prompt(tracked, event, live=live)
            return
        pending = tracked.pending
        if pending is None:
            return
        if isinstance(event, GoalStatus):
            if event.cleared:
                self._resolve(tracked, Outcome(
                    "cleared", f"goal cleared: {report.snippet(event.condition, 60)}"))
        elif (event.subtype == "stop_hook_summary" and not pending.stopped
              and prevented_continuation(line)):
            self._resolve(tracked, Outcome("stopped", "the turn was stopped"), final=False)

    def _after_batch(self, tracked: Tracked, now: float) -> None:
        stats = tracked.stats
        if stats.broken > tracked.reported_broken:
            count = stats.broken - tracked.reported_broken
            log.warning("%s: skipped %d broken line%s (not a JSON object) before byte %d",
                        self._name(tracked), count, "s" if count != 1 else "",
                        tracked.consumed)
            tracked.reported_broken = stats.broken
        self._publish(tracked, now)

    def _on_prompt(self, tracked: Tracked, event: TurnStart, *, live: bool) -> None:
        if not live:
            tracked.last_prompt_timestamp = event.timestamp
            return
        withdrawn = os.path.exists(tracked.request_file) and discard_request(
            self.state, tracked.session_id, "superseded by a new prompt")
        if tracked.pending is not None:
            if withdrawn:
                self._resolve(tracked, Outcome("superseded",
                                               "a new prompt came first: request withdrawn"))
            else:
                self._resolve(tracked, None)
        elif withdrawn and tracked.settled:  # housekeeping: that loop is over anyway
            log.info("%s: removed a clear request left over from a loop that ended",
                     self._name(tracked))
        elif withdrawn:
            events.info(report.outcome_line(
                project=self._label(tracked), session_id=tracked.session_id,
                outcome="superseded", detail="a new prompt came first: request withdrawn"))

    def _on_detection(self, tracked: Tracked, detection: Detection, position: int,
                      now: float) -> None:
        session_id = tracked.session_id
        answer = detection.answers[-1]
        if position <= tracked.history_end and is_historic(answer.timestamp, now,
                                                           max_age=self.history_age):
            log.info("%s: not firing on an old loop (answer of %s) found in a file that "
                     "appeared with its history", self._name(tracked), answer.timestamp)
            # The detector counts afresh after it: so must one rebuilt from the tail.
            self.fired.add(session_id, (answer.uuid,), time.time())
            return
        if self.refresh is not None:
            self.refresh()
        if answer.uuid in self.fired or answer.prompt_uuid in self.fired:
            # Acted on already: by the Stop hook, or under the file's former name.
            log.info("%s: answer %s was already acted on", self._name(tracked), answer.uuid)
            return
        request = ClearRequest(
            session_id=session_id,
            rule=detection.rule,
            count=detection.count,
            run_length=detection.run_length,
            answer_uuid=detection.answer_uuid,
            answer_digest=text_digest(answer.text),
            transcript_path=str(tracked.path),
            created_at=time.time(),
            source="watcher",
        )
        try:
            write_request(self.state, request)
        except (OSError, InvalidRequest) as error:
            log.error("%s: cannot write the clear request: %s", self._name(tracked), error)
        self.note_fired(session_id, detection.answer_uuid)
        snippet = report.snippet(answer.text, 200)
        journal.append(self.state, {
            "event": "detection",
            "session_id": session_id,
            "answer_uuid": detection.answer_uuid,
            "answer_digest": request.answer_digest,
            "rule": detection.rule,
            "count": detection.count,
            "run_length": detection.run_length,
            "project": tracked.project,
            "transcript_path": str(tracked.path),
            "snippet": snippet,
            "source": "watcher",
        })
        events.warning(report.detection_line(
            project=self._label(tracked), session_id=session_id, rule=detection.rule,
            count=detection.count, text=answer.text))
        if tracked.pending is not None and not tracked.pending.stopped:
            self._resolve(tracked, Outcome("continued", "the loop went on and fired again"))
        tracked.pending = PendingOutcome(detection.answer_uuid, detection.rule, now,
                                         time.monotonic() + self.outcome_timeout)
        tracked.settled = False
        self._watching.add(str(tracked.path))

    # -- outcomes ---------------------------------------------------------------------

    def _resolve(self, tracked: Tracked, outcome: Outcome | None, *, final: bool = True
                 ) -> None:
        pending = tracked.pending
        if pending is None:
            return
        if outcome is not None and outcome.kind in ("cleared", "stopped"):
            tracked.settled = True
        if outcome is not None:
            journal.append(self.state, {
                "event": "outcome",
                "session_id": tracked.session_id,
                "answer_uuid": pending.answer_uuid,
                "rule": pending.rule,
                "outcome": outcome.kind,
                "detail": outcome.detail,
                "after_s": round(time.time() - pending.detected_at, 3),
                "project": tracked.project,
                "transcript_path": str(tracked.path),
                "source": "watcher",
            })
            line = report.outcome_line(project=self._label(tracked),
                                       session_id=tracked.session_id,
                                       outcome=outcome.kind, detail=outcome.detail)
            (events.warning if outcome.kind in ("continued", "none") else events.info)(line)
        if final:
            tracked.pending = None
            self._watching.discard(str(tracked.path))
        else:
            pending.stopped = True

    def tick(self, monotonic_now: float) -> None:
        """Report the outcomes whose timeout has passed."""
        for path in list(self._watching):
            tracked = self.tracked.get(path)
            if tracked is None or tracked.pending is None:
                self._watching.discard(path)
                continue
            if tracked.pending.deadline > monotonic_now:
                continue
            outcome = at_deadline(
                tracked.pending,
                more_answers=tracked.detector.run_length if tracked.detector else 0,
                request_pending=self._request_exists(tracked),
                timeout=self.outcome_timeout,
            )
            self._resolve(tracked, outcome)

    # -- housekeeping -----------------------------------------------------------------

    def housekeep(self, now: float | None = None, *, statuses: bool = True) -> None:
        """What keeps a watcher left running for weeks from growing: expire old clear
        requests, remove statuses of deleted transcripts (``statuses``: only when the root
        is there to say so), let idle sessions go dormant, forget what fired in sessions
        nobody follows any more."""
        now = time.time() if now is None else now
        self.expire_requests(now)
        if statuses:
            self.sweep_statuses()
        for tracked in self.tracked.values():
            detector = tracked.detector
            if detector is None or not self._quiet(tracked):
                continue
            if tracked.fires >= REBUILD_AFTER:
                self._let_go(tracked, idle=False)
            elif (now - tracked.last_activity > self.idle_after and detector.run_length == 0
                  and detector.awaiting != "reprompt"):
                self._let_go(tracked, idle=True)
        awake = {t.session_id for t in self.tracked.values() if t.detector is not None}
        self.fired.prune(keep=awake, untouched_since=now - self.idle_after)
        moment = time.monotonic()
        for key in [k for k, gone in self.gone.items() if moment - gone[0] > RENAME_WINDOW]:
            del self.gone[key]

    @staticmethod
    def _quiet(tracked: Tracked) -> bool:
        """Nothing half-read or half-done that a rebuild from the tail could not redo."""
        detector = tracked.detector
        return (detector is not None and tracked.pending is None
                and not detector.answer_started and tracked.lines.pending_bytes == 0
                and tracked.follower.offset == tracked.consumed)

    def expire_requests(self, now: float) -> set[str]:
        """Remove the clear requests no Stop hook will act on any more (older than
        ``MAX_REQUEST_AGE``: their session never stopped again); one line each. Returns
        the sessions whose request went."""
        folder = self.state / "requests"
        try:
            names = os.listdir(folder)
        except OSError:
            return set()
        by_session = {t.session_id: t for t in self.tracked.values()}
        removed: set[str] = set()
        for name in names:
            session_id = name[:-5]
            if not name.endswith(".json") or not is_plain_id(session_id):
                continue
            path = folder / name
            found = _expired_request(path, session_id, now)
            if found is None:
                continue
            why, request, identity = found
            try:
                if _identity(os.lstat(path)) != identity:
                    continue  # replaced meanwhile (by ``loop-killer clear``, say)
                os.unlink(path)
            except FileNotFoundError:
                continue  # taken meanwhile
            except OSError as error:
                self._cannot_remove(path, error)
                continue
            self.unremovable.discard(str(path))
            removed.add(session_id)
            tracked = by_session.get(session_id)
            if request is None:
                log.warning("removed the clear request %s: %s", path, why)
            else:
                project = tracked.project if tracked else Path(request.transcript_path).parent.name
                events.info(report.expired_line(
                    project=report.project_label(project, self.home), session_id=session_id,
                    rule=request.rule, age=now - request.created_at, why=why))
            if tracked is not None:
                self._unpublish_request(tracked, now)
        return removed

    def _unpublish_request(self, tracked: Tracked, now: float) -> None:
        """The session's request is gone: its status must not say it is pending."""
        if tracked.detector is not None:
            self._publish(tracked, now)
            return
        previous = read_session_status(self.state, tracked.session_id)
        tracked.published = None
        if previous is None or not previous.pending_request:
            return
        try:
            write_session_status(self.state, replace(previous, pending_request=False,
                                                     updated_at=now))
        except (OSError, ValueError) as error:
            log.error("%s: cannot write its status: %s", self._name(tracked), error)

    def sweep_statuses(self) -> int:
        """Remove the statuses this watcher wrote (``status/<id>.json``) for transcripts
        that no longer exist: deleted while no watcher ran, say."""
        folder = self.state / "status"
        try:
            names = os.listdir(folder)
        except OSError:
            return 0
        followed = {t.session_id for t in self.tracked.values()}
        removed = 0
        for name in names:
            session_id = name[:-5]
            if (not name.endswith(".json") or not is_plain_id(session_id)
                    or session_id in followed):
                continue
            found = read_session_status(self.state, session_id)
            if (found is None or found.session_id != session_id or not found.transcript_path
                    or os.path.lexists(found.transcript_path)):
                continue  # not ours, or its transcript is still there
            try:
                os.unlink(folder / name)
            except FileNotFoundError:
                continue
            except OSError as error:
                self._cannot_remove(folder / name, error)
                continue
            self.unremovable.discard(str(folder / name))
            removed += 1
            log.info("removed the status of %s: its transcript %s is gone",
                     report.short_id(session_id), found.transcript_path)
        return removed

    # -- status -----------------------------------------------------------------------

    @staticmethod
    def _request_exists(tracked: Tracked) -> bool:
        return os.path.exists(tracked.request_file)

    def _publish(self, tracked: Tracked, now: float, *, unless_on_disk: bool = False) -> None:
        """Write the session's status if anything in it changed (since the last write, or
        with ``unless_on_disk``, from what a previous watcher left on disk)."""
        detector = tracked.detector
        if detector is None:  # dormant: its status on disk still says what it was
            return
        last = detector.last_answer
        answer_uuid = last.uuid if last is not None else ""
        if last is not None and tracked.digest[0] != answer_uuid:
            tracked.digest = (answer_uuid, text_digest(last.text))
            tracked.last_answer_seen_at = now
        digest = tracked.digest[1] if last is not None else ""
        goal = detector.goal
        pending_request = self._request_exists(tracked)
        key = (tracked.consumed, detector.run_length, detector.chain_length, detector.awaiting,
               answer_uuid, digest, pending_request, goal)
        if key == tracked.published:
            return
        status = SessionStatus(
            session_id=tracked.session_id,
            transcript_path=str(tracked.path),
            project=tracked.project,
            offset=tracked.consumed,
            run_length=detector.run_length,
            chain_length=detector.chain_length,
            awaiting=detector.awaiting,
            last_answer_uuid=answer_uuid,
            last_answer_digest=digest,
            last_activity=tracked.last_activity,
            updated_at=now,
            goal=None if goal is None else {
                "met": goal.met, "sentinel": goal.sentinel, "cleared": goal.cleared,
                "condition": goal.condition, "reason": goal.reason, "uuid": goal.uuid,
            },
            pending_request=pending_request,
            extra={
                "answers_seen": detector.answers_seen,
                "would_fire_with_one_more": detector.would_fire_with_one_more(),
                "last_answer_seen_at": tracked.last_answer_seen_at,
                "last_answer_timestamp": last.timestamp if last is not None else "",
                "answer_in_progress": detector.answer_started,
                "pending_bytes": tracked.lines.pending_bytes,
                "broken_lines": tracked.stats.broken,
                "watcher_pid": os.getpid(),
            },
        )
        if unless_on_disk:
            previous = read_session_status(self.state, tracked.session_id)
            if previous is not None and _comparable(previous) == _comparable(status):
                tracked.published = key
                return
        try:
            write_session_status(self.state, status)
        except (OSError, ValueError) as error:
            log.error("%s: cannot write its status: %s", self._name(tracked), error)
            return
        tracked.published = key

    # -- errors and names -------------------------------------------------------------

    def _read_error(self, tracked: Tracked, error: OSError) -> None:
        text = f"{type(error).__name__}: {error.strerror or error}"
        if tracked.error != text:
            log.warning("%s: cannot read (%s); will retry", self._name(tracked), text)
            tracked.error = text

    def _unreadable(self, path: str, error: OSError) -> None:
        text = f"{type(error).__name__}: {error.strerror or error}"
        if self.unreadable.get(path) != text:
            log.warning("cannot read %s (%s); will retry", path, text)
            self.unreadable[path] = text

    def _cannot_remove(self, path: Path, error: OSError) -> None:
        if str(path) not in self.unremovable:
            log.warning("cannot remove %s: %s", path, error.strerror or error)
            self.unremovable.add(str(path))

    def _not_a_file(self, path: str) -> None:
        if path not in self.ignored:
            log.warning("ignoring %s: not a regular file", path)
            self.ignored.add(path)
        self.drop(path, why="is not a regular file any more", quiet=True)

    def _label(self, tracked: Tracked) -> str:
        return report.project_label(tracked.project, self.home)

    def _name(self, tracked: Tracked) -> str:
        return f"{self._label(tracked)} {report.short_id(tracked.session_id)}"


def _held_in(uuids: set[str], data: bytes) -> set[str]:
    """The uuids that ``data`` holds (all of them when checking would cost too much)."""
    if len(uuids) * len(data) > _MATCH_BUDGET:
        return uuids
    return {uuid for uuid in uuids if uuid.encode() in data}


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_dev, info.st_ino, info.st_mtime_ns


def _expired_request(path: Path, session_id: str, now: float
                     ) -> tuple[str, ClearRequest | None, tuple[int, int, int]] | None:
    """Why the request file at ``path`` is to be removed, the request, and the file's
    identity; None when it is fresh (or gone). A file that is not a valid request (which
    the Stop hook would reject) goes once it is as old as a stale request."""
    try:
        identity = _identity(os.lstat(path))
        request = parse_request(read_small_file(path, MAX_REQUEST_BYTES),
                                expected_session=session_id)
    except FileNotFoundError:
        return None
    except (OSError, InvalidRequest) as error:
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if now - info.st_mtime <= MAX_REQUEST_AGE:
            return None
        reason = "a symlink" if getattr(error, "errno", None) == getattr(os, "ELOOP", 40) else (
            str(error) or type(error).__name__)
        return f"not a valid request ({reason}) and older than {MAX_REQUEST_AGE:.0f} s", None, (
            _identity(info))
    why = request.is_stale(now)
    return None if why is None else (why, request, identity)


def _comparable(status: SessionStatus) -> tuple[Any, ...]:
    """What a Stop hook or ``loop-killer status`` reads in a session status."""
    return (status.transcript_path, status.offset, status.run_length, status.chain_length,
            status.awaiting, status.last_answer_uuid, status.last_answer_digest,
            status.pending_request, status.goal)
