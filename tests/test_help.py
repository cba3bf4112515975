"""Each command's --help names both kinds of loop and what is done about each, lists only
the commands a person runs, names the default folders as a person knows them, and keeps
hyphenated words whole."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["loop_killer.cli", "loop_killer.watch.main"])
def test_help_describes_re_prompt_and_tool_repeat_loops(module: str) -> None:
    code = f"import sys; from {module} import main; sys.exit(main(['--help']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps to the terminal's width
    assert "re-prompt loop" in text and "tool-repeat loop" in text
    assert "warn" in text and "refuse" in text  # what happens to a tool-repeat loop
    assert "stop" in text and "goal" in text  # ... and to a re-prompt loop


def _help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
          command: str) -> str:
    """``loop-killer COMMAND --help`` (``loop-killer-watch --help`` for ``watch``)."""
    from loop_killer import cli
    from loop_killer.watch import main as watch

    monkeypatch.setattr(sys, "argv", ["loop-killer"])  # (cli.main sets it)
    with pytest.raises(SystemExit) as ended:
        if command == "watch":
            watch.main(["--help"])
        else:
            cli.main([*command.split(), "--help"])
    assert ended.value.code == 0
    return capsys.readouterr().out


def _every_help() -> list[str]:
    from loop_killer.cli import COMMANDS

    return ["", *COMMANDS, "watch"]


def test_the_plugins_own_command_is_not_listed_but_still_runs(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _help(capsys, monkeypatch, "")
    commands = re.findall(r"^ {2,}(\w+) ", listed, re.MULTILINE)
    assert {"status", "clear", "config", "install", "doctor", "scan", "top"} <= set(commands)
    assert "hook" not in commands and "{" not in listed  # (nor in a list of choices)
    assert "run the hook for the event on stdin" in _help(capsys, monkeypatch, "hook")


@pytest.mark.parametrize("command", ["status", "clear", "config", "scan", "top", "watch"])
def test_default_folders_are_named_as_a_person_knows_them(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    text = " ".join(_help(capsys, monkeypatch, command).split())
    if "--root" in text:  # ~/.claude/projects first; where CLAUDE_CONFIG_DIR moves it
        assert "(default: ~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects)" in text
    if "--state-dir" in text:  # and every variable that moves the state folder
        assert ("(default: ~/.claude/loop-killer, or $CLAUDE_CONFIG_DIR/loop-killer; "
                "$LOOP_KILLER_STATE_DIR overrides both)") in text
    assert "--root" in text or "--state-dir" in text


@pytest.mark.parametrize("command", _every_help())
def test_help_never_breaks_a_word_at_its_hyphen(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    """argparse wraps at hyphens ("loop-" / "killer"); at every width, no line ends in
    the middle of a hyphenated word."""
    for columns in range(40, 121, 3):
        monkeypatch.setenv("COLUMNS", str(columns))
        text = _help(capsys, monkeypatch, command)
        broken = [line for line in text.splitlines() if re.search(r"\w-$", line)]
        assert not broken, f"at {columns} columns: {broken}"
        assert "loop-killer" in " ".join(text.split())
