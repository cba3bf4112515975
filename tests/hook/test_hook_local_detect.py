"""The hook's own detection on real transcripts, cut where a Stop hook would read them.

For every Stop of a recorded loop, the transcript is cut the ways Claude Code leaves it
when the hook for reply N runs (measured on 2.1.250 and 2.1.328, headless and TUI):
A: reply N not written yet; B: reply N written and the next re-prompt too (another Stop
hook blocked while ours ran), with or without its attachment; C: reply N written, nothing
after it (or only its first line). The hooks run one after the other, each handing its
anchor (the re-prompt its reply answered) to the next, as they do in a session. Whatever
the cut, the rule must fire at exactly the reply that reaches the threshold: not one
earlier, not one later, and reply N is never counted twice. Where the anchor is lost (a
hook killed before it saved anything), the hook may fire late, never early.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from loop_killer.engine.reader import detect_transcript
from loop_killer.hook.reply import (
    Anchor,
    Judgement,
    judge,
    last_goal_status,
    last_prompt_time,
    read_tail,
    tail_from_bytes,
)
from loop_killer.hook.stop_hook import run
from loop_killer.tailing import find_run_start
from transcripts import FIXTURES_328

from .kit import (
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
    renamed,
    stop_input,
    stops,
    with_tool_use_in_first_reply,
    without_summaries,
    write,
)

EXPECTED_CASE = {"A": "A", "B": "B", "B+attachment": "B", "C": "C", "C-partial": "C"}


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
              spawn: float | None = 0.02, fired: tuple[str, ...] = (),
              anchor: Anchor | None = None) -> Judgement:
    """Judge ``cut`` as the hook for ``stop`` does; ``spawn``: the hook's start, in seconds
    after reply N's last line was written (None: unknown)."""
    path = write(tmp_path / name / "s.jsonl", cut)
    return judge(read_tail(str(path), anchor=anchor), session_id="s", message=stop.text,
                 stop_hook_active=stop.reprompted,
                 spawn_time=None if spawn is None else _ts(stop.timestamp) + spawn,
                 already_fired=fired, anchor=anchor)


@dataclass
class Seen:
    stop: Stop
    case: str  # the cut
    judgement: Judgement


def walk(tmp_path: Path, lines: list[bytes], *, lose: frozenset[int] = frozenset(),
         spawn: float | None = 0.02, anchor: Anchor | None = None,
         from_line: int = 0) -> Iterator[Seen]:
    """Every Stop of ``lines`` (from line ``from_line`` on), every cut, in order; each hook
    gets the anchor the previous one saved (none saved by the Stops numbered in ``lose``;
    a normal turn saves nothing). What fired is remembered as the journal does.

    Whichever cut a hook saw, it must hand the same anchor on; after a lost anchor the cuts
    may disagree, and the one of case A (which keeps the lag) is handed on.
    """
    fired: list[str] = []
    for stop in stops(lines):
        if stop.index < from_line:
            continue
        handed: dict[str, Anchor | None] = {}
        fired_now: list[str] = []
        for case, cut in cuts(lines, stop).items():
            judgement = judge_cut(tmp_path, f"{stop.index}-{case}", cut, stop, spawn=spawn,
                                  fired=tuple(fired), anchor=anchor)
            handed[case] = judgement.anchor
            if judgement.detection is not None:
                fired_now = [stop.uuid, judgement.prompt_uuid]
            yield Seen(stop, case, judgement)
        fired += fired_now
        if not stop.reprompted:
            continue
        if not lose:
            assert len(set(handed.values())) == 1, (stop.number, handed)
        if stop.number not in lose:
            anchor = handed["A"]


def firing_numbers(seen: list[Seen]) -> dict[int, set[str]]:
    """Per answer number, the cuts at which it fired."""
    fired: dict[int, set[str]] = {}
    for item in seen:
        if item.judgement.detection is not None:
            fired.setdefault(item.stop.number, set()).add(item.case)
    return fired


