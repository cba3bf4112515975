"""The Stop hook's count of a turn's re-prompts and wall time (BUDGET, ``engine.budget``).

Every Stop that answers a re-prompt (``stop_hook_active``) reaches the package, so the
hook counts them itself, with no watcher: one small record per session,
``<state>/budget/<session>.json``, holds the turn it counts (the hook input's
``prompt_id``, one per turn), when that turn began (its person's prompt, read once from
the transcript) and the re-prompts answered in it. A twin hook for the same reply (its
record saved after this process started: ``reply.Saved.is_twins``'s rule) counts nothing
more. Spend is the watcher's: it reads every usage line (``watch.budgets``).
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ..engine.budget import LIMIT_MINUTES, LIMIT_REPROMPTS, Crossing, TurnUse, crossed
from .reply import TWIN_MARGIN, boot_clock

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Settings

__all__ = ["BUDGET_DIR", "count_turn", "over_budget"]

BUDGET_DIR = "budget"
_VERSION = 1
_MAX_BYTES = 4096


def count_turn(state: Path, session_id: str, *, prompt_id: str, transcript_path: str,
               spawn_time: float | None, settings: Settings) -> TurnUse | None:
    """Count this Stop's reply (it answers a re-prompt) in its turn; the turn's figures so
    far, or None when neither the re-prompt nor the time limit is on (nothing kept)."""
    budget = settings.budget
    if budget.reprompts <= 0 and budget.minutes <= 0:
        return None
    import os

    from ..state.files import read_json_object, state_folder, write_private_file

    path = os.path.join(state, BUDGET_DIR, f"{session_id}.json")
    try:
        state_folder(state, BUDGET_DIR, create=True)
    except OSError:
        return None
    kept = read_json_object(path, _MAX_BYTES)
    prompted: float | None = None
    if not prompt_id:  # (older Claude Code: the turn is known by its prompt's time)
        prompted = _prompt_at(transcript_path)
    turn = prompt_id or (f"at {prompted}" if prompted is not None else "")
    if kept is not None and kept.get("v") == _VERSION and kept.get("turn") == turn and turn:
        started = kept.get("started_at")
        started_at = float(started) if isinstance(started, (int, float)) else None
        counted = kept.get("reprompts")
        reprompts = counted if isinstance(counted, int) and counted >= 0 else 0
        if not _twin(kept.get("boot"), spawn_time):
            reprompts += 1
    else:
        started_at = prompted if prompted is not None else _prompt_at(transcript_path)
        reprompts = 1
    import orjson

    record = {"v": _VERSION, "turn": turn, "started_at": started_at, "reprompts": reprompts,
              "boot": boot_clock()}
    # Best effort: a count not kept is a stop later, never a stop by mistake.
    with contextlib.suppress(OSError):
        write_private_file(_path(path), orjson.dumps(record))
    return TurnUse(reprompts, started_at)


def over_budget(use: TurnUse | None, settings: Settings, *, transcript_path: str,
                now: float | None = None) -> Crossing | None:
    """The re-prompt or time limit this turn has reached, with the words (which say
    "goal" when a goal is set)."""
    if use is None:
        return None
    now = time.time() if now is None else now
    limits = (LIMIT_REPROMPTS, LIMIT_MINUTES)
    if crossed(settings.budget, use, now, limits) is None:
        return None
    from .reply import last_goal_status

    try:
        goal = last_goal_status(transcript_path)
    except OSError:
        goal = None
    return crossed(settings.budget, use.replace(goal=goal is not None and not goal.met), now,
                   limits)


def _twin(boot: object, spawn_time: float | None) -> bool:
    """Saved after this hook process started: by another hook for this same reply."""
    if spawn_time is None or isinstance(boot, bool) or not isinstance(boot, (int, float)):
        return False
    now = boot_clock()
    started = now - (time.time() - spawn_time)
    return started - TWIN_MARGIN < boot <= now


def _prompt_at(transcript_path: str) -> float | None:
    """When the turn's person's prompt was written (read back from the transcript's end)."""
    from .reply import last_prompt_time

    try:
        return last_prompt_time(transcript_path)
    except OSError:
        return None


def _path(path: str) -> Path:
    from pathlib import Path

    return Path(path)
