"""Tool-repeat loops: the same tool call giving the same result, again and again.

Pure: plain values in, plain values out; no files, no clock.

* A *call* is a tool's name plus its input (``call_key``): canonical JSON of the input, or
  for a shell tool (``Bash``, ``PowerShell``) only its command, whitespace collapsed; and
  the folder it runs in (the session's ``cwd``), where known: ``npm test`` in six packages
  of a monorepo is six calls.
* Its *result* is the tool's output made comparable (``masking.result_key``: ANSI codes,
  dates and times, durations, memory addresses and the values that change on every run,
  such as request ids, UUIDs and temporary paths, masked; whether it was an error kept).
* The same call giving the same result again counts one more; a different result starts
  that call's count afresh at 1. Counts are per call within the person's turn: other calls
  in between change nothing, nor do Stop-hook re-prompts; the person's next prompt
  (``reset``) clears them all. Subagents keep their own counter (one counter per scope).
* A change the session made to the files (a successful ``Edit``, ``Write``, ``MultiEdit``
  or ``NotebookEdit`` that is not itself a repeat) starts every count afresh at its next
  result: a check run after an edit checks something new.
* On the ``TOOL_REPEAT_WARN``-th identical result the model is told to stop; once a call
  has ``TOOL_REPEAT_BLOCK`` identical results, its next attempt is refused (``refusal``)
  until the person speaks, the call changes or the session changes a file; after
  ``TOOL_REPEAT_STOP`` refused attempts of one call in a turn the turn itself is ended
  (the hooks). A model that heeded a refusal and moved on is not stopped by the next.
* An edit that would take a file back for the 4th time in a back-and-forth (a return of
  depth 4: ``edits.EditHistory``, ``edits.REFUSED_RETURN_AFTER_WARN``) is refused too, and
  the refused edits of one file count towards that stop as one call's attempts: one
  ladder for both shapes.
* A call that waits for the world (``waiting.waits``: ``sleep 60 && gh pr checks``, a
  background job's output, Claude Code's task tools) is never warned or refused by its
  count: only once its result has stayed the same for the wait bound (``wait``, seconds;
  ``waiting.WAIT_MINUTES``) is it a loop, refused from its next attempt.
* Refused attempts end the turn only when nothing new came of the turn since the last
  one (``note_refusal``): a goal whose other calls advance goes on, its refused call still
  refused.
* A question put to the person (``ANSWERED_BY_PERSON``) resets every count only when the
  person answered it; one that failed with nobody to answer is an ordinary call.
* Tools the person lists (``ignored``) are never counted.

The counter keeps only digests: per call, its last result and count, at most
``MAX_CALLS`` calls (the least recently seen go first), so it fits a small state file
(``to_state`` / ``from_state``) that the tool-call hooks keep between processes.
"""

from __future__ import annotations

import posixpath

from ..light import Value, hex_digest, loads
from .edits import (
    EDIT_OSCILLATION_WARN,
    FILE_CHANGING_TOOLS,
    REFUSED_RETURN_AFTER_WARN,
    SUBAGENT_TOOLS,
    EditHistory,
    change_digest,
    edited_file,
)
from .masking import canonical, result_key
from .rules import RULE_EDIT_OSCILLATION
from .shell import SHELL_TOOLS, leading_cd
from .waiting import WAIT_MINUTES, waits

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Final

    from .pairing import ToolPairing
    from .transcript import Event

__all__ = [
    "ANSWERED_BY_PERSON",
    "DEFAULT_IGNORED",
    "MAX_CALLS",
    "NOT_THE_PERSON",
    "REFUSED_MARK",
    "RULE_TOOL_REPEAT",
    "STATE_VERSION",
    "TOOL_CALL_RULES",
    "TOOL_REPEAT_BLOCK",
    "TOOL_REPEAT_STOP",
    "TOOL_REPEAT_WARN",
    "ToolRepeat",
    "ToolRepeatCounter",
    "call_key",
    "call_label",
    "is_ignored",
    "is_persons_prompt",
    "person_answered",
    "is_refusal",
    "notice_result",
    "repeat_label",
    "result_digest",
]

TOOL_REPEAT_WARN = 3
"""On this many identical results in a row of one call (same tool, same input, same
output; other calls in between do not count), the model is told, in the tool's result
context, to stop, say why it keeps failing, and change something or ask."""