@pytest.mark.parametrize("summaries", [True, False], ids=["2.1.328", "no-summaries"])
@pytest.mark.parametrize("scenario, fires_at, rule", [
    ("goal-same", 3, "SAME_REPLY_TURNS"),
    ("command-hook-loop", 3, "SAME_REPLY_TURNS"),
    ("goal-varied", 6, "IDLE_TURNS"),
])
def test_fires_at_exactly_the_threshold_reply_however_the_transcript_lags(
    tmp_path: Path, scenario: str, fires_at: int, rule: str, summaries: bool
) -> None:
    lines = lines_of(fixture_transcript(scenario))
    if not summaries:
        lines = without_summaries(lines)
    for item in walk(tmp_path, lines):
        stop, case, judgement = item.stop, item.case, item.judgement
        if stop.number > fires_at:
            break
        where = f"{scenario}: answer {stop.number}, cut {case}"
        if stop.reprompted:
            assert judgement.case == EXPECTED_CASE[case], where
            # Found from the anchor (the turn's start for the first), never guessed.
            assert judgement.located_by == ("turn" if stop.number == 1 else "anchor"), where
        if stop.number == fires_at:
            assert judgement.detection is not None, where
            assert judgement.detection.rule == rule, where
            assert judgement.detection.count == (3 if rule == "SAME_REPLY_TURNS" else 6)
            assert judgement.reply_in_file == (case != "A"), where
            if case in ("B", "B+attachment", "C"):
                assert judgement.reply_uuid == stop.uuid, where
        else:
            assert judgement.detection is None, where


@pytest.mark.parametrize("spawn", [None, -30.0, 0.001, 0.02, 0.5, 30.0])
def test_with_an_anchor_the_clock_does_not_matter(tmp_path: Path, spawn: float | None) -> None:
    """2.1.250 headless (no summaries): the bug was a hook that judged by the clock and
    fired a reply late on a loaded machine. With the anchor, any start time gives the same."""
    lines = without_summaries(lines_of(fixture_transcript("goal-same")))
    seen = [item for item in walk(tmp_path, lines, spawn=spawn) if item.stop.number <= 6]
    assert firing_numbers(seen) == {3: {"A", "B", "B+attachment", "C"},
                                    6: {"A", "B", "B+attachment", "C"}}
    assert {item.judgement.located_by for item in seen if item.stop.reprompted} == {
        "turn", "anchor"}


def test_the_anchor_names_the_reprompt_each_reply_answered(tmp_path: Path) -> None:
    lines = lines_of(fixture_transcript("goal-varied"))
    reprompts = [entry(line)["uuid"] for line in lines if is_reprompt(line)]
    for item in walk(tmp_path, lines):
        if item.stop.reprompted:
            assert item.judgement.anchor is not None
            assert item.judgement.anchor.base == reprompts[item.stop.number - 1]
            assert item.judgement.anchor.skip == 0
            assert item.judgement.prompt_uuid == reprompts[item.stop.number - 1]
        else:
            assert item.judgement.anchor is None  # a normal turn hands nothing on


@pytest.mark.parametrize("summaries", [True, False], ids=["2.1.328", "no-summaries"])
@pytest.mark.parametrize("scenario, fires_at", [("goal-same", 3), ("goal-varied", 6)])
def test_a_hook_that_saved_no_anchor_makes_the_next_one_late_never_early(
    tmp_path: Path, scenario: str, fires_at: int, summaries: bool
) -> None:
    """The hook for reply N-1 was killed before it saved anything: the hook for reply N
    works from an older anchor (or none), and may count reply N once too few."""
    lines = lines_of(fixture_transcript(scenario))
    if not summaries:
        lines = without_summaries(lines)
    for lost in range(1, fires_at):
        seen = [item for item in walk(tmp_path / f"lost-{lost}", lines,
                                      lose=frozenset({lost}))
                if item.stop.number <= fires_at + 1]
        fired = firing_numbers(seen)
        assert min(fired) >= fires_at, (lost, fired)  # never early
        # Where the file shows the stale anchor up (an answer after "reply N"): exact.
        assert {"B", "C"} <= fired.get(fires_at, set()), (lost, fired)


@pytest.mark.parametrize("scenario, fires_at", [("goal-same", 3), ("goal-varied", 6)])
def test_no_anchor_at_all_is_late_never_early(
    tmp_path: Path, scenario: str, fires_at: int
) -> None:
    lines = without_summaries(lines_of(fixture_transcript(scenario)))
    seen = [item for item in walk(tmp_path, lines, lose=frozenset(range(1, 20)))
            if item.stop.number <= fires_at + 1]
    fired = firing_numbers(seen)
    assert fired and min(fired) >= fires_at, fired


