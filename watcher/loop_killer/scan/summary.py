"""Every file's result in, in any order; one priced summary of the history out (pure). A reply
in several files counts once, as its largest copy, in that copy's file; a reply claimed by several
loops belongs to the loop in its file; a loop (or turn) owning none of its replies is a copy."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from math import fsum

from ..engine.budget import DEFAULT_BUDGET, LIMIT_MINUTES, Budget, TurnUse, over_by
from ..engine.transcript import parse_timestamp, record
from .files import Listing
from .prices import Priced, PriceTable
from .records import FileResult, Loop, Replies, Reply, ReplyKey, Tokens, Turn

__all__ = ["BudgetRow", "Collector", "LoopRow", "ModelRow", "SessionRow", "Summary", "ordered"]

_WORST: dict[Priced, int] = {"exact": 0, "fallback": 1, "unpriced": 2}


@record
class LoopRow:
    """A loop, where it happened and what its own replies cost; ``priced``: the least sure."""

    loop: Loop
    session_id: str
    project: str
    transcript_path: str
    subagent: bool
    cost_usd: float
    avoidable_cost_usd: float
    tokens: Tokens = Tokens()
    avoidable: Tokens = Tokens()
    priced: Priced = "exact"


@record
class ModelRow:
    """One model's part of a session."""

    model: str
    tokens: Tokens
    cost_usd: float
    priced: Priced


@record
class SessionRow:
    """A session: tokens and cost per model, its loops' cost, and Claude Code's own total."""

    session_id: str
    project: str
    loops: int
    loops_cost_usd: float
    cost_usd: float
    claude_code_cost_usd: float | None
    tokens: Tokens = Tokens()
    models: tuple[ModelRow, ...] = ()
    first_at: str = ""


@record
class BudgetRow:
    """A past turn over the budget; ``over``: each limit passed and by how much."""

    session_id: str
    project: str
    transcript_path: str
    started_at: str
    ended_at: str
    reprompts: int
    minutes: float | None
    cost_usd: float
    over: tuple[tuple[str, float], ...]
    priced: Priced = "exact"


@record
class Summary:
    """The whole report, biggest loop first."""

    loops: tuple[LoopRow, ...]
    sessions: tuple[SessionRow, ...]
    tokens: Tokens
    avoidable_tokens: Tokens
    cost_usd: float
    avoidable_cost_usd: float
    unpriced_tokens: int  # of loops' replies
    transcripts: int
    bytes_read: int
    lines: int
    broken_lines: int
    skipped: dict[str, int]
    older: int  # files last written before --since
    fallback_tokens: int = 0
    duplicate_replies: int = 0
    duplicate_loops: int = 0
    from_cache: int = 0
    budget: tuple[BudgetRow, ...] = ()
    limits: Budget = DEFAULT_BUDGET


@record
class _File:
    session: str  # session id, or the path where none is known
    project: str
    path: str
    subagent: bool
    first_at: str
    last_at: str

    @property
    def rank(self) -> tuple[str, str, str]:
        """The original of two files holding one reply sorts first (a resumed copy ends later)."""
        return (self.first_at or "\uffff", self.last_at, self.path)


@record
class _TurnAt:
    """A turn, its file and that file's replies (the turn's: ``turn.replies`` from ``first``)."""

    turn: Turn
    file: int
    replies: Replies
    first: int

    def keys(self) -> list[ReplyKey]:
        return [reply.key for reply in self.replies[self.first:self.first + self.turn.replies]]


@dataclass(slots=True)
class _Copy:
    reply: Reply
    file: int  # index into Collector._files
    cost: tuple[float, Priced]  # (priced as it comes: while the other readers still read)


@dataclass(slots=True)
class _Session:
    cost_state: float | None = None
    named_by: int = -1  # the file whose project is the session's (``_names_first``)


