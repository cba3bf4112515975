"""``loop-killer install`` and ``doctor``: put the plugin in place, check it. ``install`` records
this interpreter by the path it was started as (resolved, a venv's ``python`` loses the venv)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..hooks.notice import MOD_MIN_VERSION, parse_version
from ..hooks.terminal import Runner, command_runner
from ..state.files import config_dir, ensure_private_dir, linked_state_folders, state_dir

__all__ = ["PLUGIN_NAME", "Check", "add_arguments_doctor", "add_arguments_install", "doctor",
           "find_marketplace", "install", "interpreter_kind", "multiplexer", "record_interpreter"]

PLUGIN_NAME = "loop-killer"

INTERPRETER_FILE = "python"
_CLI_TIMEOUT = 120.0
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

def find_marketplace() -> Path | None:
    """The marketplace folder holding this package's plugin, or None if there is none."""
    package = Path(__file__).resolve().parents[1]  # .../loop_killer
    for root in (package / "_plugin", package.parents[1]):
        if (root / ".claude-plugin" / "marketplace.json").is_file() and (
            root / "plugin" / "hooks" / "launch.py").is_file():
            return root
    return None


def marketplace_name(root: Path) -> str:
    try:
        data = json.loads((root / ".claude-plugin" / "marketplace.json").read_text("utf-8"))
        name = data.get("name")
        if isinstance(name, str) and name:
            return name
    except (OSError, ValueError, AttributeError):
        pass
    return PLUGIN_NAME


def add_arguments_install(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--print-only", action="store_true",
                        help="print the claude commands instead of running them")
    parser.add_argument("--claude", metavar="PATH", default=None,
                        help="the claude executable to use (default: the one on PATH)")


def record_interpreter(state: Path, python: str | None = None) -> Path:
    """Write this interpreter's path (links not followed) where the launcher looks for it."""
    from ..state.files import state_folder, write_private_file

    path = state_folder(state, create=True, private=True) / INTERPRETER_FILE
    write_private_file(path, (os.path.abspath(python or sys.executable) + "\n").encode())
    return path


def interpreter_kind(prefix: str | None = None, base_prefix: str | None = None) -> str:
    """Where the running Python's packages live, in words."""
    prefix = sys.prefix if prefix is None else prefix
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    if os.path.realpath(prefix) == os.path.realpath(base_prefix):
        return "a Python installation, no virtual environment"
    parts = Path(prefix).parts
    if len(parts) >= 3 and parts[-2] == "venvs" and "pipx" in parts[-3].lower():
        return "pipx's environment for it"
    if len(parts) >= 3 and parts[-2] == "tools" and parts[-3] == "uv":
        return "uv tool's environment for it"
    return f"the virtual environment {prefix}"


def install(args: argparse.Namespace, *, run: Runner | None = None,
            env: Mapping[str, str] | None = None) -> int:
    """Record the interpreter, register the plugin; 0 when done (or printed), 1 on failure."""
    env = os.environ if env is None else env
    run = run or command_runner(env, timeout=_CLI_TIMEOUT)
    state = state_dir(env)
    from ..printable import terminal_width, wrap
    from ..state.files import NotAFolder

    try:
        said = (f"recorded this Python for the plugin's hooks: {sys.executable} "
                f"({interpreter_kind()}; in {record_interpreter(state)})")
    except (NotAFolder, OSError) as error:
        said = (f"loop-killer install: cannot record this Python for the plugin's hooks in "
                f"{state} ({error}); the hooks use the python3 on their PATH")
    # (to the terminal's width, at spaces; the commands below stay whole, to be copied)
    for line in wrap(said, terminal_width(sys.stdout)):
        print(line)
    root = find_marketplace()
    if root is None:
        print("loop-killer install: the plugin folder is not part of this installation "
              "(no .claude-plugin/marketplace.json beside plugin/)", file=sys.stderr)
        return 1
    name = marketplace_name(root)
    commands = [
        ["claude", "plugin", "marketplace", "add", str(root)],
        ["claude", "plugin", "install", f"{PLUGIN_NAME}@{name}"]]
    claude = getattr(args, "claude", None) or shutil.which("claude", path=env.get("PATH"))
    if getattr(args, "print_only", False) or not claude:
        if not claude:
            print("no claude command on PATH; register the plugin with:")
        for argv in commands:
            print("  " + shlex.join(argv))
        return 0
    for argv in commands:
        done = run([claude, *argv[1:]])
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            print(f"loop-killer install: {shlex.join(argv)} failed ({done.returncode}):\n"
                  f"{output}", file=sys.stderr)
            return 1
        last = output.splitlines()[-1].rsplit("\r", 1)[-1] if output else "done"
        for line in wrap(f"{shlex.join(argv)}: {_ANSI.sub('', last)}", terminal_width(sys.stdout)):
            print(line)
    print("the plugin is installed; it takes effect in sessions started from now on")
    return 0


