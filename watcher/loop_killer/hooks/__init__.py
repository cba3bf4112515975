"""The hooks: every hook event Claude Code sends the plugin, and what they share.

Claude Code runs the plugin's launcher (``plugin/hooks/launch.py``) for every hook event;
what it cannot settle from stdin runs ``python -m loop_killer.hooks`` (``entry``: stdin
once, dispatch by event, the crash note). The Stop hook (``stop_hook``) ends a turn that
crossed a threshold or has a clear request, and gets ``/goal clear`` run; the tool-call
hooks (``tool_hook``) count each result, warn, refuse and reset. Nothing else is imported
here: a hook imports only what its event needs. The hook input is parsed here, once, and
whose it is (the main session's or a subagent's: ``subagent_id``) is told here.
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
