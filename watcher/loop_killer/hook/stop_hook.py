"""The Stop hook's shell: take a request, or judge this reply; stop the turn if needed.

Run at the end of every main-session turn that the launcher could not settle from stdin
and one ``lstat`` (``plugin/hooks/launch.py``: a reply to a person's prompt with no
request pending never reaches the package). The steps are ``decide``'s.

Every run for a reply that answers a re-prompt leaves the session's anchor (``anchor``):
the re-prompt that reply answered, as judged from the transcript, or one more than the
last anchor when the transcript was not read (a request was taken, the run failed). So
the next reply's hook knows which re-prompt it answers.

Nobody waits for anybody: the watcher and this hook may both judge the same answer; the
one that records it first (``state.records``, an exclusive create keyed by the re-prompt
the answer answered) logs it, and a request for an answer a hook already stopped is void.

With ``LOOP_KILLER_DEBUG=1`` in Claude Code's environment, each judgement and each request
taken is also written to ``hook-debug.log`` in the state folder (one JSON line each): why
a reply did or did not fire, where it was found and which re-prompt it answered.

Whatever happens, the hook never prints ``decision: block`` (which would re-prompt the
model): at worst it blocks nothing and says so in a short ``systemMessage``. It never
writes to the transcript.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings, load_settings
from ..engine.rules import text_digest
from ..engine.tool_repeat import RULE_TOOL_REPEAT
from ..state import records
from ..state.files import NotAFile
from ..state.notes import first_time
from ..state.paths import request_waiting, state_dir
from . import decide, notice, parse_json
from .anchor import Anchor, advance_anchor, previous_anchor, read_anchor, save_anchor
from .judge import Judgement, judge
from .tail import last_prompt_time, read_tail
from .wait import file_size

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..engine.tool_repeat import ToolRepeatCounter
    from ..engine.transcript import ToolCall
    from ..state.journal import OutcomeRecord

# Acting (``act``: the hands, typing, subprocesses), requests (``state.inbox``) and the
# mod's outcome records are imported only when this turn needs them: most re-prompted
# turns only judge.

__all__ = ["run", "run_input", "state_dir"]


def run(raw: bytes, *, env: dict[str, str], spawn_time: float | None = None
        ) -> dict[str, Any] | None:
    """The whole decision for one Stop; returns the hook's output JSON, or None for none.

    ``spawn_time``: when this hook's process started (seconds since the epoch; ``entry``
    reads it from ``/proc``); None when unknown.
    """
    return run_input(parse_json(raw), env=env, spawn_time=spawn_time)


def run_input(data: Any, *, env: dict[str, str], spawn_time: float | None = None,
              settings: Settings | None = None) -> dict[str, Any] | None:
    """``run`` for hook input already parsed (``entry`` parses it once for every event,
    and loads the settings: loaded here when None)."""
    hook_input = decide.parse_input(data)
    if hook_input is None:
        return None
    state = state_dir(env)
    if settings is None:
        settings = load_settings(state, env)
    cwd = data.get("cwd") if isinstance(data, dict) else None
    if settings.project_off(cwd=cwd if isinstance(cwd, str) else ""):
        return None
    _sweep_outcomes(state)
    # This reply answers a re-prompt: whatever happens below, the anchor moves on.
    keeper = _Anchoring(state, hook_input, spawn_time) if hook_input.stop_hook_active else None
    try:
        output = _take_request(state, hook_input, env)
        if output is not None:
            return output
        if keeper is None:
            return None  # this reply answers a person's prompt: it cannot fire
        return _check(state, hook_input, env, spawn_time, keeper, settings)
    finally:
        if keeper is not None:
            keeper.settle()


def _take_request(state: Path, hook_input: decide.HookInput, env: dict[str, str]
                  ) -> dict[str, Any] | None:
    """Act on the session's fresh clear request, if one is waiting and still valid."""
    session_id = hook_input.session_id
    if not request_waiting(state, session_id):
        return None
    try:
        last_prompt_at = last_prompt_time(hook_input.transcript_path)
    except OSError:
        last_prompt_at = None
    from ..state.inbox import claim_request

    request = claim_request(state, session_id, transcript_path=hook_input.transcript_path,
                            last_prompt_at=last_prompt_at)
    if request is None:
        return None
    key = records.record_key(request.prompt_uuid, request.answer_uuid)
    void = key is not None and not records.first_to_act(state, session_id, key)
    _debug(state, env, "request", session_id=session_id, rule=request.rule,
           answer_uuid=request.answer_uuid, source=request.source, void=void)
    if void:
        return None  # a Stop hook already stopped the turn for that answer: void
    firing = notice.Firing(request.rule, request.count, request.run_length, request.source)
    return _fire(firing, request.answer_uuid, request.answer_digest, None, False,
                 hook_input=hook_input, state=state, env=env)