@dataclass(slots=True)
class Collector:
    """Gathers file results into a ``Summary``; ``since``/``until`` drop loops and turns."""

    prices: PriceTable
    since: float | None = None
    until: float | None = None
    budget: Budget = DEFAULT_BUDGET
    _files: list[_File] = field(default_factory=list)
    _copies: dict[ReplyKey, _Copy] = field(default_factory=dict)
    _loops: list[tuple[Loop, int]] = field(default_factory=list)
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _turns: list[_TurnAt] = field(default_factory=list)
    _asides: dict[str, list[_TurnAt]] = field(default_factory=dict)  # subagents', by session
    _skipped: Counter[str] = field(default_factory=Counter)
    _duplicates: int = 0
    _transcripts: int = 0
    _bytes: int = 0
    _lines: int = 0
    _broken: int = 0

    def add(self, result: FileResult) -> None:
        if result.skipped:
            self._skipped[result.skipped] += 1
            return
        self._transcripts += 1
        self._bytes += result.bytes_read
        self._lines += result.lines
        self._broken += result.broken + result.oversized
        session_key = result.session_id or result.path
        session = self._sessions.setdefault(session_key, _Session())
        if result.cost_state is not None:
            # (several files of one session: the largest total is the latest)
            session.cost_state = max(session.cost_state or 0.0, result.cost_state)
        index = len(self._files)
        file = _File(session_key, result.project, result.path, result.subagent,
                     result.first_at, result.last_at)
        self._files.append(file)
        if session.named_by < 0 or _names_first(file, self._files[session.named_by]):
            session.named_by = index
        for reply in result.replies:
            self._take(reply, index)
        self._loops.extend((loop, index) for loop in result.loops)
        if result.turns and self.budget.any_on:
            self._add_turns(result, index, session_key)

    def _add_turns(self, result: FileResult, file: int, session: str) -> None:
        first = 0
        for turn in result.turns:
            found = _TurnAt(turn, file, result.replies, first)
            first += turn.replies
            if result.subagent:
                self._asides.setdefault(session, []).append(found)
            else:
                self._turns.append(found)

    def _take(self, reply: Reply, file: int) -> None:
        known = self._copies.get(reply.key)
        if known is not None:
            self._duplicates += 1
            bigger = reply.usage.total - known.reply.usage.total
            if bigger < 0 or bigger == 0 and self._files[file].rank >= self._files[known.file].rank:
                return
        self._copies[reply.key] = _Copy(reply, file, self.prices.reply_cost(reply.model,
                                                                            reply.usage))

    def _within(self, first_at: str, last_at: str) -> bool:
        """Whether something from ``first_at`` to ``last_at`` is within --since/--until."""
        if self.until is not None:
            began = parse_timestamp(first_at)
            if began is not None and began > self.until:
                return False
        if self.since is None:
            return True
        ended = parse_timestamp(last_at) or parse_timestamp(first_at)
        return ended is None or ended >= self.since

    def _owners(self, loops: list[tuple[Loop, int]]) -> dict[ReplyKey, int]:
        """Which loop (index into ``loops``) owns each reply some loop claims."""
        owners: dict[ReplyKey, int] = {}
        for index, (loop, file) in enumerate(loops):
            for reply in loop.tokens:
                copy = self._copies.get(reply.key)
                owner = owners.get(reply.key)
                if owner is None or (copy is not None and copy.file == file
                                     and loops[owner][1] != file):
                    owners[reply.key] = index
        return owners

    def summary(self, listing: Listing | None = None) -> Summary:
        """The report so far; ``listing``: what finding the files skipped."""
        files = self._files
        # (a fixed order: the same owners whatever order the workers finished in)
        loops = sorted(self._loops, key=lambda item: (files[item[1]].rank, item[0].first_at,
                                                       item[0].rule, item[0].label))
        owners = self._owners(loops)
        models = self._by_model()
        rows: list[LoopRow] = []
        loops_of: Counter[str] = Counter()
        loops_usd: dict[str, float] = {}
        unpriced = fallback = duplicate_loops = 0
        for index, (loop, file) in enumerate(loops):
            owned = [reply.key for reply in loop.tokens if owners.get(reply.key) == index]
            if loop.tokens and not owned:
                duplicate_loops += 1
                continue
            if not self._within(loop.first_at, loop.last_at):
                continue
            later = {reply.key for reply in loop.avoidable}
            avoidable = [key for key in owned if key in later]  # (in order: sums repeat)
            tokens, cost, priced = self._sum(owned)
            avoidable_tokens, avoidable_cost, _ = self._sum(avoidable)
            for key in owned:
                usage, (_, how) = self._copies[key].reply.usage, self._copies[key].cost
                unpriced += usage.total if how == "unpriced" else 0
                fallback += usage.total if how == "fallback" else 0
            where = files[file]
            rows.append(LoopRow(loop, where.session if where.session != where.path else "",
                                where.project, where.path, where.subagent, cost,
                                avoidable_cost, tokens, avoidable_tokens, priced))
            loops_of[where.session] += 1
            loops_usd[where.session] = loops_usd.get(where.session, 0.0) + cost
        rows.sort(key=lambda row: (-row.cost_usd, -row.tokens.total, row.loop.first_at))
        skipped = Counter(self._skipped)
        skipped.update(listing.skipped if listing is not None else {})
        return Summary(
            loops=tuple(rows), sessions=self._session_rows(models, loops_of, loops_usd),
            tokens=sum((row.tokens for row in rows), Tokens()),
            avoidable_tokens=sum((row.avoidable for row in rows), Tokens()),
            cost_usd=sum(row.cost_usd for row in rows),
            avoidable_cost_usd=sum(row.avoidable_cost_usd for row in rows),
            unpriced_tokens=unpriced, transcripts=self._transcripts,
            bytes_read=self._bytes, lines=self._lines, broken_lines=self._broken,
            skipped=dict(sorted(skipped.items())), fallback_tokens=fallback,
            older=listing.older if listing is not None else 0,
            duplicate_replies=self._duplicates, duplicate_loops=duplicate_loops,
            budget=self._over_budget(), limits=self.budget)

    def _over_budget(self) -> tuple[BudgetRow, ...]:
        """The main files' turns over the budget, their subagents' replies counted in."""
        if not self._turns:
            return ()
        budget, files, copies = self.budget, self._files, self._copies
        asides = self._subagent_turns()
        # (most turns are cleared unsummed: too few replies even at the dearest reply's price)
        dearest = max((copy.cost[0] for copy in copies.values()), default=0.0)
        rows = []
        for index, main in enumerate(self._turns):
            turn, file, theirs = main.turn, main.file, asides.get(index, ())
            most_usd = dearest * (turn.replies + sum(aside.turn.replies for aside in theirs))
            if not (budget.minutes > 0 or 0 < budget.reprompts < turn.reprompts
                    or 0 < budget.usd < most_usd):
                continue
            keys = main.keys()
            if keys and all(copies[key].file != file for key in keys):
                continue  # a copy of a turn (a resumed session's): the original counts
            spent = set(keys).union(*(aside.keys() for aside in theirs))
            usd = fsum(copies[key].cost[0] for key in spent)
            priced: Priced = max((copies[key].cost[1] for key in spent), key=_WORST.__getitem__,
                                 default="exact")
            began, ended = parse_timestamp(turn.started_at), parse_timestamp(turn.ended_at)
            use = TurnUse(turn.reprompts, began, usd, priced == "fallback")
            over = over_by(budget, use, ended if ended is not None else began or 0.0)
            if not over or not self._within(turn.started_at, turn.ended_at):
                continue
            where = files[file]
            rows.append(BudgetRow(
                where.session if where.session != where.path else "", where.project,
                where.path, turn.started_at, turn.ended_at, turn.reprompts,
                None if began is None or ended is None else use.used(LIMIT_MINUTES, ended),
                usd, tuple(over.items()), priced))
        return tuple(sorted(rows, key=lambda row: (-row.cost_usd, row.started_at,
                                                   row.transcript_path)))

    def _subagent_turns(self) -> dict[int, list[_TurnAt]]:
        """Subagent files' turns by the main turn (index) under way as each began."""
        if not self._asides:
            return {}
        files = self._files
        main: dict[str, list[tuple[str, int]]] = {}
        for index, found in enumerate(self._turns):
            main.setdefault(files[found.file].session, []).append((found.turn.started_at, index))
        by_turn: dict[int, list[_TurnAt]] = {}
        for session, asides in self._asides.items():
            turns = sorted(main.get(session, ()))
            starts = [started for started, _ in turns]
            for aside in asides:
                at = bisect_right(starts, aside.turn.started_at) - 1
                if at >= 0:
                    by_turn.setdefault(turns[at][1], []).append(aside)
        return by_turn

    def _sum(self, keys: Iterable[ReplyKey]) -> tuple[Tokens, float, Priced]:
        tokens = Tokens()
        usd = 0.0
        priced: Priced = "exact"
        for copy in map(self._copies.__getitem__, keys):
            tokens = tokens + copy.reply.usage
            cost, how = copy.cost
            usd += cost
            if _WORST[how] > _WORST[priced]:
                priced = how
        return tokens, usd, priced

    def _by_model(self) -> dict[str, dict[str, _ModelSum]]:
        """The replies summed by session and model."""
        models: dict[str, dict[str, _ModelSum]] = {}
        session_of = [file.session for file in self._files]
        for copy in self._copies.values():
            reply = copy.reply
            per_model = models.get(session_of[copy.file])
            if per_model is None:
                per_model = models[session_of[copy.file]] = {}
            found = per_model.get(reply.model)
            if found is None:
                found = per_model[reply.model] = _ModelSum()
            found.add(reply.usage, *copy.cost)
        return models

    def _session_rows(self, models: dict[str, dict[str, _ModelSum]],
                      loops_of: Counter[str], loops_usd: dict[str, float]
                      ) -> tuple[SessionRow, ...]:
        # (costs summed by fsum: the same total in whatever order the workers' results came)
        began: dict[str, str] = {}
        files = self._files
        for file in self._files:
            if file.first_at and file.first_at < began.get(file.session, "\uffff"):
                began[file.session] = file.first_at
        rows = []
        for session_id, session in self._sessions.items():
            by_model = tuple(found.row(model)
                             for model, found in sorted(models.get(session_id, {}).items()))
            rows.append(SessionRow(session_id, files[session.named_by].project,
                                   loops_of[session_id], loops_usd.get(session_id, 0.0),
                                   sum(row.cost_usd for row in by_model), session.cost_state,
                                   sum((row.tokens for row in by_model), Tokens()), by_model,
                                   began.get(session_id, "")))
        return tuple(sorted(rows, key=lambda row: (-row.loops_cost_usd, -row.cost_usd,
                                                   row.session_id)))


