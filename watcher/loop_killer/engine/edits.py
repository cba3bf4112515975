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
content it had before:

* an ``Edit`` (or ``MultiEdit``) that undoes an earlier change to the file (its new text
  was that change's old text, and the other way round);
* a ``Write`` of a content the file was written with before in the turn.

On the ``EDIT_OSCILLATION_WARN``-th return of a file (edit, revert, edit: the 2nd) the
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
_MAX_MOVES = 16  # changes remembered per file

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


def _moves(name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
    """(this change, the change that would undo it), as digests; None when unknown."""
    if name == "Write" and isinstance(tool_input.get("content"), str):
        content = "=" + _digest(tool_input["content"])
        return content, content  # writing it again is the return
    if name == "Edit":
        old, new = tool_input.get("old_string"), tool_input.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            return f"{_digest(old)}>{_digest(new)}", f"{_digest(new)}>{_digest(old)}"
    if name == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        edits = [(e.get("old_string"), e.get("new_string")) for e in tool_input["edits"]
                 if isinstance(e, dict)]
        undo = [(new, old) for old, new in reversed(edits)]
        return _digest(canonical(edits)), _digest(canonical(undo))
    return None


def _change(name: str, tool_input: object) -> tuple[str, str, str] | None:
    """(the file's key, this change, the change that would undo it), as digests; None
    when the input names no file or no change that can be followed."""
    if not isinstance(tool_input, dict):
        return None
    path = edited_file(tool_input)
    moves = _moves(name, tool_input)
    if not path or moves is None:
        return None
    return _digest(path), *moves


class EditHistory:
    """The changes made to each file in one scope's turn, and their returns."""

    __slots__ = ("_files",)

    def __init__(self) -> None:
        # file digest -> [returns, moves (oldest first)]; insertion order is recency
        self._files: dict[str, tuple[int, list[str]]] = {}

    def note(self, name: str, tool_input: object) -> int:
        """A successful change by a file-changing call; how many times it has taken the
        file back to an earlier content in this turn (0 when this change did not)."""
        change = _change(name, tool_input)
        if change is None:
            return 0
        key, move, undo = change
        returns, seen = self._files.pop(key, (0, []))
        went_back = undo in seen
        if went_back:
            returns += 1
        seen = [*seen[-(_MAX_MOVES - 1):], move]
        self._files[key] = (returns, seen)
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        return returns if went_back else 0

    def would_return(self, name: str, tool_input: object) -> int:
        """Which return of its file this change would be, were it made now (0: none)."""
        change = _change(name, tool_input)
        if change is None:
            return 0
        key, _, undo = change
        returns, seen = self._files.get(key, (0, []))
        return returns + 1 if undo in seen else 0

    def most_returns(self) -> int:
        """The most returns any one file has made in this turn."""
        return max((returns for returns, _ in self._files.values()), default=0)

    def clear(self) -> None:
        self._files.clear()

    def to_state(self) -> dict[str, Any]:
        return {key: [returns, moves] for key, (returns, moves) in self._files.items()}

    @classmethod
    def from_state(cls, state: object) -> EditHistory:
        """What ``to_state`` gave; anything not understood is left out."""
        history = cls()
        if not isinstance(state, dict):
            return history
        for key, value in list(state.items())[-MAX_FILES:]:
            if (isinstance(key, str) and isinstance(value, list) and len(value) == 2
                    and isinstance(value[0], int) and not isinstance(value[0], bool)
                    and 0 <= value[0] < 1000 and isinstance(value[1], list)
                    and all(isinstance(move, str) for move in value[1])):
                history._files[key] = (value[0], list(value[1][-_MAX_MOVES:]))
        return history


def _digest(text: str) -> str:
    return hex_digest(text, 16)
