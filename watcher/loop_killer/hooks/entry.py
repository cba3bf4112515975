"""The entry of every hook process: read stdin once, run the hook for its event, print one
JSON object, exit 0. Stderr goes to ``hook-errors.log``; at worst nothing is blocked."""

from __future__ import annotations

import os
import sys
import time

from ..light import dumps
from . import MAX_INPUT_BYTES, parse_json, plans_waiting, subagent_id

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a normal turn does not import typing
if TYPE_CHECKING:
    from typing import Any

    from ..state.config import Settings

__all__ = ["TOOL_EVENTS", "cli_main", "main"]

CRASH_NOTE_EVERY = 600.0  # seconds between two notes to the person about the hook failing

TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"})

LOG_LIMIT = 1024 * 1024  # hook-errors.log is rotated (to .1) past this


def main(raw: bytes | None = None) -> int:
    """Read stdin (unless given), run the hook for its event, print the output; always 0."""
    if raw is None:
        try:
            raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        except (OSError, ValueError, AttributeError):
            raw = b""
    env = dict(os.environ)
    from ..state.files import state_dir_text

    # Nothing reaches stderr (warnings, log records): it goes to the hook's own log.
    sys.stderr = _StderrToLog(os.path.join(state_dir_text(env), "hook-errors.log"))
    try:
        output = dispatch(raw, env=env)
    except BaseException as error:  # noqa: BLE001 - a hook must never fail the turn
        output = _crash_note(error, env)
    if output:
        try:
            # ASCII only: an odd stdout encoding must never swallow a stop.
            sys.stdout.write(dumps(output, ensure_ascii=True) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    return 0


def cli_main(args: Any = None) -> int:
    """``loop-killer hook``: the same as ``python -m loop_killer.hooks``."""
    return main()


def dispatch(raw: bytes, *, env: dict[str, str]) -> dict[str, Any] | None:
    """The output for one hook input, by its event (and settings problems, once)."""
    data = parse_json(raw)
    event = data.get("hook_event_name") if isinstance(data, dict) else None
    if event != "Stop" and event not in TOOL_EVENTS:
        return None
    from ..state.config import load_settings
    from ..state.files import state_dir_text

    state = state_dir_text(env)
    settings = load_settings(state, env)
    output: dict[str, Any] | None
    if event == "Stop" and _turn_ends_quietly(data, state, settings):
        output = None
    elif event == "Stop":
        from .stop_hook import run_input

        output = run_input(data, env=env, spawn_time=process_start_time(), settings=settings)
    else:
        from .tool_hook import run_input as run_tool_hook

        output = run_tool_hook(data, env=env, settings=settings)
    if settings.problems:
        output = _with_config_note(output, state, settings.problems)
    return output


def _turn_ends_quietly(data: dict[str, Any], state: str, settings: Settings) -> bool:
    """The Stop of a reply to the person's prompt with nothing to take or sweep (the usual
    turn end): the turn's re-prompt answers start after it; the Stop hook is not loaded."""
    from ..state.files import is_plain_id, request_waiting

    session_id = data.get("session_id")
    if (data.get("stop_hook_active") is True or subagent_id(data) is not None
            or not isinstance(session_id, str) or not is_plain_id(session_id)
            or request_waiting(state, session_id) or plans_waiting(state)):
        return False
    if not settings.hook_off(data):
        from ..state.session import turn_over

        prompt_id = data.get("prompt_id")
        try:  # noqa: SIM105 - (no contextlib on the hooks' path)
            turn_over(state, session_id, prompt_id[:200] if isinstance(prompt_id, str) else "")
        except (OSError, ValueError):
            pass  # fail open: the next Stop judges from what the record holds
    return True


def _with_config_note(output: dict[str, Any] | None, state: str, problems: tuple[str, ...]
                      ) -> dict[str, Any] | None:
    """``output`` with the settings' problems added, the first time these are met."""
    from ..light import hex_digest
    from ..state.files import first_time

    key = "config-" + hex_digest("\n".join(problems), 16)
    if not first_time(state, key):
        return output
    from ..printable import printable  # (imports re: only when the note is shown)

    note = printable(f"loop-killer: settings: {'; '.join(problems)}", 600)
    merged = dict(output or {})
    shown = merged.get("systemMessage")
    merged["systemMessage"] = f"{shown} {note}" if isinstance(shown, str) and shown else note
    return merged


def process_start_time() -> float | None:
    """When this process started (epoch seconds), from ``/proc``; None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        started_after_boot = int(fields[19]) / ticks
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - started_after_boot)


class _StderrToLog:
    """Stands in for stderr: appends to the hook's log, made only if something is written."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.ready = False

    def write(self, text: str) -> int:
        try:
            if not self.ready:
                self.ready = True
                _prepare_log(self.path)
            from ..state.files import append_line

            append_line(self.path, text.encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001, S110 - stderr must never fail the hook
            pass
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _prepare_log(path: str) -> None:
    """Create the log's folder; rotate the log when it has grown past ``LOG_LIMIT``."""
    from ..state.files import ensure_private_dir

    ensure_private_dir(os.path.dirname(path))
    try:
        if os.lstat(path).st_size > LOG_LIMIT:
            os.replace(path, path + ".1")
    except OSError:
        pass


def _crash_note(error: BaseException, env: dict[str, str]) -> dict[str, Any] | None:
    """Log an unexpected failure; tell the person at most every ``CRASH_NOTE_EVERY`` s."""
    import traceback

    from ..printable import printable

    summary = f"{type(error).__name__}: {error}"[:300]
    try:
        from ..state.files import append_line, state_dir_text, write_private_file

        state = state_dir_text(env)
        log_path = os.path.join(state, "hook-errors.log")
        _prepare_log(log_path)
        append_line(log_path, (time.strftime("%Y-%m-%dT%H:%M:%S ") + "".join(
            traceback.format_exception(type(error), error, error.__traceback__))).encode(
                "utf-8", "replace"))
        marker = os.path.join(state, "notes", "hook-crash")
        try:
            if time.time() - os.lstat(marker).st_mtime < CRASH_NOTE_EVERY:
                return None
        except FileNotFoundError:
            pass
        write_private_file(marker, (summary + "\n").encode("utf-8", "replace"))
        where = log_path
    except Exception:  # noqa: BLE001
        where = "the hook error log"
    return {"systemMessage": f"loop-killer: its hook failed ({printable(summary, 300)}); "
                             f"nothing was blocked. Details: {where}"}
