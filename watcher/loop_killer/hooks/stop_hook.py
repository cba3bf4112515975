"""The Stop hook: take a clear request, or judge a re-prompt's reply and the turn's budget;
``stopping.fire`` stops the turn. ``LOOP_KILLER_DEBUG=1`` logs to ``hook-debug.log``."""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from ..engine.budget import LIMIT_MINUTES, LIMIT_REPROMPTS, TurnUse, crossed
from ..engine.rules import RULE_BUDGET, text_digest
from ..state import records
from ..state.config import Settings, load_settings
from ..state.files import is_plain_id, request_waiting, state_dir
from ..state.session import turn_over
from . import notice, parse_json, plans_waiting, subagent_id, text_of
from .stopping import Fired, HookInput, fire
from .turn import goal_set, judge, prompt_time

# What only a stop needs (the hands, requests, the detection log) is imported lazily.

__all__ = ["Fired", "HookInput", "fire", "parse_input", "run", "run_input", "state_dir"]


def run(raw: bytes, *, env: dict[str, str], spawn_time: float | None = None
        ) -> dict[str, Any] | None:
    """The whole decision for one Stop: the hook's output JSON, or None for none."""
    return run_input(parse_json(raw), env=env, spawn_time=spawn_time)


def run_input(data: Any, *, env: dict[str, str], spawn_time: float | None = None,
              settings: Settings | None = None) -> dict[str, Any] | None:
    """``run`` for hook input already parsed (settings loaded here when None)."""
    hook_input = parse_input(data)
    if hook_input is None:
        return None
    state = state_dir(env)
    if settings is None:
        settings = load_settings(state, env)
    if settings.hook_off(data):
        return None
    _sweep_outcomes(state)
    output = _take_request(state, hook_input, env)
    if output is not None:
        return output
    try:
        if not hook_input.stop_hook_active:
            turn_over(str(state), hook_input.session_id, hook_input.prompt_id)
            return None  # this reply answers the person's prompt: it cannot fire
        # (no text at all: an empty reply; Claude Code then leaves the field out)
        judged = judge(str(state), hook_input.session_id, prompt_id=hook_input.prompt_id,
                       message=hook_input.last_assistant_message or "", settings=settings,
                       transcript_path=hook_input.transcript_path, spawn_time=spawn_time,
                       need_start=settings.budget.minutes > 0)
    except (OSError, ValueError):
        return None  # fail open: a record that cannot be kept judges nothing
    _debug(state, env, "judged", session_id=hook_input.session_id, twin=judged.twin,
           reprompts=judged.reprompts, fired=judged.detection.rule if judged.detection else None)
    if judged.twin:
        return None  # another hook for this very reply judged (and stops) it
    if judged.detection is not None:
        detection = judged.detection
        firing = notice.Firing(detection.rule, detection.count, detection.run_length, "hook")
        return fire(Fired(firing, detection.answer_uuid,
                          text_digest(hook_input.last_assistant_message or ""), True),
                    hook_input=hook_input, state=state, env=env)
    return _over_budget(TurnUse(judged.reprompts, judged.started_at), state, hook_input, env,
                        settings)


def _take_request(state: Path, hook_input: HookInput, env: dict[str, str]) -> dict[str, Any] | None:
    """Act on the session's fresh clear request, if one is waiting and still valid."""
    session_id = hook_input.session_id
    if not request_waiting(state, session_id):
        return None
    from ..state.inbox import claim_request

    request = claim_request(state, session_id, transcript_path=hook_input.transcript_path,
                            last_prompt_at=prompt_time(hook_input.transcript_path))
    if request is None:
        return None
    key = records.record_key(request.prompt_uuid, request.answer_uuid)
    void = key is not None and not records.first_to_act(state, session_id, key)
    _debug(state, env, "request", session_id=session_id, rule=request.rule,
           answer_uuid=request.answer_uuid, source=request.source, void=void)
    if void:
        return None  # a Stop hook already stopped the turn for that answer: void
    firing = notice.Firing(request.rule, request.count, request.run_length, request.source,
                           request.detail)
    return fire(Fired(firing, request.answer_uuid, request.answer_digest, False),
                hook_input=hook_input, state=state, env=env)


def _over_budget(turn: TurnUse, state: Path, hook_input: HookInput,
                 env: dict[str, str], settings: Settings) -> dict[str, Any] | None:
    """End the turn when it has reached its re-prompt or time limit (``engine.budget``)."""
    limits = (LIMIT_REPROMPTS, LIMIT_MINUTES)
    if crossed(settings.budget, turn, time.time(), limits) is None:
        return None
    goal = goal_set(hook_input.transcript_path) is True
    crossing = crossed(settings.budget, turn.replace(goal=goal), time.time(), limits)
    if crossing is None:
        return None
    key = "budget-" + text_digest(f"{hook_input.prompt_id}:{turn.started_at}:{turn.reprompts}")
    if not records.first_to_act(state, hook_input.session_id, key):
        return None  # (the watcher's spend request for this turn came first)
    firing = notice.Firing(RULE_BUDGET, crossing.count, 0, "hook", crossing.words)
    return fire(Fired(firing, key, text_digest(hook_input.last_assistant_message or ""), True),
                hook_input=hook_input, state=state, env=env)


def parse_input(raw: Any) -> HookInput | None:
    """The hook input if it is a main-session Stop we can act on, else None (ignore it)."""
    if not isinstance(raw, dict) or raw.get("hook_event_name") != "Stop":
        return None
    if subagent_id(raw) is not None:
        return None  # a subagent's stop, whatever the event is called in this version
    session_id = raw.get("session_id")
    transcript = raw.get("transcript_path")
    if not (is_plain_id(session_id) and isinstance(session_id, str)
            and isinstance(transcript, str)):
        return None
    message = raw.get("last_assistant_message")
    mod = raw.get("loop_killer_mod")
    version = mod.get("version") if isinstance(mod, dict) else None
    return HookInput(
        session_id=session_id, transcript_path=transcript,
        stop_hook_active=raw.get("stop_hook_active") is True,
        last_assistant_message=message if isinstance(message, str) else None,
        mod_version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        prompt_id=text_of(raw.get("prompt_id"))[:200], cwd=text_of(raw.get("cwd")))


def _sweep_outcomes(state: Path) -> None:
    """Log what the mod did after earlier stops (one ``scandir`` when there is nothing)."""
    if not plans_waiting(state):
        return
    from ..state import journal
    from .mod_outcomes import sweep_mod_outcomes

    with contextlib.suppress(OSError):
        sweep_mod_outcomes(str(state), lambda record: journal.append(state, record))


def _debug(state: Path, env: dict[str, str], what: str, **fields: object) -> None:
    """One line of ``hook-debug.log`` when ``LOOP_KILLER_DEBUG`` is set (best effort)."""
    if env.get("LOOP_KILLER_DEBUG", "") in ("", "0"):
        return
    import json

    from ..state.files import append_line, ensure_private_dir

    line = json.dumps({"at": round(time.time(), 3), "pid": os.getpid(), "what": what,
                       **fields}, ensure_ascii=True)
    with contextlib.suppress(OSError):
        ensure_private_dir(state)
        append_line(state / "hook-debug.log", line.encode() + b"\n")