TOOL_REPEAT_BLOCK = 4
"""After this many identical results of one call, the next attempt of that same call is
refused before it runs, until the person speaks again or the call changes."""

TOOL_REPEAT_STOP = 3
"""After this many refused attempts of one call in a turn (past TOOL_REPEAT_BLOCK), the
turn is ended: a model that keeps retrying a refused call is a loop of its own."""

RULE_TOOL_REPEAT: Final = "TOOL_REPEAT"
"""The rule's name in the detection log."""

TOOL_CALL_RULES: Final = (RULE_TOOL_REPEAT, RULE_EDIT_OSCILLATION)
"""The rules the tool-call hooks judge (the detection log names a call for each)."""

DEFAULT_IGNORED: frozenset[str] = frozenset()
"""Tools never counted, unless the person lists some (``fnmatch`` patterns allowed:
``mcp__ci__*``). None by default: the tools that poll by design wait
(``waiting.WAITING_TOOLS``), and waiting is bounded in time, not by count."""

ANSWERED_BY_PERSON: frozenset[str] = frozenset({"AskUserQuestion", "ExitPlanMode"})
"""Tools whose result is the person's answer when it succeeded (or the person turned it
down: ``person_answered``): the person spoke, as with a new prompt, and every count starts
afresh (a refused call runs again). Failed with nobody to answer (``Tool permission
request failed: Error: Stream closed``, seen 8 times in a row in a real session), it is
an ordinary call, counted like any other."""

_TURNED_DOWN = ("the user doesn't want to proceed", "user rejected", "the user rejected")
"""How Claude Code words a call the person turned down (``The user doesn't want to proceed
with this tool use. The tool use was rejected...``)."""


def person_answered(content: object, *, is_error: bool) -> bool:
    """Whether a question put to the person (``ANSWERED_BY_PERSON``) got their answer: it
    succeeded, or failed because they turned it down."""
    if not is_error:
        return True
    if isinstance(content, list):
        content = " ".join(str(block.get("text", "")) for block in content
                           if isinstance(block, dict))
    return isinstance(content, str) and any(
        words in content[:4096].lower() for words in _TURNED_DOWN)

NOT_THE_PERSON = ("<task-notification>",)
"""How prompts begin that Claude Code submits itself (``UserPromptSubmit`` fires for them
mid-turn, with the turn's ``prompt_id``: measured on 2.1.332, a background job or
subagent that finished). They are not the person speaking: the counts go on, unless
the notice is news (``ToolRepeatCounter.note_notice``)."""


def is_persons_prompt(prompt: object) -> bool:
    """Whether a submitted prompt is the person's (anything but Claude Code's own)."""
    return not (isinstance(prompt, str) and prompt.lstrip().startswith(NOT_THE_PERSON))


_NOTICE_IDS = ("task-id", "tool-use-id", "output-file")
"""What differs in every notice of a background task: not what it says happened."""


def notice_result(prompt: str) -> str:
    """What a background task's notice says happened (its status and summary), as a
    result digest: the same failure told again is no news."""
    said = prompt[:65536]
    for tag in _NOTICE_IDS:
        start = said.find(f"<{tag}>")
        end = said.find(f"</{tag}>", start)
        if start >= 0 and end >= 0:
            said = said[:start] + said[end + len(tag) + 3:]
    return result_digest(said, is_error=False)


_NOTICE_CALL = "<background task notice>"
"""Where the last notice is kept among the calls (no tool has this name)."""

REFUSED_MARK = "loop-killer: refused"
"""Every refusal's reason holds this; a tool result holding it (Claude Code shows the
model ``PreToolUse:<tool> hook error: <reason>``) is our refusal, not the call's result."""

MAX_CALLS = 200
"""Calls remembered per counter; the least recently seen are forgotten first."""

STATE_VERSION = 1
_CWD_MARK = "\n@ "  # between a call and its folder in a call key (never inside a call)



