"""The session's one record, ``<state>/tools/<session_id>.json``: the tool-repeat counts per
scope and the Stop hook's turn; removed at the person's prompt, changed only under ``locked``."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time

from ..engine.tool_repeat import MAX_CALLS
from .files import is_plain_id, remove_file, state_folder_text

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: these hooks run on every tool call
if TYPE_CHECKING:
    from typing import Any

    from ..engine.tool_repeat import ToolRepeatCounter
    from .config import Settings

__all__ = [
    "FOLDER", "LOCK_WAIT", "MAX_SCOPES", "MAX_STATE_BYTES", "REFUSAL_SUFFIX", "STALE_AFTER",
    "STATE_BUDGET", "SUBAGENT_CALLS", "Busy", "counter", "load", "hooks_judge", "keep", "locked",
    "mark_work", "note_result", "prune", "put", "refusal_marker", "remove", "save", "save_turn",
    "seen_of", "state_path", "take_work_marker", "turn_of", "turn_over", "with_result", "with_turn"]

FOLDER = "tools"
REFUSAL_SUFFIX = ".refuse"
MAX_STATE_BYTES = 256 * 1024  # the most a state file ever holds
STATE_BUDGET = MAX_STATE_BYTES - 8 * 1024  # what put keeps a state within
MAX_READ_BYTES = 4 * MAX_STATE_BYTES  # a larger (older) file is still read up to this
MAX_SCOPES = 32  # scopes kept per session; the oldest go first
SUBAGENT_CALLS = 100  # calls kept per subagent (main: the engine's MAX_CALLS)
MAIN = "main"  # the main session's scope
LOCK_WAIT = 2.0  # seconds a hook waits for the lock before it fails open
STALE_AFTER = 7 * 24 * 3600.0  # state files untouched this long are removed
_VERSION = 1
_LOCK_NAME = ".lock"
_RETRY = 0.005


class Busy(OSError):
    """The lock could not be taken in time."""


def state_path(state: os.PathLike[str] | str, session_id: str) -> str:
    """Where a session's counts live; ValueError for an id that is not a plain name."""
    if not is_plain_id(session_id):
        raise ValueError(f"not a plain session id: {session_id!r}")
    return os.path.join(os.fspath(state), FOLDER, f"{session_id}.json")


def _folder(state: os.PathLike[str] | str, *, create: bool = False) -> str:
    """``<state>/tools``, checked: no link on the way, ours, private (else OSError)."""
    return state_folder_text(state, FOLDER, create=create, private=True)


def scope_key(scope: str) -> str:
    """The key a scope is kept under: a short plain name as it is, else by digest."""
    if scope == MAIN or (is_plain_id(scope) and len(scope) <= 64):
        return scope
    from ..light import hex_digest

    return f"agent-{hex_digest(scope, 32)}"


