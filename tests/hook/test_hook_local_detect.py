"""The hook's own detection on real transcripts, cut where a Stop hook would read them.

For every Stop of a recorded loop, the transcript is cut the three ways Claude Code leaves
it when the hook for reply N runs (measured on 2.1.250 and 2.1.328, headless and TUI):
A: reply N not written yet; B: reply N written and the next re-prompt too (another Stop
hook blocked while ours ran); C: reply N written, nothing after it. Whatever the cut, the
rule must fire at exactly the reply that reaches the threshold: not one earlier, not one
later, and reply N is never counted twice.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from loop_killer.engine import detect_transcript
from loop_killer.hook.local_detect import judge, last_goal_status, last_prompt_time, read_tail
from loop_killer.hook.stop_hook import run

from .kit import (
    FIXTURES,
    SAME_TEXT,
    Stop,
    answer,
    entry,
    fixture_transcript,
    is_reprompt,
    is_summary,
    journal,
    lines_of,
    raw,
    stop_input,
    stops,
    write,
)


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def cuts(lines: list[bytes], stop: Stop) -> dict[str, list[bytes]]:
    """The transcript as the hook for ``stop`` may find it (A, B, B with its attachment, C)."""
    result = {"A": lines[: stop.first], "C": lines[: stop.index + 1]}
    if stop.index > stop.first:
        result["C-partial"] = lines[: stop.first + 1]  # e.g. the thinking line, not the text
    after = stop.index + 1
    if after < len(lines) and is_reprompt(lines[after]):
        result["B"] = lines[: after + 1]
        if after + 1 < len(lines) and not is_summary(lines[after + 1]):
            result["B+attachment"] = lines[: after + 2]
    return result


def judge_cut(tmp_path: Path, name: str, cut: list[bytes], stop: Stop, *,
              spawn_offset: float = 0.02, fired: tuple[str, ...] = ()):
    path = write(tmp_path / name / "s.jsonl", cut)
    return judge(read_tail(str(path)), session_id="s", message=stop.text,
                 stop_hook_active=stop.reprompted,
                 spawn_time=_ts(stop.timestamp) + spawn_offset, already_fired=fired)


@pytest.mark.parametrize("scenario, fires_at, rule", [
    ("goal-same", 3, "SAME_REPLY_TURNS"),
    ("command-hook-loop", 3, "SAME_REPLY_TURNS"),
    ("goal-varied", 6, "IDLE_TURNS"),
])
def test_fires_at_exactly_the_threshold_reply_however_the_transcript_lags(
    tmp_path: Path, scenario: str, fires_at: int, rule: str
) -> None:
    lines = lines_of(fixture_transcript(scenario))
    all_stops = stops(lines)
    assert [s.number for s in all_stops][: fires_at + 1] == list(range(fires_at + 1))
    for stop in all_stops[: fires_at + 1]:
        for case, cut in cuts(lines, stop).items():
            judgement = judge_cut(tmp_path, f"{stop.number}-{case}", cut, stop)
            where = f"{scenario}: answer {stop.number}, cut {case}"
            if stop.number == fires_at:
                assert judgement.detection is not None, where
                assert judgement.detection.rule == rule, where
                assert judgement.detection.count == (3 if rule == "SAME_REPLY_TURNS" else 6)
                assert judgement.reply_in_file == (case != "A"), where
                if case in ("B", "B+attachment", "C"):
                    assert judgement.reply_uuid == stop.uuid, where
            else:
                assert judgement.detection is None, where


def test_the_lag_case_fires_on_the_third_answer_passed_as_last_assistant_message(
    tmp_path: Path, state: Path
) -> None:
    """goal-same cut just before its 3rd answer to a re-prompt; that answer is only in the
    hook input: the hook stops the turn there, through the real entry point."""
    source = fixture_transcript("goal-same")
    lines = lines_of(source)
    third = answer(lines, 3)
    path = write(tmp_path / "proj" / source.name, lines[: third.first])
    output = run(raw(stop_input(path)), env={"HOME": str(state.parent.parent),
                                             "CLAUDE_CONFIG_DIR": str(state.parent)})
    assert output is not None and output["continue"] is False
    assert output["stopReason"].startswith("loop-killer: SAME_REPLY_TURNS")
    detection = [r for r in journal(state) if r["event"] == "detection"]
    assert len(detection) == 1
    assert detection[0]["source"] == "hook" and detection[0]["reply_in_file"] is False
    assert detection[0]["case"] == "A" and detection[0]["count"] == 3


def test_one_reply_earlier_and_one_later_do_not_fire(tmp_path: Path, state: Path) -> None:
    source = fixture_transcript("goal-same")
    lines = lines_of(source)
    by_number = {s.number: s for s in stops(lines)}
    env = {"HOME": str(state.parent.parent), "CLAUDE_CONFIG_DIR": str(state.parent)}
    second = by_number[2]
    path = write(tmp_path / "early" / source.name, lines[: second.first])
    assert run(raw(stop_input(path)), env=env) is None
    # The 4th answer after the 3rd fired (the loop went on anyway): it starts a new run.
    third, fourth = by_number[3], by_number[4]
    fired = judge_cut(tmp_path, "third", lines[: third.first], third)
    assert fired.detection is not None
    later = judge_cut(tmp_path, "fourth", lines[: fourth.first], fourth,
                      fired=(third.uuid,))
    assert later.detection is None and later.run_length == 1


def test_without_summary_lines_the_hook_start_time_tells_a_from_b(tmp_path: Path) -> None:
    """Headless 2.1.250 writes no stop_hook_summary: a re-prompt written after the hook
    started is this Stop's own (B), an older one is the one reply N answers (A)."""
    lines = [line for line in lines_of(fixture_transcript("goal-same")) if not is_summary(line)]
    all_stops = stops(lines)
    for stop in all_stops[:4]:
        for case, cut in cuts(lines, stop).items():
            judgement = judge_cut(tmp_path, f"{stop.number}-{case}", cut, stop,
                                  spawn_offset=0.01)
            assert (judgement.detection is not None) == (stop.number == 3), (stop.number, case)
            expected = {"A": "A", "B": "B", "B+attachment": "B", "C": "C", "C-partial": "C"}[case]
            if stop.reprompted:
                assert judgement.case == expected, (stop.number, case)


