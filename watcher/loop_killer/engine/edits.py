"""Which calls change the files, and oscillating edits (pure).

``changes_files`` tells the calls after which every check is a new one (the tool-repeat
count of any call starts afresh): Claude Code's own editing tools, a shell command that
writes (an in-place ``sed``, a redirection to a file, ``mv``, ``git checkout``...), an MCP
tool named for a change, and a subagent's whole run. It reads the command's words, not
its meaning: a script that writes without saying so (``python fix.py``) is missed, and a
command is rarely taken for a change when it is not, which costs only that the counts
start afresh once (a call that repeats itself exactly is counted all the same).

Oscillating edits: a file edited back to a content it had before in this turn.

A shape no agent we know of catches: the model edits a file, reverts the edit, edits it
again, going back and forth between two versions (each edit a different call, so the
tool-repeat count never grows). ``EditHistory`` keeps, per file, the changes made in the
person's turn (digests only). A change is a *return* when it takes the file back to a
content it had before (``_change`` says how each tool's change is read): an edit that
makes the opposite of an earlier one, an edit back to an earlier edit's old text (a
cycle of versions), a ``Write`` of a content written before, a ``MultiEdit`` undone.
A version the file never had in the turn starts its count afresh. On the
``EDIT_OSCILLATION_WARN``-th return of a file (edit, revert, edit: the 2nd) the
model is told it is going back and forth (``rules.RULE_EDIT_OSCILLATION``). Reverting is
sometimes right, so one more return is let through; the one after it (the 4th) is refused
before it is made (``EditHistory.would_return``), and refused attempts end the turn as a
refused call's do: an edit-test-revert-test loop changes the files every round, so no
call's count ever grows, and in a ``/goal`` it never ended.
"""

from __future__ import annotations

from itertools import islice

from ..light import hex_digest
from .masking import canonical

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

__all__ = [
    "EDIT_OSCILLATION_WARN",
    "FILE_CHANGING_TOOLS",
    "MAX_FILES",
    "REFUSED_RETURN_AFTER_WARN",
    "SHELL_TOOLS",
    "EditHistory",
    "changes_files",
    "leading_cd",
    "edited_file",
]

EDIT_OSCILLATION_WARN = 2
"""Returns of one file to an earlier content in a turn (edit, revert, edit) that warn."""

REFUSED_RETURN_AFTER_WARN = 2
"""How far after the return that warned comes the one refused before it is made: warned
at the 2nd, the 3rd let through (reverting is sometimes right), the 4th refused."""

MAX_FILES = 32
"""Files remembered per turn; the least recently changed are forgotten first."""
_MAX_MARKS = 32  # marks remembered per file (an edit leaves two)

