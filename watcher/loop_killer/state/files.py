"""Safe file access: the small files of the state folder, and transcripts.

Anyone who can write to the state folder could leave a symlink, a FIFO or a huge file
where loop-killer expects a small JSON file. Every read, write and append goes through
here: never follow a link, never block on a FIFO, never read more than a bound.
Transcripts are opened with ``open_transcript``: never blocking, regular files only.
"""

from __future__ import annotations

import os
import stat
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "NotAFile",
    "NotAFolder",
    "append_line",
    "create_new",
    "ensure_private_dir",
    "open_transcript",
    "read_json_object",
    "read_small_file",
    "remove_file",
    "write_private_file",
]

_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block us
_NOATIME = getattr(os, "O_NOATIME", 0)


class NotAFile(OSError):
    """The path is not a regular file (a FIFO, a device, a folder) or it is too large."""


class NotAFolder(OSError):
    """A state folder is a symlink, or not a folder at all: never written into."""


def ensure_private_dir(path: Path | str, *, create: bool = True) -> str:
    """Create ``path`` (and parents) readable by this user only; return it (as text).

    The folder itself must be a real folder, not a link: a link planted where a state
    folder belongs (``hook/`` pointing elsewhere, say) raises ``NotAFolder`` rather than
    sending our files, and a chmod, to wherever it points. (Links above it, such as a
    ``~/.claude`` kept in a dotfiles repository, are the person's own choice.)
    """
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
        # (No contextlib.suppress here: a tool call's hook does not import contextlib.)
        try:  # noqa: SIM105
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError:
            pass
    return path


def read_small_file(path: Path | str, limit: int, *, owned: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; with ``owned``, only of a
    file this user owns that nobody else can write (one that is acted on).

    Raises FileNotFoundError, NotAFile, or OSError (ELOOP for a symlink).
    """
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
    from ..lightjson import loads

    try:
        value = loads(read_small_file(path, limit, owned=owned))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def append_line(path: Path | str, line: bytes) -> None:
    """Append one line with a single ``write`` (O_APPEND), creating the file 0600.

    Refuses a symlink or anything but a regular file, without ever blocking.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_FOLLOW, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(f"{path}: not a regular file")
        os.write(fd, line)
    finally:
        os.close(fd)


def write_private_file(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + rename), mode 0600, in a private
    folder that is not a link (``ensure_private_dir``)."""
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
    """Remove a file. ``quiet``: whatever fails is not the caller's concern (a file of our
    own that another process removed or cannot be removed is left to the next pass);
    otherwise only its being gone already is ignored."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # gone already: what was asked
    except OSError:
        if not quiet:
            raise


def create_new(path: Path | str, data: bytes = b"") -> bool:
    """Create ``path`` with ``data``, exclusively and never through a link (mode 0600);
    False when something is there already: the first of concurrent creators wins."""
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
    """Open a transcript to read it: never blocking (a FIFO opens at once, then is
    refused with ``NotAFile``), and without touching its access time where allowed.

    Reading a freshly written file would otherwise update its atime, which the watcher's
    own observer reports as a change (and, at start-up over thousands of files, floods
    it). O_NOATIME is refused (EPERM) for files of other users: then open plainly.
    Returns a file descriptor the caller closes.
    """
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
