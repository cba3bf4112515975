"""A tool call and its result as the tool-repeat counter tells them apart (pure)."""

from __future__ import annotations

import posixpath

from .masking import canonical
from .shell import SHELL_TOOLS, leading_cd

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ANSWERED_BY_PERSON", "CWD_MARK", "NOT_THE_PERSON", "REFUSED_MARK", "call_key",
           "call_label", "is_ignored", "is_persons_prompt", "is_refusal", "moved_to",
           "person_answered"]

CWD_MARK = "\n@ "  # between a call and its folder in a call key (never inside a call)

# Tools whose result is the person's answer (unless failed): every count starts afresh.
ANSWERED_BY_PERSON: frozenset[str] = frozenset({"AskUserQuestion", "ExitPlanMode"})

_TURNED_DOWN = ("the user doesn't want to proceed", "user rejected", "the user rejected")


def _text(content: object) -> object:  # (content blocks as one text)
    if isinstance(content, list):
        return " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return content


def person_answered(content: object, *, is_error: bool) -> bool:
    """Whether a question put to the person got their answer (or they turned it down)."""
    if not is_error:
        return True
    content = _text(content)
    return isinstance(content, str) and any(
        words in content[:4096].lower() for words in _TURNED_DOWN)


NOT_THE_PERSON = ("<task-notification>",)  # prompts Claude Code submits itself (2.1.332)


def is_persons_prompt(prompt: object) -> bool:
    """Whether a submitted prompt is the person's (anything but Claude Code's own)."""
    return not (isinstance(prompt, str) and prompt.lstrip().startswith(NOT_THE_PERSON))


REFUSED_MARK = "loop-killer: refused"  # in every refusal's reason: a result holding it is ours


def call_key(name: str, tool_input: object, cwd: str = "") -> str:
    """The call as a comparable string: the tool's name, its input, then its folder."""
    where = f"{CWD_MARK}{cwd}" if cwd else ""
    if name in SHELL_TOOLS and isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, str):
            return f"{name} {' '.join(command.split())}{where}"
    return f"{name} {canonical(tool_input)}{where}"


def moved_to(name: str, tool_input: object, cwd: str) -> str:
    """The folder a leading ``cd X &&`` moves to from ``cwd`` ("" if not told): PostToolUse
    gets the folder after the call (2.1.332), so a call counted in X is looked up there."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if name not in SHELL_TOOLS or not isinstance(command, str):
        return ""
    target = leading_cd(command)
    if not target or target.startswith("~") or "$" in target or "`" in target:
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


def is_ignored(name: str, ignored: Iterable[str]) -> bool:
    """Whether a tool is not counted: its name is listed, or matches a listed pattern."""
    for entry in ignored:
        if entry == name:
            return True
        if "*" in entry or "?" in entry or "[" in entry:
            from fnmatch import fnmatchcase  # (not on every call's path)

            if fnmatchcase(name, entry):
                return True
    return False


def is_refusal(content: object, *, is_error: bool) -> bool:
    """Whether a tool result is loop-killer's own refusal of the call (it did not run)."""
    content = _text(content) if is_error else None
    return isinstance(content, str) and REFUSED_MARK in content
