"""What a person (a table) or a script (one JSON document) reads from a scan (pure but for
``Progress``). Text from a transcript goes through ``printable``, in the JSON too: JSON leaves
C1 codes and bidi overrides raw, and is read on terminals (``jq``, ``less``)."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, TextIO

import orjson

from ..engine.budget import (
    LIMIT_MINUTES,
    LIMIT_REPROMPTS,
    LIMIT_USD,
    beyond_words,
    limits_words,
    minutes_text,
)
from ..engine.transcript import parse_timestamp
from ..printable import char_width, display_width, printable, without_controls, wrap
from .summary import BudgetRow, LoopRow, SessionRow, Summary

__all__ = ["Progress", "box", "fit", "human_report", "json_bytes", "json_document"]


def _usd(value: float) -> float:
    return round(value, 6)


def json_document(summary: Summary, *, root: str = "", top: int | None = None
                  ) -> dict[str, Any]:
    """The ``--json`` document (``top``: the loops listed; totals are every loop's)."""
    return {
        "loops": [_loop(row) for row in summary.loops[:top or None]],
        "totals": {"loops": len(summary.loops), "tokens": summary.tokens.to_dict(),
                   "avoidable_tokens": summary.avoidable_tokens.total,
                   "cost_usd": _usd(summary.cost_usd)},
        "sessions": [_session(s) for s in summary.sessions],
        "budget": [_over_budget(row) for row in summary.budget],
        "scan": {
            "root": _path(root), "transcripts": summary.transcripts,
            "bytes": summary.bytes_read, "lines": summary.lines,
            "bad_lines": summary.broken_lines, "skipped": summary.skipped,
            "older_than_since": summary.older,
            "avoidable_cost_usd": _usd(summary.avoidable_cost_usd),
            "unpriced_tokens": summary.unpriced_tokens,
            "fallback_priced_tokens": summary.fallback_tokens,
            "duplicate_replies": summary.duplicate_replies,
            "duplicate_loops": summary.duplicate_loops, "from_cache": summary.from_cache,
            "budget_limits": {LIMIT_REPROMPTS: summary.limits.reprompts,
                              LIMIT_USD: summary.limits.usd,
                              LIMIT_MINUTES: summary.limits.minutes},
        },
    }


def _over_budget(row: BudgetRow) -> dict[str, Any]:
    return {
        "session_id": printable(row.session_id), "project": printable(row.project),
        "transcript_path": _path(row.transcript_path),
        "started_at": printable(row.started_at), "ended_at": printable(row.ended_at),
        "reprompts": row.reprompts,
        "minutes": None if row.minutes is None else round(row.minutes, 2),
        "cost_usd": _usd(row.cost_usd),
        "over": {name: round(by) if name == LIMIT_REPROMPTS else _usd(by)
                 for name, by in row.over},
    }


def _session(row: SessionRow) -> dict[str, Any]:
    return {
        "session_id": printable(row.session_id), "project": printable(row.project),
        "first_at": printable(row.first_at),
        "tokens": row.tokens.to_dict(), "cost_usd": _usd(row.cost_usd),
        "models": [{"model": printable(m.model), "tokens": m.tokens.to_dict(),
                    "cost_usd": _usd(m.cost_usd), "price": m.priced} for m in row.models],
        "loops": row.loops, "loops_cost_usd": _usd(row.loops_cost_usd),
        "claude_code_cost_usd": (None if row.claude_code_cost_usd is None
                                 else _usd(row.claude_code_cost_usd)),
    }


def _loop(row: LoopRow) -> dict[str, Any]:
    loop = row.loop
    return {
        "session_id": printable(row.session_id), "project": printable(row.project),
        "transcript_path": _path(row.transcript_path), "kind": loop.kind,
        "rule": printable(loop.rule), "replies": loop.replies,
        "first_at": printable(loop.first_at), "last_at": printable(loop.last_at),
        "tokens": row.tokens.to_dict(), "avoidable_tokens": row.avoidable.total,
        "cost_usd": _usd(row.cost_usd), "what": _what(row),
    }


def _what(row: LoopRow) -> str:
    """What looped: the call (``Bash: cat PLAN.md``), or the rule and the reply's first words."""
    return printable(row.loop.label + (" (subagent)" if row.subagent else ""))


def _path(path: str) -> str:
    """A path without control codes, its spacing kept: a script opens the path given."""
    return without_controls(path)


def json_bytes(summary: Summary, *, root: str = "", top: int | None = None) -> bytes:
    document = json_document(summary, root=root, top=top)
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:  # (a folder's name not in UTF-8: escaped as Python's os names it)
        import json

        return json.dumps(document, indent=2).encode("ascii") + b"\n"


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
    """A table's lines in box-drawing characters, measured in terminal columns; ``caps``: the
    most a column may take; the last takes what is left of ``width`` (0: never cut)."""
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


_HEADER = ("First seen", "Project", "Session", "Loop", "Replies", "Tokens", "Avoidable",
           "Cost", "What")
_RIGHT = {4, 5, 6, 7}  # numbers are right-aligned
_CAPS = {1: 28}  # the project's columns
_MIN_WHAT = 16
COMPACT_BELOW = 100  # terminals narrower get the compact table (as ccusage switches)
_COMPACT_HEADER = ("When", "Project", "Loop", "Tokens", "Cost", "What")
_COMPACT_RIGHT = {3, 4}
_COMPACT_CAPS = {1: 12}
TOP = 20  # loops in the table unless ``--top`` says otherwise


def _number(value: int) -> str:
    return f"{value:,}"


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.005 or value == 0 else f"${value:.4f}"


def _when(timestamp: str, short: bool = False) -> str:
    moment = parse_timestamp(timestamp)
    try:  # (a moment past what the local calendar shows, 9999-12-31T23:59-14:00: as written)
        shown = None if moment is None else datetime.fromtimestamp(moment)
    except (OverflowError, ValueError, OSError):
        shown = None
    if shown is None:
        return printable(timestamp, 11 if short else 16) or "?"
    return shown.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M")


_LOOP_NAMES = {"SAME_REPLY_TURNS": "re-prompt, same", "IDLE_TURNS": "re-prompt, idle",
               "TOOL_REPEAT": "tool repeat"}
_SHORT_LOOP_NAMES = {"SAME_REPLY_TURNS": "same", "IDLE_TURNS": "idle", "TOOL_REPEAT": "tool",
                     "EDIT_OSCILLATION": "edits"}
_MARKS = {"exact": "", "fallback": "*", "unpriced": "?"}


def _row(row: LoopRow, home: str | None, compact: bool) -> list[str]:
    from ..state.report import project_label  # (the table's alone: --json never loads it)

    loop = row.loop
    what = _what(row)
    project = printable(project_label(row.project, home))
    cost = _money(row.cost_usd) + _MARKS[row.priced]
    if compact:
        return [_when(loop.first_at, short=True), project,
                _SHORT_LOOP_NAMES.get(loop.rule) or printable(loop.rule, 11),
                _number(row.tokens.total), cost, what]
    return [_when(loop.first_at), project, printable(row.session_id[:8]),
            _LOOP_NAMES.get(loop.rule) or printable(loop.rule, 20), _number(loop.replies),
            _number(row.tokens.total), _number(row.avoidable.total), cost, what]


def human_report(summary: Summary, *, width: int = 120, home: str | None = None,
                 root: str = "", seconds: float | None = None, top: int | None = TOP,
                 compact: bool | None = None) -> str:
    """The table, a totals row, then what was read and skipped. ``width``: columns to fit (0:
    all); ``compact``: the narrow table (None: if the other does not fit); ``top``: 0 for all."""
    out: list[str] = []
    if summary.loops:
        shown = summary.loops[:top] if top else summary.loops
        count = len(summary.loops)
        loops = f"{count} loop{'s' if count != 1 else ''}"
        tokens = _number(summary.tokens.total)
        table: list[str] = []
        if not compact:  # (None: it may fit)
            table = box(_HEADER, [_row(row, home, False) for row in shown], [
                "Total", "", "", loops, "", tokens, _number(summary.avoidable_tokens.total),
                _money(summary.cost_usd), f"avoidable: {_money(summary.avoidable_cost_usd)}"],
                right=_RIGHT, caps=_CAPS, width=width, least_last=_MIN_WHAT)
        if compact is None:
            compact = width > 0 and (width < COMPACT_BELOW or
                                     max(map(display_width, table)) > width)
        if compact:
            table = box(_COMPACT_HEADER, [_row(row, home, True) for row in shown],
                        ["Total", "", loops, tokens, _money(summary.cost_usd), ""],
                        right=_COMPACT_RIGHT, caps=_COMPACT_CAPS, width=width, least_last=8)
        out += table
        if len(shown) < count:
            out.append(f"… and {count - len(shown)} more loops (--top 0 shows them all)")
        out.append(f"{loops} · {tokens} tokens "
                   f"· {_number(summary.avoidable_tokens.total)} avoidable "
                   f"· {_money(summary.cost_usd)} (avoidable {_money(summary.avoidable_cost_usd)})")
        marks = {row.priced for row in summary.loops}
        if "fallback" in marks:
            out.append("* priced at its family's price, or a guessed fast-mode multiple")
        if "unpriced" in marks:
            out.append("? holds replies of a model without a price (counted as $0)")
    else:
        out.append("No loops found.")
    out += _over_budget_lines(summary, home, width, top)
    out += _sessions(summary, home, width)
    out += wrap(_read_line(summary, root, seconds), width or None, 2)
    return "\n".join(out) + "\n"


def _sessions(summary: Summary, home: str | None, width: int) -> list[str]:
    from ..state.report import project_label

    known = [s for s in summary.sessions if s.claude_code_cost_usd is not None]
    if not known:
        return []
    lines = ["", "Sessions where Claude Code recorded its own cost (cost-state):"]
    for s in known[:10]:
        lines += wrap(
            f"  {printable(s.session_id[:8])}  {printable(project_label(s.project, home), 28)}: "
            f"loops {_money(s.loops_cost_usd)} of {_money(s.cost_usd)} estimated here"
            f", {_money(s.claude_code_cost_usd or 0.0)} by Claude Code", width or None, 12)
    if len(known) > 10:
        lines.append(f"  … and {len(known) - 10} more (--json lists them all)")
    return lines


def _over_budget_lines(summary: Summary, home: str | None, width: int,
                       top: int | None) -> list[str]:
    from ..state.report import project_label

    if not summary.budget:
        return []
    shown = summary.budget[:top] if top else summary.budget
    lines = ["", f"Turns over the budget ({limits_words(summary.limits)} a turn):"]
    for row in shown:
        minutes = "" if row.minutes is None else f", {minutes_text(row.minutes)}"
        lines += wrap(
            f"  {printable(row.session_id[:8]) or '?'}  "
            f"{printable(project_label(row.project, home), 28)}  {_when(row.started_at)}: "
            f"{row.reprompts} re-prompts{minutes}, {_money(row.cost_usd)}"
            f"{_MARKS[row.priced]}; beyond the limit: {beyond_words(row.over, _money)}",
            width or None, 12)
    if len(shown) < len(summary.budget):
        lines.append(f"  … and {len(summary.budget) - len(shown)} more (--json lists them all)")
    return lines


_SKIP_WORDS = {"link": "links", "not_regular": "not regular files",
               "unreadable": "unreadable", "failed": "failed",
               "project_off": "in projects switched off"}


def _read_line(summary: Summary, root: str, seconds: float | None) -> str:
    text = (f"Read {summary.transcripts} transcript{'s' if summary.transcripts != 1 else ''}"
            f" ({summary.bytes_read / 1e6:,.1f} MB"
            + (f", {summary.from_cache} unchanged since the last scan" if summary.from_cache
               else "") + ")" + (f" under {printable(root)}" if root else "")
            + (f" in {seconds:.1f} s" if seconds is not None else ""))
    notes = [f"{count} {_SKIP_WORDS.get(reason, reason)}"
             for reason, count in summary.skipped.items() if count]
    if summary.broken_lines:
        notes.append(f"{summary.broken_lines} bad lines")
    if summary.older:
        notes.append(f"{summary.older} older than --since")
    if summary.unpriced_tokens:
        notes.append(f"{_number(summary.unpriced_tokens)} tokens of models without a price")
    return text + (f"; skipped: {', '.join(notes)}" if notes else "") + "."


class Progress:
    """A progress bar on one line of ``stream``, redrawn at most every ``interval`` seconds."""

    def __init__(self, stream: TextIO, *, width: int = 80, interval: float = 0.1) -> None:
        self._stream, self._width, self._interval = stream, max(20, min(width, 100)), interval
        self._last, self._shown = 0.0, False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < self._interval and done < total:
            return
        self._last = now
        share = min(1.0, done / total) if total else 1.0
        label = f" {share * 100:5.1f}%  {done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        bar = max(10, self._width - len(label) - 12)
        filled = int(bar * share)
        self._stream.write(f"\r\x1b[2Kscanning [{'█' * filled}{' ' * (bar - filled)}]{label}")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()