class locked:  # noqa: N801 - used as a function: ``with locked(state):``
    """Hold the tool hooks' lock; Busy past ``LOCK_WAIT`` (a class: no contextlib)."""

    def __init__(self, state: os.PathLike[str] | str) -> None:
        self.state = state
        self.fd = -1

    def __enter__(self) -> None:
        folder = _folder(self.state, create=True)
        fd = os.open(os.path.join(folder, _LOCK_NAME),
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Busy(f"{folder}/{_LOCK_NAME}: not a regular file")
            deadline = time.monotonic() + LOCK_WAIT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise Busy("the tool hooks' lock is busy") from None
                    time.sleep(_RETRY)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def __exit__(self, *_exc: object) -> None:
        fd, self.fd = self.fd, -1
        os.close(fd)  # closing releases the lock


def load(path: str) -> dict[str, Any] | None:
    """The session's state, or None when there is none (missing, unsafe or unreadable)."""
    from .files import read_json_object

    try:
        _folder(os.path.dirname(os.path.dirname(path)))
    except OSError:
        return None  # a linked or foreign folder: said once by ``state_folder``
    data = read_json_object(path, MAX_READ_BYTES, owned=True)
    if data is None:
        if _larger_than(path, MAX_READ_BYTES):
            import logging

            logging.getLogger(__name__).warning(
                "%s is over %d bytes: not ours, counted afresh", path, MAX_READ_BYTES)
        return None
    if data.get("v") != _VERSION or not isinstance(data.get("scopes"), dict):
        return None
    return data


def _larger_than(path: str, size: int) -> bool:
    try:
        return os.lstat(path).st_size > size
    except OSError:
        return False


def counter(data: dict[str, Any] | None, scope: str, settings: Settings) -> ToolRepeatCounter:
    """The counter of one scope (``main`` or a subagent's id), empty if it has none."""
    scopes = data.get("scopes") if data is not None else None
    kept = scopes.get(scope_key(scope)) if isinstance(scopes, dict) else None
    return settings.tool_counter(kept)


def put(data: dict[str, Any] | None, scope: str, counts: ToolRepeatCounter) -> dict[str, Any]:
    """The state with one scope's counter replaced (made the newest), bounded."""
    from ..light import dumps

    old = data.get("scopes") if data is not None else None
    scopes: dict[str, Any] = dict(old) if isinstance(old, dict) else {}
    key = scope_key(scope)
    scopes.pop(key, None)
    scopes[key] = counts.to_state()
    main = scopes.pop(MAIN, None)
    subagents = [(name, _newest_calls(value, SUBAGENT_CALLS))
                 for name, value in scopes.items() if isinstance(name, str)]
    kept = [(MAIN, _newest_calls(main, MAX_CALLS))] if main is not None else []
    sizes = [len(dumps({name: value}, separators=(",", ":"))) for name, value in kept + subagents]
    total = sum(sizes)
    while subagents and (total > STATE_BUDGET or len(kept) + len(subagents) > MAX_SCOPES):
        subagents.pop(0)
        total -= sizes.pop(len(kept))
    put_ = {"v": _VERSION, "scopes": dict(kept + subagents)}
    if data is not None and isinstance(data.get("turn"), dict):
        put_["turn"] = data["turn"]
    return put_


def turn_of(data: dict[str, Any] | None) -> dict[str, Any]:
    """The record's turn (empty when it has none)."""
    turn = data.get("turn") if data is not None else None
    return turn if isinstance(turn, dict) else {}


SEEN_MAX = 512  # the turn's (call, result) digests kept: the oldest are forgotten first


def with_turn(data: dict[str, Any] | None, turn: dict[str, Any]) -> dict[str, Any]:
    """The record (a new one for None) with its turn replaced by ``turn``."""
    return {**(data if data is not None else {"v": _VERSION, "scopes": {}}), "turn": turn}


def seen_of(turn: dict[str, Any]) -> list[str]:
    """The turn's results seen (digests of a call with its result), oldest first."""
    seen = turn.get("seen")
    return [item for item in seen if isinstance(item, str)][-SEEN_MAX:] \
        if isinstance(seen, list) else []


def with_result(data: dict[str, Any] | None, key: str, *, work: bool = False) -> dict[str, Any]:
    """The record with a main-scope result (``key``) noted: work when it is new in the turn."""
    turn = dict(turn_of(data))
    seen = seen_of(turn)
    if work or key not in seen:
        turn["work"] = True
    if key in seen:
        seen.remove(key)
    turn["seen"] = [*seen, key][-SEEN_MAX:]
    return with_turn(data, turn)


def note_result(state: str, path: str, key: str, *, work: bool = False) -> None:
    """``with_result``, saved. A busy lock leaves the work marker: when in doubt, work."""
    try:
        with locked(state):
            save_turn(path, with_result(load(path), key, work=work))
    except Busy:
        mark_work(path)
        raise


def work_marker(path: str) -> str:
    """Beside a session's record: a reply did work that could not be noted in it."""
    return path.removesuffix(".json") + ".work"


def mark_work(path: str) -> None:
    """The lock was busy: leave the work marker, which the next Stop takes as work."""
    from .files import write_private_file

    with contextlib.suppress(OSError):
        write_private_file(work_marker(path), b"")


def take_work_marker(path: str) -> bool:
    """Whether the work marker was there (it is removed): call under the lock."""
    try:
        os.unlink(work_marker(path))
    except FileNotFoundError:
        return False
    except OSError:
        return True  # (there, not removable: work, when in doubt)
    return True


def turn_over(state: str, session_id: str, prompt_id: str) -> None:
    """The reply answers the person's prompt: the turn's re-prompt answers start after it."""
    path = state_path(state, session_id)
    if not os.path.lexists(path):
        return
    with locked(state):
        kept = load(path)
        take_work_marker(path)
        if kept is not None:
            save_turn(path, with_turn(kept, {"prompt": prompt_id, "stops": 0,
                                             "seen": seen_of(turn_of(kept))}))


def save_turn(path: str, data: dict[str, Any]) -> None:
    """Save the record with its turn changed, its counts (and refusal marker) as they are."""
    from ..light import dumps
    from .files import write_private_file

    _folder(os.path.dirname(os.path.dirname(path)), create=True)
    write_private_file(path, dumps(data, separators=(",", ":")).encode("ascii"))


def _newest_calls(value: Any, limit: int) -> Any:
    """A scope's counter state with only its ``limit`` most recent calls."""
    if isinstance(value, dict) and isinstance(value.get("calls"), list):
        return {**value, "calls": value["calls"][-limit:]}
    return value


def refusal_marker(path: str) -> str:
    """Beside a session's counts: there while some call would be refused."""
    return path.removesuffix(".json") + REFUSAL_SUFFIX


def keep(path: str, kept: dict[str, Any] | None, scope: str, counts: ToolRepeatCounter,
         settings: Settings) -> None:
    """Save the session's state with ``scope``'s counter replaced, and its refusal marker."""
    scopes = kept.get("scopes") if kept is not None else None
    refusable = counts.refusable() or isinstance(scopes, dict) and any(
        counter(kept, other, settings).refusable() for other in scopes if other != scope_key(scope))
    save(path, put(kept, scope, counts), refusable=refusable)


def save(path: str, data: dict[str, Any], *, refusable: bool) -> None:
    """Write the session's state atomically, then (a crash: none) its refusal marker."""
    save_turn(path, data)
    from .files import write_private_file

    marker = refusal_marker(path)
    if refusable:
        if not os.path.lexists(marker):
            write_private_file(marker, b"")
    else:
        remove_file(marker, quiet=False)


def remove(path: str) -> bool:
    """Forget a session's counts (the person spoke); True if there were any."""
    try:
        _folder(os.path.dirname(os.path.dirname(path)))
        remove_file(refusal_marker(path), quiet=False)
        remove_file(work_marker(path), quiet=False)
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def prune(state: os.PathLike[str] | str, *, now: float, keep: str = "") -> int:
    """Remove state files untouched for ``STALE_AFTER`` (and stray temp files)."""
    removed = 0
    try:
        entries = list(os.scandir(_folder(state)))
    except OSError:
        return 0
    for entry in entries:
        if entry.name == _LOCK_NAME or entry.path == keep or not entry.name.endswith(
                (".json", REFUSAL_SUFFIX, ".work", ".tmp")):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if now - info.st_mtime > (3600 if entry.name.endswith(".tmp") else STALE_AFTER):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed


def hooks_judge(state: str, session_id: str, *, since: float) -> bool:
    """Whether a Stop hook judged one of this session's replies at ``since`` or later."""
    try:
        turn = turn_of(load(state_path(state, session_id)))
    except (OSError, ValueError):
        return False
    judged = turn.get("judged_at")
    return "run" in turn and isinstance(judged, (int, float)) and judged >= since
