"""Hook test fixtures. Every test already has its own HOME / CLAUDE_CONFIG_DIR, outside any
tmux or screen (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def own_home(isolated_home: Path) -> Path:
    """This test's HOME: the suite-wide isolation (tests/conftest.py) already made it."""
    return isolated_home


@pytest.fixture
def state(own_home: Path) -> Path:
    """loop-killer's state folder for this test (``$CLAUDE_CONFIG_DIR/loop-killer``)."""
    return own_home / ".claude" / "loop-killer"
