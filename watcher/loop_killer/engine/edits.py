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
person's turn (digests only, each edit placed by the lines around it). A change that
takes the file back is a *return*: an edit that makes the opposite of an earlier one in
its place, an edit back to an earlier edit's old text there (a cycle of versions), a
``Write`` of a content written before. Its *depth* is 1 + that of the change it undoes:
edit, revert, edit goes 0, 1, 2, while a change undone in ten places, or ideas tried
one after another and each undone, stay at 1. On a change of depth
``EDIT_OSCILLATION_WARN`` (edit, revert, edit) the model is told it is going back and
forth (``rules.RULE_EDIT_OSCILLATION``), once a turn for each file. Reverting is
sometimes right, so one more return is let through; the next (depth 4) is refused
before it is made (``EditHistory.would_return``), and refused attempts end the turn as a
refused call's do: an edit-test-revert-test loop changes the files every round, so no
call's count ever grows, and in a ``/goal`` it never ended.

Edits are read by their words, not their effect, so some reverts are missed (one made
with the line above quoted, undone with the line below). Claude Code's ``Edit`` result
holds the whole file before the edit (``originalFile``, on 2.1.250 and 2.1.332): whole
contents would compare exactly, but every transcript reader would have to read it too.
"""

from __future__ import annotations

from ..light import hex_digest
from .shell import MAX_COMMAND, SHELL_TOOLS, is_prefix, tokens

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "EDIT_OSCILLATION_WARN",
    "FILE_CHANGING_TOOLS",
    "MAX_FILES",
    "REFUSED_RETURN_AFTER_WARN",
    "EditHistory",
    "changes_files",
    "edited_file",
]

EDIT_OSCILLATION_WARN = 2
"""Returns of one file to an earlier content in a turn (edit, revert, edit) that warn."""

REFUSED_RETURN_AFTER_WARN = 2
"""How far after the return that warned comes the one refused before it is made: warned
at the 2nd, the 3rd let through (reverting is sometimes right), the 4th refused."""

MAX_FILES = 32
"""Files remembered per turn; the least recently changed are forgotten first."""
_MAX_MARKS = 16  # replacements remembered per file

FILE_CHANGING_TOOLS: frozenset[str] = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools whose success changes a file (their changes are followed below)."""

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
_MCP_CHANGES = frozenset({
    "edit", "write", "create", "delete", "remove", "move", "rename", "patch", "apply",
    "replace", "insert", "update", "upload", "commit", "push", "merge", "save", "modify",
    "append", "set", "put",
})
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


def _shell_writes(command: str) -> bool:
    """Whether a command line writes files: a redirection to a file, or a simple command
    that writes (``_command_writes``). Quotes are honoured; heredoc bodies are not read."""
    words: list[str] = []
    for kind, text in tokens(command[:MAX_COMMAND]):
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


def _command_writes(words: list[str]) -> bool:
    """Whether one simple command (its words, quotes removed) writes files."""
    start = 0
    while start < len(words) and is_prefix(words[start]):
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


def _digest(text: str) -> str:
    return hex_digest(text, 16)


_REMOVED = _digest("")
"""What an edit that removes its text leaves, as ``_pair`` reads it."""

_TRIVIAL = 8
"""Non-space characters an edit's old text needs for an edit back to it to count as the
last step of a cycle (A, B, C, A): ``pass``, ``}`` or nothing at all come back to a file
without anything going back and forth."""

_WHOLE = 64 * 1024
"""Characters of an edit's texts read line by line; longer ones are taken whole."""

_PLACE_LINES = 3
"""Shared lines on either side of an edit that tell its place (boilerplate such as
``if err != nil {`` is often the nearest)."""

_NOWHERE = ("", "")


class _Pair:
    """One replacement of an edit, as ``EditHistory`` follows it (digests only).

    ``old`` and ``new``: what it really changes (``_pair``; a ``Write``: ``=`` and its
    content's digest, and ""); ``place``: the digests of up to ``_PLACE_LINES`` lines
    above and below that both texts share, nearest first (``_NOWHERE``: none); ``depth``:
    0 for a change, 1 + the depth of the change it undoes for a return; ``cycles``:
    whether an edit back to its old text closes a cycle (that text is more than trivial).
    """

    __slots__ = ("cycles", "depth", "new", "old", "place")

    def __init__(self, old: str, new: str, place: tuple[str, str], depth: int = 0,
                 cycles: bool = False) -> None:
        self.old, self.new, self.place, self.depth, self.cycles = old, new, place, depth, cycles

    @property
    def writes(self) -> bool:
        """A ``Write``'s whole content, not an edit's replacement."""
        return self.old.startswith("=")

    def state(self) -> list[Any]:
        return [self.old, self.new, *self.place, self.depth, self.cycles]

    @classmethod
    def from_state(cls, value: object) -> _Pair | None:
        if (isinstance(value, list) and len(value) == 6
                and all(isinstance(part, str) for part in value[:4])
                and isinstance(value[4], int) and not isinstance(value[4], bool)
                and 0 <= value[4] < 1000 and isinstance(value[5], bool)):
            return cls(value[0], value[1], (value[2], value[3]), value[4], value[5])
        return None


