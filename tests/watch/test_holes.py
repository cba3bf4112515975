"""The watcher's holes from the adversarial run (issue "One reader, one judge"):

3. Terminal escape codes in a reply or a project folder name never reach the watcher's
   terminal nor ``loop-killer status``.
4. An unfinished line cannot grow memory without bound: past the cap it is dropped, said
   once, and the lines after it are read as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from loop_killer import cli
from loop_killer.engine.reader import MAX_LINE_BYTES
from loop_killer.state.inbox import peek_request
from loop_killer.watch.main import configure_logging
from loop_killer.watch.sessions import Sessions
from transcripts import Lines, append

from .helpers import wait_for

HOSTILE = "\x1b]0;PWNED\x07\x1b[2J"


@pytest.fixture
def terminal_logging() -> Iterator[None]:
    """Undoes the watcher's own logging set-up after the test."""
    names = ("loop_killer", "loop_killer.watch.events", "watchdog")
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate,
                    logging.getLogger(name).level) for name in names}
    yield
    for name, (handlers, propagate, level) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.propagate = propagate
        logger.setLevel(level)


def test_3_escape_codes_never_reach_the_watchers_terminal(env, start_watcher, capsys,
                                                          terminal_logging):
    configure_logging(verbose=True)  # to this test's captured stdout and stderr
    s = Lines()
    path = env.root / f"-home-dev-{HOSTILE}proj" / f"{s.session_id}.jsonl"
    env.root.mkdir(parents=True)
    start_watcher()
    append(path, s.goal_loop(3, f"{HOSTILE}I am still working on the auth tests."))
    seen = {"out": "", "err": ""}

    def printed() -> bool:
        out, err = capsys.readouterr()
        seen["out"] += out
        seen["err"] += err
        return "LOOP" in seen["out"]

    wait_for(printed, what="the detection line")
    assert "PWNED" in seen["out"]  # the line is there, its escapes are not
    for text in seen.values():
        assert "\x1b" not in text and "\x07" not in text


def test_3_escape_codes_never_reach_loop_killer_status(env, start_watcher, capsys):
    s = Lines()
    path = env.root / f"-home-dev-{HOSTILE}proj" / f"{s.session_id}.jsonl"
    env.root.mkdir(parents=True)
    append(path, s.goal_loop(2, f"{HOSTILE}still working"))
    start_watcher(heartbeat_interval=0.1)
    wait_for(lambda: env.status(s.session_id) is not None, what="the status")
    capsys.readouterr()
    code = cli.main(["status"])
    out, _ = capsys.readouterr()
    assert code == 0 and s.session_id[:8] in out and "PWNED" in out
    assert "\x1b" not in out and "\x07" not in out


def test_4_an_unfinished_line_past_the_cap_is_let_go_and_said_once(env, caplog):
    caplog.set_level(logging.WARNING, logger="loop_killer")
    sessions = Sessions(env.state)
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal())
    sessions.sync(str(path))
    tracked = sessions.tracked[str(path)]
    chunk = b"x" * (4 * 1024 * 1024)
    with path.open("ab") as handle:  # a partial write that never ends
        for _ in range(MAX_LINE_BYTES // len(chunk) + 2):
            handle.write(chunk)
            handle.flush()
            while sessions.sync(str(path)):
                pass
            assert tracked.pending_bytes <= MAX_LINE_BYTES  # never more held than the cap
    assert tracked.pending_bytes == 0
    append(path, [b"\n"] + s.answer("Starting.") + s.loop(3))
    while sessions.sync(str(path)):
        pass
    said = [r.getMessage() for r in caplog.records if "longer than" in r.getMessage()]
    assert len(said) == 1 and s.session_id[:8] in said[0]
    request = peek_request(env.state, s.session_id)
    assert request is not None and request.answer_uuid == s.answer_uuids[-1]


