"""The state folder's files and Claude Code's: where they live, and safe access: never follow
a link, never block on a FIFO, never read more than a bound."""

from __future__ import annotations

import os
import stat
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

__all__ = [
    "NOTES_DIR", "NotAFile", "NotAFolder", "STATE_FOLDERS", "append_line", "config_dir",
    "create_new", "ensure_private_dir", "file_size", "first_time", "is_plain_id",
    "is_session_file_name", "linked_state_folders", "list_transcripts", "open_transcript",
    "owned_privately", "projects_dir", "read_json_object", "read_new_bytes", "read_small_file",
    "remove_file", "request_waiting", "same_transcript", "session_id_of", "state_dir",
    "state_dir_text", "state_folder", "state_folder_text", "write_private_file"]

_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block us
_NOATIME = getattr(os, "O_NOATIME", 0)


class NotAFile(OSError):
    """The path is not a regular file (a FIFO, a device, a folder) or it is too large."""


class NotAFolder(OSError):
    """A state folder is a symlink, or not a folder at all: never written into."""


def ensure_private_dir(path: Path | str, *, create: bool = True) -> str:
    """Create ``path`` (and parents) private to this user; NotAFolder for a link."""
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotAFolder(f"{path}: not a folder (a link or a file); not writing into it")
    if info.st_mode & 0o077 and info.st_uid == os.getuid():
        # Failing is not ours to fix (a shared mount): the files inside are still 0600.
        try:  # noqa: SIM105 - a tool call's hook does not import contextlib
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError:
            pass
    return path


def read_small_file(path: Path | str, limit: int, *, owned: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``owned``: and ours)."""
    fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(f"{path}: not a regular file")
        if owned and (info.st_uid != os.getuid() or info.st_mode & 0o022):
            raise NotAFile(f"{path}: owned by another user or writable by others")
        if info.st_size > limit:
            raise NotAFile(f"{path}: oversized ({info.st_size} bytes)")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotAFile(f"{path}: oversized")
    return data


def read_json_object(path: Path | str, limit: int = 256 * 1024, *, owned: bool = False
                     ) -> dict[str, Any] | None:
    """A small JSON object file, or None when it is missing, unsafe or not an object."""
    # (not orjson, nor json: importing them costs a tool-call hook 8 and 10 ms)
    from ..light import loads

    try:
        value = loads(read_small_file(path, limit, owned=owned))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def append_line(path: Path | str, line: bytes) -> None:
    """Append one line with a single ``write`` (O_APPEND) to a regular file, 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_FOLLOW, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(f"{path}: not a regular file")
        os.write(fd, line)
    finally:
        os.close(fd)


def write_private_file(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600, in a private folder."""
    folder, name = os.path.split(os.fspath(path))
    ensure_private_dir(folder or ".")
    temp = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        try:  # noqa: SIM105 - (no contextlib: see ensure_private_dir)
            os.unlink(temp)
        except OSError:
            pass
        raise


def remove_file(path: Path | str, *, quiet: bool = True) -> None:
    """Remove a file; its being gone already is no error (with ``quiet``, nothing is)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # gone already: what was asked
    except OSError:
        if not quiet:
            raise


def create_new(path: Path | str, data: bytes = b"") -> bool:
    """Create ``path`` exclusively, never through a link (0600); False if it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    try:
        if data:
            os.write(fd, data)
    finally:
        os.close(fd)
    return True


def open_transcript(path: Path | str, *, regular_only: bool = True) -> int:
    """A descriptor to read a transcript: never blocking, no atime touched if allowed."""
    fd = -1
    if _NOATIME:
        try:  # noqa: SIM105 - (no contextlib: see ensure_private_dir)
            fd = os.open(path, _READ_FLAGS | _NOATIME)
        except PermissionError:
            pass
    if fd < 0:
        fd = os.open(path, _READ_FLAGS)
    if regular_only:
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            os.close(fd)
            raise
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise NotAFile(f"{path}: not a regular file")
    return fd


STATE_FOLDERS = ("requests", "claimed", "fired", "hook", "tools", "outcomes", "notes", "status")
"""The state folder's sub-folders (``state_folder`` is the one way into each)."""

# Sets, not a regular expression: compiling one would cost every tool-call hook 0.2 ms.
_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ID_FIRST | frozenset("._-")


def file_size(path: str) -> int | None:
    """The size of ``path`` in bytes; None when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def read_new_bytes(path: str, offset: int, *, limit: int = 4 * 1024 * 1024) -> bytes:
    """The bytes of ``path`` from ``offset`` (at most ``limit``); b"" when none."""
    try:
        fd = open_transcript(path)
    except OSError:
        return b""
    try:
        size = os.fstat(fd).st_size
        if size <= offset:
            return b""
        return os.pread(fd, min(size - offset, limit), offset)
    except OSError:
        return b""
    finally:
        os.close(fd)


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
    """``<state>/<names...>``, checked: no folder on the way is a link or a non-folder
    (NotAFolder, logged once). ``create``: missing folders are made (0700), else
    FileNotFoundError. ``private``: each also owned by this user, writable by nobody else."""
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


NOTES_DIR = "notes"  # things said once: a marker file each, <state>/notes/<key>


def first_time(state: os.PathLike[str] | str, key: str) -> bool:
    """True the first time ``key`` is asked about (and whenever that cannot be told)."""
    if not is_plain_id(key):
        raise ValueError(f"not a plain key: {key!r}")
    try:
        return create_new(os.path.join(state_folder_text(state, NOTES_DIR, create=True), key))
    except OSError:
        return True


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
    """Log a linked folder once per process, and a sub-folder once in all (``notes/``)."""
    if folder in _said:
        return
    _said.add(folder)
    parent, name = os.path.split(folder)
    if parent == root and name != NOTES_DIR and not first_time(root, f"linked-{name}"):
        return
    import logging  # only here: a hook's usual run never imports it

    logging.getLogger(__name__).warning("%s; loop-killer leaves it alone", error)


def linked_state_folders(state: Path | str) -> list[Path]:
    """The state folder and its sub-folders that are links or not folders."""
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
    """Whether a file name is a main session transcript's (not ``agent-*``)."""
    return name.endswith(".jsonl") and not name.startswith("agent-")


def session_id_of(transcript: os.PathLike[str] | str) -> str | None:
    """The session id of a main transcript path (not a subagent's), or None."""
    folder, name = os.path.split(os.fspath(transcript))
    if not is_session_file_name(name) or os.path.basename(folder) == "subagents":
        return None
    stem = name[: -len(".jsonl")]
    return stem if is_plain_id(stem) else None


def same_transcript(one: str, other: str) -> bool:
    """Whether two paths name the same transcript (text or file); never opens either."""
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
    """Every ``<root>/<project>/<session>.jsonl`` (no subagent's), unordered."""
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
    """Whether something sits at the session's clear-request path (not read)."""
    return os.path.lexists(os.path.join(state, "requests", f"{session_id}.json"))

