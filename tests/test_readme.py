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
    # it runs are the package's own.
    assert setup.startswith("pipx install .")
    assert "loop-killer install" in setup and "loop-killer-watch" in setup
    scripts = (ROOT / "pyproject.toml").read_text()
    assert "\nloop-killer = " in scripts and "\nloop-killer-watch = " in scripts
    # Right after it, the fallback without pipx: plain pip in a virtual environment.
    between = text[text.index(setup) + len(setup):text.index(test)]
    assert "python3 -m venv" in between and "/bin/pip install ." in between
    assert "/bin/loop-killer install" in between and "/bin/loop-killer-watch" in between
    # Then the test command, early in the README.
    assert "pytest" in test and "pip install" in test
    assert text.index(test) < len(text) // 3
