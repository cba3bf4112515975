"""Which re-prompt the last judged reply answered: the hook's memory between two Stops.

When the Stop hook for reply N reads the transcript, the file may end before reply N
(case A), after reply N (case C), or after reply N AND the re-prompt that the /goal
evaluator wrote for it while our hook ran (case B). The tail alone cannot always tell A
from B. The anchor makes it deterministic: every hook run for a reply that answers a
re-prompt leaves, per session, ``<state>/hook/<session>.json`` saying which re-prompt that
reply answered. Reply N+1 then answers the first re-prompt after it (``locate``).

An anchor names a line (``base``: a re-prompt's or a turn start's uuid, with its offset in
the transcript) and ``skip``: the reply answered the ``skip``-th re-prompt after ``base``
(0: ``base`` itself is that re-prompt). A hook run that does not read the transcript (a
live watcher covers it, or the run failed) only counts one more (``advance``), so the
chain never skips a reply. ``base`` "" means the last turn start written before
``turn_before`` (bytes): the anchor of a turn whose start no hook has read yet.

Claude Code starts the next Stop's hooks only after every hook of this Stop has ended, so
an anchor saved AFTER this hook process started was saved for this very reply, by a twin
(the plugin loaded twice): it is not counted again; the anchor before it (``prev``) is the
one this reply's place is judged from. "After" is told on the boot clock (``boot_clock``),
which nobody sets: the wall clock set back between two Stops would make the next reply's
hook look older than the last anchor, a twin of the reply before.

Small, private, written atomically, read without following links (nor a linked ``hook/``
or state folder: ``state.paths.state_folder``); a missing or broken file is simply no
anchor.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ANCHOR_DIR",
    "TWIN_MARGIN",
    "Anchor",
    "Saved",
    "advance_anchor",
    "anchor_path",
    "previous_anchor",
    "read_anchor",
    "save_anchor",
]

ANCHOR_DIR = "hook"
ANCHOR_VERSION = 1
_MAX_BYTES = 4096

TWIN_MARGIN = 0.015
"""An anchor saved later than this many seconds before this hook process started is a
twin's, for this same reply. (The previous Stop's hooks ended an API round trip before
this one started; the process start time read from ``/proc`` is good to about 20 ms.)"""


def boot_clock() -> float:
    """Seconds on a clock every process shares and nobody sets (Linux: since boot,
    suspend included, the clock of ``/proc/uptime``)."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


class Anchor:
    """The re-prompt a reply answered: the ``skip``-th re-prompt after the line ``base``.

    A plain slotted class (the hook avoids importing ``dataclasses`` where it can).
    """

    __slots__ = ("base", "offset", "prompt_id", "skip", "turn_before")

    def __init__(self, base: str, skip: int = 0, *, offset: int = -1, turn_before: int = -1,
                 prompt_id: str = "") -> None:
        self.base = base  # uuid of a re-prompt or turn start; "" = the turn's start
        self.skip = skip
        self.offset = offset  # where ``base``'s line starts in the transcript; -1 unknown
        self.turn_before = turn_before  # for base "": the turn started before this offset
        self.prompt_id = prompt_id  # the hook input's prompt_id (one per turn), "" unknown

    def advanced(self, *, prompt_id: str = "") -> Anchor:
        """The anchor of the reply after this one, when nobody read where it is."""
        return Anchor(self.base, self.skip + 1, offset=self.offset,
                      turn_before=self.turn_before, prompt_id=prompt_id or self.prompt_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Anchor) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Anchor({fields})"

    def fields(self) -> dict[str, Any]:
        return {"base": self.base, "skip": self.skip, "offset": self.offset,
                "turn_before": self.turn_before, "prompt_id": self.prompt_id}

    @classmethod
    def from_fields(cls, record: Any) -> Anchor | None:
        if not isinstance(record, dict):
            return None
        base, skip = record.get("base"), record.get("skip")
        offset, turn_before = record.get("offset", -1), record.get("turn_before", -1)
        prompt_id = record.get("prompt_id", "")
        if not (isinstance(base, str) and len(base) <= 200 and isinstance(prompt_id, str)):
            return None
        if not (_is_int(skip) and _is_int(offset) and _is_int(turn_before)):
            return None
        assert isinstance(skip, int) and isinstance(offset, int) and isinstance(turn_before, int)
        if skip < 0 or skip > 100_000 or (not base and turn_before < 0):
            return None
        return cls(base, skip, offset=offset, turn_before=turn_before,
                   prompt_id=prompt_id[:200])


