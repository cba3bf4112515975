"""Safe access to the small files of the state folder.

Anyone who can write to the state folder could leave a symlink, a FIFO or a huge file
where loop-killer expects a small JSON file. Every read and append goes through here:
never follow a link, never block on a FIFO, never read more than a bound.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson

__all__ = ["NotAFile", "append_line", "read_json_object", "read_small_file"]

_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK


class NotAFile(OSError):
    """The path is not a regular file (a FIFO, a device, a folder) or it is too large."""


def read_small_file(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Raises FileNotFoundError, NotAFile, or OSError (ELOOP for a symlink).
    """
    fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFile(f"{path}: not a regular file")
        if info.st_size > limit:
            raise NotAFile(f"{path}: oversized ({info.st_size} bytes)")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotAFile(f"{path}: oversized")
    return data


def read_json_object(path: Path | str, limit: int = 256 * 1024) -> dict[str, Any] | None:
    """A small JSON object file, or None when it is missing, unsafe or not an object."""
    try:
        value = orjson.loads(read_small_file(path, limit))
    except (OSError, orjson.JSONDecodeError):
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
