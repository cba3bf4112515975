"""The Stop hook's decisions, over plain values: no files, no clock, no sleeping.

The order of a hook run (``stop_hook`` carries it out):

1. ``parse_input``: only a main-session ``Stop`` with a usable session id is acted on.
2. A fresh clear request for the session (from the watcher or ``loop-killer clear``) is
   taken, exactly once, and acted on, unless a Stop hook already stopped the turn for
   the answer it names (``state.records``).
3. A reply that answers a person's prompt (``stop_hook_active`` false) can never fire: the
   hook is done, without reading the transcript.
4. Otherwise the hook judges the transcript's tail plus ``last_assistant_message`` itself
   (``judge``) with the engine's one judge. When that fires, it records the detection
   (whoever records it first, the watcher or the hook, logs it: nobody waits) and stops
   the turn.
5. ``choose_hands`` / ``outcome_without_typing``: who runs ``/goal clear``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..state.paths import is_plain_id
from .notice import MOD_PROTOCOL, OUTCOME_NO_GOAL, OUTCOME_NOT_POSSIBLE, Outcome

__all__ = [
    "HANDS_MOD",
    "MOD_MIN_VERSION",
    "HANDS_NONE",
    "HANDS_SCREEN",
    "HANDS_TMUX",
    "Hands",
    "HookInput",
    "choose_hands",
    "outcome_without_typing",
    "parse_input",
    "parse_version",
]

Hands = Literal["mod", "tmux", "screen", "none"]
"""Who runs ``/goal clear``: the plugin's mod, typing into a tmux or screen pane, nobody."""

HANDS_MOD: Final = "mod"
HANDS_TMUX: Final = "tmux"
HANDS_SCREEN: Final = "screen"
HANDS_NONE: Final = "none"


@dataclass(frozen=True, slots=True)
class HookInput:
    """The fields of the Stop hook's stdin that the hook uses."""

    session_id: str
    transcript_path: str
    stop_hook_active: bool  # this reply answers a Stop hook's re-prompt
    last_assistant_message: str | None  # this reply's text
    mod_version: int | None  # ``loop_killer_mod.version``, set by the mod
    prompt_id: str = ""  # the same for every Stop of one turn (2.1.250, 2.1.328)
    cwd: str = ""  # the session's folder (the tool-call hooks key calls with it)

    @property
    def mod_active(self) -> bool:
        """The mod is loaded for this very Stop and speaks our protocol: it will act."""
        return self.mod_version == MOD_PROTOCOL


def parse_input(raw: Any) -> HookInput | None:
    """The hook input if it is a main-session Stop we can act on, else None (ignore it)."""
    if not isinstance(raw, dict) or raw.get("hook_event_name") != "Stop":
        return None
    if raw.get("agent_id") or raw.get("agent_type"):
        return None  # a subagent's stop, whatever the event is called in this version
    session_id = raw.get("session_id")
    transcript = raw.get("transcript_path")
    if not is_plain_id(session_id) or not isinstance(session_id, str) or not isinstance(
            transcript, str):
        return None
    message = raw.get("last_assistant_message")
    mod = raw.get("loop_killer_mod")
    version = mod.get("version") if isinstance(mod, dict) else None
    return HookInput(
        session_id=session_id,
        transcript_path=transcript,
        stop_hook_active=raw.get("stop_hook_active") is True,
        last_assistant_message=message if isinstance(message, str) else None,
        mod_version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        prompt_id=_text(raw.get("prompt_id"))[:200],
        cwd=_text(raw.get("cwd")),
    )


MOD_MIN_VERSION = (2, 1, 287)
"""The first Claude Code that loads the plugin's mod (the hands that run /goal clear)."""


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``(2, 1, 328)`` from ``2.1.328 (Claude Code)``."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def choose_hands(*, mod_active: bool, env: Mapping[str, str]) -> Hands:
    """Who can run ``/goal clear`` for this session: the mod, a typing hand, or nobody."""
    if mod_active:
        return HANDS_MOD
    if env.get("TMUX_PANE"):
        return HANDS_TMUX
    if env.get("STY") and env.get("WINDOW"):
        return HANDS_SCREEN
    return HANDS_NONE


def outcome_without_typing(*, goal_set: bool, hands: Hands) -> tuple[Outcome, str]:
    """The outcome (and why) when nothing is typed: no goal, or no hands for it."""
    if not goal_set:
        return OUTCOME_NO_GOAL, ""
    if hands == HANDS_NONE:
        return OUTCOME_NOT_POSSIBLE, (
            "no loop-killer mod in this Claude Code, and not in tmux or screen"
        )
    return OUTCOME_NOT_POSSIBLE, ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
