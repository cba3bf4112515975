"""The Stop hook's shell: read the hook input, decide, act, print one JSON object, exit 0.

Run at the end of every main-session turn (``python -m loop_killer.hook``, started by the
plugin's ``hooks/launch.py``). A normal turn costs the interpreter's start, one JSON
parse, a ``scandir``, an ``lstat`` and two small reads of ``/proc``: nothing heavy is
imported unless a request is pending or this reply answers a re-prompt, and nothing ever
waits unless this reply fires.

Every run for a reply that answers a re-prompt leaves the session's anchor (``anchor``):
the re-prompt that reply answered, as judged from the transcript, or one more than the
last anchor when the transcript was not read (a watcher covered it, a request was taken,
the run failed). So the next reply's hook knows which re-prompt it answers.

Whatever happens, the hook exits 0 and never prints ``decision: block`` (which would
re-prompt the model) nor writes to stderr: at worst it blocks nothing and says so in a
short ``systemMessage``. It never writes to the transcript.
"""

from __future__ import annotations

import json
import os
import sys
import time

from . import decide
from .entry import parse_json

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a normal turn does not import typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["run", "run_input"]


def run(
    raw: bytes,
    *,
    env: dict[str, str],
    spawn_time: float | None = None,
) -> dict[str, Any] | None:
    """The whole decision for one Stop; returns the hook's output JSON, or None for none.

    ``spawn_time``: when this hook's process started (seconds since the epoch; ``main``
    reads it from ``/proc``); None when unknown.
    """
    return run_input(parse_json(raw), env=env, spawn_time=spawn_time)


def run_input(data: Any, *, env: dict[str, str], spawn_time: float | None = None
              ) -> dict[str, Any] | None:
    """``run`` for hook input already parsed (``entry`` parses it once for every event)."""
    hook_input = decide.parse_input(data)
    if hook_input is None:
        return None
    state = state_dir(env)
    _sweep_outcomes(state)
    # This reply answers a re-prompt: whatever happens below, the anchor moves on.
    keeper = _Anchoring(state, hook_input, spawn_time) if hook_input.stop_hook_active else None
    try:
        if _request_waiting(state, hook_input.session_id):
            request = _claim(state, hook_input, _last_prompt_time(hook_input.transcript_path))
            if request is not None:
                return _Act(hook_input, state, env).on_request(request)
        if keeper is None:
            return None  # this reply answers a person's prompt: it cannot fire
        return _Check(hook_input, state, env, spawn_time, keeper).run()
    finally:
        if keeper is not None:
            keeper.settle()


class _Anchoring:
    """Saves the session's anchor exactly once per run: as judged, or advanced by one."""

    def __init__(self, state: str, hook_input: decide.HookInput, spawn_time: float | None
                 ) -> None:
        self.state = state
        self.input = hook_input
        self.spawn_time = spawn_time
        self.previous: Any = None
        self.done = False

    def current(self) -> Any:
        """The anchor the previous reply's hook left, if it is from this turn."""
        from .anchor import previous_anchor, read_anchor

        self.previous = previous_anchor(read_anchor(self.state, self.input.session_id),
                                        spawn_time=self.spawn_time,
                                        prompt_id=self.input.prompt_id)
        return self.previous

    def save(self, anchor: Any, *, size: int | None) -> None:
        from .anchor import Anchor, save_anchor

        self.done = True
        judged = Anchor(anchor.base, anchor.skip, offset=anchor.offset,
                        turn_before=anchor.turn_before, prompt_id=self.input.prompt_id)
        save_anchor(self.state, self.input.session_id, judged, prev=self.previous, size=size)

    def settle(self) -> None:
        """Nothing judged this reply's place: count it as the one after the anchor's."""
        if self.done:
            return
        self.done = True
        try:
            from .anchor import advance_anchor
            from .wait import file_size

            advance_anchor(self.state, self.input.session_id,
                           size=file_size(self.input.transcript_path),
                           prompt_id=self.input.prompt_id, spawn_time=self.spawn_time)
        except Exception:  # noqa: BLE001, S110 - the anchor is best effort, the stop is not
            pass


# -- the request, the watcher and the local check ----------------------------------------


