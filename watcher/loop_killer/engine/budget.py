"""BUDGET: the backstop that ends a turn no loop rule can tell from work (pure)."""

from __future__ import annotations

from ..light import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the Stop hook imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Final

__all__ = ["BUDGET_MINUTES", "BUDGET_REPROMPTS", "BUDGET_USD", "DEFAULT_BUDGET", "LIMITS",
           "LIMIT_MINUTES", "LIMIT_REPROMPTS", "LIMIT_USD", "WARN_AT", "Against", "Budget",
           "Crossing", "TurnSpend", "TurnUse", "against", "beyond_words", "crossed", "describe",
           "figures", "limits_words", "live_words", "minutes_text", "nearing", "over_by",
           "read_figures", "short_words", "usd_text"]

BUDGET_REPROMPTS = 100  # eleven times Claude Code's own cap of 9 in a row
BUDGET_USD = 25.0  # main session and subagents
BUDGET_MINUTES = 0.0  # no limit: a turn may wait on CI for long, rightly
WARN_AT = 0.8  # the share of a limit at which the person is told, once, that a turn nears it

LIMIT_REPROMPTS: Final = "reprompts"
LIMIT_USD: Final = "usd"
LIMIT_MINUTES: Final = "minutes"
LIMITS: Final = (LIMIT_REPROMPTS, LIMIT_USD, LIMIT_MINUTES)


class Budget(Value):
    """The limits of one turn; a limit of 0 is off."""

    __slots__ = ("reprompts", "usd", "minutes")
    reprompts: int
    usd: float
    minutes: float

    def __init__(self, reprompts: int = BUDGET_REPROMPTS, usd: float = BUDGET_USD,
                 minutes: float = BUDGET_MINUTES) -> None:
        self._set(reprompts=reprompts, usd=usd, minutes=minutes)

    def limit(self, name: str) -> float:
        return float(getattr(self, name))

    @property
    def any_on(self) -> bool:
        return any(self.limit(name) > 0 for name in LIMITS)


DEFAULT_BUDGET: Final = Budget()


class TurnUse(Value):
    """What one turn has used so far (``fallback``: priced at a family's price; ``goal``: set)."""

    __slots__ = ("reprompts", "started_at", "usd", "fallback", "goal")
    reprompts: int
    started_at: float | None
    usd: float
    fallback: bool
    goal: bool

    def __init__(self, reprompts: int = 0, started_at: float | None = None, usd: float = 0.0,
                 fallback: bool = False, goal: bool = False) -> None:
        self._set(reprompts=reprompts, started_at=started_at, usd=usd, fallback=fallback, goal=goal)

    def used(self, name: str, now: float) -> float:
        if name == LIMIT_REPROMPTS:
            return float(self.reprompts)
        if name == LIMIT_USD:
            return self.usd
        return 0.0 if self.started_at is None else max(0.0, now - self.started_at) / 60


class Crossing(Value):
    """A limit a turn has reached (or nears), and the words for the notice and the log."""

    __slots__ = ("limit", "used", "words")
    limit: str
    used: float
    words: str

    def __init__(self, limit: str, used: float, words: str) -> None:
        self._set(limit=limit, used=used, words=words)

    @property
    def count(self) -> int:  # (for records: the re-prompts, the cents, the minutes)
        return round(self.used * 100) if self.limit == LIMIT_USD else int(self.used)


def _reached(name: str, used: float, limit: float) -> bool:
    # (at the last re-prompt allowed, one more would be beyond; money once spent beyond)
    return used > limit if name == LIMIT_USD else used >= limit


def _on(budget: Budget, use: TurnUse, now: float, limits: tuple[str, ...] = LIMITS
        ) -> Iterator[tuple[str, float, float]]:
    """(limit, used, most) of each of ``limits`` that is on."""
    for name in limits:
        if budget.limit(name) > 0:
            yield name, use.used(name, now), budget.limit(name)