class ToolRepeat(Value):
    """Where one call stands: ``count`` identical results in a row within the person's turn.

    ``count`` is 0 for a tool that is not counted (``DEFAULT_IGNORED``); ``call`` is the
    call's key (``call_key``; for an edit refused for going back and forth, its file's);
    ``tool_use_id`` the result's (or the refused attempt's) id.
    """

    __slots__ = ("call", "name", "tool_use_id", "count", "shape", "shape_count", "waited")
    call: str
    name: str
    tool_use_id: str
    count: int
    # Another shape this result completes (``edits.RULE_EDIT_OSCILLATION``), and its count.
    shape: str
    shape_count: int
    # For a call that waits (``waiting.waits``) past its bound: the seconds its result
    # stayed the same; else 0.
    waited: float

    def __init__(self, call: str, name: str, tool_use_id: str, count: int, shape: str = "",
                 shape_count: int = 0, waited: float = 0.0) -> None:
        self._set(call=call, name=name, tool_use_id=tool_use_id, count=count, shape=shape,
                  shape_count=shape_count, waited=waited)

    @property
    def warn(self) -> bool:
        """This result is the one on which the model is told to stop."""
        return self.count == TOOL_REPEAT_WARN

    @property
    def blocked(self) -> bool:
        """The next attempt of this call is refused."""
        return self.count >= TOOL_REPEAT_BLOCK


def call_key(name: str, tool_input: object, cwd: str = "") -> str:
    """The call as a comparable string: the tool's name, then its input, then (when
    known) the folder it runs in.

    For a shell tool the input is its command with whitespace collapsed (a different
    ``description`` or ``timeout`` is the same call); for any other tool, the input's
    canonical JSON (keys sorted). ``cwd``: the session's working folder as the call ran
    (a hook's ``cwd``; a tool result line's ``cwd``), so one command in many folders is
    many calls.
    """
    where = f"{_CWD_MARK}{cwd}" if cwd else ""
    if name in SHELL_TOOLS and isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, str):
            return f"{name} {' '.join(command.split())}{where}"
    return f"{name} {canonical(tool_input)}{where}"


def moved_to(name: str, tool_input: object, cwd: str) -> str:
    """The folder a shell command's leading ``cd X &&`` (or ``cd X;``) moves to from
    ``cwd``; "" for any other call, or a folder that cannot be told from the words
    (``~``, a variable).

    Claude Code hands PreToolUse the folder before the call and PostToolUse the one after
    it, and a ``cd`` in a command that succeeds stays in effect (measured on 2.1.332): a
    call counted after it ran in X is the same call when it is about to run from
    elsewhere (``cd /repo/api && npm test 2>&1 | tail`` alternating with the same in
    ``/repo/web`` was never refused).
    """
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if name not in SHELL_TOOLS or not isinstance(command, str):
        return ""
    target = leading_cd(command)
    if not target:
        return ""
    if target.startswith("~") or "$" in target or "`" in target:
        return ""
    if not target.startswith("/") and not cwd.startswith("/"):
        return ""
    return posixpath.normpath(posixpath.join(cwd, target))


def call_label(name: str, tool_input: object, limit: int = 80) -> str:
    """The call in a few words for a person: ``Bash: npm test`` (one line, at most ``limit``)."""
    if isinstance(tool_input, dict):
        for field in ("command", "file_path", "path", "pattern", "url", "query"):
            value = tool_input.get(field)
            if isinstance(value, str) and value.strip():
                text = f"{name}: {' '.join(value.split())}"
                break
        else:
            text = f"{name} {canonical(tool_input)}"
    else:
        text = name
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def repeat_label(repeat: ToolRepeat, limit: int = 80) -> str:
    """``call_label`` of the call a ToolRepeat is about, from its key alone."""
    call = repeat.call.split(_CWD_MARK, 1)[0]
    rest = call[len(repeat.name) + 1:] if call.startswith(repeat.name + " ") else call
    if repeat.name in SHELL_TOOLS:
        return call_label(repeat.name, {"command": rest}, limit)
    try:
        tool_input = loads(rest)
    except ValueError:
        tool_input = rest
    return call_label(repeat.name, tool_input, limit)



