"""``loop-killer top``'s screen, drawn with rich from a ``rows.Screen``."""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..printable import display_width
from .rows import Attention, Row, Screen, Words, ago_short

__all__ = ["KEYS_HELP", "Layout", "cut_left", "fit", "layout", "render", "visible_rows"]

KEYS_HELP = "q quit · ↑/↓ (k/j) select · c end the selected session's loop at its next Stop"

GAP = 2  # columns between two columns
SESSION = 8
ACTIVE = 6
WORDS_WANTED = 30  # the doing's and the loop's room each, before a figure is shown
DOING_LEAST = 20  # the doing's room on a narrow terminal, kept before the loop's
PROJECT_SHARE = 5  # the project takes at most 1/PROJECT_SHARE of the width (12 at least)

_LINES_AROUND = 5  # title, summary, header, its rule, help

_STYLE = {
    Attention.REFUSED: "bold red", Attention.RUN: "bold red", Attention.REPEATING: "yellow",
    Attention.STOPPED: "magenta", Attention.WAITING: "cyan", Attention.WORKING: "green"}


def visible_rows(count: int, selected: int, height: int) -> range:
    """The rows that fit ``height`` terminal lines, keeping ``selected`` in view."""
    room = max(1, height - _LINES_AROUND)
    if count <= room:
        return range(count)
    first = min(max(0, selected - room // 2), count - room)
    return range(first, first + room)


@dataclass(frozen=True, slots=True)
class Layout:
    project: int
    doing: int
    loop: int
    total: int = 0
    active: int = 0
    turn: int = 0


def fit(words: Words, width: int) -> str:
    """The fullest wording that fits ``width`` columns (else the shortest, to be cut)."""
    return next((said for said in words if display_width(said) <= width), words[-1])


def cut_left(text: str, width: int) -> str:
    """``text`` in ``width`` columns, its beginning dropped for an ellipsis when too long."""
    if display_width(text) <= width:
        return text
    kept: list[str] = []
    used = 1  # the ellipsis
    for char in reversed(text):
        used += display_width(char)
        if used > width:
            break
        kept.append(char)
    return "…" + "".join(reversed(kept))


def layout(rows: list[Row], width: int) -> Layout:
    def widest(column: str, *, shortest: bool = False) -> int:
        return _widest(rows, column, shortest=shortest)

    project = min(widest("project_text"), max(12, width // PROJECT_SHARE))
    room = width - project - SESSION - 3 * GAP  # for the doing and the loop
    doing_full, loop_full = widest("doing"), widest("loop")
    doing_wanted, loop_wanted = min(doing_full, WORDS_WANTED), min(loop_full, WORDS_WANTED)
    figures: dict[str, int] = {}
    for name, size in (("total", widest("total")), ("active", ACTIVE), ("turn", widest("turn"))):
        if room - size - GAP >= doing_wanted + loop_wanted:
            figures[name] = size
            room -= size + GAP
    if room >= doing_wanted + loop_wanted:  # what is left goes to the doing first
        doing = min(doing_full, room - loop_wanted)
        loop = min(loop_full, room - doing)
    else:  # the loop keeps its shortest wording if the doing keeps DOING_LEAST
        least = min(widest("loop", shortest=True), WORDS_WANTED, room - DOING_LEAST)
        loop = min(loop_full, max(least, room // 2, room - doing_full))
    loop = max(1, loop)  # (a terminal too narrow for anything: cut, never negative)
    return Layout(project=project, doing=max(1, room - loop), loop=loop, **figures)


_HEADERS = {"project_text": "PROJECT", "doing": "DOING", "loop": "LAST LOOP",
            "total": "TOTAL", "turn": "TURN"}


def _widest(rows: list[Row], column: str, *, shortest: bool = False) -> int:
    """The widest cell of ``column`` (its header's too), fullest or ``shortest`` words."""
    widths = [display_width(_HEADERS[column])]
    for row in rows:
        value: str | Words = getattr(row, column)
        said = value if isinstance(value, str) else value[-1 if shortest else 0]
        widths.append(display_width(said))
    return max(widths)


def render(screen: Screen, *, selected: int, width: int, height: int, message: str,
           now: float) -> RenderableType:
    title = Text(screen.watcher, style="bold" if screen.watcher_running else "bold white on red",
                 no_wrap=True, overflow="ellipsis")
    shown = visible_rows(len(screen.rows), selected, height - (1 if message else 0))
    columns = layout(list(screen.rows), width)  # of every row: steady while scrolling
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, GAP - 1, 0, 0),
                  show_edge=False, collapse_padding=True)

    def column(header: str, size: int, *, right: bool = False) -> None:
        table.add_column(header, width=size, no_wrap=True, overflow="ellipsis",
                         justify="right" if right else "left")

    column("PROJECT", columns.project)
    column("SESSION", SESSION)
    column("DOING", columns.doing)
    for header, size in (("TURN", columns.turn), ("TOTAL", columns.total),
                         ("ACTIVE", columns.active)):
        if size:
            column(header, size, right=True)
    column("LAST LOOP", columns.loop)
    for index in shown:
        row = screen.rows[index]
        table.add_row(*_cells(row, columns, now=now),
                      style="reverse" if index == selected else None)
    more = len(screen.rows) - len(shown)
    summary = screen.summary + (f" ({more} more ↑↓)" if more > 0 else "")
    parts: list[RenderableType] = [title, Text(summary, no_wrap=True, overflow="ellipsis"), table]
    if message:
        parts.append(Text(message, style="bold", no_wrap=True, overflow="ellipsis"))
    parts.append(Text(KEYS_HELP, style="dim", no_wrap=True, overflow="ellipsis"))
    return Group(*parts)


def _cells(row: Row, columns: Layout, *, now: float) -> list[Text]:
    cells = [Text(cut_left(row.project_text, columns.project)), Text(row.session_text),
             Text(fit(row.doing, columns.doing), style=_STYLE.get(row.attention, ""))]
    for size, text in ((columns.turn, row.turn), (columns.total, row.total),
                       (columns.active, ago_short(now - row.last_activity))):
        if size:
            cells.append(Text(text))
    cells.append(Text(fit(row.loop, columns.loop)))
    return cells
