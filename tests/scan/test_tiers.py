"""The two-tier scan says exactly what the engine alone says.

``read_transcript`` reads a file first with ``LeanScan`` (the cost report alone) and with
the engine only when ``LoopHints`` says a loop could be there. Proved here three ways:
the scan's whole ``--json`` over every fixture history, both ways; the same over planted
histories of every loop shape; and, file by file over many random sessions, that the
first pass never lets a loop through (it gives up on every file where the engine finds
one) and, where it does not give up, gives the engine's very result.
"""

from __future__ import annotations

import os
import pickle
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loop_killer.scan import files, transcript
from loop_killer.scan.files import Transcript as Listed
from loop_killer.scan.files import find_transcripts, read_transcript
from loop_killer.scan.lean import LeanScan, Segment
from loop_killer.scan.pool import scan_transcripts
from loop_killer.scan.prices import PriceTable
from loop_killer.scan.records import FileResult
from loop_killer.scan.report import json_bytes
from loop_killer.scan.summary import Collector
from loop_killer.state.config import Settings
from transcripts import Transcript, Use, scan_bytes

REPO = Path(__file__).resolve().parents[2]
FIXTURES = [REPO / "tests" / "fixtures", REPO.parent / "shared" / "fixtures"]


def fixture_roots() -> list[Path]:
    """Every fixture history: a folder of project folders of transcripts."""
    roots = {path for fixtures in FIXTURES if fixtures.is_dir()
             for path in fixtures.rglob("*") if path.is_dir()
             and path.name in ("transcripts", "real-transcripts")}
    return sorted(roots)


def report(root: Path, *, two_tier: bool, settings: Settings | None = None) -> bytes:
    """The scan's ``--json`` of the history under ``root``."""
    listing = find_transcripts(root)
    collector = Collector(PriceTable())
    for result in scan_transcripts(listing.transcripts, jobs=1, two_tier=two_tier,
                                   settings=settings):
        collector.add(result)
    return json_bytes(collector.summary(listing), root=str(root))


def lean(listed: Listed, settings: Settings | None = None
         ) -> tuple[FileResult | None, list[Segment]]:
    """The first pass alone over one file: its result (None: the engine must read it
    whole) and the parts of it the engine must read for loops."""
    scan = LeanScan(path=listed.path, project=listed.project, session_id=listed.session_id,
                    subagent=listed.subagent, settings=settings)
    scan.feed(Path(listed.path).read_bytes())
    result = scan.finish()
    return result, scan.segments() if result is not None else [(0, None)]


def engine_reads(listed: Listed, segments: list[Segment]) -> int:
    """Bytes of the file that the engine reads."""
    return sum((listed.size if end is None else end) - start for start, end in segments)


def both_ways(listed: Listed, counts: Counter[str],
              settings: Settings | None = None) -> FileResult:
    """The file's result both ways, which must be equal; counts which tier read what."""
    full = read_transcript(listed, two_tier=False, settings=settings)
    assert read_transcript(listed, settings=settings) == full, listed.path
    first, segments = lean(listed, settings)
    if full.loops:
        assert segments, listed.path  # (never a loop outside what the engine reads)
    counts["lean alone" if not segments else "whole file" if first is None
           else "part" if engine_reads(listed, segments) < listed.size else "all turns"] += 1
    return full


def test_every_fixture_history_gives_the_same_json_both_ways() -> None:
    roots = fixture_roots()
    assert len(roots) >= 10
    loops = 0
    for root in roots:
        engine_only = report(root, two_tier=False)
        assert report(root, two_tier=True) == engine_only, root
        loops += engine_only.count(b'"rule"')
    assert loops > 10  # (the fixtures hold loops: the engine's tier is exercised)


def test_every_fixture_file_gives_the_same_result_both_ways() -> None:
    counts: Counter[str] = Counter()
    for root in fixture_roots():
        for listed in find_transcripts(root).transcripts:
            both_ways(listed, counts)
    # (tests/fixtures alone: 8 files read by the first pass alone, 13 by the engine;
    # ../shared/fixtures, beside a developer's checkout but not a clean clone's, adds more)
    assert counts["lean alone"] >= 5 and counts["all turns"] + counts["part"] >= 10, counts


