"""A review of ``scan.tail``: kept states that decode into the tail's types but could never
have been kept (turns out of range, a line start before the file, a tool input that is not
JSON, a negative or endless cost) make the file be read whole with one log line, never skip
it or change its result; and a line nested too deep for the first pass is read as the engine
reads it."""

from __future__ import annotations

import dataclasses
import logging
import math
import pickle
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest
from loop_killer.scan import cache, pool, tail
from loop_killer.scan.cache import TAILS_FILE
from loop_killer.scan.files import FileResult, find_transcripts, read_transcript
from loop_killer.state.files import projects_dir, state_dir
from transcripts import Transcript, Use

from scan.test_tail import _scan
from scan.test_tiers import planted_history

_HINTS, _WAITING, _EARLY, _UNKEYED, _STARTS, _FLAGGED, _CROSSINGS = 1, 0, 1, 5, 6, 7, 9


def _main_hints(state: list[Any]) -> list[Any]:
    hints: list[Any] = state[7][_HINTS]  # (_Tail.main, _ScopeState.hints: arrays)
    return hints


def _starts_and_flagged(starts: list[int], flagged: list[int]) -> Callable[[list[Any]], None]:
    def change(state: list[Any]) -> None:
        _main_hints(state)[_STARTS], _main_hints(state)[_FLAGGED] = starts, flagged
    return change


def _set_hint(index: int, value: object) -> Callable[[list[Any]], None]:
    return lambda state: _main_hints(state).__setitem__(index, value)


def _set(index: int, value: object) -> Callable[[list[Any]], None]:
    return lambda state: state.__setitem__(index, value)


IMPOSSIBLE = {
    "a flagged turn past the last": _starts_and_flagged([0], [7]),
    "no turn at all": _starts_and_flagged([], [0]),
    "a turn starting before the file": _starts_and_flagged([0, -50], [1]),
    "a crossing from a negative turn": _set_hint(_CROSSINGS, [[-3, 0]]),
    "a call waiting in a negative turn": _set_hint(_WAITING, {"t": [-2, "Bash", b"{}"]}),
    "a result early in a negative turn": _set_hint(_EARLY, {"t": -2}),
    "tool inputs that are not JSON": _set_hint(_UNKEYED, [["Bash", [b"{", b"{"]]]),
    "a cost that is not a number": _set(3, math.nan),
    "a negative cost": _set(3, -1.0),
    "an endless cost": _set(3, math.inf),  # (a transcript's JSON has none: "$inf by Claude")
}


def _grown(root: Path) -> tuple[bytes, FileResult, Any]:
    """A tail kept in the middle of a tool-repeat loop, and the grown file's whole reading."""
    session = Transcript(cwd="/home/dev/app")
    session.prompt()
    for _ in range(3):
        session.run("ls", "same", Use(10, 20))
    path = session.write(session.path_in(root))
    (listed,) = find_transcripts(root).transcripts
    kept = read_transcript(listed, tail=b"").tail
    for _ in range(3):
        session.run("ls", "same", Use(10, 20))
    session.prompt("Next.")
    session.run("pwd", "/home/dev/app", Use(1, 1))
    path.write_bytes(session.data())
    (listed,) = find_transcripts(root).transcripts
    return kept, read_transcript(listed), listed


@pytest.mark.parametrize("impossible", list(IMPOSSIBLE))
def test_a_tail_no_scan_keeps_is_logged_and_its_file_read_whole(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, impossible: str) -> None:
    kept, whole, listed = _grown(tmp_path)
    assert kept and whole.loops
    state = msgspec.msgpack.decode(kept)
    IMPOSSIBLE[impossible](state)
    with caplog.at_level(logging.DEBUG):
        result = read_transcript(listed, tail=msgspec.msgpack.encode(state))
    assert dataclasses.replace(result, tail=b"") == whole
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and "read whole" in said[0], said