def test_an_unknown_start_time_counts_once_too_few_rather_than_twice(tmp_path: Path) -> None:
    lines = [line for line in lines_of(fixture_transcript("goal-same")) if not is_summary(line)]
    third = answer(lines, 3)
    path = write(tmp_path / "s.jsonl", lines[: third.first])  # case A, no summaries anywhere
    judgement = judge(read_tail(str(path)), session_id="s", message=third.text,
                      stop_hook_active=True, spawn_time=None)
    assert judgement.case == "B" and judgement.detection is None  # late by one, never early


def test_a_reply_that_differs_from_the_written_one_is_counted_as_a_new_answer(
    tmp_path: Path
) -> None:
    """Reply N's re-prompt and reply N both lag: the written answer is reply N-1."""
    lines = lines_of(fixture_transcript("goal-varied"))
    sixth = answer(lines, 6)
    # Cut right after the 5th answer: its re-prompt (which the 6th answers) is not written.
    fifth = answer(lines, 5)
    path = write(tmp_path / "s.jsonl", lines[: fifth.index + 1])
    judgement = judge(read_tail(str(path)), session_id="s", message=sixth.text,
                      stop_hook_active=True, spawn_time=_ts(sixth.timestamp))
    assert judgement.case == "lagged"
    assert judgement.detection is not None and judgement.detection.rule == "IDLE_TURNS"


ALL_SCENARIOS = sorted(
    path.name for path in (FIXTURES).iterdir() if (path / "transcripts").is_dir()
)


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_every_stop_of_every_recorded_session_agrees_with_the_engine_on_the_whole_file(
    tmp_path: Path, scenario: str
) -> None:
    """The hook, seeing a cut tail plus the reply in its input, fires on exactly the answers
    the engine fires on when it reads the finished transcript from the start."""
    source = fixture_transcript(scenario)
    lines = lines_of(source)
    expected = [d.answer_uuid for d in detect_transcript(source.read_bytes(), "s", finish=True)]
    fired: list[str] = []
    for stop in stops(lines):
        for case, cut in cuts(lines, stop).items():
            judgement = judge_cut(tmp_path, f"{stop.index}-{case}", cut, stop,
                                  fired=tuple(fired))
            assert (judgement.detection is not None) == (stop.uuid in expected), (
                f"{scenario}: answer {stop.number} at line {stop.index}, cut {case}")
        if stop.uuid in expected:
            fired.append(stop.uuid)
    assert fired == expected


def test_the_goal_state_comes_from_the_tail(tmp_path: Path) -> None:
    goal_lines = lines_of(fixture_transcript("goal-same"))
    third = answer(goal_lines, 3)
    judgement = judge_cut(tmp_path, "goal", goal_lines[: third.first], third)
    assert judgement.goal_set and judgement.goal.condition == "all tests in test/auth pass"
    hook_lines = lines_of(fixture_transcript("command-hook-loop"))
    third = answer(hook_lines, 3)
    assert not judge_cut(tmp_path, "hook", hook_lines[: third.first], third).goal_set
    cleared = fixture_transcript("tui-goal-clear")
    status = last_goal_status(str(cleared))
    assert status is not None and status.cleared


def test_the_last_prompt_time_is_the_persons_last_prompt(tmp_path: Path) -> None:
    path = fixture_transcript("tui-interrupt")
    prompts = [entry(line) for line in lines_of(path)
               if entry(line).get("type") == "user"
               and entry(line)["message"]["content"] == "OK, just say done."]
    assert last_prompt_time(str(path)) == _ts(prompts[-1]["timestamp"])
    assert last_prompt_time(str(write(tmp_path / "none.jsonl", [b'{"type":"x"}\n']))) is None


def test_a_line_still_being_written_is_left_out(tmp_path: Path) -> None:
    lines = lines_of(fixture_transcript("goal-same"))
    third = answer(lines, 3)
    partial = lines[third.first][:40]  # reply N's line, half written
    path = write(tmp_path / "s.jsonl", [*lines[: third.first], partial])
    judgement = judge(read_tail(str(path)), session_id="s", message=SAME_TEXT,
                      stop_hook_active=True, spawn_time=_ts(third.timestamp))
    assert judgement.detection is not None and not judgement.reply_in_file