# -- planted histories -------------------------------------------------------------------

SAME = "I am still working on the auth tests; the condition is not met yet, continuing."
TEXTS = [SAME, SAME + " again", "Done.", "Let me look at the failing test first.",
         "All green now.", "Stop hook feedback: quoted, not a re-prompt", ""]
COMMANDS = ["npm test", "npm  test", "git status", "ls -la", "pytest -q"]
OUTPUTS = ["FAIL test/auth.test.js\n  1 failing", "ok", "2 passed in 0.31s", "ok"]
FILES = ["/src/a.py", "/src/b.py"]


def _use(rng: random.Random) -> Use:
    return Use(rng.randrange(1, 50), rng.randrange(1, 900), rng.randrange(10**5),
               rng.randrange(3000))


def _bash(session: Transcript, rng: random.Random) -> None:
    tool_input: dict[str, Any] = {"command": rng.choice(COMMANDS)}
    if rng.random() < 0.5:
        tool_input["description"] = rng.choice(["run", "check"])
    # (sometimes a final stop_reason on every line of the reply, as 2.1.x writes it: the
    # reply is then complete where the reader catches up, at a chunk's end maybe)
    text, tools = rng.choice([None, "Running it."]), [("Bash", tool_input)]
    if rng.random() < 0.3:
        session.reply(text, _use(rng), tools=tools, stop_reason="end_turn")
    else:
        session.reply(text, _use(rng), tools=tools)
    if rng.random() < 0.85:
        session.tool_result(session.last_tool_use_id, rng.choice(OUTPUTS),
                            is_error=rng.random() < 0.3)
    else:  # its result comes later, after a prompt maybe, or never
        _UNANSWERED.setdefault(id(session), []).append(session.last_tool_use_id)


_UNANSWERED: dict[int, list[str]] = {}


def _late_result(session: Transcript, rng: random.Random) -> None:
    waiting = _UNANSWERED.get(id(session))
    if waiting:
        session.tool_result(waiting.pop(rng.randrange(len(waiting))), OUTPUTS[0])


def _replay(session: Transcript, rng: random.Random) -> None:
    """A line of an earlier reply written again (a resumed or replayed reply)."""
    replies = [line for line in session.lines[-12:] if b'"type":"assistant"' in line]
    if replies:
        session.raw(rng.choice(replies))


def _edit(session: Transcript, rng: random.Random) -> None:
    old, new = rng.sample(["alpha", "beta", "gamma"], 2)
    name = rng.choice(["Edit", "Write", "MultiEdit"])
    edit: dict[str, Any] = {"file_path": rng.choice(FILES)}
    if name == "Edit":
        edit.update(old_string=old, new_string=new)
    elif name == "Write":
        edit["content"] = old
    else:
        edit["edits"] = [{"old_string": old, "new_string": new}]
    session.reply(None, _use(rng), tools=[(name, edit)])
    session.tool_result(session.last_tool_use_id, "ok")


def _poll(session: Transcript, rng: random.Random) -> None:
    session.reply(None, _use(rng), tools=[("TaskOutput", {"task_id": "t1"})])
    session.tool_result(session.last_tool_use_id, "running")


_ACTIONS: list[Callable[[Transcript, random.Random], object]] = [
    lambda session, rng: session.prompt(rng.choice(["Fix it.", "/goal tests pass", "go"])),
    lambda session, rng: session.goal(),
    lambda session, rng: session.reprompt(condition=rng.choice([None, "all tests pass"]),
                                          blocks=rng.random() < 0.3),
    lambda session, rng: session.reply(rng.choice(TEXTS), _use(rng),
                                       thinking=rng.choice([None, "hmm"]),
                                       growing=rng.random() < 0.2),
    _bash, _bash, _edit, _poll, _late_result, _late_result, _replay,
    lambda session, rng: session.interrupt(for_tool_use=rng.random() < 0.5),
    lambda session, rng: session.compact(),
    lambda session, rng: session.noise(rng.randrange(10, 3000)),
    lambda session, rng: session.cost_state(round(rng.uniform(0, 5), 4)),
    lambda session, rng: session.api_error(flagged=rng.random() < 0.5),
]
_MAIN_ONLY = 3  # (goal and re-prompts: a subagent has none)


