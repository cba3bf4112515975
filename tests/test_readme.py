"""The README's commands are what CI runs: keep them from drifting apart."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shell_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]


def test_ci_runs_exactly_the_readme_test_command():
    blocks = _shell_blocks((ROOT / "README.md").read_text())
    test_command = next(block for block in blocks if "pytest" in block)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_readme_starts_with_the_two_newcomer_commands():
    text = (ROOT / "README.md").read_text()
    blocks = _shell_blocks(text)
    setup, test = blocks[0], blocks[1]
    # Set-up first: pipx, which works where `pip install` is refused (PEP 668); the commands
    # it runs are the package's own. (tests/test_install_pipx.py runs this block.)
    assert setup.startswith("pipx install --force .")  # a second paste reinstalls
    # By their full path: pipx's folder is not on a fresh account's PATH yet.
    assert "&& ~/.local/bin/loop-killer install && ~/.local/bin/loop-killer-watch" in setup
    # Before it, in one line, what to do where pipx is missing.
    quick_start = text[text.index("## Quick start"):text.index(setup)]
    (told,) = [part for part in quick_start.split("\n\n") if "apt install pipx" in part]
    assert "\n" not in told.strip(), told
    scripts = (ROOT / "pyproject.toml").read_text()
    assert "\nloop-killer = " in scripts and "\nloop-killer-watch = " in scripts
    # Right after it, the fallback without pipx: plain pip in a virtual environment.
    between = text[text.index(setup) + len(setup):text.index(test)]
    assert "python3 -m venv" in between and "/bin/pip install ." in between
    assert "/bin/loop-killer install" in between and "/bin/loop-killer-watch" in between
    # Then the test command, early in the README, after the line that makes a virtual
    # environment where pip refuses (PEP 668): CI runs the command itself (above).
    assert "pytest" in test and "pip install" in test
    assert text.index(test) < len(text) // 3
    just_before = text[:text.index(test)].rsplit("```sh", 1)[0].rstrip().rsplit("\n\n", 1)[-1]
    assert "externally-managed-environment" in just_before
    assert "`python3 -m venv .venv && . .venv/bin/activate`" in just_before


def test_the_launchers_notice_gives_the_readmes_install_commands() -> None:
    """When the hook cannot find the package it says what to run: the Quick start's."""
    setup = _shell_blocks((ROOT / "README.md").read_text())[0]
    launcher = (ROOT / "plugin" / "hooks" / "loop_killer_launch.py").read_text()
    told = re.search(r'folder run: (.*?)"', launcher)
    assert told is not None and setup.startswith(told[1] + " && ")


def test_the_e2e_hint_names_the_folder_the_install_script_and_the_tests_use() -> None:
    text = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "install-claude-code").read_text()
    assert 'CACHE="${LOOP_KILLER_CLAUDE_CACHE:-$HOME/.cache/loop-killer/claude-code}"' in script
    assert "`$LOOP_KILLER_CLAUDE_CACHE`, else `$HOME/.cache/loop-killer/claude-code/`" in text
