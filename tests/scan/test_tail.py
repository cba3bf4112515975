"""A transcript that was only appended to is read from where the last scan stopped: its
result is the whole file's, read or not, and only the new bytes are read; a file changed
before that point, or a broken or hostile kept state, is read whole."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from loop_killer import cli
from loop_killer.scan import cache, files, lean, ledger, pool, tail
from loop_killer.scan.cache import CACHE_FILE, TAILS_FILE
from loop_killer.scan.files import Transcript as Listed
from loop_killer.scan.files import find_transcripts, read_transcript
from loop_killer.state.files import projects_dir, state_dir
from transcripts import Transcript, Use

from scan.test_tiers import planted_history


def _read_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every byte ``read_transcript`` reads from now on (a list of one)."""
    count = [0]
    real_read, real_pread = os.read, os.pread

    def read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        count[0] += len(data)
        return data

    def pread(fd: int, size: int, offset: int) -> bytes:
        data = real_pread(fd, size, offset)
        count[0] += len(data)
        return data

    monkeypatch.setattr(files.os, "read", read)
    monkeypatch.setattr(files.os, "pread", pread)
    monkeypatch.setattr(tail.os, "pread", pread)
    return count


def _listed(path: Path, like: Listed) -> Listed:
    info = path.stat()
    return dataclasses.replace(like, path=str(path), size=info.st_size, device=info.st_dev,
                               inode=info.st_ino)


def _cuts(data: bytes, rng: random.Random) -> Iterator[int]:
    """Where a scan may have found the file: at a line's end, within a line, at its start."""
    ends = [index + 1 for index, byte in enumerate(data) if byte == 10]
    yield from rng.sample(ends, min(3, len(ends)))
    yield rng.randrange(len(data))
    yield 0


@pytest.mark.parametrize("seed", [21, 22])
def test_a_grown_file_read_from_its_tail_gives_the_whole_files_result(
        tmp_path: Path, seed: int) -> None:
    planted_history(tmp_path / "history", seed, sessions=60)
    rng, grown = random.Random(seed), tmp_path / "grown.jsonl"
    went_on = 0
    for listed in find_transcripts(tmp_path / "history").transcripts:
        data = Path(listed.path).read_bytes()
        whole = read_transcript(listed)
        for cut in _cuts(data, rng):
            grown.write_bytes(data[:cut])
            before = read_transcript(_listed(grown, listed), tail=b"")
            with grown.open("ab") as file:
                file.write(data[cut:])
            after = read_transcript(_listed(grown, listed), tail=before.tail)
            assert dataclasses.replace(after, path=listed.path, tail=b"") == whole, (
                listed.path, cut)
            went_on += bool(before.tail)
    assert went_on > 100  # (most files: the first pass reads them; loop files, the engine)


def test_only_the_new_bytes_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Transcript(cwd="/home/dev/app")
    session.prompt()
    for number in range(200):
        session.run(f"ls {number}", "a b c " * 50, Use(10, 20))
    path = session.write(session.path_in(tmp_path))
    (listed,) = find_transcripts(tmp_path).transcripts
    before = read_transcript(listed, tail=b"")
    assert before.tail
    session.prompt("And the tests?")
    session.run("npm test", "ok", Use(5, 6))
    session.reply("All green.", Use(7, 8))
    added = session.data()[listed.size:]
    path.write_bytes(session.data())
    count = _read_bytes(monkeypatch)
    (grown,) = find_transcripts(tmp_path).transcripts
    after = read_transcript(grown, tail=before.tail)
    assert count[0] <= len(added) + 4 * 4096  # (the new bytes; 4 KB at each end, checked, kept)
    assert listed.size > 20 * len(added)
    whole = read_transcript(grown)
    assert dataclasses.replace(after, tail=b"") == whole and len(whole.replies) == 202


def _grown_session(root: Path) -> tuple[Transcript, Path, bytes]:
    session = Transcript(cwd="/home/dev/app")
    session.prompt()
    session.run("ls", "a b", Use(10, 20))
    path = session.write(session.path_in(root))
    (listed,) = find_transcripts(root).transcripts
    kept = read_transcript(listed, tail=b"").tail
    session.reply("Done.", Use(3, 4))
    return session, path, kept


