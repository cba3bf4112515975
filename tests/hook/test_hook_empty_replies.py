"""A model that answers every re-prompt with nothing (measured on Claude Code 2.1.250,
2.1.328 and 2.1.332): a reply whose text is empty is written as an assistant line with
empty text, and the Stop input then has no ``last_assistant_message``; a reply without
content is not written at all, and the Stop input hands on the last reply that had text.
Claude Code's own cap aside, nothing ended such a loop: each Stop hook ran while its
reply was not in the file yet, with nothing to count. The hooks run one after another,
each seeing the transcript as Claude Code leaves it for reply N (up to the re-prompt it
answers and that Stop's summary), and the loop ends on the third empty reply."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from loop_killer.hooks.stop_hook import run
from loop_killer.state.session import hooks_judge
from transcripts import SAME, Transcript

from .kit import raw, stop_input

KICKOFF_ANSWER = "Acknowledged; starting on the auth tests."


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}


def _stops(tmp_path: Path, replies: list[str | None], *, shape: str) -> list[dict | None]:
    """Each Stop hook's output for a /goal session whose answers to re-prompts are
    ``replies`` (None: an empty reply, in ``shape``), each hook run with its reply not
    written yet."""
    t = Transcript()
    t.goal()
    t.reply(KICKOFF_ANSWER)
    path = tmp_path / "s.jsonl"
    outputs = []
    last_text = KICKOFF_ANSWER
    for index, reply in enumerate(replies):
        t.reprompt()
        if index == 0 and reply is None:
            if shape == "text":
                t.reply("")
            t.nudge()  # Claude Code asks once more after the first empty reply
        t.write(path)  # the hook for this reply: the reply is not in the file yet
        message = reply if reply is not None else (None if shape == "text" else last_text)
        outputs.append(run(raw(stop_input(path, message=message)), env=_env(tmp_path)))
        if reply is not None:
            t.reply(reply)
            last_text = reply
        elif shape == "text":
            t.reply("")
    return outputs


@pytest.mark.parametrize("shape", ["text", "no-content"])
def test_the_third_empty_reply_ends_the_turn(tmp_path: Path, shape: str) -> None:
    outputs = _stops(tmp_path, [None] * 4, shape=shape)
    assert outputs[:2] == [None, None]
    stopped = outputs[2]
    assert stopped is not None and stopped["continue"] is False
    assert "SAME_REPLY_TURNS" in stopped["stopReason"]


@pytest.mark.parametrize("shape", ["text", "no-content"])
def test_a_reply_with_words_after_empty_ones_is_counted_with_its_words(
    tmp_path: Path, shape: str
) -> None:
    """After two empty replies, a third that says something (not in the file yet) is
    counted as what it says: not similar to the empty ones, so nothing fires there."""
    outputs = _stops(tmp_path, [None, None, SAME, SAME], shape=shape)
    assert outputs == [None, None, None, None]


def test_empty_replies_after_a_judged_one_end_the_turn(tmp_path: Path) -> None:
    """The hook judged the turn's first answer (so the watcher leaves the session to it);
    then three empty replies: the third ends the turn."""
    outputs = _stops(tmp_path, ["Looked at the auth tests; on to the fix.", None, None, None],
                     shape="text")
    assert hooks_judge(str(tmp_path / ".claude" / "loop-killer"), "s",
                       since=time.time() - 60)  # the watcher: out
    assert outputs[3] is not None and outputs[3]["continue"] is False
