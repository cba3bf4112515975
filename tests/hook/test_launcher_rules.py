"""The launcher's copies of the package's rules (it cannot import the package) stay equal to
the package's own: the state folder, the session-id check, the request and tools file names,
the input limit and the JSON parse. Its triage of hook input, over plain files."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_killer.hooks import MAX_INPUT_BYTES
from loop_killer.state.files import config_dir, is_plain_id, state_dir
from loop_killer.state.inbox import request_path
from loop_killer.state.session import refusal_marker
from loop_killer.state.session import state_path as tools_state_path

from .kit import LAUNCHER_MODULE


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loop_killer_launcher", LAUNCHER_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launcher = _load()

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"HOME": "/h"},
    {"HOME": "/h/"},
    {"HOME": ""},
    {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"},
    {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c/"},
    {"HOME": "/h", "CLAUDE_CONFIG_DIR": "~/c"},
    {"HOME": "/h", "CLAUDE_CONFIG_DIR": ""},
    {"HOME": "/h", "LOOP_KILLER_STATE_DIR": "/s", "CLAUDE_CONFIG_DIR": "/c"},
    {"HOME": "/h", "LOOP_KILLER_STATE_DIR": "~/s"},
    {"HOME": "/h", "LOOP_KILLER_STATE_DIR": "", "CLAUDE_CONFIG_DIR": "/c"},
    {"HOME": "relative/home"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_launchers_state_folder_is_the_packages(env: dict[str, str]) -> None:
    assert Path(launcher.state_dir(env)) == state_dir(env)
    assert Path(launcher.config_dir(env)) == config_dir(env)


def test_the_launchers_state_folder_follows_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in (("CLAUDE_CONFIG_DIR", str(tmp_path / "c")),
                        ("LOOP_KILLER_STATE_DIR", str(tmp_path / "s"))):
        monkeypatch.setenv(name, value)
        assert Path(launcher.state_dir(os.environ)) == state_dir()


SESSION_IDS: list[Any] = [
    "a26ba613-efc5-4fa5-919a-77fca5250a20", "x", "", "..", "a..b", "a/b", "-a", "_a", ".a",
    "a" * 128, "a" * 129, ".hidden", "a b", "é", "A_b.c-d", "a\n", "a\x00", "a.", "0",
    "١٢٣", "ａ", None, 3, ["a"],
]


@pytest.mark.parametrize("value", SESSION_IDS)
def test_the_launchers_session_id_check_is_the_packages(value: Any) -> None:
    assert launcher.is_plain_id(value) == is_plain_id(value)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ09._-/é \n") | st.characters(), max_size=140))
def test_the_session_id_checks_agree_on_any_text(value: str) -> None:
    assert launcher.is_plain_id(value) == is_plain_id(value)


@pytest.mark.parametrize("session_id", ["a26ba613-efc5-4fa5-919a-77fca5250a20", "x", "A_b.c-d"])
def test_the_request_and_tools_files_are_where_the_package_keeps_them(
    tmp_path: Path, session_id: str
) -> None:
    state = tmp_path / "state"
    assert Path(launcher.request_path(str(state), session_id)) == request_path(state,
                                                                               session_id)
    assert Path(launcher.tools_path(str(state), session_id)) == (
        state / "tools" / f"{session_id}.json") == Path(tools_state_path(state, session_id))
    assert launcher.refusal_marker(str(state), session_id) == refusal_marker(
        tools_state_path(state, session_id))


def test_the_input_limit_is_the_packages() -> None:
    assert launcher.MAX_INPUT_BYTES == MAX_INPUT_BYTES


# -- parsing: exactly json.loads, or None for bad input ------------------------------------


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


INPUTS = [
    b'{"a":1}', b' {"a": [1, 2.5, -3e4, true, false, null, "x\\u00e9\\ud83d\\ude00"]} \n',
    b"", b"  ", b'{"a":1} x', b"NaN", b"[Infinity,-Infinity]", b'\xef\xbb\xbf{"a":1}',
    '{"a":"\u00e9"}'.encode("utf-16"), b'{"a":1,"a":2}', b"[" * 100_000, b'"\x01"',
    b'{"a":"\\ud800"}', b"123", b"1" * 5000, b"\xff", b'{"a":1}\x00', b'{"a" : 1 }\t\r\n',
    b"\x0c{}", b'{"a":1}\x0c', "{\"a\":\"\u2028\"}".encode(), b'{"a":"x\\"}',
]


@pytest.mark.parametrize("raw", INPUTS)
def test_the_launcher_parses_as_json_loads_does(raw: bytes) -> None:
    assert repr(launcher.parse_input(raw)) == repr(_json_or_none(raw))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                       max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from(["", " ", "\n", "\t\r\n "]), st.booleans())
def test_the_launcher_parses_any_json_as_json_loads_does(
    value: Any, space: str, ascii_only: bool
) -> None:
    raw = (space + json.dumps(value, ensure_ascii=ascii_only) + space).encode("utf-8")
    assert repr(launcher.parse_input(raw)) == repr(json.loads(raw))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_the_launcher_parses_any_bytes_as_json_loads_does(raw: bytes) -> None:
    assert repr(launcher.parse_input(raw)) == repr(_json_or_none(raw))


def test_input_over_the_limit_is_bad_input() -> None:
    padding = b" " * (launcher.MAX_INPUT_BYTES - 1)
    assert launcher.parse_input(b"{}" + padding) is None
    assert launcher.parse_input(b"{}" + padding[:-1]) == {}


# -- the triage -----------------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "LOOP_KILLER_STATE_DIR": str(tmp_path / "state")}


def _needs(env: dict[str, str], **fields: Any) -> bool:
    data = {"session_id": "s1", "transcript_path": "/p/s1.jsonl", **fields}
    return bool(launcher.needs_package(data, env))


def test_a_normal_stop_needs_nothing(env: dict[str, str]) -> None:
    assert not _needs(env, hook_event_name="Stop", stop_hook_active=False)
    assert not _needs(env, hook_event_name="Stop")
    assert not _needs(env, hook_event_name="Stop", stop_hook_active="true")
    assert not _needs(env, hook_event_name="Stop", stop_hook_active=1)
    assert _needs(env, hook_event_name="Stop", stop_hook_active=True)


@pytest.mark.parametrize("kind", ["file", "symlink", "dangling", "fifo", "folder"])
def test_anything_at_the_request_path_is_for_the_package(env: dict[str, str], kind: str,
                                                         tmp_path: Path) -> None:
    path = Path(launcher.request_path(env["LOOP_KILLER_STATE_DIR"], "s1"))
    path.parent.mkdir(parents=True)
    _plant(path, kind, tmp_path)
    assert _needs(env, hook_event_name="Stop", stop_hook_active=False)
    assert not _needs(env, hook_event_name="Stop", stop_hook_active=False, session_id="s2")


def test_a_waiting_mod_plan_is_for_the_package(env: dict[str, str]) -> None:
    outcomes = Path(env["LOOP_KILLER_STATE_DIR"]) / "outcomes"
    outcomes.mkdir(parents=True)
    (outcomes / "k.outcome").write_text("{}")
    (outcomes / ".k.plan.123.tmp").write_text("{}")
    assert not _needs(env, hook_event_name="Stop", stop_hook_active=False)
    (outcomes / "k.plan").write_text("{}")
    assert _needs(env, hook_event_name="Stop", stop_hook_active=False)


@pytest.mark.parametrize("event", ["PreToolUse", "UserPromptSubmit"])
@pytest.mark.parametrize("kind", ["file", "symlink", "fifo"])
def test_tool_events_need_the_package_only_with_a_history(env: dict[str, str], event: str,
                                                          kind: str, tmp_path: Path) -> None:
    """A person's prompt resets a session with counts; a PreToolUse needs the package only
    while a call of the session may be refused (its marker beside the counts)."""
    assert not _needs(env, hook_event_name=event, tool_name="Bash")
    path = Path(launcher.tools_path(env["LOOP_KILLER_STATE_DIR"], "s1"))
    if event == "PreToolUse":
        path.parent.mkdir(parents=True)
        path.write_text("{}")
        assert not _needs(env, hook_event_name=event, tool_name="Bash")
        path = Path(launcher.refusal_marker(env["LOOP_KILLER_STATE_DIR"], "s1"))
    path.parent.mkdir(parents=True, exist_ok=True)
    _plant(path, kind, tmp_path)
    assert _needs(env, hook_event_name=event, tool_name="Bash")
    assert not _needs(env, hook_event_name=event, tool_name="Bash", session_id="s2")


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure", "SubagentStop",
                                   "Notification", None, 3])
def test_other_events_always_run_the_package(env: dict[str, str], event: Any) -> None:
    assert _needs(env, hook_event_name=event)


@pytest.mark.parametrize("session_id", ["", "../x", "a/b", None, 7, "a" * 200])
def test_an_odd_session_id_is_left_to_the_package(env: dict[str, str], session_id: Any) -> None:
    assert _needs(env, hook_event_name="Stop", stop_hook_active=False, session_id=session_id)
    assert _needs(env, hook_event_name="PreToolUse", session_id=session_id)


@pytest.mark.parametrize("data", [None, [], [{"hook_event_name": "Stop"}], "Stop", 3, True])
def test_input_that_is_not_an_object_needs_nothing(env: dict[str, str], data: Any) -> None:
    assert not launcher.needs_package(data, env)


def _plant(path: Path, kind: str, tmp_path: Path) -> None:
    if kind == "file":
        path.write_text("{}")
    elif kind == "symlink":
        target = tmp_path / "elsewhere.json"
        target.write_text("{}")
        path.symlink_to(target)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "gone.json")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
