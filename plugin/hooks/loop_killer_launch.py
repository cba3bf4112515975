"""loop-killer's hook launcher: decide cheaply, else find the installed package and run it.

Claude Code runs ``python3 "${CLAUDE_PLUGIN_ROOT}/hooks/launch.py"`` for every hook event
in hooks.json, the hook input on stdin; ``launch.py`` imports this module and runs
``main`` (imported, not run as the script: Python keeps a module compiled in
``__pycache__``, while a script is compiled afresh at every run, 4 ms of every hook).
The installed plugin is a copy of ``plugin/`` only, so this file cannot import the
package to decide. It reads stdin once and, from the input and one ``lstat`` (plus one
``scandir`` for a Stop), ends a normal turn before it imports or starts anything else:

* ``Stop`` without ``stop_hook_active``, no clear request at
  ``<state>/requests/<session>.json``, no session record at ``<state>/tools/<session>.json``
  and no mod plan waiting in ``<state>/outcomes/``;
* ``PreToolUse`` without ``<state>/tools/<session>.refuse`` (no call of the session would
  be refused now), ``UserPromptSubmit`` without ``<state>/tools/<session>.json``;
* input that is not JSON, not an object, or larger than ``MAX_INPUT_BYTES``.

Anything else runs the package's ``loop_killer.hooks.entry.main`` with the same bytes,
from the first Python that has the package (and orjson):

1. The ``python3`` running this file: in-process, ``main(raw)``; also with the
   site-packages of the interpreter ``loop-killer install`` recorded in
   ``<state>/python`` added, when that folder is this Python's version's (a venv made
   from this ``python3``, say): one interpreter start instead of two.
2. The interpreter ``loop-killer install`` recorded in ``<state>/python``.
3. The interpreter named in the shebang of a ``loop-killer`` executable on PATH.
4. A source checkout this plugin folder sits in (``../watcher``), with this ``python3``.

Another interpreter is started with ``exec`` on ``launch.py``, the input put back on
fd 0 (a memfd, else an unlinked temporary file). When none works, the hook blocks nothing
and says once (a marker under ``$CLAUDE_PLUGIN_DATA``, else the state folder) what to
install.

Standard library only, any Python 3; it never needs the executable bit; it always exits 0
and never writes to stderr. The state-folder rule, the session-id check and the request
and tools file names are copies of the package's (tests pin them equal).
"""

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every hook 2 ms
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeGuard

TRIED_FLAG = "--loop-killer-tried"
SCRIPT_NAME = "launch.py"
MARKER_NAME = "missing-package-notice"
SMALL_FILE = 4096
"""The most this launcher ever reads of one of its own small files."""
MAX_INPUT_BYTES = 32 * 1024 * 1024
"""Hook input larger than this is ignored (as ``loop_killer.hooks`` does)."""
_WHITESPACE = " \t\n\r"  # JSON's
_ID_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_ID_CHARS = frozenset(_ID_FIRST + "._-")


# -- the cheap decision --------------------------------------------------------------------


def state_dir(env: "Mapping[str, str]") -> str:
    """loop-killer's state folder, as ``loop_killer.state.files.state_dir`` computes it."""
    configured = env.get("LOOP_KILLER_STATE_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(config_dir(env), "loop-killer")


def config_dir(env: "Mapping[str, str]") -> str:
    """``$CLAUDE_CONFIG_DIR``, else ``$HOME/.claude`` (``loop_killer.state.files``)."""
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return os.path.expanduser(configured)
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")


def is_plain_id(value: object) -> "TypeGuard[str]":
    """A session id safe as a file name (``loop_killer.state.files.is_plain_id``)."""
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] in _ID_FIRST
            and _ID_CHARS.issuperset(value) and ".." not in value)


def request_path(state: str, session_id: str) -> str:
    """Where a clear request for the session waits (``loop_killer.state.inbox``)."""
    return os.path.join(state, "requests", session_id + ".json")


def tools_path(state: str, session_id: str) -> str:
    """The session's tool-call history, kept by the tool-repeat hooks."""
    return os.path.join(state, "tools", session_id + ".json")


def refusal_marker(state: str, session_id: str) -> str:
    """Present while some call of the session would be refused (``state.session``)."""
    return os.path.join(state, "tools", session_id + ".refuse")


def parse_input(raw: bytes) -> "Any":
    """The hook input as JSON, parsed as ``json.loads`` does; None when it is too large,
    broken or nested too deeply. The C scanner ``json`` itself uses, without importing
    ``json`` (which imports ``re``: a third of a bare interpreter's start)."""
    if len(raw) > MAX_INPUT_BYTES or not raw or raw.isspace():
        return None
    try:
        from _json import make_scanner

        text = raw.decode("utf-8")
        start = len(text) - len(text.lstrip(_WHITESPACE))
        # (the C scanner reads its settings off any object, as JSONDecoder hands itself)
        scan = make_scanner(_ScanContext())  # type: ignore[arg-type]
        value, end = scan(text, start)
        if not text[end:].strip(_WHITESPACE):
            return value
    except Exception:  # noqa: BLE001, S110 - anything odd: let json decide
        pass
    try:
        import json

        return json.loads(raw)
    except Exception:  # noqa: BLE001 - ValueError, RecursionError, MemoryError: bad input
        return None


