"""Stopping the looping turn: log it, get ``/goal clear`` run, say what happened.

``fire`` is called once the Stop hook knows this turn must stop (a clear request taken,
or its own judgement fired). It writes the detection log's ``outcome`` line (and the
``detection`` line, when this hook recorded the detection first), picks the hands
(``decide.choose_hands``: the mod, typing into the pane, or nobody) and returns the
hook's output JSON (``notice.hook_output``).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.transcript import GoalStatus
from ..state import journal
from . import decide, notice
from .decide import HookInput
from .judge import Judgement
from .tail import last_goal_status
from .wait import file_size

# The hands' own modules (``mod_outcomes`` for the mod's plan, ``terminal`` and ``screen``
# for typing into a pane) are imported by the branch that uses them.

__all__ = ["Fired", "fire"]



@dataclass(frozen=True, slots=True)
class Fired:
    """What the hook knows of the answer it stops the turn for."""

    firing: notice.Firing
    answer_uuid: str
    answer_digest: str
    judgement: Judgement | None = None  # None when acting on a request alone
    log_detection: bool = False  # this hook recorded the detection first: log it


def fire(what: Fired, *, hook_input: HookInput, state: Path, env: dict[str, str]
         ) -> dict[str, Any]:
    """Log, act (the mod's plan, typing, or nothing) and return the hook's output."""
    firing = what.firing
    transcript = hook_input.transcript_path
    common = {
        "session_id": hook_input.session_id,
        "answer_uuid": what.answer_uuid,
        "rule": firing.rule,
        "project": os.path.basename(os.path.dirname(transcript)),
        "transcript_path": transcript,
    }
    judgement = what.judgement
    if what.log_detection:
        journal.append(state, journal.LoopRecord(
            session_id=common["session_id"], answer_uuid=common["answer_uuid"],
            rule=common["rule"], project=common["project"], transcript_path=transcript,
            answer_digest=what.answer_digest,
            prompt_uuid=judgement.prompt_uuid if judgement else "",
            count=firing.count,
            run_length=firing.run_length,
            reply_in_file=judgement.reply_in_file if judgement else False,
            case=judgement.case if judgement else "",
            located_by=judgement.located_by if judgement else "",
            snippet=(hook_input.last_assistant_message or "")[:200],
            source="hook",
        ))
    goal_set = _goal_set(judgement.goal if judgement else None, transcript)
    hands = decide.choose_hands(mod_active=hook_input.mod_active, env=env)
    plan = None
    why = evidence = ""
    acted: decide.Hands = decide.HANDS_NONE
    outcome: notice.Outcome
    if hands == decide.HANDS_MOD:
        acted = hands
        clear_goal = goal_set is not False  # "No goal set" is harmless; a missed goal is not
        key = f"{hook_input.session_id}.{time.time_ns():x}"
        outcome_path = ""
        if clear_goal:  # without a goal the mod runs nothing and reports nothing
            from .mod_outcomes import write_mod_plan_record

            with contextlib.suppress(OSError):
                outcome_path = write_mod_plan_record(str(state), key, {
                    **common, "id": key, "offset": file_size(transcript) or 0,
                    "clear_goal": clear_goal, "at": time.time(),
                })
        plan = notice.mod_plan(firing, plan_id=key, session_id=hook_input.session_id,
                               clear_goal=clear_goal, outcome_path=outcome_path,
                               transcript_path=transcript)
        outcome = notice.OUTCOME_QUEUED if clear_goal else notice.OUTCOME_NO_GOAL
    elif goal_set and hands in (decide.HANDS_TMUX, decide.HANDS_SCREEN):
        acted = hands
        from .terminal import type_goal_clear

        typed = type_goal_clear(hands, env=env, transcript_path=transcript)
        outcome, why, evidence = typed.outcome, typed.why, typed.evidence
    else:
        outcome, why = decide.outcome_without_typing(goal_set=bool(goal_set), hands=hands)
    journal.append(state, journal.OutcomeRecord(
        session_id=common["session_id"], answer_uuid=common["answer_uuid"],
        rule=common["rule"], project=common["project"], transcript_path=transcript,
        outcome=outcome,
        hands=acted,
        detail=notice.notice(firing, outcome, why=why),
        evidence=evidence,
        source="hook",
    ))
    return notice.hook_output(firing, outcome, why=why, plan=plan)


def _goal_set(goal: GoalStatus | None, transcript: str) -> bool | None:
    """Whether a goal is set (neither met nor cleared); None when it cannot be told."""
    if goal is None:
        try:
            goal = last_goal_status(transcript)
        except OSError:
            return None
    return goal is not None and not goal.met
