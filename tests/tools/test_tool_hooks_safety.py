"""The tool-call hooks fail open: whatever is odd on disk or in the input, no call is
refused by mistake, nothing hangs, and nothing is written through a link."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest
from loop_killer.engine.tool_repeat import ToolRepeatCounter
from loop_killer.hooks.tool_hook import run_input
from loop_killer.state import session as store
from owners import give_to_another_user

from .kit import FAIL, SESSION, before, failed, prompt


def run(data: object, **env: str) -> dict | None:
    return run_input(data, env={**os.environ, **env})


def blocked_state(state: Path) -> Path:
    """A session whose ``npm test`` has reached the refusal."""
    for _ in range(4):
        run(failed())
    assert run(before()) is not None
    return state / "tools" / f"{SESSION}.json"


def test_in_process_the_same_rules_hold(state: Path) -> None:
    outs = [run(failed()) for _ in range(4)]
    assert [out is not None for out in outs] == [False, False, True, True]
    assert run(before()) is not None
    assert run(prompt()) is None
    assert run(before()) is None


@pytest.mark.parametrize("junk", [b"", b"not json", b"[]", b'{"v": 2, "scopes": {}}',
                                  b'{"v": 1, "scopes": {"main": {"v": 1, "calls": "x"}}}'])
def test_an_unreadable_state_refuses_nothing(state: Path, junk: bytes) -> None:
    path = blocked_state(state)
    path.write_bytes(junk)
    assert run(before()) is None
    assert run(failed()) is None  # and counting starts afresh


def test_a_state_beyond_the_read_bound_refuses_nothing(state: Path) -> None:
    path = blocked_state(state)
    kept = path.read_text()
    path.write_text(kept[:-1] + " " * store.MAX_READ_BYTES + "}")
    assert run(before()) is None


def test_a_state_over_the_cap_keeps_the_main_scopes_counts(state: Path) -> None:
    """An older version's file grown past the cap is read (up to a bound) and trimmed on
    the next save: the main session's refusal is not silently wiped."""
    path = blocked_state(state)
    kept = path.read_text()
    path.write_text(kept[:-1] + " " * store.MAX_STATE_BYTES + "}")
    assert run(before()) is not None
    run(failed("other"))
    assert path.stat().st_size < store.MAX_STATE_BYTES
    assert run(before()) is not None


def test_a_state_file_that_is_a_link_is_not_followed(state: Path, tmp_path: Path) -> None:
    path = blocked_state(state)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    assert run(before()) is None


def test_a_fifo_in_place_of_the_state_never_hangs(state: Path) -> None:
    path = blocked_state(state)
    path.unlink()
    os.mkfifo(path)
    assert run(before()) is None
    assert run(failed()) is None  # replaced by a real file on the next count


def test_a_tools_folder_that_is_a_link_is_never_written_into(state: Path, tmp_path: Path
                                                             ) -> None:
    target = tmp_path / "target"
    target.mkdir()
    state.mkdir(parents=True, exist_ok=True)
    (state / "tools").symlink_to(target)
    for _ in range(4):
        assert run(failed()) is None
    assert list(target.iterdir()) == []


def test_a_busy_lock_means_nothing_counted_and_nothing_said(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "LOCK_WAIT", 0.05)
    for _ in range(2):
        run(failed())
    with open_lock(state) as _held:
        assert run(failed()) is None
    assert run(failed()) is not None  # the lost count delayed the warning by one


def test_a_busy_lock_never_keeps_a_refusal_past_the_persons_prompt(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "LOCK_WAIT", 0.05)
    path = blocked_state(state)
    with open_lock(state):
        assert run(prompt()) is None
    assert not path.exists()
    assert run(before()) is None


class open_lock:
    """Another hook holding the tool hooks' lock."""

    def __init__(self, state: Path) -> None:
        (state / "tools").mkdir(parents=True, exist_ok=True)
        self.fd = os.open(state / "tools" / ".lock", os.O_RDWR | os.O_CREAT, 0o600)

    def __enter__(self) -> int:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


@pytest.mark.parametrize("data", [
    None, [], "x", {}, {"hook_event_name": "PreToolUse"},
    {**failed(), "session_id": ""}, {**failed(), "session_id": "a/b"},
    {**failed(), "tool_name": ""}, {**failed(), "hook_event_name": "Stop"},
    {**failed(), "tool_input": None, "error": None},
    {**failed(), "agent_id": 7},
    {**failed(), "tool_name": ["Bash"]}, {**failed(), "tool_name": {"x": 1}},
])
def test_odd_input_is_answered_with_nothing(state: Path, data: object) -> None:
    assert run(data) is None


def test_odd_values_inside_the_input_still_count(state: Path) -> None:
    odd = {**failed(), "tool_input": ["not", "an", "object"], "error": {"x": 1}}
    outs = [run(odd) for _ in range(3)]
    assert outs[2] is not None


