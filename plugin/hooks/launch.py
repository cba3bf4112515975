"""loop-killer's Stop hook launcher: find the installed package, run its hook.

Claude Code runs ``python3 "${CLAUDE_PLUGIN_ROOT}/hooks/launch.py"`` at the end of
every turn (see hooks.json). The installed plugin is a copy of ``plugin/`` only, so this
file holds no logic: it finds a Python that has the ``loop_killer`` package (and orjson)
and runs ``loop_killer.hook`` there, with the hook input still on stdin.

1. The ``python3`` running this file, when it can import the package: run in-process.
2. The interpreter ``loop-killer install`` recorded in
   ``$CLAUDE_CONFIG_DIR/loop-killer/python`` (default ``~/.claude/loop-killer/python``).
3. The interpreter named in the shebang of a ``loop-killer`` executable on PATH.
4. A source checkout this plugin folder sits in (``../watcher``), with this ``python3``.

Another interpreter is started with ``exec`` (same process, stdin untouched) on this same
file, which then tries in-process there. When none works, the hook blocks nothing and
says once (a marker under ``$CLAUDE_PLUGIN_DATA``, else the state folder) what to install.

Standard library only, any Python 3; it never needs the executable bit; it always exits 0.
"""

import os
import stat
import sys

TRIED_FLAG = "--loop-killer-tried"
MARKER_NAME = "missing-package-notice"
SMALL_FILE = 4096
"""The most this launcher ever reads of one of its own small files."""


def _run_here():
    """Run the hook with this interpreter; None when the package is not importable here."""
    try:
        from importlib.util import find_spec

        # The package needs orjson: check it is there (without the cost of importing it).
        if find_spec("orjson") is None:
            return None
        from loop_killer.hook.entry import main as hook_main
    except Exception:  # noqa: BLE001 - ImportError, or a SyntaxError from a Python too old
        return None
    return hook_main()


def _config_dir():
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(os.path.expanduser("~"), ".claude")


def _state_dir():
    configured = os.environ.get("LOOP_KILLER_STATE_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(_config_dir(), "loop-killer")


def _read_small(path):
    """The text of a small regular file; None when it is missing, a link, a FIFO or a
    device (opened without following links and without blocking), or unreadable."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, SMALL_FILE)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _recorded_python():
    for folder in (_state_dir(), os.path.join(_config_dir(), "loop-killer")):
        text = _read_small(os.path.join(folder, "python"))
        lines = text.strip().splitlines() if text else []
        path = lines[0].strip() if lines else ""
        if path:
            return path
    return None


def _shebang_python():
    """The interpreter a ``loop-killer`` script on PATH runs with, if it says so plainly."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        script = os.path.join(folder or ".", "loop-killer")
        if not os.path.isfile(script):
            continue
        try:
            with open(script, "rb") as handle:
                head = handle.read(1024).decode("utf-8", "replace")
        except OSError:
            continue
        lines = head.splitlines()
        if not lines or not lines[0].startswith("#!"):
            continue
        words = lines[0][2:].split()
        if words and os.path.basename(words[0]) == "sh" and len(lines) > 1:
            # pip's form for long paths:  #!/bin/sh  /  '''exec' "/path/python" "$0" "$@"
            rest = lines[1].split("'exec'", 1)
            if len(rest) == 2:
                words = rest[1].split()
                return words[0].strip('"') if words else None
            continue
        if words and os.path.basename(words[0]) == "env":
            continue  # "env python3": the python3 on PATH, which was tried already
        if words and "python" in os.path.basename(words[0]):
            return words[0]
    return None


def _checkout_source():
    """``<checkout>/watcher`` when this plugin folder is ``<checkout>/plugin``."""
    plugin_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = os.path.join(os.path.dirname(plugin_root), "watcher")
    if os.path.isfile(os.path.join(source, "loop_killer", "hook", "entry.py")):
        return source
    return None


def _same(path):
    """An interpreter's identity: its path as given (a venv's python links to its base
    interpreter, yet sees other packages, so links are not followed)."""
    return os.path.abspath(path)


def _note_missing(tried):
    """Say once (per set of interpreters tried) that the package is missing."""
    pythons = ", ".join(tried) or sys.executable
    text = (
        "loop-killer: the Stop hook cannot find the loop-killer Python package (with orjson) "
        "for " + pythons + ", so loops are not being stopped. Install it (pipx install "
        "loop-killer, or pip install . in its source folder), then run: loop-killer install"
    )
    data_dir = os.environ.get("CLAUDE_PLUGIN_DATA") or _state_dir()
    marker = os.path.join(data_dir, MARKER_NAME)
    if _read_small(marker) == pythons:
        return None
    try:
        os.makedirs(data_dir, exist_ok=True)
        flags = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_NONBLOCK", 0))
        fd = os.open(marker, flags, 0o600)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, pythons.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass
    return {"systemMessage": text}


def main():
    args = sys.argv[1:]
    tried = []
    if len(args) >= 2 and args[0] == TRIED_FLAG:
        tried = [path for path in args[1].split(os.pathsep) if path]
    here = _same(sys.executable)
    result = _run_here()
    if result is not None:
        return 0
    tried.append(here)
    for candidate in (_recorded_python(), _shebang_python()):
        if not candidate or _same(candidate) in tried:
            continue
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        try:
            sys.stdout.flush()
            os.execv(candidate, [candidate, os.path.abspath(__file__),
                                 TRIED_FLAG, os.pathsep.join(tried)])
        except OSError:
            continue
    source = _checkout_source()
    if source is not None and source not in sys.path:
        sys.path.insert(0, source)
        if _run_here() is not None:
            return 0
    note = _note_missing(tried)
    if note is not None:
        import json

        sys.stdout.write(json.dumps(note) + "\n")
    return 0


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # noqa: BLE001, S110 - never fail (or re-prompt) the turn
        pass
    sys.exit(0)