def _step(session: Transcript, rng: random.Random, sidechain: bool) -> None:
    """One random thing a session does (a re-prompt twice as likely)."""
    action = rng.randrange(len(_ACTIONS) + 1)
    action = 2 if action == len(_ACTIONS) else action
    if sidechain and 0 < action < _MAIN_ONLY:
        action = 3
    _ACTIONS[action](session, rng)


def _near_loop(session: Transcript, rng: random.Random, sidechain: bool) -> None:
    """A stretch that is, or just falls short of, a loop of some shape."""
    shape = rng.randrange(4 if not sidechain else 2, 6)
    times = rng.randrange(2, 8)
    if shape == 4:  # re-prompts answered alike (or with the same tool work)
        session.reply("On it.")
        for _ in range(times):
            session.reprompt()
            if rng.random() < 0.3:
                session.run("npm test", rng.choice(OUTPUTS[:2]))
            session.reply(rng.choice(TEXTS[:3]))
            if rng.random() < 0.1:
                _step(session, rng, sidechain)
    elif shape == 5:  # one call giving the same result
        command = rng.choice(COMMANDS[:2])
        for _ in range(times):
            session.run(command, rng.choice(OUTPUTS[:2]) if rng.random() < 0.3 else "ok",
                        before=rng.choice([None, "Again."]))
            if rng.random() < 0.2:
                _step(session, rng, sidechain)
    else:  # a file edited back and forth
        path = rng.choice(FILES)
        for index in range(times):
            old, new = ("alpha", "beta") if index % 2 == 0 else ("beta", "alpha")
            session.reply(None, tools=[("Edit", {"file_path": path, "old_string": old,
                                                 "new_string": new})])
            session.tool_result(session.last_tool_use_id, "ok", is_error=rng.random() < 0.1)


def _story(session: Transcript, rng: random.Random, sidechain: bool, steps: int) -> None:
    for _ in range(steps):
        if rng.random() < 0.05:
            _near_loop(session, rng, sidechain)
        else:
            _step(session, rng, sidechain)


def planted_history(root: Path, seed: int, sessions: int = 120) -> None:
    """Random sessions (and subagents' files), with every loop shape among them."""
    rng = random.Random(seed)
    for number in range(sessions):
        session_id = f"{seed:04x}{number:04x}-1111-4222-8333-{number:012x}"
        cwd = rng.choice(["/home/dev/app", "/home/dev/lib"])
        session = Transcript(session_id, cwd=cwd)
        _story(session, rng, False, rng.randrange(5, 60))
        if rng.random() < 0.3:
            agent = Transcript(session_id, cwd=cwd, sidechain=True,
                               uuid_prefix=f"{number:08x}")
            agent.prompt("Investigate.")
            _story(agent, rng, True, rng.randrange(3, 30))
            # Claude Code 1.0.x: agent-*.jsonl beside the session, or its lines inline
            layout = rng.choice(["subagents", "subagents", "flat", "inline"])
            if layout == "inline":
                session = _interleaved(session, agent, rng)
            else:
                agent.write(root / session.project / f"agent-{number:06x}.jsonl"
                            if layout == "flat" else root / session.project / session_id /
                            "subagents" / f"agent-a{number:06x}.jsonl")
        session.write(session.path_in(root))


def _interleaved(session: Transcript, agent: Transcript, rng: random.Random) -> Transcript:
    """``session`` with ``agent``'s lines among its own, each in its own order."""
    mine, theirs = session.data().splitlines(), agent.data().splitlines()
    both = Transcript(session.session_id, cwd=session.cwd)
    while mine or theirs:
        take = mine if mine and (not theirs or rng.random() < 0.6) else theirs
        both.raw(take.pop(0))
    return both


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_planted_histories_give_the_same_json_both_ways(tmp_path: Path, seed: int) -> None:
    planted_history(tmp_path, seed)
    engine_only = report(tmp_path, two_tier=False)
    assert engine_only.count(b'"rule"') > 5
    assert report(tmp_path, two_tier=True) == engine_only


