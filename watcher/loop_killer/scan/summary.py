"""Every file's result in, one priced summary of the history's loops out (pure).

``Collector`` takes ``FileResult`` values one at a time, in any order (they arrive from
several workers), and keeps only what the report needs: the loops (priced), and per
session a few numbers (our estimate of its whole cost, and Claude Code's own total from
its ``cost-state`` lines), so memory does not grow with the bytes read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..engine.transcript import parse_timestamp
from .files import Listing
from .prices import PriceTable
from .records import FileResult, Loop, Tokens

__all__ = ["Collector", "LoopRow", "SessionRow", "Summary"]


@dataclass(frozen=True, slots=True)
class LoopRow:
    """A loop with where it happened and what it cost (USD, from the price table)."""

    loop: Loop
    session_id: str
    project: str
    transcript_path: str
    subagent: bool
    cost_usd: float
    avoidable_cost_usd: float

    @property
    def sort_key(self) -> tuple[float, int, str]:
        """Biggest first: by cost, then tokens, then the oldest first."""
        return (-self.cost_usd, -self.loop.total_tokens.total, self.loop.first_at)


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session that looped: its loops' cost beside its whole cost, ours and Claude
    Code's (``claude_code_cost_usd``: None where Claude Code wrote no ``cost-state``)."""

    session_id: str
    project: str
    loops: int
    loops_cost_usd: float
    estimated_cost_usd: float
    claude_code_cost_usd: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    """The whole report, biggest loop first."""

    loops: tuple[LoopRow, ...]
    sessions: tuple[SessionRow, ...]
    tokens: Tokens
    avoidable_tokens: Tokens
    cost_usd: float
    avoidable_cost_usd: float
    unpriced_tokens: int  # tokens of loops whose model has no price
    transcripts: int
    bytes_read: int
    lines: int
    broken_lines: int
    skipped: dict[str, int]
    older: int  # files not read: last written before --since


@dataclass(slots=True)
class _Session:
    project: str = ""
    estimated_usd: float = 0.0
    cost_state: float | None = None
    loops: int = 0
    loops_usd: float = 0.0


@dataclass(slots=True)
class Collector:
    """Gathers file results into a ``Summary``.

    ``prices``: the price table; ``since``: drop loops that ended before this moment
    (seconds since the epoch; a loop without a readable time is kept).
    """

    prices: PriceTable
    since: float | None = None
    _rows: list[LoopRow] = field(default_factory=list)
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _skipped: Counter[str] = field(default_factory=Counter)
    _unpriced: int = 0
    _transcripts: int = 0
    _bytes: int = 0
    _lines: int = 0
    _broken: int = 0

    def add(self, result: FileResult) -> None:
        """Take one file's result."""
        if result.skipped:
            self._skipped[result.skipped] += 1
            return
        self._transcripts += 1
        self._bytes += result.bytes_read
        self._lines += result.lines
        self._broken += result.broken + result.oversized
        session = self._sessions.setdefault(result.session_id or result.path, _Session())
        if not result.subagent or not session.project:
            session.project = result.project
        session.estimated_usd += self.prices.cost(result.usage)[0]
        if result.cost_state is not None:
            # several files of one session (resumed, forked): the largest total is the latest
            session.cost_state = max(session.cost_state or 0.0, result.cost_state)
        for loop in result.loops:
            if not self._wanted(loop):
                continue
            cost, unpriced = self.prices.cost(loop.tokens)
            self._unpriced += unpriced
            self._rows.append(LoopRow(loop, result.session_id, result.project, result.path,
                                      result.subagent, cost,
                                      self.prices.cost(loop.avoidable)[0]))
            session.loops += 1
            session.loops_usd += cost

    def _wanted(self, loop: Loop) -> bool:
        if self.since is None:
            return True
        ended = parse_timestamp(loop.last_at) or parse_timestamp(loop.first_at)
        return ended is None or ended >= self.since

    def summary(self, listing: Listing | None = None) -> Summary:
        """The report so far; ``listing``: what finding the files skipped."""
        rows = tuple(sorted(self._rows, key=lambda row: row.sort_key))
        skipped = Counter(self._skipped)
        older = 0
        if listing is not None:
            skipped.update(listing.skipped)
            older = listing.older
        sessions = tuple(sorted(
            (SessionRow(session_id, s.project, s.loops, s.loops_usd, s.estimated_usd,
                        s.cost_state)
             for session_id, s in self._sessions.items() if s.loops),
            key=lambda row: (-row.loops_cost_usd, row.session_id)))
        tokens = Tokens()
        avoidable = Tokens()
        for row in rows:
            tokens = tokens + row.loop.total_tokens
            avoidable = avoidable + row.loop.avoidable_tokens
        return Summary(
            loops=rows, sessions=sessions, tokens=tokens, avoidable_tokens=avoidable,
            cost_usd=sum(row.cost_usd for row in rows),
            avoidable_cost_usd=sum(row.avoidable_cost_usd for row in rows),
            unpriced_tokens=self._unpriced, transcripts=self._transcripts,
            bytes_read=self._bytes, lines=self._lines, broken_lines=self._broken,
            skipped=dict(sorted(skipped.items())), older=older,
        )
