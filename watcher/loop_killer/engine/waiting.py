"""Waiting is not looping (pure): a call waits when its command sleeps or blocks, reads a
background job's output, or is one of ``WAITING_TOOLS``."""

from __future__ import annotations

from .shell import SHELL_TOOLS, simple_commands

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WAITING_TOOLS", "WAIT_MINUTES", "waited_words", "waits"]

WAIT_MINUTES = 30.0  # CI runs and deploys mostly end within it

WAITING_TOOLS: frozenset[str] = frozenset({
    # Reading a background job's (or agent's) output while it runs.
    "TaskOutput", "BashOutput", "BashOutputTool", "AgentOutput", "AgentOutputTool",
    # Teammates' tasks polled while they work.
    "TaskList", "TaskGet",
    # Waiting on purpose: a /loop's wake-up, MCP servers, notifications, a watched process.
    "ScheduleWakeup", "WaitForMcpServers", "ReadNotifications", "Monitor",
})  # Claude Code's own tools that wait by design

# A command that waits is found by one of these words first (a cheap test on every call).
_HINTS = ("sleep", "wait", "watch", "rollout", "tail", ".output", "get-content")
# (not a bare ``wait``: after ``a & b &`` it waits for the command's own jobs)
_SLEEPS = frozenset({"sleep", "start-sleep", "wait-on", "wait-for-it", "wait-for",
                     "wait-for-it.sh", "wait-for.sh", "wait-job", "receive-job"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_BACKGROUND_OUTPUT = "/tasks/"
_RUNNERS = frozenset({"npx", "pnpx", "bunx", "uvx"})
_KEYWORDS = frozenset({"do", "then", "else", "elif", "if", "while", "until", "!", "{"})


def waits(name: str, tool_input: object) -> bool:
    if name in WAITING_TOOLS:
        return True
    if not isinstance(tool_input, dict):
        return False
    if name == "Read":
        path = tool_input.get("file_path")
        return isinstance(path, str) and _background_output(path)
    if name not in SHELL_TOOLS:
        return False
    command = tool_input.get("command")
    if not isinstance(command, str):
        return False
    lowered = command.lower()
    if not any(hint in lowered for hint in _HINTS):
        return False
    return any(_command_waits(words) for words in simple_commands(command))


def _background_output(path: str) -> bool:
    """A background job's output file (``/tmp/claude-1000/<project>/tasks/bae.output``)."""
    return path.endswith(".output") and _BACKGROUND_OUTPUT in path


def _command_waits(words: list[str]) -> bool:
    """Whether one simple command (its words, from the command proper) waits."""
    while words and words[0] in _KEYWORDS:
        words = words[1:]  # ``until ...; do sleep 5; done``
    if not words:
        return False
    name = words[0].rpartition("/")[2].lower()
    rest = words[1:]
    if name in _SLEEPS or any(_background_output(word) for word in rest):
        return True  # (cat, tail, grep... of a background job's output)
    check = _BY_NAME.get(name)
    return check is not None and check(rest)


def _verbs(rest: list[str], count: int = 3) -> list[str]:
    return [word for word in rest if not word.startswith("-")][:count]


def _shell_script(rest: list[str]) -> bool:
    """``bash -c 'until curl ...; do sleep 1; done'``: the script's own commands."""
    if "-c" not in rest[:-1]:
        return False
    return any(_command_waits(words) for words in simple_commands(rest[rest.index("-c") + 1]))


_BY_NAME: dict[str, Callable[[list[str]], bool]] = {
    **dict.fromkeys(_SHELLS, _shell_script),
    # ``wait PID``: a process of its own, started earlier (a bare wait: its own jobs)
    "wait": lambda rest: bool(rest) and not rest[0].startswith("-"),
    "helm": lambda rest: "--wait" in rest or "--atomic" in rest,
    "get-content": lambda rest: "-wait" in (word.lower() for word in rest),  # PowerShell's
    "gh": lambda rest: "watch" in rest[:2] or "--watch" in rest,  # run watch, checks --watch
    **dict.fromkeys(_RUNNERS, lambda rest: _command_waits(_verbs(rest, 1))),  # npx wait-on
    "kubectl": lambda rest: "wait" in _verbs(rest) or (
        "rollout" in _verbs(rest) and "status" in _verbs(rest)),
    **dict.fromkeys(("aws", "az", "gcloud", "docker"), lambda rest: "wait" in _verbs(rest)),
    "tail": lambda rest: any(word in ("-f", "-F", "--follow") or word.startswith("--follow=")
                             for word in rest),
}


def waited_words(seconds: float) -> str:
    """``12 s``, ``31 min``, ``2 h 5 min``: how long a call waited, for a person."""
    if seconds < 120:
        return f"{max(0, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
