"""A goal re-running one failing command: the Stop hook takes each answer's work from what
the tool-call hooks counted (a result already seen is no work), never from a transcript
that may not hold the result yet (a CI run on the real 2.1.250 once stopped such a goal an
answer late), and fires where the watcher fires."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_killer.engine.reader import detect_transcript
from transcripts import Transcript

from .kit import fired, replay

SAME = "The auth tests still fail the same way; I will run them again."
FAILING = "Exit code 1\nFAIL test/auth/login.test.js"


def _session(answers: int) -> Transcript:
    session = Transcript()
    session.prompt("Make the auth tests pass.")
    session.goal()
    session.run("npm test", FAILING, is_error=True)
    session.reply("The auth tests fail; I am on it.")
    for _ in range(answers):
        session.reprompt()
        session.run("npm test", FAILING, is_error=True)
        session.reply(SAME)
    return session


@pytest.mark.parametrize(("rules_off", "expected"), [("", [3]), ("TOOL_REPEAT", [3])])
def test_the_hook_fires_where_the_watcher_fires(tmp_path: Path, rules_off: str,
                                                expected: list[int]) -> None:
    """With the tool-repeat rule off the tool-call hooks count nothing, but they still note
    which results the turn has seen: the same failing run is no work either way."""
    (detection,) = detect_transcript(_session(3).data())  # the watcher: at the 3rd answer
    assert detection.rule == "SAME_REPLY_TURNS" and detection.run_length == 3
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude"),
           "LOOP_KILLER_RULES_OFF": rules_off}
    session = _session(5)
    outputs = replay(session.lines, tmp_path / "projects" / "s.jsonl", env=env)
    assert fired(session.lines, outputs)[:1] == expected