def test_other_thresholds_give_the_same_json_both_ways(tmp_path: Path) -> None:
    planted_history(tmp_path, 4)
    settings = Settings(tool_repeat_warn=2, edit_oscillation_warn=1)
    assert report(tmp_path, two_tier=True, settings=settings) == report(
        tmp_path, two_tier=False, settings=settings)


@pytest.mark.parametrize("seed", range(5, 12))
def test_each_file_gives_the_same_result_both_ways(tmp_path: Path, seed: int) -> None:
    planted_history(tmp_path, seed)
    counts: Counter[str] = Counter()
    for listed in find_transcripts(tmp_path).transcripts:
        both_ways(listed, counts)
    # (every tier exercised: the engine on some turns only, too)
    assert counts["lean alone"] and counts["part"] and counts["whole file"], counts


def test_a_quiet_session_is_read_once(tmp_path: Path) -> None:
    session = Transcript()
    session.prompt()
    for command in COMMANDS[2:]:
        session.run(command, "ok")
    session.noise()
    session.reply("Done.", Use(3, 4, 5, 6))
    session.cost_state(0.5)
    session.write(session.path_in(tmp_path))
    (listed,) = find_transcripts(tmp_path).transcripts
    first, segments = lean(listed)
    whole = read_transcript(listed, two_tier=False)
    assert whole.cwd == session.cwd and first == whole  # (the first pass finds the cwd too)
    assert not segments
    assert first.cost_state == 0.5 and len(first.replies) == 4


def test_the_engine_reads_the_turn_with_three_re_prompts(tmp_path: Path) -> None:
    session = Transcript()
    session.prompt()
    session.run("ls", "a b")
    session.goal()
    session.reply("On it.")
    for number in range(2):
        session.reprompt()
        session.reply("Working on it.", tools=[("Bash", {"command": f"ls {number}"})])
    path = session.write(session.path_in(tmp_path))
    (listed,) = find_transcripts(tmp_path).transcripts
    assert lean(listed)[1] == []  # two: no rule can fire
    session.reprompt()
    goal_turn = path.read_bytes().index(b"<command-name>/goal")
    session.reply("Still working on it.")
    session.prompt("Thanks.")
    end = len(session.data()) - len(session.lines[-1]) - 1
    session.reply("You are welcome.")
    session.write(path)
    (listed,) = find_transcripts(tmp_path).transcripts
    (segment,) = lean(listed)[1]
    assert segment == (path.read_bytes().rindex(b"\n", 0, goal_turn) + 1, end)


def test_results_travel_from_the_workers_unchanged(tmp_path: Path) -> None:
    planted_history(tmp_path, 13, sessions=30)
    results = [read_transcript(listed) for listed in find_transcripts(tmp_path).transcripts]
    assert any(result.loops for result in results)
    assert pickle.loads(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)) == results


def test_a_reply_written_again_after_a_prompt_is_judged_as_in_the_whole_file(
        tmp_path: Path) -> None:
    # The engine drops a line of the reply it completed last (Claude Code may write one
    # again); an engine started at the prompt would not know that reply, and would count
    # the line as an answer: a turn holding one is never started at.
    session = Transcript()
    session.goal()
    session.reply(SAME)
    replayed = session.lines[-1]
    path = session.write(session.path_in(tmp_path))
    turn = len(session.data())
    session.prompt("/goal all tests pass")
    session.reprompt()
    session.raw(replayed)
    for _ in range(2):
        session.reprompt()
        session.reply(SAME)
    session.write(path)
    (listed,) = find_transcripts(tmp_path).transcripts
    assert read_transcript(listed, two_tier=False).loops == ()
    assert scan_bytes(path.read_bytes()[turn:], session_id=listed.session_id).loops
    assert lean(listed)[1] == [(0, None)]
    assert read_transcript(listed).loops == ()


