"""Clear requests: ``<state>/requests/<session>.json`` asks the session's Stop hook to end the
loop; taken once (a rename into ``claimed/``), acted on only for the hook's own transcript."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from ..engine.rules import RULES, Rule
from .files import (
    NotAFile,
    NotAFolder,
    is_plain_id,
    read_small_file,
    remove_file,
    same_transcript,
    state_folder,
    write_private_file,
)

__all__ = [
    "MAX_REQUEST_AGE", "MAX_REQUEST_BYTES", "REQUEST_VERSION", "ClearRequest", "InvalidRequest",
    "claim_request", "discard_request", "parse_request", "peek_request", "request_path",
    "write_private_file", "write_request"]

REQUESTS_DIR = "requests"
CLAIMED_DIR = "claimed"

log = logging.getLogger(__name__)

Source = Literal["watcher", "manual", "hook"]
"""Who asked for the clear: the watcher's detection, a person (``loop-killer clear``)."""
SOURCES: tuple[Source, ...] = ("watcher", "manual", "hook")

REQUEST_VERSION = 1
MAX_REQUEST_BYTES = 64 * 1024
MAX_REQUEST_AGE = 30 * 60.0  # seconds after which a request is stale


class InvalidRequest(ValueError):
    """A request file that must not be acted on; the message says why."""


@dataclass(frozen=True, slots=True)
class ClearRequest:
    """Ask the Stop hook of ``session_id`` to end the looping turn and clear the goal."""

    session_id: str
    rule: Rule
    count: int  # answers involved
    run_length: int
    answer_uuid: str  # the answer that fired ("" for a manual request)
    answer_digest: str
    transcript_path: str
    created_at: float  # seconds since the epoch
    source: Source
    prompt_uuid: str = ""  # the re-prompt the answer answered: its record key (``records``)
    detail: str = ""  # what the notice says of it (BUDGET: the limit and what was used)
    version: int = REQUEST_VERSION

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    def is_stale(self, now: float, *, last_prompt_at: float | None = None) -> str | None:
        """Why the request must not be acted on any more, or None if it is fresh."""
        if now - self.created_at > MAX_REQUEST_AGE:
            return f"older than {MAX_REQUEST_AGE:.0f} s"
        if self.created_at - now > 60:
            return "created in the future"
        if last_prompt_at is not None and last_prompt_at > self.created_at:
            return "superseded by a newer prompt in the session"
        return None


def request_path(state: Path, session_id: str) -> Path:
    """Where the session's request waits (a path only: ``_requests`` checks the folders)."""
    if not is_plain_id(session_id):
        raise InvalidRequest(f"not a plain session id: {session_id!r}")
    return state / REQUESTS_DIR / f"{session_id}.json"


def _requests(state: Path, session_id: str, *, create: bool = False) -> Path:
    """``request_path``, its folders checked: no links, owned by this user and private."""
    path = request_path(state, session_id)
    state_folder(state, REQUESTS_DIR, create=create, private=True)
    return path


def write_request(state: Path, request: ClearRequest) -> Path:
    """Publish a request for its session (replacing an older one); return its path."""
    path = _requests(state, request.session_id, create=True)
    write_private_file(path, request.to_json())
    return path


def parse_request(data: bytes, *, expected_session: str) -> ClearRequest:
    """Validate a request file's bytes; raise InvalidRequest with the reason."""
    if len(data) > MAX_REQUEST_BYTES:
        raise InvalidRequest(f"oversized ({len(data)} bytes)")
    try:
        raw: Any = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise InvalidRequest(f"bad JSON ({error})") from None
    if not isinstance(raw, dict):
        raise InvalidRequest("not a JSON object")
    if raw.get("version") != REQUEST_VERSION:
        raise InvalidRequest(f"unknown version {raw.get('version')!r}")
    session_id = raw.get("session_id")
    if not is_plain_id(session_id):
        raise InvalidRequest(f"not a plain session id: {session_id!r}")
    if session_id != expected_session:
        raise InvalidRequest(f"for session {session_id!r}, not {expected_session!r}")
    try:
        request = ClearRequest(
            session_id=session_id, rule=_choice(raw, "rule", RULES),
            count=_field(raw, "count", int), run_length=_field(raw, "run_length", int),
            answer_uuid=_field(raw, "answer_uuid", str),
            answer_digest=_field(raw, "answer_digest", str),
            transcript_path=_field(raw, "transcript_path", str),
            created_at=float(_field(raw, "created_at", (int, float))),
            source=_choice(raw, "source", SOURCES), prompt_uuid=_optional_text(raw, "prompt_uuid"),
            detail=_optional_text(raw, "detail"))
    except (TypeError, ValueError) as error:
        raise InvalidRequest(str(error)) from None
    return request


def _choice(raw: dict[str, Any], name: str, choices: tuple[Any, ...]) -> Any:
    value = raw.get(name)
    if value not in choices:
        raise InvalidRequest(f"bad {name} {str(value)[:64]!r}")
    return value