class _ScanContext:
    """The settings ``json.JSONDecoder()`` hands the C scanner. (The package's
    ``loop_killer.light`` has the same: this file cannot import the package.)"""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    def __init__(self) -> None:
        self.parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"),
                               "NaN": float("nan")}.__getitem__


def needs_package(data: "Any", env: "Mapping[str, str]") -> bool:
    """Whether this hook input needs the package (False: nothing to do, exit 0)."""
    if not isinstance(data, dict):
        return False
    event = data.get("hook_event_name")
    if event not in ("Stop", "PreToolUse", "UserPromptSubmit"):
        return True
    session_id = data.get("session_id")
    if not is_plain_id(session_id):
        return True  # odd input: the package decides
    state = state_dir(env)
    if event == "PreToolUse":  # only a call that may be refused needs the package
        return _present(refusal_marker(state, session_id))
    if event != "Stop":
        return _present(tools_path(state, session_id))
    if data.get("stop_hook_active") is True:
        return True
    # (the session's record: this Stop ends what its turn's re-prompt answers follow)
    return (_present(request_path(state, session_id)) or _present(tools_path(state, session_id))
            or _plans_waiting(state))


def _present(path: str) -> bool:
    """Whether anything (a file, a link, a FIFO...) sits at ``path``; never opened."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _plans_waiting(state: str) -> bool:
    """Whether the mod's plan records of an earlier stop wait to be logged (the package's
    hook sweeps them into the detection log). One ``scandir``: usually of a missing or
    empty folder."""
    try:
        with os.scandir(os.path.join(state, "outcomes")) as entries:
            for entry in entries:
                if entry.name.endswith(".plan"):
                    return True
    except OSError:  # no folder (the usual case), or not a readable one
        return False
    except Exception:  # noqa: BLE001 - a Python too old for "with os.scandir": let the package look
        return True
    return False


# -- finding the package -------------------------------------------------------------------


def _run_here(raw: bytes) -> "int | None":
    """Run the hook with this interpreter; None when the package is not importable here."""
    # The package needs orjson: check both are there (without the cost of importing them).
    if not (_findable("loop_killer") and _findable("orjson")):
        return None
    try:
        from loop_killer.hooks.entry import main as hook_main
    except Exception:  # noqa: BLE001 - ImportError, or a SyntaxError from a Python too old
        _forget_package()
        return None
    if getattr(getattr(hook_main, "__code__", None), "co_argcount", 1) == 0:
        # An older package reads stdin itself.
        if not _refill_stdin(raw):
            return 0
        sys.stdin = os.fdopen(0, "r", closefd=False)
        hook_main()
    else:
        hook_main(raw)
    _end_now()
    return 0  # (only where os._exit is missing)


def _end_now() -> None:
    """End the process as soon as the hook's output is out: Python's teardown of the
    modules the package loaded costs a tool-call hook 3 ms, and nothing is left to do
    (the hooks write their files whole, start no threads and register nothing at exit)."""
    try:  # noqa: SIM105 - no contextlib: the launcher imports nothing it need not
        sys.stdout.flush()
    except Exception:  # noqa: BLE001, S110 - a closed stdout: nothing more can be said
        pass
    exit_now = getattr(os, "_exit", None)
    if exit_now is not None:
        exit_now(0)


def _findable(name: str) -> bool:
    """Whether a top-level module can be imported here, as ``importlib.util.find_spec``
    would say (that module alone costs a few ms to import). A namespace package (no
    origin) is not the module: an editable install leaves ``loop_killer/_plugin`` in
    site-packages, and without its .pth that folder alone is all a path finder sees."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, None)
        except Exception:  # noqa: BLE001, S112 - a broken finder: ask the next one
            continue
        if spec is not None:
            return getattr(spec, "origin", None) not in (None, "namespace")
    return False


def _forget_package() -> None:
    """Drop what a failed import left of loop_killer (a stale or partial package), so the
    next place tried imports it afresh instead of finding the broken one in sys.modules."""
    for name in list(sys.modules):
        if name == "loop_killer" or name.startswith("loop_killer."):
            del sys.modules[name]


