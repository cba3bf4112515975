"""The session's tool-repeat counts on disk: ``<state>/tools/<session_id>.json``.

One small JSON file per session, created on its first counted result and removed when the
person's next prompt resets everything, so the plugin's launcher can skip ``PreToolUse``
and ``UserPromptSubmit`` at once for a session without one. It holds one counter state
(``ToolRepeatCounter.to_state``, digests only) per scope: ``main`` and each subagent.

Hooks for parallel tool calls run at the same time: every read-modify-write holds an
exclusive ``flock`` on ``<state>/tools/.lock``, waited for at most ``LOCK_WAIT`` seconds
(then the caller fails open). Files are read with the state folder's safe reader (no
links, no FIFOs, bounded) and written atomically (temp file + rename).
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..config import Settings
from ..engine.tool_repeat import ToolRepeatCounter
from ..state.paths import ensure_private_dir, is_plain_id

__all__ = [
    "FOLDER",
    "LOCK_WAIT",
    "MAX_SCOPES",
    "MAX_STATE_BYTES",
    "STALE_AFTER",
    "Busy",
    "counter",
    "load",
    "locked",
    "prune",
    "put",
    "remove",
    "save",
    "state_path",
]

FOLDER = "tools"
MAX_STATE_BYTES = 256 * 1024
"""A state file larger than this is not ours (or broken): it is treated as empty."""
MAX_SCOPES = 32
"""Scopes (the main session and its subagents) kept per session; the oldest go first."""
LOCK_WAIT = 2.0
"""Seconds a hook waits for another hook of the same session before it fails open."""
STALE_AFTER = 7 * 24 * 3600.0
"""State files untouched this long (their sessions are long gone) are removed."""
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


@contextmanager
def locked(state: os.PathLike[str] | str, *, wait: float | None = None) -> Iterator[None]:
    """Hold the tool hooks' lock; raises Busy when another hook holds it past ``wait``
    seconds (default ``LOCK_WAIT``)."""
    folder = os.path.join(os.fspath(state), FOLDER)
    ensure_private_dir(folder)
    fd = os.open(os.path.join(folder, _LOCK_NAME),
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Busy(f"{folder}/{_LOCK_NAME}: not a regular file")
        deadline = time.monotonic() + (LOCK_WAIT if wait is None else wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Busy("the tool hooks' lock is busy") from None
                time.sleep(_RETRY)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def load(path: str) -> dict[str, Any] | None:
    """The session's state, or None when there is none (missing, unsafe or unreadable)."""
    from ..state.files import read_json_object

    data = read_json_object(path, MAX_STATE_BYTES)
    if data is None or data.get("v") != _VERSION or not isinstance(data.get("scopes"), dict):
        return None
    return data


def counter(data: dict[str, Any] | None, scope: str, settings: Settings) -> ToolRepeatCounter:
    """The counter of one scope (``main`` or a subagent's id), empty if it has none."""
    scopes = data.get("scopes") if data is not None else None
    kept = scopes.get(scope) if isinstance(scopes, dict) else None
    return ToolRepeatCounter.from_state(kept, ignored=settings.ignore_tools,
                                        block=settings.tool_repeat_block)


def put(data: dict[str, Any] | None, scope: str, counts: ToolRepeatCounter) -> dict[str, Any]:
    """The state with one scope's counter replaced (that scope becomes the most recent)."""
    scopes = dict(data["scopes"]) if data is not None else {}
    scopes.pop(scope, None)
    scopes[scope] = counts.to_state()
    while len(scopes) > MAX_SCOPES:
        del scopes[next(iter(scopes))]
    return {"v": _VERSION, "scopes": scopes}


def save(path: str, data: dict[str, Any]) -> None:
    """Write the session's state atomically (private file, private folder)."""
    import json

    from ..state.files import write_private_file

    write_private_file(path, json.dumps(data, separators=(",", ":")).encode("ascii"))


def remove(path: str) -> bool:
    """Forget a session's counts (the person spoke); True if there were any."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def prune(state: os.PathLike[str] | str, *, now: float, keep: str = "") -> int:
    """Remove state files untouched for ``STALE_AFTER`` (and stray temp files), except
    ``keep``; how many were removed."""
    folder = os.path.join(os.fspath(state), FOLDER)
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if entry.name == _LOCK_NAME or entry.path == keep or not entry.name.endswith(
                (".json", ".tmp")):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if now - info.st_mtime > (STALE_AFTER if entry.name.endswith(".json") else 3600):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    return removed
