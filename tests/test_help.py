"""Each command's --help names both kinds of loop and what is done about each."""

from __future__ import annotations

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