def crossed(budget: Budget, use: TurnUse, now: float,
            limits: tuple[str, ...] = LIMITS) -> Crossing | None:
    """The first of ``limits`` (of those on) the turn has reached, or None."""
    return next((Crossing(name, used, describe(name, used, most, use))
                 for name, used, most in _on(budget, use, now, limits)
                 if _reached(name, used, most)), None)


def nearing(budget: Budget, use: TurnUse, now: float, *, share: float = WARN_AT
            ) -> tuple[Crossing, ...]:
    """The limits (of those on) the turn has used ``share`` of but not reached."""
    return tuple(Crossing(name, used, describe(name, used, most, use))
                 for name, used, most in _on(budget, use, now)
                 if used >= share * most and not _reached(name, used, most))


def over_by(budget: Budget, use: TurnUse, now: float) -> dict[str, float]:
    """For a past turn: each limit it went beyond, and by how much."""
    return {name: used - most for name, used, most in _on(budget, use, now) if used > most}


class Against(Value):
    __slots__ = ("limit", "used", "most")
    limit: str
    used: float
    most: float

    def __init__(self, limit: str, used: float, most: float) -> None:
        self._set(limit=limit, used=used, most=most)

    @property
    def share(self) -> float:
        return self.used / self.most


def against(budget: Budget, use: TurnUse, now: float) -> tuple[Against, ...]:
    """Each limit that is on, with what the turn has used of it (wall time if known)."""
    return tuple(Against(name, used, most) for name, used, most in _on(budget, use, now)
                 if name != LIMIT_MINUTES or use.started_at is not None)


def figures(budget: Budget, use: TurnUse) -> dict[str, object]:
    """A turn's figures as the watcher publishes them (``read_figures`` reads them back)."""
    return {"reprompts": use.reprompts, "started_at": use.started_at,
            "usd": round(use.usd, 6), "fallback": use.fallback, "goal": use.goal,
            "limits": {LIMIT_REPROMPTS: budget.reprompts, LIMIT_USD: budget.usd,
                       LIMIT_MINUTES: budget.minutes}}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


def read_figures(raw: object) -> tuple[Budget, TurnUse] | None:
    """``figures`` read back; None when they are not figures."""
    if not isinstance(raw, dict) or not isinstance(raw.get("limits"), dict):
        return None
    limits = {name: _number(raw["limits"].get(name)) for name in LIMITS}
    reprompts, usd = _number(raw.get("reprompts")), _number(raw.get("usd"))
    started_at = raw.get("started_at")
    if (None in limits.values() or reprompts is None or usd is None
            or (started_at is not None and _number(started_at) is None)):
        return None
    budget = Budget(int(limits[LIMIT_REPROMPTS] or 0), limits[LIMIT_USD] or 0.0,
                    limits[LIMIT_MINUTES] or 0.0)
    return budget, TurnUse(int(reprompts), _number(started_at), usd,
                           raw.get("fallback") is True, raw.get("goal") is True)


def usd_text(usd: float) -> str:
    """``$25.13``; below ten cents, three significant digits (``$0.00103``)."""
    return f"${usd:.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.3g}"


def describe(name: str, used: float, limit: float, use: TurnUse) -> str:
    """``$25.13 spent in this goal, limit $25.00``, and its kin for the other limits."""
    where = "in this goal" if use.goal else "in this turn"
    if name == LIMIT_REPROMPTS:
        return f"{int(used)} re-prompts {where}, limit {int(limit)}"
    if name == LIMIT_USD:
        guess = " (partly at a model family's price)" if use.fallback else ""
        return f"{usd_text(used)} spent {where}{guess}, limit {usd_text(limit)}"
    return f"{minutes_text(used)} {where}, limit {minutes_text(limit)}"