FILE_CHANGING_TOOLS: frozenset[str] = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools whose success changes a file (their changes are followed below)."""

SHELL_TOOLS: frozenset[str] = frozenset({"Bash", "PowerShell"})
"""Tools whose input is a ``command`` line."""

_SUBAGENT_TOOLS = frozenset({"Task", "Agent"})  # a subagent's run may change any file

# Commands that write files whatever their arguments (by name; PowerShell's in lower case).
_WRITERS = frozenset({
    "mv", "cp", "rm", "rmdir", "mkdir", "touch", "ln", "chmod", "chown", "truncate",
    "patch", "tee", "dd", "install", "rsync", "unzip", "git-apply",
    "set-content", "add-content", "out-file", "remove-item", "move-item", "copy-item",
    "new-item", "rename-item",
})
_IN_PLACE = frozenset({"sed", "gsed", "perl", "ruby"})  # write with -i
_GIT_WRITES = frozenset({
    "add", "am", "apply", "checkout", "cherry-pick", "clean", "commit", "merge", "mv",
    "pull", "rebase", "reset", "restore", "revert", "rm", "stash", "switch",
})
_PACKAGE_TOOLS = frozenset({
    "npm", "pnpm", "yarn", "bun", "pip", "pip3", "uv", "poetry", "cargo", "go", "gem",
    "bundle", "composer", "apt", "apt-get", "brew", "conda",
})
_PACKAGE_WRITES = frozenset({
    "install", "i", "add", "remove", "rm", "uninstall", "update", "upgrade", "get", "ci",
    "sync", "tidy",
})
_FORMATTERS = frozenset({"black", "isort", "rustfmt", "autopep8", "yapf"})
_WRITE_FLAGS = frozenset({"--fix", "--write", "--in-place", "-delete"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "nice", "command", "exec", "xargs",
                       "timeout", "doas"})
_MCP_CHANGES = frozenset({
    "edit", "write", "create", "delete", "remove", "move", "rename", "patch", "apply",
    "replace", "insert", "update", "upload", "commit", "push", "merge", "save", "modify",
    "append", "set", "put",
})
_SEPARATORS = ";&|()\n`"
_SAFE_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")


def changes_files(name: str, tool_input: object) -> bool:
    """Whether a call of ``name`` with ``tool_input`` may have changed files (or other
    state a later check reads): see the module's docstring."""
    if name in FILE_CHANGING_TOOLS or name in _SUBAGENT_TOOLS:
        return True
    if name in SHELL_TOOLS:
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        return isinstance(command, str) and _shell_writes(command)
    if name.startswith("mcp__"):
        action = name.rpartition("__")[2].lower().replace("-", "_")
        return any(word in _MCP_CHANGES for word in action.split("_"))
    return False


_MAX_COMMAND = 16 * 1024
"""Characters of a command line read for writes: a longer one is read that far."""


def _shell_writes(command: str) -> bool:
    """Whether a command line writes files: a redirection to a file, or a simple command
    that writes (``_command_writes``). Quotes are honoured; heredoc bodies are not read."""
    words: list[str] = []
    for kind, text in _tokens(command[:_MAX_COMMAND]):
        if kind == ">":
            if text and not text.startswith(("&", *_SAFE_TARGETS)):
                return True
        elif kind == ";":
            if _command_writes(words):
                return True
            words = []
        else:
            words.append(text)
    return _command_writes(words)


def _tokens(command: str) -> Iterator[tuple[str, str]]:
    """A command line's words ("w", quotes removed), the ends of its simple commands
    (";", with the character that ended it) and the targets of its output redirections
    (">"; "&" for a descriptor)."""
    word: list[str] = []
    index, end = 0, len(command)
    while index < end:
        char = command[index]
        index += 1
        if char in "'\"":  # (a backslash inside double quotes is kept as it is)
            close = command.find(char, index)
            close = end if close < 0 else close
            word.append(command[index:close])
            index = close + 1
        elif char == "\\":
            word.append(command[index:index + 1])
            index += 1
        elif char == ">":
            if word and not (len(word) == 1 and word[0].isdigit()):
                yield "w", "".join(word)  # (``2>``: a descriptor, not a word)
            word = []
            index, target = _redirect_target(command, index)
            yield ">", target
        elif char in " \t" or char in _SEPARATORS:
            if word:
                yield "w", "".join(word)
                word = []
            if char in _SEPARATORS:
                yield ";", char
        else:
            word.append(char)
    if word:
        yield "w", "".join(word)


def leading_cd(command: str) -> str:
    """The folder a command line's first simple command ``cd X`` names, when the line goes
    on after it in the same shell (``cd X && ...``, ``cd X; ...``); "" otherwise (a pipe,
    ``||``, a background ``&``, a redirection, or ``cd`` alone). Read with the words
    ``changes_files`` reads (quotes honoured)."""
    tokens = list(islice(_tokens(command[:_MAX_COMMAND]), 4))
    if len(tokens) < 3 or tokens[0] != ("w", "cd") or tokens[1][0] != "w":
        return ""
    if tokens[2] == (";", ";") or tokens[2:] == [(";", "&"), (";", "&")]:
        return tokens[1][1]
    return ""


