"""Text a person reads, made safe for a terminal (a reply holding ``\\x1b]0;PWNED\\x07`` must
not retitle it), and the widths and wrapping of what is printed."""

from __future__ import annotations

import os
import re
from functools import lru_cache

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["MIN_WIDTH", "PIPE_WIDTH", "char_width", "display_width", "output_width",
           "printable", "terminal_width", "without_controls", "wrap"]

# C0 and C1 control characters (ESC, BEL, CSI ...), DEL, and the bidirectional and
# line-separating code points that can reorder or split what a terminal shows.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
_SPACES = re.compile(r"\s+")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` on one line, each run of control characters one space, cut to ``limit``."""
    if text.isascii() and text.isprintable() and "  " not in text and \
            text[:1] != " " and text[-1:] != " ":
        flat = text  # (most text: nothing to take out, no run of spaces; no regex needed)
    else:
        flat = _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()
    if limit is None or len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def without_controls(text: str) -> str:
    """``text`` with each run of control characters one space, its spacing kept."""
    return "\n".join(_CONTROL.sub(" ", line) for line in text.split("\n"))


MIN_WIDTH = 40  # narrower, a terminal gets the lines unwrapped (wrapping would shred them)


def terminal_width(stream: TextIO | None) -> int | None:
    """The columns of the terminal ``stream`` writes to; None for a file or a pipe."""
    try:
        if stream is None or not stream.isatty():
            return None
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # closed, or a stand-in without a fd
        return None
    columns = _columns_variable()
    if columns <= 0:
        try:
            columns = os.get_terminal_size(fd).columns
        except OSError:
            return None
    return columns if columns >= MIN_WIDTH else None


PIPE_WIDTH = 80  # the columns of a report to a pipe or a file (as rich and shutil assume)


def output_width(stream: TextIO | None) -> int | None:
    """Its terminal's columns, else ``$COLUMNS`` or ``PIPE_WIDTH`` (a pipe, a file)."""
    if stream is not None and _is_terminal(stream):
        return terminal_width(stream)
    columns = _columns_variable()
    return columns if columns >= MIN_WIDTH else PIPE_WIDTH


def _columns_variable() -> int:  # 0 when unset or not a number
    try:
        return int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


_ZERO_WIDTH = frozenset({"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"})


@lru_cache(maxsize=4096)
def char_width(char: str) -> int:
    """The columns one character takes on a terminal: 0, 1 or 2."""
    import unicodedata  # (only for text that is not ASCII)

    if char in _ZERO_WIDTH or unicodedata.combining(char) or (
            unicodedata.category(char) in ("Mn", "Me", "Cf")):
        return 0
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return 2
    return 1


def display_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(char_width(char) for char in text)


def _fitting(text: str, columns: int) -> int:
    """How many of ``text``'s first characters fit in ``columns`` (at least one)."""
    if text.isascii():
        return max(1, min(len(text), columns))
    used = 0
    for index, char in enumerate(text):
        used += char_width(char)
        if used > columns:
            return max(1, index)
    return len(text)


_BREAKS = ("/", "-", "_", ",", "(")


def wrap(line: str, width: int | None, indent: int = 4) -> list[str]:
    """``line`` as lines of at most ``width`` columns, cut at spaces (a long word after one of
    ``_BREAKS``, else where it must), each after the first indented by ``indent``."""
    if width is None or display_width(line) <= width:
        return [line]
    indent = max(0, min(indent, width // 2))
    lines: list[str] = []
    rest, room = line, width
    while display_width(rest) > room:
        fits = _fitting(rest, room)
        cut = rest.rfind(" ", 0, fits + 1)
        if cut <= 0 or not rest[:cut].strip():
            # No space to cut at: after a path's or a name's own break, else anywhere.
            cut = max(rest.rfind(mark, 0, fits) for mark in _BREAKS) + 1
            if cut <= 0 or not rest[:cut].strip():
                cut = fits
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip(" ")
        room = width - indent
    if rest:
        lines.append(rest)
    return [lines[0], *(" " * indent + piece for piece in lines[1:])]