def _refill_stdin(raw: bytes) -> bool:
    """Put the input back on fd 0, from its start, for a process that reads stdin (never
    blocks: a memfd, else an unlinked temporary file). False when neither works."""
    fd = -1
    try:
        fd = os.memfd_create("loop-killer-hook-input")
    except (AttributeError, OSError):
        try:
            import tempfile

            with tempfile.TemporaryFile() as handle:
                fd = os.dup(handle.fileno())
        except OSError:
            return False
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _read_small(path: str, *, owned: bool = False) -> "str | None":
    """The text of a small regular file; None when it is missing, a link, a FIFO or a
    device (opened without following links and without blocking), or unreadable; with
    ``owned``, also when another user owns it or anyone may write it."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        uid = getattr(os, "getuid", lambda: info.st_uid)()
        if owned and (info.st_uid != uid or info.st_mode & 0o002):
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


def _recorded_python() -> "str | None":
    """The interpreter ``loop-killer install`` recorded: only from a state folder that is
    not a link, in a file of this user's that not everyone may write (it is run)."""
    env = os.environ
    for folder in (state_dir(env), os.path.join(config_dir(env), "loop-killer")):
        if os.path.islink(folder):
            continue
        text = _read_small(os.path.join(folder, "python"), owned=True)
        lines = text.strip().splitlines() if text else []
        path = lines[0].strip() if lines else ""
        if path:
            return path
    return None


def _run_with_recorded_packages(raw: bytes, python: "str | None") -> "int | None":
    """``_run_here`` with the recorded interpreter's site-packages added (last: never in
    front of this Python's own modules), when they are for this Python's version (its
    folder is named by it, so the package's compiled dependencies fit); None when not.
    ``python``: the recorded interpreter (``_recorded_python``)."""
    if not python:
        return None
    folder = os.path.join(os.path.dirname(os.path.dirname(python)), "lib",
                          "python{}.{}".format(*sys.version_info[:2]), "site-packages")
    if folder in sys.path or not os.path.isdir(os.path.join(folder, "loop_killer")):
        return None
    sys.path.append(folder)
    done = _run_here(raw)
    if done is None:
        sys.path.remove(folder)
    return done


def _shebang_python() -> "str | None":
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


def _checkout_source() -> "str | None":
    """``<checkout>/watcher`` when this plugin folder is ``<checkout>/plugin``."""
    plugin_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = os.path.join(os.path.dirname(plugin_root), "watcher")
    if os.path.isfile(os.path.join(source, "loop_killer", "hooks", "entry.py")):
        return source
    return None


def _script() -> str:
    """The script Claude Code runs (``launch.py``, beside this module)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), SCRIPT_NAME)


def _same(path: str) -> str:
    """An interpreter's identity: its path as given (a venv's python links to its base
    interpreter, yet sees other packages, so links are not followed)."""
    return os.path.abspath(path)


def _note_missing(tried: "list[str]") -> "dict[str, str] | None":
    """Say once (per set of interpreters tried) that the package is missing."""
    import stat

    pythons = ", ".join(tried) or sys.executable
    text = (
        "loop-killer: its hooks cannot find the loop-killer Python package (with orjson) "
        "for " + pythons + ", so loops are not being stopped. In loop-killer's source "
        "folder run: pipx install --force . && ~/.local/bin/loop-killer install"
    )
    data_dir = os.environ.get("CLAUDE_PLUGIN_DATA") or state_dir(os.environ)
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


def _read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    except (OSError, ValueError, AttributeError):
        return b""


def _exec_another(raw: bytes, tried: "list[str]", recorded: "str | None") -> bool:
    """Start this launcher again in the recorded interpreter, else the one of the
    ``loop-killer`` on PATH (never one in ``tried``), the input put back on fd 0. Returns
    only when none took over: True to look further, False when the input could not be
    put back (nothing more can run)."""
    for candidate in (recorded, _shebang_python()):
        if not candidate or _same(candidate) in tried:
            continue
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if not _refill_stdin(raw):
            return False
        try:
            sys.stdout.flush()
            os.execv(candidate, [candidate, _script(),
                                 TRIED_FLAG, os.pathsep.join(tried)])
        except OSError:
            continue
    return True


def main() -> int:
    args = sys.argv[1:]
    raw = _read_stdin()
    tried = []
    if len(args) >= 2 and args[0] == TRIED_FLAG:
        # Started by this launcher in another interpreter: it has decided already.
        tried = [path for path in args[1].split(os.pathsep) if path]
    elif not needs_package(parse_input(raw), os.environ):
        return 0
    if len(raw) > MAX_INPUT_BYTES or _run_here(raw) is not None:
        return 0
    recorded = _recorded_python()  # read once: tried in this process, then started
    if not tried and _run_with_recorded_packages(raw, recorded) is not None:
        return 0
    tried.append(_same(sys.executable))
    if not _exec_another(raw, tried, recorded):
        return 0
    source = _checkout_source()
    if source is not None and source not in sys.path:
        sys.path.insert(0, source)
        if _run_here(raw) is not None:
            return 0
    note = _note_missing(tried)
    if note is not None:
        import json

        sys.stdout.write(json.dumps(note) + "\n")
    return 0


def run() -> None:
    """``main``, and exit 0 whatever happens."""
    try:  # noqa: SIM105 - no contextlib: the launcher imports nothing it need not
        main()
    except BaseException:  # noqa: BLE001, S110 - never fail (or re-prompt) the turn
        pass
    sys.exit(0)


if __name__ == "__main__":
    run()
