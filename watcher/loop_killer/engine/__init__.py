"""The pure core: rules, transcript reading and run detection. No I/O here.

The flow, one module a step: ``lines`` (bytes -> whole lines) -> ``transcript`` (a line
-> an event; ``prefilter`` skips, from their bytes, the lines that cannot matter) ->
``answers`` (events -> answers) -> ``run`` (answers -> the run, the rules ->
detections); ``reader`` strings them together for every consumer. ``rules`` holds the
product's rules and their constants; ``tool_repeat`` and ``stand_ins`` the tool-repeat
rule's counting.

Names are loaded on first use (PEP 562), so a hook that needs one module of the engine
(the tool-repeat counter, say) does not pay for importing the others.
"""

from importlib import import_module

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook 2 ms
if TYPE_CHECKING:
    from .answers import (
        PROMPT_NONE,
        PROMPT_REPROMPT,
        PROMPT_TURN,
        Answer,
        AnswerAssembler,
        PromptKind,
    )
    from .lines import MAX_LINE_BYTES, LineBuffer
    from .reader import EventReader, LineEvent, Step, TranscriptReader, detect_transcript
    from .rules import (
        DEFAULT_THRESHOLDS,
        IDLE_TURNS,
        RULE_IDLE,
        RULE_MANUAL,
        RULE_SAME,
        SAME_REPLY_TURNS,
        SIMILAR,
        Rule,
        Thresholds,
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

_MODULE_OF = {
    "DEFAULT_THRESHOLDS": "rules",
    "Thresholds": "rules",
    "Answer": "answers",
    "AnswerAssembler": "answers",
    "AssistantPart": "transcript",
    "Detection": "run",
    "Discard": "transcript",
    "Event": "transcript",
    "EventReader": "reader",
    "GoalStatus": "transcript",
    "IDLE_TURNS": "rules",
    "LineBuffer": "lines",
    "LineEvent": "reader",
    "MAX_LINE_BYTES": "lines",
    "PROMPT_NONE": "answers",
    "PROMPT_REPROMPT": "answers",
    "PROMPT_TURN": "answers",
    "ParseStats": "transcript",
    "PromptKind": "answers",
    "RULE_IDLE": "rules",
    "RULE_MANUAL": "rules",
    "RULE_SAME": "rules",
    "Reprompt": "transcript",
    "Rule": "rules",
    "RunAnswer": "run",
    "RunDetector": "run",
    "SAME_REPLY_TURNS": "rules",
    "SIMILAR": "rules",
    "Step": "reader",
    "SystemEntry": "transcript",
    "ToolCall": "transcript",
    "ToolResult": "transcript",
    "ToolResults": "transcript",
    "TranscriptReader": "reader",
    "TurnKind": "transcript",
    "TurnStart": "transcript",
    "Usage": "transcript",
    "detect_transcript": "reader",
    "is_reprompt": "rules",
    "is_run_boundary": "transcript",
    "parse_line": "transcript",
    "parse_timestamp": "transcript",
    "rule_phrase": "rules",
    "similar": "rules",
    "similarity": "rules",
    "text_digest": "rules",
    "words": "rules",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_THRESHOLDS",
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
    "Thresholds",
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