def _two_turns(scenario: str, *, fired_at: int) -> tuple[list[bytes], int]:
    """The scenario's turn, stopped at reply ``fired_at`` (the evaluator's next re-prompt
    already written, as in case B), then the same conversation again after a new prompt."""
    lines = lines_of(fixture_transcript(scenario))
    stop = answer(lines, fired_at)
    first_turn = lines[: stop.index + 2]
    assert is_reprompt(first_turn[-1])
    prompt = next(i for i, line in enumerate(lines)
                  if entry(line).get("type") == "user" and not entry(line).get("isMeta"))
    return [*first_turn, *renamed(lines[prompt:], "-2")], len(first_turn)


@pytest.mark.parametrize("scenario", ["command-hook-loop", "goal-same"])
@pytest.mark.parametrize("form", ["reprompt", "turn-relative", "advanced"])
def test_a_previous_turns_anchor_is_not_used(tmp_path: Path, scenario: str, form: str) -> None:
    lines, second = _two_turns(scenario, fired_at=3)
    first = [item for item in walk(tmp_path / "first", lines[:second])]
    old = next(item.judgement.anchor for item in reversed(first)
               if item.stop.number == 3)
    assert old is not None
    if form == "turn-relative":
        old = Anchor("", 3, turn_before=len(b"".join(lines[:second])))
    elif form == "advanced":
        old = old.advanced()
    seen = list(walk(tmp_path / "second", lines, anchor=old, from_line=second))
    numbered = {}
    for item in seen:
        numbered.setdefault(item.stop.index, []).append(item)
    order = sorted(numbered)
    by_number = {n + 1: numbered[index] for n, index in enumerate(
        i for i in order if numbered[i][0].stop.reprompted)}
    assert all(item.judgement.detection is None for n in (1, 2) for item in by_number[n])
    assert all(item.judgement.detection is not None for item in by_number[3])
    assert all(item.judgement.located_by == "turn" for item in by_number[1])


def test_a_run_that_starts_at_a_tool_call_still_finds_the_turns_start(tmp_path: Path) -> None:
    """The kickoff's answer ran a tool: a tool call is no run boundary (whether it was
    work depends on the results before it), so the backward scan reads back to the turn's
    start; the first hook reads from there, the next ones from their anchor."""
    lines = without_summaries(with_tool_use_in_first_reply(
        lines_of(fixture_transcript("goal-same"))))
    first = answer(lines, 1)
    path = write(tmp_path / "first.jsonl", lines[: first.first])
    with open(path, "rb") as handle:
        run_start = find_run_start(handle)
    kickoff = sum(len(line) for line in lines[: next(
        i for i, line in enumerate(lines) if b"A session-scoped Stop hook" in line)])
    assert run_start <= kickoff  # the turn's start (the kickoff), not the tool call
    assert read_tail(str(path)).start <= kickoff
    seen = [item for item in walk(tmp_path, lines, spawn=30.0) if item.stop.number <= 4]
    assert firing_numbers(seen) == {3: {"A", "B", "B+attachment", "C"}}
    assert [item.judgement.located_by for item in seen if item.stop.number == 1] == [
        "turn"] * 4


def test_a_tail_without_anchor_nor_turn_start_falls_back_to_the_clock(tmp_path: Path) -> None:
    """Last resort (the file's start is out of reach and no anchor): the re-prompt's time
    against the hook's start; unknown start: B, one answer too few rather than twice."""
    lines = without_summaries(lines_of(fixture_transcript("goal-same")))
    third = answer(lines, 3)
    # The tail starts at the first re-prompt: no turn start in it.
    start = max(i for i in range(answer(lines, 1).first) if is_reprompt(lines[i]))
    data = b"".join(lines[start: third.first])  # case A for the 3rd answer
    tail = tail_from_bytes(data)

    def judged(spawn: float | None) -> Judgement:
        return judge(tail, session_id="s", message=third.text, stop_hook_active=True,
                     spawn_time=spawn)

    on_time = judged(_ts(third.timestamp) + 0.02)
    assert (on_time.case, on_time.located_by) == ("A", "clock")
    assert on_time.detection is not None
    unknown = judged(None)
    assert unknown.case == "B" and unknown.detection is None  # late by one, never early
    stalled = judged(_ts(entry(lines[third.first - 1])["timestamp"]) + 0.05)
    assert stalled.case == "B" and stalled.detection is None


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
    # The 4th answer after the 3rd fired (the loop went on anyway): it starts a new run,
    # and the 3rd is not counted again.
    third, fourth = by_number[3], by_number[4]
    fired = judge_cut(tmp_path, "third", lines[: third.first], third)
    assert fired.detection is not None
    later = judge_cut(tmp_path, "fourth", lines[: fourth.first], fourth,
                      fired=(fired.prompt_uuid,), anchor=fired.anchor)
    assert later.detection is None and later.run_length == 1 and later.case == "A"


