"""The pure core: rules, transcript parsing and run detection. No I/O here."""

from .detector import (
    Answer,
    AnswerAssembler,
    Detection,
    RunAnswer,
    RunDetector,
    SessionReader,
    detect_transcript,
)
from .rules import (
    IDLE_TURNS,
    RULE_IDLE,
    RULE_SAME,
    SAME_REPLY_TURNS,
    SIMILAR,
    is_reprompt,
    rule_phrase,
    similar,
    similarity,
    text_digest,
    words,
)
from .transcript import (
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    LineBuffer,
    ParseStats,
    Reprompt,
    SystemEntry,
    ToolResults,
    TurnStart,
    is_run_boundary,
    parse_line,
    parse_timestamp,
)

__all__ = [
    "IDLE_TURNS", "RULE_IDLE", "RULE_SAME", "SAME_REPLY_TURNS", "SIMILAR",
    "Answer", "AnswerAssembler", "AssistantPart", "Detection", "Discard", "Event",
    "GoalStatus", "LineBuffer", "ParseStats", "Reprompt", "RunAnswer", "RunDetector",
    "SessionReader", "SystemEntry", "ToolResults", "TurnStart", "detect_transcript",
    "is_reprompt", "is_run_boundary", "parse_line", "parse_timestamp", "rule_phrase", "similar", "similarity", "text_digest",
    "words",
]
