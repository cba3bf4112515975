"""The Stop hook's judgement (pure): the tail plus this reply, judged by the engine's
one judge (``RunDetector``), counting reply N exactly once.

The engine counts every answer before reply N with ``live=False`` (nothing fires on
history) and reply N itself, built from ``last_assistant_message``, live.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ..engine.answers import Answer
from ..engine.reader import LineEvent
from ..engine.rules import DEFAULT_THRESHOLDS, Thresholds
from ..engine.run import Detection, RunDetector
from ..engine.tool_repeat import DEFAULT_IGNORED
from ..engine.transcript import AssistantPart, Event, GoalStatus, ToolCall, ToolResults
from .anchor import Anchor
from .locate import Case, locate_active, locate_turn, reply_text
from .tail import Tail

__all__ = ["Judgement", "judge"]


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the tail plus this reply says."""

    detection: Detection | None
    reply_in_file: bool  # reply N is (at least partly) in the transcript
    reply_end: int | None  # offset just past reply N's last line, when it is in the file
    reply_uuid: str  # "" when reply N is not in the file
    prompt_uuid: str  # the re-prompt reply N answers, when known
    case: Case  # where reply N was found (see ``locate``)
    goal: GoalStatus | None  # the last goal_status in the tail
    run_length: int  # the run after reply N (0 after a firing)
    chain_length: int
    anchor: Anchor | None = None  # what to remember for the next reply (None: nothing sure)
    located_by: str = ""  # "anchor" | "turn" | "summary" | "clock" | "tail"

    @property
    def goal_set(self) -> bool:
        """A goal is set and neither met nor cleared, as far as the tail shows."""
        return self.goal is not None and not self.goal.met


def judge(
    tail: Tail,
    *,
    session_id: str,
    message: str | None,
    stop_hook_active: bool,
    spawn_time: float | None = None,
    already_fired: Collection[str] = (),
    acted_on: Collection[str] | None = None,
    anchor: Anchor | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    repeated: Callable[[ToolCall], bool] | None = None,
    ignored: frozenset[str] = DEFAULT_IGNORED,
) -> Judgement:
    """Whether reply N (``message``) fires, counting it exactly once.

    ``stop_hook_active`` (from the hook input) says reply N answers a re-prompt even when
    the transcript does not show that re-prompt yet. ``anchor`` is what the hook for the
    previous reply saved (see the module docstring); the judgement's own ``anchor`` is what
    to save for the next one. ``spawn_time`` is when this hook's process started (seconds
    since the epoch), used only as the last resort.

    ``already_fired``: the answers recorded as fired (``state.records``); counting
    restarts after each in the history before reply N. ``acted_on``: those a Stop hook
    stopped the turn for, the only ones reply N itself is not fired for again (None: all
    of ``already_fired``). The watcher may have recorded reply N a moment ago, its
    request not written yet: this hook is then the one that stops the turn.

    ``repeated``: whether a call of reply N whose result is not in the file yet (Claude
    Code may write it after this hook starts) is known to have repeated a result already
    seen (the tool-call hooks counted it); None: such a call counts as work.
    """
    events = tail.events
    goal = _last_goal(events)
    if stop_hook_active:
        located = locate_active(events, message=message, spawn_time=spawn_time,
                                 anchor=anchor)
    else:
        located = locate_turn(events)
    detector = RunDetector(session_id, live=False, already_fired=already_fired,
                           thresholds=thresholds, ignored=ignored)
    _feed(detector, (item.event for item in events[: located.feed_until]))
    detector.go_live(already_fired=acted_on)
    reply = events[located.parts_from : located.parts_until]
    parts = [item for item in reply if isinstance(item.event, AssistantPart)]
    used_tool = any(
        isinstance(item.event, ToolResults)
        or (isinstance(item.event, AssistantPart) and item.event.used_tool)
        for item in reply
    )
    # Its calls and results: whether they produced anything new in the turn is the
    # engine's to judge (``engine.work``), as for every other answer.
    detector.feed_work(item.event for item in reply)
    if repeated is not None:
        detector.work.settle(call.tool_use_id for call in _unanswered(reply)
                             if repeated(call))
    last_part = parts[-1].event if parts else None
    if message is None and not parts:
        # Nothing to count: the reply is neither in the input nor in the file.
        return Judgement(None, False, None, "", located.prompt_uuid, located.case, goal,
                         detector.run_length, detector.chain_length, located.anchor,
                         located.by)
    text = reply_text(parts, message)
    answer = Answer(
        prompt=located.prompt_kind,
        prompt_uuid=located.prompt_uuid,
        uuid=last_part.uuid if isinstance(last_part, AssistantPart) else "",
        timestamp=last_part.timestamp if isinstance(last_part, AssistantPart) else "",
        text=text,
        used_tool=used_tool,
    )
    detection = detector.add_answer(answer)
    return Judgement(
        detection=detection,
        reply_in_file=bool(parts),
        reply_end=parts[-1].end if parts else None,
        reply_uuid=answer.uuid,
        prompt_uuid=located.prompt_uuid,
        case=located.case,
        goal=goal,
        run_length=detector.run_length,
        chain_length=detector.chain_length,
        anchor=located.anchor,
        located_by=located.by,
    )


def _last_goal(events: tuple[LineEvent, ...]) -> GoalStatus | None:
    for item in reversed(events):
        if isinstance(item.event, GoalStatus):
            return item.event
    return None


def _feed(detector: RunDetector, events: Iterable[Event]) -> None:
    for event in events:
        detector.feed(event)
    detector.flush()  # everything before reply N is complete


def _unanswered(reply: Iterable[LineEvent]) -> list[ToolCall]:
    """Reply N's calls whose result is not among its lines."""
    answered = {result.tool_use_id for item in reply if isinstance(item.event, ToolResults)
                for result in item.event.results}
    return [call for item in reply if isinstance(item.event, AssistantPart)
            for call in item.event.tool_calls if call.tool_use_id not in answered]
