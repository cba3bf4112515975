"""Settings holes the watcher had (issue 21).

1. A config.toml nested deeper than the TOML parser goes made ``loop-killer-watch`` exit
   with a traceback; it starts with the defaults and says what is wrong.
2. ``projects.off = ["/home/dev/proj"]`` made the watcher leave ``/home/dev/proj-2``
   alone (its folder ``-home-dev-proj-2`` starts with ``-home-dev-proj-``) while the hooks
   acted there: paths match at a folder boundary, by the real cwd of the transcript's
   lines where the watcher has read them.
"""

from __future__ import annotations

from loop_killer.state.inbox import peek_request
from loop_killer.watch.sessions import Sessions
from transcripts import Lines, append, data

from .helpers import wait_for


def _config(env, text: bytes) -> None:
    env.state.mkdir(parents=True, exist_ok=True)
    (env.state / "config.toml").write_bytes(text)


def _loops(env, sessions: Sessions, s: Lines, path, opening: bytes | None = None) -> bool:
    """A re-prompt loop, then a tool-repeat loop, read live; whether the first was asked
    to be cleared (the person's prompt after it withdraws the request). ``opening``: the
    bytes of the first answer (or what is left of them to write)."""
    if opening is None:
        opening = data(s.answer("Starting."))
    append(path, opening + data(s.loop(3)))
    sessions.sync(str(path))
    requested = peek_request(env.state, s.session_id) is not None
    append(path, s.prompt() + [line for _ in range(3)
                               for line in s.answer("Trying again.", tool=True)])
    sessions.sync(str(path))
    return requested


def test_the_watcher_starts_under_a_file_nested_too_deeply_and_says_so(env, spawn_watcher):
    _config(env, b"[rules]\noff = " + b"[" * 500 + b"]" * 500 + b"\n[rule]\nx = 1\n")
    watcher = spawn_watcher()  # fails here if it exits: it must reach its first heartbeat
    said = wait_for(lambda: "nested too deeply" in (text := watcher.stderr()
                                                     + watcher.stdout()) and text,
                    what="the settings problem at start-up")
    assert "Traceback" not in said


def test_the_watcher_names_misspelled_settings_at_start_up(env, spawn_watcher):
    _config(env, b"[rules]\nsame_reply_turn = 2\n")
    watcher = spawn_watcher()
    wait_for(lambda: "unknown key rules.same_reply_turn" in watcher.stderr() + watcher.stdout(),
             what="the unknown key at start-up")


def test_a_project_off_leaves_a_namesake_with_a_suffix_on(env):
    _config(env, b'[projects]\noff = ["/home/dev/proj"]\n')
    sessions = Sessions(env.state)
    s = Lines(cwd="/home/dev/proj-2")
    path = s.path_in(env.root)
    append(path, s.goal())
    sessions.sync(str(path))
    assert _loops(env, sessions, s, path)
    assert [r["rule"] for r in env.detections(s.session_id)] == ["SAME_REPLY_TURNS",
                                                                 "TOOL_REPEAT"]


def test_a_project_off_leaves_a_namesake_caught_up_at_start_up_on(env):
    _config(env, b'[projects]\noff = ["/home/dev/proj"]\n')
    s = Lines(cwd="/home/dev/proj-2")
    path = s.path_in(env.root)
    append(path, s.goal())
    sessions = Sessions(env.state)
    sessions.catch_up(str(path), pending_requests=set())
    assert _loops(env, sessions, s, path)
    assert len(env.detections(s.session_id)) == 2


def test_a_sub_folder_of_a_project_off_is_off_once_its_cwd_is_read(env):
    """``/home/dev/proj/2`` has the folder name ``-home-dev-proj-2`` too: only the cwd in
    its lines tells it from ``/home/dev/proj-2``. Caught up at start-up, its reader is
    kept (a line half written) or let go and rebuilt from its tail when it grows."""
    _config(env, b'[projects]\noff = ["/home/dev/proj"]\n')
    for awake in (True, False):
        s = Lines(cwd="/home/dev/proj/2")
        path = s.path_in(env.root)
        opening = data(s.answer("Starting."))
        cut = len(opening) // 2 if awake else 0
        append(path, s.goal())
        append(path, opening[:cut])
        sessions = Sessions(env.state)
        sessions.catch_up(str(path), pending_requests=set())  # read back from its tail
        assert (sessions.tracked[str(path)].reader is not None) is awake
        assert not _loops(env, sessions, s, path, opening[cut:])
        assert env.detections(s.session_id) == []