def _check(state: Path, hook_input: decide.HookInput, env: dict[str, str],
           spawn_time: float | None, keeper: _Anchoring, settings: Settings
           ) -> dict[str, Any] | None:
    """Judge this reply from the transcript's tail; stop the turn when a rule fires."""
    session_id = hook_input.session_id
    anchor = keeper.current()
    try:
        tail = read_tail(hook_input.transcript_path, anchor=anchor,
                         max_reprompts=settings.thresholds.reach)
    except OSError as error:
        why = "it is not a regular file" if isinstance(error, NotAFile) else (
            error.strerror or str(error))
        return _note_once(state, f"transcript-{session_id}",
                          f"cannot read this session's transcript ({why}); loops in it "
                          "are not being watched by the Stop hook")
    recorded, acted = records.recorded_and_acted(state, session_id)
    judgement = judge(
        tail,
        session_id=session_id,
        message=hook_input.last_assistant_message,
        stop_hook_active=hook_input.stop_hook_active,
        spawn_time=spawn_time,
        # Every recorded answer ends the run before it; reply N itself is not fired for
        # only when a Stop hook already stopped the turn for it: the watcher may have
        # recorded THIS reply a moment ago, and this hook is the one that stops its turn
        # (the watcher's request is then void).
        already_fired=recorded,
        acted_on=acted,
        anchor=anchor,
        thresholds=settings.thresholds,
        repeated=_repeated_calls(state, session_id, hook_input.cwd, settings)
        if settings.rule_on(RULE_TOOL_REPEAT) else None,
        ignored=settings.ignore_tools,
    )
    _debug(state, env, "judged", session_id=session_id, spawn_time=spawn_time,
           anchor=_anchor_text(anchor), tail_end=tail.end, case=judgement.case,
           located_by=judgement.located_by, reply_uuid=judgement.reply_uuid,
           reply_in_file=judgement.reply_in_file, prompt_uuid=judgement.prompt_uuid,
           run_length=judgement.run_length, chain_length=judgement.chain_length,
           fired=judgement.detection.rule if judgement.detection else None,
           next_anchor=_anchor_text(judgement.anchor))
    if judgement.anchor is not None:  # before acting: a firing reply counts too
        keeper.save(judgement.anchor, size=tail.end)
    detection = judgement.detection
    if detection is None:
        return None
    key = records.record_key(judgement.prompt_uuid, judgement.reply_uuid)
    first = True
    if key is not None:
        first = records.first_to_record(state, session_id, key, source="hook",
                                        rule=detection.rule)
        if not records.first_to_act(state, session_id, key):
            return None  # another Stop hook for this same reply (a twin) stops it
    message = hook_input.last_assistant_message or detection.answers[-1].text
    firing = notice.Firing(detection.rule, detection.count, detection.run_length, "hook")
    return _fire(firing, judgement.reply_uuid, text_digest(message), judgement, first,
                 hook_input=hook_input, state=state, env=env)


def _fire(firing: notice.Firing, answer_uuid: str, answer_digest: str,
          judgement: Judgement | None, log_detection: bool, *, hook_input: decide.HookInput,
          state: Path, env: dict[str, str]) -> dict[str, Any]:
    from .act import Fired, fire

    return fire(Fired(firing, answer_uuid, answer_digest, judgement, log_detection),
                hook_input=hook_input, state=state, env=env)


