"""Tool-repeat loops: the same tool call giving the same result, again and again.

Pure: plain values in, plain values out; no files, no clock.

* A *call* is a tool's name plus its input (``call_key``): canonical JSON of the input, or
  for a shell tool (``Bash``, ``PowerShell``) only its command, whitespace collapsed.
* Its *result* is the tool's output made comparable (``result_key``): ANSI codes,
  timestamps and clock times, durations and memory addresses are masked, and whether it
  was an error is kept.
* The same call giving the same result again counts one more; a different result starts
  that call's count afresh at 1. Counts are per call within the person's turn: other calls
  in between change nothing, nor do Stop-hook re-prompts; the person's next prompt
  (``reset``) clears them all. Subagents keep their own counter (one counter per scope).
* On the ``TOOL_REPEAT_WARN``-th identical result the model is told to stop; once a call
  has ``TOOL_REPEAT_BLOCK`` identical results, its next attempt is refused (``refusal``)
  until the person speaks or the call changes.
* Tools that poll by design (``DEFAULT_IGNORED``) are never counted.

The counter keeps only digests: per call, its last result and count, at most
``MAX_CALLS`` calls (the least recently seen go first), so it fits a small state file
(``to_state`` / ``from_state``) that the tool-call hooks keep between processes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final

from ..digest import hex_digest

if TYPE_CHECKING:
    from .pairing import ToolPairing
    from .transcript import Event

__all__ = [
    "DEFAULT_IGNORED",
    "MAX_CALLS",
    "REFUSED_MARK",
    "RULE_TOOL_REPEAT",
    "STATE_VERSION",
    "TOOL_REPEAT_BLOCK",
    "TOOL_REPEAT_WARN",
    "ToolRepeat",
    "ToolRepeatCounter",
    "call_key",
    "call_label",
    "is_ignored",
    "is_refusal",
    "repeat_label",
    "result_key",
]

TOOL_REPEAT_WARN = 3
"""On this many identical results in a row of one call (same tool, same input, same
output; other calls in between do not count), the model is told, in the tool's result
context, to stop, say why it keeps failing, and change something or ask."""

TOOL_REPEAT_BLOCK = 4
"""After this many identical results of one call, the next attempt of that same call is
refused before it runs, until the person speaks again or the call changes."""

RULE_TOOL_REPEAT: Final = "TOOL_REPEAT"
"""The rule's name in the detection log."""

DEFAULT_IGNORED: frozenset[str] = frozenset({
    # Reading a background job's (or agent's) output until it finishes: polling by design.
    "TaskOutput", "BashOutput", "BashOutputTool", "AgentOutput", "AgentOutputTool",
    # Waiting on purpose: a scheduled wake-up of a /loop, MCP servers still connecting,
    # new notifications.
    "ScheduleWakeup", "WaitForMcpServers", "ReadNotifications",
    # The person answers these: they are in the loop already.
    "AskUserQuestion", "ExitPlanMode",
})
"""Tools never counted. Entries may be ``fnmatch`` patterns (``mcp__ci__*``)."""

REFUSED_MARK = "loop-killer: refused"
"""Every refusal's reason holds this; a tool result holding it (Claude Code shows the
model ``PreToolUse:<tool> hook error: <reason>``) is our refusal, not the call's result."""

MAX_CALLS = 200
"""Calls remembered per counter; the least recently seen are forgotten first."""

STATE_VERSION = 1

_SHELL_TOOLS = frozenset({"Bash", "PowerShell"})

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_ISO_MOMENT = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
# The patterns below start with a digit and check what comes before it with a lookbehind
# placed after that digit: ``re`` then skips ahead to digits instead of trying every
# position (several times faster on a long output; tests pin them to the plain forms).
_EPOCH = re.compile(r"1(?<![\w.]1)\d{9}(?:\d{3})?(?:\.\d+)?(?![\w.])")
# hh:mm[:ss[.frac]] [AM|PM] (hour 0-23), not part of a longer run such as file.py:12:34.
_CLOCK = re.compile(
    r"\d(?<![\w:.]\d)\d?(?<![3-9]\d)(?<!2[4-9])"
    r":[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?:\s?[AaPp][Mm])?(?![\w:])"
)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_UNIT = r"(?:ns|[µμu]s|ms|seconds?|secs?|s|minutes?|mins?|m(?=\d)|hours?|hrs?|h)(?![^\W\d_])"
_DURATION = re.compile(
    rf"\d(?<![\w.]\d)\d*(?:\.\d+)?\s?{_UNIT}(?:\d+(?:\.\d+)?\s?{_UNIT})*"
)


