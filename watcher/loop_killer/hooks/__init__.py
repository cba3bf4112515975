"""The hooks: every hook event Claude Code sends the plugin (``entry`` dispatches them)."""

import os

from ..light import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a normal turn does not import typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_INPUT_BYTES", "parse_json", "plans_waiting", "subagent_id", "text_of"]

MAX_INPUT_BYTES = 32 * 1024 * 1024  # hook input larger is ignored


def parse_json(raw: bytes) -> "Any":
    """The hook input as JSON; None when it is too large, broken or nested too deeply."""
    if len(raw) > MAX_INPUT_BYTES or not raw.strip():
        return None
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def subagent_id(data: "Any") -> "str | None":
    """The subagent whose hook input this is (``agent_id``); None for the main session."""
    # ``claude --agent NAME`` gives the main session ``agent_type`` alone (2.1.332).
    agent = data.get("agent_id") if isinstance(data, dict) else None
    return agent if isinstance(agent, str) and agent else None


def text_of(value: object) -> str:
    """``value`` if it is a string, else ""."""
    return value if isinstance(value, str) else ""


def plans_waiting(state: "str | os.PathLike[str]") -> bool:
    """Whether the mod's records of earlier stops wait to be logged (the launcher: a copy)."""
    try:
        with os.scandir(os.path.join(state, "outcomes")) as entries:
            return any(entry.name.endswith(".plan") for entry in entries)
    except OSError:
        return False