class _Check:
    """Steps 4 and 5 of ``decide``: the watcher's view, the tail, the wait."""

    def __init__(self, hook_input: decide.HookInput, state: str, env: dict[str, str],
                 spawn_time: float | None, keeper: _Anchoring) -> None:
        self.input = hook_input
        self.state = state
        self.env = env
        self.spawn_time = spawn_time
        self.keeper = keeper

    def run(self) -> dict[str, Any] | None:
        hook_input = self.input
        alive, status = False, None
        if os.path.exists(os.path.join(self.state, "watcher.json")):  # else: never ran here
            from pathlib import Path

            from ..state.status import read_session_status, watcher_alive

            state_path = Path(self.state)
            alive = watcher_alive(state_path) is not None
            status = read_session_status(state_path, hook_input.session_id) if alive else None
        from .wait import file_size

        size = file_size(hook_input.transcript_path)
        if not decide.needs_local_check(
            watcher_alive=alive,
            status_offset=status.offset if status else None,
            run_length=status.run_length if status else 0,
            chain_length=status.chain_length if status else 0,
            transcript_size=size,
        ):
            return self._late_request(None)
        from .local_detect import judge, read_tail

        anchor = self.keeper.current()
        try:
            tail = read_tail(hook_input.transcript_path, anchor=anchor)
        except OSError as error:
            return self._late_request(None) or _note_once(
                self.state, f"transcript-{hook_input.session_id}",
                f"cannot read this session's transcript ({error.strerror or error}); "
                "loops in it are not being watched by the Stop hook")
        judgement = judge(
            tail,
            session_id=hook_input.session_id,
            message=hook_input.last_assistant_message,
            stop_hook_active=hook_input.stop_hook_active,
            spawn_time=self.spawn_time,
            already_fired=_already_fired(self.state, hook_input.session_id),
            anchor=anchor,
        )
        if judgement.anchor is not None:  # before acting: a firing reply counts too
            self.keeper.save(judgement.anchor, size=tail.end)
        if judgement.detection is None:
            return self._late_request(judgement) if alive else None
        if alive and status is not None:  # a watcher that follows this session
            request = self._wait_for_watcher(judgement)
            if request is not None:
                return _Act(hook_input, self.state, self.env).on_request(request, judgement)
        return _Act(hook_input, self.state, self.env).on_detection(judgement)

    def _late_request(self, judgement: Any) -> dict[str, Any] | None:
        """The watcher writes its request before the status that covers the answer: look
        once more, so a request written while this hook read the status is not missed."""
        if not _request_waiting(self.state, self.input.session_id):
            return None
        request = _claim(self.state, self.input, None)
        if request is None:
            return None
        return _Act(self.input, self.state, self.env).on_request(request, judgement)

    def _wait_for_watcher(self, judgement: Any) -> Any:
        """This reply fires: give a live watcher a moment to fire on it too, and take its
        request, so that one detection is logged, not two."""
        from pathlib import Path

        from ..state.status import read_session_status
        from .wait import poll

        state_path = Path(self.state)
        seen = False

        def look() -> Any:
            nonlocal seen
            if _request_waiting(self.state, self.input.session_id):
                request = _claim(self.state, self.input, None)
                if request is not None:
                    return request
            status = read_session_status(state_path, self.input.session_id)
            if decide.watcher_has_seen(status_offset=status.offset if status else None,
                                       reply_end=judgement.reply_end):
                seen = True
                return False
            return None

        found = poll(look, timeout=decide.WAIT_FOR_WATCHER, interval=decide.POLL_INTERVAL)
        if found is False and seen:
            # Seen, and the request (written first) is not there: one last look.
            return _claim(self.state, self.input, None) if _request_waiting(
                self.state, self.input.session_id) else None
        return found or None


