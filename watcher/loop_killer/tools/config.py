"""What the person can change about the tool-repeat rule, from the environment.

* ``LOOP_KILLER_IGNORE_TOOLS``: the tools never counted, comma-separated; names or
  ``fnmatch`` patterns (``mcp__ci__*``). The word ``default`` stands for the built-in
  list (``DEFAULT_IGNORED``), so ``default,mcp__ci__*`` adds to it; an empty value counts
  every tool. Unset: the built-in list.
* ``LOOP_KILLER_TOOL_REPEAT=off`` (or ``0``, ``false``, ``no``): the rule is off; the
  tool-call hooks do nothing.

Claude Code passes its environment to hooks, so either goes in the shell that starts
``claude`` or in the ``env`` block of its ``settings.json``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.tool_repeat import DEFAULT_IGNORED

__all__ = ["IGNORE_VARIABLE", "SWITCH_VARIABLE", "enabled", "ignored_tools"]

IGNORE_VARIABLE = "LOOP_KILLER_IGNORE_TOOLS"
SWITCH_VARIABLE = "LOOP_KILLER_TOOL_REPEAT"
_OFF = frozenset({"0", "off", "false", "no"})


def enabled(env: Mapping[str, str]) -> bool:
    """Whether the tool-repeat rule is on (it is unless switched off)."""
    return env.get(SWITCH_VARIABLE, "").strip().lower() not in _OFF


def ignored_tools(env: Mapping[str, str]) -> frozenset[str]:
    """The tools (names or patterns) not counted, as configured."""
    configured = env.get(IGNORE_VARIABLE)
    if configured is None:
        return DEFAULT_IGNORED
    names: set[str] = set()
    for item in configured.split(","):
        item = item.strip()
        if item == "default":
            names |= DEFAULT_IGNORED
        elif item:
            names.add(item)
    return frozenset(names)
