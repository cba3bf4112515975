"""A table in box-drawing characters, measured in terminal columns (pure).

Text is measured as a terminal shows it (``display_width``): wide East Asian characters
and most emoji take two columns, combining marks and zero-width characters none, so a
row of CJK project names lines up. Small enough not to need a table library.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..printable import char_width, display_width

__all__ = ["box", "fit"]


def fit(text: str, columns: int) -> str:
    """``text`` cut to ``columns`` (with an ellipsis where cut) and padded to them."""
    width = display_width(text)
    if width > columns:
        kept: list[str] = []
        used = 0
        for char in text:
            size = char_width(char)
            if used + size > columns - 1:
                break
            kept.append(char)
            used += size
        text, width = "".join(kept) + "…", used + 1
    return text + " " * (columns - width)


def box(header: Sequence[str], rows: Sequence[Sequence[str]], total: Sequence[str], *,
        right: Collection[int] = (), caps: dict[int, int] | None = None, width: int = 0,
        least_last: int = 8) -> list[str]:
    """The table's lines: ``header``, ``rows``, then a ``total`` row. ``right``: columns
    aligned right; ``caps``: the most columns a column may take; the last column takes
    what is left of ``width`` (0: never cut), at least ``least_last``."""
    everything = [header, *rows, total]
    widths = [max(display_width(r[i]) for r in everything) for i in range(len(header))]
    for column, cap in (caps or {}).items():
        widths[column] = min(widths[column], max(cap, display_width(header[column])))
    if width > 0:
        fixed = sum(widths[:-1]) + 3 * len(widths) + 1
        widths[-1] = max(least_last, min(widths[-1], width - fixed))

    def line(cells: Sequence[str]) -> str:
        out = []
        for index, (cell, size) in enumerate(zip(cells, widths, strict=True)):
            if index in right and display_width(cell) <= size:
                out.append(" " * (size - display_width(cell)) + cell)
            else:
                out.append(fit(cell, size))
        return "│ " + " │ ".join(out) + " │"

    def rule(left: str, middle: str, end: str) -> str:
        return left + middle.join("─" * (size + 2) for size in widths) + end

    return [rule("┌", "┬", "┐"), line(header), rule("├", "┼", "┤"),
            *(line(cells) for cells in rows),
            rule("├", "┼", "┤"), line(total), rule("└", "┴", "┘")]
