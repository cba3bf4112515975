"""The watcher's pure decisions: what a file change means, which paths matter, wording."""

from __future__ import annotations

import calendar
import os
import time
from dataclasses import replace

import pytest
from loop_killer.engine.transcript import parse_timestamp
from loop_killer.state import journal, report
from loop_killer.watch.follower import Change, Seen, classify
from loop_killer.watch.observer import DIR, FILE, ROOT, relevance
from loop_killer.watch.respond import (
    PendingOutcome,
    at_deadline,
    is_historic,
)

KEY = (1, 100)


def seen(size: int, key: tuple[int, int] = KEY, regular: bool = True) -> Seen:
    return Seen(key, size, regular, 0.0)


@pytest.mark.parametrize(
    ("known", "offset", "now", "expected"),
    [
        (None, 0, seen(10), Change.NEW),
        (KEY, 10, seen(10), Change.UNCHANGED),
        (KEY, 10, seen(25), Change.GROWN),
        (KEY, 10, seen(3), Change.TRUNCATED),
        (KEY, 10, seen(0), Change.TRUNCATED),
        (KEY, 10, seen(50, key=(1, 101)), Change.REPLACED),
        (KEY, 10, seen(10, key=(2, 100)), Change.REPLACED),
        (KEY, 10, None, Change.GONE),
        (None, 0, None, Change.GONE),
        (KEY, 10, seen(10, regular=False), Change.NOT_A_FILE),
        (None, 0, seen(0, regular=False), Change.NOT_A_FILE),
    ],
)
def test_classify_says_what_happened_to_a_file(known, offset, now, expected):
    assert classify(known, offset, now) is expected


ROOTDIR = os.path.join(os.sep, "h", ".claude", "projects")


@pytest.mark.parametrize(
    ("path", "is_dir", "expected"),
    [
        ("-home-dev-proj/0a1b.jsonl", False, FILE),
        ("-home-dev-proj", True, DIR),
        ("", True, ROOT),
        ("-home-dev-proj/agent-3430b97e.jsonl", False, None),  # flat subagent (2.0.x)
        ("-home-dev-proj/0a1b/subagents/agent-a1.jsonl", False, None),  # subagent (2.1.x)
        ("-home-dev-proj/0a1b/subagents", True, None),
        ("-home-dev-proj/0a1b.json", False, None),
        ("-home-dev-proj/.0a1b.jsonl.swp", False, None),
        ("stray.jsonl", False, None),
        ("../elsewhere/-p/0a1b.jsonl", False, None),
    ],
)
def test_relevance_keeps_only_session_transcripts_and_project_folders(path, is_dir, expected):
    full = os.path.join(ROOTDIR, path) if path else ROOTDIR
    if path.startswith(".."):
        full = os.path.join(os.sep, "h", "elsewhere", "-p", "0a1b.jsonl")
    assert relevance(ROOTDIR, full, is_dir) == expected


def test_project_label_leaves_out_the_mangled_home():
    assert report.project_label("-home-dev-goal-same-proj", "/home/dev") == "goal-same-proj"
    assert report.project_label("-home-dev-goal-same-proj", "/home/other") == (
        "home-dev-goal-same-proj")
    assert report.project_label("-home-dev", "/home/dev") == "home-dev"
    assert report.project_label("-Users-a-b-c", "/Users/a.b") == "c"


def test_detection_line_names_project_session_rule_count_and_the_reply():
    line = report.detection_line(project="goal-same-proj",
                                 session_id="a26ba613-efc5-4fa5-919a-77fca5250a20",
                                 rule="SAME_REPLY_TURNS", count=3,
                                 text="I am still working\n on   it. " + "x" * 200)
    assert "goal-same-proj" in line and "a26ba613 " in line
    assert "SAME_REPLY_TURNS" in line and "3 similar replies" in line
    assert '"I am still working on it.' in line and "…" in line
    assert "\n" not in line and len(line) < 200


