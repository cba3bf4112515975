"""Whether the turn reached its re-prompt or time limit (BUDGET, ``engine.budget``), from
the Stop hook's count of the turn (``hook.turn``: every Stop that answers a re-prompt
reaches the package). Spend is the watcher's: it reads every usage line
(``watch.budgets``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..engine.budget import LIMIT_MINUTES, LIMIT_REPROMPTS, Crossing, TurnUse, crossed

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["over_budget"]


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
    from .turn import last_goal_status

    try:
        goal = last_goal_status(transcript_path)
    except OSError:
        goal = None
    return crossed(settings.budget, use.replace(goal=goal is not None and not goal.met), now,
                   limits)
