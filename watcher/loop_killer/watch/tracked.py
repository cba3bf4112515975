"""What the watcher keeps per followed transcript (only ``sessions`` assigns its fields)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine.answers import Answer
from ..engine.reader import TranscriptReader
from ..engine.run import RunDetector
from ..engine.stand_ins import ToolCounts
from ..engine.transcript import GoalStatus
from .follower import Follower

__all__ = ["CatchUpStats", "Dormant", "Published", "Streaks", "Tracked"]

Streaks = tuple[tuple[str, str, int], ...]
"""Calls giving the same result again this turn: (call key, label, count), newest last."""


@dataclass(frozen=True, slots=True)
class Dormant:
    """What a dormant session keeps of its detector (its tail may not reach back)."""

    goal: GoalStatus | None
    last_answer: Answer | None  # without its text (the status keeps only its digest)
    answers_seen: int


@dataclass(frozen=True, slots=True)
class Published:
    """What the session's last status said (``key``; None: write it again), its last answer."""

    key: tuple[Any, ...] | None = None
    answer_uuid: str = ""
    digest: str = ""
    seen_at: float = 0.0  # epoch seconds


@dataclass(slots=True, eq=False)
class Tracked:
    """One session transcript being followed."""

    path: str  # a str, not a Path: thousands are kept, and a Path costs 450 bytes more
    session_id: str
    project: str
    follower: Follower
    reader: TranscriptReader | None  # None while dormant: rebuilt from the tail on growth
    tools: ToolCounts | None = None  # the main session's tool-repeat counts
    off: bool = False  # in a project switched off (``Settings.project_off``): no rule
    cwd: str = ""  # the session's real path, as its lines last gave it ("" not yet)
    tool_streaks: Streaks = ()
    history_end: int = 0  # bytes already in the file when first seen live
    last_activity: float = 0.0  # when the file last grew (epoch seconds)
    published: Published = Published()
    reported_broken: int = 0
    reported_oversized: int = 0
    dormant: Dormant | None = None  # set while the detector is let go

    @property
    def detector(self) -> RunDetector | None:
        return self.reader.detector if self.reader is not None else None

    @property
    def consumed(self) -> int:
        """Offset just past the last whole line read."""
        return self.reader.offset if self.reader is not None else self.follower.offset

    @property
    def pending_bytes(self) -> int:  # of an unfinished last line
        return self.reader.pending_bytes if self.reader is not None else 0


@dataclass(slots=True)
class CatchUpStats:
    sessions: int = 0
    bytes_read: int = 0
    runs: int = 0
    projects: set[str] = field(default_factory=set)
