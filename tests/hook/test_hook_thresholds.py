"""Thresholds raised in the settings are the ones the Stop hook fires at (an audit found
the hook read back only 7 re-prompts, the default's reach, so a threshold of 8 or more
never fired; and a similar-replies threshold above the idle one was reported short)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transcripts import Transcript

from .kit import fired, replay

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
    for text in texts:
        transcript.reprompt()
        transcript.reply(text)
    outputs = replay(transcript.lines, transcript.path_in(tmp_path / "projects"), env=env)
    stopped = [(number, str(output["stopReason"])) for number, output in enumerate(outputs, 1)
               if output is not None and output.get("continue") is False]
    return stopped[0] if stopped else (0, "")


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


def test_a_tool_the_person_says_polls_is_work_for_the_reprompt_rules_too(
        tmp_path: Path) -> None:
    """A /goal waiting on CI by polling a tool the person listed as polling by design: the
    tool-repeat rule ignores it, and so does the work rule (an audit found the re-prompt
    rules stopping it at the 3rd answer, in the watcher, the hook and scan alike)."""
    from loop_killer.engine.reader import TranscriptReader

    poll = ("mcp__ci__get_run", {"run": 42})
    texts = ["CI is still running; I will check again."] * 5

    def session() -> Transcript:
        built = Transcript()
        built.prompt("Merge when CI passes.")
        built.goal()
        for text in texts:
            built.reprompt()
            built.reply(None, tools=[poll])
            built.tool_result(built.last_tool_use_id, "status: in_progress")
            built.reply(text)
        return built

    found = [d for step in TranscriptReader().feed(session().data()) for d in step.detections]
    assert [d.rule for d in found] == ["SAME_REPLY_TURNS"]  # not listed: a loop
    listed = frozenset({"mcp__ci__*"})
    reader = TranscriptReader(ignored=listed)
    assert [d for step in reader.feed(session().data()) for d in step.detections] == []
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path),
           "LOOP_KILLER_IGNORE_TOOLS": "default,mcp__ci__*"}
    outputs = replay(session().lines, tmp_path / "projects" / "s.jsonl", env=env)
    assert len(outputs) == len(texts) and fired(session().lines, outputs) == []


PREAMBLE = ("Let me rerun the complete authentication suite with verbose reporting enabled so "
            "we can inspect which assertion breaks.")
CLOSING = "One auth test still fails; I will keep working on it."


def _answers(answers: list[bool]) -> Transcript:
    """Each answer: (with ``True``) the preamble, ``npm test`` with the same result, then
    the closing line, else the closing line alone."""
    session = Transcript()
    session.prompt()
    session.goal()
    session.run("npm test", "3 passed, 1 failed", before="Running tests.")
    session.reply("Started.")
    for worked in answers:
        session.reprompt()
        if worked:
            session.run("npm test", "3 passed, 1 failed", before=PREAMBLE)
        session.reply(CLOSING)
    return session


@pytest.mark.parametrize("answers", [[True] * 3, [False, False, True], [True, False, True],
                                     [False] * 2])
def test_the_hook_compares_an_answer_by_its_last_words_as_the_watcher_does(
        tmp_path: Path, answers: list[bool]) -> None:
    """An answer's words are its last API reply with text (what ``last_assistant_message``
    holds), for the watcher as for the hook: a preamble before a tool call that found
    nothing new does not make an answer differ from the ones before it."""
    from loop_killer.engine.reader import detect_transcript

    session = _answers(answers)
    watcher = [d.run_length for d in detect_transcript(session.data())]
    outputs = replay(session.lines, tmp_path / "projects" / "s.jsonl",
                     env={"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path)})
    assert fired(session.lines, outputs) == watcher == ([3] if len(answers) == 3 else [])


def test_a_result_seen_early_in_the_turn_is_not_new_for_the_hook_either(
        tmp_path: Path) -> None:
    """The turn's first answer read ``config.yml`` and failed; five answers of new work
    later, the model reads it again and again, saying the same. An audit found the hook
    taking the first repeat for new work and firing an answer later than the watcher: the
    turn's results are the tool-call hooks', from the turn's start."""
    from loop_killer.engine.reader import detect_transcript

    session = Transcript()
    session.prompt()
    session.goal()
    session.run("cat config.yml", "Error: config.yml: No such file", is_error=True)
    session.reply("Started.")
    plan = [(f"ls dir{i}", f"file{i}", f"Looked at directory {i}; on to the next one.")
            for i in range(5)]
    plan += [("cat config.yml", "Error: config.yml: No such file", SAME)] * 4
    for command, output, text in plan:
        session.reprompt()
        session.run(command, output, is_error=output.startswith("Error"))
        session.reply(text)
    outputs = replay(session.lines, tmp_path / "projects" / "s.jsonl",
                     env={"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path)})
    (detection,) = detect_transcript(session.data())
    assert detection.rule == "SAME_REPLY_TURNS"
    assert fired(session.lines, outputs) == [8]  # the watcher's: the 3rd repeat
