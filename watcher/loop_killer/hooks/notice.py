"""Every word the person sees from a stopped turn, and the Stop hook's output JSON (pure); with
the mod, its plan in ``additionalContext`` carries the texts (only they reach ``-p``'s output)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from ..engine.rules import LIMIT_RULES, RULE_MANUAL, Rule, rule_phrase
from ..printable import printable

if TYPE_CHECKING:
    from ..state.inbox import Source

__all__ = [
    "HANDS_MOD", "HANDS_NONE", "HANDS_SCREEN", "HANDS_TMUX", "MARK", "MOD_MIN_VERSION",
    "MOD_PROTOCOL", "MOD_RESULTS", "MOD_WAIT", "OUTCOMES", "OUTCOME_CLEARED", "OUTCOME_FAILED",
    "OUTCOME_NOT_POSSIBLE", "OUTCOME_NO_GOAL", "OUTCOME_QUEUED", "OUTCOME_SENT", "OUTPUT_MAX",
    "Firing", "Hands", "Outcome", "hook_output", "mod_plan", "notice", "osc9", "parse_version",
    "rule_head", "rule_phrase", "stop_reason", "toast"]

MARK = "loop-killer: "  # starts every stopReason and the mod's entry in additionalContext

MOD_PROTOCOL = 1  # the version of loop_killer_mod in the hook input and of the plan

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

Hands = Literal["mod", "tmux", "screen", "none"]
"""Who runs ``/goal clear`` (the journal's "hands" field)."""

HANDS_MOD: Final = "mod"
HANDS_TMUX: Final = "tmux"
HANDS_SCREEN: Final = "screen"
HANDS_NONE: Final = "none"

MOD_RESULTS: Final[dict[str, Outcome]] = {
    "cleared": OUTCOME_CLEARED, "no_goal": OUTCOME_NO_GOAL, "failed": OUTCOME_FAILED,
    "unknown": OUTCOME_SENT}
"""The outcome of each status the mod reports for ``/goal clear``."""

MOD_MIN_VERSION = (2, 1, 287)  # the first Claude Code that loads the plugin's mod


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``(2, 1, 328)`` from ``2.1.328 (Claude Code)``."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


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
    detail: str = ""  # what more the person is told of it (a call that waited: how long)


def rule_head(firing: Firing) -> str:
    """``SAME_REPLY_TURNS (3 similar replies to re-prompts)``: how the notice names the rule."""
    more = firing.detail and firing.rule not in LIMIT_RULES
    detail = f"; {printable(firing.detail, 160)}" if more else ""
    return f"{printable(firing.rule, 64)} ({_phrase(firing)}{detail})"


def _phrase(firing: Firing) -> str:
    return printable(rule_phrase(firing.rule, firing.count, firing.detail), 160)


def stop_reason(firing: Firing) -> str:
    """``loop-killer: SAME_REPLY_TURNS: 3 similar replies to re-prompts; turn stopped``."""
    return f"{MARK}{printable(firing.rule, 64)}: {_phrase(firing)}; turn stopped"


def notice(firing: Firing, outcome: Outcome, *, why: str = "", prefix: bool = True,
           wait: float = 0.0) -> str:
    """The one-line notice: the rule that fired, then what became of the goal."""
    stopped = "stopped this turn as asked" if firing.rule == RULE_MANUAL else "loop stopped"
    head = f"{rule_head(firing)}: {stopped}"
    detail = printable(why, 160)
    if outcome == OUTCOME_CLEARED:
        text = f"{head}, goal cleared."
    elif outcome == OUTCOME_FAILED:
        printed = f" ({detail})" if detail else ""
        text = (f"{head}, but /goal clear failed{printed}: the goal is only paused, type "
                "/goal clear.")
    elif outcome == OUTCOME_SENT:
        within = f" after {wait:g} s" if wait > 0 else ""
        reason = f" ({detail})" if detail else ""
        text = (f"{head}; the result of /goal clear is unknown{within}{reason}: if the goal "
                "is still set, type /goal clear.")
    elif outcome == OUTCOME_NOT_POSSIBLE:
        reason = f" ({detail})" if detail else ""
        text = f"{head}, goal only paused: type /goal clear to clear it{reason}."
    elif outcome == OUTCOME_QUEUED:  # logged, never shown: the person sees the result
        text = f"{head}; /goal clear queued."
    else:  # OUTCOME_NO_GOAL, and anything unknown: claim nothing about a goal
        text = f"{head}; no goal was set."
    return f"{MARK}{text}" if prefix else text


def toast(firing: Firing, outcome: Outcome) -> str:
    """A short line for a desktop notification or the mod's toast, after the same outcome."""
    what = f"loop stopped ({printable(firing.rule, 64)})"
    if outcome == OUTCOME_CLEARED:
        return f"{MARK}{what}, goal cleared"
    if outcome in (OUTCOME_SENT, OUTCOME_NOT_POSSIBLE, OUTCOME_FAILED):
        return f"{MARK}{what}: type /goal clear"
    if outcome == OUTCOME_QUEUED:
        return f"{MARK}{what}, clearing the goal"
    return f"{MARK}{what}, no goal set"


def osc9(text: str) -> str:
    """The OSC 9 notification sequence for ``text`` (control characters removed)."""
    return f"\x1b]9;{printable(text, 200)}\x07"


MOD_WAIT = 3.0  # longest wait (s) of the mod for the proof of what /goal clear did

OUTPUT_MAX = 160  # characters of what /goal clear printed that go into a notice


def mod_plan(firing: Firing, *, plan_id: str, session_id: str, clear_goal: bool, outcome_path: str,
             transcript_path: str = "") -> dict[str, Any]:
    """The mod's instructions: whether to run ``/goal clear``, and what to show after."""
    known: Outcome = OUTCOME_NO_GOAL
    return {
        "v": MOD_PROTOCOL,
        "id": plan_id,
        "session_id": session_id,
        "transcript_path": transcript_path,  # (a PreToolUse's event does not carry it)
        "rule": firing.rule,
        "count": firing.count,
        "stop_reason": stop_reason(firing),
        "clear_goal": clear_goal,
        "notice": "" if clear_goal else notice(firing, known, prefix=False),
        "toast": "" if clear_goal else toast(firing, known).removeprefix(MARK),
        # Looked for in what /goal clear printed and in the transcript rows after the stop.
        "match": {"cleared": [GOAL_CLEARED_PREFIX, PROOF_MARKER], "no_goal": [NO_GOAL_PREFIX]},
        "wait_ms": int(MOD_WAIT * 1000),
        "output_max": OUTPUT_MAX,
        "outcome": {status: notice(firing, outcome, why="{output}", prefix=False,
                                   wait=MOD_WAIT)
                    for status, outcome in MOD_RESULTS.items()},
        "outcome_bare": {status: notice(firing, outcome, prefix=False, wait=MOD_WAIT)
                         for status, outcome in MOD_RESULTS.items()},  # when it printed nothing
        "outcome_toast": {status: toast(firing, outcome).removeprefix(MARK)
                          for status, outcome in MOD_RESULTS.items()},
        "outcome_path": outcome_path,
    }


def hook_output(firing: Firing, outcome: Outcome, *, why: str = "",
                plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Stop hook's JSON: end the turn (never ``decision: block``: it re-prompts)."""
    output: dict[str, Any] = {"continue": False, "stopReason": stop_reason(firing)}
    if plan is not None:
        output["hookSpecificOutput"] = {
            "hookEventName": "Stop",
            "additionalContext": MARK + json.dumps(plan, ensure_ascii=False, separators=(",", ":"))}
    else:
        output["systemMessage"] = notice(firing, outcome, why=why)
        output["terminalSequence"] = osc9(toast(firing, outcome))
    return output
