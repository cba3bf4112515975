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


def _line(**record: object) -> bytes:
    return orjson.dumps(record) + b"\n"


def test_only_what_is_appended_after_the_start_comes_back_oldest_first(tmp_path):
    journal.append(tmp_path, {"event": "detection", "n": 0})
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    assert tail.read_new() == []
    journal.append(tmp_path, {"event": "detection", "n": 1})
    journal.append(tmp_path, {"event": "outcome", "n": 2})
    assert [r["n"] for r in tail.read_new()] == [1, 2]
    assert tail.read_new() == []


def test_a_half_written_line_waits_for_its_newline(tmp_path):
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    line = _line(n=1)
    _write(journal.journal_path(tmp_path), line[:5])
    assert tail.read_new() == []
    _write(journal.journal_path(tmp_path), line[5:] + b"not json\n" + _line(n=2))
    assert [r["n"] for r in tail.read_new()] == [1, 2]  # the broken line skipped


def test_records_written_just_before_a_rotation_are_not_lost(tmp_path):
    path = journal.journal_path(tmp_path)
    journal.append(tmp_path, {"n": 0})
    tail = JournalTail(tmp_path)
    tail.skip_to_end()
    journal.append(tmp_path, {"n": 1})
    os.replace(path, path.with_suffix(".jsonl.1"))  # what append does past 32 MB
    journal.append(tmp_path, {"n": 2})
    assert [r["n"] for r in tail.read_new()] == [1, 2]


def test_a_big_backlog_comes_in_bounded_reads(tmp_path):
    tail = JournalTail(tmp_path, max_bytes=1000)
    tail.skip_to_end()
    for n in range(100):
        journal.append(tmp_path, {"n": n, "pad": "x" * 50})
    seen: list[int] = []
    for _ in range(100):
        before = tail.offset
        seen += [r["n"] for r in tail.read_new()]
        assert tail.offset - before <= 1000
    assert seen == list(range(100))


def test_a_line_longer_than_a_read_is_skipped_once_said(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    tail = JournalTail(tmp_path, max_bytes=1000)
    tail.skip_to_end()
    _write(journal.journal_path(tmp_path), b"x" * 5000 + b"\n" + _line(n=1))
    got: list[dict[str, object]] = []
    for _ in range(10):
        got += tail.read_new()
    assert got == [{"n": 1}]
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
    target.write_bytes(_line(n=1))
    os.symlink(target, journal.journal_path(tmp_path))
    assert tail.read_new() == []
    assert list(journal.read_recent(tmp_path)) == []
