"""The tool-call hooks: count each result, warn, refuse, reset; one JSON out. The
TOOL_REPEAT_STOP-th refusal ends the turn (a subagent's: its run). In doubt nothing is refused."""

from __future__ import annotations

import os

from ..engine.calls import ANSWERED_BY_PERSON, is_ignored, is_persons_prompt
from ..engine.tool_repeat import RULE_TOOL_REPEAT, ToolRepeat, ToolRepeatCounter
from ..state import session as store
from ..state.config import Settings, load_settings
from . import subagent_id, text_of

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool call does not import typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAIN_SCOPE", "run_input"]

MAIN_SCOPE = store.MAIN  # the session's own calls (a subagent's scope is its agent_id)

_AFTER = ("PostToolUse", "PostToolUseFailure")


def run_input(data: Any, *, env: dict[str, str], settings: Settings | None = None
              ) -> dict[str, Any] | None:
    """The output for one tool-call hook input (already parsed), or None for none."""
    if not isinstance(data, dict):
        return None
    event = data.get("hook_event_name")
    session_id = data.get("session_id")
    if not isinstance(session_id, str):
        return None
    from ..state.files import state_dir_text

    state = state_dir_text(env)
    if settings is None:
        settings = load_settings(state, env)
    if settings.hook_off(data):
        return None
    try:
        path = store.state_path(state, session_id)
        if not settings.rule_on(RULE_TOOL_REPEAT):
            _uncounted(data, state, path, event)
            return None
        if event == "UserPromptSubmit":
            _prompted(data, state, path, settings)
            return None
        return _tool_call(data, state, path, event, settings, env)
    except (OSError, ValueError):  # (store.Busy too)
        return None  # fail open: never refuse, never warn, on a doubt


def _tool_call(data: dict[str, Any], state: str, path: str, event: object,
               settings: Settings, env: dict[str, str]) -> dict[str, Any] | None:
    name = data.get("tool_name")
    if not isinstance(name, str) or not name:
        return None
    if name in ANSWERED_BY_PERSON and event in _AFTER and _person_answered(data, str(event)):
        _reset(state, path)  # the person answered: as if they had typed a prompt
        return None
    if is_ignored(name, settings.ignore_tools):
        _uncounted(data, state, path, event, ignored=True)
        return None
    scope = subagent_id(data) or MAIN_SCOPE
    if event == "PreToolUse":
        return _before(data, state, path, name, scope, settings, env)
    if event in _AFTER:
        return _after(data, state, path, str(event), name, scope, settings)
    return None


def _uncounted(data: dict[str, Any], state: str, path: str, event: object, *,
               ignored: bool = False) -> None:
    """A call not counted still tells the Stop hook whether its reply did work."""
    if event == "UserPromptSubmit":
        prompt = data.get("prompt")
        if is_persons_prompt(prompt):
            _reset(state, path)
        elif os.path.lexists(path):
            with store.locked(state):
                kept = store.load(path)
                if kept is not None:
                    store.save_turn(path, _run_afresh(kept))
    elif event in _AFTER and subagent_id(data) is None and data.get("is_interrupt") is not True:
        name = text_of(data.get("tool_name"))
        content, is_error = _result_of(data, str(event))
        call, result = _keyed(data, name, content, is_error)
        store.note_result(state, path, _turn_key(call, result), work=ignored)


def _prompted(data: dict[str, Any], state: str, path: str, settings: Settings) -> None:
    """The person's prompt forgets the counts; a task's notice, only when it is news."""
    prompt = data.get("prompt")
    if is_persons_prompt(prompt):
        _reset(state, path)
        return
    if not isinstance(prompt, str) or not os.path.lexists(path):
        return
    from ..engine.tool_repeat import notice_result

    result = notice_result(prompt)
    with store.locked(state):
        kept = store.load(path)
        if kept is None:
            return
        counts = store.counter(kept, MAIN_SCOPE, settings)
        counts.note_notice(result)
        store.keep(path, _run_afresh(kept), MAIN_SCOPE, counts, settings)


def _run_afresh(kept: dict[str, Any]) -> dict[str, Any]:
    """The record after a task's notice (mid-turn): the re-prompt run starts afresh."""
    turn = store.turn_of(kept)
    return store.with_turn(kept, {**turn, "run": {}}) if "run" in turn else kept


def _result_of(data: dict[str, Any], event: str) -> tuple[object, bool]:
    if event == "PostToolUseFailure":
        return data.get("error"), True
    return data.get("tool_response"), False