def is_ignored(name: str, ignored: Iterable[str]) -> bool:
    """Whether a tool is not counted: its name is listed, or matches a listed pattern."""
    for entry in ignored:
        if entry == name:
            return True
        if "*" in entry or "?" in entry or "[" in entry:
            from fnmatch import fnmatchcase  # (only for a pattern: not on every call's path)

            if fnmatchcase(name, entry):
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
    call must be refused, ``note_refusal`` counts the refused attempts of each call;
    ``reset`` is the person speaking. ``now`` (seconds since the epoch: the hook's clock,
    a transcript line's timestamp) times the calls that wait; unknown, they never count.
    """

    __slots__ = ("_block", "_calls", "_changes", "_edits", "_ignored", "_oscillation",
                 "_pairing", "_progress", "_refused", "_wait", "_waited_last")

    def __init__(self, *, ignored: frozenset[str] = DEFAULT_IGNORED,
                 block: int = TOOL_REPEAT_BLOCK,
                 oscillation: int = EDIT_OSCILLATION_WARN,
                 wait: float = WAIT_MINUTES * 60) -> None:
        self._ignored = ignored
        self._block = block  # identical results after which the next attempt is refused
        self._oscillation = oscillation  # a file's returns that warn (0: never)
        self._wait = wait  # seconds a waiting call's result may stay the same
        self._edits = EditHistory()
        # call digest -> (result digest, count, changes, since, tree, failed, progress,
        # waits); insertion order is recency. ``changes``: how many file changes the
        # session had made at that result; ``since``: when the call first gave that
        # result (0: not known); ``tree``: the working tree's fingerprint then ("" not
        # taken); ``failed``: it was an error; ``progress``: the turn's new results then;
        # ``waits``: the call waits (``waits``, or it came right after a call that does).
        self._calls: dict[str, _Last] = {}
        self._changes = 0  # file changes made in the turn (``changes_files``)
        self._progress = 0  # new results in the turn (a call's result it had not given)
        # The last call recorded waited itself (``sleep 60``): the check right after it
        # (``gh pr checks 42``) waits too.
        self._waited_last = False
        # call digest -> (attempts refused with nothing new between them, ``_progress``
        # at the last)
        self._refused: dict[str, tuple[int, int]] = {}
        self._pairing: ToolPairing | None = None  # ``feed``'s, made on its first call

    @property
    def ignored(self) -> frozenset[str]:
        return self._ignored

    @property
    def wait(self) -> float:
        """Seconds a waiting call's result may stay the same before it is a loop."""
        return self._wait

    @property
    def refused_return(self) -> int:
        """The depth of a return (a file edited back to an earlier content) refused before
        it is made; 0 when the oscillation rule is off."""
        return self._oscillation + REFUSED_RETURN_AFTER_WARN if self._oscillation else 0

    def __len__(self) -> int:
        """The number of calls remembered."""
        return len(self._calls)

    def record(self, name: str, tool_input: object, content: object, is_error: bool,
               tool_use_id: str = "", *, cwd: str = "", now: float | None = None,
               move: tuple[str, str] | None = None) -> ToolRepeat:
        """Count one result of a call; where that call stands now.

        A result that is loop-killer's own refusal leaves the count as it was.
        """
        return self.record_call(call_key(name, tool_input, cwd), name, content, is_error,
                                tool_use_id, tool_input=tool_input, now=now, move=move)

    def record_call(self, call: str, name: str, content: object, is_error: bool,
                    tool_use_id: str = "", *, result: str | None = None,
                    failed: bool | None = None, tool_input: object = None,
                    now: float | None = None, tree: str | None = None,
                    move: tuple[str, str] | None = None) -> ToolRepeat:
        """``record`` of a call already keyed: ``call`` is ``call_key(name, input, cwd)``.

        ``result``: the result's digest (``result_digest``), when computed already (the
        hooks compute it before they take their lock). ``failed``: whether the call
        failed, when ``is_error`` does not say it (the stand-ins hand on no error flag).
        ``tool_input``: the call's input, for the shapes that read it (edits, waiting).
        ``now``: when the result came (seconds since the epoch), if known. ``tree``: the
        working tree's fingerprint as it came (``worktree.fingerprint``), taken when
        ``would_repeat`` said so; "" when it could not be told (then the files count as
        changed); None when not measured (the transcript's readers). ``move``: for an
        edit, its file's states before and after it (``edits.states_of_result``, or the
        disk), if known.
        """
        failed = is_error if failed is None else failed
        if name in ANSWERED_BY_PERSON and person_answered(content, is_error=failed):
            self.reset()
            return ToolRepeat(call, name, tool_use_id, 0)
        if is_ignored(name, self._ignored):
            return ToolRepeat(call, name, tool_use_id, 0)
        digest = _digest(call)
        if is_refusal(content, is_error=is_error):
            return ToolRepeat(call, name, tool_use_id, self._count(digest))
        if result is None:
            result = result_digest(content, is_error=is_error)
        itself = waits(name, tool_input)
        waiting, self._waited_last = self._waited_last or itself, itself
        last = self._calls.pop(digest, None)
        same = last is not None and self._same(last, result, failed, tree, waiting)
        since = last[3] if last is not None and same else (now or 0.0)
        waited = 0.0
        if not same:
            count = 1
            self._progress += 1
        elif waiting:
            count, waited = self._waiting(last, since, now)
        else:
            count = last[1] + 1 if last is not None else 1
        shape, shape_count = "", 0
        # The session's own edit is a change to the files Claude Code tells of, so every
        # check after it is new: one that succeeds changed its file (its old text was
        # there again), unless it repeats itself with nothing changed between; one that
        # failed changed nothing. A subagent's run may change any file. Any other writer
        # (a formatter, a script, the person) is measured, not read from its words: the
        # tree's fingerprint when a result repeats.
        if name in FILE_CHANGING_TOOLS:
            # (an edit that left its file as it was, a Write of what is there, is none)
            if count == 1 and not failed and not (move and move[0] == move[1]):
                self._changes += 1
                depth = self._edits.note(edited_file(tool_input), *move,
                                         change_digest(tool_input),
                                         warn_at=self._oscillation) if move else 0
                if depth:
                    shape, shape_count = RULE_EDIT_OSCILLATION, depth
        elif name in SUBAGENT_TOOLS and count == 1:
            self._changes += 1
        kept_tree = tree if tree is not None else (last[4] if last is not None and same
                                                   else "")
        self._calls[digest] = (result, count, self._changes, since, kept_tree, failed,
                               self._progress, waiting)
        while len(self._calls) > MAX_CALLS:
            del self._calls[next(iter(self._calls))]
        return ToolRepeat(call, name, tool_use_id, count, shape, shape_count, waited)

    def would_repeat(self, call: str, name: str, result: str, *, failed: bool,
                     tool_input: object = None) -> bool:
        """Whether a result of ``call`` (keyed, ``call_key``) would repeat its last one
        with no change to the files known: the same result, or a failure after a failure
        (the shell then measures the tree, and ``record_call`` takes it as ``tree``). A
        call seen for the first time, and an edit, never pay for it."""
        if name in FILE_CHANGING_TOOLS or is_ignored(name, self._ignored):
            return False
        last = self._calls.get(_digest(call))
        return last is not None and self._may_repeat(last, result, failed,
                                                     self.waits(name, tool_input))

    def waits(self, name: str, tool_input: object) -> bool:
        """Whether this call waits for the world (``waiting.waits``), or comes right after
        a call that does (``sleep 60``, then ``gh pr checks 42``)."""
        return self._waited_last or waits(name, tool_input)

    def _may_repeat(self, last: _Last, result: str, failed: bool, waiting: bool) -> bool:
        """Whether a result repeats the call's last one as far as the session knows, with
        no change it made between (its own edits): the same result, or a failure after a
        failure with no new result of any other call in between (a package installed, a
        script written, a migration run: progress the tree may not show). A call that
        waits keeps its time bound instead of the second."""
        if last[2] != self._changes:
            return False
        return last[0] == result or (failed and last[5] and last[6] == self._progress
                                     and not waiting)

    def _same(self, last: _Last, result: str, failed: bool, tree: str | None,
              waiting: bool) -> bool:
        """``_may_repeat``, and no change the tree's fingerprint shows (or cannot rule
        out). A failure that says something else this time is a repeat only measured:
        nothing changed on disk, so nothing the model did could have made it pass;
        unmeasured (the transcript's readers), only the same error again is."""
        if not self._may_repeat(last, result, failed, waiting):
            return False
        if last[0] != result and not tree:
            return False
        return tree is None or (bool(tree) and (not last[4] or tree == last[4]))

    def _waiting(self, last: _Last | None, since: float,
                 now: float | None) -> tuple[int, float]:
        """(count, seconds waited) of a waiting call's same result again: 1 while within
        the bound (or its time is not known); past it, refused from the next attempt."""
        if last is None or not since or now is None or now - since < self._wait:
            return 1, 0.0
        return max(last[1] + 1, self._block), now - since

    def count(self, name: str, tool_input: object, *, cwd: str = "") -> int:
        """Identical results in a row of this call so far, with no file changed since (0
        if ignored or never seen; 1 for a call that waits, within its bound)."""
        if is_ignored(name, self._ignored):
            return 0
        return self._count(_digest(call_key(name, tool_input, cwd)))

    def _count(self, digest: str) -> int:
        last = self._calls.get(digest)
        return last[1] if last is not None and last[2] == self._changes else 0

    def repeated(self, name: str, tool_input: object, *, cwd: str = "") -> bool:
        """Whether this call's last result was one it had given already, with nothing
        changed between, and not while it waited within its bound: no new work (the Stop
        hook asks, for a call whose result is not in the transcript yet). The result that
        reached the bound is the last of the waiting: the answers after it are idle."""
        last = self._calls.get(_digest(call_key(name, tool_input, cwd)))
        if last is None or last[2] != self._changes:
            return False
        return last[1] > self._block if last[7] else last[1] >= 2

    def waited(self, name: str, tool_input: object, *, cwd: str = "",
               now: float | None = None) -> float:
        """Seconds a waiting call's result has stayed the same (0 for any other call, or
        when not known)."""
        last = self._calls.get(_digest(call_key(name, tool_input, cwd)))
        if last is None or not last[3] or now is None or not last[7]:
            return 0.0
        return max(0.0, now - last[3])

    def refusal(self, name: str, tool_input: object, tool_use_id: str = "", *,
                cwd: str = "", now: float | None = None, file_state: str | None = None
                ) -> ToolRepeat | None:
        """Where the call stands when its next attempt must be refused, else None.
        ``cwd``: the folder before it runs (PreToolUse's); the call is also looked up in
        the folder its leading ``cd`` moves to (``moved_to``), where it was counted.
        An edit refused for going back and forth has ``shape`` EDIT_OSCILLATION and the
        return it would have been as ``shape_count``; a call that waited past its bound,
        the seconds it waited as ``waited`` (``now``: the clock). ``file_state``: for an
        edit, its file's state on disk now (``edits.content_digest``), if read."""
        moved = moved_to(name, tool_input, cwd)
        for folder in (cwd, moved) if moved else (cwd,):
            count = self.count(name, tool_input, cwd=folder)
            if count >= self._block:
                return ToolRepeat(call_key(name, tool_input, folder), name, tool_use_id,
                                  count, waited=self.waited(name, tool_input, cwd=folder,
                                                            now=now))
        if self.refused_return and name in FILE_CHANGING_TOOLS and file_state is not None:
            depth = self._edits.would_return(edited_file(tool_input), file_state,
                                             change_digest(tool_input))
            if depth >= self.refused_return:
                # Keyed by the file alone: its edits back and forth, with whichever tool
                # from whichever folder, are one refused call.
                return ToolRepeat(f"{RULE_EDIT_OSCILLATION} {edited_file(tool_input)}", name,
                                  tool_use_id, 0, RULE_EDIT_OSCILLATION, depth)
        return None

    def note_notice(self, result: str) -> bool:
        """Claude Code told the model a background task ended (``notice_result``): when
        that is news, the world changed as after an edit, and every count starts afresh
        (a refused call runs again: a log polled until the build ended may say more now).
        The same notice again changes nothing, so a model restarting a crashing server
        and probing it is still stopped. Returns whether it was news."""
        digest = _digest(_NOTICE_CALL)
        last = self._calls.pop(digest, None)
        news = last is None or last[0] != result
        if news:
            self._changes += 1
            self._progress += 1
        self._calls[digest] = (result, 1, self._changes, 0.0, "", False, self._progress,
                               False)
        return news

    def refusable(self) -> bool:
        """Whether any call's next attempt would be refused now (the launcher runs the
        package for a PreToolUse only then: ``tools.store``'s marker)."""
        # (+ 2: the next time one of its moves is made again)
        if self.refused_return and self._edits.deepest() + 2 >= self.refused_return:
            return True
        return any(count >= self._block and changes == self._changes
                   for _, count, changes, *_ in self._calls.values())

    @property
    def refused(self) -> int:
        """The most attempts of one call refused with nothing new between them."""
        return max((count for count, _ in self._refused.values()), default=0)

    def note_refusal(self, refusal: ToolRepeat) -> int:
        """One more attempt of the call ``refusal`` is about refused in this turn; how many
        of its attempts in a row with nothing new coming of the turn between them (a new
        result of any call starts the count afresh: a turn that advances is not stuck,
        though the call stays refused)."""
        digest = _digest(refusal.call)
        count, at = self._refused.pop(digest, (0, self._progress))
        count = count + 1 if at == self._progress else 1
        self._refused[digest] = (count, self._progress)
        while len(self._refused) > MAX_CALLS:
            del self._refused[next(iter(self._refused))]
        return count

    def reset(self) -> None:
        """The person spoke: every count starts afresh."""
        self._calls.clear()
        self._changes = 0
        self._progress = 0
        self._waited_last = False
        self._refused.clear()
        self._edits.clear()

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
                            result.tool_use_id, cwd=result.cwd, move=result.move,
                            now=event_seconds(event) if self.waits(call.name, call.input)
                            else None)
                for _, call, result in pairing.pair(event)]

    def to_state(self) -> dict[str, Any]:
        """The counts as a small JSON-ready value (digests only; ``feed``'s pairing of
        calls and results is not kept)."""
        return {"v": STATE_VERSION, "changes": self._changes, "progress": self._progress,
                "waited_last": self._waited_last,
                "refused": {digest: list(refused) for digest, refused in self._refused.items()},
                "calls": [[call, *last] for call, last in self._calls.items()],
                "edits": self._edits.to_state()}

    @classmethod
    def from_state(cls, state: object, *, ignored: frozenset[str] = DEFAULT_IGNORED,
                   block: int = TOOL_REPEAT_BLOCK,
                   oscillation: int = EDIT_OSCILLATION_WARN,
                   wait: float = WAIT_MINUTES * 60) -> ToolRepeatCounter:
        """A counter with the counts of ``to_state``; whatever is not understood is left
        out (an unreadable state is an empty counter: nothing is refused by mistake)."""
        counter = cls(ignored=ignored, block=block, oscillation=oscillation, wait=wait)
        if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
            return counter
        calls = state.get("calls")
        if not isinstance(calls, list):
            return counter
        counter._changes = _small(state.get("changes"))
        counter._progress = _small(state.get("progress"))
        counter._waited_last = state.get("waited_last") is True
        counter._edits = EditHistory.from_state(state.get("edits"))
        refused = state.get("refused")
        if isinstance(refused, dict):
            for digest, kept in list(refused.items())[-MAX_CALLS:]:
                # (an older version's plain count: as if nothing came since)
                count, at = (kept if isinstance(kept, list) and len(kept) == 2
                             else (kept, counter._progress))
                if isinstance(digest, str) and _small(count) > 0:
                    counter._refused[digest] = (_small(count), _small(at))
        for item in calls[-MAX_CALLS:]:
            if (isinstance(item, list) and 3 <= len(item) <= 9 and isinstance(item[0], str)
                    and isinstance(item[1], str) and _small(item[2]) > 0):
                changes = _small(item[3]) if len(item) >= 4 else 0
                since = _moment(item[4]) if len(item) >= 5 else 0.0
                tree = item[5] if len(item) >= 6 and isinstance(item[5], str) else ""
                failed = len(item) >= 7 and item[6] is True
                # (an older state has no progress: nothing new since, as it was then)
                progress = _small(item[7]) if len(item) >= 8 else counter._progress
                waiting = len(item) == 9 and item[8] is True
                counter._calls.pop(item[0], None)
                counter._calls[item[0]] = (item[1], item[2], changes, since, tree[:80], failed,
                                           progress, waiting)
        return counter


_Last = tuple[str, int, int, float, str, bool, int, bool]
"""What the counter keeps of a call's last result (``ToolRepeatCounter._calls``)."""


def event_seconds(event: Event) -> float | None:
    """When a transcript event was written (seconds since the epoch), if it says. (Read
    only for the calls that wait: the others' results are never timed.)"""
    timestamp = getattr(event, "timestamp", "")
    if not isinstance(timestamp, str) or not timestamp:
        return None
    from .transcript import parse_timestamp  # (the hooks never feed events)

    return parse_timestamp(timestamp)


def _moment(value: object) -> float:
    """A moment read back from a state file: a plain positive number, else 0 (unknown)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e11:
        return float(value)
    return 0.0


def _small(value: object) -> int:
    """A count read back from a state file: a plain int in range, else 0."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1_000_000:
        return value
    return 0


def result_digest(content: object, *, is_error: bool) -> str:
    """The digest of ``result_key``: what the counter keeps of a result."""
    return _digest(result_key(content, is_error=is_error))
