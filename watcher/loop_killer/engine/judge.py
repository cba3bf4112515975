"""The judge: one session's trailing run of answers to re-prompts, and the two rules over it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from .rules import (
    DEFAULT_THRESHOLDS,
    RULE_IDLE,
    RULE_SAME,
    Rule,
    Thresholds,
    similar,
    similarity,
    words,
)

__all__ = ["MAX_KEPT_WORDS", "Detection", "Run", "RunAnswer"]


@dataclass(frozen=True, slots=True)
class RunAnswer:
    """An answer in the run, with what the rules need to compare it."""

    uuid: str
    prompt_uuid: str
    timestamp: str
    text: str
    words: frozenset[str]
    similarity_to_previous: float | None  # None for the first answer of the run


@dataclass(frozen=True, slots=True)
class Detection:
    """A rule fired: the run of answers that crossed a threshold."""

    session_id: str
    rule: Rule
    answers: tuple[RunAnswer, ...]  # the answers involved, oldest first
    similarities: tuple[float, ...]  # between consecutive answers involved
    run_length: int  # answers in the run when it fired

    @property
    def count(self) -> int:
        return len(self.answers)

    @property
    def answer_uuid(self) -> str:  # (the answer that fired)
        return self.answers[-1].uuid

    @property
    def first_timestamp(self) -> str:
        return self.answers[0].timestamp

    @property
    def last_timestamp(self) -> str:
        return self.answers[-1].timestamp

    def to_dict(self, *, max_text: int = 2000) -> dict[str, Any]:
        """A JSON-ready summary (texts cut to ``max_text`` characters)."""
        return {"session_id": self.session_id, "rule": self.rule, "count": self.count,
                "run_length": self.run_length, "answer_uuid": self.answer_uuid,
                "first_timestamp": self.first_timestamp, "last_timestamp": self.last_timestamp,
                "similarities": [round(s, 4) for s in self.similarities],
                "answers": [{"uuid": a.uuid, "timestamp": a.timestamp,
                             "text": a.text[:max_text]} for a in self.answers]}


MAX_KEPT_WORDS = 2000  # words of the last answer a saved run keeps to compare the next
# A saved run stays small (escaped, a non-ASCII character is 6 bytes): words of at most 64
# characters, 2,000 of the last answer's characters (a wordless one: its text), 200 of others'.
_KEPT_WORD = 64
_KEPT_TEXT = 2000
_KEPT_SNIPPET = 200
_KEPT_TOLD = 20  # answers a saved run keeps whole, the newest (a detection tells them)


class Run:
    """One session's trailing run of answers to re-prompts, and the two rules over it."""

    __slots__ = ("answers", "chain", "length", "thresholds")

    def __init__(self, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.thresholds = thresholds
        # The newest answers the larger threshold needs (a list: an empty deque costs 600 bytes).
        self.answers: list[RunAnswer] = []
        self.length = 0  # answers in the run (may exceed those kept)
        self.chain = 0  # trailing answers that form a chain of similar answers

    def extend(self, uuid: str, prompt_uuid: str, timestamp: str, text: str) -> None:
        answer_words = words(text)
        previous = self.answers[-1] if self.answers else None
        score = None
        if previous is not None:
            score = similarity(previous.words, answer_words)
            similar_ = similar(previous.text, previous.words, text, answer_words,
                               self.thresholds.similar_fraction)
            self.chain = self.chain + 1 if similar_ else 1
        else:
            self.chain = 1
        if len(self.answers) >= self.thresholds.longest:
            del self.answers[0]
        self.answers.append(RunAnswer(uuid, prompt_uuid, timestamp, text, answer_words, score))
        self.length += 1

    def check(self, session_id: str) -> Detection | None:
        thresholds = self.thresholds
        if thresholds.fires(RULE_SAME, self.chain):
            return self._detection(session_id, RULE_SAME, thresholds.same_reply_turns)
        if thresholds.fires(RULE_IDLE, self.length):
            return self._detection(session_id, RULE_IDLE, thresholds.idle_turns)
        return None

    def could_fire(self) -> bool:  # (with one more answer)
        thresholds = self.thresholds
        return (thresholds.fires(RULE_SAME, self.chain + 1)
                or thresholds.fires(RULE_IDLE, self.length + 1))

    def _detection(self, session_id: str, rule: Rule, count: int) -> Detection:
        involved = tuple(self.answers[-count:])
        scores = tuple(a.similarity_to_previous for a in involved[1:]
                       if a.similarity_to_previous is not None)
        return Detection(session_id, rule, involved, scores, self.length)

    def reset(self) -> None:
        self.answers.clear()
        self.length = 0
        self.chain = 0

    def to_state(self) -> dict[str, Any]:
        """The run as JSON-ready data (the last answer's words bounded)."""
        last = self.answers[-1] if self.answers else None
        kept = [word for word in sorted(last.words) if len(word) <= _KEPT_WORD] \
            if last is not None else []
        told = len(self.answers) - _KEPT_TOLD  # older answers: only that they were there
        return {"length": self.length, "chain": self.chain, "words": kept[:MAX_KEPT_WORDS],
                "answers": [["", "", "", "", None] if index < told else
                            [a.uuid[:_KEPT_SNIPPET], a.prompt_uuid[:_KEPT_SNIPPET],
                             a.timestamp[:40],
                             a.text[:_KEPT_TEXT if a is last else _KEPT_SNIPPET],
                             a.similarity_to_previous]
                            for index, a in enumerate(self.answers)]}

    @classmethod
    def from_state(cls, state: object, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Run:
        """A run saved by ``to_state``; an empty one for anything else."""
        run = cls(thresholds)
        if not isinstance(state, dict):
            return run
        length, chain, kept = state.get("length"), state.get("chain"), state.get("answers")
        last_words = state.get("words")
        if not (_count(length) and _count(chain) and isinstance(kept, list)
                and isinstance(last_words, list)):
            return run
        for item in kept[-thresholds.longest:]:
            if not (isinstance(item, list) and len(item) == 5
                    and all(isinstance(field, str) for field in item[:4])
                    and (item[4] is None or isinstance(item[4], (int, float)))):
                return cls(thresholds)
            uuid, prompt_uuid, timestamp, text, score = item
            run.answers.append(RunAnswer(uuid, prompt_uuid, timestamp, text, frozenset(), score))
        if run.answers:
            run.answers[-1] = replace(run.answers[-1], words=frozenset(
                word for word in last_words if isinstance(word, str)))
        run.length = max(int(length), len(run.answers))  # (``_count`` checked both)
        run.chain = min(int(chain), run.length)
        return run


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
