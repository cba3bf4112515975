"""Every word the model and the person see from the tool-call rules, as the hooks' output JSON
(pure): ``additionalContext`` or a refusal's reason, a one-line ``systemMessage``."""

from __future__ import annotations

from typing import Any

from ..engine.calls import REFUSED_MARK
from ..engine.rules import RULE_EDIT_OSCILLATION, rule_phrase
from ..engine.tool_repeat import RULE_TOOL_REPEAT, TOOL_REPEAT_BLOCK
from ..engine.waiting import waited_words
from ..printable import printable
from .notice import MARK

__all__ = ["LABEL_LIMIT", "final_warning", "oscillation", "oscillation_refusal", "phrase",
           "refusal", "subagent_stop", "waited", "waited_detail", "waited_refusal", "warning"]

LABEL_LIMIT = 120  # the most characters of a call shown in one line
_RETRYING = "Retrying a refused call again and again ends the turn."


def phrase(count: int) -> str:
    return f"the same result {count} times in a row"


def _call(label: str) -> str:
    return printable(label, LABEL_LIMIT)


def warning(event: str, label: str, count: int, *, block: int = TOOL_REPEAT_BLOCK
            ) -> dict[str, Any]:
    """After the result that reaches TOOL_REPEAT_WARN (``block``: the count refused from)."""
    call = _call(label)
    left = block - count
    times = {1: "once", 2: "twice"}.get(left, f"{left} times")
    refused = ("loop-killer will now refuse to run it again" if left <= 0 else
               f"If it gives the same result {times} more, loop-killer will refuse to "
               "run it again")
    model = (
        f"{MARK}this exact call ({call}) has now given {phrase(count)}. Stop repeating it. "
        "Say in one or two sentences why it keeps giving the same result, then change "
        "something (the command, the code, the approach) or ask the person. "
        f"{refused} until the person's next message."
    )
    person = (f"{MARK}{call} gave {phrase(count)} ({RULE_TOOL_REPEAT}); the model was told "
              f"to change course, and after {block} the call is refused")
    return _after(event, model, person)


def oscillation(event: str, label: str, returns: int, *, refused_at: int) -> dict[str, Any]:
    """After an edit that took a file back to an earlier content ``returns`` times."""
    call = _call(label)
    model = (
        f"{MARK}this edit ({call}) took the file back to a version it already had in this "
        f"turn, for the {_ordinal(returns)} time: you are going back and forth between "
        "versions. Stop editing it. Say in one or two sentences which version is right "
        "and why, then keep that one, or ask the person. loop-killer will refuse its "
        f"{_ordinal(refused_at)} return."
    )
    person = (f"{MARK}{call}: {rule_phrase(RULE_EDIT_OSCILLATION, returns)} "
              f"({RULE_EDIT_OSCILLATION}); the model was told to settle on one version")
    return _after(event, model, person)


def oscillation_refusal(label: str, returns: int, *, first: bool = True) -> dict[str, Any]:
    """Refusing an edit that would take its file back for the ``returns``-th time."""
    call = _call(label)
    reason = (
        f"{REFUSED_MARK} to make this edit: it would take the file back to an earlier "
        f"version for the {_ordinal(returns)} time ({RULE_EDIT_OSCILLATION}). Do not retry "
        "it: keep the file as it is, say in one or two sentences which version is right "
        f"and why, and if it is not the one the file has now, ask the person. {_RETRYING}"
    )
    person = (f"{MARK}refused {call}: it would be "
              f"{rule_phrase(RULE_EDIT_OSCILLATION, returns)} ({RULE_EDIT_OSCILLATION}); "
              "the model was told to keep the file as it is or ask you")
    return _deny(reason, person, first=first)


def _ordinal(number: int) -> str:
    if number in _ORDINALS:
        return _ORDINALS[number]
    suffix = "th" if number % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(
        number % 10, "th")
    return f"{number}{suffix}"


_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def final_warning(event: str, label: str, count: int) -> dict[str, Any]:
    """After a result at or past TOOL_REPEAT_BLOCK: the next attempt will be refused."""
    model = (
        f"{MARK}this exact call ({_call(label)}) has given {phrase(count)}. loop-killer will "
        "refuse to run it again until the person's next message. Do something different, "
        "or explain what is wrong and ask the person."
    )
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": model}}


def refusal(label: str, count: int, *, first: bool = True) -> dict[str, Any]:
    """Refusing an attempt of a call that reached TOOL_REPEAT_BLOCK."""
    call = _call(label)
    # Claude Code shows the reason's first lines to the person too: what happened first.
    reason = (
        f"{REFUSED_MARK} to run this call again: it gave {phrase(count)} "
        f"({RULE_TOOL_REPEAT}); it runs again after the person's next message. Do not retry "
        "it: explain why it keeps giving the same result, then try something different or "
        f"ask the person. {_RETRYING}"
    )
    person = f"{MARK}refused {call}: it gave {phrase(count)} ({RULE_TOOL_REPEAT}); it runs " \
             "again after your next message"
    return _deny(reason, person, first=first)


def waited_detail(label: str, seconds: float) -> str:
    """A call that waited past its bound, as the turn's stop names it."""
    return f"{_call(label)} waited {waited_words(seconds)} with no change"


def waited(event: str, label: str, seconds: float) -> dict[str, Any]:
    """After a waiting call's result stayed the same for the whole wait bound."""
    call = _call(label)
    how_long = waited_words(seconds)
    model = (
        f"{MARK}this call ({call}) waits for something, and its result has not changed in "
        f"{how_long}. Stop waiting on it: loop-killer will refuse to run it again until "
        "the person's next message. Say what you were waiting for and what you saw, then "
        "check why it is not moving or ask the person."
    )
    person = (f"{MARK}{call} waited {how_long} with no change ({RULE_TOOL_REPEAT}); the "
              "model was told to stop waiting, and the call is refused from now on")
    return _after(event, model, person)


def waited_refusal(label: str, seconds: float, *, first: bool = True) -> dict[str, Any]:
    """Refusing a waiting call whose result stayed the same past the wait bound."""
    call = _call(label)
    how_long = waited_words(seconds)
    reason = (
        f"{REFUSED_MARK} to run this call again: it waited {how_long} with no change "
        f"({RULE_TOOL_REPEAT}); it runs again after the person's next message. Do not retry "
        "it: say what you were waiting for and what you saw, then check why it is not "
        f"moving or ask the person. {_RETRYING}"
    )
    person = (f"{MARK}refused {call}: it waited {how_long} with no change "
              f"({RULE_TOOL_REPEAT}); it runs again after your next message")
    return _deny(reason, person, first=first)


def _deny(reason: str, person: str, *, first: bool) -> dict[str, Any]:
    output: dict[str, Any] = {"systemMessage": person} if first else {}
    return {
        **output,
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        },
    }


def _after(event: str, model: str, person: str) -> dict[str, Any]:
    return {
        "systemMessage": person,
        "hookSpecificOutput": {"hookEventName": event, "additionalContext": model}}


def subagent_stop(label: str, refused: int, output: dict[str, Any]) -> dict[str, Any]:
    """Refusing a subagent's attempt (``output``) and ending its run."""
    said = (f"{MARK}{RULE_TOOL_REPEAT}: a subagent's refused call ({_call(label)}) tried "
            f"{refused} more times; the subagent was stopped")
    return {**output, "continue": False, "stopReason": said, "systemMessage": said}
