"""The product's rules, in one place. A *re-prompt* is a user message starting (any case) with
``REPROMPT_PREFIXES``: a Stop hook refused to let the turn end. The *run*: the trailing answers
to re-prompts that did no work. SAME_REPLY_TURNS fires when its last answers are pairwise
similar (``SIMILAR``), IDLE_TURNS when it holds that many; a firing starts the run afresh."""

from __future__ import annotations

from ..light import Value, hex_digest
from .waiting import WAIT_MINUTES

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: a tool-call hook imports this module
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from fractions import Fraction
    from typing import Final, Literal

__all__ = ["DEFAULT_THRESHOLDS", "EVERY_RULE", "IDLE_TURNS", "LIMIT_RULES", "REPROMPT_PREFIXES",
           "RULE_BUDGET", "RULE_EDIT_OSCILLATION", "RULE_IDLE", "RULE_MANUAL",
           "RULE_REFUSED_RETRIES", "RULE_SAME", "SAME_REPLY_TURNS", "SIMILAR", "Rule",
           "Thresholds", "is_reprompt", "leading_space", "rule_phrase", "similar", "similarity",
           "text_digest", "words"]

SAME_REPLY_TURNS = 3  # consecutive answers to re-prompts, pairwise similar, that fire
IDLE_TURNS = 6  # answers to re-prompts in a run, none with tool work, that fire
SIMILAR = 0.6  # word-set Jaccard at or above which two answers are similar
REPROMPT_PREFIXES = ("stop hook feedback:", "stop hook", "[stop hook", "hook re-prompted")

if TYPE_CHECKING:
    Rule = Literal["SAME_REPLY_TURNS", "IDLE_TURNS", "MANUAL", "TOOL_REPEAT", "BUDGET"]
else:
    Rule = str

RULE_SAME: Final = "SAME_REPLY_TURNS"
RULE_IDLE: Final = "IDLE_TURNS"
RULE_MANUAL: Final = "MANUAL"  # a clear asked for by hand, not a rule of the detector
RULE_REFUSED_RETRIES: Final = "TOOL_REPEAT"  # (engine.tool_repeat.RULE_TOOL_REPEAT) its stop
RULE_EDIT_OSCILLATION: Final = "EDIT_OSCILLATION"  # (engine.edits) warned, then refused
RULE_BUDGET: Final = "BUDGET"  # (engine.budget) a turn's re-prompts, spend or time
RULES: Final[tuple[Rule, ...]] = (RULE_SAME, RULE_IDLE, RULE_MANUAL, RULE_BUDGET)  # requests'
EVERY_RULE: Final = (*RULES, RULE_REFUSED_RETRIES, RULE_EDIT_OSCILLATION)  # the log's
# Rules that end a turn at a limit, not a loop: their detail is their phrase (``rule_phrase``),
# no run of answers is theirs.
LIMIT_RULES: Final = frozenset({RULE_BUDGET})

# Compiled on first use: a tool-call hook loads this module and never imports ``re`` (7 ms).
_leading_space: Callable[[str], re.Match[str] | None] | None = None


class Thresholds(Value):
    """The re-prompt rules' numbers (a person may change them: ``state.config``)."""

    __slots__ = ("same_reply_turns", "idle_turns", "similar", "off", "wait_minutes")
    same_reply_turns: int
    idle_turns: int
    similar: float
    off: frozenset[str]  # rules switched off (RULE_SAME, RULE_IDLE)
    wait_minutes: float  # how long a waiting call's result may stay the same

    def __init__(self, same_reply_turns: int = SAME_REPLY_TURNS, idle_turns: int = IDLE_TURNS,
                 similar: float = SIMILAR, off: frozenset[str] = frozenset(),
                 wait_minutes: float = WAIT_MINUTES) -> None:
        self._set(same_reply_turns=same_reply_turns, idle_turns=idle_turns, similar=similar,
                  off=off, wait_minutes=wait_minutes)

    @property
    def wait_seconds(self) -> float:
        return self.wait_minutes * 60

    def fires(self, rule: str, count: int) -> bool:
        if rule in self.off:
            return False
        return count >= (self.same_reply_turns if rule == RULE_SAME else self.idle_turns)

    @property
    def longest(self) -> int:  # (the most answers of a run a rule looks at)
        return max(self.same_reply_turns, self.idle_turns)

    @property
    def reach(self) -> int:  # (re-prompts back a trailing run must be read to judge it)
        return self.longest + 1

    @property
    def similar_fraction(self) -> Fraction:  # (exact: so that exactly 0.6 is similar)
        return _fraction(self.similar)


DEFAULT_THRESHOLDS: Final = Thresholds()
_FRACTIONS: dict[float, Fraction] = {}  # (made once: a scan compares thousands of answers)


def _fraction(value: float) -> Fraction:
    if value not in _FRACTIONS:
        from fractions import Fraction  # (a tool-call hook never compares answers)

        _FRACTIONS[value] = Fraction(value).limit_denominator(1000)
    return _FRACTIONS[value]


