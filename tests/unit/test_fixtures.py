"""The engine over every real transcript in ``tests/fixtures/``.

``claude-code-2.1.328/``, ``claude-code-2.1.332/``: recorded from the real Claude Code
(see their READMEs and each scenario's ``meta.json``); a scenario recorded on both
versions must give the same detections, the newer lines 2.1.332 writes changing nothing.
``real-transcripts/``: written by Claude Code 1.0.17 - 2.1.39 on people's machines (see
``SOURCES.md``). The expected detections are written out below and, for the recorded
scenarios, also derived from ``meta.json``; the firing answers are located in the files
independently of the engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.engine.judge import Detection
from loop_killer.engine.reader import TranscriptReader, detect_transcript
from loop_killer.engine.rules import RULE_IDLE, RULE_SAME, similar, text_digest, words
from loop_killer.engine.run import RunDetector
from loop_killer.engine.transcript import Discard, GoalStatus, ParseStats, TurnStart, parse_line
from transcripts import FIXTURES, FIXTURES_328, found

CC = FIXTURES_328
NEWEST = FIXTURES / "claude-code-2.1.332"
RECORDED = sorted(path for path in FIXTURES.glob("claude-code-*") if path.is_dir())
REAL = FIXTURES / "real-transcripts"

TRANSCRIPTS = sorted(
    path for path in FIXTURES.rglob("*.jsonl") if path.name != "hook_inputs.jsonl"
)


def _is_subagent(path: Path) -> bool:
    return "subagents" in path.parts or path.name.startswith("agent-")


MAIN = [path for path in TRANSCRIPTS if not _is_subagent(path)]
SUBAGENTS = [path for path in TRANSCRIPTS if _is_subagent(path)]


def _scenarios(cc: Path) -> list[str]:
    return sorted(path.name for path in cc.iterdir() if (path / "meta.json").is_file())


SCENARIOS = _scenarios(CC)
RECORDED_SCENARIOS = [(cc, scenario) for cc in RECORDED for scenario in _scenarios(cc)]
NEWER_LINES = ("api-request", "api-request-shape", "api-request-blob", "tools-used",
               "cost-state")
"""Line types the 2.1.33x transcripts carry (2.1.328 writes them too, offline)."""


def _recorded_id(case: tuple[Path, str]) -> str:
    return case[0].name.removeprefix("claude-code-") + "/" + case[1]


def _id(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


# What each main transcript must produce: (rule, position of the firing answer among the
# answers to re-prompts in the file, 1-based).
SAME_AT_3_AND_6 = [(RULE_SAME, 3), (RULE_SAME, 6)]
EXPECTED = {
    "goal-same": SAME_AT_3_AND_6,  # 8 identical answers to re-prompts
    "goal-varied": [(RULE_IDLE, 6)],  # 8 different answers
    "goal-with-tools": [],  # repetitive, but every answer runs Bash
    "command-hook-loop": SAME_AT_3_AND_6,  # 7 identical answers, no /goal
    "thinking": SAME_AT_3_AND_6,  # thinking differs, visible text identical
    "thinking-omitted": SAME_AT_3_AND_6,
    "tui-goal-clear": [(RULE_SAME, 3)],  # cleared after 3 answers
    "tui-interrupt": [],
    "api-error": [],
    "subagent": [],
    "two-sessions": SAME_AT_3_AND_6,  # each of the two sessions
}


def _scenario(path: Path) -> str | None:
    rel = path.relative_to(FIXTURES).parts
    return rel[1] if rel[0].startswith("claude-code-") else None


def _version_id(path: Path) -> str:
    """``2.1.332/goal-same/fdfd1411`` for a recorded transcript."""
    rel = path.relative_to(FIXTURES).parts
    return f"{rel[0].removeprefix('claude-code-')}/{rel[1]}/{path.stem[:8]}"


def _meta(scenario: str, cc: Path = CC) -> dict:
    return json.loads((cc / scenario / "meta.json").read_text())


def _detect(path: Path, **kwargs) -> list[Detection]:
    return detect_transcript(path.read_bytes(), path.stem, **kwargs)


def _summary(detections: list[Detection]) -> list[tuple[str, tuple[str, ...]]]:
    return [(d.rule, tuple(a.uuid for a in d.answers)) for d in detections]


# -- an independent reading of the files --------------------------------------------------


def _reprompt_answers(path: Path) -> list[dict]:
    """The answers to Stop-hook re-prompts, found with the json module alone.

    Each: the uuid and timestamp of its last assistant line, its text, whether it used
    a tool. Interrupted and API-error answers are left out.
    """
    turns: list[dict] = []
    for raw in path.read_bytes().splitlines():
        entry = json.loads(raw)
        if entry.get("isSidechain") or entry.get("type") not in ("user", "assistant"):
            continue
        content = entry["message"]["content"]
        if entry["type"] == "user":
            if isinstance(content, list) and any(b["type"] == "tool_result" for b in content):
                continue
            text = content if isinstance(content, str) else content[0].get("text", "")
            if text.startswith("[Request interrupted by user"):
                turns[-1]["void"] = True
                continue
            turns.append({"reprompt": text.startswith("Stop hook feedback:"), "lines": [],
                          "void": False})
        elif entry.get("isApiErrorMessage"):
            turns[-1]["void"] = True
        elif turns:
            turns[-1]["lines"].append(entry)
    answers = []
    for turn in turns:
        if not turn["reprompt"] or turn["void"] or not turn["lines"]:
            continue
        blocks = [b for line in turn["lines"] for b in line["message"]["content"]]
        answers.append({
            "uuid": turn["lines"][-1]["uuid"],
            "timestamp": turn["lines"][-1]["timestamp"],
            "text": "\n".join(b["text"] for b in blocks if b["type"] == "text"),
            "used_tool": any(b["type"] == "tool_use" for b in blocks),
        })
    return answers


def _expected_from_meta(observed: dict) -> list[tuple[str, int]]:
    """Apply the rules to what meta.json says the replies were."""
    answers: list[dict] = []
    for text, trigger in zip(observed["assistant_texts"], observed["assistant_triggers"],
                             strict=True):
        if trigger == "tool_result":  # the model went on after its tool call
            answers[-1]["used_tool"] = True
            continue
        answers.append({"trigger": trigger, "text": text, "used_tool": False})
    api_errors = {message["text"] for message in observed["api_error_messages"]}
    run: list[str] = []
    position = 0
    fired = []
    for answer in answers:
        if answer["text"] in api_errors:
            continue
        if answer["trigger"] != "stop_hook_feedback" or answer["used_tool"]:
            run = []
            continue
        position += 1
        run.append(answer["text"])
        chain = 1
        while chain < len(run) and similar(run[-chain - 1], words(run[-chain - 1]),
                                           run[-chain], words(run[-chain])):
            chain += 1
        if chain >= 3:
            fired.append((RULE_SAME, position))
            run = []
        elif len(run) >= 6:
            fired.append((RULE_IDLE, position))
            run = []
    return fired


def _involved(answers: list[dict], expected: list[tuple[str, int]]) -> list[tuple[str, tuple]]:
    out = []
    for rule, position in expected:
        size = 3 if rule == RULE_SAME else 6
        out.append((rule, tuple(a["uuid"] for a in answers[position - size:position])))
    return out


# -- the 2.1.328 scenarios ----------------------------------------------------------------


def test_every_scenario_has_an_expectation_and_every_file_is_copied():
    assert sorted(EXPECTED) == SCENARIOS
    assert [cc.name for cc in RECORDED] == [CC.name, NEWEST.name]
    for cc, scenario in RECORDED_SCENARIOS:
        assert scenario in EXPECTED, (cc.name, scenario)
        assert _meta(scenario, cc)["claude_code_version"] == cc.name.removeprefix("claude-code-")
        for name in _meta(scenario, cc)["transcript_files"]:
            assert (cc / scenario / name).exists(), name
        assert (cc / "README.md").is_file()
    assert (REAL / "SOURCES.md").is_file()
    assert len(MAIN) == 24 and len(SUBAGENTS) == 4


@pytest.mark.parametrize("case", RECORDED_SCENARIOS, ids=_recorded_id)
def test_expectations_follow_from_meta_json(case):
    cc, scenario = case
    meta = _meta(scenario, cc)
    for name, observed in meta["observed"].items():
        if _is_subagent(cc / scenario / name):
            assert _expected_from_meta(observed) == []
        else:
            assert _expected_from_meta(observed) == EXPECTED[scenario], name


@pytest.mark.parametrize("path", [p for p in MAIN if _scenario(p)], ids=_version_id)
def test_scenario_produces_exactly_the_expected_detections(path):
    scenario = _scenario(path)
    answers = _reprompt_answers(path)
    expected = _involved(answers, EXPECTED[scenario])
    detections = _detect(path)
    assert _summary(detections) == expected
    for detection in detections:
        involved = {a["uuid"]: a for a in answers}
        assert detection.session_id == path.stem
        for answer in detection.answers:
            assert answer.text == involved[answer.uuid]["text"]
            assert answer.timestamp == involved[answer.uuid]["timestamp"]
        assert detection.first_timestamp == involved[detection.answers[0].uuid]["timestamp"]
        assert detection.last_timestamp == involved[detection.answer_uuid]["timestamp"]


@pytest.mark.parametrize(
    "case", [(cc, s) for cc, s in RECORDED_SCENARIOS if s in (
        "goal-same", "goal-varied", "command-hook-loop", "thinking", "thinking-omitted",
        "tui-goal-clear")], ids=_recorded_id)
def test_detection_texts_and_scores_match_meta_json(case):
    cc, scenario = case
    meta = _meta(scenario, cc)
    (name,) = meta["transcript_files"]
    observed = meta["observed"][name]
    detections = _detect(cc / scenario / name)
    assert detections
    texts = observed["assistant_texts"]
    jaccard = observed["consecutive_text_jaccard"]
    # Each reply here is one message, and message 0 answers the kickoff (or the person's
    # prompt): the answer to the p-th re-prompt is message p.
    position = {a["uuid"]: p for p, a in enumerate(_reprompt_answers(cc / scenario / name), 1)}
    for detection in detections:
        positions = [position[a.uuid] for a in detection.answers]
        assert [a.text for a in detection.answers] == [texts[p] for p in positions]
        assert [round(s, 3) for s in detection.similarities] == [
            jaccard[p - 1] for p in positions[1:]]


def test_goal_same_fires_at_the_third_and_sixth_answer_to_a_reprompt_not_the_kickoff():
    path = CC / "goal-same" / _meta("goal-same")["transcript_files"][0]
    first, second = _detect(path)
    answers = _reprompt_answers(path)
    assert len(answers) == _meta("goal-same")["expected_loop_detection"][
        "replies_to_stop_hook_feedback"] == 8
    assert first.answer_uuid == answers[2]["uuid"]
    assert second.answer_uuid == answers[5]["uuid"]
    assert first.run_length == second.run_length == 3


def test_goal_varied_is_an_idle_loop_of_six_different_answers():
    path = CC / "goal-varied" / _meta("goal-varied")["transcript_files"][0]
    (detection,) = _detect(path)
    assert detection.rule == RULE_IDLE and detection.count == 6
    assert len({a.text for a in detection.answers}) == 6
    assert detection.similarities == (0.0,) * 5


def test_tui_goal_clear_fires_once_and_records_the_clear():
    scenario = "tui-goal-clear"
    path = CC / scenario / _meta(scenario)["transcript_files"][0]
    reader = TranscriptReader(detector=RunDetector(path.stem))
    statuses = []
    detections = []
    for raw in path.read_bytes().splitlines():
        event = parse_line(raw, reader.stats)
        if isinstance(event, GoalStatus):
            statuses.append(event)
        if event is not None:
            detections += reader.detector.feed(event)
    assert [d.rule for d in detections] == [RULE_SAME]
    observed = _meta(scenario)["observed"][_meta(scenario)["transcript_files"][0]]
    assert [
        {k: v for k, v in (("met", s.met), ("sentinel", s.sentinel or None),
                           ("condition", s.condition), ("reason", s.reason or None))
         if v is not None}
        for s in statuses
    ] == observed["goal_status"]
    assert [s.cleared for s in statuses] == [False, False, False, False, True]
    assert reader.detector.goal is statuses[-1] and reader.detector.goal.cleared


def test_two_sessions_keep_separate_state_even_when_read_interleaved():
    paths = [CC / "two-sessions" / name for name in _meta("two-sessions")["transcript_files"]]
    alone = {path.stem: _summary(_detect(path)) for path in paths}
    assert all(len(summary) == 2 for summary in alone.values())
    # Read both at once, line by line in timestamp order, one reader per session.
    readers = {path.stem: TranscriptReader(detector=RunDetector(path.stem)) for path in paths}
    lines = []
    for path in paths:
        for index, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
            stamp = orjson.loads(raw).get("timestamp", "")
            lines.append((stamp, path.stem, index, raw))
    together: dict[str, list[Detection]] = {stem: [] for stem in readers}
    for _, stem, _, raw in sorted(lines):
        together[stem] += found(readers[stem].feed(raw))
    assert {stem: _summary(d) for stem, d in together.items()} == alone
    assert {d.session_id for ds in together.values() for d in ds} == set(readers)


def test_api_error_scenario_counts_one_answer_and_ignores_the_error():
    path = CC / "api-error" / _meta("api-error")["transcript_files"][0]
    reader = TranscriptReader(detector=RunDetector(path.stem))
    assert found(reader.feed(path.read_bytes())) == []
    assert reader.detector.run_length == 1  # the error reply neither counted nor reset
    assert reader.detector.answers_seen == 2  # kickoff answer + one real re-prompt answer
    assert reader.detector.last_answer.text == (
        "I am still working on getting the auth tests to pass.")


def test_tui_interrupt_drops_the_interrupted_answer():
    path = CC / "tui-interrupt" / _meta("tui-interrupt")["transcript_files"][0]
    reader = TranscriptReader(detector=RunDetector(path.stem))
    assert found(reader.feed(path.read_bytes())) == []
    assert reader.detector.answers_seen == 1
    assert reader.detector.last_answer.text == "Done."


def test_command_hook_answers_match_the_hooks_last_assistant_message():
    # The Stop hook compares text_digest(last_assistant_message) with the watcher's.
    scenario = CC / "command-hook-loop"
    inputs = [json.loads(raw) for raw in (scenario / "hook_inputs.jsonl").read_text().splitlines()]
    path = scenario / _meta("command-hook-loop")["transcript_files"][0]
    detector = RunDetector(path.stem)
    digests = []
    for raw in path.read_bytes().splitlines():
        event = parse_line(raw)
        if event is not None:
            before = detector.answers_seen
            detector.feed(event)
            if detector.answers_seen > before:
                digests.append(detector.last_answer.digest)
    assert len(digests) == len(inputs) == 8
    assert digests == [text_digest(payload["last_assistant_message"]) for payload in inputs]
    assert {payload["session_id"] for payload in inputs} == {path.stem}


# -- the newest recording: the newer lines change nothing -----------------------------------


def _main_file(cc: Path, scenario: str) -> Path:
    (name,) = [n for n in _meta(scenario, cc)["transcript_files"] if "subagents" not in n]
    return cc / scenario / name


def _lines_by_type(path: Path) -> Counter:
    return Counter(orjson.loads(raw).get("type") for raw in path.read_bytes().splitlines())


def _detail(detections: list[Detection]) -> list[tuple]:
    """A detection without its file's identity: rule, size, texts and scores."""
    return [(d.rule, d.count, d.run_length, tuple(a.text for a in d.answers),
             tuple(round(s, 6) for s in d.similarities)) for d in detections]