def _pairs(name: str, tool_input: object) -> tuple[str, list[_Pair]] | None:
    """(the file's key, its replacements) for a file-changing call; None when its input
    names no file, or no change that can be followed (``NotebookEdit``, a spacing change).
    A ``MultiEdit`` is its edits, each one on its own."""
    if not isinstance(tool_input, dict):
        return None
    path = edited_file(tool_input)
    if not path:
        return None
    if name == "Write":
        content = tool_input.get("content")
        if not isinstance(content, str):
            return None
        return _digest(path), [_Pair("=" + _digest(content), "", _NOWHERE)]
    if name not in ("Edit", "MultiEdit"):
        return None
    edits = [tool_input] if name == "Edit" else tool_input.get("edits")
    if not isinstance(edits, list) or not edits:
        return None
    pairs = [_pair(e.get("old_string"), e.get("new_string")) if isinstance(e, dict) else None
             for e in edits]
    followed = [pair for pair in pairs if pair is not None]
    return (_digest(path), followed) if followed else None


def _pair(old: object, new: object) -> _Pair | None:
    """An edit's replacement, read for what it really changes: without blank lines, the
    lines both texts share at either end (they tell its place), and each line's spacing
    (a revert written with more context, or other spacing, is the same change undone).
    None when the texts are not strings, or differ in spacing alone."""
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    if len(old) + len(new) > _WHOLE:
        return _Pair(_digest(old), _digest(new), _NOWHERE, cycles=True)
    before = [line.rstrip() for line in old.split("\n") if line.strip()]
    after = [line.rstrip() for line in new.split("\n") if line.strip()]
    bare_before = [line.lstrip() for line in before]
    bare_after = [line.lstrip() for line in after]
    if bare_before == bare_after:
        return None
    start, shortest = 0, min(len(before), len(after))
    while start < shortest and bare_before[start] == bare_after[start]:
        start += 1
    end = 0
    while end < shortest - start and bare_before[-1 - end] == bare_after[-1 - end]:
        end += 1
    old_core = "\n".join(bare_before[start:len(before) - end])
    new_core = "\n".join(bare_after[start:len(after) - end])
    def placed(at: int, shift: int) -> str:
        """A shared line as written (its indent tells ``}`` of one block from another's),
        unless the edit re-indents it (wrapping a statement in an ``if``, or unwrapping
        it); ``shift``: where it sits in the new text, less where it sits in the old."""
        line = before[at] if before[at] == after[at + shift] else bare_before[at]
        return hex_digest(line, 8)

    # Its place: the shared lines around it, nearest first.
    above = [placed(at, 0) for at in range(start - 1, max(0, start - _PLACE_LINES) - 1, -1)]
    below = [placed(len(before) - end + at, len(after) - len(before))
             for at in range(min(end, _PLACE_LINES))]
    place = (",".join(above), ",".join(below))
    cycles = len(old_core) - old_core.count(" ") - old_core.count("\n") >= _TRIVIAL
    return _Pair(_digest(old_core), _digest(new_core), place, cycles=cycles)


def _same_place(one: tuple[str, str], other: tuple[str, str]) -> bool:
    """Whether two replacements are in the same place of a file: one of them quotes no
    line around it, or they quote the same nearest line on a side, and no side's lines
    disagree (one quotes more of them than the other, not others)."""
    if one == _NOWHERE or other == _NOWHERE:
        return True
    met = False
    for mine, theirs in zip(one, other, strict=True):
        if mine and theirs:
            a, b = mine.split(","), theirs.split(",")
            if a[:len(b)] != b[:len(a)]:
                return False
            met = True
    return met


