"""Where Claude Code keeps transcripts and where loop-killer keeps its state."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = [
    "NotAFolder",
    "config_dir",
    "ensure_private_dir",
    "is_plain_id",
    "is_session_file_name",
    "list_transcripts",
    "projects_dir",
    "request_waiting",
    "session_id_of",
    "state_dir",
]

# A session id as Claude Code makes them (a UUID), or any plain name: never a path.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    env = os.environ if env is None else env
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser()
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def projects_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder whose project folders hold the session transcripts."""
    return config_dir(env) / "projects"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """loop-killer's own folder (``$LOOP_KILLER_STATE_DIR`` overrides it, for tests)."""
    env = os.environ if env is None else env
    configured = env.get("LOOP_KILLER_STATE_DIR")
    if configured:
        return Path(configured).expanduser()
    return config_dir(env) / "loop-killer"


class NotAFolder(OSError):
    """A state folder is a symlink, or not a folder at all: never written into."""


def ensure_private_dir(path: Path | str) -> Path:
    """Create ``path`` (and parents) readable by this user only; return it.

    The folder itself must be a real folder, not a link: a link planted where a state
    folder belongs (``hook/`` pointing elsewhere, say) raises ``NotAFolder`` rather than
    sending our files, and a chmod, to wherever it points. (Links above it, such as a
    ``~/.claude`` kept in a dotfiles repository, are the person's own choice.)
    """
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotAFolder(f"{path}: not a folder (a link or a file); not writing into it")
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        try:
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError:
            pass  # not ours to fix (a shared mount): the files inside are still 0600
    return path


def is_plain_id(value: object) -> bool:
    """True for a session id that is safe as a file name (no ``/``, ``..`` or NUL)."""
    return (
        isinstance(value, str)
        and _PLAIN_ID.fullmatch(value) is not None
        and ".." not in value
    )


def is_session_file_name(name: str) -> bool:
    """Whether a file name is a main session transcript's: ``<session>.jsonl``, and not a
    subagent's ``agent-*.jsonl``."""
    return name.endswith(".jsonl") and not name.startswith("agent-")


def session_id_of(transcript: Path) -> str | None:
    """The session id of a main transcript path, or None for anything else.

    Subagent transcripts (``agent-*.jsonl`` beside the session, or under
    ``<session>/subagents/``) are not sessions.
    """
    if not is_session_file_name(transcript.name):
        return None
    if transcript.parent.name == "subagents":
        return None
    stem = transcript.stem
    return stem if is_plain_id(stem) else None


def list_transcripts(root: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every ``<root>/<project>/<session>.jsonl`` (subagent files left out), unordered.

    Folders that vanish or cannot be read while listing are skipped quietly (the next
    pass sees them again).
    """
    try:
        projects = list(os.scandir(root))
    except OSError:
        return
    for project in projects:
        try:
            if not project.is_dir():
                continue
            entries = list(os.scandir(project.path))
        except OSError:
            continue
        for entry in entries:
            if is_session_file_name(entry.name):
                yield entry.path, entry


def request_waiting(state: Path | str, session_id: str) -> bool:
    """Whether something sits at the session's clear-request path (``inbox.request_path``),
    looked at without reading or following it: the cheap test before claiming one."""
    return os.path.lexists(os.path.join(state, "requests", f"{session_id}.json"))