def _redirect_target(command: str, index: int) -> tuple[int, str]:
    """(where reading goes on, the word a ``>`` at ``index - 1`` redirects to)."""
    end = len(command)
    if index < end and command[index] in ">|":
        index += 1  # ``>>`` appends; ``>|`` overwrites
    if index < end and command[index] in "&(":
        return index + 1, "&"  # a descriptor (``2>&1``) or a process: no file
    while index < end and command[index] in " \t":
        index += 1
    start = index
    while index < end and command[index] not in " \t" and command[index] not in _SEPARATORS:
        index += 1
    return index, command[start:index].strip("'\"")


def _command_writes(words: list[str]) -> bool:
    """Whether one simple command (its words, quotes removed) writes files."""
    start = 0
    while start < len(words) and _is_prefix(words[start]):
        start += 1  # ``FOO=1 sudo timeout 30 xargs -0 rm``: the command is rm
    if start == len(words):
        return False
    name = words[start].rpartition("/")[2].lower()
    rest = words[start + 1:]
    if name in _WRITERS or any(word in _WRITE_FLAGS for word in rest):
        return True
    if name in _FORMATTERS or rest[:1] == ["fmt"] or (name, rest[:1]) == ("ruff", ["format"]):
        return not any(word in ("--check", "--diff") for word in rest)
    if name.startswith("python") and rest[:2] == ["-m", "pip"]:
        name, rest = "pip", rest[2:]
    if name in _PACKAGE_TOOLS:
        return _package_writes(rest)
    check = _BY_NAME.get(name)
    return check is not None and check(rest)


def _is_prefix(word: str) -> bool:
    return "=" in word or word in _PREFIXES or word.startswith("-") or word.isdigit()


def _package_writes(rest: list[str]) -> bool:
    """``npm install``, ``uv pip install``, ``go mod tidy``: by the sub-command (not by a
    later word: ``cargo test update``, ``npm run sync`` write nothing)."""
    words = [word for word in rest[:4] if not word.startswith("-")]
    if words[:1] in (["pip"], ["mod"]):
        words = words[1:]
    return bool(words) and words[0] in _PACKAGE_WRITES


def _in_place(rest: list[str]) -> bool:
    """``sed -i``, ``perl -pi``... (not ``perl -Ilib``, ``-Mstrict``)."""
    return any(word == "--in-place" or word.startswith("--in-place=")
               or (word.startswith("-") and not word.startswith(("--", "-M", "-I"))
                   and "i" in word) for word in rest)


def _git(rest: list[str]) -> bool:
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-C", "-c") else rest[1:]
    return bool(rest) and rest[0] in _GIT_WRITES


def _find(rest: list[str]) -> bool:
    """``find … -exec rm {} +`` (the command after the first ``-exec``, read without its
    own ``-exec``: a nested one cannot recurse)."""
    for flag in ("-exec", "-execdir", "-ok"):
        if flag in rest:
            command = rest[rest.index(flag) + 1:]
            return command[:1] != ["find"] and _command_writes(command)
    return False


_BY_NAME: dict[str, Callable[[list[str]], bool]] = {
    **dict.fromkeys(_IN_PLACE, _in_place),
    "git": _git,
    "find": _find,
    "gofmt": lambda rest: "-w" in rest,
}


def edited_file(tool_input: object) -> str:
    """The path a file-changing call changes ("" when its input names none)."""
    if isinstance(tool_input, dict):
        for field in ("file_path", "notebook_path", "path"):
            value = tool_input.get(field)
            if isinstance(value, str):
                return value
    return ""


class _Change:
    """One change to a file, as ``EditHistory`` follows it (digests only).

    ``move``: the change itself; ``undoes``: marks any one of which, among the file's
    earlier ones, makes this change a return; ``marks``: what it leaves for later changes
    to find (its ``move`` last); ``writes``: a whole content (the same one twice in a row
    is no change).
    """

    __slots__ = ("marks", "move", "undo_anywhere", "undoes", "writes")

    def __init__(self, move: str, undoes: tuple[str, ...], marks: tuple[str, ...],
                 writes: bool = False, undo_anywhere: str = "") -> None:
        self.move, self.undoes, self.marks, self.writes = move, undoes, marks, writes
        # A mark that begins so is a return too: the opposite change made in any place.
        self.undo_anywhere = undo_anywhere