@dataclass(frozen=True, slots=True)
class ToolRepeat:
    """Where one call stands: ``count`` identical results in a row within the person's turn.

    ``count`` is 0 for a tool that is not counted (``DEFAULT_IGNORED``); ``call`` is the
    call's key (``call_key``); ``tool_use_id`` the result's (or the refused attempt's) id.
    """

    call: str
    name: str
    tool_use_id: str
    count: int

    @property
    def warn(self) -> bool:
        """This result is the one on which the model is told to stop."""
        return self.count == TOOL_REPEAT_WARN

    @property
    def blocked(self) -> bool:
        """The next attempt of this call is refused."""
        return self.count >= TOOL_REPEAT_BLOCK


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def call_key(name: str, tool_input: object) -> str:
    """The call as a comparable string: the tool's name, then its input.

    For a shell tool the input is its command with whitespace collapsed (a different
    ``description`` or ``timeout`` is the same call); for any other tool, the input's
    canonical JSON (keys sorted).
    """
    if name in _SHELL_TOOLS and isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, str):
            return f"{name} {' '.join(command.split())}"
    return f"{name} {_canonical(tool_input)}"


def call_label(name: str, tool_input: object, limit: int = 80) -> str:
    """The call in a few words for a person: ``Bash: npm test`` (one line, at most ``limit``)."""
    if isinstance(tool_input, dict):
        for field in ("command", "file_path", "path", "pattern", "url", "query"):
            value = tool_input.get(field)
            if isinstance(value, str) and value.strip():
                text = f"{name}: {' '.join(value.split())}"
                break
        else:
            text = f"{name} {_canonical(tool_input)}"
    else:
        text = name
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def repeat_label(repeat: ToolRepeat, limit: int = 80) -> str:
    """``call_label`` of the call a ToolRepeat is about, from its key alone."""
    rest = repeat.call[len(repeat.name) + 1:] if repeat.call.startswith(
        repeat.name + " ") else repeat.call
    if repeat.name in _SHELL_TOOLS:
        return call_label(repeat.name, {"command": rest}, limit)
    try:
        tool_input = json.loads(rest)
    except ValueError:
        tool_input = rest
    return call_label(repeat.name, tool_input, limit)


# Every pattern above matches a digit or an escape: an ASCII text with neither is left as
# it is. (Looked for one character at a time: ``re`` scans a character class at a tenth
# of the speed.)
_MASKED_CHARACTERS = "0123456789\x1b"


def _mask(text: str) -> str:
    if text.isascii() and not any(character in text for character in _MASKED_CHARACTERS):
        return text
    text = _ANSI.sub("", text)
    text = _ISO_MOMENT.sub("<time>", text)
    text = _EPOCH.sub("<time>", text)
    text = _CLOCK.sub("<time>", text)
    text = _ADDRESS.sub("0x…", text)
    return _DURATION.sub("<duration>", text)


def _masked(value: object) -> object:
    """Every string of a JSON value masked (so ANSI codes are gone before JSON escapes them)."""
    if isinstance(value, str):
        return _mask(value)
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    return value


def result_key(content: object, *, is_error: bool) -> str:
    """A tool's output made comparable: ``error:`` or ``ok:``, then the masked output.

    ``content`` is what the tool gave back: a string, a list of content blocks (text
    blocks count by their text), or any JSON value (a hook's ``tool_response``).
    ANSI codes, timestamps and clock times, durations (``1.2s``, ``45 ms``) and memory
    addresses (``0x7ffd…``) are masked, so two runs differing only in those are equal.
    """
    if isinstance(content, str):
        text = _mask(content)
    elif isinstance(content, list) and all(
        isinstance(block, dict) and block.get("type") == "text" for block in content
    ):
        text = _mask("\n".join(str(block.get("text", "")) for block in content))
    else:
        text = _canonical(_masked(content))
    return ("error:" if is_error else "ok:") + text


def is_ignored(name: str, ignored: Iterable[str]) -> bool:
    """Whether a tool is not counted: its name is listed, or matches a listed pattern."""
    for entry in ignored:
        if entry == name or (("*" in entry or "?" in entry or "[" in entry)
                             and fnmatchcase(name, entry)):
            return True
    return False


def is_refusal(content: object, *, is_error: bool) -> bool:
    """Whether a tool result is loop-killer's own refusal of the call (it did not run)."""
    if not is_error:
        return False
    if isinstance(content, list):
        content = " ".join(str(block.get("text", "")) for block in content
                           if isinstance(block, dict))
    return isinstance(content, str) and REFUSED_MARK in content


def _digest(text: str) -> str:
    return hex_digest(text, 20)