def leading_space(text: str) -> int:
    """How many whitespace characters ``text`` starts with (no copy of it)."""
    global _leading_space
    if _leading_space is None:
        import re

        _leading_space = re.compile(r"\s*").match
    match = _leading_space(text)
    return match.end() if match is not None else 0


def is_reprompt(text: str) -> bool:
    start = leading_space(text)
    return text[start : start + 24].lower().startswith(REPROMPT_PREFIXES)


def words(text: str) -> frozenset[str]:
    """The distinct lowercase words (3+ letters or digits, any script) of ``text``; in scripts
    written without spaces each pair of neighbouring characters counts as a word."""
    lowered = text.lower()
    # (translate and split, not ``re``: its import cost a hook 5-9 ms)
    cut = lowered.translate(_WORD_CHARS)
    pairs: list[str] = []
    if UNSPACED in cut:
        for run in lowered.translate(_UNSPACED_CHARS).split():
            shape = run.translate(_MARKS)  # "m" for a combining mark, "l" for the others
            letters = list(run) if "m" not in shape else _letters(run, shape)
            pairs += ["".join(letters[i:i + 2]) for i in range(max(1, len(letters) - 1))]
        cut = cut.replace(UNSPACED, " ")
    return frozenset([word for word in cut.split() if len(word) > 2]).union(pairs)


UNSPACED = "\0"  # what ``_WORD_CHARS`` makes of a character of an unspaced script


def _letters(run: str, shape: str) -> list[str]:
    """Each character with the combining marks after it; marks that open the run make one."""
    letters: list[str] = []
    for char, kind in zip(run, shape, strict=True):
        if letters and kind == "m":
            letters[-1] += char
        else:
            letters.append(char)
    return letters


def _unspaced(code: int) -> bool:
    return (0x0E00 <= code <= 0x0EFF or 0x1000 <= code <= 0x109F or 0x1780 <= code <= 0x17FF
            or 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x4DBF or 0x4E00 <= code <= 0x9FFF
            or 0xF900 <= code <= 0xFAFF)


def _is_mark(char: str) -> bool:
    from bisect import bisect_right

    from .marks import MARK_RANGES

    index = bisect_right(MARK_RANGES, (ord(char), 0x10FFFF))
    return index > 0 and ord(char) <= MARK_RANGES[index - 1][1]


class _Table(dict[int, str]):
    """A ``str.translate`` table filled in as characters come; emptied past ``_TABLE_MAX``."""

    def __init__(self, keep: Callable[[str], str]) -> None:
        super().__init__()
        self.keep = keep

    def __missing__(self, code: int) -> str:
        if len(self) >= _TABLE_MAX:
            self.clear()
        self[code] = value = self.keep(chr(code))
        return value


_TABLE_MAX = 16384


def _word_char(char: str) -> str:
    """A letter, digit or combining mark stays; any other character cuts words."""
    if _unspaced(ord(char)):
        return UNSPACED
    return char if char.isalnum() or _is_mark(char) else " "


_WORD_CHARS = _Table(_word_char)
_UNSPACED_CHARS = _Table(lambda char: char if _unspaced(ord(char)) else " ")
_MARKS = _Table(lambda char: "m" if _is_mark(char) else "l")


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Word-set Jaccard of two word sets (1.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def similar(text_a: str, words_a: frozenset[str], text_b: str, words_b: frozenset[str],
            fraction: Fraction | None = None) -> bool:
    if not words_a and not words_b:
        return text_a == text_b
    if fraction is None:
        fraction = DEFAULT_THRESHOLDS.similar_fraction
    union = len(words_a | words_b)
    shared = len(words_a & words_b)
    return shared * fraction.denominator >= fraction.numerator * union


def rule_phrase(rule: str, count: int, detail: str = "") -> str:
    """What a rule saw, in words, for every line a person reads; ``detail``: what more its
    firing said (the phrase itself for a rule in ``LIMIT_RULES``)."""
    if rule == RULE_SAME:  # (replies to re-prompts only: the number a person counts)
        return f"{count} similar replies to re-prompts"
    if rule == RULE_IDLE:
        return f"{count} replies to re-prompts without new work"
    if rule == RULE_MANUAL:
        return "asked by hand with loop-killer clear"
    if rule == RULE_REFUSED_RETRIES:
        return f"a refused call tried {count} more times"
    if rule == RULE_EDIT_OSCILLATION:
        return f"edited back to an earlier version {count} times"
    if rule == RULE_BUDGET:  # (its detail names the limit: ``engine.budget.describe``)
        return detail or "the turn's budget reached"
    return f"{count} replies"


def text_digest(text: str) -> str:
    """A short digest of an answer's text, insensitive to whitespace layout."""
    normalized = " ".join(text.split())
    return hex_digest(normalized, 16)