def add_arguments_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--claude", metavar="PATH", default=None,
                        help="the claude executable to check (default: the one on PATH)")


@dataclass(frozen=True, slots=True)
class Check:
    """One line of ``loop-killer doctor``."""

    level: Literal["ok", "warn", "fail"]
    what: str
    detail: str


def multiplexer(env: Mapping[str, str]) -> str | None:
    """The terminal multiplexer this shell runs in (the hook types into it)."""
    if env.get("TMUX_PANE") or env.get("TMUX"):
        return "tmux"
    if env.get("STY"):
        return "screen"
    return None


def doctor(args: argparse.Namespace, *, run: Runner | None = None,
           env: Mapping[str, str] | None = None) -> int:
    """Print one line per check; 0 when nothing failed, 1 otherwise."""
    env = os.environ if env is None else env
    run = run or command_runner(env, timeout=_CLI_TIMEOUT)
    checks = run_checks(claude=getattr(args, "claude", None), run=run, env=env)
    from ..printable import output_width, printable, wrap

    width = output_width(sys.stdout)
    for check in checks:
        # Details quote paths and files others may write: no control codes reach the terminal.
        line = f"{check.level.upper():<5} {check.what}: {printable(check.detail)}"
        for piece in wrap(line, width, indent=len("FAIL  ")):
            print(piece)
    return 1 if any(check.level == "fail" for check in checks) else 0


def run_checks(*, claude: str | None, run: Runner, env: Mapping[str, str]) -> list[Check]:
    checks = [_check_hook_python(run, env)]
    claude = claude or shutil.which("claude", path=env.get("PATH"))
    if claude is None:
        checks.append(Check("warn", "claude", "no claude command on PATH: cannot check the "
                                             "plugin or the Claude Code version"))
    else:
        checks.append(_check_plugin(claude, run))
        checks.append(_check_version(claude, run))
    checks.append(_check_watcher(env))
    checks.append(_check_state(env))
    checks.append(_check_settings(env))
    found = multiplexer(env)
    checks.append(Check(
        "ok", "terminal",
        f"inside {found}: where the mod cannot act, the hook types /goal clear into its pane"
        if found else "not inside tmux or screen: where the mod cannot act, a stopped loop "
                      "leaves the goal paused and the notice says to type /goal clear"))
    return checks


def _check_hook_python(run: Runner, env: Mapping[str, str]) -> Check:
    probe = "import orjson, loop_killer.hooks.entry, sys; print(sys.executable)"
    python3 = shutil.which("python3", path=env.get("PATH"))
    results = []
    if python3:
        done = run([python3, "-c", probe])
        if done.returncode == 0:
            return Check("ok", "hook python", f"python3 on PATH ({done.stdout.strip()}) "
                                              "imports loop_killer and orjson")
        results.append(f"python3 on PATH ({python3}) lacks loop_killer/orjson")
    else:
        results.append("no python3 on PATH (the plugin's hook runs python3)")
    recorded = _recorded(env)
    if recorded and os.access(recorded, os.X_OK):
        done = run([recorded, "-c", probe])
        if done.returncode == 0:
            # Said as what will be used, so an OK line does not read as a failure.
            return Check("ok", "hook python", "; ".join(results) + f"; the hook uses "
                                              f"{recorded} (recorded by loop-killer install)")
        results.append(f"the recorded {recorded} lacks them too")
    else:
        results.append("no interpreter recorded (run loop-killer install)")
    return Check("fail", "hook python", "; ".join(results))


def _recorded(env: Mapping[str, str]) -> str | None:
    for folder in (state_dir(env), config_dir(env) / "loop-killer"):
        try:
            text = (folder / INTERPRETER_FILE).read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return text.splitlines()[0]
    return None


