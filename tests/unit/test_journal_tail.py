"""``journal.JournalTail``: what is appended to the detection log, each record once."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
from loop_killer.state import journal
from loop_killer.state.journal import JournalTail


def _write(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _line(n: int) -> bytes:
    """A detection's line, as an older writer wrote it (its session named ``s<n>``)."""
    return orjson.dumps({"event": "detection", "session_id": f"s{n}"}) + b"\n"


def _record(n: int, **more: str) -> journal.Record:
    return journal.LoopRecord(session_id=f"s{n}", **more)


def _ids(records: list[journal.Record]) -> list[str]:
    return [record.session_id for record in records]


def test_only_what_is_appended_after_the_start_comes_back_oldest_first(tmp_path):
    journal.append(tmp_path, _record(0))
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    assert tail.read_new() == []
    journal.append(tmp_path, _record(1))
    journal.append(tmp_path, journal.OutcomeRecord(session_id="s2"))
    assert _ids(tail.read_new()) == ["s1", "s2"]
    assert tail.read_new() == []


def test_a_half_written_line_waits_for_its_newline(tmp_path):
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    line = _line(1)
    _write(journal.journal_path(tmp_path), line[:5])
    assert tail.read_new() == []
    _write(journal.journal_path(tmp_path), line[5:] + b"not json\n" + _line(2))
    assert _ids(tail.read_new()) == ["s1", "s2"]  # the broken line skipped


def test_records_written_just_before_a_rotation_are_not_lost(tmp_path):
    path = journal.journal_path(tmp_path)
    journal.append(tmp_path, _record(0))
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    journal.append(tmp_path, _record(1))
    os.replace(path, path.with_suffix(".jsonl.1"))  # what append does past 32 MB
    journal.append(tmp_path, _record(2))
    assert _ids(tail.read_new()) == ["s1", "s2"]


def test_a_backlog_larger_than_a_read_is_not_lost_across_a_rotation(tmp_path):
    """More was appended since the last look than one read takes, then the log rotated:
    the old log's rest is read to its end before the new log (it was cut at one read)."""
    path = journal.journal_path(tmp_path)
    journal.append(tmp_path, _record(-1))
    tail = JournalTail(tmp_path, max_bytes=1000)
    tail.skip_to_end()
    for n in range(30):
        journal.append(tmp_path, _record(n))
    assert path.stat().st_size > 3000
    os.replace(path, path.with_suffix(".jsonl.1"))
    journal.append(tmp_path, _record(30))
    read: list[journal.Record] = []
    for _ in range(5):
        read += tail.read_new()
    assert _ids(read) == [f"s{n}" for n in range(31)]


def test_a_big_backlog_comes_in_bounded_reads(tmp_path):
    tail = JournalTail(tmp_path, max_bytes=1000)
    tail.skip_to_end()
    for n in range(100):
        journal.append(tmp_path, _record(n, snippet="x" * 50))
    seen: list[str] = []
    for _ in range(100):
        before = tail.offset
        seen += _ids(tail.read_new())
        assert tail.offset - before <= 1000
    assert seen == [f"s{n}" for n in range(100)]


def test_a_line_longer_than_a_read_is_skipped_once_said(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    tail = JournalTail(tmp_path, max_bytes=1000)
    tail.skip_to_end()
    _write(journal.journal_path(tmp_path), b"x" * 5000 + b"\n" + _line(1))
    got: list[journal.Record] = []
    for _ in range(10):
        got += tail.read_new()
    assert _ids(got) == ["s1"]
    assert sum("over 1000 bytes" in r.getMessage() for r in caplog.records) == 1


def test_a_fifo_or_a_link_in_its_place_is_refused_without_blocking(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    os.mkfifo(journal.journal_path(tmp_path))
    assert tail.read_new() == [] and tail.read_new() == []
    assert sum("not a regular file" in r.getMessage() for r in caplog.records) == 1
    os.unlink(journal.journal_path(tmp_path))
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(_line(1))
    os.symlink(target, journal.journal_path(tmp_path))
    assert tail.read_new() == []
    assert list(journal.read_recent(tmp_path)) == []