def _names_first(file: _File, other: _File) -> bool:
    """Whether ``file``'s project names its session rather than ``other``'s."""
    return (file.subagent, *file.rank) < (other.subagent, *other.rank)


class _ModelSum:
    """One session's replies of one model, added up (a sum keeps no speed or region)."""

    __slots__ = ("counts", "priced", "usd")

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0, 0]
        self.usd: list[float] = []
        self.priced: Priced = "exact"

    def add(self, usage: Tokens, cost: float, how: Priced) -> None:
        counts = self.counts
        counts[0] += usage.input
        counts[1] += usage.output
        counts[2] += usage.cache_read
        counts[3] += usage.cache_creation
        counts[4] += usage.cache_creation_1h
        self.usd.append(cost)
        if _WORST[how] > _WORST[self.priced]:
            self.priced = how

    def row(self, model: str) -> ModelRow:
        counts = self.counts
        return ModelRow(model, Tokens(counts[0], counts[1], counts[2], counts[3], counts[4]),
                        fsum(self.usd), self.priced)


def ordered(summary: Summary, order: str) -> Summary:
    """The summary with its loops and turns by ``order``: "cost" (as made) or "time"."""
    if order != "time":
        return summary
    return replace(summary, loops=tuple(sorted(
        summary.loops, key=lambda row: (parse_timestamp(row.loop.first_at) or 0.0,
                                        row.loop.first_at))),
        budget=tuple(sorted(summary.budget, key=lambda row: (
            parse_timestamp(row.started_at) or 0.0, row.started_at))))