def _change(name: str, tool_input: object) -> tuple[str, _Change] | None:
    """(the file's key, the change) for a file-changing call; None when its input names no
    file, or no change that can be followed.

    * ``Edit``: its old and new text read as ``_core`` reads them. It goes back when an
      earlier edit of the file made the opposite change (a revert; for a trivial change,
      in the same place: ``_edit_change``), or when its new text, if not a trivial one
      (``_TRIVIAL``), was an earlier edit's old text (the last step of a cycle: A, B, C,
      A).
    * ``Write``: its content; it goes back when the file was written with that content
      before, and its last change was another one.
    * ``MultiEdit``: its edits as a set; it goes back when an earlier one made each of them
      the other way round.
    """
    if not isinstance(tool_input, dict):
        return None
    path = edited_file(tool_input)
    if not path:
        return None
    change: _Change | None = None
    if name == "Write" and isinstance(tool_input.get("content"), str):
        content = "=" + _digest(tool_input["content"])
        change = _Change(content, (content,), (content,), writes=True)
    elif name == "Edit":
        core = _core(tool_input.get("old_string"), tool_input.get("new_string"))
        if core is not None:
            change = _edit_change(*core)
    elif name == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        edits = [e for e in tool_input["edits"] if isinstance(e, dict)]
        cores = [(core[0] + core[4], core[1] + core[4]) for e in edits
                 if (core := _core(e.get("old_string"), e.get("new_string"))) is not None]
        if cores and len(cores) == len(edits):
            forth = "m" + _digest(canonical(sorted(cores)))
            undo = "m" + _digest(canonical(sorted((new, old) for old, new in cores)))
            change = _Change(forth, (undo,), (forth,))
    return None if change is None else (_digest(path), change)


_TRIVIAL = 8
"""Non-space characters a text needs for an edit back to it to count as going back in a
cycle (an opposite edit always counts): ``pass``, ``}`` or nothing at all come back to a
file without anything going back and forth."""

_WHOLE = 64 * 1024
"""Characters of an edit's texts read line by line; longer ones are taken whole."""


def _edit_change(old: str, new: str, old_said: bool, new_said: bool, where: str) -> _Change:
    """An ``Edit``'s change from what ``_core`` read of it."""
    if old_said and new_said:
        return _Change(f"e{old}>{new}", (f"e{new}>{old}", f"<{new}"),
                       (f"<{old}", f"e{old}>{new}"))
    # A trivial change is told by where it is made: the opposite one made in another place
    # of the file is no revert (``}`` to ``});`` here, ``});`` to ``}`` there). One made
    # with no lines around it may be undone with some, and the other way round.
    opposite = f"e{new}>{old}@"
    return _Change(f"e{old}>{new}@{where}", (opposite + where, opposite),
                   (f"<{old}", f"e{old}>{new}@{where}") if old_said else (f"e{old}>{new}@{where}",),
                   undo_anywhere="" if where else opposite)


def _core(old: object, new: object) -> tuple[str, str, bool, bool, str] | None:
    """An edit's old and new text, as digests of what it really changes: without blank
    lines, the lines both share at either end, and each line's spacing (a revert written
    with more context, or other spacing, is the same change undone); whether each is more
    than trivial; and the digest of the lines they share ("" when none). None when the
    texts are not strings, or differ in spacing alone."""
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    if len(old) + len(new) > _WHOLE:
        return _digest(old), _digest(new), True, True, ""
    before = [line for line in (line.strip() for line in old.split("\n")) if line]
    after = [line for line in (line.strip() for line in new.split("\n")) if line]
    if before == after:
        return None
    start, shortest = 0, min(len(before), len(after))
    while start < shortest and before[start] == after[start]:
        start += 1
    end = 0
    while end < shortest - start and before[-1 - end] == after[-1 - end]:
        end += 1
    old_core = "\n".join(before[start:len(before) - end])
    new_core = "\n".join(after[start:len(after) - end])
    shared = [*before[:start], "", *before[len(before) - end:]] if start or end else []
    return (_digest(old_core), _digest(new_core), _said(old_core), _said(new_core),
            _digest("\n".join(shared)) if shared else "")


