"""The detection log's records: written by ``journal.encode``, read by ``journal.decode``,
the same three types both ways; the keys on disk are the ones the log always had."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
from loop_killer.state import journal
from loop_killer.state.journal import LoopRecord, OutcomeRecord, ToolRecord

RECORDS: list[journal.Record] = [
    LoopRecord(session_id="s1", rule="SAME_REPLY_TURNS", project="-home-dev-shop",
               transcript_path="/t.jsonl", source="watcher", answer_uuid="a1",
               prompt_uuid="p1", answer_digest="d", count=3, run_length=3,
               snippet="still working", at=1.5),
    LoopRecord(session_id="s1", rule="SAME_REPLY_TURNS", source="hook", answer_uuid="a1",
               located_by="anchor", at=2.0),
    ToolRecord(session_id="s2", rule="TOOL_REPEAT", source="hook", tool="Bash",
               call="Bash: npm test", count=3, tool_use_id="t1", at=3.0),
    ToolRecord(session_id="s2", rule="TOOL_REPEAT", refused=True, call="Bash: npm test",
               count=4, agent_id="ag1", agent_type="Explore", at=4.0),
    OutcomeRecord(session_id="s1", rule="SAME_REPLY_TURNS", answer_uuid="a1",
                  outcome="cleared", detail="/goal clear: done", hands="mod",
                  evidence="proof line", plan_id="s1.1", at=5.0),
    OutcomeRecord(session_id="s1", outcome="stopped", after_s=1.25, at=6.0),
]


@pytest.mark.parametrize("record", RECORDS)
def test_a_record_reads_back_as_written(record: journal.Record) -> None:
    assert journal.decode(orjson.loads(journal.encode(record))) == record


def test_the_keys_on_disk_are_the_logs_own_and_a_field_left_none_is_not_written() -> None:
    line = orjson.loads(journal.encode(RECORDS[3]))
    assert line["event"] == "refusal" and "refused" not in line
    assert line["agent_id"] == "ag1" and line["call"] == "Bash: npm test"
    watcher_outcome = orjson.loads(journal.encode(RECORDS[5]))
    assert watcher_outcome["event"] == "outcome" and watcher_outcome["after_s"] == 1.25
    assert not {"hands", "evidence", "plan_id"} & set(watcher_outcome)
    watcher_detection = orjson.loads(journal.encode(RECORDS[0]))
    assert "located_by" not in watcher_detection


def test_append_stamps_the_time_when_none_is_given(tmp_path: Path) -> None:
    journal.append(tmp_path, LoopRecord(session_id="s"))
    (record,) = journal.read_recent(tmp_path)
    assert record.at > 0


def test_lines_older_writers_left_read_as_records() -> None:
    """Lines as the hooks and the watcher wrote them before these types (dicts)."""
    lines = [
        b'{"at":1.0,"event":"detection","session_id":"s","answer_uuid":"a","rule":"IDLE_TURNS",'
        b'"project":"p","transcript_path":"/t","answer_digest":"d","prompt_uuid":"",'
        b'"count":6,"run_length":6,"reply_in_file":true,"case":"x","located_by":"tail",'
        b'"snippet":"hi","source":"hook"}',
        b'{"at":2,"event":"detection","rule":"EDIT_OSCILLATION","session_id":"s",'
        b'"count":2,"source":"watcher"}',
        b'{"at":3.0,"event":"refusal","rule":"TOOL_REPEAT","session_id":"s","tool":"Bash",'
        b'"count":4}',
        b'{"event":"outcome","session_id":"s","result":"stopped","message":"said so"}',
    ]
    loop, edit, refusal, outcome = (journal.decode(orjson.loads(line)) for line in lines)
    assert isinstance(loop, LoopRecord)  # (fields no longer kept are left out)
    assert (loop.count, loop.run_length, loop.located_by) == (6, 6, "tail")
    assert isinstance(edit, ToolRecord) and not edit.refused and edit.at == 2.0
    assert isinstance(refusal, ToolRecord) and refusal.refused and refusal.call == "Bash"
    assert isinstance(outcome, OutcomeRecord)
    assert (outcome.outcome, outcome.detail, outcome.at) == ("stopped", "said so", 0.0)


def test_hostile_lines_are_skipped_and_said_never_raised(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="loop_killer")
    hostile = [
        b"not json", b"[1, 2]", b'"detection"', b"{}", b'{"event": "detection"}',
        b'{"event": "detection", "session_id": 7}',
        b'{"event": "launch-missiles", "session_id": "s"}',
        b'{"event": {"x": 1}, "session_id": "s"}',
    ]
    odd = (b'{"event": "detection", "session_id": "s", "count": true, "run_length": "3",'
           b' "rule": ["x"], "at": "noon", "snippet": null, "case": 5}')
    journal.journal_path(tmp_path).write_bytes(b"\n".join([*hostile, odd, b""]))
    (record,) = journal.read_recent(tmp_path)
    assert record == LoopRecord(session_id="s")  # the fields of the wrong type: defaults
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
        f"the detection log {journal.journal_path(tmp_path)}: 8 lines skipped (not a record)"]


def test_text_utf8_cannot_hold_is_written_escaped() -> None:
    line = journal.encode(ToolRecord(session_id="s", call="echo \ud800", count=10**30))
    record = journal.decode(orjson.loads(line))
    assert isinstance(record, ToolRecord)
    assert record.call == "echo \\ud800" and record.count == 0  # too big for JSON: its repr
