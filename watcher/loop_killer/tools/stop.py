"""The tool-repeat ladder's last step: a refused call retried ``tool_repeat_stop`` times in
one turn ends the turn, and a goal set in the session is cleared as a re-prompt loop's is.

The words, the log's ``outcome`` line and the hands (the mod's plan) are the Stop hook's
own (``hook.stop_hook.fire``): one way of stopping a turn and saying so. Only the mod clears a
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

__all__ = ["mod_loads", "stop_turn"]

_VERSION_KEY = b'"version":"'
_TAIL = 64 * 1024


def stop_turn(data: dict[str, Any], *, state: str, label: str, refused: int,
              output: dict[str, Any], env: dict[str, str], detail: str = ""
              ) -> dict[str, Any]:
    """The PreToolUse output that refuses this attempt (``output``) and ends the turn
    (``env``: the hook's environment; ``detail``: what more the notice says)."""
    from ..engine.rules import RULE_REFUSED_RETRIES
    from ..hook import notice
    from ..hook.stop_hook import Fired, HookInput, fire

    transcript = data.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) else ""
    hook_input = HookInput(
        session_id=str(data.get("session_id")), transcript_path=transcript,
        stop_hook_active=False, last_assistant_message=label,
        mod_version=notice.MOD_PROTOCOL if mod_loads(transcript) else None)
    firing = notice.Firing(RULE_REFUSED_RETRIES, refused, 0, "hook", detail)
    # No typing hands: only the environment's multiplexer variables are left out.
    hands_off = {key: value for key, value in env.items()
                 if key not in ("TMUX_PANE", "STY", "WINDOW")}
    stopped = fire(Fired(firing, _text(data.get("tool_use_id")), "", False),
                   hook_input=hook_input, state=Path(state), env=hands_off)
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
    from ..hook.notice import MOD_MIN_VERSION, parse_version
    from ..state.files import open_transcript

    try:
        fd = open_transcript(transcript)  # (no FIFO, no device: never blocks)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - _TAIL)
        data = os.pread(fd, size - start, start)
    except OSError:
        return False
    finally:
        os.close(fd)
    found = data.rfind(_VERSION_KEY)
    if found < 0:
        return False
    end = data.find(b'"', found + len(_VERSION_KEY))
    version = parse_version(data[found + len(_VERSION_KEY):end].decode("utf-8", "replace"))
    return version is not None and version >= MOD_MIN_VERSION


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