def _check_plugin(claude: str, run: Runner) -> Check:
    try:
        done = run([claude, "plugin", "list", "--json"])
    except (OSError, subprocess.SubprocessError) as error:
        return Check("fail", "plugin", f"claude plugin list failed: {error}")
    try:
        plugins = json.loads(done.stdout)
    except ValueError:
        plugins = None
    if not isinstance(plugins, list):
        return Check("warn", "plugin", "could not read claude plugin list --json")
    for plugin in plugins:
        if isinstance(plugin, dict) and str(plugin.get("id", "")).split("@")[0] == PLUGIN_NAME:
            if plugin.get("enabled") is False:
                return Check("fail", "plugin", f"{plugin.get('id')} is installed but disabled "
                                               f"(claude plugin enable {plugin.get('id')})")
            where = plugin.get("readFromFolder") or plugin.get("installPath") or "?"
            return Check("ok", "plugin", f"{plugin.get('id')} {plugin.get('version', '')} "
                                         f"enabled, from {where}")
    return Check("fail", "plugin", "not installed (run loop-killer install)")


def _check_version(claude: str, run: Runner) -> Check:
    try:
        done = run([claude, "--version"])
    except (OSError, subprocess.SubprocessError) as error:
        return Check("warn", "claude version", f"claude --version failed: {error}")
    version = parse_version(done.stdout)
    if version is None:
        return Check("warn", "claude version", f"unreadable: {done.stdout.strip()[:80]!r}")
    shown = ".".join(map(str, version))
    minimum = ".".join(map(str, MOD_MIN_VERSION))
    if version >= MOD_MIN_VERSION:
        return Check("ok", "claude version", f"{shown}: loads the plugin's mod, which runs "
                                             "/goal clear after a stopped loop")
    return Check("warn", "claude version", f"{shown} is older than {minimum}: no mod; the Stop "
                                           "hook still stops loops, and clears the goal only "
                                           "inside tmux or screen")


def _check_watcher(env: Mapping[str, str]) -> Check:
    from ..state.status import watcher_alive

    beat = watcher_alive(state_dir(env))
    if beat is None:
        from ..state.config import load_settings

        # Only the watcher reads what each reply cost (the Stop hook counts re-prompts, time).
        spend = ("; the budget's spend limit ([budget] usd) needs it too"
                 if load_settings(state_dir(env), env).budget.usd > 0 else "")
        return Check("warn", "watcher", "not running: the Stop hook detects on its own "
                                        f"(start loop-killer-watch for the log and status{spend})")
    return Check("ok", "watcher", f"alive (pid {beat.pid}, {beat.sessions} sessions)")


def _check_state(env: Mapping[str, str]) -> Check:
    state = state_dir(env)
    linked = linked_state_folders(state)
    if linked and linked[0] == state:  # nothing is made or written through it
        return Check("fail", "state folder", f"{state} is a link (or not a folder): "
                     "loop-killer leaves it alone and keeps no state; make it a real folder")
    try:
        ensure_private_dir(state)  # refuses a link, as every state write does
        with tempfile.NamedTemporaryFile(dir=state, prefix=".doctor-"):
            pass
    except OSError as error:
        return Check("fail", "state folder", f"{state} is not writable: {error}")
    if linked:
        names = ", ".join(f"{path.name}/" for path in linked)
        return Check("fail", "state folder", f"{state} is writable, but {names} "
                     f"{'is a link' if len(linked) == 1 else 'are links'} (or not folders): "
                     "loop-killer leaves them alone, and what they are for does not work; "
                     "remove them")
    return Check("ok", "state folder", f"{state} is writable")


def _check_settings(env: Mapping[str, str]) -> Check:
    from ..printable import printable
    from ..state.config import config_path, load_settings

    state = state_dir(env)
    settings = load_settings(state, env)
    if settings.problems:
        # Each problem quotes the file (names, values): one line, no control codes.
        said = "; ".join(printable(problem, 300) for problem in settings.problems)
        return Check("warn", "settings", f"{said} (the defaults hold for what is wrong; see "
                     "loop-killer config)")
    where = config_path(state)
    return Check("ok", "settings", f"{where} is read" if where.exists() else
                 f"the documented defaults (no {where}); see loop-killer config")