class _Anchoring:
    """Saves the session's anchor exactly once per run: as judged, or advanced by one."""

    def __init__(self, state: Path, hook_input: decide.HookInput, spawn_time: float | None
                 ) -> None:
        self.state = str(state)
        self.input = hook_input
        self.spawn_time = spawn_time
        self.previous: Anchor | None = None
        self.done = False

    def current(self) -> Anchor | None:
        """The anchor the previous reply's hook left, if it is from this turn."""
        self.previous = previous_anchor(read_anchor(self.state, self.input.session_id),
                                        spawn_time=self.spawn_time,
                                        prompt_id=self.input.prompt_id)
        return self.previous

    def save(self, anchor: Anchor, *, size: int | None) -> None:
        self.done = True
        judged = Anchor(anchor.base, anchor.skip, offset=anchor.offset,
                        turn_before=anchor.turn_before, prompt_id=self.input.prompt_id)
        save_anchor(self.state, self.input.session_id, judged, prev=self.previous, size=size)

    def settle(self) -> None:
        """Nothing judged this reply's place: count it as the one after the anchor's."""
        if self.done:
            return
        self.done = True
        # The anchor is best effort, the stop is not.
        with contextlib.suppress(Exception):
            advance_anchor(self.state, self.input.session_id,
                           size=file_size(self.input.transcript_path),
                           prompt_id=self.input.prompt_id, spawn_time=self.spawn_time)


def _repeated_calls(state: Path, session_id: str, cwd: str, settings: Settings
                    ) -> Callable[[ToolCall], bool]:
    """Whether a call repeated a result already seen, by the tool-call hooks' counts (read
    once, and only if asked: when reply N's call has no result in the file yet). Only
    while the tool-repeat rule is on: off, its hooks keep no counts (nor reset them)."""
    counts: list[ToolRepeatCounter | None] = []

    def repeated(call: ToolCall) -> bool:
        if not counts:
            from ..tools import store

            try:
                kept = store.load(store.state_path(str(state), session_id))
            except (OSError, ValueError):
                kept = None
            counts.append(None if kept is None else store.counter(kept, store.MAIN, settings))
        known = counts[0]
        # Two identical results in a row, no file changed since: the last one was seen.
        return known is not None and known.count(call.name, call.input, cwd=cwd) >= 2

    return repeated


def _sweep_outcomes(state: Path) -> None:
    """Log what the mod did after earlier stops (one ``scandir`` when there is nothing)."""
    try:
        with os.scandir(state / "outcomes") as entries:
            if not any(entry.name.endswith(".plan") for entry in entries):
                return
    except OSError:
        return
    from .mod_outcomes import sweep_mod_outcomes

    with contextlib.suppress(OSError):
        sweep_mod_outcomes(str(state), lambda record: _append(state, record))


def _append(state: Path, record: OutcomeRecord) -> None:
    from ..state import journal

    journal.append(state, record)


def _debug(state: Path, env: dict[str, str], what: str, **fields: object) -> None:
    """One line of ``hook-debug.log`` when ``LOOP_KILLER_DEBUG`` is set (best effort)."""
    if env.get("LOOP_KILLER_DEBUG", "") in ("", "0"):
        return
    import json
    import time

    from ..state.files import append_line, ensure_private_dir

    line = json.dumps({"at": round(time.time(), 3), "pid": os.getpid(), "what": what,
                       **fields}, ensure_ascii=True)
    with contextlib.suppress(OSError):
        ensure_private_dir(state)
        append_line(state / "hook-debug.log", line.encode() + b"\n")


def _anchor_text(anchor: Anchor | None) -> str | None:
    return None if anchor is None else f"{anchor.base}+{anchor.skip}@{anchor.offset}"


def _note_once(state: Path, key: str, text: str) -> dict[str, Any] | None:
    """A short systemMessage, shown once per ``key``."""
    return notice.failure_message(text) if first_time(state, key) else None