def _keyed(data: dict[str, Any], name: str, content: object, is_error: bool) -> tuple[str, str]:
    """The call's key and its result's digest (before the lock: a huge output delays no other)."""
    from ..engine.calls import call_key
    from ..engine.tool_repeat import result_digest

    return (call_key(name, data.get("tool_input"), text_of(data.get("cwd"))),
            result_digest(content, is_error=is_error))


def _turn_key(call: str, result: str) -> str:
    """A call with its result, as the turn's results seen are kept."""
    from ..light import hex_digest

    return hex_digest(f"{call}\x00{result}", 16)


def _person_answered(data: dict[str, Any], event: str) -> bool:
    from ..engine.calls import person_answered

    failed = event == "PostToolUseFailure"
    return person_answered(data.get("error") if failed else None, is_error=failed)


def _reset(state: str, path: str) -> None:
    if not os.path.lexists(path):
        return
    try:
        with store.locked(state):
            store.remove(path)
    except store.Busy:
        store.remove(path)  # a stale refusal would be worse than a count lost


def _before(data: dict[str, Any], state: str, path: str, name: str, scope: str,
            settings: Settings, env: dict[str, str]) -> dict[str, Any] | None:
    kept = store.load(path)
    if kept is None:
        return None
    tool_input = data.get("tool_input")
    cwd = text_of(data.get("cwd"))
    tool_use_id = text_of(data.get("tool_use_id"))
    state_now = _file_state(name, tool_input, cwd)
    if store.counter(kept, scope, settings).refusal(name, tool_input, cwd=cwd,
                                                    file_state=state_now) is None:
        return None  # the common case: decided without the lock
    import time

    now = time.time()
    try:
        with store.locked(state):  # count the refused attempt: the ladder's last step
            kept = store.load(path)
            counts = store.counter(kept, scope, settings)
            refusal = counts.refusal(name, tool_input, tool_use_id, cwd=cwd, now=now,
                                     file_state=state_now)
            if refusal is None:
                return None
            refused = counts.note_refusal(refusal)
            store.keep(path, kept, scope, counts, settings)
    except store.Busy:
        refused = 0  # refused all the same; the count of refusals waits for the next one
        refusal = store.counter(kept, scope, settings).refusal(
            name, tool_input, tool_use_id, cwd=cwd, now=now, file_state=state_now)
        if refusal is None:
            return None
    from ..engine.calls import call_label
    from . import tool_words as words

    label = call_label(name, tool_input, words.LABEL_LIMIT)
    if refused <= 1:  # one record per refused call; its stop says how many attempts
        _log(state, "refusal", data, refusal, label, scope)
    stops = refused >= settings.tool_repeat_stop
    first = refused <= 1 and not stops
    if refusal.shape:  # an edit that would go back again (edits.RULE_EDIT_OSCILLATION)
        output = words.oscillation_refusal(label, refusal.shape_count, first=first)
    elif refusal.waited:  # a call that waited past its bound
        output = words.waited_refusal(label, refusal.waited, first=first)
    else:
        output = words.refusal(label, refusal.count, first=first)
    if not stops:
        return output
    if scope != MAIN_SCOPE:
        # A subagent's run ends; the session's turn goes on (2.1.332).
        _log_subagent_stop(state, data, refusal, refused)
        return words.subagent_stop(label, refused, output)
    from .stopping import stop_turn

    return stop_turn(data, state=state, label=label, refused=refused, env=env, output=output,
                     detail=words.waited_detail(label, refusal.waited) if refusal.waited
                     else "")


def _after(data: dict[str, Any], state: str, path: str, event: str, name: str, scope: str,
           settings: Settings) -> dict[str, Any] | None:
    if data.get("is_interrupt") is True:
        return None  # the person stopped it: not a result of the call
    content, is_error = _result_of(data, event)
    tool_input = data.get("tool_input")
    import time

    call, result = _keyed(data, name, content, is_error)
    now = time.time()
    move = _move(data, name, tool_input) if not is_error else None
    tree: str | None = None
    while True:
        try:
            with store.locked(state):
                kept = store.load(path)
                counts = store.counter(kept, scope, settings)
                if tree is not None or not counts.would_repeat(
                        call, name, result, failed=is_error, tool_input=tool_input):
                    waiting = counts.waits(name, tool_input)
                    repeat = counts.record_call(call, name, content, is_error,
                                                text_of(data.get("tool_use_id")),
                                                result=result, tool_input=tool_input,
                                                now=now, tree=tree, move=move)
                    if repeat.count == 0:
                        return None
                    created = kept is None
                    if scope == MAIN_SCOPE:
                        # Work: a result new in the turn, or a wait within its bound or
                        # that went on until just now (the answers after it are idle).
                        kept = store.with_result(kept, _turn_key(call, result), work=waiting and (
                            repeat.count == 1 or _bound_reached(repeat, settings)))
                    store.keep(path, kept, scope, counts, settings)
                    break
        except store.Busy:
            if scope == MAIN_SCOPE:
                store.mark_work(path)  # not counted: work, when in doubt
            raise
        # A repeat unless the working tree changed: fingerprinted outside the lock.
        from .worktree import fingerprint

        tree = fingerprint(text_of(data.get("cwd"))) or ""
    if created:
        store.prune(state, now=now, keep=path)
    if repeat.count < settings.tool_repeat_warn and not repeat.shape:
        return None
    return _tell(data, state, event, name, tool_input, scope, settings, counts, repeat)


