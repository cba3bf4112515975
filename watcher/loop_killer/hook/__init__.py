"""The hooks' entry, and the Stop hook: the plugin's Python brain, and the typing hands.

Claude Code runs the plugin's launcher (``plugin/hooks/launch.py``) for every hook event;
what it cannot settle from stdin runs ``python -m loop_killer.hook`` (``entry``: stdin
once, dispatch by event, the crash note). At the end of a main-session turn the Stop hook
takes a clear request for its session when the watcher (or ``loop-killer clear``) left
one, or judges on its own whether this reply crossed a threshold, and if so ends the turn
(``continue: false``) and gets ``/goal clear`` run: by the plugin's mod where it is
loaded, else by typing into its own tmux or screen pane.

One module per concern: ``entry`` (the process), ``stop_hook`` (the Stop hook: its
input, its steps, stopping the turn), ``reply`` (which reply this is and whether it
fires: the transcript's tail, the anchor kept between two Stops, the engine's judge over
them), ``notice`` (every word the person sees, and who the hands are), ``terminal``
(typing into tmux or screen), ``screen`` (reading their screens: pure), ``mod_outcomes``
(what the mod's ``/goal clear`` did), ``setup`` (``loop-killer install`` / ``doctor``).
Nothing else is imported here: the hook imports only what a turn needs. The hook input
is parsed here, once, for ``entry`` and ``stop_hook`` alike, and whose it is (the main
session's or a subagent's: ``subagent_id``) is told here for every hook.
"""

from ..light import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a normal turn does not import typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_INPUT_BYTES", "parse_json", "subagent_id"]

MAX_INPUT_BYTES = 32 * 1024 * 1024
"""Hook input larger than this is ignored (``last_assistant_message`` is the big part)."""


def parse_json(raw: bytes) -> "Any":
    """The hook input as JSON; None when it is too large, broken or nested too deeply."""
    if len(raw) > MAX_INPUT_BYTES or not raw.strip():
        return None
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def subagent_id(data: "Any") -> "str | None":
    """The subagent whose hook input this is (its ``agent_id``); None for the main session.

    ``agent_type`` alone is no subagent: ``claude --agent NAME`` (or ``"agent"`` in the
    settings) gives the main session's hook input ``agent_type: NAME`` and no ``agent_id``
    (measured on 2.1.332); a subagent's input carries both."""
    agent = data.get("agent_id") if isinstance(data, dict) else None
    return agent if isinstance(agent, str) and agent else None