def test_scopes_are_capped_oldest_first(state: Path) -> None:
    for n in range(store.MAX_SCOPES + 5):
        run(failed(agent_id=f"agent{n}"))
    kept = json.loads((state / "tools" / f"{SESSION}.json").read_text())
    assert len(kept["scopes"]) == store.MAX_SCOPES
    assert "agent0" not in kept["scopes"] and f"agent{store.MAX_SCOPES + 4}" in kept["scopes"]


def test_the_counts_survive_a_state_written_by_put(state: Path) -> None:
    counter = ToolRepeatCounter()
    for _ in range(4):
        counter.record("Bash", {"command": "npm test"}, "x", True,
                       cwd=before()["cwd"])  # the call in the hook input's folder
    path = store.state_path(state, SESSION)
    store.save(path, store.put(None, "main", counter), refusable=counter.refusable())
    assert run(before()) is not None


def test_stale_state_files_are_pruned_when_a_new_one_is_made(state: Path) -> None:
    folder = state / "tools"
    folder.mkdir(parents=True)
    old = folder / "old-session.json"
    old.write_text("{}")
    os.utime(old, (1, 1))
    fresh = folder / "fresh-session.json"
    fresh.write_text("{}")
    run(failed())
    assert not old.exists() and fresh.exists()
    assert (folder / f"{SESSION}.json").exists()


# -- issue 21: links, owners, odd text, many subagents -----------------------------------


def test_a_linked_tools_folder_is_neither_read_nor_reset_through(state: Path, tmp_path: Path
                                                                 ) -> None:
    """Counts planted behind a link never refuse a call, and the prompt's reset removes
    nothing through it (nothing lost)."""
    path = blocked_state(state)
    elsewhere = tmp_path / "elsewhere"
    (state / "tools").rename(elsewhere)
    (state / "tools").symlink_to(elsewhere)
    assert run(before()) is None
    assert run(prompt()) is None
    assert (elsewhere / path.name).exists()


def test_a_linked_state_folder_is_never_read_or_written_through(isolated_home: Path,
                                                                tmp_path: Path) -> None:
    config = tmp_path / "config"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config.mkdir()
    (config / "loop-killer").symlink_to(elsewhere)
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    for _ in range(4):
        run(failed(), **env)
    assert run(before(), **env) is None
    assert list(elsewhere.iterdir()) == []
    # Counts planted there are not read either.
    (elsewhere / "tools").mkdir()
    store.save(str(elsewhere / "tools" / f"{SESSION}.json"), blocked_counts(), refusable=True)
    assert run(before(), **env) is None


def blocked_counts() -> dict:
    counter = ToolRepeatCounter()
    for _ in range(4):
        counter.record("Bash", {"command": "npm test"}, FAIL, True)
    return store.put(None, "main", counter)


def test_counts_another_user_owns_refuse_nothing(state: Path) -> None:
    path = blocked_state(state)
    give_to_another_user(path)
    assert run(before()) is None


def test_a_tools_folder_others_can_write_refuses_nothing(state: Path) -> None:
    blocked_state(state)
    os.chmod(state / "tools", 0o777)
    assert run(before()) is None


def journal_records(state: Path) -> list[dict]:
    lines = (state / "detections.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("field", ["tool_use_id", "tool_name", "agent_type",
                                   "transcript_path"])
def test_a_lone_surrogate_in_the_input_still_warns_logs_and_refuses(state: Path, field: str
                                                                    ) -> None:
    odd = "Bash\ud800" if field == "tool_name" else "x\ud800y"
    extra = {field: odd, **({"agent_id": "agent1"} if field == "agent_type" else {})}
    outs = [run({**failed(), **extra}) for _ in range(4)]
    assert [out is not None for out in outs] == [False, False, True, True]
    assert "TOOL_REPEAT" in outs[2]["systemMessage"]
    assert run({**before(), **extra}) is not None
    records = journal_records(state)
    assert [r["event"] for r in records] == ["detection", "refusal"]
    assert "\\ud800" in records[0]["tool" if field == "tool_name" else field]  # escaped


def test_a_lone_surrogate_in_the_agent_id_still_counts(state: Path) -> None:
    agent = {"agent_id": "sub\udfffagent", "agent_type": "general"}
    outs = [run(failed(**agent)) for _ in range(4)]
    assert [out is not None for out in outs] == [False, False, True, True]
    assert run(before(**agent)) is not None
    assert run(before()) is None  # the main session's own call is another scope


def test_many_subagents_never_push_the_main_scope_out(state: Path) -> None:
    """27 subagents of 200 calls each in one turn: the file stays under its cap and the
    main session's 5th attempt is still refused."""
    blocked_state(state)
    path = store.state_path(state, SESSION)
    for agent in range(27):
        kept = store.load(path)
        counter = store.counter(kept, f"agent{agent}", store_settings())
        for call in range(200):
            counter.record("Bash", {"command": f"make {agent}-{call}"}, "ok", False)
        store.save(path, store.put(kept, f"agent{agent}", counter), refusable=True)
        assert os.path.getsize(path) < store.MAX_STATE_BYTES
    run(failed("one more", agent_id="agent27"))
    assert os.path.getsize(path) < store.MAX_STATE_BYTES
    assert run(before()) is not None
    kept = json.loads(Path(path).read_text())
    assert next(iter(kept["scopes"])) == "main"