class Saved:
    """An anchor file: the anchor, the one it was judged from, when it was written (wall
    clock ``at``; ``boot``: on ``boot_clock``, None in a file from before it was kept)."""

    __slots__ = ("anchor", "at", "boot", "prev")

    def __init__(self, anchor: Anchor, prev: Anchor | None, at: float,
                 boot: float | None = None) -> None:
        self.anchor = anchor
        self.prev = prev
        self.at = at
        self.boot = boot

    def is_twins(self, spawn_time: float | None) -> bool:
        """Saved after this hook process started: by another hook for this same reply.

        ``spawn_time`` (wall clock, a moment ago) only gives this process's age; when the
        file says when it was saved on the boot clock, the two are compared there, so a
        wall clock set back or forward between two Stops changes nothing."""
        if spawn_time is None:
            return False
        if self.boot is None:
            return self.at > spawn_time - TWIN_MARGIN
        now = boot_clock()
        started = now - (time.time() - spawn_time)
        # Later than now: saved before the machine restarted, long before this process.
        return started - TWIN_MARGIN < self.boot <= now


def anchor_path(state: str, session_id: str) -> str:
    """``<state>/hook/<session>.json`` (``session_id`` is a plain id: checked on input)."""
    return os.path.join(state, ANCHOR_DIR, f"{session_id}.json")


def read_anchor(state: str, session_id: str) -> Saved | None:
    """The session's anchor file, or None (missing, unsafe, broken)."""
    from ..state.files import read_json_object
    from ..state.paths import state_folder

    try:
        state_folder(state, ANCHOR_DIR)
    except OSError:
        return None
    record = read_json_object(anchor_path(state, session_id), _MAX_BYTES)
    if record is None or record.get("v") != ANCHOR_VERSION:
        return None
    anchor = Anchor.from_fields(record)
    at, boot = record.get("at"), record.get("boot")
    if anchor is None or not isinstance(at, (int, float)) or isinstance(at, bool):
        return None
    if not isinstance(boot, (int, float)) or isinstance(boot, bool):
        boot = None  # saved before the boot clock was kept: the wall clock it is
    return Saved(anchor, Anchor.from_fields(record.get("prev")), float(at), boot)


def previous_anchor(saved: Saved | None, *, spawn_time: float | None, prompt_id: str
                    ) -> Anchor | None:
    """The anchor the previous reply's hook left: a twin's is skipped, another turn's
    (its ``prompt_id`` differs: one per turn) is none."""
    if saved is None:
        return None
    anchor = saved.prev if saved.is_twins(spawn_time) else saved.anchor
    if anchor is not None and anchor.prompt_id and prompt_id and anchor.prompt_id != prompt_id:
        return None
    return anchor


def save_anchor(state: str, session_id: str, anchor: Anchor, *, prev: Anchor | None,
                size: int | None) -> bool:
    """Write the anchor (and the one it was judged from) atomically; False on failure."""
    from pathlib import Path

    import orjson

    from ..state.files import write_private_file
    from ..state.paths import state_folder

    record = {"v": ANCHOR_VERSION, **anchor.fields(),
              "prev": prev.fields() if prev is not None else None,
              "size": size if size is not None else -1, "at": time.time(),
              "boot": boot_clock()}
    try:
        state_folder(state, ANCHOR_DIR, create=True)
        write_private_file(Path(anchor_path(state, session_id)), orjson.dumps(record))
    except OSError:
        return False
    return True


def advance_anchor(state: str, session_id: str, *, size: int | None, prompt_id: str,
                   spawn_time: float | None) -> bool:
    """Count this reply without reading the transcript: it answered the re-prompt after
    the one the previous anchor names. Without one from this turn, this reply is the
    turn's first answer to a re-prompt. Nothing is written when a twin already did."""
    saved = read_anchor(state, session_id)
    if saved is not None and saved.is_twins(spawn_time):
        return False
    previous = previous_anchor(saved, spawn_time=spawn_time, prompt_id=prompt_id)
    if previous is None:
        if size is None:
            return False
        # The turn's start is in the file already (it came before this reply).
        fresh = Anchor("", 1, turn_before=size, prompt_id=prompt_id)
        return save_anchor(state, session_id, fresh, prev=None, size=size)
    return save_anchor(state, session_id, previous.advanced(prompt_id=prompt_id),
                       prev=previous, size=size)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