def test_the_newest_recording_holds_the_newer_lines():
    # What 2.1.332 writes offline (measured): all five; tools-used only once a tool ran.
    seen = Counter()
    for scenario in _scenarios(NEWEST):
        seen += _lines_by_type(_main_file(NEWEST, scenario))
    assert all(seen[kind] > 0 for kind in NEWER_LINES), seen
    assert _lines_by_type(_main_file(NEWEST, "goal-same"))["tools-used"] == 0
    assert _lines_by_type(_main_file(NEWEST, "goal-with-tools"))["tools-used"] == 1


@pytest.mark.parametrize("scenario", _scenarios(NEWEST))
def test_newer_lines_change_nothing(scenario):
    path = _main_file(NEWEST, scenario)
    detections = _detect(path)
    # The same detections as the scenario recorded on 2.1.328, text for text...
    assert _detail(detections) == _detail(_detect(_main_file(CC, scenario)))
    # ...and as the same file without the newer lines.
    kept = [raw + b"\n" for raw in path.read_bytes().splitlines()
            if orjson.loads(raw).get("type") not in NEWER_LINES]
    assert len(kept) < len(path.read_bytes().splitlines())
    assert _summary(detect_transcript(b"".join(kept), path.stem)) == _summary(detections)


def _scan_json(root: Path) -> dict:
    """``loop-killer scan --json`` over a folder of project folders, as a person runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "loop_killer.cli", "scan", "--json", "--jobs", "1", "--root",
         str(root)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("scenario", _scenarios(NEWEST))
def test_loop_killer_scan_reads_the_newest_recording_as_the_older_one(scenario):
    newest = _scan_json(NEWEST / scenario / "transcripts")
    older = _scan_json(CC / scenario / "transcripts")
    found = [(loop["kind"], loop["rule"], loop["replies"]) for loop in newest["loops"]]
    assert found == [(loop["kind"], loop["rule"], loop["replies"]) for loop in older["loops"]]
    assert found  # every recorded scenario holds a loop of one kind or the other
    path = _main_file(NEWEST, scenario)
    assert newest["scan"]["lines"] == path.read_bytes().count(b"\n")
    assert newest["scan"]["bad_lines"] == 0 and newest["scan"]["skipped"] == {}
    # cost-state: Claude Code's own total for the session is read from its last line.
    (cost,) = [orjson.loads(raw)["totalCostUSD"] for raw in path.read_bytes().splitlines()
               if orjson.loads(raw).get("type") == "cost-state"]
    (session,) = newest["sessions"]
    assert session["claude_code_cost_usd"] == pytest.approx(cost, abs=1e-6)


# -- variants of the recorded files -------------------------------------------------------


def _rewrite(path: Path, *, drop_system: bool) -> bytes:
    """The file with stop_reason null on every line (and, optionally, no system lines)."""
    out = []
    for raw in path.read_bytes().splitlines():
        entry = orjson.loads(raw)
        if drop_system and entry.get("type") == "system":
            continue
        if entry.get("type") == "assistant":
            entry["message"]["stop_reason"] = None
            raw = orjson.dumps(entry)
        out.append(raw + b"\n")
    return b"".join(out)


@pytest.mark.parametrize("path", [p for p in MAIN if _scenario(p)], ids=_version_id)
def test_null_stop_reasons_give_the_same_detections(path):
    expected = _summary(_detect(path))
    data = _rewrite(path, drop_system=False)
    assert _summary(detect_transcript(data, path.stem)) == expected
    # Without system lines either, answers complete only at the next user line (or at
    # the end of the file, with finish=True).
    data = _rewrite(path, drop_system=True)
    assert _summary(detect_transcript(data, path.stem, finish=True)) == expected


def test_a_subagent_stuck_in_the_same_loop_never_fires():
    path = CC / "goal-same" / _meta("goal-same")["transcript_files"][0]
    lines = []
    for raw in path.read_bytes().splitlines():
        entry = orjson.loads(raw)
        if "isSidechain" in entry:
            entry["isSidechain"] = True
        lines.append(orjson.dumps(entry) + b"\n")
    assert _detect(path) != []
    assert detect_transcript(b"".join(lines), path.stem, finish=True) == []


def test_catch_up_over_a_recorded_loop_then_live():
    path = CC / "goal-same" / _meta("goal-same")["transcript_files"][0]
    fired = _detect(path)
    # Start-up catch-up: no checks, the 8-answer run is kept and fires on the next answer.
    reader = TranscriptReader(detector=RunDetector(path.stem, live=False))
    assert found(reader.feed(path.read_bytes())) == []
    assert reader.detector.run_length == 8 and reader.detector.would_fire_with_one_more()
    # With the detection log's uuids, a replay fires nothing again.
    reader = TranscriptReader(detector=RunDetector(
        path.stem, already_fired=[d.answer_uuid for d in fired]))
    assert found(reader.feed(path.read_bytes())) == []
    assert reader.detector.run_length == 2


# -- every file ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=_id)
def test_every_line_is_read_and_none_is_broken(path):
    data = path.read_bytes()
    reader = TranscriptReader(detector=RunDetector(path.stem))
    found(reader.feed(data))
    assert reader.pending_bytes == 0
    assert reader.stats.lines == data.count(b"\n")
    assert reader.stats.broken == 0
    assert reader.stats.events + sum(reader.stats.skipped.values()) == reader.stats.lines


@pytest.mark.parametrize("path", [p for p in MAIN if p.is_relative_to(REAL)], ids=_id)
def test_real_transcripts_never_fire(path):
    assert _detect(path) == []
    assert _detect(path, finish=True) == []


@pytest.mark.parametrize("path", SUBAGENTS, ids=_id)
def test_subagent_files_never_fire_and_yield_no_events(path):
    stats = ParseStats()
    events = [parse_line(raw, stats) for raw in path.read_bytes().splitlines()]
    assert all(event is None for event in events)
    assert stats.skipped["sidechain"] > 0
    assert _detect(path, finish=True) == []


def _event_counts(path: Path) -> tuple[Counter, ParseStats]:
    stats = ParseStats()
    counts: Counter = Counter()
    for raw in path.read_bytes().splitlines():
        event = parse_line(raw, stats)
        if isinstance(event, Discard):
            counts["discard:" + event.reason] += 1
        elif isinstance(event, TurnStart):
            counts["turn:" + event.kind] += 1
    return counts, stats


# What SOURCES.md says each real file shows (INT / INT-T / API / CMP / SC).
REAL_FACTS = {
    "spotter__cc2.1.38__interrupt-tooluse_split-message.jsonl": {"discard:interrupted": 1},
    "spotter__cc2.1.38__queue-op_interrupt_local-command.jsonl": {"discard:interrupted": 2},
    "258c7280-ae70-4798-800f-63464d01a85d.jsonl": {"turn:compact": 1},
    "entire__cc2.1.5__api-error-retries_synthetic-error.jsonl": {"discard:api_error": 1},
    "entire__cc2.1.22__microcompact-boundary.jsonl": {},
    "claude-code-viewer__cc1.0.108__inline-sidechain-task.jsonl": {"sidechain": 22},
    "sniffly__cc1.0.17__summary_interrupt-tooluse.jsonl": {"discard:interrupted": 1},
    "7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl": {"discard:interrupted": 1},
    "happy-cli__cc1.0.51__permission-aborted_interrupt.jsonl": {"discard:interrupted": 1},
}


@pytest.mark.parametrize("name", sorted(REAL_FACTS))
def test_real_transcripts_show_what_sources_md_says(name):
    (path,) = [p for p in MAIN if p.name == name]
    counts, stats = _event_counts(path)
    facts = REAL_FACTS[name]
    for key in ("discard:interrupted", "discard:api_error", "turn:compact"):
        assert counts[key] == facts.get(key, 0), key
    assert stats.skipped["sidechain"] == facts.get("sidechain", 0)


def test_split_reply_over_five_lines_is_one_reply():
    # spotter 2.1.38: msg_01MKH1... over 5 lines (whitespace text, thinking, text, 2 tool_use).
    path = REAL / "spotter__cc2.1.38__interrupt-tooluse_split-message.jsonl"
    parts = [e for raw in path.read_bytes().splitlines()
             if (e := parse_line(raw)) is not None and type(e).__name__ == "AssistantPart"]
    ids = Counter(part.message_id for part in parts)
    assert ids.most_common(1)[0][1] == 5
    split = [p for p in parts if p.message_id == ids.most_common(1)[0][0]]
    assert [p.used_tool for p in split] == [False, False, False, True, True]
    assert all(not p.final for p in split)


# -- property: any chunking of real bytes -------------------------------------------------

_WHOLE = {path: _summary(_detect(path)) for path in TRANSCRIPTS}


@settings(max_examples=60, deadline=None)
@given(
    index=st.integers(0, len(TRANSCRIPTS) - 1),
    cut_points=st.lists(st.integers(0, 2**32), max_size=30),
    small=st.booleans(),
)
def test_real_bytes_give_the_same_detections_however_chunked(index, cut_points, small):
    path = TRANSCRIPTS[index]
    data = path.read_bytes()
    if small:  # cuts close together, inside lines and multi-byte characters
        start = cut_points[0] % len(data) if cut_points else 0
        cuts = sorted({min(len(data), start + p % 64) for p in cut_points})
    else:
        cuts = sorted(p % (len(data) + 1) for p in cut_points)
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert b"".join(chunks) == data
    assert _summary(detect_transcript(chunks, path.stem)) == _WHOLE[path]
