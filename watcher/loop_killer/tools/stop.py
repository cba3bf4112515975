"""The tool-repeat ladder's last step: a refused call retried ``tool_repeat_stop`` times in
one turn ends the turn, and a goal set in the session is cleared as a re-prompt loop's is.

The words, the log's ``outcome`` line and the hands (the mod's plan) are the Stop hook's
own (``hook.act.fire``): one way of stopping a turn and saying so. Only the mod clears a
goal from here: typing ``/goal clear`` into the pane is verified from a Stop hook only, so
without the mod the notice says the goal is only paused.

Measured on Claude Code 2.1.332: a PreToolUse answer with ``continue: false`` ends the turn
at once (no further request, no Stop hooks, the /goal evaluator does not run) and records
a ``hook_stopped_continuation`` attachment with its ``stopReason``; the mod's
``classic.PreToolUse`` gets the hook's ``additionalContext`` back (the plan), and its
``turn.complete`` runs after the stop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["MOD_MIN_VERSION", "mod_loads", "stop_turn"]

MOD_MIN_VERSION = (2, 1, 287)
"""The first Claude Code that loads the plugin's mod."""

_VERSION_KEY = b'"version":"'
_TAIL = 64 * 1024


def stop_turn(data: dict[str, Any], *, state: str, label: str, refused: int,
              output: dict[str, Any]) -> dict[str, Any]:
    """The PreToolUse output that refuses this attempt (``output``) and ends the turn."""
    from ..engine.rules import RULE_REFUSED_RETRIES
    from ..hook import notice
    from ..hook.act import Fired, fire
    from ..hook.decide import HookInput

    transcript = data.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) else ""
    hook_input = HookInput(
        session_id=str(data.get("session_id")), transcript_path=transcript,
        stop_hook_active=False, last_assistant_message=label,
        mod_version=notice.MOD_PROTOCOL if mod_loads(transcript) else None)
    firing = notice.Firing(RULE_REFUSED_RETRIES, refused, 0, "hook")
    # No typing hands: only the environment's multiplexer variables are left out.
    env = {key: value for key, value in os.environ.items()
           if key not in ("TMUX_PANE", "STY", "WINDOW")}
    stopped = fire(Fired(firing, _text(data.get("tool_use_id")), "", None, False),
                   hook_input=hook_input, state=Path(state), env=env)
    specific = dict(output.get("hookSpecificOutput") or {})
    plan = stopped.pop("hookSpecificOutput", None)
    if isinstance(plan, dict) and plan.get("additionalContext"):
        specific["additionalContext"] = plan["additionalContext"]  # for the mod alone
    specific["permissionDecisionReason"] = (
        f"{specific.get('permissionDecisionReason', '')} The turn is ended.").strip()
    stopped.pop("terminalSequence", None)
    return {**stopped, "hookSpecificOutput": specific}


def mod_loads(transcript: str) -> bool:
    """Whether the session's Claude Code loads the mod, by the version its transcript's
    last lines name (a PreToolUse input, unlike a Stop's, carries no word from the mod)."""
    try:
        fd = os.open(transcript, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        import stat

        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        start = max(0, info.st_size - _TAIL)
        data = os.pread(fd, info.st_size - start, start)
    except OSError:
        return False
    finally:
        os.close(fd)
    found = data.rfind(_VERSION_KEY)
    if found < 0:
        return False
    end = data.find(b'"', found + len(_VERSION_KEY))
    return _version(data[found + len(_VERSION_KEY):end]) >= MOD_MIN_VERSION


def _version(text: bytes) -> tuple[int, ...]:
    parts: list[int] = []
    for part in text.split(b".")[:3]:
        digits = part.split(b"-")[0]
        if not digits.isdigit():
            return ()
        parts.append(int(digits))
    return tuple(parts)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
