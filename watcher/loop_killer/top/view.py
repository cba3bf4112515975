"""``loop-killer top``'s screen, drawn with rich from a ``rows.Screen`` (no I/O).

The table fits the terminal from 80 columns up: below ``WIDE`` columns the turn's and the
session's token counts share one column, and their costs and the age go; long cells end
in an ellipsis, never wrap (the figures' columns hold their widest: ``12.3M $12,345``).
Rows beyond the terminal's height scroll with the selection.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .rows import Attention, Row, Screen, ago_short

__all__ = ["KEYS_HELP", "WIDE", "render", "visible_rows"]

WIDE = 110
FIGURES = 14
"""The widest tokens-and-cost figure (``rows.tokens_text`` and ``rows.money``)."""
"""From this many columns the turn's and the session's figures get a column each."""

KEYS_HELP = "q quit · ↑/↓ (k/j) select · c end the selected session's loop at its next Stop"

_LINES_AROUND = 5  # title, summary, header, footer, help

_STYLE = {
    Attention.REFUSED: "bold red",
    Attention.RUN: "bold red",
    Attention.REPEATING: "yellow",
    Attention.STOPPED: "magenta",
    Attention.WAITING: "cyan",
    Attention.WORKING: "green",
}


def visible_rows(count: int, selected: int, height: int) -> range:
    """The rows that fit ``height`` terminal lines, keeping ``selected`` in view."""
    room = max(1, height - _LINES_AROUND)
    if count <= room:
        return range(count)
    first = min(max(0, selected - room // 2), count - room)
    return range(first, first + room)


def render(screen: Screen, *, selected: int, width: int, height: int, message: str,
           now: float) -> RenderableType:
    wide = width >= WIDE
    title = Text(screen.watcher, style="bold" if screen.watcher_running else "bold white on red",
                 no_wrap=True, overflow="ellipsis")
    table = Table(box=box.SIMPLE_HEAD, expand=True, pad_edge=False, padding=(0, 1),
                  show_edge=False)
    table.add_column("PROJECT", ratio=2, min_width=8, max_width=32, no_wrap=True,
                     overflow="ellipsis")
    table.add_column("SESSION", width=8, no_wrap=True)
    table.add_column("DOING", ratio=4, min_width=16, no_wrap=True, overflow="ellipsis")
    if wide:
        table.add_column("TURN", width=FIGURES, no_wrap=True, overflow="ellipsis",
                         justify="right")
        table.add_column("TOTAL", width=FIGURES, no_wrap=True, overflow="ellipsis",
                         justify="right")
        table.add_column("ACTIVE", width=6, no_wrap=True, justify="right")
    else:
        table.add_column("TURN/TOTAL", width=13, no_wrap=True, overflow="ellipsis",
                         justify="right")
    table.add_column("LAST DETECTION", ratio=3, min_width=10, no_wrap=True,
                     overflow="ellipsis")
    shown = visible_rows(len(screen.rows), selected, height)
    for index in shown:
        row = screen.rows[index]
        table.add_row(*_cells(row, wide=wide, now=now),
                      style="reverse" if index == selected else None)
    more = len(screen.rows) - len(shown)
    summary = screen.summary + (f" ({more} more: scroll with ↑/↓)" if more > 0 else "")
    parts: list[RenderableType] = [title, Text(summary, no_wrap=True, overflow="ellipsis"),
                                   table]
    if message:
        parts.append(Text(message, style="bold", no_wrap=True, overflow="ellipsis"))
    parts.append(Text(KEYS_HELP, style="dim", no_wrap=True, overflow="ellipsis"))
    return Group(*parts)


def _cells(row: Row, *, wide: bool, now: float) -> list[Text]:
    doing = Text(row.doing, style=_STYLE.get(row.attention, ""))
    if wide:
        figures = [Text(row.turn), Text(row.total), Text(ago_short(now - row.last_activity))]
    else:
        figures = [Text(f"{row.turn.split(' ')[0]}/{row.total.split(' ')[0]}")]
    return [Text(row.project_text), Text(row.session_text), doing, *figures,
            Text(row.detection)]