def test_a_file_changed_before_its_tail_is_read_whole(tmp_path: Path) -> None:
    session, path, kept = _grown_session(tmp_path)
    data = session.data().replace(b"a b", b"x y")  # (an old line rewritten, and more)
    path.write_bytes(data)
    (listed,) = find_transcripts(tmp_path).transcripts
    assert dataclasses.replace(read_transcript(listed, tail=kept), tail=b"") == \
        read_transcript(listed)


def test_a_broken_or_hostile_tail_is_logged_and_the_file_read_whole(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    session, path, kept = _grown_session(tmp_path)
    path.write_bytes(session.data())
    (listed,) = find_transcripts(tmp_path).transcripts
    whole = read_transcript(listed)
    state = msgspec.msgpack.decode(kept)
    hostile = [b"garbage", kept[:-3], msgspec.msgpack.encode([-5, *state[1:]]),
               msgspec.msgpack.encode([*state[:5], [2**62, 0], *state[6:]])]
    far = msgspec.msgpack.encode([10**9, *state[1:]])  # (past the file's end: read whole)
    for bad in [*hostile, far]:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = read_transcript(listed, tail=bad)
        assert dataclasses.replace(result, tail=b"") == whole, bad[:40]
        assert result.tail and result.tail != bad  # (and a good one kept in its place)
        said = [record.getMessage() for record in caplog.records]
        assert (len(said) == 1 and "read whole" in said[0]) if bad in hostile else not said


def test_the_tail_keeps_every_part_of_the_first_pass() -> None:
    """A field added to the first pass's state must be kept in its tail too (or said here
    to be settings, a cache, or made again)."""
    names = {name.lstrip("_") for name in tail._Hints.__struct_fields__}
    assert names == {name.lstrip("_") for name in lean.LoopHints.__slots__} - {
        "thresholds", "reprompts", "warn", "ignored", "oscillation", "ignored_names"}
    assert set(tail._Ledger.__struct_fields__) == {
        name.lstrip("_") for name in ledger.UsageLedger.__slots__}
    assert set(tail._Tally.__struct_fields__) | {"current"} == {
        name.lstrip("_") for name in ledger.TurnTally.__slots__}
    assert set(tail._Turn.__struct_fields__) == set(ledger._Open.__slots__)
    assert set(lean._Scope.__slots__) == {"hints", "inline", "last", "ledger"}
    assert set(lean.LeanScan.__slots__) == {
        "_at", "_cost_state", "_cwd", "_main", "_pending", "_settings", "_side", "_turns",
        "bytes_read", "lines", "needs_engine", "parsed", "path", "project", "session_id",
        "subagent"}


def test_the_newest_files_of_the_last_day_keep_a_tail() -> None:
    now = time.time()
    listed = [(f"/p/{number}.jsonl", int((now - number * 7400) * 1e9)) for number in range(40)]
    assert tail.worth_a_tail(listed, now) == {f"/p/{number}.jsonl" for number in range(12)}
    assert len(tail.worth_a_tail(listed, now + 3600 * 10**3)) == 0
    copies = [(f"{folder}{path}", mtime) for path, mtime in listed for folder in ("", "/q", "/r")]
    assert tail.worth_a_tail(copies, now) == {  # (16: the newest five thrice, one more)
        f"{folder}/p/{number}.jsonl" for number in range(5) for folder in ("", "/q", "/r")
    } | {"/p/5.jsonl"}


def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert cli.main(["scan", "--json", *args]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    del document["scan"]["from_cache"]
    return document


def test_a_scan_reads_a_grown_session_from_its_tail(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "SETTLING", 0.0)  # (the other files: kept, not read again)
    root = projects_dir()
    planted_history(root, 31, sessions=30)
    session = Transcript(cwd="/home/dev/live")
    session.prompt()
    for number in range(300):
        session.run(f"cat part{number}", "line " * 100, Use(10, 20))
    path = session.write(session.path_in(root))
    first = _scan(capsys)
    kept = msgspec.msgpack.decode((state_dir() / TAILS_FILE).read_bytes())["tails"]
    assert str(path) in kept and 1 < len(kept) < 16  # (not a file the engine read whole)
    old = path.stat().st_size
    session.reply("Done.", Use(3, 4))
    session.prompt("Now the docs.")
    session.run("ls docs", "a.md", Use(5, 6))
    path.write_bytes(session.data())
    count = _read_bytes(monkeypatch)
    grown = _scan(capsys, "--jobs", "1")
    assert count[0] <= path.stat().st_size - old + 4 * 4096
    assert grown == _scan(capsys, "--no-cache", "--jobs", "1")
    (before,) = [row for row in first["sessions"] if row["session_id"] == session.session_id]
    (after,) = [row for row in grown["sessions"] if row["session_id"] == session.session_id]
    assert after["tokens"]["total"] == before["tokens"]["total"] + 3 + 4 + 5 + 6


def test_a_tail_is_kept_while_its_file_settles_in_a_file_of_its_own(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A live session is always being written: its result is not kept, its tail is, and a
    scan after it grew writes the tails again, not the other files' results."""
    session, path, _ = _grown_session(projects_dir())
    other = Transcript("dddddddd-2222-4333-8444-555555555555", cwd="/home/dev/other")
    other.prompt()
    other.reply("Done.", Use(1, 2))
    other.write(other.path_in(projects_dir()))
    live = path.stat().st_ino
    monkeypatch.setattr(cache, "_settled", lambda stamp, _: stamp is not None
                        and stamp[1] != live)
    _scan(capsys)
    results, tails = state_dir() / CACHE_FILE, state_dir() / TAILS_FILE
    assert list(msgspec.msgpack.decode(results.read_bytes())["files"]) == [
        str(other.path_in(projects_dir()))]
    kept = msgspec.msgpack.decode(tails.read_bytes())
    assert not kept["files"] and set(kept["tails"]) == {str(path), str(
        other.path_in(projects_dir()))}  # (both new: the newest of the day)
    before = results.read_bytes(), results.stat().st_mtime_ns, tails.read_bytes()
    path.write_bytes(session.data())  # (the session went on)
    grown = _scan(capsys)
    assert (results.read_bytes(), results.stat().st_mtime_ns) == before[:2]
    assert tails.read_bytes() != before[2]
    assert grown == _scan(capsys, "--no-cache")


def test_files_going_on_from_their_tails_start_no_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A live session of many megabytes that grew a little is read in this process."""
    session, path, kept = _grown_session(tmp_path)
    path.write_bytes(session.data())
    (listed,) = find_transcripts(tmp_path).transcripts
    started: list[int] = []
    real = pool._shared
    monkeypatch.setattr(pool, "_shared", lambda *args: started.append(1) or real(*args))
    monkeypatch.setattr(pool, "IN_PROCESS_BYTES", listed.size)  # (this file: big)
    monkeypatch.setattr(pool, "batches", lambda files: [[file] for file in files * 2])
    for tails, workers in [({listed.path: kept}, []), ({listed.path: b""}, [1])]:
        started.clear()
        results = list(pool.scan_transcripts([listed], jobs=2, tails=tails))
        assert started == workers and len(results) == 2


def test_a_last_line_half_written_keeps_the_tail_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that catches Claude Code writing a line: the engine reads the file (the line
    counted as broken, as a whole read does) and the tail before that line is kept."""
    session, path, _ = _grown_session(tmp_path)
    whole_data = session.data()
    line = session.lines[-1]
    path.write_bytes(whole_data[:-len(line) // 2])  # (half of its last line)
    (listed,) = find_transcripts(tmp_path).transcripts
    caught = read_transcript(listed, tail=b"")
    assert caught.tail and dataclasses.replace(caught, tail=b"") == read_transcript(listed)
    path.write_bytes(whole_data)
    count = _read_bytes(monkeypatch)
    (grown,) = find_transcripts(tmp_path).transcripts
    after = read_transcript(grown, tail=caught.tail)
    assert count[0] <= len(line) + 1 + 4 * 4096
    assert dataclasses.replace(after, tail=b"") == read_transcript(grown)