def _bound_reached(repeat: ToolRepeat, settings: Settings) -> bool:
    """A waiting call's result stayed the same for the wait bound, just now."""
    return bool(repeat.waited) and repeat.count == settings.tool_repeat_block


def _file_state(name: str, tool_input: object, cwd: str) -> str | None:
    """An edit's file's state on disk now (None for any other call, or unreadable)."""
    from ..engine.edits import FILE_CHANGING_TOOLS, edited_file

    if name not in FILE_CHANGING_TOOLS:
        return None
    from .worktree import file_state

    return file_state(edited_file(tool_input), cwd)


def _move(data: dict[str, Any], name: str, tool_input: object) -> tuple[str, str] | None:
    """An edit's file's states before and after (as Claude Code hands them, else disk)."""
    from ..engine.edits import FILE_CHANGING_TOOLS, states_of_result

    if name not in FILE_CHANGING_TOOLS:
        return None
    states = states_of_result(data.get("tool_response"))
    if states is not None:
        return states
    after = _file_state(name, tool_input, text_of(data.get("cwd")))
    return ("", after) if after else None


def _tell(data: dict[str, Any], state: str, event: str, name: str, tool_input: object,
          scope: str, settings: Settings, counts: ToolRepeatCounter, repeat: ToolRepeat
          ) -> dict[str, Any] | None:
    """What the model and the person are told after a step of the ladder, if anything."""
    from ..engine.calls import call_label
    from . import tool_words as words

    label = call_label(name, tool_input, words.LABEL_LIMIT)
    waited = _bound_reached(repeat, settings)
    if repeat.shape or waited or repeat.count == settings.tool_repeat_warn:
        # (the watcher logs only the calls of sessions whose hooks keep no counts)
        _log(state, "detection", data, repeat, label, scope)
    if repeat.shape:  # a file edited back and forth (edits.RULE_EDIT_OSCILLATION)
        return words.oscillation(event, label, repeat.shape_count, refused_at=counts.refused_return)
    if waited:
        return words.waited(event, label, repeat.waited)
    if repeat.count == settings.tool_repeat_warn:
        return words.warning(event, label, repeat.count, block=settings.tool_repeat_block)
    if repeat.count >= settings.tool_repeat_block:
        return words.final_warning(event, label, repeat.count)
    return None


def _log(state: str, kind: str, data: dict[str, Any], repeat: ToolRepeat, label: str,
         scope: str) -> None:
    """One record in the detection log, for the watcher and ``loop-killer status``."""
    from pathlib import Path

    from ..state.journal import REFUSAL, ToolRecord, append

    subagent = scope != MAIN_SCOPE
    transcript = text_of(data.get("transcript_path"))
    append(Path(state), ToolRecord(
        refused=kind == REFUSAL, rule=repeat.shape or RULE_TOOL_REPEAT,
        session_id=text_of(data.get("session_id")), tool=repeat.name, call=label,
        count=repeat.shape_count if repeat.shape else repeat.count, tool_use_id=repeat.tool_use_id,
        project=os.path.basename(os.path.dirname(transcript)), transcript_path=transcript,
        source="hook", agent_id=scope if subagent else None,
        agent_type=text_of(data.get("agent_type")) if subagent else None))


def _log_subagent_stop(state: str, data: dict[str, Any], refusal: ToolRepeat, refused: int) -> None:
    """The outcome of a subagent's tool loop: its run was ended."""
    from pathlib import Path

    from ..state.journal import OutcomeRecord, append

    transcript = text_of(data.get("transcript_path"))
    append(Path(state), OutcomeRecord(
        session_id=text_of(data.get("session_id")), answer_uuid=refusal.tool_use_id,
        rule=RULE_TOOL_REPEAT, outcome="stopped", count=refused,
        detail="the subagent's run was ended; the session's turn goes on",
        project=os.path.basename(os.path.dirname(transcript)), transcript_path=transcript,
        source="hook"))
