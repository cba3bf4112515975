"""Text a person reads, made safe for a terminal: the one cleaner of control codes.

Transcripts, project folder names and hook input are written by others: a reply holding
``\\x1b]0;PWNED\\x07\\x1b[2J`` must not retitle or wipe the terminal that shows it. Every
line loop-killer prints (hook notices and toasts, the watcher's terminal and log lines,
``loop-killer status``, ``scan``) goes through ``printable``.
"""

from __future__ import annotations

import re

__all__ = ["printable", "without_controls"]

# C0 and C1 control characters (ESC, BEL, CSI ...), DEL, and the bidirectional and
# line-separating code points that can reorder or split what a terminal shows.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
_SPACES = re.compile(r"\s+")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` on one line, without control characters (each run becomes one space),
    cut to ``limit`` characters (ending in ``…``) when given."""
    flat = _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()
    if limit is None or len(flat) <= limit:
        return flat
    return flat[: max(0, limit - 1)].rstrip() + "…"


def without_controls(text: str) -> str:
    """``text`` with each run of control characters made one space, its spacing and line
    breaks otherwise kept (for log lines aligned in columns, and tracebacks)."""
    return "\n".join(_CONTROL.sub(" ", line) for line in text.split("\n"))