def _optional_text(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name, "")
    if not isinstance(value, str) or len(value) > 200:
        raise InvalidRequest(f"field {name!r} of the wrong type")
    return value


def _field(raw: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = raw.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRequest(f"field {name!r} missing or of the wrong type")
    return value


def _read(path: Path, session_id: str) -> ClearRequest:
    """The request at ``path``, read safely and validated (InvalidRequest, OSError)."""
    try:
        data = read_small_file(path, MAX_REQUEST_BYTES, owned=True)
    except NotAFile as error:
        raise InvalidRequest(str(error).split(": ", 1)[-1]) from None
    return parse_request(data, expected_session=session_id)


def peek_request(state: Path, session_id: str) -> ClearRequest | None:
    """The pending request for a session, validated, without taking it (None if none)."""
    try:
        return _read(_requests(state, session_id), session_id)
    except FileNotFoundError:
        return None
    except (InvalidRequest, OSError) as error:
        log.warning("ignoring clear request for %s: %s", session_id, _reason(error))
        return None


def claim_request(state: Path, session_id: str, *, transcript_path: str, now: float | None = None,
                  last_prompt_at: float | None = None) -> ClearRequest | None:
    """Take the session's request for ``transcript_path`` once; None unless fresh."""
    try:
        source = _requests(state, session_id)
        if _for_another_transcript(_waiting(source, session_id), transcript_path):
            return None
        claimed_dir = state_folder(state, CLAIMED_DIR, create=True, private=True)
        target = claimed_dir / f"{session_id}.{os.getpid()}.{time.time_ns()}.json"
        os.rename(source, target)  # atomic: exactly one claimer wins
    except FileNotFoundError:
        return None
    except (InvalidRequest, OSError) as error:  # NotAFolder: said once by ``state_folder``
        if not isinstance(error, NotAFolder):
            log.warning("cannot claim clear request for %s: %s", session_id, error)
        return None
    try:
        request = _read(target, session_id)
    except (InvalidRequest, OSError) as error:
        log.warning("rejected clear request for %s: %s", session_id, _reason(error))
        remove_file(target)
        return None
    if _for_another_transcript(request, transcript_path):
        _put_back(target, source)  # replaced between the look and the claim
        return None
    stale = request.is_stale(time.time() if now is None else now, last_prompt_at=last_prompt_at)
    if stale:
        log.info("dropped stale clear request for %s: %s", session_id, stale)
        remove_file(target)
        return None
    _prune_claimed(claimed_dir)
    return request


def _waiting(path: Path, session_id: str) -> ClearRequest | None:
    """The valid request at ``path``, quietly (None for none or a broken one)."""
    try:
        return _read(path, session_id)
    except (InvalidRequest, OSError):
        return None


def _for_another_transcript(request: ClearRequest | None, transcript_path: str) -> bool:
    if request is None:
        return False
    if request.transcript_path:
        if same_transcript(request.transcript_path, transcript_path):
            return False
    elif not _in_other_projects(request.session_id, transcript_path):
        return False  # names no transcript, but its session id names only this one
    log.info("left the clear request for %s waiting: it is for %s, not %s",
             request.session_id, request.transcript_path or "a session of that id in "
             "another project too", transcript_path)
    return True


def _in_other_projects(session_id: str, transcript_path: str) -> bool:
    """Whether this session id has a transcript in another project (or unknown)."""
    project = os.path.dirname(os.path.abspath(transcript_path))
    root = os.path.dirname(project)
    try:
        with os.scandir(root) as folders:
            return any(
                folder.path != project
                and os.path.lexists(os.path.join(folder.path, f"{session_id}.jsonl"))
                for folder in folders)
    except OSError:
        return True


def _put_back(taken: Path, source: Path) -> None:
    """Return a claimed request to the inbox, unless a newer one is there already."""
    with contextlib.suppress(OSError):
        os.link(taken, source, follow_symlinks=False)
    remove_file(taken)


def discard_request(state: Path, session_id: str, why: str, *, transcript_path: str = "") -> bool:
    """Remove a session's pending request (not one for another transcript)."""
    try:
        path = _requests(state, session_id)
        if transcript_path and _for_another_transcript(_waiting(path, session_id), transcript_path):
            return False
        os.unlink(path)
    except (FileNotFoundError, InvalidRequest, NotAFolder):
        return False
    except OSError as error:
        log.warning("cannot remove clear request for %s: %s", session_id, error)
        return False
    log.info("removed clear request for %s: %s", session_id, why)
    return True


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno == getattr(os, "ELOOP", 40):
        return "a symlink"
    return str(error) or type(error).__name__


_CLAIMED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.[0-9]+\.[0-9]+\.json")


def _prune_claimed(claimed_dir: Path, keep: int = 200) -> None:
    """Claimed requests are kept as a trail, but only the newest ``keep`` of them."""
    try:
        entries = sorted(
            (p for p in claimed_dir.iterdir() if _CLAIMED_NAME.fullmatch(p.name)),
            key=lambda p: int(p.name.rsplit(".", 2)[-2]))
    except (OSError, ValueError):
        return
    for stale in entries[:-keep]:
        remove_file(stale)