def test_a_result_after_a_prompt_is_counted_as_in_the_whole_file(tmp_path: Path) -> None:
    # A call's result written after the next prompt counts in the new turn: an engine
    # started at that prompt would not know the call.
    session = Transcript()
    session.prompt()
    session.reply("Running the tests.", tools=[("Bash", {"command": "npm test"})])
    call = session.last_tool_use_id
    path = session.write(session.path_in(tmp_path))
    turn = len(session.data())
    session.prompt("Go on.")
    session.tool_result(call, OUTPUTS[0])
    for _ in range(2):
        session.run("npm test", OUTPUTS[0])
    session.write(path)
    (listed,) = find_transcripts(tmp_path).transcripts
    (loop,) = read_transcript(listed, two_tier=False).loops
    assert loop.replies == 3
    assert not scan_bytes(path.read_bytes()[turn:], session_id=listed.session_id).loops
    assert lean(listed)[1] == [(0, None)]
    assert read_transcript(listed) == read_transcript(listed, two_tier=False)


def test_many_calls_without_results_make_the_engine_read_from_the_top(
        tmp_path: Path) -> None:
    # The pairing forgets the oldest of too many unpaired calls: where it may have, no
    # prompt is started at.
    session = Transcript()
    session.prompt()
    for number in range(600):
        session.reply(None, tools=[("Bash", {"command": f"sleep {number}"})])
    session.prompt("Go on.")
    for _ in range(3):
        session.run("npm test", OUTPUTS[0])
    session.write(session.path_in(tmp_path))
    (listed,) = find_transcripts(tmp_path).transcripts
    assert lean(listed)[1] == [(0, None)]
    assert read_transcript(listed) == read_transcript(listed, two_tier=False)


def test_the_report_is_the_same_whatever_order_the_workers_finish_in(
        tmp_path: Path) -> None:
    planted_history(tmp_path, 14, sessions=60)
    listing = find_transcripts(tmp_path)
    results = [read_transcript(listed) for listed in listing.transcripts]
    documents = set()
    for seed in range(4):
        random.Random(seed).shuffle(results)
        collector = Collector(PriceTable())
        for result in results:
            collector.add(result)
        documents.add(json_bytes(collector.summary(listing), root=str(tmp_path)))
    assert len(documents) == 1


@pytest.mark.parametrize("chunk_bytes", [4096, 65536])
def test_files_read_in_many_chunks_give_the_same_result_both_ways(
        tmp_path: Path, chunk_bytes: int) -> None:
    # (the engine, reading a part, must meet the chunks' ends where a reading from the
    # top meets them: a reply marked final is complete there)
    planted_history(tmp_path, 15, sessions=60)
    looping = 0
    for listed in find_transcripts(tmp_path).transcripts:
        full = read_transcript(listed, two_tier=False, chunk_bytes=chunk_bytes)
        assert read_transcript(listed, chunk_bytes=chunk_bytes) == full, listed.path
        looping += bool(full.loops)
    assert looping


def test_the_engine_reads_a_part_in_the_chunks_of_a_reading_from_the_top(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[tuple[int, int]] = []

    class Recorder:
        def __init__(self, *, offset: int = 0, **_: Any) -> None:
            self.at = offset

        def feed(self, chunk: bytes) -> None:
            fed.append((self.at, len(chunk)))
            self.at += len(chunk)

        def finish(self) -> FileResult:
            return FileResult(path="", project="", session_id="")

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * 1000)
    listed = Listed(str(path), "p", "s", False, 1000, 0.0)
    monkeypatch.setattr(transcript, "TranscriptScan", Recorder)
    fd = os.open(path, os.O_RDONLY)
    try:
        files._engine(fd, listed, None, 100, 250, 730)
        assert fed == [(250, 50), *((start, 100) for start in range(300, 700, 100)), (700, 30)]
        fed.clear()
        files._engine(fd, listed, None, 300)
        assert fed == [(0, 300), (300, 300), (600, 300), (900, 100)]
        fed.clear()
        monkeypatch.setattr(files, "ENGINE_CHUNK_BYTES", 400)  # (at most: its buffers)
        files._engine(fd, listed, None, 1 << 20)
        assert fed == [(0, 400), (400, 400), (800, 200)]
    finally:
        os.close(fd)
