"""What keeps the state folder from growing: old clear requests and records of gone files."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..state import records, report
from ..state.files import is_plain_id, read_small_file, state_folder
from ..state.inbox import (
    MAX_REQUEST_AGE,
    MAX_REQUEST_BYTES,
    ClearRequest,
    InvalidRequest,
    parse_request,
)
from ..state.status import read_session_status
from .tracked import Tracked

__all__ = ["Housekeeper"]

log = logging.getLogger("loop_killer.watch")
events = logging.getLogger("loop_killer.watch.events")


class Housekeeper:
    """Removes what no Stop hook or person will read any more; one thread."""

    def __init__(self, state: Path, *, home: str | None) -> None:
        self.state = state
        self.home = home
        self.unremovable: set[str] = set()  # files that could not be removed, logged once

    def expire_requests(self, tracked_by_session: Mapping[str, Tracked], now: float, *,
                        then: Callable[[Tracked], None] | None = None) -> set[str]:
        """Remove the stale clear requests, one line each, then ``then`` for a followed
        session; the sessions whose request went."""
        removed: set[str] = set()
        for session_id, path in self._files("requests"):
            found = _expired_request(path, session_id, now)
            if found is None:
                continue
            why, request, identity = found
            try:  # replaced meanwhile (by ``loop-killer clear``, say), or taken
                replaced = _identity(os.lstat(path)) != identity
            except FileNotFoundError:
                continue
            except OSError:
                replaced = False  # unlink says why
            if replaced or not self._remove(path):
                continue
            removed.add(session_id)
            tracked = tracked_by_session.get(session_id)
            if request is None:
                log.warning("removed the clear request %s: %s", path, why)
            else:
                project = tracked.project if tracked else Path(request.transcript_path).parent.name
                events.info(report.expired_line(
                    project=report.project_label(project, self.home), session_id=session_id,
                    rule=request.rule, age=now - request.created_at, why=why))
            if tracked is not None and then is not None:
                then(tracked)
        return removed

    def sweep_statuses(self, followed: set[str]) -> int:
        """Remove the statuses and records of transcripts that no longer exist."""
        removed = 0
        for session_id, path in self._files("status"):
            if session_id in followed:
                continue
            found = read_session_status(self.state, session_id)
            if (found is None or found.session_id != session_id or not found.transcript_path
                    or os.path.lexists(found.transcript_path)):
                continue  # not ours, or its transcript is still there
            if not self._remove(path):
                continue
            records.forget_session(self.state, session_id)
            removed += 1
            log.info("removed the status of %s: its transcript %s is gone",
                     report.short_id(session_id), found.transcript_path)
        return removed

    def forget_vanished(self, vanished: Iterable[str], followed: set[str]) -> None:
        """Remove the records of sessions whose transcript is gone for good."""
        for session_id in vanished:
            if session_id not in followed:
                records.forget_session(self.state, session_id)

    def _files(self, kind: str) -> list[tuple[str, Path]]:
        """(session id, path) of each ``<kind>/<id>.json``; never through a link (it would
        send the unlinks wherever it points: ``state_folder`` says so once)."""
        try:
            folder = state_folder(self.state, kind, private=True)
            names = os.listdir(folder)
        except OSError:
            return []
        return [(name[:-5], folder / name) for name in names
                if name.endswith(".json") and is_plain_id(name[:-5])]

    def _remove(self, path: Path) -> bool:
        """Unlink ``path``; False when gone already, or it cannot be (said once)."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError as error:
            if str(path) not in self.unremovable:
                log.warning("cannot remove %s: %s", path, error.strerror or error)
                self.unremovable.add(str(path))
            return False
        self.unremovable.discard(str(path))
        return True


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_dev, info.st_ino, info.st_mtime_ns


def _expired_request(path: Path, session_id: str, now: float
                     ) -> tuple[str, ClearRequest | None, tuple[int, int, int]] | None:
    """Why the request file at ``path`` is to be removed, the request, and the file's
    identity; None when fresh (or gone). An invalid one goes when as old as a stale one."""
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
