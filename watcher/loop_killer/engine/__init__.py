"""The pure core: rules, transcript reading and run detection. No I/O here.

The flow, one module a step: ``lines`` (bytes -> whole lines) -> ``transcript`` (a line
-> an event) -> ``answers`` (events -> answers) -> ``run`` (answers -> the run, the
rules -> detections); ``reader`` strings them together for every consumer. ``rules``
holds the product's rules and their constants.
"""

from .answers import PROMPT_NONE, PROMPT_REPROMPT, PROMPT_TURN, Answer, AnswerAssembler, PromptKind
from .lines import MAX_LINE_BYTES, LineBuffer
from .reader import EventReader, LineEvent, Step, TranscriptReader, detect_transcript
from .rules import (
    IDLE_TURNS,
    RULE_IDLE,
    RULE_MANUAL,
    RULE_SAME,
    SAME_REPLY_TURNS,
    SIMILAR,
    Rule,
    is_reprompt,
    rule_phrase,
    similar,
    similarity,
    text_digest,
    words,
)
from .run import Detection, RunAnswer, RunDetector
from .transcript import (
    AssistantPart,
    Discard,
    Event,
    GoalStatus,
    ParseStats,
    Reprompt,
    SystemEntry,
    ToolCall,
    ToolResult,
    ToolResults,
    TurnKind,
    TurnStart,
    Usage,
    is_run_boundary,
    parse_line,
    parse_timestamp,
)

__all__ = [
    "IDLE_TURNS",
    "MAX_LINE_BYTES",
    "PROMPT_NONE",
    "PROMPT_REPROMPT",
    "PROMPT_TURN",
    "RULE_IDLE",
    "RULE_MANUAL",
    "RULE_SAME",
    "SAME_REPLY_TURNS",
    "SIMILAR",
    "Answer",
    "AnswerAssembler",
    "AssistantPart",
    "Detection",
    "Discard",
    "Event",
    "EventReader",
    "GoalStatus",
    "LineBuffer",
    "LineEvent",
    "ParseStats",
    "PromptKind",
    "Reprompt",
    "Rule",
    "RunAnswer",
    "RunDetector",
    "Step",
    "SystemEntry",
    "ToolCall",
    "ToolResult",
    "ToolResults",
    "TranscriptReader",
    "TurnKind",
    "TurnStart",
    "Usage",
    "detect_transcript",
    "is_reprompt",
    "is_run_boundary",
    "parse_line",
    "parse_timestamp",
    "rule_phrase",
    "similar",
    "similarity",
    "text_digest",
    "words",
]