class _Act:
    """Stop the turn and get ``/goal clear`` run: the mod, a typing hand, or nobody."""

    def __init__(self, hook_input: decide.HookInput, state: str, env: dict[str, str]) -> None:
        self.input = hook_input
        self.state = state
        self.env = env

    def on_request(self, request: Any, judgement: Any = None) -> dict[str, Any]:
        from .notice import Firing

        firing = Firing(request.rule, request.count, request.run_length, request.source)
        return self._fire(firing, answer_uuid=request.answer_uuid,
                          answer_digest=request.answer_digest, judgement=judgement,
                          log_detection=False)

    def on_detection(self, judgement: Any) -> dict[str, Any]:
        from ..engine.rules import text_digest
        from .notice import Firing

        detection = judgement.detection
        message = self.input.last_assistant_message or detection.answers[-1].text
        firing = Firing(detection.rule, detection.count, detection.run_length, "hook")
        return self._fire(firing, answer_uuid=judgement.reply_uuid,
                          answer_digest=text_digest(message), judgement=judgement,
                          log_detection=True)

    def _fire(self, firing: Any, *, answer_uuid: str, answer_digest: str, judgement: Any,
              log_detection: bool) -> dict[str, Any]:
        from . import notice
        from .actuator import type_goal_clear, write_mod_plan_record
        from .wait import file_size

        hook_input = self.input
        transcript = hook_input.transcript_path
        common = {
            "session_id": hook_input.session_id,
            "answer_uuid": answer_uuid,
            "rule": firing.rule,
            "project": os.path.basename(os.path.dirname(transcript)),
            "transcript_path": transcript,
        }
        if log_detection:
            self._journal({
                "event": "detection", **common,
                "answer_digest": answer_digest,
                "prompt_uuid": getattr(judgement, "prompt_uuid", ""),
                "count": firing.count,
                "run_length": firing.run_length,
                "reply_in_file": bool(getattr(judgement, "reply_in_file", False)),
                "case": getattr(judgement, "case", ""),
                "located_by": getattr(judgement, "located_by", ""),
                "snippet": (hook_input.last_assistant_message or "")[:200],
                "source": "hook",
            })
        goal_set = self._goal_set(judgement)
        hands = decide.choose_hands(mod_active=hook_input.mod_active, env=self.env)
        plan = None
        why = evidence = ""
        acted = decide.HANDS_NONE
        if hands == decide.HANDS_MOD:
            acted = hands
            clear_goal = goal_set is not False  # "No goal set" is harmless; a missed goal is not
            key = f"{hook_input.session_id}.{time.time_ns():x}"
            outcome_path = ""
            if clear_goal:  # without a goal the mod runs nothing and reports nothing
                try:
                    outcome_path = write_mod_plan_record(self.state, key, {
                        **common, "id": key, "offset": file_size(transcript) or 0,
                        "clear_goal": clear_goal, "at": time.time(),
                    })
                except OSError:
                    pass
            plan = notice.mod_plan(firing, plan_id=key, session_id=hook_input.session_id,
                                   clear_goal=clear_goal, outcome_path=outcome_path)
            outcome = notice.OUTCOME_QUEUED if clear_goal else notice.OUTCOME_NO_GOAL
        elif goal_set and hands in (decide.HANDS_TMUX, decide.HANDS_SCREEN):
            acted = hands
            typed = type_goal_clear(hands, env=self.env, transcript_path=transcript)
            outcome, why, evidence = typed.outcome, typed.why, typed.evidence
        else:
            outcome, why = decide.outcome_without_typing(goal_set=bool(goal_set), hands=hands)
        self._journal({
            "event": "outcome", **common,
            "outcome": outcome,
            "hands": acted,
            "detail": notice.notice(firing, outcome, why=why),
            "evidence": evidence,
            "source": "hook",
        })
        return notice.hook_output(firing, outcome, why=why, plan=plan)

    def _goal_set(self, judgement: Any) -> bool | None:
        """Whether a goal is set (neither met nor cleared); None when it cannot be told."""
        goal = getattr(judgement, "goal", None) if judgement is not None else None
        if goal is None:
            from .local_detect import last_goal_status

            try:
                goal = last_goal_status(self.input.transcript_path)
            except OSError:
                return None
        return goal is not None and not goal.met

    def _journal(self, record: dict[str, Any]) -> None:
        from pathlib import Path

        from ..state import journal

        journal.append(Path(self.state), record)


# -- small I/O helpers ---------------------------------------------------------------------


def state_dir(env: dict[str, str]) -> str:
    """loop-killer's state folder, as ``state.paths.state_dir`` computes it (a test keeps
    the two equal); here without pathlib, which a normal turn need not import."""
    configured = env.get("LOOP_KILLER_STATE_DIR")
    if configured:
        return os.path.expanduser(configured)
    config = env.get("CLAUDE_CONFIG_DIR")
    if config:
        return os.path.join(os.path.expanduser(config), "loop-killer")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".claude", "loop-killer")


def _request_waiting(state: str, session_id: str) -> bool:
    """Whether something sits at the session's request path (checked without reading it)."""
    try:
        os.lstat(os.path.join(state, "requests", f"{session_id}.json"))
    except OSError:
        return False
    return True


def _claim(state: str, hook_input: decide.HookInput, last_prompt_at: float | None) -> Any:
    from pathlib import Path

    from ..state.inbox import claim_request

    return claim_request(Path(state), hook_input.session_id, last_prompt_at=last_prompt_at)


def _last_prompt_time(path: str) -> float | None:
    from .local_detect import last_prompt_time

    try:
        return last_prompt_time(path)
    except OSError:
        return None


def _sweep_outcomes(state: str) -> None:
    """Log what the mod did after earlier stops (one ``scandir`` when there is nothing)."""
    try:
        with os.scandir(os.path.join(state, "outcomes")) as entries:
            if not any(entry.name.endswith(".plan") for entry in entries):
                return
    except OSError:
        return
    from pathlib import Path

    from ..state import journal
    from .actuator import sweep_mod_outcomes

    try:
        sweep_mod_outcomes(state, lambda record: journal.append(Path(state), record))
    except OSError:
        pass


def _already_fired(state: str, session_id: str) -> set[str]:
    """Uuids of this session's answers that already fired, and of the re-prompts they
    answered (from the detection log's tail, read safely)."""
    from pathlib import Path

    from ..state import journal

    entry = journal.fired(Path(state), session_id).get(session_id)
    return entry.answers | entry.prompts if entry is not None else set()


def _note_once(state: str, key: str, text: str) -> dict[str, Any] | None:
    """A short systemMessage, shown once per ``key`` (a marker file remembers it)."""
    from .notice import failure_message

    folder = os.path.join(state, "notes")
    try:
        from ..state.paths import ensure_private_dir

        ensure_private_dir(folder)
        fd = os.open(os.path.join(folder, key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except FileExistsError:
        return None
    except OSError:
        pass
    return failure_message(text)


