"""One odd file never holds up the others (hole 5): files of blank or tiny lines cost a
bounded amount of work at start-up, and live sessions are served between two files.

Work is counted (bytes read by the catch-up), never timed; the timings are in
``scripts/bench`` ("blank files").
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from loop_killer.watch import watcher as watcher_module
from loop_killer.watch.observer import EventQueue
from loop_killer.watch.sessions import Sessions
from transcripts import Lines, append, data

from .helpers import wait_for

MB = 1024 * 1024


def write_big(path: Path, unit: bytes, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    block = unit * (MB // len(unit))
    with open(path, "wb") as handle:
        handle.writelines(block for _ in range(size // MB))


def test_big_files_of_blank_or_tiny_lines_cost_little_and_a_loop_elsewhere_fires(
        env, start_watcher):
    blank = env.root / "-home-dev-junk" / "00000000-0000-4000-8000-00000000b1a2.jsonl"
    write_big(blank, b"\n", 64 * MB)
    tiny = env.root / "-home-dev-junk" / "00000000-0000-4000-8000-0000000071e5.jsonl"
    write_big(tiny, b"x\n", 64 * MB)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2) + s.reprompt())
    runner = start_watcher()
    stats = runner.watcher.sessions.catch_up_stats
    assert stats.sessions == 3
    assert stats.bytes_read < MB  # of 128 MB: the budgets, not the files, set the work
    append(path, s.answer())
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    junk = Lines(blank.stem, cwd="/home/dev/junk")
    append(blank, b"\n" * 1000 + data(junk.prompt("hello") + junk.answer("Hi.", tool=True)))
    wait_for(lambda: (st := env.status(blank.stem)) is not None
             and st.offset == blank.stat().st_size, what="the blank file read on")


def test_live_sessions_are_served_between_two_files_of_the_catch_up(
        env, start_watcher, monkeypatch):
    """A reply written while start-up is still catching up older files fires at once,
    not once every file is caught up."""
    old = []
    for i in range(2):
        t = Lines(cwd="/home/dev/old")
        older = t.path_in(env.root)
        append(older, t.prompt() + t.answer("Done.", tool=True))
        moment = time.time() - 86400 * (10 + i)
        os.utime(older, (moment, moment))
        old.append(str(older))
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2) + s.reprompt())  # the newest: caught up first

    hinted = threading.Event()

    class Hints(EventQueue):
        def put(self, kind: str, where: str = "") -> None:
            super().put(kind, where)
            if where == str(path):
                hinted.set()

    monkeypatch.setattr(watcher_module, "EventQueue", Hints)
    real = Sessions.catch_up
    order: list[str] = []
    served_before: dict[str, bool] = {}

    def catch_up(self, where, *args, **options):  # runs in the watcher's thread
        order.append(where)
        served_before[where] = env.has_request(s.session_id)
        found = real(self, where, *args, **options)
        if where == old[0]:  # the reply comes while older files are still to catch up
            append(path, s.answer())
            assert hinted.wait(5), "no event for the reply"
        return found

    monkeypatch.setattr(Sessions, "catch_up", catch_up)
    start_watcher()
    assert order == [str(path), *old]
    assert served_before[old[1]], "the reply waited for the whole catch-up"
    assert not served_before[old[0]]


def test_a_catch_up_cut_short_by_its_budget_says_so_once(env, caplog) -> None:
    import logging

    from loop_killer.state.tailing import MAX_RUN_LINES

    caplog.set_level(logging.WARNING, logger="loop_killer")
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    with path.open("ab") as handle:  # far more tiny lines than the backward scan reads
        handle.write(b"x\n" * (MAX_RUN_LINES * 3))
    sessions = Sessions(env.state)
    for _ in range(2):
        sessions.catch_up(str(path), pending_requests=set())
    said = [r.getMessage() for r in caplog.records if "were read back" in r.getMessage()]
    assert len(said) == 1 and str(path) in said[0] and "not counted" in said[0]


def _followed(env, read_limit: int) -> tuple[Sessions, Lines, Path]:
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2) + s.reprompt())
    sessions = Sessions(env.state, read_limit=read_limit)
    assert not sessions.sync(str(path))  # followed from its start, live
    return sessions, s, path


def _read_on(sessions: Sessions, path: Path) -> int:
    """Bring the file up to date as the watcher does, a read limit at a time; the most
    memory Python held meanwhile."""
    import tracemalloc

    tracemalloc.start()
    try:
        while sessions.sync(str(path)):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_blank_lines_appended_to_a_followed_file_are_stepped_over_unparsed(
        env, monkeypatch) -> None:
    """Issue 21: 100 MB of newlines appended to a live transcript took the watcher to
    1.5 GB and 108 s of CPU, a Python step (and a kept tuple) per newline. Work is counted:
    no blank line reaches the parser, and what is held stays near one read."""
    from loop_killer.watch import sessions as sessions_module

    parsed: list[int] = []
    real = sessions_module.skim_span

    def counting(buffer, start, end, stats=None):  # type: ignore[no-untyped-def]
        parsed.append(end - start)
        return real(buffer, start, end, stats)

    monkeypatch.setattr(sessions_module, "skim_span", counting)
    sessions, s, path = _followed(env, read_limit=MB)
    before = len(parsed)
    with path.open("ab") as handle:
        handle.write(b"\n" * (8 * MB) + b" \r\n\t\n" * 1000 + b"\n" * 12345)
    peak = _read_on(sessions, path)
    assert len(parsed) == before  # not one blank line parsed
    assert peak < 4 * MB  # of 8 MB appended: one read and its copy, not a tuple per line
    reader = sessions.tracked[str(path)].reader
    assert reader is not None and reader.stats.skipped["blank"] == 8 * MB + 2000 + 12345
    append(path, s.answer())  # and the loop is judged where it was left
    sessions.sync(str(path))
    assert env.has_request(s.session_id)


def test_tiny_lines_appended_to_a_followed_file_are_never_all_held_at_once(env) -> None:
    """Lines that are not blank are parsed one by one, but never kept as a list as long
    as the read: memory stays near one read whatever the lines."""
    sessions, s, path = _followed(env, read_limit=MB)
    with path.open("ab") as handle:
        handle.write(b"x\n" * MB)
    peak = _read_on(sessions, path)
    assert peak < 4 * MB
    append(path, s.answer())
    sessions.sync(str(path))
    assert env.has_request(s.session_id)
