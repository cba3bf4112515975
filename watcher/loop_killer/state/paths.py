"""Where Claude Code keeps transcripts and where loop-killer keeps its state.

Each place is worked out once, as text (``state_dir_text``, ``state_folder_text``: what
the tool-call hooks use, which run on every tool call and never import pathlib), and
given as a ``Path`` to everyone else (``state_dir``, ``state_folder``).
"""

from __future__ import annotations

import os
import stat

from .files import NotAFolder, ensure_private_dir

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

__all__ = [
    "STATE_FOLDERS",
    "NotAFolder",
    "config_dir",
    "ensure_private_dir",
    "is_plain_id",
    "is_session_file_name",
    "linked_state_folders",
    "list_transcripts",
    "owned_privately",
    "projects_dir",
    "request_waiting",
    "same_transcript",
    "session_id_of",
    "state_dir",
    "state_dir_text",
    "state_folder",
    "state_folder_text",
]

STATE_FOLDERS = ("requests", "claimed", "fired", "hook", "tools", "outcomes", "notes",
                 "status")
"""The state folder's sub-folders (``state_folder`` is the one way into each)."""

# A session id as Claude Code makes them (a UUID), or any plain name: never a path.
# (Sets, not a regular expression: compiling one would cost every tool-call hook 0.2 ms.)
_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ID_FIRST | frozenset("._-")


def _config_dir_text(env: Mapping[str, str] | None) -> str:
    env = os.environ if env is None else env
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    from pathlib import Path

    return Path(_config_dir_text(env))


def projects_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder whose project folders hold the session transcripts."""
    return config_dir(env) / "projects"


def state_dir_text(env: Mapping[str, str] | None = None) -> str:
    """loop-killer's own folder (``$LOOP_KILLER_STATE_DIR`` overrides it, for tests)."""
    env = os.environ if env is None else env
    configured = env.get("LOOP_KILLER_STATE_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(_config_dir_text(env), "loop-killer")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``state_dir_text`` as a ``Path``."""
    from pathlib import Path

    return Path(state_dir_text(env))


def state_folder(state: os.PathLike[str] | str, *names: str, create: bool = False,
                 private: bool = False) -> Path:
    """``state_folder_text`` as a ``Path``."""
    from pathlib import Path

    return Path(state_folder_text(state, *names, create=create, private=private))


def state_folder_text(state: os.PathLike[str] | str, *names: str, create: bool = False,
                      private: bool = False) -> str:
    """``<state>/<names...>``, checked before any file in it is read or written: neither
    the state folder itself nor any folder below it on the way is a link (or anything but
    a folder). The one rule for every state sub-folder: a link there would send our reads
    and writes (and a chmod) wherever it points.

    ``create``: missing folders are made (0700); otherwise a missing one raises
    FileNotFoundError. ``private``: each folder must also be owned by this user and
    writable by nobody else (where a file in it is acted on: a clear request, say), else
    NotAFolder. A link or a non-folder raises NotAFolder, and is logged once per process
    (``loop-killer doctor`` lists them: ``linked_state_folders``). Links above the state
    folder (a ``~/.claude`` kept in a dotfiles repository) are the person's own choice.
    """
    root = folder = os.fspath(state).rstrip("/") or "/"
    for name in ("", *names):
        folder = os.path.join(folder, name) if name else folder
        found = _lstat(folder) if private else None  # as found, before any chmod
        try:
            ensure_private_dir(folder, create=create)
            if found is not None and not owned_privately(found):
                raise NotAFolder(f"{folder}: owned by another user or writable by others")
        except NotAFolder as error:
            _report(root, folder, error)
            raise
    return folder


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def owned_privately(info: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else (a file or a folder's ``lstat``)."""
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


_said: set[str] = set()  # folders already reported by this process


def _report(root: str, folder: str, error: NotAFolder) -> None:
    """Log a linked folder once: once per process, and (a marker in ``notes/``) once in
    all for a sub-folder, so each hook process does not say it again."""
    if folder in _said:
        return
    _said.add(folder)
    parent, name = os.path.split(folder)
    if parent == root and name != "notes":
        from .files import create_new

        try:
            notes = state_folder_text(root, "notes", create=True)
            if not create_new(os.path.join(notes, f"linked-{name}")):
                return
        except OSError:
            pass  # said anyway: twice beats never
    import logging  # only here: a hook's usual run never imports it

    logging.getLogger(__name__).warning("%s; loop-killer leaves it alone", error)


def linked_state_folders(state: Path | str) -> list[Path]:
    """The state folder and its sub-folders that are links (or not folders): each is left
    alone (``state_folder``). For ``loop-killer doctor``; missing ones are fine."""
    from pathlib import Path

    found = []
    for path in (Path(state), *(Path(state) / name for name in STATE_FOLDERS)):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            found.append(path)
            if path == Path(state):
                break  # what is below it is not ours to look at
    return found


def is_plain_id(value: object) -> bool:
    """True for a session id that is safe as a file name (no ``/``, ``..`` or NUL)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 128
        and value[0] in _ID_FIRST
        and _ID_CHARS.issuperset(value)
        and ".." not in value
    )


def is_session_file_name(name: str) -> bool:
    """Whether a file name is a main session transcript's: ``<session>.jsonl``, and not a
    subagent's ``agent-*.jsonl``."""
    return name.endswith(".jsonl") and not name.startswith("agent-")


def session_id_of(transcript: os.PathLike[str] | str) -> str | None:
    """The session id of a main transcript path, or None for anything else.

    Subagent transcripts (``agent-*.jsonl`` beside the session, or under
    ``<session>/subagents/``) are not sessions. (Plain string work: a scan asks this of
    every file of a history.)
    """
    folder, name = os.path.split(os.fspath(transcript))
    if not is_session_file_name(name) or os.path.basename(folder) == "subagents":
        return None
    stem = name[: -len(".jsonl")]
    return stem if is_plain_id(stem) else None


def same_transcript(one: str, other: str) -> bool:
    """Whether two paths name the same transcript: the same text once normalised, or the
    same file (one reached through a linked ``~/.claude``, say). Never opens either."""
    if not one or not other:
        return False
    if os.path.normpath(one) == os.path.normpath(other):
        return True
    try:
        first, second = os.stat(one), os.stat(other)
    except (OSError, ValueError):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


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
    looked at without reading it: the cheap test before claiming one (which checks the
    folders on the way: ``state_folder``)."""
    return os.path.lexists(os.path.join(state, "requests", f"{session_id}.json"))