def test_a_reply_whose_reprompt_is_not_written_yet_is_counted_as_a_new_answer(
    tmp_path: Path
) -> None:
    """Reply N's re-prompt and reply N both lag: the written answer is reply N-1."""
    lines = lines_of(fixture_transcript("goal-varied"))
    fifth, sixth = answer(lines, 5), answer(lines, 6)
    seen = {item.stop.number: item.judgement for item in walk(tmp_path / "w", lines)
            if item.case == "C" and item.stop.number <= 5}
    # Cut right after the 5th answer: its re-prompt (which the 6th answers) is not written.
    for anchor, by in ((seen[5].anchor, "anchor"), (None, "tail")):
        judgement = judge_cut(tmp_path, f"lag-{by}", lines[: fifth.index + 1], sixth,
                              spawn=0.0, anchor=anchor)
        assert (judgement.case, judgement.located_by) == ("lagged", by)
        assert judgement.detection is not None and judgement.detection.rule == "IDLE_TURNS"
        # The next reply answers the re-prompt after the 6th's.
        assert judgement.anchor is not None and judgement.anchor.skip == 1


ALL_SCENARIOS = sorted(
    path.name for path in FIXTURES_328.iterdir() if (path / "transcripts").is_dir()
)


@pytest.mark.parametrize("summaries", [True, False], ids=["2.1.328", "no-summaries"])
@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_every_stop_of_every_recorded_session_agrees_with_the_engine_on_the_whole_file(
    tmp_path: Path, scenario: str, summaries: bool
) -> None:
    """The hooks, seeing a cut tail plus the reply in their input, fire on exactly the
    answers the engine fires on when it reads the finished transcript from the start."""
    source = fixture_transcript(scenario)
    lines = lines_of(source)
    if not summaries:
        lines = without_summaries(lines)
    expected = [d.answer_uuid for d in detect_transcript(b"".join(lines), "s", finish=True)]
    fired: list[str] = []
    for item in walk(tmp_path, lines):
        stop = item.stop
        assert (item.judgement.detection is not None) == (stop.uuid in expected), (
            f"{scenario}: answer {stop.number} at line {stop.index}, cut {item.case}")
        if stop.uuid in expected and stop.uuid not in fired:
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


def test_an_anchor_offset_that_is_not_a_line_start_is_not_trusted(tmp_path: Path) -> None:
    lines = lines_of(fixture_transcript("goal-same"))
    third = answer(lines, 3)
    path = write(tmp_path / "s.jsonl", lines[: third.first])
    size = path.stat().st_size
    plain = read_tail(str(path))
    for offset in (-1, 5, size, size + 100):
        tail = read_tail(str(path), anchor=Anchor("x", 0, offset=offset))
        assert tail.start == plain.start, offset


def test_where_summaries_are_written_case_a_needs_their_agreement(tmp_path: Path) -> None:
    """An anchor one ahead (saved for this very reply by a twin hook the start-time check
    missed) would count reply N twice in case B. Where the version writes summaries, none
    after the last re-prompt says its Stop is still running: the hook takes B, and the
    2nd answer does not fire as a 3rd."""
    lines = lines_of(fixture_transcript("goal-same"))
    second = answer(lines, 2)
    cut = cuts(lines, second)
    ahead = next(item.judgement.anchor for item in walk(tmp_path / "walk", lines)
                 if item.stop.number == 2)  # what the hook for this very Stop saves
    for case in ("B", "B+attachment"):
        judgement = judge_cut(tmp_path, case, cut[case], second, anchor=ahead)
        assert judgement.detection is None, case
        assert (judgement.case, judgement.located_by) == ("B", "summary"), case
    # Where the anchor is right and a summary follows its re-prompt, A stands.
    third = answer(lines, 3)
    right = judge_cut(tmp_path, "third", lines[: third.first], third, anchor=ahead)
    assert (right.case, right.located_by) == ("A", "anchor") and right.detection is not None
