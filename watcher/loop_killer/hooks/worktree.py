"""Did anything change on disk? A fingerprint of the working tree, taken when a call's result
would repeat; None (counts as changed) when too big, too slow or unreadable."""

from __future__ import annotations

import os
import stat

from ..light import hex_digest

__all__ = ["MAX_FILE_BYTES", "MAX_FILES", "TIME_LIMIT", "file_state", "fingerprint"]

MAX_FILES = 20_000  # paths a fingerprint reads at the most
TIME_LIMIT = 1.0  # seconds a fingerprint may take; past it there is none
# Caches and installs a walk does not enter.
_SKIPPED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox",
                      ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def fingerprint(folder: str) -> str | None:
    """The working tree's fingerprint at ``folder``, or None when it cannot be told."""
    import time

    deadline = time.monotonic() + TIME_LIMIT
    try:
        if not folder:
            return None
        try:
            if not stat.S_ISDIR(os.stat(folder).st_mode):
                return None
        except FileNotFoundError:
            return "absent:"  # no tree there: nothing in it can change
        root = _git_root(folder)
        if root is not None:
            return _git_fingerprint(root, max_files=MAX_FILES, deadline=deadline)
        return _walk_fingerprint(folder, max_files=MAX_FILES, deadline=deadline)
    except (OSError, ValueError):
        return None


MAX_FILE_BYTES = 32 << 20  # the largest file whose state is read


def file_state(path: str, cwd: str = "") -> str | None:
    """One file's state as the edit rule compares it; None when it cannot be read."""
    from ..engine.edits import ABSENT, content_digest

    if not path:
        return None
    full = os.path.join(cwd, path) if cwd else path
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return content_digest(_as_claude_reads(b"".join(chunks)))
    except OSError:
        return None
    finally:
        os.close(fd)


def _as_claude_reads(data: bytes) -> str:
    """A file's text as Claude Code reads it (decoded, BOM dropped, CRLF made LF)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", "surrogatepass")
    else:
        text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return text.replace("\r\n", "\n")


def _git_root(folder: str) -> str | None:
    """The work tree ``folder`` is in (a ``.git`` folder or file above it), if any."""
    path = os.path.abspath(folder)
    for _ in range(64):
        if os.path.lexists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None


def _git_fingerprint(root: str, *, max_files: int, deadline: float) -> str | None:
    import subprocess
    import time

    left = deadline - time.monotonic()
    if left <= 0:
        return None
    # No optional lock (never write the index while the session works), no inherited GIT_*.
    env = {**{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
           "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", "-C", root, "status", "--porcelain=v2", "-z", "--branch",
             "--untracked-files=all", "--ignore-submodules=untracked"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=left, env=env,
            check=False)
    except (OSError, subprocess.SubprocessError):
        return None  # no git, or too slow: the walk would be no better
    if done.returncode != 0:
        return None
    out = done.stdout
    parts = [out]
    changed = 0
    for entry in out.split(b"\0"):
        if entry[:2] not in (b"1 ", b"2 ", b"u "):
            continue  # headers, untracked (by name alone), a rename's old path
        changed += 1
        if changed > max_files or time.monotonic() > deadline:
            return None
        # The path is the last field (a rename's second path follows in the next entry).
        path = entry.split(b" ", 8 if entry[:1] == b"1" else 9 if entry[:1] == b"2" else 10)[-1]
        try:
            info = os.lstat(os.path.join(os.fsencode(root), path))
            parts.append(b"%d:%d" % (info.st_size, info.st_mtime_ns))
        except OSError:
            parts.append(b"-")  # deleted: git said so already
    return "git:" + hex_digest(b"\0".join(parts).decode("utf-8", "surrogateescape"), 32)


def _walk_fingerprint(folder: str, *, max_files: int, deadline: float) -> str | None:
    import time

    rows: list[str] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIPPED:
                        pending.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
                rows.append(f"{entry.path}\0{info.st_size}\0{info.st_mtime_ns}")
                if len(rows) > max_files:
                    return None
        if time.monotonic() > deadline:
            return None
    rows.sort()
    return "walk:" + hex_digest("\n".join(rows), 32)