class ToolRepeatCounter:
    """Counts identical results per call for one scope (a session, or one subagent).

    ``record`` takes each result as it comes (the hooks), ``feed`` takes transcript events
    (the watcher, ``loop-killer scan``); ``refusal`` says whether the next attempt of a
    call must be refused; ``reset`` is the person speaking.
    """

    __slots__ = ("_block", "_calls", "_ignored", "_pairing")

    def __init__(self, *, ignored: frozenset[str] = DEFAULT_IGNORED,
                 block: int = TOOL_REPEAT_BLOCK) -> None:
        self._ignored = ignored
        self._block = block  # identical results after which the next attempt is refused
        # call digest -> (result digest, count); insertion order is recency.
        self._calls: dict[str, tuple[str, int]] = {}
        self._pairing: ToolPairing | None = None  # ``feed``'s, made on its first call

    @property
    def ignored(self) -> frozenset[str]:
        return self._ignored

    def __len__(self) -> int:
        """The number of calls remembered."""
        return len(self._calls)

    def record(self, name: str, tool_input: object, content: object, is_error: bool,
               tool_use_id: str = "") -> ToolRepeat:
        """Count one result of a call; where that call stands now.

        A result that is loop-killer's own refusal leaves the count as it was.
        """
        return self.record_call(call_key(name, tool_input), name, content, is_error,
                                tool_use_id)

    def record_call(self, call: str, name: str, content: object, is_error: bool,
                    tool_use_id: str = "") -> ToolRepeat:
        """``record`` of a call already keyed: ``call`` is ``call_key(name, input)``."""
        if is_ignored(name, self._ignored):
            return ToolRepeat(call, name, tool_use_id, 0)
        digest = _digest(call)
        if is_refusal(content, is_error=is_error):
            return ToolRepeat(call, name, tool_use_id, self._count(digest))
        result = _digest(result_key(content, is_error=is_error))
        last = self._calls.pop(digest, None)
        count = last[1] + 1 if last is not None and last[0] == result else 1
        self._calls[digest] = (result, count)
        while len(self._calls) > MAX_CALLS:
            del self._calls[next(iter(self._calls))]
        return ToolRepeat(call, name, tool_use_id, count)

    def count(self, name: str, tool_input: object) -> int:
        """Identical results in a row of this call so far (0 if ignored or never seen)."""
        if is_ignored(name, self._ignored):
            return 0
        return self._count(_digest(call_key(name, tool_input)))

    def _count(self, digest: str) -> int:
        last = self._calls.get(digest)
        return last[1] if last is not None else 0

    def refusal(self, name: str, tool_input: object, tool_use_id: str = "") -> ToolRepeat | None:
        """Where the call stands when its next attempt must be refused, else None."""
        count = self.count(name, tool_input)
        if count < self._block:
            return None
        return ToolRepeat(call_key(name, tool_input), name, tool_use_id, count)

    def reset(self) -> None:
        """The person spoke: every count starts afresh."""
        self._calls.clear()

    def feed(self, event: Event) -> list[ToolRepeat]:
        """Take one transcript event; one ToolRepeat per tool result it counted.

        A person's prompt resets; re-prompts and meta messages do not. A result written
        before its own call (seen in old transcripts) is counted when the call arrives.
        """
        pairing = self._pairing
        if pairing is None:
            from .pairing import ToolPairing  # (the hooks never feed events)

            pairing = self._pairing = ToolPairing()
        if pairing.starts_afresh(event):
            self.reset()
        return [self.record(call.name, call.input, result.content, result.is_error,
                            result.tool_use_id) for _, call, result in pairing.pair(event)]

    def to_state(self) -> dict[str, Any]:
        """The counts as a small JSON-ready value (digests only; ``feed``'s pairing of
        calls and results is not kept)."""
        return {"v": STATE_VERSION,
                "calls": [[call, result, count] for call, (result, count) in self._calls.items()]}

    @classmethod
    def from_state(cls, state: object, *, ignored: frozenset[str] = DEFAULT_IGNORED,
                   block: int = TOOL_REPEAT_BLOCK) -> ToolRepeatCounter:
        """A counter with the counts of ``to_state``; whatever is not understood is left
        out (an unreadable state is an empty counter: nothing is refused by mistake)."""
        counter = cls(ignored=ignored, block=block)
        if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
            return counter
        calls = state.get("calls")
        if not isinstance(calls, list):
            return counter
        for item in calls[-MAX_CALLS:]:
            if (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                    and isinstance(item[1], str) and isinstance(item[2], int)
                    and not isinstance(item[2], bool) and 0 < item[2] < 1_000_000):
                counter._calls.pop(item[0], None)
                counter._calls[item[0]] = (item[1], item[2])
        return counter
