"""Tool-hook test fixtures. Every test already has its own HOME / CLAUDE_CONFIG_DIR
(tests/conftest.py), so the state folder is ``$CLAUDE_CONFIG_DIR/loop-killer``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state(isolated_home: Path) -> Path:
    """loop-killer's state folder for this test."""
    return isolated_home / ".claude" / "loop-killer"
