"""A shell command line read as words (pure): quotes honoured, heredoc bodies not read."""

from __future__ import annotations

from itertools import islice

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MAX_COMMAND", "SHELL_TOOLS", "leading_cd", "simple_commands", "tokens"]

SHELL_TOOLS: frozenset[str] = frozenset({"Bash", "PowerShell"})

MAX_COMMAND = 16 * 1024  # characters of a command line read

_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "nice", "command", "exec", "xargs",
                       "timeout", "doas"})
_SEPARATORS = ";&|()\n`"


def tokens(command: str) -> Iterator[tuple[str, str]]:
    """A command line's words ("w"), the ends of its simple commands (";", with the
    character that ended it) and its output redirections' targets (">"; "&": a descriptor)."""
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


def simple_commands(command: str) -> Iterator[list[str]]:
    """Each simple command's words from the one after its prefixes (``sudo timeout 30``)."""
    words: list[str] = []
    for kind, text in tokens(command[:MAX_COMMAND]):
        if kind == ";":
            if words:
                yield _without_prefixes(words)
            words = []
        elif kind == "w":
            words.append(text)
    if words:
        yield _without_prefixes(words)


def _without_prefixes(words: list[str]) -> list[str]:
    """``words`` from the command proper: past assignments, ``sudo``, ``timeout 30``..."""
    start = 0
    while start < len(words) and ("=" in words[start] or words[start] in _PREFIXES
                                  or words[start].startswith("-") or words[start].isdigit()):
        start += 1
    return words[start:]


def leading_cd(command: str) -> str:
    """The folder of a leading ``cd X && ...`` or ``cd X; ...``; "" otherwise."""
    found = list(islice(tokens(command[:MAX_COMMAND]), 4))
    if len(found) < 3 or found[0] != ("w", "cd") or found[1][0] != "w":
        return ""
    if found[2] == (";", ";") or found[2:] == [(";", "&"), (";", "&")]:
        return found[1][1]
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