def live_words(raw: dict[str, Any], now: float) -> str:
    """For ``status``: ``$1.20 of $25.00 spent, 12 of 100 re-prompts, 14 min (no limit)``."""
    limits = raw.get("limits") or {}

    def of(used: str, name: str, shown: Callable[[float], str], unit: str = "") -> str:
        limit = limits.get(name)
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
            return f"{used} of {shown(limit)}{unit}"
        return f"{used}{unit} (no limit)"

    spent = of(usd_text(float(raw.get("usd") or 0)), LIMIT_USD, usd_text)
    guess = " (partly at a model family's price)" if raw.get("fallback") else ""
    reprompts = of(str(raw.get("reprompts", 0)), LIMIT_REPROMPTS, lambda n: f"{n:g}")
    started = raw.get("started_at")
    took = f"{(now - float(started)) / 60:.0f}" if isinstance(started, (int, float)) else "?"
    return (f"{spent} spent{guess}, {reprompts} re-prompts, "
            f"{of(took, LIMIT_MINUTES, lambda n: f'{n:g}', ' min')}")


def short_words(budget: Budget, use: TurnUse, now: float, money: Callable[[float], str]
                ) -> tuple[str, ...]:
    """For ``top``, the nearest limit first: ``$1.20/$25 · 12/100 re-prompts · 14/60 min``."""
    used = sorted((a for a in against(budget, use, now) if a.used > 0),
                  key=lambda a: -a.share)  # (stable: spend before re-prompts at a tie)

    def text(figure: Against) -> str:
        if figure.limit == LIMIT_USD:
            most = f"${figure.most:g}" if figure.most == int(figure.most) else money(figure.most)
            return f"{money(figure.used)}/{most}"
        if figure.limit == LIMIT_REPROMPTS:
            return f"{figure.used:.0f}/{figure.most:.0f} re-prompts"
        return f"{figure.used:.0f}/{figure.most:g} min"

    parts = [text(a) for a in used]
    return tuple(" · ".join(parts[:count]) for count in range(len(parts), 0, -1))


def limits_words(budget: Budget) -> str:
    """The limits that are on: ``100 re-prompts, $25.00``."""
    return ", ".join(text for on, text in (
        (budget.reprompts > 0, f"{budget.reprompts} re-prompts"),
        (budget.usd > 0, usd_text(budget.usd)),
        (budget.minutes > 0, minutes_text(budget.minutes))) if on)


def beyond_words(over: tuple[tuple[str, float], ...], money: Callable[[float], str]) -> str:
    """How far a past turn went beyond each limit (``over_by``): ``3 re-prompts, $1.20``."""

    def text(name: str, by: float) -> str:
        if name == LIMIT_REPROMPTS:
            return f"{round(by)} re-prompt{'s' if round(by) != 1 else ''}"
        return money(by) if name == LIMIT_USD else minutes_text(by)

    return ", ".join(text(name, by) for name, by in over)


def minutes_text(minutes: float) -> str:
    """``45 s``, ``12 min``, ``2.5 h``."""
    if minutes < 1:
        return f"{round(minutes * 60)} s"
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


class TurnSpend:
    """One turn's figures as its lines arrive, each API reply priced once (its largest copy)."""

    __slots__ = ("_replies", "reprompts", "started_at", "warned", "stopped")

    def __init__(self, started_at: float | None = None) -> None:
        self.started_at = started_at
        self.reprompts = 0
        self._replies: dict[str, tuple[float, bool]] = {}  # key -> (USD, family-priced)
        self.warned: set[str] = set()  # limits the person was told this turn nears
        self.stopped = False  # a stop was asked for this turn

    def reply(self, key: str, usd: float, *, fallback: bool = False) -> None:
        known = self._replies.get(key)
        if known is None or usd > known[0]:
            self._replies[key] = (usd, fallback)

    def use(self, *, goal: bool = False) -> TurnUse:
        usd = sum(cost for cost, _ in self._replies.values())
        fallback = any(guess for _, guess in self._replies.values())
        return TurnUse(self.reprompts, self.started_at, usd, fallback, goal)