def _judge(pair: _Pair, earlier: list[_Pair]) -> tuple[int, bool] | None:
    """(its depth, whether it goes back) for a replacement after the file's ``earlier``
    ones; None for a ``Write`` of the content the file was just written with. A
    replacement takes, on a side it quotes no line of, the place of the change it
    undoes."""
    if pair.writes:
        last = max((at for at, e in enumerate(earlier) if e.old == pair.old), default=-1)
        if earlier and last == len(earlier) - 1:
            return None  # the same content again: the file did not change
        # Back to a content it was written with: undoes the change made after it.
        undone = [earlier[last + 1]] if last >= 0 else []
    else:
        undone = [e for e in earlier if e.old == pair.new and _same_place(e.place, pair.place)
                  and (e.new == pair.old or e.cycles)
                  # A text removed from no known place is not put back by adding it
                  # somewhere: a line tried in one place after another is no loop.
                  and not (e.place == _NOWHERE and e.new == _REMOVED
                           and pair.place != _NOWHERE)]
    if undone:
        deepest = max(undone, key=lambda e: e.depth)
        placed = [e for e in undone if e.place != _NOWHERE]
        if placed and not pair.writes:
            # A side it quotes no line of is the side of what it undoes (the latest, of
            # the deepest): the line removed by quoting one neighbour was there.
            where = max(reversed(placed), key=lambda e: e.depth).place
            pair.place = (pair.place[0] or where[0], pair.place[1] or where[1])
        return deepest.depth + 1, True
    same = [e.depth for e in earlier if e.old == pair.old and e.new == pair.new
            and _same_place(e.place, pair.place)]
    return max(same, default=0), False


def _made(pairs: list[_Pair], earlier: list[_Pair]) -> tuple[list[_Pair], int]:
    """A file's replacements after ``pairs`` are made, one after another (a
    ``MultiEdit``'s in turn), and the depth of the deepest return among them (0: none)."""
    deepest = 0
    for pair in pairs:
        judged = _judge(pair, earlier)
        if judged is None:
            continue
        pair.depth = judged[0]
        if judged[1]:
            deepest = max(deepest, pair.depth)
        earlier = [e for e in earlier
                   if (e.old, e.new, e.place) != (pair.old, pair.new, pair.place)]
        earlier.append(pair)
    return earlier, deepest


class EditHistory:
    """The changes made to each file in one scope's turn, and how deep they go back.

    A change that takes a file back to a content it had is a *return*: an edit that makes
    the opposite of an earlier one in the same place (a revert), an edit back to an
    earlier edit's old text there (the last step of a cycle: A, B, C, A), a ``Write`` of
    a content the file was written with before. Its depth is 1 + that of the change it
    undoes; any other change's is 0. So edit, revert, edit goes 0, 1, 2, while undoing a
    change made in ten places, or ideas tried one after another and each undone, stay at
    1, whatever else the turn does between.
    """

    __slots__ = ("_files",)

    def __init__(self) -> None:
        # file digest -> (warned, its replacements, oldest first); insertion order is
        # recency
        self._files: dict[str, tuple[bool, list[_Pair]]] = {}

    def note(self, name: str, tool_input: object, warn_at: int = 0) -> int:
        """A successful change by a file-changing call; its depth when it is the one to
        warn about (the first in the turn to reach ``warn_at`` in its file), else 0."""
        found = _pairs(name, tool_input)
        if found is None:
            return 0
        key, pairs = found
        warned, earlier = self._files.pop(key, (False, []))
        earlier, deepest = _made(pairs, earlier)
        warn = bool(warn_at) and deepest >= warn_at and not warned
        self._files[key] = (warned or warn, earlier[-_MAX_MARKS:])
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        return deepest if warn else 0

    def would_return(self, name: str, tool_input: object) -> int:
        """The depth of the return this change would be, were it made now (0: none)."""
        found = _pairs(name, tool_input)
        if found is None:
            return 0
        key, pairs = found
        return _made(pairs, self._files.get(key, (False, []))[1])[1]

    def deepest(self) -> int:
        """The depth of the deepest change any file has made in the turn."""
        return max((pair.depth for _, pairs in self._files.values() for pair in pairs),
                   default=0)

    def clear(self) -> None:
        self._files.clear()

    def to_state(self) -> dict[str, Any]:
        return {key: [warned, [pair.state() for pair in pairs]]
                for key, (warned, pairs) in self._files.items()}

    @classmethod
    def from_state(cls, state: object) -> EditHistory:
        """What ``to_state`` gave; anything not understood is left out (an older
        version's history too: nothing is refused by mistake)."""
        history = cls()
        if not isinstance(state, dict):
            return history
        for key, value in list(state.items())[-MAX_FILES:]:
            if (isinstance(key, str) and isinstance(value, list) and len(value) == 2
                    and isinstance(value[0], bool) and isinstance(value[1], list)):
                pairs = [_Pair.from_state(item) for item in value[1][-_MAX_MARKS:]]
                history._files[key] = (value[0], [pair for pair in pairs if pair is not None])
        return history
