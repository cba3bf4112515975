"""The Stop hook's decisions, over plain values: no files, no clock, no sleeping.

The order of a hook run (``stop_hook`` carries it out):

1. ``parse_input``: only a main-session ``Stop`` with a usable session id is acted on.
2. A fresh clear request for the session (from the watcher or ``loop-killer clear``) is
   taken, exactly once, and acted on.
3. A reply that answers a person's prompt (``stop_hook_active`` false) can never fire: the
   hook is done, without reading the transcript or waiting.
4. ``needs_local_check``: when a live watcher has published a status that covers the whole
   transcript and one more answer cannot reach a threshold, the hook is done too. Otherwise
   it judges the transcript's tail plus ``last_assistant_message`` itself (``local_detect``).
5. When that fires and a live watcher follows this session, the hook waits (at most
   ``WAIT_FOR_WATCHER``, ending early once ``watcher_has_seen`` this reply) for the
   watcher's own request, so that one detection is logged, not two; then fires either way.
   A turn that does not fire never waits.
6. ``choose_hands`` / ``outcome_without_typing``: who runs ``/goal clear``.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a normal turn does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "HANDS_MOD",
    "HANDS_NONE",
    "HANDS_SCREEN",
    "HANDS_TMUX",
    "MOD_PROTOCOL",
    "POLL_INTERVAL",
    "WAIT_FOR_WATCHER",
    "HookInput",
    "choose_hands",
    "is_plain_id",
    "needs_local_check",
    "outcome_without_typing",
    "parse_input",
    "watcher_has_seen",
]

WAIT_FOR_WATCHER = 0.5
"""Longest wait (seconds) for a live watcher's request once the hook knows this reply fires."""

POLL_INTERVAL = 0.015
"""Seconds between two looks while waiting."""

MOD_PROTOCOL = 1
"""The ``loop_killer_mod.version`` this hook speaks (``notice.MOD_PROTOCOL`` is the same)."""

# The same pattern as ``state.paths.is_plain_id`` (a test keeps them equal): repeated here so
# that a normal turn does not import pathlib.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

HANDS_MOD = "mod"
HANDS_TMUX = "tmux"
HANDS_SCREEN = "screen"
HANDS_NONE = "none"


class HookInput:
    """The fields of the Stop hook's stdin that the hook uses (read-only).

    A plain slotted class rather than a dataclass: importing ``dataclasses`` costs a
    normal turn several milliseconds.
    """

    __slots__ = (
        "last_assistant_message",
        "mod_version",
        "prompt_id",
        "session_id",
        "stop_hook_active",
        "transcript_path",
    )

    def __init__(
        self, *, session_id: str, transcript_path: str, stop_hook_active: bool,
        last_assistant_message: str | None, mod_version: int | None, prompt_id: str = "",
    ) -> None:
        self.session_id = session_id
        self.transcript_path = transcript_path
        self.stop_hook_active = stop_hook_active  # this reply answers a Stop hook's re-prompt
        self.last_assistant_message = last_assistant_message  # this reply's text
        self.mod_version = mod_version  # ``loop_killer_mod.version``, set by the mod
        self.prompt_id = prompt_id  # the same for every Stop of one turn (2.1.250, 2.1.328)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"HookInput({fields})"

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
    if not is_plain_id(session_id) or not isinstance(transcript, str):
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
    )


def is_plain_id(value: object) -> bool:
    """A session id that is safe as a file name (as ``state.paths.is_plain_id``)."""
    return isinstance(value, str) and _PLAIN_ID.fullmatch(value) is not None and ".." not in value


def needs_local_check(
    *, watcher_alive: bool, status_offset: int | None, run_length: int, chain_length: int,
    transcript_size: int | None,
) -> bool:
    """Whether the hook must judge the transcript itself for this reply.

    Not needed only when a live watcher's status covers every byte of the transcript (so
    whatever of this reply is written, the watcher has counted, and a firing would already
    be a request) and one more answer could not reach a threshold anyway.
    """
    if not watcher_alive or status_offset is None or transcript_size is None:
        return True
    if status_offset < transcript_size:
        return True
    from ..engine.rules import could_fire

    return could_fire(run_length, chain_length)


def watcher_has_seen(*, status_offset: int | None, reply_end: int | None) -> bool:
    """Whether the watcher has read past this reply (so its request, if any, is written).

    ``reply_end`` is the offset just past this reply's last line, None when the reply is
    not in the transcript yet. The watcher writes a request before publishing the status
    that covers the answer it fired on.
    """
    return status_offset is not None and reply_end is not None and status_offset >= reply_end


def choose_hands(*, mod_active: bool, env: Mapping[str, str]) -> str:
    """Who can run ``/goal clear`` for this session: the mod, a typing hand, or nobody."""
    if mod_active:
        return HANDS_MOD
    if env.get("TMUX_PANE"):
        return HANDS_TMUX
    if env.get("STY") and env.get("WINDOW"):
        return HANDS_SCREEN
    return HANDS_NONE


def outcome_without_typing(*, goal_set: bool, hands: str) -> tuple[str, str]:
    """The outcome (and why) when nothing is typed: no goal, or no hands for it."""
    from .notice import OUTCOME_NO_GOAL, OUTCOME_NOT_POSSIBLE

    if not goal_set:
        return OUTCOME_NO_GOAL, ""
    if hands == HANDS_NONE:
        return OUTCOME_NOT_POSSIBLE, (
            "no loop-killer mod in this Claude Code, and not in tmux or screen"
        )
    return OUTCOME_NOT_POSSIBLE, ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
