"""Tool-repeat loops as the watcher sees them in the transcripts, for a session whose
tool-call hooks keep no counts (theirs measure the working tree)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..engine.stand_ins import ToolCounts
from ..engine.tool_repeat import RULE_TOOL_REPEAT, ToolRepeat, repeat_label
from ..engine.transcript import Event, TurnStart
from ..state import journal, records, report
from ..state.config import Settings
from .tracked import Streaks, Tracked

__all__ = ["ToolRepeats", "hooks_keep_counts"]

log = logging.getLogger("loop_killer.watch")

_LABEL = 80
HELD_PER_SESSION = 1 << 20  # bytes of tool outputs kept per session (then masked: same counts)
STREAKS_SHOWN = 3  # calls with a streak kept per session, for ``loop-killer status``


class ToolRepeats:
    """Counts each session's tool results and logs each tool-repeat loop once."""

    def __init__(self, state: Path, *, home: str | None, settings: Settings) -> None:
        self.state = state
        self.home = home
        self.settings = settings

    def counter(self, *, off: bool) -> ToolCounts | None:
        """A counter for a session (None when its project or the rule is off)."""
        settings = self.settings
        if off or not settings.rule_on(RULE_TOOL_REPEAT):
            return None
        return ToolCounts(settings.tool_counter(), max_held=HELD_PER_SESSION)

    def feed(self, tracked: Tracked, event: Event, *, live: bool) -> Streaks:
        """Count the event's results, log a loop they complete (``live``); the streaks."""
        streaks = tracked.tool_streaks
        counter = tracked.tools
        if counter is None:
            return streaks
        if isinstance(event, TurnStart) and event.kind == "prompt":
            streaks = ()  # the person spoke: every count starts afresh
        for repeat in counter.feed(event):
            streaks = _note_streak(streaks, repeat)
            if live and (repeat.shape or repeat.count == self.settings.tool_repeat_warn):
                self._detected(tracked, repeat)
        return streaks

    def _detected(self, tracked: Tracked, repeat: ToolRepeat) -> None:
        def cannot(error: Exception) -> None:
            log.warning("%s: cannot record the tool-repeat detection (%s)",
                        report.session_label(tracked.project, tracked.session_id, self.home), error)

        if hooks_keep_counts(self.state, tracked.session_id):
            return  # the session's hooks judge its calls, with what only they can measure
        rule = repeat.shape or RULE_TOOL_REPEAT
        count = repeat.shape_count if repeat.shape else repeat.count
        if not records.first_to_record(self.state, tracked.session_id,
                                       records.record_key(repeat.tool_use_id),
                                       source="watcher", rule=rule, on_error=cannot):
            return  # the PostToolUse hook logged it (and warned the model)
        label = repeat_label(repeat, _LABEL)
        # (its line is told when the watcher reads the log, in order: ``narrate.tell``)
        journal.append(self.state, journal.ToolRecord(
            rule=rule, session_id=tracked.session_id, tool=repeat.name, call=label, count=count,
            tool_use_id=repeat.tool_use_id, project=tracked.project,
            transcript_path=tracked.path, source="watcher"))


def hooks_keep_counts(state: Path, session_id: str) -> bool:
    """Whether the session's tool-call hooks keep its counts (their state file is there):
    they judge its calls with the tree's fingerprint, which a transcript does not hold."""
    from ..state.session import state_path

    try:
        return os.path.lexists(state_path(state, session_id))
    except ValueError:
        return False


def _note_streak(streaks: Streaks, repeat: ToolRepeat) -> Streaks:
    """The newest few calls whose result came back the same at least twice."""
    kept = [streak for streak in streaks if streak[0] != repeat.call]
    if repeat.count >= 2:
        kept.append((repeat.call, repeat_label(repeat, _LABEL), repeat.count))
    return tuple(kept[-STREAKS_SHOWN:])