def _said(text: str) -> bool:
    return len(text) - text.count(" ") - text.count("\n") - text.count("\t") >= _TRIVIAL


class EditHistory:
    """The changes made to each file in one scope's turn, and their returns.

    A file's returns build up while it goes round versions it had: an edit that gives it
    a version it never had in the turn starts its count afresh, so trying ideas one after
    another and undoing each is not a loop, while going back and forth is, whatever else
    the turn does between. The model is warned once a turn for each file.
    """

    __slots__ = ("_files",)

    def __init__(self) -> None:
        # file digest -> [returns, warned, marks (oldest first)]; insertion order is recency
        self._files: dict[str, tuple[int, bool, list[str]]] = {}

    def note(self, name: str, tool_input: object, warn_at: int = 0) -> int:
        """A successful change by a file-changing call; its file's returns when this change
        is the one to warn about (its ``warn_at``-th return since the file's last new
        version, the first to get there in the turn), else 0."""
        judged = self._judge(name, tool_input)
        if judged is None:
            return 0
        key, change, returns, new = judged
        before, warned, marks = self._files.pop(key, (0, False, []))
        if new:
            returns = 0
        marks = [*(mark for mark in marks if mark not in change.marks), *change.marks]
        warn = bool(warn_at) and returns == warn_at and returns > before and not warned
        self._files[key] = (returns, warned or warn, marks[-_MAX_MARKS:])
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        return returns if warn else 0

    def would_return(self, name: str, tool_input: object) -> int:
        """Which return of its file this change would be, were it made now (0: none)."""
        judged = self._judge(name, tool_input)
        if judged is None:
            return 0
        key, _, returns, _ = judged
        return returns if returns > self._files.get(key, (0, False, []))[0] else 0

    def _judge(self, name: str, tool_input: object) -> tuple[str, _Change, int, bool] | None:
        """(the file's key, the change, the file's returns were it made now, whether it is
        new); None for a change that cannot be followed."""
        found = _change(name, tool_input)
        if found is None:
            return None
        key, change = found
        returns, _, marks = self._files.get(key, (0, False, []))
        if change.writes and marks and marks[-1] == change.move:
            return key, change, returns, False  # the same content again: no change
        if any(mark in marks for mark in change.undoes) or (
                change.undo_anywhere
                and any(mark.startswith(change.undo_anywhere) for mark in marks)):
            return key, change, returns + 1, False
        return key, change, returns, change.move not in marks

    def most_returns(self) -> int:
        """The most returns any one file has made since its last new version."""
        return max((returns for returns, _, _ in self._files.values()), default=0)

    def clear(self) -> None:
        self._files.clear()

    def to_state(self) -> dict[str, Any]:
        return {key: [returns, marks, warned]
                for key, (returns, warned, marks) in self._files.items()}

    @classmethod
    def from_state(cls, state: object) -> EditHistory:
        """What ``to_state`` gave; anything not understood is left out."""
        history = cls()
        if not isinstance(state, dict):
            return history
        for key, value in list(state.items())[-MAX_FILES:]:
            if (isinstance(key, str) and isinstance(value, list) and len(value) in (2, 3)
                    and isinstance(value[0], int) and not isinstance(value[0], bool)
                    and 0 <= value[0] < 1000 and isinstance(value[1], list)
                    and all(isinstance(mark, str) for mark in value[1])):
                warned = len(value) == 3 and value[2] is True
                history._files[key] = (value[0], warned, list(value[1][-_MAX_MARKS:]))
        return history


def _digest(text: str) -> str:
    return hex_digest(text, 16)
