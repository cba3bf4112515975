"""Every word the person sees, and the Stop hook's output JSON for each outcome.

Pure: plain values in, strings and dicts out. The mod (``plugin/hooks/register.js``)
holds no wording: it shows the texts this module puts in its plan, substituting only
``{output}`` (what ``/goal clear`` printed).

Where the words show up:

* ``stopReason`` (always; starts with ``loop-killer: `` and names the rule): the TUI shows
  ``Stop hook stopped Claude`` with it.
* Without the mod, ``systemMessage`` (the TUI shows ``Stop says: <text>``; ``-p
  --output-format stream-json`` prints it as a system message) and ``terminalSequence``
  (an OSC 9 desktop notification).
* With the mod, the plan in ``hookSpecificOutput.additionalContext`` (the mod takes it
  out before anything reaches the model): the notice it shows under the answer, its toast,
  and the lines for each result of ``/goal clear``. The TUI prefixes a mod's lines with
  ``loop-killer:``, so these texts do not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..engine.rules import RULE_MANUAL, Rule, rule_phrase
from ..printable import printable
from ..state.inbox import Source

__all__ = [
    "MARK",
    "MOD_PROTOCOL",
    "OUTCOMES",
    "OUTCOME_CLEARED",
    "OUTCOME_FAILED",
    "OUTCOME_NOT_POSSIBLE",
    "OUTCOME_NO_GOAL",
    "OUTCOME_QUEUED",
    "OUTCOME_SENT",
    "Firing",
    "Outcome",
    "failure_message",
    "hook_output",
    "mod_plan",
    "notice",
    "osc9",
    "rule_label",
    "rule_phrase",
    "stop_reason",
    "toast",
]

MARK = "loop-killer: "
"""Starts every ``stopReason`` and the mod's entry in ``additionalContext``."""

MOD_PROTOCOL = 1
"""The version of ``loop_killer_mod`` in the hook input and of the plan (``v``)."""

Outcome = Literal["cleared", "sent_unconfirmed", "not_possible", "stopped_no_goal",
                  "clear_queued", "clear_failed"]
"""What became of /goal clear after a firing (the journal's "outcome" field)."""

OUTCOME_CLEARED: Final = "cleared"  # the met:true sentinel line (or the command's own result) seen
OUTCOME_SENT: Final = "sent_unconfirmed"  # typed into the pane, no proof within the wait
OUTCOME_NOT_POSSIBLE: Final = "not_possible"  # a goal is set but nothing here can clear it
OUTCOME_NO_GOAL: Final = "stopped_no_goal"  # no goal in this session: stopping the turn is all
OUTCOME_QUEUED: Final = "clear_queued"  # the mod runs /goal clear once the turn has ended
OUTCOME_FAILED: Final = "clear_failed"  # the mod ran /goal clear and it failed
OUTCOMES: Final[tuple[Outcome, ...]] = (OUTCOME_CLEARED, OUTCOME_SENT, OUTCOME_NOT_POSSIBLE,
                                        OUTCOME_NO_GOAL, OUTCOME_QUEUED, OUTCOME_FAILED)



# What /goal clear prints (Claude Code 2.1.x): "Goal cleared: <condition>" / "No goal set".
GOAL_CLEARED_PREFIX = "Goal cleared"
NO_GOAL_PREFIX = "No goal set"
PROOF_MARKER = '"met":true,"sentinel":true'



@dataclass(frozen=True, slots=True)
class Firing:
    """Why this turn is being stopped."""

    rule: Rule
    count: int  # answers involved
    run_length: int = 0
    source: Source = "hook"


def rule_label(firing: Firing) -> str:
    """``SAME_REPLY_TURNS: 3 similar replies in a row``."""
    return f"{printable(firing.rule, 64)}: {rule_phrase(firing.rule, firing.count)}"


def stop_reason(firing: Firing) -> str:
    """The ``stopReason``: the fixed marker, then the rule."""
    return f"{MARK}{rule_label(firing)}; turn stopped"


def _what(firing: Firing) -> str:
    if firing.rule == RULE_MANUAL:
        return f"stopped this turn as asked ({rule_label(firing)})"
    return f"stopped a Stop-hook loop ({rule_label(firing)})"


