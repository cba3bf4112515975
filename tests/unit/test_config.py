"""Settings: one file, the environment over it, and a bad file that never stops anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from loop_killer.engine.rules import DEFAULT_THRESHOLDS, RULE_IDLE, RULE_SAME
from loop_killer.engine.run import RunDetector
from loop_killer.engine.tool_repeat import DEFAULT_IGNORED
from loop_killer.state.config import config_path, load_settings, parse_settings

GOOD = b"""
[rules]
same_reply_turns = 4
idle_turns = 10
similar = 0.75
tool_repeat_warn = 5
tool_repeat_block = 7
off = ["IDLE_TURNS"]

[tools]
ignore = ["default", "mcp__ci__*"]

[projects]
off = ["/home/me/scratch"]
"""


def test_no_file_and_no_environment_gives_the_documented_defaults():
    settings = parse_settings(None, {})
    assert settings.thresholds == DEFAULT_THRESHOLDS
    assert (settings.tool_repeat_warn, settings.tool_repeat_block) == (3, 4)
    assert settings.ignore_tools == DEFAULT_IGNORED
    assert settings.rules_off == frozenset() and settings.projects_off == ()
    assert settings.problems == ()
    assert set(settings.sources.values()) == {"default"}


def test_the_file_sets_every_threshold_and_says_where_each_came_from():
    settings = parse_settings(GOOD, {}, where="/s/config.toml")
    t = settings.thresholds
    assert (t.same_reply_turns, t.idle_turns, t.similar) == (4, 10, 0.75)
    assert (settings.tool_repeat_warn, settings.tool_repeat_block) == (5, 7)
    assert settings.rules_off == {RULE_IDLE} and t.off == {RULE_IDLE}
    assert settings.ignore_tools == DEFAULT_IGNORED | {"mcp__ci__*"}
    assert settings.projects_off == ("/home/me/scratch",)
    assert settings.sources["idle_turns"] == "/s/config.toml"
    assert settings.problems == ()


def test_the_environment_overrides_the_file_for_one_session():
    env = {"LOOP_KILLER_SAME_REPLY_TURNS": "5", "LOOP_KILLER_RULES_OFF": "SAME_REPLY_TURNS",
           "LOOP_KILLER_TOOL_REPEAT": "off", "LOOP_KILLER_IGNORE_TOOLS": "Read"}
    settings = parse_settings(GOOD, env)
    assert settings.thresholds.same_reply_turns == 5
    assert settings.sources["same_reply_turns"] == "$LOOP_KILLER_SAME_REPLY_TURNS"
    assert settings.rules_off == {RULE_SAME, "TOOL_REPEAT"}
    assert settings.ignore_tools == {"Read"}


@pytest.mark.parametrize("text,where", [
    (b"[rules\nsame_reply_turns = 4", "not valid TOML"),
    (b"[rules]\nsame_reply_turns = 1", "rules.same_reply_turns must be a whole number"),
    (b"[rules]\nsame_reply_turns = 'three'", "rules.same_reply_turns"),
    (b"[rules]\nsimilar = 1.5", "rules.similar must be a number from"),
    (b"[rules]\nidle_turns = true", "rules.idle_turns"),
    (b"[rules]\noff = 'IDLE_TURNS'", "rules.off must be a list of strings"),
    (b"[rules]\noff = ['NOPE']", "unknown rule to switch off: NOPE"),
    (b"rules = 3", "[rules] must be a table"),
    (b"[rules]\ntool_repeat_warn = 6\ntool_repeat_block = 5", "below tool_repeat_warn"),
    (b"\xff\xfe", "not valid TOML"),
])
def test_a_bad_file_keeps_the_defaults_and_says_what_is_wrong_and_where(text, where):
    settings = parse_settings(text, {}, where="/s/config.toml")
    assert settings.thresholds == DEFAULT_THRESHOLDS
    assert (settings.tool_repeat_warn, settings.tool_repeat_block) == (3, 4)
    assert any(where in problem for problem in settings.problems), settings.problems


def test_a_bad_environment_value_is_ignored_and_said():
    settings = parse_settings(None, {"LOOP_KILLER_IDLE_TURNS": "lots"})
    assert settings.thresholds.idle_turns == 6
    assert any("$LOOP_KILLER_IDLE_TURNS" in problem for problem in settings.problems)


def test_projects_switched_off_by_path_prefix_or_by_claude_codes_folder_name():
    settings = parse_settings(GOOD, {})
    assert settings.project_off(cwd="/home/me/scratch")
    assert settings.project_off(cwd="/home/me/scratch/deep/er")
    assert not settings.project_off(cwd="/home/me/scratchpad")
    assert settings.project_off(folder="-home-me-scratch")
    assert not settings.project_off(folder="-home-me-other")


def test_a_project_path_matches_at_a_folder_boundary_only():
    settings = parse_settings(b'[projects]\noff = ["/home/dev/proj"]', {})
    assert settings.project_off(cwd="/home/dev/proj")
    assert settings.project_off(cwd="/home/dev/proj/sub")
    assert not settings.project_off(cwd="/home/dev/proj-2")
    assert not settings.project_off(cwd="/home/dev/proj.old")
    # The folder name alone: -home-dev-proj-2 is /home/dev/proj-2 or /home/dev/proj/2.
    assert settings.project_off(folder="-home-dev-proj")
    assert not settings.project_off(folder="-home-dev-proj-2")
    # The real cwd, when known, is what counts.
    assert settings.project_off(cwd="/home/dev/proj/2", folder="-home-dev-proj-2")
    assert not settings.project_off(cwd="/home/dev/proj-2", folder="-home-dev-proj-2")


def test_the_last_cwd_of_a_transcript_tail_is_its_real_project_path():
    from loop_killer.state.config import transcript_cwd

    line = b'{"type":"user","cwd":"/home/dev/proj-2","message":{"content":"x"}}\n'
    nested = b'{"type":"user","toolUseResult":{"cwd":"/elsewhere"},"cwd":"/home/dev/a"}\n'
    assert transcript_cwd(None) == "" and transcript_cwd(b"") == ""
    assert transcript_cwd(line) == "/home/dev/proj-2"
    assert transcript_cwd(line + nested) == "/home/dev/a"  # the line's own, not a nested one
    assert transcript_cwd(line + b'{"type":"summary"}\n' + b'{"cwd":"/cut') == "/home/dev/proj-2"
    # A tool result quoting a line is text: its quotes are escaped, it is never taken.
    quoted = b'{"type":"user","message":{"content":"{\\"cwd\\":\\"/x\\"}"}}\n'
    assert transcript_cwd(line + quoted) == "/home/dev/proj-2"


@pytest.mark.parametrize("entries", [[""], ["  "], ["", "/home/me/scratch"]])
def test_an_empty_project_prefix_is_refused_not_everywhere(entries):
    text = b"[projects]\noff = " + repr(entries).replace("'", '"').encode()
    settings = parse_settings(text, {}, where="/s/config.toml")
    assert "" not in settings.projects_off and "  " not in settings.projects_off
    assert not settings.project_off(cwd="/home/dev/proj", folder="-home-dev-proj")
    assert any("projects.off" in p and "empty" in p for p in settings.problems), \
        settings.problems


@pytest.mark.parametrize("text,said", [
    (b"[rule]\nsame_reply_turns = 2", "unknown table [rule] (did you mean [rules]?)"),
    (b"[rules]\nsame_reply_turn = 2",
     "unknown key rules.same_reply_turn (did you mean rules.same_reply_turns?)"),
    (b"[projects]\nof = ['/x']", "unknown key projects.of"),
    (b"x = 1", "unknown key x"),
    (b"same_reply_turns = 2\n[rules]",
     "unknown key same_reply_turns (did you mean rules.same_reply_turns?)"),
    (b"[rules.more]\ny = 1", "unknown key rules.more"),
])
def test_misspelled_keys_and_tables_are_reported(text, said):
    settings = parse_settings(text, {}, where="/s/config.toml")
    assert settings.thresholds == DEFAULT_THRESHOLDS
    assert any(said in problem and problem.startswith("/s/config.toml: ")
               for problem in settings.problems), settings.problems


def test_an_unknown_name_is_shown_without_control_codes():
    settings = parse_settings(b'"\\u001b]0;x\\u0007\\u202e" = 1', {})
    assert settings.problems and not any(
        ch in problem for problem in settings.problems for ch in "\x1b\x07\u202e")


@pytest.mark.parametrize("text", [
    b"[rules]\noff = " + b"[" * 500 + b"]" * 500,
    b"x = " + b"[" * 500 + b"]" * 500,
    b"x = " + b"{a=" * 500 + b"1" + b"}" * 500,
    b"[rules]\noff = " + b"[" * 100_000,
], ids=["rules.off", "top-level", "inline-tables", "unclosed"])
def test_arrays_nested_deep_are_a_reported_problem_not_a_crash(text):
    settings = parse_settings(text, {}, where="/s/config.toml")
    assert settings.thresholds == DEFAULT_THRESHOLDS and settings.rules_off == frozenset()
    assert any(p.startswith("/s/config.toml: not valid TOML") for p in settings.problems), \
        settings.problems


def test_the_file_is_read_safely(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    assert load_settings(state, {}).problems == ()
    config_path(state).write_bytes(GOOD)
    assert load_settings(state, {}).thresholds.idle_turns == 10
    config_path(state).unlink()
    os.mkfifo(config_path(state))  # never blocks on a FIFO
    settings = load_settings(state, {})
    assert settings.thresholds == DEFAULT_THRESHOLDS and "cannot be read" in settings.problems[0]
    config_path(state).unlink()
    (tmp_path / "elsewhere.toml").write_bytes(GOOD)
    config_path(state).symlink_to(tmp_path / "elsewhere.toml")
    assert "a symlink" in load_settings(state, {}).problems[0]


def test_the_judge_uses_the_thresholds():
    from loop_killer.engine.reader import TranscriptReader
    from transcripts import Transcript

    settings = parse_settings(b"[rules]\nsame_reply_turns = 4\noff = ['IDLE_TURNS']", {})
    t = Transcript()
    t.goal()
    t.reply("ok")
    t.loop(["I am still working on the auth tests."] * 9)
    reader = TranscriptReader("s", detector=RunDetector("s", thresholds=settings.thresholds))
    fired = [d for step in reader.feed(t.data()) for d in step.detections]
    assert [(d.rule, d.count) for d in fired] == [(RULE_SAME, 4), (RULE_SAME, 4)]


# -- issue 29, item 7: projects.off is one rule (Settings.project_off) everywhere -----------

OFF = b'[projects]\noff = ["/home/dev/proj"]\n'


@pytest.mark.parametrize("cwd,folder,off", [
    ("/home/dev/proj", "-home-dev-proj", True),
    ("/home/dev/proj/", "-home-dev-proj", True),
    ("/home/dev/proj/sub", "-home-dev-proj-sub", True),
    ("/home/dev/proj/sub/deeper", "-home-dev-proj-sub-deeper", True),
    ("/home/dev/proj/2", "-home-dev-proj-2", True),
    ("/home/dev/proj-2", "-home-dev-proj-2", False),
    ("/home/dev-proj", "-home-dev-proj", False),  # the folder's name says off: the cwd not
    ("/home/dev/proj.old", "-home-dev-proj-old", False),
    ("/home/dev", "-home-dev", False),
    # Not known yet (the first lines carry no cwd): the folder's name alone, its own only.
    ("", "-home-dev-proj", True),
    ("", "-home-dev-proj-sub", False),
    ("", "", False),
])
def test_the_one_rule_for_a_session_by_its_cwd_else_its_folder(cwd, folder, off):
    settings = parse_settings(OFF, {})
    assert settings.project_off(cwd=cwd, folder=folder) is off


def test_the_hooks_ask_the_one_rule_with_their_inputs_cwd_then_their_folder():
    settings = parse_settings(OFF, {})
    path = "/h/.claude/projects/{}/s.jsonl".format
    assert settings.hook_off({"cwd": "/home/dev/proj/sub", "transcript_path": path("x")})
    assert not settings.hook_off({"cwd": "/home/dev-proj",
                                  "transcript_path": path("-home-dev-proj")})
    assert settings.hook_off({"transcript_path": path("-home-dev-proj")})  # no cwd given
    assert not settings.hook_off({"cwd": 3, "transcript_path": 4})
    assert not settings.hook_off(None) and not settings.hook_off([])
    assert not parse_settings(None, {}).hook_off({"cwd": "/home/dev/proj"})


def test_a_lines_cwd_is_its_own_top_level_one():
    from loop_killer.state.config import line_cwd

    assert line_cwd(b'{"type":"user","cwd":"/home/dev/proj/sub"}') == "/home/dev/proj/sub"
    assert line_cwd(b'{"type":"summary","summary":"x","leafUuid":"u"}') == ""
    assert line_cwd(b'{"type":"user","toolUseResult":{"cwd":"/else"}}') == ""
    assert line_cwd(b'{"cwd":"/cut') == "" and line_cwd(b"[1]") == ""
    assert line_cwd(b'{"cwd":7}') == ""


def test_the_cwd_known_already_is_taken_without_parsing_and_a_new_one_is_found():
    from loop_killer.state.config import transcript_cwd

    def user(cwd: str) -> bytes:
        return b'{"type":"user","cwd":"' + cwd.encode() + b'","message":{"content":"x"}}\n'

    assert transcript_cwd(user("/a") + user("/a"), "/a") == "/a"
    assert transcript_cwd(user("/a") + user("/a/sub"), "/a") == "/a/sub"
    assert transcript_cwd(b'{"type":"summary"}\n', "/a") == ""  # no cwd in these lines
    # A line cut inside its cwd says nothing: the line before it decides.
    assert transcript_cwd(user("/b") + b'{"cwd":"/a', "/a") == "/b"
