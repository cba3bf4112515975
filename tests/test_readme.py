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
    assert "loop-killer-watch" in blocks[0] and "pip install" in blocks[0]
    assert "pytest" in blocks[1] and "pip install" in blocks[1]
    assert text.index(blocks[1]) < len(text) // 3