def test_journal_line_shows_what_the_hook_reported_and_skips_unknown_records():
    line = report.journal_line(journal.decode({"event": "outcome", "session_id": "abcdef1234",
                                "project": "-home-dev-p", "outcome": "cleared",
                                "detail": "Goal cleared: tests pass", "source": "hook"}),
                               "/home/dev")
    assert line is not None
    assert line.startswith("CLEARED") and "p  abcdef12" in line and "(hook)" in line
    assert journal.decode({"event": "something-else", "session_id": "s"}) is None
    bare = report.journal_line(journal.decode({"event": "outcome", "session_id": "",
                                               "result": "stopped"}))
    assert bare is not None and "STOPPED" in bare


def test_ago_reads_at_a_glance():
    assert report.ago(0.2) == "just now"
    assert report.ago(12) == "12 s ago"
    assert report.ago(600) == "10 min ago"
    assert report.ago(7200) == "2 h ago"
    assert report.ago(5 * 86400) == "5 d ago"


def test_outcome_at_the_deadline_depends_on_what_followed():
    pending = PendingOutcome("u1", "SAME_REPLY_TURNS", 0.0, 0.0)
    going = at_deadline(pending, more_answers=4, request_pending=False, timeout=60)
    assert going is not None and going.kind == "continued" and "4 more" in going.detail
    taken = at_deadline(pending, more_answers=0, request_pending=False, timeout=60)
    assert taken is not None and taken.kind == "stopped"
    idle = at_deadline(pending, more_answers=0, request_pending=True, timeout=60)
    assert idle is not None and idle.kind == "none" and "60 s" in idle.detail
    pending = replace(pending, stopped=True)
    assert at_deadline(pending, more_answers=3, request_pending=True, timeout=60) is None
    # No request could be written: no request waiting is not "taken" (an audit found the
    # watcher saying the loop was stopped).
    unsent = PendingOutcome("u1", "SAME_REPLY_TURNS", 0.0, 0.0, requested=False)
    told = at_deadline(unsent, more_answers=0, request_pending=False, timeout=60)
    assert told is not None and told.kind == "not_requested"
    line = report.detection_line(project="p", session_id="a26ba613", rule="SAME_REPLY_TURNS",
                                 count=3, text="same", requested=False)
    assert line.endswith("-> no clear request (it could not be written)")


def test_historic_answers_are_told_by_their_timestamp():
    now = time.time()
    stamp = parse_timestamp("2026-11-29T23:42:25.711Z")
    assert stamp == pytest.approx(calendar.timegm((2026, 11, 29, 23, 42, 25)) + 0.711)
    assert parse_timestamp("2026-11-29T23:42:25.711Z") == pytest.approx(
        parse_timestamp("2026-11-29T23:42:25.711+00:00"))
    assert parse_timestamp("") is None and parse_timestamp("yesterday") is None
    old = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now - 3600))
    fresh = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now - 5))
    assert is_historic(old, now)
    assert not is_historic(fresh, now)
    assert not is_historic("", now)  # unknown: act on it


def test_the_hooks_tool_repeat_records_read_as_lines_in_the_watchers_terminal():
    base = {"rule": "TOOL_REPEAT", "session_id": "a26ba613-efc5", "project": "-home-dev-proj",
            "call": "Bash: npm test", "count": 3, "source": "hook"}
    assert report.journal_line(journal.decode({**base, "event": "detection"}), "/home/dev") == (
        "LOOP      proj  a26ba613  TOOL_REPEAT: Bash: npm test gave the same result 3 times "
        "in a row (hook)")
    refusal = journal.decode({**base, "event": "refusal", "count": 4})
    assert report.journal_line(refusal, "/home/dev") == (
        "REFUSED   proj  a26ba613  TOOL_REPEAT: Bash: npm test not run again after 4 "
        "identical results (hook)")
    edits = {**base, "rule": "EDIT_OSCILLATION", "call": "Edit: m.py"}
    assert report.journal_line(journal.decode({**edits, "event": "detection", "count": 2}),
                               "/home/dev") == (
        "LOOP      proj  a26ba613  EDIT_OSCILLATION: Edit: m.py edited back to an earlier "
        "version 2 times (hook)")
    assert report.journal_line(journal.decode({**edits, "event": "refusal", "count": 4}),
                               "/home/dev") == (
        "REFUSED   proj  a26ba613  EDIT_OSCILLATION: Edit: m.py not made: it would be edited "
        "back to an earlier version 4 times (hook)")