def notice(firing: Firing, outcome: Outcome, *, why: str = "", prefix: bool = True) -> str:
    """The one-line notice for an outcome (``why``: what kept ``/goal clear`` from running)."""
    what = _what(firing)
    if outcome == OUTCOME_CLEARED:
        text = f"{what} and cleared the goal (/goal clear confirmed)."
    elif outcome == OUTCOME_SENT:
        text = (f"{what}; /goal clear was typed but not confirmed: if the goal is still "
                "set, type /goal clear.")
    elif outcome == OUTCOME_NOT_POSSIBLE:
        reason = f" ({printable(why, 160)})" if why else ""
        text = f"{what}; the goal is only paused: type /goal clear to clear it{reason}."
    elif outcome == OUTCOME_QUEUED:
        text = f"{what}; clearing the goal with /goal clear."
    else:  # OUTCOME_NO_GOAL, and anything unknown: claim nothing about a goal
        text = f"{what}."
    return f"{MARK}{text}" if prefix else text


def toast(firing: Firing, outcome: Outcome) -> str:
    """A short line for a desktop notification or the mod's toast."""
    what = f"loop stopped ({printable(firing.rule, 64)})"
    if outcome == OUTCOME_CLEARED:
        return f"{MARK}{what}, goal cleared"
    if outcome in (OUTCOME_SENT, OUTCOME_NOT_POSSIBLE):
        return f"{MARK}{what}: type /goal clear"
    if outcome == OUTCOME_QUEUED:
        return f"{MARK}{what}, clearing the goal"
    return f"{MARK}{what}"


def osc9(text: str) -> str:
    """The OSC 9 notification sequence for ``text`` (control characters removed)."""
    return f"\x1b]9;{printable(text, 200)}\x07"


def mod_plan(
    firing: Firing,
    *,
    plan_id: str,
    session_id: str,
    clear_goal: bool,
    outcome_path: str,
) -> dict[str, Any]:
    """The instructions for the mod: what to show, whether to run ``/goal clear``, and
    the line to show for each result of it (``{output}`` is what the command printed)."""
    outcome: Outcome = OUTCOME_QUEUED if clear_goal else OUTCOME_NO_GOAL
    return {
        "v": MOD_PROTOCOL,
        "id": plan_id,
        "session_id": session_id,
        "rule": firing.rule,
        "count": firing.count,
        "stop_reason": stop_reason(firing),
        "clear_goal": clear_goal,
        "notice": notice(firing, outcome, prefix=False),
        "toast": _unprefixed(toast(firing, outcome)),
        # Markers of each result, looked for (in this order) in what /goal clear printed
        # and in the transcript rows written after the stop: its own text, or the
        # goal_status met:true sentinel line (compact JSON, as Claude Code writes it).
        "match": {"cleared": [GOAL_CLEARED_PREFIX, PROOF_MARKER], "no_goal": [NO_GOAL_PREFIX]},
        "outcome": {
            "cleared": "{output}",
            "no_goal": "no goal was set ({output}); the loop was stopped.",
            "failed": "/goal clear failed ({output}): the goal is only paused, "
                      "type /goal clear to clear it.",
            "unknown": "/goal clear ran but its result is unknown: if the goal is still set, "
                       "type /goal clear.",
        },
        "outcome_path": outcome_path,
    }


def hook_output(
    firing: Firing,
    outcome: Outcome,
    *,
    why: str = "",
    plan: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Stop hook's JSON: end the turn, and say so (through the mod when ``plan``).

    Never ``decision: block``: that would re-prompt the model.
    """
    output: dict[str, Any] = {"continue": False, "stopReason": stop_reason(firing)}
    if plan is not None:
        output["hookSpecificOutput"] = {
            "hookEventName": "Stop",
            "additionalContext": MARK + json.dumps(plan, ensure_ascii=False,
                                                   separators=(",", ":")),
        }
    else:
        output["systemMessage"] = notice(firing, outcome, why=why)
        output["terminalSequence"] = osc9(toast(firing, outcome))
    return output


def failure_message(what: str) -> dict[str, Any]:
    """Output for a hook that could not do its job: a short note, nothing blocked."""
    return {"systemMessage": f"{MARK}{printable(what, 300)} (nothing was blocked)"}


def _unprefixed(text: str) -> str:
    return text.removeprefix(MARK)