def test_a_line_nested_too_deep_for_the_first_pass_is_read_as_the_engine_reads_it(
        tmp_path: Path) -> None:
    session = Transcript(cwd="/home/dev/app")
    session.prompt()
    session.run("ls", "a b", Use(10, 20))
    deep = b'{"a":' * 3000 + b"1" + b"}" * 3000
    session.raw(b'{"type":"assistant","message":{"id":"m","model":"claude-opus-4-6","content":'
                b'[{"type":"tool_use","id":"t","name":"Bash","input":' + deep + b"}]}}")
    session.reply("Done.", Use(3, 4))
    session.write(session.path_in(tmp_path))
    (listed,) = find_transcripts(tmp_path).transcripts
    whole = read_transcript(listed, two_tier=False)
    # (broken for orjson >= 3.9, whose depth limit it passes; read by orjson 3.8)
    assert not whole.skipped and whole.broken in (0, 1) and len(whole.replies) == 2
    assert read_transcript(listed) == whole


def test_a_task_handed_to_a_worker_carries_its_own_files_tails_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Each task carried every file's: 32 tails of a large session's ~0.5 MB, pickled for
    each task, where a grown file's reading is a few KB.)"""
    planted_history(tmp_path, 51, sessions=40)
    listed = find_transcripts(tmp_path).transcripts
    tails = {transcript.path: b"\xc1" * 20_000 for transcript in listed}  # (read whole)
    handed: list[int] = []
    submit = ProcessPoolExecutor.submit

    def counted(executor: ProcessPoolExecutor, *call: Any) -> Future[Any]:
        handed.append(len(pickle.dumps(call)))
        return submit(executor, *call)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", counted)
    monkeypatch.setattr(pool, "IN_PROCESS_BYTES", 0)
    monkeypatch.setattr(pool, "_LEAST_BYTES", 1)  # (many small tasks)
    results = list(pool.scan_transcripts(listed, jobs=2, tails=tails))
    assert sorted(result.path for result in results) == sorted(tails)
    assert handed and max(handed) < 20_000 * len(tails) // 4, handed


def _looping(root: Path, cwd: str) -> tuple[Transcript, Path]:
    session = Transcript(cwd=cwd)
    session.prompt()
    for _ in range(2):
        session.run("ls", "same", Use(10, 20))
    return session, session.write(session.path_in(root))


def _grow(session: Transcript, path: Path, command: str) -> None:
    for _ in range(2):
        session.run(command, "same", Use(1, 1))
    path.write_bytes(session.data())


def test_scans_going_on_from_tails_give_the_whole_reading(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Held: new thresholds (the cache's context: no tail used), a --project scan keeping
    the other project's tail, a file truncated and grown past its old size, one replaced."""
    monkeypatch.setattr(cache, "SETTLING", 0.0)
    real, went_on = tail.resume, []

    def resume(*args: Any) -> Any:
        resumed = real(*args)
        went_on.append(resumed)
        return resumed

    monkeypatch.setattr(tail, "resume", resume)
    root = projects_dir()
    planted_history(root, 41, sessions=12)
    alpha, alpha_path = _looping(root, "/home/dev/alpha")
    beta, beta_path = _looping(root, "/home/dev/beta")
    _scan(capsys)
    (state_dir() / "config.toml").write_text("[rules]\ntool_repeat_warn = 2\n")
    _grow(alpha, alpha_path, "ls")
    assert _scan(capsys) == _scan(capsys, "--no-cache")
    _grow(beta, beta_path, "pwd")
    assert _scan(capsys, "--project", "beta") == _scan(capsys, "--project", "beta",
                                                       "--no-cache")
    kept = msgspec.msgpack.decode((state_dir() / TAILS_FILE).read_bytes())["tails"]
    assert {str(alpha_path), str(beta_path)} <= set(kept)
    _grow(alpha, alpha_path, "ls")
    assert _scan(capsys) == _scan(capsys, "--no-cache")
    with alpha_path.open("r+b") as file:
        file.truncate(100)
        alpha.prompt("Again.")
        alpha.run("ls", "other", Use(2, 2))
        file.write(alpha.data().replace(b"same", b"SAME"))
    assert _scan(capsys) == _scan(capsys, "--no-cache")
    assert went_on == [True, True, False]
    replacing = alpha_path.with_suffix(".new")
    replacing.write_bytes(alpha.data())
    replacing.replace(alpha_path)
    assert _scan(capsys) == _scan(capsys, "--no-cache") and len(went_on) == 3
