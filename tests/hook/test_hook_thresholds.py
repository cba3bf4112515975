"""Thresholds raised in the settings are the ones the Stop hook fires at (an audit found
the hook read back only 7 re-prompts, the default's reach, so a threshold of 8 or more
never fired; and a similar-replies threshold above the idle one was reported short)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_killer.hook.stop_hook import run
from transcripts import Transcript

from .kit import raw, stop_input

DIFFERENT = ["alpha beta gamma", "delta epsilon zeta", "theta iota kappa",
             "lambda omicron sigma", "upsilon omega rho", "tango foxtrot hotel",
             "golf india juliet", "kilo lima mike", "november oscar papa",
             "quebec romeo sierra", "uniform victor whiskey", "xray yankee zulu"]
SAME = "I am still working on getting the auth tests to pass."


def _fired_at(tmp_path: Path, texts: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Reply by reply, as the Stop hook sees them: (the reply that stopped the turn, what
    the person was told); (0, "") when none did."""
    transcript = Transcript()
    transcript.prompt()
    transcript.goal()
    path = transcript.path_in(tmp_path / "projects")
    for number, text in enumerate(texts, 1):
        transcript.reprompt()
        transcript.reply(text)
        transcript.write(path)
        output = run(raw(stop_input(path, message=text)), env=env)
        if output is not None and output.get("continue") is False:
            return number, str(output["stopReason"])
    return 0, ""


@pytest.mark.parametrize("idle", [6, 8, 11])
def test_replies_without_work_fire_at_the_configured_count(tmp_path: Path, idle: int) -> None:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path),
           "LOOP_KILLER_IDLE_TURNS": str(idle)}
    number, said = _fired_at(tmp_path, DIFFERENT, env)
    assert number == idle
    assert f"IDLE_TURNS: {idle} replies" in said


@pytest.mark.parametrize("same", [3, 7, 9])
def test_similar_replies_fire_and_are_counted_at_the_configured_count(tmp_path: Path,
                                                                       same: int) -> None:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path),
           "LOOP_KILLER_SAME_REPLY_TURNS": str(same), "LOOP_KILLER_RULES_OFF": "IDLE_TURNS"}
    number, said = _fired_at(tmp_path, [SAME] * 12, env)
    assert number == same
    assert f"SAME_REPLY_TURNS: {same} similar replies" in said
