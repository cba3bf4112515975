"""Reading Claude Code's screen (pure): the prompt box, a screen hardcopy, the proof of a clear."""

from __future__ import annotations

import re

__all__ = ["COMMAND", "find_proof", "hardcopy_text", "read_prompt_input", "said_of_goal"]

COMMAND = "/goal clear"

_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
_ESCAPE = re.compile(r"\x1b(?:\[[0-9;:?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_RULE_CHARS = "─━═-╭╮╰╯┌┐└┘"
_PROMPT_CHARS = ("❯", ">", "›")
_BORDERS = "│┃|"
_BLANKS = " \u00a0\t"


def read_prompt_input(screen: str) -> str | None:
    """The text in Claude Code's prompt box (dim text left out); "" when empty, None: no box."""
    lines = [_visible(line) for line in screen.splitlines()]
    for index in range(len(lines) - 1, 0, -1):
        line = _unbordered(lines[index])
        if not line.startswith(_PROMPT_CHARS) or not _is_rule(lines[index - 1]):
            continue
        bottom = next((j for j in range(index + 1, len(lines)) if _is_rule(lines[j])), None)
        if bottom is None:
            return None  # the box runs off the screen: unreadable
        first = line[1:]
        rest = [_unbordered(lines[j]) for j in range(index + 1, bottom)]
        return "\n".join([first, *rest]).strip(_BLANKS + "\n")
    return None


def _visible(line: str) -> str:
    """The line without escape codes and without the text drawn dim."""
    out: list[str] = []
    dim = False
    position = 0
    for match in _SGR.finditer(line):
        if not dim:
            out.append(line[position : match.start()])
        for code in (match.group(1) or "0").replace(":", ";").split(";"):
            if code in ("", "0", "22"):
                dim = False
            elif code == "2":
                dim = True
        position = match.end()
    if not dim:
        out.append(line[position:])
    return _ESCAPE.sub("", "".join(out)).rstrip(_BLANKS)


def _unbordered(line: str) -> str:
    text = line.strip(_BLANKS)
    if text[:1] in _BORDERS:
        text = text[1:]
    if text[-1:] in _BORDERS:
        text = text[:-1]
    return text.strip(_BLANKS)


def _is_rule(line: str) -> bool:
    text = line.strip(_BLANKS)
    return len(text) >= 10 and sum(ch in _RULE_CHARS for ch in text) >= 0.8 * len(text)


def hardcopy_text(data: bytes) -> str:
    """The text of a GNU screen ``hardcopy`` (screen 4 keeps each cell's low byte)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    lines = []
    for line in data.decode("latin-1").split("\n"):
        bare = line.strip(" ")
        if len(bare) >= 10 and set(bare) == {"\x00"}:
            line = line.replace("\x00", "\u2500")
        elif line.startswith("o\xa0"):
            line = "\u276f" + line[1:]
        lines.append(line.replace("\x00", " "))
    return "\n".join(lines)


def find_proof(data: bytes) -> str | None:
    """The condition of a ``goal_status`` met:true line in ``data``, if any."""
    if b"goal_status" not in data:
        return None
    from ..engine.transcript import GoalStatus, parse_line

    for line in data.split(b"\n")[:-1]:
        if b"goal_status" not in line:
            continue
        event = parse_line(line)
        if isinstance(event, GoalStatus) and event.cleared:
            return event.condition
    return None


def said_of_goal(screen: str) -> tuple[int, int]:
    """How many times ``screen`` shows a goal cleared, and no goal set (dim text left out)."""
    visible = "\n".join(_visible(line) for line in screen.splitlines())
    return visible.count("Goal cleared"), visible.count("No goal set")
