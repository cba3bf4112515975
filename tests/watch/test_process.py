"""The real ``loop-killer-watch`` program: lock, signals, kill -9 and restart."""

from __future__ import annotations

import os
import signal

from loop_killer.state.status import heartbeat_path
from transcripts import Lines, append

from .helpers import wait_for


def test_the_program_prints_its_start_up_summary_and_detections(env, spawn_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(1))
    watcher = spawn_watcher()
    wait_for(lambda: "1 session in 1 project" in watcher.stdout(), what="the start-up summary")
    append(path, s.loop(2))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    line = wait_for(lambda: [x for x in watcher.stdout().splitlines() if "LOOP" in x],
                    what="the detection line")
    assert s.session_id[:8] in line[0] and "SAME_REPLY_TURNS" in line[0]
    assert line[0][:2].isdigit() and line[0][2] == ":"  # starts with the time of day
    assert watcher.stderr() == ""


def test_restart_after_kill_9_does_not_duplicate_requests(env, spawn_watcher):
    s = Lines()
    path = s.path_in(env.root)
    append(path, s.goal_loop(2))
    first = spawn_watcher()
    append(path, s.loop(1))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    wait_for(lambda: len(env.detections(s.session_id)) == 1, what="the detection logged")
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    env.request(s.session_id).unlink()  # the Stop hook took it meanwhile
    second = spawn_watcher()  # the dead one's lock went with it
    append(path, s.loop(1))
    wait_for(lambda: (st := env.status(s.session_id)) and st.offset == path.stat().st_size
             and st.extra["watcher_pid"] == second.proc.pid, what="the reply read")
    assert not env.has_request(s.session_id)
    assert len(env.detections(s.session_id)) == 1


def test_a_second_watcher_says_who_holds_the_lock_and_exits_2(env, spawn_watcher):
    env.root.mkdir(parents=True)
    first = spawn_watcher()
    second = spawn_watcher(ready=False)
    assert second.wait() == 2
    assert f"pid {first.proc.pid}" in second.stderr()
    assert "Traceback" not in second.stderr()
    assert first.proc.poll() is None


def test_sigterm_and_ctrl_c_end_it_cleanly(env, spawn_watcher):
    env.root.mkdir(parents=True)
    for signum in (signal.SIGTERM, signal.SIGINT):
        watcher = spawn_watcher()
        watcher.signal(signum)
        assert watcher.wait() == 0
        assert "Traceback" not in watcher.stderr() and watcher.stderr() == ""
        assert "stopped" in watcher.stdout()
        assert not heartbeat_path(env.state).exists()
        assert (env.state / "watcher.lock").read_text().strip() == str(watcher.proc.pid)


def test_root_missing_at_start_in_the_program(env, spawn_watcher):
    watcher = spawn_watcher("--verbose")
    wait_for(lambda: "waiting for" in watcher.stdout(), what="the waiting line")
    s = Lines()
    append(s.path_in(env.root), s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), timeout=10, what="the request")
    assert "Traceback" not in watcher.stderr()
    assert "following" in watcher.stderr() and s.session_id[:8] in watcher.stderr()


def test_forced_polling(env, spawn_watcher):
    env.root.mkdir(parents=True)
    watcher = spawn_watcher("--poll")
    wait_for(lambda: "polling" in watcher.stdout(), what="the summary says polling")
    s = Lines()
    append(s.path_in(env.root), s.goal_loop(3))
    wait_for(lambda: env.has_request(s.session_id), what="the request")
    assert os.path.exists(heartbeat_path(env.state))
