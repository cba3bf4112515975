"""The one way any hook stops a turn: the log's lines, the hands that clear a goal (the mod's
plan, typing into the pane, or nobody) and the output (from a tool call only the mod clears)."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.rules import LIMIT_RULES, RULE_REFUSED_RETRIES
from ..state.files import file_size
from . import notice, text_of
from .turn import goal_set

__all__ = ["Fired", "HookInput", "choose_hands", "fire", "mod_loads",
           "outcome_without_typing", "stop_turn"]


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
        return self.mod_version == notice.MOD_PROTOCOL


@dataclass(frozen=True, slots=True)
class Fired:
    """What the hook knows of the answer it stops the turn for."""

    firing: notice.Firing
    answer_uuid: str
    answer_digest: str
    log_detection: bool = False  # this hook recorded the detection first: log it


def fire(what: Fired, *, hook_input: HookInput, state: Path, env: dict[str, str]) -> dict[str, Any]:
    """Log, act (the mod's plan, typing, or nothing) and return the hook's output."""
    firing, transcript = what.firing, hook_input.transcript_path
    common: dict[str, Any] = {  # the fields every record of this stop names
        "session_id": hook_input.session_id, "answer_uuid": what.answer_uuid,
        "rule": firing.rule, "project": os.path.basename(os.path.dirname(transcript)),
        "transcript_path": transcript}
    from ..state import journal

    if what.log_detection:
        journal.append(state, journal.LoopRecord(
            **common, answer_digest=what.answer_digest, prompt_uuid=hook_input.prompt_id,
            count=firing.count, run_length=firing.run_length,
            located_by=None if firing.rule in LIMIT_RULES else "anchor",
            snippet=(hook_input.last_assistant_message or "")[:200], source="hook"))
    goal = goal_set(transcript)
    hands = choose_hands(mod_active=hook_input.mod_active, env=env)
    plan = None
    why = evidence = ""
    acted: notice.Hands = notice.HANDS_NONE
    outcome: notice.Outcome
    if hands == notice.HANDS_MOD:
        acted = hands
        clear_goal = goal is not False  # "No goal set" is harmless; a missed goal is not
        key = f"{hook_input.session_id}.{time.time_ns():x}"
        outcome_path = ""
        if clear_goal:  # without a goal the mod runs nothing and reports nothing
            from .mod_outcomes import write_mod_plan_record

            with contextlib.suppress(OSError):
                outcome_path = write_mod_plan_record(str(state), key, {
                    **common, "id": key, "offset": file_size(transcript) or 0,
                    "clear_goal": clear_goal, "at": time.time()})
        plan = notice.mod_plan(firing, plan_id=key, session_id=hook_input.session_id,
                               clear_goal=clear_goal, outcome_path=outcome_path,
                               transcript_path=transcript)
        outcome = notice.OUTCOME_QUEUED if clear_goal else notice.OUTCOME_NO_GOAL
    elif goal and hands in (notice.HANDS_TMUX, notice.HANDS_SCREEN):
        acted = hands
        from .terminal import type_goal_clear

        typed = type_goal_clear(hands, env=env, transcript_path=transcript)
        outcome, why, evidence = typed.outcome, typed.why, typed.evidence
    else:
        outcome, why = outcome_without_typing(goal_set=bool(goal), hands=hands)
    journal.append(state, journal.OutcomeRecord(
        **common, outcome=outcome, hands=acted, detail=notice.notice(firing, outcome, why=why),
        evidence=evidence, source="hook",
        # The ladder's stop has no detection line of its own: how many attempts were refused.
        count=firing.count if firing.rule == RULE_REFUSED_RETRIES else None))
    return notice.hook_output(firing, outcome, why=why, plan=plan)


def choose_hands(*, mod_active: bool, env: Mapping[str, str]) -> notice.Hands:
    """Who can run ``/goal clear`` for this session: the mod, a typing hand, or nobody."""
    if mod_active:
        return notice.HANDS_MOD
    if env.get("TMUX_PANE"):
        return notice.HANDS_TMUX
    if env.get("STY") and env.get("WINDOW"):
        return notice.HANDS_SCREEN
    return notice.HANDS_NONE


def outcome_without_typing(*, goal_set: bool, hands: notice.Hands) -> tuple[notice.Outcome, str]:
    """The outcome (and why) when nothing is typed: no goal, or no hands for it."""
    if not goal_set:
        return notice.OUTCOME_NO_GOAL, ""
    if hands == notice.HANDS_NONE:
        return notice.OUTCOME_NOT_POSSIBLE, (
            "no loop-killer mod in this Claude Code, and not in tmux or screen")
    return notice.OUTCOME_NOT_POSSIBLE, ""


_VERSION_KEY = b'"version":"'
_TAIL = 64 * 1024


def stop_turn(data: dict[str, Any], *, state: str, label: str, refused: int, output: dict[str, Any],
              env: dict[str, str], detail: str = "") -> dict[str, Any]:
    """The PreToolUse output that refuses this attempt (``output``) and ends the turn."""
    transcript = data.get("transcript_path")
    transcript = transcript if isinstance(transcript, str) else ""
    hook_input = HookInput(
        session_id=str(data.get("session_id")), transcript_path=transcript,
        stop_hook_active=False, last_assistant_message=label,
        mod_version=notice.MOD_PROTOCOL if mod_loads(transcript) else None)
    firing = notice.Firing(RULE_REFUSED_RETRIES, refused, 0, "hook", detail)
    # No typing hands: only the environment's multiplexer variables are left out.
    hands_off = {key: value for key, value in env.items()
                 if key not in ("TMUX_PANE", "STY", "WINDOW")}
    stopped = fire(Fired(firing, text_of(data.get("tool_use_id")), "", False),
                   hook_input=hook_input, state=Path(state), env=hands_off)
    specific = dict(output.get("hookSpecificOutput") or {})
    plan = stopped.pop("hookSpecificOutput", None)
    if isinstance(plan, dict) and plan.get("additionalContext"):
        specific["additionalContext"] = plan["additionalContext"]  # for the mod alone
    specific["permissionDecisionReason"] = (
        f"{specific.get('permissionDecisionReason', '')} The turn is ended.").strip()
    stopped.pop("terminalSequence", None)
    return {**stopped, "hookSpecificOutput": specific}


def mod_loads(transcript: str) -> bool:
    """Whether the session's Claude Code loads the mod, by its transcript's version."""
    from ..state.files import open_transcript
    from .notice import MOD_MIN_VERSION, parse_version

    try:
        fd = open_transcript(transcript)  # (no FIFO, no device: never blocks)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - _TAIL)
        data = os.pread(fd, size - start, start)
    except OSError:
        return False
    finally:
        os.close(fd)
    found = data.rfind(_VERSION_KEY)
    if found < 0:
        return False
    end = data.find(b'"', found + len(_VERSION_KEY))
    version = parse_version(data[found + len(_VERSION_KEY):end].decode("utf-8", "replace"))
    return version is not None and version >= MOD_MIN_VERSION