def store_settings():
    from loop_killer.state.config import load_settings

    return load_settings(Path(os.environ["CLAUDE_CONFIG_DIR"]) / "loop-killer")


def test_put_bounds_any_state_and_keeps_main_first() -> None:
    full = ToolRepeatCounter()
    for call in range(500):
        full.record("Bash", {"command": f"c{call}"}, "r", False)
    data = store.put(None, "main", full)
    for agent in range(store.MAX_SCOPES * 2):
        data = store.put(data, f"agent-{agent:03d}-" + "x" * 40, full)
        size = len(json.dumps(data, separators=(",", ":")))
        assert size <= store.STATE_BUDGET
        assert next(iter(data["scopes"])) == "main"
    assert len(data["scopes"]) <= store.MAX_SCOPES


def test_the_third_refused_attempt_in_a_turn_ends_it_and_says_so_once(state: Path) -> None:
    for _ in range(4):
        run(failed())
    outputs = [run(before()) for _ in range(3)]
    assert all(out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
               for out in outputs)
    first, second, third = outputs
    assert first is not None and "systemMessage" in first and "continue" not in first
    assert second is not None and "systemMessage" not in second and "continue" not in second
    assert third is not None and third["continue"] is False
    assert third["stopReason"].startswith("loop-killer: TOOL_REPEAT: a refused call tried 3")
    assert third["systemMessage"].endswith("loop stopped; no goal was set.")
    # The person's next prompt starts afresh: refusals are counted again from zero.
    run(prompt())
    for _ in range(4):
        run(failed())
    again = run(before())
    assert again is not None and "continue" not in again


def test_the_same_command_in_another_folder_is_not_refused(state: Path) -> None:
    for _ in range(4):
        run(failed())
    assert run(before()) is not None
    assert run(before(cwd="/home/dev/proj/packages/b")) is None


def test_a_file_edited_back_and_forth_is_told_to_the_model_and_logged(state: Path) -> None:
    from .kit import succeeded

    def edit(old: str, new: str) -> dict[str, Any]:
        return succeeded(tool="Edit", tool_input={"file_path": "/home/dev/proj/m.py",
                                                   "old_string": old, "new_string": new},
                         tool_response={"filePath": "/home/dev/proj/m.py", "oldString": old,
                                        "newString": new, "originalFile": old})

    outputs = [run(edit(old, new)) for old, new in (("a", "b"), ("b", "a"), ("a", "b"))]
    assert outputs[:2] == [None, None]
    told = outputs[2]
    assert told is not None
    assert "going back and forth" in told["hookSpecificOutput"]["additionalContext"]
    assert told["systemMessage"].startswith("loop-killer: Edit: /home/dev/proj/m.py: edited back")
    assert "EDIT_OSCILLATION" in told["systemMessage"]
    records = [json.loads(line) for line in (state / "detections.jsonl").read_text().splitlines()]
    assert [(r["event"], r["rule"], r["count"]) for r in records] == [
        ("detection", "EDIT_OSCILLATION", 2)]
    # never a refusal: the same edit runs again
    assert run(before(tool="Edit", tool_input={"file_path": "/home/dev/proj/m.py",
                                              "old_string": "b", "new_string": "a"})) is None


def test_an_output_is_keyed_before_the_lock_every_session_shares(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crafted output of many megabytes costs its own hook the time, never another
    session's hook waiting for the lock (issue 21: 31 MB took 8 s under the lock)."""
    from loop_killer.engine import tool_repeat

    held_while_keying: list[bool] = []
    real = tool_repeat.result_key

    def keyed(content: object, *, is_error: bool) -> str:
        lock = state / "tools" / ".lock"
        if lock.exists():
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held_while_keying.append(False)
            except BlockingIOError:
                held_while_keying.append(True)
            finally:
                os.close(fd)
        return real(content, is_error=is_error)

    monkeypatch.setattr(tool_repeat, "result_key", keyed)
    for _ in range(3):
        run(failed())
    assert held_while_keying and not any(held_while_keying)


def test_the_refusal_marker_is_there_exactly_while_a_call_may_be_refused(state: Path) -> None:
    """The launcher starts the package for a PreToolUse only when the marker is there."""
    marker = Path(store.refusal_marker(store.state_path(state, SESSION)))
    for _ in range(3):
        run(failed())
    assert not marker.exists()  # warned, nothing refusable yet
    run(failed())
    assert marker.exists()  # the 5th attempt will be refused
    from .kit import succeeded

    run(succeeded(tool="Edit", tool_input={"file_path": "/home/dev/proj/a.js",
                                          "old_string": "a", "new_string": "b"}))
    assert not marker.exists()  # a change to the files: every call runs again
    for _ in range(4):
        run(failed())
    assert marker.exists()
    run(prompt())
    assert not marker.exists()  # the person spoke
